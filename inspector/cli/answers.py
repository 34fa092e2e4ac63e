"""How the CLI answers a server's questions: ``--elicitation`` and ``--sampling`` policies.

Nobody sits at a one-shot command to answer ``elicitation/create`` or ``sampling/createMessage``, so
the command line says how to answer, and declaring the capability goes with it:

- ``--elicitation accept-defaults``: accept, with every property's ``default``; a required property
  without one gets the simplest value its schema allows (the first enum value, the minimum or 0,
  ``false``, the shortest string, a placeholder for the email, uri, date and date-time formats), and
  when no value can be made up the request is declined. Declares form mode only: a URL cannot be
  visited from here.
- ``--elicitation decline`` / ``cancel``: that action, for form and URL mode alike.
- ``--sampling reject``: a JSON-RPC error (-1, as a person's refusal is answered).
- ``@FILE`` (either option): the JSON object in FILE is the reply to every such request, checked
  when the command line is read (an ``ElicitResult`` needs an ``action``; a ``CreateMessageResult``
  ``role``, ``content`` and ``model``).

No policy sees a request the engine refuses first: an undeclared mode, tool-enabled sampling, or a
form whose ``requestedSchema`` nests objects (answered -32602, never accepted with made-up values).

The same answers serve requests on a reply stream, on the standalone GET stream, and those
embedded in a 2026-07-28 ``input_required`` result (the engine retries with them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessions.engine import PendingRequest, ServerRequestHandler

__all__ = [
    "ELICITATION_POLICIES",
    "SAMPLING_POLICIES",
    "Policy",
    "PolicyError",
    "ReplyFileError",
    "defaults_content",
    "handlers",
    "read_policy",
]

ELICITATION_POLICIES = ("accept-defaults", "decline", "cancel")
SAMPLING_POLICIES = ("reject",)
ELICIT_ACTIONS = ("accept", "decline", "cancel")
# Placeholders for the string formats elicitation schemas may name.
FORMAT_PLACEHOLDERS = {
    "email": "user@example.com",
    "uri": "https://example.com/",
    "date": "1970-01-01",
    "date-time": "1970-01-01T00:00:00Z",
}


class PolicyError(ValueError):
    """The policy is not one the option knows."""


class ReplyFileError(PolicyError):
    """The ``@FILE`` reply cannot be read or is not a reply."""


@dataclass(frozen=True)
class Policy:
    """One answering policy: a named one, or a reply read from a file (``kind == "file"``)."""

    kind: str
    reply: dict[str, Any] | None = None

    @property
    def url_mode(self) -> bool:
        """Whether this policy can answer URL-mode elicitation (only accept-defaults cannot)."""
        return self.kind != "accept-defaults"


def read_policy(text: str, option: str, names: tuple[str, ...]) -> Policy:
    """Parse ``NAME`` or ``@FILE`` for ``option``; raise PolicyError saying what is wrong."""
    if not text.startswith("@"):
        if text not in names:
            raise PolicyError(f"{option} must be one of {', '.join(names)} or @FILE, not {text!r}")
        return Policy(text)
    path = text[1:]
    from inspector.cli.files import read_json

    reply = read_json(path, f"{option} file", ReplyFileError)
    if not isinstance(reply, dict):
        raise ReplyFileError(f"{option} file {path} must hold a JSON object (the reply)")
    if option == "--elicitation":
        if reply.get("action") not in ELICIT_ACTIONS:
            raise ReplyFileError(f'{option} file {path}: "action" must be one of {", ".join(ELICIT_ACTIONS)}')
        if "content" in reply and not isinstance(reply["content"], dict):
            raise ReplyFileError(f'{option} file {path}: "content" must be an object')
    else:
        missing = [key for key in ("role", "content", "model") if key not in reply]
        if missing:
            raise ReplyFileError(f"{option} file {path}: a CreateMessageResult needs {', '.join(missing)}")
    return Policy("file", reply)


_NO_VALUE = object()


def _number(prop: dict[str, Any], integer: bool) -> Any:
    low, high = prop.get("minimum"), prop.get("maximum")
    low = low if isinstance(low, int | float) and not isinstance(low, bool) else None
    high = high if isinstance(high, int | float) and not isinstance(high, bool) else None
    value: float = 0
    if low is not None and value < low:
        value = math.ceil(low) if integer else low
    if high is not None and value > high:
        value = math.floor(high) if integer else high
    if (low is not None and value < low) or (high is not None and value > high):
        return _NO_VALUE
    return int(value) if integer else value


def _choices(prop: dict[str, Any]) -> list[Any] | None:
    """The values an enum-like schema allows (``enum``, or ``oneOf``/``anyOf`` of ``const``)."""
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list):
            return [o["const"] for o in options if isinstance(o, dict) and "const" in o]
    return None


def simplest_value(prop: Any) -> Any:
    """The simplest value a primitive elicitation property allows, or ``_NO_VALUE``."""
    if not isinstance(prop, dict):
        return _NO_VALUE
    choices = _choices(prop)
    if choices is not None and prop.get("type") != "array":
        return choices[0] if choices else _NO_VALUE
    kind = prop.get("type")
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return _number(prop, kind == "integer")
    if kind == "string":
        text = FORMAT_PLACEHOLDERS.get(str(prop.get("format")), "")
        shortest = prop.get("minLength")
        if isinstance(shortest, int) and len(text) < shortest:
            text = "x" * shortest
        return text
    if kind == "array":
        items = _choices(prop.get("items") or {}) or []
        count = prop.get("minItems", 0)
        if not isinstance(count, int) or count > len(items):
            return _NO_VALUE
        return items[:count]
    return _NO_VALUE


def defaults_content(schema: Any) -> dict[str, Any] | None:
    """An elicitation form's content from its schema's defaults, or ``None`` to decline.

    Every property with a ``default`` gets it; a required one without gets ``simplest_value``;
    an optional one without is left out.
    """
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    content: dict[str, Any] = {}
    for name, prop in properties.items():
        if isinstance(prop, dict) and "default" in prop:
            content[name] = prop["default"]
        elif name in required:
            value = simplest_value(prop)
            if value is _NO_VALUE:
                return None
            content[name] = value
    return content


def _elicit(policy: Policy, params: dict[str, Any]) -> dict[str, Any]:
    from sessions.engine import McpError

    mode = params.get("mode", "form")
    if mode == "url" and not policy.url_mode:
        raise McpError(-32601, "elicitation mode 'url' was not declared (--elicitation accept-defaults)")
    if policy.reply is not None:
        return dict(policy.reply)
    if policy.kind != "accept-defaults":
        return {"action": policy.kind}
    content = defaults_content(params.get("requestedSchema"))
    return {"action": "decline"} if content is None else {"action": "accept", "content": content}


def handlers(elicitation: Policy | None, sampling: Policy | None) -> dict[str, ServerRequestHandler]:
    """Engine handlers answering by the given policies (without one, the capability is not declared
    and the engine refuses the request itself)."""
    from sessions.engine import McpError

    answering: dict[str, ServerRequestHandler] = {}
    if elicitation is not None:

        async def elicit(request: PendingRequest) -> dict[str, Any]:
            return _elicit(elicitation, request.params)

        answering["elicitation/create"] = elicit
    if sampling is not None:

        async def sample(request: PendingRequest) -> dict[str, Any]:
            if sampling.reply is None:
                raise McpError(-1, "sampling rejected by --sampling reject")
            return dict(sampling.reply)

        answering["sampling/createMessage"] = sample
    return answering
