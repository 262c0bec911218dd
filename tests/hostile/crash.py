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
