"""Schema verdicts: received messages checked against the negotiated revision, via mcp-types.

Imported only when validation is asked for: mcp-types takes about 0.35 s to import. What mcp-types
has no model for (the tasks of 2025-11-25) is held to the spec's published JSON schema (``_published``).
"""

from __future__ import annotations

import functools
from typing import Any, get_args

import pydantic
from mcp_types import methods

from . import _published
from ._frames import Verdict

__all__ = ["check_definition", "check_result", "check_server_notification", "check_server_request"]

_MAX_ERRORS = 5


def _describe(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors()[:_MAX_ERRORS]:
        where = ".".join(str(p) for p in error["loc"]) or "(root)"
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - _MAX_ERRORS
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _validate(model: type[pydantic.BaseModel], body: dict[str, Any]) -> None:
    """``model.model_validate(body, by_name=False)``, without the wrapper that costs as much as
    validating a log message (a flood checks one per frame)."""
    model.__pydantic_validator__.validate_python(body, by_name=False)


def _unknown(kind: str, method: str, version: str) -> Verdict:
    return Verdict("not-in-revision", "warning", f"{kind} {method!r} is not defined in protocol {version}")


def check_server_request(method: str, version: str, params: Any) -> list[Verdict]:
    surface = methods.SERVER_REQUESTS.get((method, version))
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": method}
    if params is not None:
        body["params"] = params
    if surface is None:
        published = _published.request_definition(version, method)
        if published is not None:
            return _published.check(version, published, body, f"{method} request")
        return [_unknown("request", method, version)]
    try:
        _validate(surface, body)
    except pydantic.ValidationError as exc:
        return [Verdict("schema", "error", f"{method} request does not match {version}: {_describe(exc)}")]
    return []


def check_server_notification(method: str, version: str, params: Any) -> list[Verdict]:
    surface = methods.SERVER_NOTIFICATIONS.get((method, version))
    by_params = _params_validator(surface, method) if surface is not None else None
    if by_params is not None and isinstance(params, dict):
        try:
            by_params.validate_python(params, by_name=False)
            return []
        except pydantic.ValidationError:
            pass  # the whole notification's error says where, as it always has
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    if surface is None:
        published = _published.request_definition(version, method)
        if published is not None:
            return _published.check(version, published, body, f"{method} notification")
        return [_unknown("notification", method, version)]
    try:
        _validate(surface, body)
    except pydantic.ValidationError as exc:
        return [
            Verdict("schema", "error", f"{method} notification does not match {version}: {_describe(exc)}")
        ]
    return []


@functools.cache
def _params_validator(surface: type[pydantic.BaseModel], method: str) -> Any:
    """The validator of a notification's params model, when the notification is nothing but its
    ``jsonrpc``, its ``method`` (that one) and required params of that model: then the params pass
    exactly when the whole notification does, in half the time (a flood checks one per frame)."""
    fields = surface.model_fields
    decorators = surface.__pydantic_decorators__
    params = fields.get("params")
    model = params.annotation if params is not None else None
    if (
        set(fields) != {"jsonrpc", "method", "params"}
        or get_args(fields["jsonrpc"].annotation) != ("2.0",)
        or get_args(fields["method"].annotation) != (method,)
        or params is None
        or not params.is_required()
        or not (isinstance(model, type) and issubclass(model, pydantic.BaseModel))
        or decorators.model_validators
        or decorators.field_validators
    ):
        return None
    return model.__pydantic_validator__


def check_result(method: str, version: str, result: Any) -> list[Verdict]:
    if (method, version) not in methods.SERVER_RESULTS:
        published = _published.result_definition(version, method)
        if published is not None:
            return _published.check(version, published, result, f"{method} result")
        return []  # a non-spec method: its result has no schema to hold it to
    if not isinstance(result, dict):
        return [Verdict("schema", "error", f"{method} result is not an object")]
    try:
        methods.validate_server_result(method, version, result)
    except pydantic.ValidationError as exc:
        return [Verdict("schema", "error", f"{method} result does not match {version}: {_describe(exc)}")]
    return []


def check_definition(name: str, version: str, value: Any, what: str) -> list[Verdict]:
    """Hold a value to one definition of the published schema (e.g. ``CreateTaskResult``)."""
    if not _published.has(version, name):
        return []
    return _published.check(version, name, value, what)
