"""``mcp-inspector --cli``: call one MCP method on a server and print the result as JSON.

A drop-in for the official inspector's CLI mode (npm ``@modelcontextprotocol/inspector --cli``)::

    mcp-inspector --cli node build/index.js --method tools/list
    mcp-inspector --cli https://example.com/mcp --method tools/call --tool-name echo --tool-arg message=hi
    mcp-inspector --cli --config mcp.json --server everything --method prompts/list

Exit codes: 0 success (a tool result with ``isError`` is still printed and exits 0, as the official CLI
does), 1 the call failed (JSON-RPC error, transport failure, timeout, bad config), 2 usage error,
130 interrupted. Every failure is one ``error: ...`` line on stderr.

Start-up cost matters here: at load time this package imports the standard library and the engine's
pure-asyncio core only; httpx comes in for URL targets, and mcp-types only with ``--record``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from inspector.cli.arguments import METHODS, STATELESS_VERSIONS, CliError, Invocation, UsageError, parse_args

if TYPE_CHECKING:
    from sessions.engine import ClientSession, Event, Frame

__all__ = ["end_process", "main"]

# --- the call ---------------------------------------------------------------------------------------------


async def _call(session: ClientSession, inv: Invocation) -> dict[str, Any]:
    method = inv.method
    if method.startswith("skills/") or inv.skill:
        from inspector.cli.skills import call

        return await call(session, inv)
    list_key = METHODS[method][1]
    if list_key is not None:
        return await _list_all(session, method, list_key)
    if method == "tools/call":
        assert inv.tool_name is not None
        await _refuse_excluded_tool(session, inv.tool_name)
        if inv.task is not None:
            return await _run_task(session, inv.tool_name, inv.tool_args, inv.task)
        return await session.call_tool(inv.tool_name, inv.tool_args)
    if method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert inv.task_id is not None
        return await session.request(method, {"taskId": inv.task_id}, progress=False)
    if method == "resources/read":
        assert inv.uri is not None
        return await session.read_resource(inv.uri)
    if method == "prompts/get":
        assert inv.prompt_name is not None
        return await session.get_prompt(inv.prompt_name, inv.prompt_args)
    if method == "logging/setLevel":
        assert inv.log_level is not None
        return await session.set_logging_level(inv.log_level)
    return await session.request("ping", progress=False)


async def _run_task(
    session: ClientSession, name: str, arguments: dict[str, Any], task: dict[str, Any]
) -> dict[str, Any]:
    """tools/call as a task: poll it (at its pollInterval) until it ends or needs input, then
    tasks/result, which returns the tool's result (input requests arrive meanwhile)."""
    created = await session.call_tool(name, arguments, task=task)
    task_id = created.get("task", {}).get("taskId") if isinstance(created.get("task"), dict) else None
    if not isinstance(task_id, str):
        return created  # the server ran it as a plain call
    await session.wait_task(task_id)
    return await session.task_result(task_id)


async def _refuse_excluded_tool(session: ClientSession, name: str) -> None:
    """Refuse to call a tool whose ``x-mcp-header`` annotations are invalid: clients must drop it
    (the engine learns which from the tools/list it makes before the first call, stateless HTTP)."""
    problem = await session.tool_problem(name)
    if problem is not None:
        raise _Failure(
            f"tools/call refused: tool {name!r} is invalid ({problem}); "
            "a client must not call a tool with an invalid x-mcp-header"
        )


async def _list_all(session: ClientSession, method: str, key: str) -> dict[str, Any]:
    """Fetch every page; return the first page's result with all items and no nextCursor."""
    from sessions.engine import EngineError

    result: dict[str, Any] | None = None
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page = await session.list_page(method, cursor)
        if result is None:
            result = dict(page)
        found = page.get(key)
        if isinstance(found, list):
            items.extend(found)
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
        if cursor in seen:
            raise EngineError(f"{method} returned cursor {cursor!r} twice")
        seen.add(cursor)
    result.pop("nextCursor", None)
    result[key] = items
    return result


def _one_line(text: str, limit: int = 500) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Failure(Exception):
    """The call failed; the message is ready to print.

    ``transport`` marks failures of the connection itself, where the server's last stderr line
    (a stack trace's last line, "address in use", ...) usually says why.
    """

    def __init__(self, message: str, *, transport: bool = False) -> None:
        super().__init__(message)
        self.transport = transport


