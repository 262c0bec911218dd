"""Bound tensors inside an artifact: how they are laid out in the weights member, and zero-copy views of them.

Every tensor is stored raw, little-endian, C order, at an offset that is a multiple of ``layout.ALIGNMENT`` inside
one member (``weights.bin``); the manifest's ``weights.tensors`` index gives each one's dtype, shape, offset, size
and sha256 (specs/FORMAT.md, "Weights"). numpy is imported inside the functions that need it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..errors import FormatError, SpecError
from .layout import ALIGNMENT


@dataclass(frozen=True)
class Tensor:
    name: str
    array: Any  # a numpy array, C-contiguous, little-endian

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)



@dataclass
class PackedWeights:
    """The weights member to write: its index for the manifest, its size and digest, and how to write it."""

    index: dict[str, dict[str, Any]]
    size: int
    sha256: str
    tensors: list[Tensor]

    def chunks(self) -> Iterator[bytes | memoryview]:
        import numpy as np

        pos = 0
        for t in self.tensors:
            start = self.index[t.name]["offset"]
            if start > pos:
                yield b"\0" * (start - pos)
            yield memoryview(t.array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
            pos = start + t.nbytes
        if self.size > pos:
            yield b"\0" * (self.size - pos)


def pack(tensors: list[Tensor]) -> PackedWeights:
    """Lay out tensors (deduplicated by name) and compute every digest in one pass."""
    import numpy as np

    unique: dict[str, Tensor] = {}
    for t in tensors:
        if t.name in unique:
            if not np.array_equal(unique[t.name].array, t.array) or unique[t.name].array.dtype != t.array.dtype:
                raise SpecError(f"two bound values are both named {t.name!r} but differ; rename one argument.")
            continue
        unique[t.name] = t
    ordered = [unique[n] for n in sorted(unique)]
    index: dict[str, dict[str, Any]] = {}
    whole = hashlib.sha256()
    pos = 0
    for t in ordered:
        pad = (-pos) % ALIGNMENT
        if pad:
            whole.update(b"\0" * pad)
            pos += pad
        data = memoryview(t.array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
        whole.update(data)
        d = dtypes.from_numpy(t.array.dtype)
        assert d is not None
        index[t.name] = {"dtype": d.name, "shape": list(t.array.shape), "offset": pos, "nbytes": t.nbytes,
                         "sha256": hashlib.sha256(data).hexdigest()}
        pos += t.nbytes
    return PackedWeights(index, pos, whole.hexdigest(), ordered)


def tensor_views(buffer: memoryview, index: dict[str, dict[str, Any]], where: str) -> dict[str, Any]:
    """Zero-copy numpy views of every tensor in the weights member (read-only, backed by the file's mmap)."""
    import numpy as np

    out: dict[str, Any] = {}
    size = len(buffer)
    for name, t in index.items():
        d = dtypes.BY_NAME[t["dtype"]]
        count = 1
        for n in t["shape"]:
            count *= n
        nbytes, offset = count * d.itemsize, t["offset"]
        if nbytes != t["nbytes"] or offset < 0 or offset + nbytes > size:
            raise FormatError(f"{where}: tensor {name!r}: shape {t['shape']} x {d.name} is {nbytes} bytes at "
                              f"offset {offset}, which does not fit the {size}-byte weights member as declared "
                              f"({t['nbytes']} bytes).")
        arr = np.frombuffer(buffer, dtype=dtypes.to_numpy(d.name), count=count, offset=offset)
        out[name] = arr.reshape(t["shape"])
    return out
