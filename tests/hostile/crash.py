"""Stand-ins for native code that crashes, run as the target of an isolated child in tests (``isolate.run``)."""

from __future__ import annotations

import ctypes
import os


def segfault() -> None:
    """Read address 0, as a reader that trusts an offset in a hostile file does."""
    ctypes.string_at(0)


def abort() -> None:
    """Abort, as a failed C++ check does."""
    os.abort()


def allocate() -> None:
    """Ask for 4 GiB, as a reader that trusts a size field does."""
    bytearray(4 << 30)


def spin() -> None:
    """Loop forever, as a reader on a cyclic structure does."""
    while True:
        pass
