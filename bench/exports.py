"""11. Exports of a big session: JSON Lines and HTML of 100,000 frames, downloaded from the real app.

A session of 100,000 frames as a Streamable HTTP server records them (a ``tools/call`` request, its
progress and log notifications, the result with a page of text; now and then a resource update and a
warning verdict; HTTP transport details on every frame; a few notes), stored the way the recorder
stores them (``frame_row``, ``TimelineFrame.insert_rows``), and a second one 10× smaller. A real
``mcp-inspector --no-browser`` (``bench/apps.py``'s ``App``) serves them; a logged-in client downloads
each export over HTTP, streamed, counting the bytes: JSON Lines and HTML, redacted (the default a
person gets, judged) and ``?redacted=0`` (shown). Speed is bytes / wall seconds, the best of the
rounds. Memory: the app process's RSS (``/proc/<pid>/status`` VmRSS, sampled every 5 ms) during each
download, above what it was just before it; the most of the rounds.

Targets: JSON Lines ≥ 50 MB/s and HTML ≥ 20 MB/s, redacted; memory flat: the big download's growth
is under 32 MB and under 2× the small one's + 8 MB (a whole-session buffer would grow ~10×).

It runs in its own process (``python -m bench.exports``: prints one JSON object): the app's temporary
data folder is its ``INSPECTOR_DATA_DIR`` too, where it writes the sessions before downloading.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import threading
import time
from typing import Any

from bench import servers

JSONL_TARGET = 50.0  # MB/s, at least
HTML_TARGET = 20.0  # MB/s, at least
GROWTH_MB = 32.0  # the big download's RSS growth, under
GROWTH_FACTOR, GROWTH_SLACK = 2.0, 8.0  # ... and under FACTOR × the small one's + SLACK MB
URL = "https://mcp.example.com/mcp?api_key=URLSECRET123"
CONFIG = {
    "transport": "http",
    "url": URL,
    "headers": {"Authorization": "Bearer HEADERSECRET456"},
}
EXPORTS = {"jsonl": "export", "html": "export.html"}
VARIANTS = {"redacted": "", "raw": "?redacted=0"}
SENTENCE = (
    "the server returned a page of results for the query; each entry names a document, its <section> "
    'and a short "excerpt" with & and ünïcödé, a path like /var/lib/app/data and a number'
)
WORDS = SENTENCE.split(" ")  # noqa: SIM905  # one sentence reads better than a list of its words


def texts(i: int) -> str:
    """A tool result's text: about 800 characters of lines, as a search tool answers."""
    lines = []
    for n in range(8):
        words = " ".join(WORDS[(i + n + k) % len(WORDS)] for k in range(14))
        lines.append(f"{n + 1}. doc-{i}-{n}: {words} ({(i * 7 + n) % 997})")
    return "\n".join(lines)


