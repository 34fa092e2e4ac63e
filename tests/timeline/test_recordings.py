"""Opening recordings: hostile files refused with a reason, big ones streamed and imported in the
background with progress, the same file opened once, a long line refused at once."""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import re
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient
from support.processes import free_port
from support.teams import ateam_of
from support.web import logged_in_client, make_user, wait_until

from sessions.models import McpSession, TimelineFrame
from sessions.timeline import recordings

pytestmark = pytest.mark.django_db(transaction=True)

BOUNDARY = "recording-boundary-7d3f"


def record(seq: int, **fields: Any) -> dict[str, Any]:
    """A frame as Frame.to_dict writes it: a server's message by default."""
    base = {"seq": seq, "kind": "message", "direction": "in", "wall": 1_700_000_000.0 + seq, "mono": seq}
    return (
        base | {"raw": '{"jsonrpc":"2.0","method":"notifications/message"}', "raw_encoding": "utf-8"} | fields
    )


def lines(*records: dict[str, Any] | str) -> bytes:
    return b"".join(
        (r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)).encode() + b"\n" for r in records
    )


async def open_file(client: AsyncClient, name: str, content: bytes) -> Any:
    return await client.post("/recordings/open", {"recording": SimpleUploadedFile(name, content)})


def refusal(response: Any) -> str:
    assert response.status_code == 422, response.status_code
    return html.unescape(response.content.decode())


DEEP = '{"seq": 1, "kind": "state", "direction": "local", "transport": ' + '{"a": ' * 70 + "1" + "}" * 71

HOSTILE = {
    "seq at 2**63": (lines(record(2**63)), "line 1: not a frame (needs seq from 1 to 9223372036854775807"),
    "seq true": (lines(record(True)), "line 1: not a frame"),
    "an unhashable kind": (lines(record(1, kind=["message"])), "line 1: not a frame"),
    "wall NaN": (b'{"seq": 1, "kind": "state", "direction": "local", "wall": NaN}\n', "NaN is not JSON"),
    "wall 1e300": (lines(record(1, wall=1e300)), "line 1: wall 1e+300 is out of range"),
    "wall 1e999": (
        b'{"seq": 1, "kind": "state", "direction": "local", "wall": 1e999}\n',
        "1e999 is not a finite",
    ),
    "mono a huge integer": (lines(record(1, mono=10**400)), "line 1: mono 1000000000"),
    "latency negative": (lines(record(1, latency_ms=-5)), "line 1: latency_ms -5 is out of range"),
    "latin-1 text that is not latin-1": (
        lines(record(1, raw="price: €5", raw_encoding="latin-1")),
        "line 1: raw does not fit its raw_encoding latin-1",
    ),
    "a lone surrogate": (
        lines(record(1, raw="\\ud800")).replace(b"\\\\ud800", b"\\ud800"),
        "raw does not fit",
    ),
    "an unknown encoding": (lines(record(1, raw_encoding="utf-16")), "raw_encoding must be utf-8 or latin-1"),
    "an unknown rpc_kind": (lines(record(1, rpc_kind={"a": 1})), "line 1: rpc_kind must be one of"),
    "JSON nested 100,000 deep": (b"[" * 100_000 + b"\n", "line 1: JSON nested too deeply"),
    "a record nested 70 deep": (DEEP.encode() + b"\n", "line 1: nested more than 64 levels deep"),
    "not UTF-8": (
        b'{"seq": 1, "kind": "state", "direction": "local", "note": "\xff"}\n',
        "line 1: not UTF-8",
    ),
    "a bad second line": (lines(record(1), "{"), "line 2: not JSON"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
async def test_a_hostile_recording_is_refused_with_its_line_and_the_reason_and_nothing_stored(
    case: str,
) -> None:
    content, expected = HOSTILE[case]
    client = await logged_in_client(await make_user())
    page = refusal(await open_file(client, "hostile.jsonl", content))
    assert expected in page, page[-600:]
    assert await McpSession.objects.acount() == 0 and await TimelineFrame.objects.acount() == 0


async def test_long_fields_and_nul_are_stored_cut_and_visible_and_every_page_opens() -> None:
    """PostgreSQL refuses NUL in text and values wider than a column: neither may refuse a frame."""
    method = "tools/" + "x" * 500
    content = lines(
        record(1, method=method, rpc_kind="request", rpc_id="i" * 400, note="a\x00b", pair_seq=2**70),
        record(2, kind="state", direction="local", transport={"state": "closed", "k\x00": ["v\x00"]}),
        record(
            3,
            raw="a\x00b",
            parse_error="bad\x00json",
            verdicts=[{"code": "x", "severity": "error", "message": "m\x00"}],
        ),
    )
    client = await logged_in_client(await make_user())
    response = await open_file(client, "long.jsonl", content)
    assert response.status_code == 302
    session = await McpSession.objects.aget()
    frames = {f.seq: f async for f in TimelineFrame.objects.filter(session=session)}
    assert len(frames[1].method) == 200 and frames[1].method.startswith("tools/x")
    assert len(frames[1].rpc_id) == 200 and frames[1].note == "a␀b" and frames[1].pair_seq is None
    assert frames[2].transport == {"state": "closed", "k␀": ["v␀"]}
    assert bytes(frames[3].raw) == b"a\x00b" and frames[3].parse_error == "bad␀json"
    assert frames[3].verdicts[0]["message"] == "m␀"
    assert session.phases[0]["state"] == "closed"
    for url in (f"/s/{session.public_id}/", *(f"/s/{session.public_id}/frames/{seq}" for seq in frames)):
        assert (await client.get(url)).status_code == 200, url


# --- big recordings -----------------------------------------------------------------------------


def generate(path: Path, megabytes: int) -> int:
    """Write a realistic recording of about ``megabytes`` MB: a handshake, then tool calls and results."""
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "big", "version": "1"},
    }
    head = [
        record(1, kind="state", direction="local", raw="", note="opening stdio transport",
               transport={"state": "connecting"}),
        record(2, direction="out", rpc_kind="request", method="initialize", rpc_id=0,
               raw='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{}}}'),
        record(3, rpc_kind="result", method="initialize", rpc_id=0, pair_seq=2,
               raw=json.dumps({"jsonrpc": "2.0", "id": 0, "result": hello})),
    ]  # fmt: skip
    text = "lorem ipsum dolor sit amet " * 36  # about 1 KB of a tool's result
    seq = 3
    with path.open("wb") as out:
        out.write(lines(*head))
        while out.tell() < megabytes * 1_000_000:
            chunk = []
            for _ in range(500):
                call = {"jsonrpc": "2.0", "id": seq, "method": "tools/call", "params": {"name": "echo"}}
                result = {
                    "jsonrpc": "2.0",
                    "id": seq,
                    "result": {"content": [{"type": "text", "text": text}]},
                }
                fields = {"method": "tools/call", "rpc_id": seq}
                chunk.append(
                    record(seq + 1, direction="out", rpc_kind="request", raw=json.dumps(call), **fields)
                )
                chunk.append(
                    record(seq + 2, rpc_kind="result", pair_seq=seq + 1, raw=json.dumps(result), **fields)
                )
                seq += 2
            out.write(lines(*chunk))
    return seq


