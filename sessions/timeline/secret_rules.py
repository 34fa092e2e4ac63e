"""What is secret before a frame is read: the rules a sharer adds to the built-in ones, and the secret
values of a session's configuration (``sessions.timeline.redaction`` hunts for them in every frame)."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from sessions.timeline.names import looks_secret

__all__ = ["JSON_PATH", "MIN_SECRET", "URL_PASSWORD", "Rules", "config_secrets", "path_parts"]

# A value shorter than this is not hunted for everywhere: "1" or "abc" would mask half the timeline.
MIN_SECRET = 6
# scheme://user:password@host
URL_PASSWORD = re.compile(
    r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s/:@\"']*:)(?P<password>[^\s@/\"']+)(?=@)", re.I
)
MAX_PATTERNS = 20
MAX_PATTERN_CHARS = 200


@dataclass
class Rules:
    """What a sharer adds to the built-in rules."""

    names: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: Any) -> Rules:
        data = data if isinstance(data, dict) else {}

        def strings(key: str) -> list[str]:
            values = data.get(key)
            return [str(v).strip() for v in values if str(v).strip()] if isinstance(values, list) else []

        return cls(names=strings("names"), paths=strings("paths"), patterns=strings("patterns"))

    def to_dict(self) -> dict[str, list[str]]:
        return {"names": self.names, "paths": self.paths, "patterns": self.patterns}

    def problems(self) -> list[str]:
        """What is wrong with the sharer's rules (a pattern that is not a regular expression)."""
        found = []
        # Every pattern runs over every frame a share shows: keep them few and short.
        if len(self.patterns) > MAX_PATTERNS or any(len(p) > MAX_PATTERN_CHARS for p in self.patterns):
            found.append(f"at most {MAX_PATTERNS} patterns of at most {MAX_PATTERN_CHARS} characters")
        for pattern in self.patterns:
            if problem := pattern_problem(pattern):
                found.append(f"{pattern!r} is not a regular expression: {problem}")
        for path in self.paths:
            if not JSON_PATH.fullmatch(path):
                found.append(
                    f"{path!r} is not a JSON path like params.arguments.password or result.content[*].text"
                )
        return found


def pattern_problem(pattern: str) -> str | None:
    """Why a person's regular expression is refused, or None: one Python cannot compile, or one it warns
    will change meaning (``[[`` may become a nested set), which is refused before it is stored."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError, FutureWarning) as exc:
            return str(exc)
    return None


JSON_PATH = re.compile(r"[A-Za-z0-9_$-]+(?:\[\*\]|\[[0-9]+\])?(?:\.[A-Za-z0-9_$-]+(?:\[\*\]|\[[0-9]+\])?)*")


def path_parts(path: str) -> list[str]:
    """params.content[*].text → ["params", "content", "*", "text"]."""
    parts: list[str] = []
    for piece in path.split("."):
        name, _, index = piece.partition("[")
        parts.append(name)
        if index:
            parts.append(index.rstrip("]"))
    return parts


def _arg_secrets(args: list[Any]) -> list[str]:
    """Values of secret-looking options: ``--token=x``, ``--api-key x``."""
    found = []
    words = [str(a) for a in args]
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if not word.startswith("-") or not looks_secret(name.lstrip("-")):
            continue
        if eq:
            found.append(value)
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            found.append(words[i + 1])
    return found


def config_secrets(config: Any) -> list[str]:
    """The secret values of a session's configuration, to be hunted for everywhere."""
    if not isinstance(config, dict):
        return []
    found: list[str] = []
    marked = {str(n) for n in config.get("secret_env") or []}
    env: dict[str, Any] = config["env"] if isinstance(config.get("env"), dict) else {}
    found += [str(v) for k, v in env.items() if k in marked or looks_secret(str(k))]
    found += [str(v) for v in env.values() if URL_PASSWORD.search(str(v))]  # DATABASE_URL with a password
    headers: dict[str, Any] = config["headers"] if isinstance(config.get("headers"), dict) else {}
    found += [str(v) for k, v in headers.items() if looks_secret(str(k))]
    found += [str(config.get("bearer_token") or "")]
    url = str(config.get("url") or "")
    found += [v for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=False) if looks_secret(k)]
    found += [m["password"] for text in [url, *map(str, env.values())] for m in URL_PASSWORD.finditer(text)]
    found += _arg_secrets(list(config.get("args") or []))
    # Longest first, so a secret that contains another is masked whole.
    return sorted({s for s in found if len(s) >= MIN_SECRET}, key=len, reverse=True)
