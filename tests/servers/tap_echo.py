"""A stdio "server" for the tap's tests: keeps every byte it receives and sends each line straight back.

    python tap_echo.py RECEIVED_FILE EXIT_CODE

Says one line on stderr when it starts; writes what stdin brings to RECEIVED_FILE, byte for byte, and
the same bytes to stdout; exits with EXIT_CODE when stdin ends.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    received, code = sys.argv[1], int(sys.argv[2])
    os.write(2, "tap_echo: started, ünïcode on stderr\n".encode())
    with open(received, "wb", buffering=0) as kept:
        while chunk := os.read(0, 65536):
            kept.write(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(1, view) :]
    return code


if __name__ == "__main__":
    sys.exit(main())