def multipart_parts(path: Path, name: str) -> Iterator[bytes]:
    """A multipart body naming the file ``recording``, read from disk a MiB at a time."""
    yield (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="recording"; filename="{name}"\r\n'
        "Content-Type: application/x-ndjson\r\n\r\n"
    ).encode()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            yield chunk
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


async def stream_upload(client: AsyncClient, path: Path, name: str) -> tuple[int, dict[str, str]]:
    """POST the file to the ASGI application as a browser would: the body arrives in pieces, never whole."""
    from inspector.asgi import application

    length = sum(len(part) for part in multipart_parts(path, name))
    token = "t" * 32  # a CSRF secret of our own, as cookie and header
    cookies = (
        "; ".join(f"{k}={m.value}" for k, m in client.cookies.items()) + f"; mcp_inspector_csrftoken={token}"
    )
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/recordings/open", "raw_path": b"/recordings/open", "query_string": b"", "root_path": "",
        "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
        "headers": [
            (b"host", b"127.0.0.1"), (b"cookie", cookies.encode()), (b"x-csrftoken", token.encode()),
            (b"content-type", f"multipart/form-data; boundary={BOUNDARY}".encode()),
            (b"content-length", str(length).encode()),
        ],
    }  # fmt: skip
    parts = multipart_parts(path, name)
    pending = next(parts)
    answer: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        nonlocal pending
        if pending is None:
            await asyncio.Event().wait()  # the body is over: nothing more comes (until cancelled)
        part, pending = pending, next(parts, None)
        return {"type": "http.request", "body": part, "more_body": pending is not None}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode().title(): v.decode() for k, v in message["headers"]}

    await asyncio.wait_for(application(scope, receive, send), 60)
    return answer["status"], answer["headers"]


