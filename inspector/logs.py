"""How the app's log lines are shaped, beyond what Django and the standard library do."""

from __future__ import annotations

import logging

__all__ = ["ClientErrorsInOneLine"]


class ClientErrorsInOneLine(logging.Filter):
    """Log a request refused with a 4xx as its one line, without the exception's traceback.

    Django logs a view's ``BadRequest``, ``PermissionDenied`` or ``SuspiciousOperation`` with the
    exception attached, which handlers print as a traceback: noise for what is the client's mistake,
    and already said in the line (the reason and the path). A 5xx keeps its traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500 and record.exc_info:
            record.exc_info, record.exc_text = None, None
        return True