def session_frames(count: int) -> list[Any]:
    """``count`` frames of a session with a Streamable HTTP server, in the order they were recorded."""
    from sessions.engine import Frame

    frames: list[Any] = []
    out_http = {
        "method": "POST",
        "url": URL,
        "headers": {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Mcp-Session-Id": "3f2c9a8e-51b4-4c0d-9d7e-2b1f0e6a7c55",
            "Mcp-Protocol-Version": "2025-06-18",
            "Authorization": "[masked]",
        },
    }
    call = 0
    while len(frames) < count:
        call += 1
        seq = len(frames) + 1
        wall = 1_700_000_000.0 + seq * 0.01

        def add(
            kind: str, direction: str, body: Any, transport: dict[str, Any], wall: float = wall, **facts: Any
        ) -> Any:
            frame = Frame(
                kind,  # type: ignore[arg-type]
                direction,  # type: ignore[arg-type]
                json.dumps(body).encode() if not isinstance(body, bytes) else body,
                transport=transport,
                wall=wall + len(frames) * 0.001,
                mono=100.0 + len(frames) * 0.001,
                seq=len(frames) + 1,
                message=body if isinstance(body, dict) else None,
            )
            for name, value in facts.items():
                setattr(frame, name, value)
            frames.append(frame)
            return frame

        def sse(n: int, call: int = call) -> dict[str, Any]:
            return {"http": {"status": 200, "stream": "POST", "event": "message", "event_id": f"{call}-{n}"}}

        request = {
            "jsonrpc": "2.0",
            "id": call,
            "method": "tools/call",
            "params": {
                "name": "search_docs",
                "arguments": {"query": f"how do I configure item {call}?", "limit": 8},
                "_meta": {"progressToken": call},
            },
        }
        add(
            "message",
            "out",
            request,
            {"http": out_http},
            rpc_kind="request",
            method="tools/call",
            rpc_id=call,
        )
        progress = {"progressToken": call, "progress": 50, "total": 100, "message": "searching the index"}
        add(
            "message",
            "in",
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress},
            sse(1),
            rpc_kind="notification",
            method="notifications/progress",
        )
        log = {"level": "info", "logger": "search", "data": {"msg": f"searched 1,234 documents for {call}"}}
        add(
            "message",
            "in",
            {"jsonrpc": "2.0", "method": "notifications/message", "params": log},
            sse(2),
            rpc_kind="notification",
            method="notifications/message",
        )
        if call % 5 == 0:
            uri = f"file:///var/lib/app/docs/{call}.md"
            add(
                "message",
                "in",
                {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}},
                sse(3),
                rpc_kind="notification",
                method="notifications/resources/updated",
            )
        result = {"content": [{"type": "text", "text": texts(call)}], "isError": False}
        answer = add(
            "message",
            "in",
            {"jsonrpc": "2.0", "id": call, "result": result},
            sse(4),
            rpc_kind="result",
            method="tools/call",
            rpc_id=call,
            pair_seq=seq,
            latency_ms=12.5 + call % 40,
        )
        if call % 10 == 0:
            answer.flag("tool-result-no-structured", "warning", "the tool declares an outputSchema <object>")
    return frames[:count]


