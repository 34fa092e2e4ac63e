"""Another local user gets nothing from a tap's control channel: not through the private folder, and
not even with a socket anyone could reach (``SO_PEERCRED``). The other user is a forked child that
gave up root for ``nobody``."""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inspector.tap._control import ControlServer, bind_path
from inspector.tap._gate import Traffic

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.getuid() != 0, reason="becoming another user needs root"),
]

NOBODY = 65534


def as_nobody(path: str) -> str:
    """What a process of another user gets when it sends ``state`` to ``path`` (forked, then setuid)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        outcome = "nothing"
        try:
            os.close(read)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(5)
                address, _folder = bind_path(path)  # the descriptor dies with the child
                sock.connect(address)
                sock.sendall(json.dumps({"op": "state"}).encode() + b"\n")
                answer = sock.recv(65536)
                outcome = "answered" if answer else "closed unanswered"
        except PermissionError:
            outcome = "no permission"
        except (ConnectionResetError, BrokenPipeError):  # closed with the command unread
            outcome = "closed unanswered"
        except OSError as exc:
            outcome = f"error {exc}"
        finally:
            os.write(write, outcome.encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        outcome = pipe.read().decode()
    os.waitpid(pid, 0)
    return outcome


@pytest.fixture
def traffic() -> Traffic:
    return Traffic(queue.SimpleQueue(), None, None)


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder anyone may enter (the tap's own never is)."""
    folder = Path(tempfile.mkdtemp(prefix="tap-peers-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_another_user_cannot_reach_the_socket_in_the_private_folder(tmp_path: Path, traffic: Traffic) -> None:
    folder = Path(tempfile.mkdtemp(prefix="tap-private-", dir="/tmp"))  # 0700, as the data folder's taps/
    try:
        server = ControlServer(str(folder / "1700000000000-1-0123abcd.sock"), traffic)
        assert server.start() is None
        assert as_nobody(server.path) == "no permission"
        server.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_another_user_that_reaches_the_socket_is_closed_unanswered(
    open_folder: Path, traffic: Traffic
) -> None:
    server = ControlServer(str(open_folder / "1700000000000-1-0123abcd.sock"), traffic)
    assert server.start() is None
    os.chmod(server.path, 0o777)  # as if the folder and the socket were anyone's: the peer check remains
    try:
        assert as_nobody(server.path) == "closed unanswered"
        traffic.set_rules([{"method": "x"}])  # and changed nothing
        with socket.socket(socket.AF_UNIX) as sock:  # while its own user is answered
            sock.settimeout(5)
            address, folder = bind_path(server.path)
            sock.connect(address)
            if folder is not None:
                os.close(folder)
            sock.sendall(b'{"op": "state"}\n')
            answer: dict[str, Any] = json.loads(sock.makefile("rb").readline())
        assert answer["ok"] and answer["state"]["rules"][0]["method"] == "x"
    finally:
        server.close()
