"""Bound tensors inside an artifact: how they are laid out in the weights member, and zero-copy views of them.

Every tensor is stored raw, little-endian, C order, at an offset that is a multiple of ``layout.ALIGNMENT`` inside
one member (``weights.bin``); the manifest's ``weights.tensors`` index gives each one's dtype, shape, offset, size
and sha256 (specs/FORMAT.md, "Weights"). numpy is imported inside the functions that need it.
"""

from __future__ import annotations

import hashlib
import threading
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
        pos = 0
        for t in self.tensors:
            start = self.index[t.name]["offset"]
            if start > pos:
                yield b"\0" * (start - pos)
            yield _bytes(t)
            pos = start + t.nbytes
        if self.size > pos:
            yield b"\0" * (self.size - pos)


def _bytes(t: Tensor) -> memoryview:
    """A tensor's bytes, without a copy."""
    import numpy as np

    return memoryview(t.array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]


#: Bytes hashed per step: small enough to stay in the CPU's cache for the second digest, large enough that hashlib
#: releases the GIL for nearly all the work.
_CHUNK = 1 << 20


@dataclass(frozen=True)
class _Layout:
    """Tensors deduplicated by name, sorted, with their aligned offsets and the member's size."""

    ordered: list[Tensor]
    offsets: list[int]
    size: int

    @property
    def key(self) -> tuple[tuple[str, int, int], ...]:
        """What the digests depend on: each tensor's name, array (by identity) and offset."""
        return tuple((t.name, id(t.array), o) for t, o in zip(self.ordered, self.offsets))


def _layout(tensors: list[Tensor]) -> _Layout:
    import numpy as np

    unique: dict[str, Tensor] = {}
    for t in tensors:
        if t.name in unique:
            if not np.array_equal(unique[t.name].array, t.array) or unique[t.name].array.dtype != t.array.dtype:
                raise SpecError(f"two bound values are both named {t.name!r} but differ; rename one argument.")
            continue
        unique[t.name] = t
    ordered = [unique[n] for n in sorted(unique)]
    offsets, pos = [], 0
    for t in ordered:
        pos += (-pos) % ALIGNMENT
        offsets.append(pos)
        pos += t.nbytes
    return _Layout(ordered, offsets, pos)


class _Digests:
    """The sha256 of every tensor and of the whole member, each tensor's bytes read once per digest, in threads
    (hashlib releases the GIL): started ahead by :func:`prepare`, one thread computes both while the exporter traces
    the program on the other core; computed by :func:`pack` itself, two threads (one per digest) while it waits."""

    def __init__(self, layout: _Layout, threads: int):
        self.layout = layout
        self._whole = hashlib.sha256()
        self._tensors: list[Any] = [hashlib.sha256() for _ in layout.ordered]
        self._errors: list[BaseException] = []
        work = [(True, True)] if threads == 1 else [(True, False), (False, True)]
        self._threads = [threading.Thread(target=self._run, args=w, daemon=True, name="jaxport-weights-sha256")
                         for w in work]
        for thread in self._threads:
            thread.start()

    def _run(self, whole: bool, tensors: bool) -> None:
        try:
            pos = 0
            for t, offset, h in zip(self.layout.ordered, self.layout.offsets, self._tensors):
                if whole and offset > pos:
                    self._whole.update(b"\0" * (offset - pos))
                data = _bytes(t)
                for start in range(0, len(data), _CHUNK):
                    chunk = data[start:start + _CHUNK]
                    if whole:
                        self._whole.update(chunk)
                    if tensors:
                        h.update(chunk)
                pos = offset + t.nbytes
        except BaseException as e:  # noqa: BLE001 - raised again by result()
            self._errors.append(e)

    def result(self) -> tuple[list[str], str]:
        """Wait for the threads: the tensors' sha256 in order, and the member's."""
        for thread in self._threads:
            thread.join()
        if self._errors:
            raise self._errors[0]
        return [h.hexdigest() for h in self._tensors], self._whole.hexdigest()


#: Digests started by :func:`prepare`, by the layout they are of.
_PREPARED: dict[tuple[tuple[str, int, int], ...], _Digests] = {}


def prepare(tensors: list[Tensor]) -> None:
    """Start computing, in the background, the digests that :func:`pack` of these tensors needs (``export`` calls it
    once the bound values are loaded, so that hashing overlaps tracing). A layout that cannot be packed is left for
    ``pack`` to report."""
    try:
        layout = _layout(tensors)
    except SpecError:
        return
    if layout.ordered and layout.key not in _PREPARED:
        _PREPARED.clear()  # one export at a time: an export that failed before packing leaves nothing held
        _PREPARED[layout.key] = _Digests(layout, threads=1)


def pack(tensors: list[Tensor]) -> PackedWeights:
    """Lay out tensors (deduplicated by name) and compute every digest (or take those :func:`prepare` started for
    the same tensors)."""
    layout = _layout(tensors)
    digests = _PREPARED.pop(layout.key, None) or _Digests(layout, threads=2)
    per_tensor, whole = digests.result()
    index: dict[str, dict[str, Any]] = {}
    for t, offset, digest in zip(layout.ordered, layout.offsets, per_tensor):
        d = dtypes.from_numpy(t.array.dtype)
        assert d is not None
        index[t.name] = {"dtype": d.name, "shape": list(t.array.shape), "offset": offset, "nbytes": t.nbytes,
                         "sha256": digest}
    return PackedWeights(index, layout.size, whole, layout.ordered)


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
