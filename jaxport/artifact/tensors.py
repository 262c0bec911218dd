"""Bound tensors inside an artifact: how they are laid out in the weights member, and zero-copy views of them.

Every tensor is stored raw, little-endian, C order, at an offset that is a multiple of ``layout.ALIGNMENT`` inside
one member (``weights.bin``); the manifest's ``weights.tensors`` index gives each one's dtype, shape, offset, size
and sha256 (specs/FORMAT.md, "Weights"). A sub-byte tensor (``int4``, ``uint4``, ``float4_e2m1fn``) is stored packed,
two elements per byte (``arrayfiles.subbyte``): read back, it is a new array rather than a view. numpy is imported
inside the functions that need it.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import dtypes
from ..arrayfiles import subbyte
from ..errors import FormatError, SpecError
from .layout import ALIGNMENT
from .model import StoredTensor, replace


@dataclass(frozen=True)
class Tensor:
    name: str
    array: Any  # a numpy array, C-contiguous, little-endian
    #: The stored bytes of a sub-byte tensor, packed once when first asked for (``stored``).
    _packed: Any = field(default=None, repr=False, compare=False)

    @property
    def nbytes(self) -> int:
        """The bytes the tensor takes in the weights member (packed for a sub-byte dtype)."""
        d = dtypes.from_numpy(self.array.dtype)
        if d is not None and d.packed:
            return dtypes.stored_nbytes(d.name, int(self.array.size))
        return int(self.array.nbytes)

    def stored(self) -> Any:
        """The tensor's bytes as the weights member stores them: the array itself, or its packed bytes."""
        d = dtypes.from_numpy(self.array.dtype)
        if d is None or not d.packed:
            return self.array
        if self._packed is None:
            object.__setattr__(self, "_packed", subbyte.pack(self.array))
        return self._packed


#: The digest a :class:`PackedWeights` shows while its digests are still being computed (as long as a real one).
PENDING_SHA256 = "0" * 64


@dataclass
class PackedWeights:
    """The weights member to write: its index for the manifest, its size and digest, and how to write it.

    From ``pack(..., wait=False)`` the digests may still be computing (``pending``): ``sha256`` and the index's
    ``sha256`` fields hold ``PENDING_SHA256`` until ``complete()`` waits for them and fills them in; the layout
    (every offset and size) is final from the start, so the member's bytes can be written meanwhile. ``crc32`` (for
    the zip headers) is computed when first asked for, unless the writer that wrote the bytes set it."""

    index: dict[str, StoredTensor]
    size: int
    sha256: str
    tensors: list[Tensor]
    _digests: _Digests | None = field(default=None, repr=False, compare=False)
    _crc32: int | None = field(default=None, repr=False, compare=False)

    @property
    def pending(self) -> bool:
        """Whether the digests are still to be filled in (``complete``)."""
        return self._digests is not None

    def complete(self) -> None:
        """Wait for the digests, and fill them in."""
        if self._digests is None:
            return
        per_tensor, whole = self._digests.result()
        for t, digest in zip(self.tensors, per_tensor):
            self.index[t.name] = replace(self.index[t.name], sha256=digest)
        self.sha256, self._digests = whole, None

    @property
    def crc32(self) -> int:
        """The member's CRC-32."""
        if self._crc32 is None:
            crc = 0
            for chunk in self.chunks():
                crc = zlib.crc32(chunk, crc)
            self._crc32 = crc
        return self._crc32

    @crc32.setter
    def crc32(self, value: int) -> None:
        self._crc32 = value

    def chunks(self) -> Iterator[bytes | memoryview]:
        pos = 0
        for t in self.tensors:
            start = self.index[t.name].offset
            if start > pos:
                yield b"\0" * (start - pos)
            yield _bytes(t)
            pos = start + t.nbytes
        if self.size > pos:
            yield b"\0" * (self.size - pos)


def _bytes(t: Tensor) -> memoryview:
    """A tensor's bytes, without a copy."""
    import numpy as np

    return memoryview(t.stored().reshape(-1).view(np.uint8))  # type: ignore[arg-type]


def digest(t: Tensor) -> str:
    """The sha256 of a tensor's bytes, as the manifest's weights index records it."""
    import hashlib

    return hashlib.sha256(_bytes(t)).hexdigest()


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


#: While the digests of :func:`prepare` run, the interpreter's switch interval (seconds) is at most this.
_SWITCH_INTERVAL = 1e-4
_switch_lock = threading.Lock()
_switch_saved: list[tuple[float, float]] = []  # (found, set) by each digest thread still running


