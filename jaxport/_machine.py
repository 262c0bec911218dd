"""Facts about this machine that bound what jaxport reads into memory and lets a child process use."""

from __future__ import annotations

import os


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where it cannot be known."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