@pytest.mark.slow
async def test_a_big_recording_streams_in_bounded_memory_imports_with_progress_and_opens_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.jsonl"
    last_seq = generate(path, 24)
    size, sha256 = path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest()
    alice = await make_user()
    client = await logged_in_client(alice)

    # Hold the import after its first batch, so the page is seen while it runs.
    first_batch, go_on = threading.Event(), threading.Event()
    store = recordings._store

    def held_store(*args: Any) -> bool:
        stored = store(*args)
        if not first_batch.is_set():
            first_batch.set()
            assert go_on.wait(30)
        return stored

    monkeypatch.setattr(recordings, "_store", held_store)

    tracemalloc.start()
    try:
        started = time.monotonic()
        status, headers = await stream_upload(client, path, "big.jsonl")
        answered = time.monotonic() - started
        assert status == 302, status
        session = await McpSession.objects.aget(owner=alice)
        assert headers["Location"] == f"/s/{session.public_id}/"
        assert await asyncio.to_thread(first_batch.wait, 30)

        page = (await client.get(headers["Location"])).content.decode()
        assert "importing: 500 frames" in page and 'hx-trigger="every 1s"' in page
        assert session.status == "importing" and session.recording_sha256 == sha256
        # Opened again while it imports: the same session, no second import.
        again, headers_again = await stream_upload(client, path, "big (1).jsonl")
        assert again == 302 and headers_again["Location"] == headers["Location"]
        # Other pages carry on meanwhile.
        go_on.set()
        healthz_started = time.monotonic()
        assert (await client.get("/healthz")).status_code == 200
        healthz = time.monotonic() - healthz_started

        await wait_until(
            lambda: McpSession.objects.filter(pk=session.pk).exclude(status="importing").exists(), timeout=240
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(
        f"\n{size / 1e6:.0f} MB: answered in {answered:.2f} s, peak traced {peak / 1e6:.1f} MB, "
        f"healthz {healthz:.3f} s"
    )
    # The file passes through in pieces: memory does not grow with it.
    assert peak < 24_000_000, f"peak {peak / 1e6:.1f} MB for a {size / 1e6:.0f} MB file"
    assert answered < 10 and healthz < 2

    await session.arefresh_from_db()
    assert session.status == "closed", session.status_note
    assert (
        session.last_seq == last_seq
        and await TimelineFrame.objects.filter(session=session).acount() == last_seq
    )
    assert session.server_info == {"name": "big", "version": "1"} and session.protocol_version == "2025-11-25"
    done = await client.get(f"/s/{session.public_id}/import", headers={"HX-Request": "true"})
    assert done.status_code == 200 and done["HX-Refresh"] == "true"
    page = (await client.get(f"/s/{session.public_id}/")).content.decode()
    assert f'id="f-{last_seq}"' in page and "importing:" not in page

    # Opened again once imported: the same session.
    status, headers = await stream_upload(client, path, "big.jsonl")
    assert status == 302 and headers["Location"] == f"/s/{session.public_id}/"
    assert await McpSession.objects.acount() == 1
    # Another person opening the same file gets a session of their own.
    bob = await logged_in_client(await make_user("bob"))
    status, headers = await stream_upload(bob, path, "big.jsonl")
    assert status == 302 and headers["Location"] != f"/s/{session.public_id}/"
    theirs = await McpSession.objects.aget(owner__username="bob")
    await wait_until(lambda: McpSession.objects.filter(pk=theirs.pk, status="closed").exists(), timeout=240)


@pytest.mark.slow
async def test_a_bad_line_deep_in_a_big_recording_fails_its_session_with_the_reason_and_stores_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.jsonl"
    last = generate(path, 3)
    with path.open("ab") as out:
        out.write(lines(record(last + 1, wall=1e300)))
    client = await logged_in_client(await make_user())
    response = await client.post(
        "/recordings/open", {"recording": SimpleUploadedFile("bad.jsonl", path.read_bytes())}
    )
    assert response.status_code == 302  # its head is a recording: it imports in the background
    session = await McpSession.objects.aget()
    await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="failed").exists(), timeout=120)
    await session.arefresh_from_db()
    assert f"cannot open bad.jsonl: line {last + 1}: wall 1e+300 is out of range" in session.status_note
    assert await TimelineFrame.objects.acount() == 0
    page = html.unescape((await client.get(response["Location"])).content.decode())
    assert f"line {last + 1}: wall 1e+300 is out of range" in page
    # Opening it again tries afresh (the failed session goes), rather than showing the failure.
    again = await client.post(
        "/recordings/open", {"recording": SimpleUploadedFile("bad.jsonl", path.read_bytes())}
    )
    assert again.status_code == 302 and again["Location"] != response["Location"]
    assert not await McpSession.objects.filter(pk=session.pk).aexists()
    newer = await McpSession.objects.aget()
    await wait_until(lambda: McpSession.objects.filter(pk=newer.pk, status="failed").exists(), timeout=120)