def build(name: str, count: int) -> str:
    """A session of ``count`` frames owned by the local person (their personal team); its public id."""
    from django.db import connection

    from sessions.frames import frame_row
    from sessions.models import McpSession, TimelineFrame
    from sessions.teams.access import personal_team
    from sessions.teams.logins import local_user
    from sessions.teams.models import Note

    user = local_user()
    session = McpSession.objects.create(
        owner=user, team=personal_team(user), name=name, config=CONFIG, status="closed"
    )
    frames = session_frames(count)
    for first in range(0, count, 2000):
        rows = [frame_row(frame, 0) for frame in frames[first : first + 2000]]
        TimelineFrame.insert_rows(session.pk, rows)
    McpSession.objects.filter(pk=session.pk).update(last_seq=count)
    for seq in range(4, count, max(count // 20, 1)):
        note = Note.objects.create(session=session, frame_seq=seq, author=user, text=f"look at <this> #{seq}")
        Note.objects.create(session=session, frame_seq=seq, author=user, text="agreed & done", reply_to=note)
    connection.close()
    return str(session.public_id)


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Peak:
    """The highest RSS of a process while inside the block, sampled from a thread every 5 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.before, self.peak = pid, 0, 0
        self._done = threading.Event()

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, rss_kb(self.pid))

    def __enter__(self) -> Peak:
        self.before = self.peak = rss_kb(self.pid)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, rss_kb(self.pid))

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.before) / 1024


async def download(person: Any, path: str, pid: int) -> tuple[float, int, float, bytes]:
    """Seconds, bytes, the app's RSS growth (MB) and the first bytes of one streamed download."""
    size, head = 0, b""
    with Peak(pid) as peak:
        started = time.perf_counter()
        async with person.http.stream("GET", path) as response:
            if response.status_code != 200:
                raise RuntimeError(f"GET {path} answered {response.status_code}")
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if len(head) < 4096:
                    head += chunk[:4096]
        seconds = time.perf_counter() - started
    return seconds, size, peak.growth_mb, head


async def measure(frames: int, rounds: int) -> dict[str, Any]:
    from bench.apps import Person, running

    step = lambda what: print(f"  … exports: {what}", file=sys.stderr, flush=True)  # noqa: E731
    async with running("exports") as app:
        os.environ["INSPECTOR_DATA_DIR"] = str(app.dir)  # this process writes into the app's database
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
        import django

        django.setup()
        async with Person(app) as person:  # the local person and their team exist from here on
            sizes = {"small": max(frames // 10, 1), "big": frames}
            ids = {}
            for label, count in sizes.items():
                step(f"storing a session of {count:,} frames")
                ids[label] = await asyncio.to_thread(build, f"export bench {label}", count)
            results: dict[str, Any] = {}
            for fmt, path in EXPORTS.items():
                for variant, query in VARIANTS.items():
                    row: dict[str, Any] = {"frames": frames, "small_frames": sizes["small"]}
                    best = {"small": float("inf"), "big": float("inf")}
                    growth = {"small": 0.0, "big": 0.0}
                    url = {label: f"/s/{public_id}/{path}{query}" for label, public_id in ids.items()}
                    await download(person, url["small"], app.proc.pid)  # warm: templates, rules, imports
                    step(f"{fmt} {variant}: {rounds} rounds of {sizes['small']:,} then {frames:,} frames")
                    for _ in range(rounds):
                        for label in ("small", "big"):
                            seconds, size, grew, head = await download(person, url[label], app.proc.pid)
                            best[label] = min(best[label], seconds)
                            growth[label] = max(growth[label], grew)
                            row[f"{label}_mb"] = size / 1e6
                            if variant == "redacted" and (
                                b"URLSECRET123" in head or b"HEADERSECRET456" in head
                            ):
                                raise SystemExit("bench: the redacted export holds a secret")
                    row["seconds"] = best["big"]
                    row["mb_per_s"] = row["big_mb"] / best["big"]
                    row["small_mb_per_s"] = row["small_mb"] / best["small"]
                    row["growth_mb"] = growth["big"]
                    row["small_growth_mb"] = growth["small"]
                    results[f"{fmt} {variant}"] = row
            results["app_rss_mb"] = rss_kb(app.proc.pid) / 1024
    return results


def child(frames: int, rounds: int) -> None:
    results = asyncio.run(measure(frames, rounds))
    print(json.dumps(results))


def run(frames: int = 100_000, rounds: int = 2) -> dict[str, Any]:
    """The measurement, in a child process (Django and its database stay out of this one)."""
    return servers.child_json(
        "bench.exports", "--frames", str(frames), "--rounds", str(rounds), show_stderr=True
    )


def judge(results: dict[str, Any]) -> bool:
    """The redacted exports (what a person gets by default) are judged; the raw ones are shown."""
    ok = True
    for fmt, target in (("jsonl", JSONL_TARGET), ("html", HTML_TARGET)):
        row = results[f"{fmt} redacted"]
        row["target"] = target
        flat = row["growth_mb"] < GROWTH_MB
        flat &= row["growth_mb"] < GROWTH_FACTOR * row["small_growth_mb"] + GROWTH_SLACK
        row["flat"] = flat
        row["pass"] = row["mb_per_s"] >= target and flat
        ok &= row["pass"]
    return ok


def print_table(results: dict[str, Any]) -> None:
    rows = {name: row for name, row in results.items() if isinstance(row, dict)}
    first = next(iter(rows.values()))
    flat = (
        f"RSS growth < {GROWTH_MB:.0f} MB and < {GROWTH_FACTOR:.0f}× the small one's + {GROWTH_SLACK:.0f} MB"
    )
    print(
        f"\n11. exports of a {first['frames']:,}-frame session over HTTP, and of {first['small_frames']:,}"
        f" (small); targets, redacted: JSON Lines ≥ {JSONL_TARGET:.0f} MB/s, HTML ≥ {HTML_TARGET:.0f} MB/s,"
        f" {flat}"
    )
    head = f"{'export':<20}{'MB':>8}{'s':>7}{'MB/s':>7}{'target':>8}{'small':>7}{'RSS +MB':>9}{'small':>7}"
    print(f"   {head}  verdict")
    for name, row in rows.items():
        verdict = "" if "pass" not in row else "PASS" if row["pass"] else "FAIL"
        target = f"≥ {row['target']:.0f}" if "target" in row else ""
        print(
            f"     {name:<18}{row['big_mb']:>8.1f}{row['seconds']:>7.2f}{row['mb_per_s']:>7.1f}{target:>8}"
            f"{row['small_mb_per_s']:>7.1f}{row['growth_mb']:>9.1f}{row['small_growth_mb']:>7.1f}  {verdict}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.exports", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    if options.frames < 10:
        parser.error("--frames: at least 10")
    child(options.frames, options.rounds)
    shutil.rmtree(os.environ["INSPECTOR_DATA_DIR"], ignore_errors=True)
