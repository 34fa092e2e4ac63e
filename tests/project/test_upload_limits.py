"""An upload over the limit, sent to a running app: refused before it is read, in bounded memory, with
one line in the log, whether its size is declared or it comes chunked with no length at all."""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from support.app_process import LOGIN_LINE, inspector
from support.processes import free_port

MIB = 1 << 20
UPLOAD = 1100 * MIB  # what took the app to 1.26 GiB before it was refused
BLOCK = b"x" * MIB


def memory_kib(pid: int, field: str) -> int:
    match = re.search(rf"{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert match is not None
    return int(match[1])


class Upload:
    """A client that streams UPLOAD bytes of made-up body (never held whole) while it reads the answer,
    as a browser does: it stops sending once the answer is in."""

    def __init__(self, port: int, *, chunked: bool) -> None:
        self.chunked = chunked
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sent = 0
        self.answered = threading.Event()
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {UPLOAD}"
        self.head = (
            f"POST /recordings/open HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{framing}\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\n\r\n"
        ).encode()

    def _send(self) -> None:
        piece = b"%x\r\n%s\r\n" % (len(BLOCK), BLOCK) if self.chunked else BLOCK
        try:
            while self.sent < UPLOAD and not self.answered.is_set():
                self.sock.sendall(piece)
                self.sent += len(BLOCK)
        except OSError:  # the server closed the connection: what it answered is still to be read
            pass

    def run(self, timeout: float = 60.0) -> tuple[int, bytes, float]:
        """Send, and read the answer: its status, its body and how long it took."""
        started = time.monotonic()
        self.sock.sendall(self.head)
        sender = threading.Thread(target=self._send, daemon=True)
        sender.start()
        self.sock.settimeout(timeout)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < self._length(answer):
            data = self.sock.recv(65536)
            if not data:
                break
            answer += data
        took = time.monotonic() - started
        self.answered.set()
        sender.join(timeout=30)
        self.sock.close()
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
        return status, answer.partition(b"\r\n\r\n")[2], took

    @staticmethod
    def _length(answer: bytes) -> int:
        match = re.search(rb"\r\nContent-Length: (\d+)\r\n", answer.partition(b"\r\n\r\n")[0], re.I)
        return int(match[1]) if match else 1 << 62


@pytest.mark.slow
def test_a_1100_mib_upload_is_refused_unread_in_bounded_memory_declared_or_chunked(tmp_path: Path) -> None:
    port = free_port()
    with inspector("--port", str(port), data_dir=tmp_path / "data") as (proc, output):
        output.wait_for(LOGIN_LINE)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        before = memory_kib(proc.pid, "VmRSS")
        figures = []
        for chunked in (False, True):
            status, body, took = (upload := Upload(port, chunked=chunked)).run()
            assert status == 413, body
            assert b"The request is larger than 1026 MiB" in body
            figures.append((chunked, upload.sent, took))
        grown = memory_kib(proc.pid, "VmHWM") - before
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    text = output.finish()
    runs = [
        f"{'chunked' if c else 'declared'}: {s >> 20} MiB sent, answered in {t:.2f} s" for c, s, t in figures
    ]
    print(f"\npeak RSS grew {grown} KiB; " + "; ".join(runs))
    assert grown < 50 * 1024, grown
    (_, declared_sent, declared_took), (_, chunked_sent, _) = figures
    assert declared_took < 2.0, declared_took  # refused on its headers
    assert chunked_sent >= 1026 * MIB  # the chunked one was read up to the limit, not further
    refusals = [line for line in text.splitlines() if "Refused POST /recordings/open" in line]
    assert len(refusals) == 2 and "Traceback" not in text, text[-3000:]
