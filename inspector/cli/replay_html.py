"""``--report FILE.html``: a replay's report as one self-contained page (no script, its styles inline),
rendered from the templates the web's replay view shows (``templates/replay/``).

Django's template engine runs here on its own: no project settings, no apps, no database; only what
its escaping and number formatting read is configured, and only in a process that has no settings yet
(the CLI's). Everything a server sent is escaped by the engine's autoescape.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["html_report"]

# templates/ and static/: inside the package when installed from a wheel, at the top of a checkout otherwise.
_PACKAGE = Path(__file__).resolve().parent.parent
RESOURCES = _PACKAGE if (_PACKAGE / "templates").is_dir() else _PACKAGE.parent
STYLESHEETS = ("app.css", "replay.css")


@cache
def _engine() -> Any:
    from django.conf import settings
    from django.template import Engine

    if not settings.configured:
        # The engine formats numbers through settings: the defaults, without translation machinery.
        settings.configure(USE_I18N=False)
    return Engine(dirs=[str(RESOURCES / "templates")], autoescape=True)


def _css() -> str:
    return "\n".join((RESOURCES / "static" / "inspector" / name).read_text() for name in STYLESHEETS)


def html_report(data: dict[str, Any]) -> str:
    """The page for a replay's data (``sessions.replay.summary`` with recording, target and notes)."""
    from django.template import Context

    from sessions.replay import for_page

    template = _engine().get_template("replay/report.html")
    return str(template.render(Context({"replay": for_page(data), "css": _css()})))