class _Digests:
    """The sha256 of every tensor and of the whole member, computed in threads (hashlib releases the GIL for all but
    the smallest buffers), a whole tensor per call.

    :func:`prepare` starts one thread that reads each tensor once for both while the exporter traces the program on
    the other core. A thread that returns from a call waits for the GIL until the tracing thread gives it up, which
    it does only when the interpreter's switch interval (5 ms by default) runs out: at hundreds of calls that
    stalled the digests for most of the tracing. So while that thread runs, the switch interval is lowered to
    ``_SWITCH_INTERVAL`` (and restored when it ends). :func:`pack` without prepared digests has nothing else to do:
    it runs one thread per digest."""

    def __init__(self, layout: _Layout, background: bool):
        self.layout = layout
        self._whole = hashlib.sha256()
        self._tensors: list[Any] = [hashlib.sha256() for _ in layout.ordered]
        self._errors: list[BaseException] = []
        work = [self._both] if background else [self._per_tensor, self._member]
        if background:
            _lower_switch_interval()
        self._threads = [threading.Thread(target=self._run, args=(w, background), daemon=True,
                                          name="jaxport-weights-digests") for w in work]
        for thread in self._threads:
            thread.start()

    def _run(self, work: Any, background: bool) -> None:
        try:
            work()
        except BaseException as e:  # noqa: BLE001 - raised again by result()
            self._errors.append(e)
        finally:
            if background:
                _restore_switch_interval()

    def _pieces(self) -> Iterator[tuple[Any, bytes | memoryview]]:
        """The member's bytes in order: (each tensor's digest, its bytes), with (None, padding) between them."""
        pos = 0
        for t, offset, h in zip(self.layout.ordered, self.layout.offsets, self._tensors):
            if offset > pos:
                yield None, bytes(offset - pos)
            yield h, _bytes(t)
            pos = offset + t.nbytes

    def _both(self) -> None:
        whole = self._whole.update
        for h, data in self._pieces():
            if h is not None:
                h.update(data)
            whole(data)

    def _per_tensor(self) -> None:
        for h, data in self._pieces():
            if h is not None:
                h.update(data)

    def _member(self) -> None:
        whole = self._whole.update
        for _, data in self._pieces():
            whole(data)

    def result(self) -> tuple[list[str], str]:
        """Wait for the threads: the tensors' sha256 in order, and the member's."""
        for thread in self._threads:
            thread.join()
        if self._errors:
            raise self._errors[0]
        return [h.hexdigest() for h in self._tensors], self._whole.hexdigest()


def _lower_switch_interval() -> None:
    with _switch_lock:
        now = sys.getswitchinterval()
        if not _switch_saved and now > _SWITCH_INTERVAL:
            sys.setswitchinterval(_SWITCH_INTERVAL)
        _switch_saved.append((now, sys.getswitchinterval()))


def _restore_switch_interval() -> None:
    """Put back the interval the first digest thread found, once the last one ends (unless it was changed since)."""
    with _switch_lock:
        found, lowered = _switch_saved.pop()  # the last one left is the first one pushed
        if not _switch_saved and sys.getswitchinterval() == lowered:
            sys.setswitchinterval(found)


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
        _PREPARED[layout.key] = _Digests(layout, background=True)


def pack(tensors: list[Tensor], wait: bool = True) -> PackedWeights:
    """Lay out tensors (deduplicated by name) and compute every digest (or take those :func:`prepare` started for
    the same tensors). Without ``wait``, the digests may still be computing when it returns (``PackedWeights``'s
    ``pending`` and ``complete``)."""
    layout = _layout(tensors)
    digests = _PREPARED.pop(layout.key, None) or _Digests(layout, background=False)
    index: dict[str, StoredTensor] = {}
    for t, offset in zip(layout.ordered, layout.offsets):
        d = dtypes.from_numpy(t.array.dtype)
        assert d is not None
        index[t.name] = StoredTensor(d.name, tuple(int(n) for n in t.array.shape), offset, t.nbytes, PENDING_SHA256)
    packed = PackedWeights(index, layout.size, PENDING_SHA256, layout.ordered, digests)
    if wait:
        packed.complete()
    return packed


def tensor_views(buffer: memoryview, index: Mapping[str, StoredTensor], where: str) -> dict[str, Any]:
    """Zero-copy numpy views of every tensor in the weights member (read-only, backed by the file's mmap), from its
    index (``Weights.tensors``)."""
    import numpy as np

    out: dict[str, Any] = {}
    size = len(buffer)
    for name, t in index.items():
        d = dtypes.BY_NAME[t.dtype]
        count = 1
        for n in t.shape:
            count *= n
        nbytes, offset = dtypes.stored_nbytes(d.name, count), t.offset
        if nbytes != t.nbytes or offset < 0 or offset + nbytes > size:
            raise FormatError(f"{where}: tensor {name!r}: shape {list(t.shape)} x {d.name} is {nbytes} bytes at "
                              f"offset {offset}, which does not fit the {size}-byte weights member as declared "
                              f"({t.nbytes} bytes).")
        if d.packed:  # unpacked into new memory, from the bytes that were checked; read-only as a view is
            arr = subbyte.unpack(buffer[offset:offset + nbytes], d.name, count)
            arr.flags.writeable = False
        else:
            arr = np.frombuffer(buffer, dtype=dtypes.to_numpy(d.name), count=count, offset=offset)
        out[name] = arr.reshape(t.shape)
    return out