async def test_an_import_that_stopped_says_so_and_opening_the_file_again_starts_afresh() -> None:
    alice = await make_user()
    client = await logged_in_client(alice)
    content = lines(record(1), record(2))
    stopped = await McpSession.objects.acreate(
        owner=alice,
        team=await ateam_of(alice),
        name="old.jsonl",
        config={"imported_from": "old.jsonl"},
        status="importing",
        recording_sha256=hashlib.sha256(content).hexdigest(),
        import_progress={"frames": 500, "bytes": 10, "total": 100, "at": time.time() - 3600},
    )
    page = (await client.get(f"/s/{stopped.public_id}/")).content.decode()
    assert "The import of this recording stopped" in page and "every 1s" not in page
    response = await open_file(client, "old.jsonl", content)
    assert response.status_code == 302
    opened = await McpSession.objects.aget()
    assert opened.pk != stopped.pk and opened.status == "closed" and opened.last_seq == 2


async def test_a_line_longer_than_the_limit_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 30 MB single line (the limit lowered to 8 MiB) is refused as soon as the limit is read."""
    monkeypatch.setattr(recordings, "MAX_LINE", 8 << 20)
    client = await logged_in_client(await make_user())
    started = time.monotonic()
    page = refusal(await open_file(client, "one-line.jsonl", b'{"raw": "' + b"x" * 30_000_000))
    assert "line 1 is longer than 8 MiB" in page
    assert time.monotonic() - started < 10
    assert await McpSession.objects.acount() == 0


async def test_a_30_mb_frame_within_the_limit_is_stored_quickly() -> None:
    client = await logged_in_client(await make_user())
    started = time.monotonic()
    response = await open_file(client, "one-line.jsonl", lines(record(1, raw="x" * 30_000_000)))
    assert response.status_code == 302
    assert time.monotonic() - started < 20
    session = await McpSession.objects.aget()
    await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="closed").exists(), timeout=60)
    frame = await TimelineFrame.objects.aget(session=session)
    assert frame.size == 30_000_000


def peak_rss_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    assert match is not None
    return int(match[1]) // 1024


@pytest.mark.slow
def test_mcp_inspector_takes_a_big_upload_without_holding_it_in_memory_or_stalling_other_pages(
    tmp_path: Path,
) -> None:
    """Through daphne: Twisted would parse the whole multipart body in memory, on the event loop."""
    from support.app_process import LOGIN_LINE, inspector

    path = tmp_path / "big.jsonl"
    generate(path, 40)
    size_mb = path.stat().st_size / 1e6
    port = free_port()
    with inspector("--port", str(port), data_dir=tmp_path / "data") as (proc, output):
        login = output.wait_for(LOGIN_LINE)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as browser:
            page = browser.get(login["url"])
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf is not None
            browser.post("/auth/token", data={"token": login["token"], "csrfmiddlewaretoken": csrf[1]})
            token = browser.cookies["mcp_inspector_csrftoken"]
            before = peak_rss_mb(proc.pid)

            slowest, done = 0.0, threading.Event()

            def probe() -> None:
                nonlocal slowest
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as other:
                    while not done.is_set():
                        started = time.monotonic()
                        assert other.get("/healthz").status_code == 200
                        slowest = max(slowest, time.monotonic() - started)
                        done.wait(0.05)

            prober = threading.Thread(target=probe)
            prober.start()
            try:
                with path.open("rb") as file:
                    response = browser.post(
                        "/recordings/open",
                        files={"recording": ("big.jsonl", file, "application/x-ndjson")},
                        headers={"X-CSRFToken": token},
                    )
            finally:
                done.set()
                prober.join()
            grown = peak_rss_mb(proc.pid) - before
            assert response.status_code == 302, response.text[-500:]
            print(
                f"\n{size_mb:.0f} MB through daphne: peak RSS grew {grown} MB, "
                f"slowest /healthz {slowest:.2f} s"
            )
            # daphne_http hands the body over a piece at a time, from the file Twisted kept it in;
            # daphne itself would queue it all at once (about the file's size, for a moment).
            assert grown < 50, grown
            assert slowest < 2.0, slowest
            location = response.headers["location"]
            deadline = time.monotonic() + 120
            while "importing:" in browser.get(location + "import").text:
                assert time.monotonic() < deadline, "the import did not finish"
                done.wait(0.5)
            assert 'id="f-' in browser.get(location).text