async def _run(inv: Invocation, frames: list[Frame], stderr_tail: list[str]) -> dict[str, Any]:
    from inspector.cli.answers import handlers
    from sessions.engine import (
        ClientCapabilities,
        ClientOptions,
        EngineError,
        Frame,
        McpError,
        RequestTimeout,
        SkillError,
        connect,
    )

    options = ClientOptions(
        protocol_version=inv.protocol_version,
        mode="stateless" if inv.protocol_version in STATELESS_VERSIONS else "handshake",
        # Like the official CLI: roots (none unless --root names some; a one-shot run never changes
        # them); sampling and elicitation only when told how to answer, and tasks with them (the
        # answer is the policy's, given through tasks/result) unless --no-tasks.
        capabilities=ClientCapabilities(
            roots=True,
            roots_list_changed=False,
            sampling=inv.sampling is not None,
            elicitation_form=inv.elicitation is not None,
            elicitation_url=inv.elicitation is not None and inv.elicitation.url_mode,
            tasks=inv.tasks,
            apps=inv.apps,
        ),
        client_info={"name": "mcp-inspector-cli", "version": "0.1.0"},
        roots=inv.roots,
        timeout=inv.timeout,
        max_total_timeout=max(600.0, inv.timeout),
        validate=inv.record is not None or inv.collection is not None,
        # A recording holds tool results to their output schemas: list the tools before a call.
        learn_tools=inv.record is not None or inv.collection is not None,
    )
    if inv.max_reconnects is not None:
        options.max_reconnects = inv.max_reconnects
    options.max_message_bytes = inv.max_message_bytes
    options.max_message_bytes_name = "--max-message-bytes"
    session = connect(inv.target, options)
    session.handlers.update(handlers(inv.elicitation, inv.sampling))

    oauth_failure: list[str] = []

    def watch(event: Event) -> None:
        if isinstance(event, Frame):
            frames.append(event)
            if event.kind == "state" and event.verdicts and (event.transport or {}).get("state") == "oauth":
                oauth_failure[:] = [event.verdicts[-1].message]
            if event.kind == "stderr":
                line = event.text.strip()
                if line:
                    stderr_tail[:] = [line]

    session.subscribe(watch)
    try:
        await session.__aenter__()
    except RequestTimeout:
        raise _Failure(
            f"cannot connect: no answer to initialize within {inv.timeout:g} s", transport=True
        ) from None
    except McpError as exc:
        raise _Failure(f"cannot connect: initialize failed: {exc}") from None
    except EngineError as exc:
        why = f" ({oauth_failure[0]})" if oauth_failure else ""
        if not why and getattr(exc, "status", None) == 401 and getattr(inv.target, "oauth", 0) is None:
            why = " (the server asks for authorization: add --oauth)"
        raise _Failure(f"cannot connect: {exc}{why}", transport=True) from None
    try:
        if inv.collection is not None:
            from inspector.cli.collection import run

            return await run(session, inv.collection, frames)
        try:
            return await _call(session, inv)
        except McpError as exc:
            detail = f"{inv.method} failed: {exc}"
            if exc.data is not None:
                detail += f"; data: {json.dumps(exc.data, ensure_ascii=False)}"
            raise _Failure(detail) from None
        except RequestTimeout as exc:
            raise _Failure(f"no response to {inv.method}: {exc}", transport=True) from None
        except SkillError as exc:  # the server's skill, not the connection: no stderr tail
            raise _Failure(
                f"{inv.method} {inv.skill}: {exc}" if inv.skill else f"{inv.method}: {exc}"
            ) from None
        except EngineError as exc:
            why = f" ({oauth_failure[0]})" if oauth_failure else ""
            raise _Failure(f"{inv.method} failed: {exc}{why}", transport=True) from None
    finally:
        await session.aclose()


def _write_record(path: str, frames: list[Frame]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for frame in frames:
            fh.write(json.dumps(frame.to_dict(), ensure_ascii=False) + "\n")


def _save_record(path: str, frames: list[Frame], code: int) -> None:
    """``--record``: write the frames, or say why they could not be (the run's own outcome stands)."""
    try:
        _write_record(path, frames)
    except OSError as exc:
        _fail(f"cannot write --record file {path}: {exc.strerror or exc}", code)


def _print_result(result: dict[str, Any]) -> None:
    text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()


def _fail(message: str, code: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        print(f"error: {_one_line(message)}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code. Never raises, never prints a traceback."""
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        try:
            inv = parse_args(args)
        except UsageError as exc:
            return _fail(f"{exc} (see mcp-inspector --cli --help)", 2)
        except CliError as exc:
            return _fail(str(exc), 1)
        except SystemExit as exc:  # --help
            return exc.code if isinstance(exc.code, int) else 0

        if inv.record is not None:
            try:
                open(inv.record, "w", encoding="utf-8").close()
            except OSError as exc:
                return _fail(f"cannot write --record file {inv.record}: {exc.strerror or exc}", 1)

        import asyncio

        frames: list[Frame] = []
        stderr_tail: list[str] = []
        try:
            result = asyncio.run(_run(inv, frames, stderr_tail))
        except _Failure as exc:
            message = str(exc)
            if exc.transport and stderr_tail:
                message += f" (server stderr: {_one_line(stderr_tail[0], 200)})"
            return _fail(message, 1)
        finally:
            if inv.record is not None:
                _save_record(inv.record, frames, 1)
        if inv.junit is not None:
            from inspector.cli.collection import junit

            try:
                with open(inv.junit, "w", encoding="utf-8") as fh:
                    fh.write(junit(result, inv.collection_name))
            except OSError as exc:
                return _fail(f"cannot write --junit file {inv.junit}: {exc.strerror or exc}", 1)
        try:
            _print_result(result)
        except BrokenPipeError:
            # The reader went away (| head): not our failure; keep Python quiet at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if inv.collection is not None and result["failed"]:
            return _fail(f"{result['failed']} of {len(result['steps'])} collection steps failed", 1)
        return 0
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # a bug, or something nobody foresaw: still one line
        return _fail(f"unexpected {type(exc).__name__}: {exc}", 1)


def end_process(code: int) -> NoReturn:
    """End the process now with ``code``, without the interpreter's teardown.

    Tearing down every module and object a call loaded (asyncio, httpx, the engine) is a noticeable
    part of a one-shot CLI's run and does nothing a finished call needs. What teardown does that
    matters is done first: other (non-daemon) threads finish, ``atexit`` handlers run (``weakref``
    finalizers, logging's flush), stdout and stderr are flushed. Files the CLI writes are closed
    before ``main`` returns; a stdio server is ended by the session's close.
    """
    import atexit
    import threading

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
