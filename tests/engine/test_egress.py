"""Egress rules for HTTP targets in the hosted set-up: loopback, private networks, metadata services and
their disguises refused before any packet reaches them; an allow-list opens exceptions."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest
from support.teams import ateam_of
from support.web import http_config, live_runtime, make_user, wait_until

from sessions.engine import (
    ClientOptions,
    EgressPolicy,
    EgressRefused,
    EngineError,
    HttpStatusError,
    HttpTarget,
    TransportError,
    connect,
    is_forbidden_address,
    is_numeric_disguise,
)
from sessions.servers import Confinement, build_target

OPTIONS = ClientOptions(timeout=20)
HOSTED = Confinement(hosted=True)
REFUSED = "refused by the egress rules"

# --- the policy (fast) -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "127.255.255.254", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
        "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.255", "0.0.0.0", "0.1.2.3",
        "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255", "198.18.0.1", "192.0.2.1",
        "::", "::1", "fe80::1", "fe80::1%eth0", "fc00::1", "fd00:ec2::254", "ff02::1", "fec0::1",
        "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "::ffff:0:127.0.0.1",
        "2002:7f00:1::", "2002:a00:1::1", "64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1",
        "2001::1", "2001:db8::1", "100::1",
    ],
)  # fmt: skip
def test_an_address_off_the_public_internet_is_forbidden(address: str) -> None:
    assert is_forbidden_address(ip_address(address))
    assert not EgressPolicy().allows_address(ip_address(address))


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001::200e", "64:ff9b::808:808"]
)
def test_a_public_address_is_allowed(address: str) -> None:
    assert not is_forbidden_address(ip_address(address))
    assert EgressPolicy().allows_address(ip_address(address))


@pytest.mark.parametrize(
    "host",
    ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0x7f.1", "017700000001", "0x08080808", "010.0.0.1"],
)
def test_a_numeric_disguise_is_refused_before_resolving(host: str) -> None:
    assert is_numeric_disguise(host)
    with pytest.raises(EgressRefused, match=f"{REFUSED}: {host} is not an allowed address"):
        EgressPolicy().check_name(host)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "example.com", "10.0.0.1", "1.2.3.4"])
def test_a_plain_address_or_name_is_no_disguise(host: str) -> None:
    assert not is_numeric_disguise(host)
    EgressPolicy().check_name(host)


@pytest.mark.parametrize(
    "host",
    ["metadata", "metadata.google.internal", "METADATA.google.internal.", "instance-data", "metadata.goog"],
)
def test_a_metadata_service_name_is_refused_even_when_allow_listed(host: str) -> None:
    with pytest.raises(EgressRefused):
        EgressPolicy.from_entries([host.lower().rstrip(".")]).check_name(host)


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "fd00:ec2::254", "100.100.100.200", "::ffff:169.254.169.254"]
)
def test_a_metadata_address_is_refused_even_when_its_range_is_allow_listed(address: str) -> None:
    policy = EgressPolicy.from_entries(["169.254.0.0/16", "fc00::/7", "100.64.0.0/10", address])
    assert not policy.allows_address(ip_address(address))


def test_the_allow_list_opens_networks_addresses_and_host_names() -> None:
    policy = EgressPolicy.from_entries([" 10.0.0.0/8", "192.168.1.7", "[fd12::1]", "Intranet.Example.", ""])
    assert policy.allows_address(ip_address("10.200.0.1"))
    assert policy.allows_address(ip_address("192.168.1.7"))
    assert not policy.allows_address(ip_address("192.168.1.8"))
    assert policy.allows_address(ip_address("fd12::1"))
    assert policy.allows_address(ip_address("127.0.0.1"), host="intranet.example.com.") is False
    assert policy.allows_address(ip_address("127.0.0.1"), host="INTRANET.example")
    assert not policy.allows_address(ip_address("127.0.0.1"), host="other.example")


@pytest.mark.parametrize(
    "entry", ["not a host", "2130706433", "-dash.example", "10.0.0.0/33", "http://x.example/"]
)
def test_a_bad_allow_list_entry_is_refused_with_its_value(entry: str) -> None:
    with pytest.raises(ValueError, match="egress allow-list entry"):
        EgressPolicy.from_entries([entry])


def test_a_name_resolving_to_a_public_and_a_private_address_is_refused() -> None:
    addresses = [ip_address("8.8.8.8"), ip_address("127.0.0.1")]
    with pytest.raises(EgressRefused, match="mixed.example is not an allowed address"):
        EgressPolicy().check_addresses("mixed.example", addresses)
    assert EgressPolicy().check_addresses("public.example", addresses[:1]) == addresses[:1]


def test_build_target_holds_http_targets_to_the_egress_rules_only_when_hosted() -> None:
    config = {"transport": "http", "url": "http://10.0.0.5/mcp", "egress_allow": ["10.0.0.0/24"]}
    local = build_target(config, Confinement())
    assert isinstance(local, HttpTarget) and local.egress is None
    assert build_target(config).egress is None  # type: ignore[union-attr]  # the CLI
    hosted = build_target(config, Confinement(hosted=True, egress_allow=("intranet.example",)))
    assert isinstance(hosted, HttpTarget) and hosted.egress is not None
    assert hosted.egress.allows_address(ip_address("10.0.0.5"))
    assert hosted.egress.allows_address(ip_address("10.9.9.9"), host="intranet.example")
    assert not hosted.egress.allows_address(ip_address("10.0.1.5"))


def test_a_hosted_config_with_a_bad_team_allow_list_is_refused() -> None:
    with pytest.raises(ValueError, match="egress_allow must be a list"):
        build_target({"transport": "http", "url": "http://x.example/", "egress_allow": "10.0.0.0/8"}, HOSTED)
    with pytest.raises(ValueError, match="'nope nope'"):
        build_target({"transport": "http", "url": "http://x.example/", "egress_allow": ["nope nope"]}, HOSTED)


def test_a_hosted_ca_file_is_used_only_for_a_catalog_server() -> None:
    config = {"transport": "http", "url": "https://x.example/", "ca_file": "/etc/shadow"}
    with pytest.raises(ValueError, match="ca_file names a file on the inspector's own machine"):
        build_target(config, HOSTED)
    assert build_target({**config, "catalog": {"id": 3}}, HOSTED).ca_file == "/etc/shadow"  # type: ignore[union-attr]
    assert build_target(config, Confinement()).ca_file == "/etc/shadow"  # type: ignore[union-attr]


# --- through the real transports (slow) ---------------------------------------------------------------


@contextlib.contextmanager
def listener(family: socket.AddressFamily, host: str) -> Iterator[tuple[socket.socket, int]]:
    """A listening socket nobody should reach: ``accept`` tells whether anyone did."""
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        sock.listen(16)
        sock.setblocking(False)
        yield sock, sock.getsockname()[1]


def accepted(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


async def refusal(url: str, transport: str = "http", policy: EgressPolicy | None = None) -> str:
    target = HttpTarget(url, transport=transport, egress=policy or EgressPolicy())  # type: ignore[arg-type]
    with pytest.raises(TransportError) as caught:
        async with asyncio.timeout(20), connect(target, OPTIONS):
            pass
    return str(caught.value)


V4_DISGUISES = [
    "127.0.0.1", "127.0.0.2", "localhost", "LocalHost", "2130706433", "0x7f000001", "127.1", "127.0.1",
    "0x7f.1", "017700000001", "0.0.0.0", "0", "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]", "[::127.0.0.1]", "[64:ff9b::127.0.0.1]",
    "[2002:7f00:1::1]",
]  # fmt: skip
# Dotted quads with leading zeros: httpx refuses the URL itself, before the rules are asked.
INVALID_URLS = ["0177.0.0.1", "0177.0.0.01", "127.000.000.001", "010.0.0.1"]
V6_DISGUISES = ["[::1]", "[0:0:0:0:0:0:0:1]", "[::]", "[::0.0.0.1]"]


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "sse", "auto"])
async def test_every_disguise_of_loopback_is_refused_without_a_packet(transport: str) -> None:
    with (
        listener(socket.AF_INET, "127.0.0.1") as (v4, port4),
        listener(socket.AF_INET6, "::1") as (v6, port6),
    ):
        for host, port in [*((h, port4) for h in V4_DISGUISES), *((h, port6) for h in V6_DISGUISES)]:
            text = await refusal(f"http://{host}:{port}/mcp", transport)
            shown = host.strip("[]").lower()  # as httpx passes it on
            assert f"{REFUSED}: {shown} is not an allowed address" in text, (host, text)
        for host in INVALID_URLS:
            text = await refusal(f"http://{host}:{port4}/mcp", transport)
            assert f"Invalid IPv4 address: '{host}'" in text, (host, text)
        assert not accepted(v4) and not accepted(v6)


@pytest.mark.slow
async def test_the_refusal_says_the_same_whether_the_port_is_open_or_closed() -> None:
    with listener(socket.AF_INET, "127.0.0.1") as (sock, open_port):
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            closed_port = free.getsockname()[1]
        opened = await refusal(f"http://127.0.0.1:{open_port}/mcp")
        closed = await refusal(f"http://127.0.0.1:{closed_port}/mcp")
        assert opened.replace(str(open_port), "N") == closed.replace(str(closed_port), "N")
        assert not accepted(sock)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["127.0.0.1", "127.0.0.0/8", "localhost"])
async def test_the_allow_list_lets_a_local_server_through(sdk_http_json: str, entry: str) -> None:
    url = sdk_http_json.replace("127.0.0.1", "localhost") if entry == "localhost" else sdk_http_json
    target = HttpTarget(url, transport="http", egress=EgressPolicy.from_entries([entry]))
    async with asyncio.timeout(20), connect(target, OPTIONS) as session:
        result = await session.call_tool("add", {"a": 40, "b": 2})
    assert result["structuredContent"] == {"result": 42}


@contextlib.asynccontextmanager
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[int, str]]:
    """A TLS server on 127.0.0.1 whose certificate names localhost only; every request is answered 404."""
    import trustme

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    async with server:
        yield server.sockets[0].getsockname()[1], str(tmp_path / "ca.pem")


@pytest.mark.slow
async def test_tls_through_the_egress_rules_verifies_the_urls_host_name(tmp_path: Path) -> None:
    # The connection goes to the checked address, 127.0.0.1; the certificate is checked against the
    # URL's name all the same: localhost passes, 127.0.0.1 (not in the certificate) does not.
    async with tls_server(tmp_path) as (port, ca_file):
        policy = EgressPolicy.from_entries(["localhost", "127.0.0.1"])
        by_name = HttpTarget(
            f"https://localhost:{port}/mcp", transport="http", ca_file=ca_file, egress=policy
        )
        with pytest.raises(HttpStatusError, match="404"):
            async with asyncio.timeout(20), connect(by_name, OPTIONS):
                pass
        by_ip = HttpTarget(f"https://127.0.0.1:{port}/mcp", transport="http", ca_file=ca_file, egress=policy)
        with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
            async with asyncio.timeout(20), connect(by_ip, OPTIONS):
                pass


@contextlib.asynccontextmanager
async def redirecting_server(location: str) -> AsyncIterator[int]:
    """An HTTP server on 127.0.0.1 that answers every request 307 to ``location``."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\n".encode())
            writer.write(b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_redirect_from_an_allowed_server_to_a_forbidden_address_goes_nowhere(transport: str) -> None:
    with listener(socket.AF_INET6, "::1") as (forbidden, port):
        async with redirecting_server(f"http://[::1]:{port}/mcp") as allowed_port:
            policy = EgressPolicy.from_entries(["127.0.0.1"])
            target = HttpTarget(f"http://127.0.0.1:{allowed_port}/mcp", transport=transport, egress=policy)  # type: ignore[arg-type]
            with pytest.raises(EngineError):  # the redirect is a reply, not followed
                async with asyncio.timeout(20), connect(target, OPTIONS):
                    pass
        assert not accepted(forbidden)


@pytest.mark.slow
async def test_environment_proxies_are_not_used_under_the_egress_rules(
    sdk_http_json: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy connects on our behalf where the rules cannot see: the hosted mode ignores the environment's.
    with listener(socket.AF_INET, "127.0.0.1") as (proxy, proxy_port):
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        target = HttpTarget(sdk_http_json, transport="http", egress=EgressPolicy.from_entries(["127.0.0.1"]))
        async with asyncio.timeout(20), connect(target, OPTIONS) as session:
            await session.ping()
        assert not accepted(proxy)
        # Without the rules (the local mode) the same environment does send the request to the proxy.
        local = connect(HttpTarget(sdk_http_json, transport="http"), OPTIONS)
        opening = asyncio.ensure_future(local.__aenter__())
        try:
            conn, _ = await asyncio.wait_for(asyncio.get_running_loop().sock_accept(proxy), 20)
            conn.close()
        finally:
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            await local.aclose()


# --- through the web runtime (slow) ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_hosted_session_to_a_loopback_url_fails_with_the_egress_message(settings: Any) -> None:
    from sessions.models import McpSession, TimelineFrame
    from sessions.runtime import client

    settings.INSPECTOR_HOSTED = True
    with listener(socket.AF_INET, "127.0.0.1") as (sock, port):
        async with live_runtime():
            alice = await make_user()
            config = http_config(f"http://127.0.0.1:{port}/mcp")
            session = await McpSession.objects.acreate(
                owner=alice, team=await ateam_of(alice), name="loopback", config=config
            )
            await client.start_session(session)
            ended = await wait_until(
                lambda: (s := McpSession.objects.get(pk=session.pk)).status == "failed" and s, what="failed"
            )
        assert not accepted(sock)
    message = f"{REFUSED}: 127.0.0.1 is not an allowed address"
    assert message in ended.status_note
    notes = [f.note async for f in TimelineFrame.objects.filter(session=session, kind="state")]
    assert any(message in note for note in notes)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_hosted_session_reaches_a_server_its_team_allows(settings: Any, sdk_http_json: str) -> None:
    from support.web import request, start_session

    settings.INSPECTOR_HOSTED = True
    settings.INSPECTOR_EGRESS_ALLOW = ["192.0.2.0/24"]
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, http_config(sdk_http_json, egress_allow=["127.0.0.1/32"]))
        answer = await request(session, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        assert answer["result"]["structuredContent"] == {"result": 5}


def test_a_bad_global_allow_list_stops_the_start(settings: Any) -> None:
    from inspector.checks import check_egress_allow

    settings.INSPECTOR_EGRESS_ALLOW = ["10.0.0.0/8", "mcp.intranet.example"]
    assert check_egress_allow() == []
    settings.INSPECTOR_EGRESS_ALLOW = ["10.0.0.0/8", "not a host"]
    [error] = check_egress_allow()
    assert error.id == "inspector.E004" and "'not a host'" in error.msg
