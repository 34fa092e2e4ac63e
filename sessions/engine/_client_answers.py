"""The client's answers to the server's requests: one for each, by a client that declared what it
answers with, in the shape the request calls for (ping: empty; roots: file:// URIs).
"""

from __future__ import annotations

from typing import Any

from ._client_conduct import ClientConduct, ServerRequest, id_problem, valid_id
from ._client_wire import check_meta, schema_verdicts, since
from ._frames import Frame, Verdict
from ._tasks import augmentable

__all__ = ["check_response"]

# The client capability an answer to each server request shows the client has.
CLIENT_CAPABILITY_OF = {
    "sampling/createMessage": ("sampling", "client-undeclared-sampling"),
    "elicitation/create": ("elicitation", "client-undeclared-elicitation"),
    "roots/list": ("roots", "client-undeclared-roots"),
}


def check_response(message: dict[str, Any], frame: Frame, at: str, conduct: ClientConduct) -> None:
    """Rules for the client's response to a server request; it takes the request off the books."""
    request_id = message["id"]
    is_error = "error" in message
    if frame.rpc_kind != "batch":
        frame.rpc_kind = "error" if is_error else "result"
        frame.rpc_id = request_id if valid_id(request_id) else None
    if "result" in message and is_error:
        frame.flag("client-result-and-error", "error", f"{at}a response carries both result and error")
    if is_error:
        error = message["error"]
        if (
            not isinstance(error, dict)
            or not isinstance(error.get("code"), int)
            or isinstance(error.get("code"), bool)
        ):
            frame.flag("client-invalid-error", "error", f"{at}error must be an object with an integer code")
        elif not isinstance(error.get("message"), str):
            frame.flag("client-invalid-error", "error", f"{at}error must have a string message")
    if not valid_id(request_id):
        if request_id is None and is_error:
            return  # the client could not read the server's request, so it has no id to give
        frame.flag(
            "client-invalid-id",
            "error",
            f"{at}a response id must be a string or an integer, not {id_problem(request_id)}",
        )
        return
    asked = conduct.server_pending.pop(request_id, None)
    if asked is None:
        if request_id in conduct.server_withdrawn:
            if frame.rpc_kind != "batch":
                frame.note = "answers a request the server cancelled (a race the protocol allows)"
        elif request_id in conduct.server_answered:
            frame.flag(
                "client-duplicate-response",
                "error",
                f"{at}a second response to server request {request_id!r}",
            )
        else:
            frame.flag(
                "client-unknown-id",
                "error",
                f"{at}a response to server request {request_id!r}, which was never made",
            )
        return
    conduct.server_answered.add(request_id)
    _forget_server_progress(asked, conduct)
    if frame.rpc_kind != "batch":
        frame.method = asked.method
        frame.pair_seq = asked.frame_seq or None
    if asked.method == "ping":
        _ping_answer(message, frame, at)
        return
    if is_error:
        return
    result = message.get("result")
    _answer_rules(asked, result, frame, at, conduct)
    if isinstance(result, dict):
        check_meta(result, frame, at, conduct.version)
    if isinstance(result, dict) and isinstance(result.get("task"), dict):
        _created_task(asked, result, frame, at, conduct)
    elif conduct.validate and conduct.version:
        frame.verdicts.extend(schema_verdicts("result", asked.method, conduct.version, result))


def _ping_answer(message: dict[str, Any], frame: Frame, at: str) -> None:
    result = message.get("result")
    if "error" in message or not isinstance(result, dict) or set(result) - {"_meta"}:
        frame.flag("client-ping-result", "error", f"{at}a ping must be answered with an empty result")


def _answer_rules(asked: ServerRequest, result: Any, frame: Frame, at: str, conduct: ClientConduct) -> None:
    """A result shows the client has the feature the request needs: it must have declared it."""
    needed = CLIENT_CAPABILITY_OF.get(asked.method)
    if needed is None:
        return
    capability, code = needed
    declared = conduct.capabilities.get(capability)
    if declared is None:
        frame.flag(
            code, "error", f"{at}answered {asked.method} without declaring the {capability!r} capability"
        )
        return
    if asked.method == "sampling/createMessage":
        _sampling_tools(asked, result, declared, frame, at, conduct)
    elif asked.method == "elicitation/create" and since(conduct.version, "2025-11-25"):
        mode = asked.params.get("mode", "form")
        modes = [m for m in ("form", "url") if isinstance(declared, dict) and m in declared] or ["form"]
        if mode not in modes:
            frame.flag(
                code,
                "error",
                f"{at}answered a {mode!r} elicitation although it declared only {', '.join(modes)}",
            )
    elif asked.method == "roots/list":
        roots = result.get("roots") if isinstance(result, dict) else None
        for i, root in enumerate(roots if isinstance(roots, list) else []):
            uri = root.get("uri") if isinstance(root, dict) else None
            if isinstance(uri, str) and not uri.startswith("file://"):
                frame.flag("client-root-uri", "error", f"{at}root {i}: {uri!r} is not a file:// URI")


def _created_task(
    asked: ServerRequest, result: dict[str, Any], frame: Frame, at: str, conduct: ClientConduct
) -> None:
    """2025-11-25: a ``CreateTaskResult`` answers only a task-augmented request of a kind the client
    declared ``tasks.requests`` for; any other it must answer normally."""
    if "task" not in asked.params:
        frame.flag(
            "client-task-capability",
            "error",
            f"{at}answered a {asked.method} that asked for no task with a CreateTaskResult",
        )
    elif not augmentable(conduct.capabilities, asked.method):
        frame.flag(
            "client-task-capability",
            "error",
            f"{at}answered {asked.method} with a CreateTaskResult without declaring tasks.requests for it: "
            "it must answer the request normally",
        )
    if not (conduct.validate and conduct.version):
        return
    from . import _published  # jsonschema, only when validating

    if _published.has(conduct.version, "CreateTaskResult"):
        frame.verdicts.extend(
            Verdict("client-schema", v.severity, v.message)
            for v in _published.check(conduct.version, "CreateTaskResult", result, "result")
        )


def _sampling_tools(
    asked: ServerRequest, result: Any, declared: Any, frame: Frame, at: str, conduct: ClientConduct
) -> None:
    """2025-11-25: tool use in sampling needs ``sampling.tools``."""
    if not since(conduct.version, "2025-11-25") or (isinstance(declared, dict) and "tools" in declared):
        return
    content = result.get("content") if isinstance(result, dict) else None
    blocks = content if isinstance(content, list) else [content]
    used = any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks) or (
        isinstance(result, dict) and result.get("stopReason") == "toolUse"
    )
    if used or asked.params.get("tools"):
        frame.flag(
            "client-undeclared-sampling",
            "error",
            f"{at}{'used tools in' if used else 'answered a tool-enabled'} sampling "
            "without declaring sampling.tools",
        )


def _forget_server_progress(asked: ServerRequest, conduct: ClientConduct) -> None:
    meta = asked.params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if valid_id(token):
        conduct.server_progress.pop(token, None)
