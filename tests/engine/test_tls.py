"""Local HTTPS: servers with a self-signed certificate or a private CA (trustme's throwaway one).

By default the public CAs decide, so such a server fails with a clear hint; a CA file trusts it, and
switching verification off accepts any certificate and says so in the timeline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_one_error_line, result_of, run_cli
from support.engine import EventLog
from support.processes import HttpsServer
from support.web import live_runtime, logged_in_client, make_user, wait_until

from sessions.engine import ClientOptions, HttpTarget, TransportError, connect
from sessions.models import McpSession, ServerConfig, TimelineFrame

OPTIONS = ClientOptions(timeout=20)

pytestmark = pytest.mark.slow


async def test_a_private_ca_fails_by_default_with_a_hint(sdk_https: HttpsServer) -> None:
    session = connect(HttpTarget(sdk_https.url, transport="http"), OPTIONS)
    with pytest.raises(TransportError) as caught:
        async with session:
            pass
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
    assert "Trust its certificate with a CA file" in str(caught.value)


async def test_a_ca_file_trusts_the_server(sdk_https: HttpsServer) -> None:
    session = connect(HttpTarget(sdk_https.url, transport="http", ca_file=sdk_https.ca_file), OPTIONS)
    log = EventLog(session)
    async with session:
        result = await session.call_tool("add", {"a": 40, "b": 2})
        assert result["structuredContent"] == {"result": 42}
    assert not [f for f in log.frames if f.transport.get("state") == "tls-unverified"]


async def test_verification_off_accepts_the_certificate_and_says_so(sdk_https: HttpsServer) -> None:
    session = connect(HttpTarget(sdk_https.url, transport="http", verify_tls=False), OPTIONS)
    log = EventLog(session)
    async with session:
        assert session.server_info["name"] == "sdk-test-server"
    warned = [f for f in log.frames if f.transport.get("state") == "tls-unverified"]
    assert len(warned) == 1 and "any certificate is accepted" in (warned[0].note or "")


async def test_a_ca_file_that_is_not_pem_is_a_clear_error(tmp_path: Path, sdk_https: HttpsServer) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    session = connect(HttpTarget(sdk_https.url, transport="http", ca_file=str(junk)), OPTIONS)
    with pytest.raises(TransportError, match=r"cannot use .*junk\.pem as CA certificates"):
        async with session:
            pass


# --- the CLI --------------------------------------------------------------------------------------------


def test_cli_ca_file_insecure_and_the_default(sdk_https: HttpsServer) -> None:
    call = ["--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=1", "--tool-arg", "b=2"]
    assert result_of(run_cli(sdk_https.url, *call, "--ca-file", sdk_https.ca_file))["structuredContent"] == {
        "result": 3
    }
    assert result_of(run_cli(sdk_https.url, *call, "--insecure"))["structuredContent"] == {"result": 3}
    line = assert_one_error_line(run_cli(sdk_https.url, *call), 1)
    assert "CERTIFICATE_VERIFY_FAILED" in line and "CA file" in line
    line = assert_one_error_line(run_cli(sdk_https.url, *call, "--ca-file", "/nonexistent.pem"), 2)
    assert "--ca-file" in line
    line = assert_one_error_line(run_cli(sys.executable, "-c", "pass", "--insecure", *call), 2)
    assert "http(s) servers only" in line


# --- the web app ----------------------------------------------------------------------------------------


def _form(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "transport": "http",
        "url": url,
        "protocol_version": "2025-11-25",
        "timeout": "60",
        "max_total_timeout": "600",
        **extra,
    }


@pytest.mark.django_db(transaction=True)
async def test_the_connect_form_checks_the_ca_file_and_connects_with_it(sdk_https: HttpsServer) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        missing = await client.post("/connect", _form(sdk_https.url, verify_tls="on", ca_file="/no/such.pem"))
        assert missing.status_code == 422
        assert "no such file on this machine" in missing.content.decode()

        form = _form(sdk_https.url, verify_tls="on", ca_file=sdk_https.ca_file, name="local https", save="on")
        response = await client.post("/connect", form)
        assert response.status_code == 302
        session = await McpSession.objects.aget(owner=alice)
        session = await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="ready").first())
        assert session.server_info["name"] == "sdk-test-server"
        server = await ServerConfig.objects.aget(owner=alice, name="local https")
        assert server.verify_tls and server.ca_file == sdk_https.ca_file
        assert server.snapshot()["ca_file"] == sdk_https.ca_file


@pytest.mark.django_db(transaction=True)
async def test_the_connect_form_can_switch_verification_off(sdk_https: HttpsServer) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        response = await client.post("/connect", _form(sdk_https.url))  # the box unticked
        assert response.status_code == 302
        session = await McpSession.objects.aget(owner=alice)
        await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="ready").first())
        warned = TimelineFrame.objects.filter(session=session, transport__state="tls-unverified")
        await wait_until(warned.exists)
        assert json.dumps(session.config).count("verify_tls") == 1 and session.config["verify_tls"] is False
