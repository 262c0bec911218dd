"""A read-only file object over an artifact's bytes, for Python's ``zipfile``: the container reader
(``container``) hands it the zip directory only after it has bounded and checked the end records itself, and reads
every byte through the artifact's descriptor (``container._FileBytes``: ``len`` and slices), never a memory map."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any


class ReadOnly:
    """A minimal file object over the artifact's bytes (``len`` and slices) for zipfile, which needs seek/tell/read."""

    def __init__(self, data: Any):
        self._data, self._pos = data, 0

    def seek(self, offset: int, whence: int = 0) -> int:
        base = 0 if whence == 0 else self._pos if whence == 1 else len(self._data)
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n is None or n < 0 else min(len(self._data), self._pos + n)
        out, self._pos = (self._data[self._pos:end] if end > self._pos else b""), end
        return out

    def seekable(self) -> bool:
        return True
