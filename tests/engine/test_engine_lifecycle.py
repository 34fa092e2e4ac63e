"""Lifecycle and version negotiation, for every handshake revision."""

from __future__ import annotations

import ast
import subprocess
import sys
from typing import Any

import pytest
from support.engine import EventLog
from support.paths import REPO, SERVERS

from sessions.engine import (
    HANDSHAKE_VERSIONS,
    ClientCapabilities,
    ClientOptions,
    McpError,
    StdioTarget,
    VersionNegotiationFailed,
    connect,
)


def bad_version(mode: str) -> StdioTarget:
    return StdioTarget(sys.executable, [str(SERVERS / "bad_version.py"), mode])


@pytest.mark.slow
@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_every_handshake_revision_negotiates_with_server_everything(
    version: str, everything_stdio: dict[str, Any]
) -> None:
    caps = ClientCapabilities(elicitation_url=True)
    session = connect(
        StdioTarget(everything_stdio["command"], everything_stdio["args"]),
        ClientOptions(protocol_version=version, capabilities=caps),
    )
    log = EventLog(session)
    async with session:
        assert session.protocol_version == version
        assert (await session.call_tool("echo", {"message": version}))["content"][0][
            "text"
        ] == f"Echo: {version}"
    offered = log.messages("out", "initialize")[0].message["params"]["capabilities"]
    assert ("elicitation" in offered) is (version >= "2025-06-18")
    if version == "2025-11-25":
        assert offered["elicitation"] == {"form": {}, "url": {}}
    errors = [v for f in log.frames for v in f.verdicts if v.severity == "error"]
    assert not errors


@pytest.mark.slow
async def test_a_server_that_answers_an_older_version_is_accepted_and_noted() -> None:
    session = connect(bad_version("older"))
    log = EventLog(session)
    async with session:
        assert session.protocol_version == "2024-11-05"
        assert "elicitation" not in session.client_capabilities
    ready = next(f for f in log.frames if f.transport.get("state") == "ready")
    assert ready.note == "protocol 2024-11-05 (offered 2025-11-25)"


@pytest.mark.slow
async def test_a_server_that_answers_an_unknown_version_fails_negotiation_and_disconnects() -> None:
    session = connect(bad_version("weird"))
    log = EventLog(session)
    with pytest.raises(VersionNegotiationFailed, match="1999-01-01"):
        async with session:
            pass
    assert session.state == "closed"
    assert not log.messages("out", "notifications/initialized")
    assert any(f.kind == "exit" for f in log.frames)


@pytest.mark.slow
async def test_an_unsupported_version_error_is_reported_with_its_data() -> None:
    with pytest.raises(McpError) as failure:
        async with connect(bad_version("refuse")):
            pass
    assert failure.value.code == -32602
    assert failure.value.data["supported"] == ["1999-01-01"]


@pytest.mark.slow
def test_the_engine_imports_nothing_from_django_nor_heavy_modules_it_does_not_need() -> None:
    code = (
        "import sys; import sessions.engine as e;"
        "from sessions.engine import _session, _stdio, _http, _streamable, _legacy_sse, _sse;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'channels', 'daphne', 'mcp_types')];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_no_engine_module_has_an_import_of_django_even_a_lazy_one() -> None:
    engine = REPO / "sessions" / "engine"
    for source in engine.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not [n for n in names if n.split(".")[0] in ("django", "channels")], source
