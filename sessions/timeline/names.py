"""Names that look secret, and how ``Redactor.plain`` sees at a glance that no name rule can change a text.

The rules themselves are in redaction.py; this is what they know of names (``looks_secret``, the words
every secret name holds) and the quick look that proves a text holds no name they would mask.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "CASELESS",
    "NAME_WORDS",
    "NOT_SECRET_NAME",
    "SECRET_NAME",
    "SPELLING_ESCAPE",
    "looks_secret",
    "plain_name",
    "url_password",
]

# Names whose values are credentials. Wider than the config form's masking: a share goes to other people.
SECRET_NAME = re.compile(
    r"token|secret|passw|pwd|api[-_]?key|apikey|private[-_]?key|access[-_]?key|auth|credential|"
    r"signature|cookie|session[-_]?id|sessionid|bearer|dsn|^key$|[-_]key$",
    re.IGNORECASE,
)
# Names that match SECRET_NAME but hold no secret: protocol fields, counts, OAuth metadata, authors.
NOT_SECRET_NAME = re.compile(
    r"progress[-_]?token|max[-_]?tokens|\w*tokens|\w*token[-_]?(count|type|usage)|author|"
    r"authori[sz]ation[-_]?(servers?|endpoint|url|uri)",
    re.IGNORECASE,
)
# What a name holds, lower-cased, whenever SECRET_NAME finds it (a test keeps the two in step): text
# without any of these words has no name the three rules above would mask.
NAME_WORDS = (
    "token", "secret", "passw", "pwd", "key", "auth", "credential", "signature", "cookie", "session",
    "bearer", "dsn",
)  # fmt: skip


@functools.lru_cache(maxsize=4096)  # the same names come back in every frame
def looks_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) and not NOT_SECRET_NAME.fullmatch(name)


# Characters that match an ASCII letter of a name when case is ignored, though they lower-case to none.
CASELESS = "\u0130\u0131\u017f\u212a"
# A JSON escape that may spell a name or a secret: ``\\/`` (in a URL), or a ``\\u`` of an ASCII character,
# of one of those four, or of nothing (then no escape).
SPELLING_ESCAPE = re.compile(r"\\(?:/|u(?:00[0-7]|013[01]|017[fF]|212[aA]|(?![0-9a-fA-F]{4})))")
_RUN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_RUN_AHEAD = re.compile(r"[A-Za-z0-9_.-]*")
_URL_TAIL = re.compile(r"[^\s/\"']*")  # what may stand between a URL's :// and the @ after its password
_LONGEST_RUN = 200  # name characters before a name word that ``plain_name`` looks back over


def url_password(text: str) -> bool:
    """Whether ``text`` may hold a URL with a password (redaction's ``URL_PASSWORD``, escaped in a JSON
    string): an ``@`` after a ``://``, before any space, slash or quote."""
    at = text.find("://")
    while at >= 0:
        if text.find("@", at + 3, _URL_TAIL.match(text, at + 3).end()) >= 0:  # type: ignore[union-attr]
            return True
        at = text.find("://", at + 3)
    return False


def plain_name(text: str, start: int, end: int) -> int:
    """Where the run of the name word at ``text[start:end]`` ends, if the word is in no name a rule
    masks (``Redactor.plain``); -1 if it might be.

    As text: the rules take a name from a run of name characters (``_RUN``) that a ``=`` or ``:``
    follows, or that stands between quotes; the run around the word must be neither followed by
    ``=``, ``:`` or an escape, nor start after one (an escape's letter would join the run), nor be a
    quoted secret name. As JSON: the string around the word, without escapes, is no secret name (as a
    key; as a value, the run's check holds for the text rules).
    """
    head = text[max(0, start - _LONGEST_RUN) : start]
    first = start - (len(head) - len(head.rstrip(_RUN)))
    if first == start - _LONGEST_RUN:  # a run this long may go on: say it might be
        return -1
    last = _RUN_AHEAD.match(text, end).end()  # type: ignore[union-attr]  # it matches "" at least
    before, after = text[first - 1 : first], text[last : last + 1]
    if after in ("=", ":", "\\") or before == "\\":
        return -1
    if before == after == '"':  # the run is the whole string between these quotes (a key, mostly)
        return -1 if text[first - 2 : first - 1] == "\\" or looks_secret(text[first:last]) else last
    opening, closing = text.rfind('"', 0, first), text.find('"', last)
    if opening < 0 or closing < 0:  # in no JSON string (then the text is no JSON), between no quotes
        return last
    string = text[opening + 1 : closing]
    if "\\" in string or text[opening - 1 : opening] == "\\":
        return -1
    return -1 if looks_secret(string) or looks_secret(text[first:last]) else last
