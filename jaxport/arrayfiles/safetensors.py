"""``.safetensors`` files: the one reader (weights a spec binds, ``call``'s inputs and reference outputs) and the one
writer (``call -o``, ``extract --weights``). Every dtype jaxport stores is read and written, ``BF16`` and ``F8_*``
included, which ``.npy`` can only store as raw void bytes (and ``safetensors.numpy`` cannot represent). ``F4``
(``float4_e2m1fn``) is packed two elements per byte, the first in the low nibble (PyTorch's ``float4_e2m1fn_x2``,
``arrayfiles.subbyte``), and a tensor of it holds an even number of elements (the format's rule: every tensor is whole
bytes); ``int4`` and ``uint4`` have no tag in the format. numpy is imported inside the functions that need it.

The format (the safetensors README, "Format"): an 8-byte little-endian header length N, N bytes of JSON (an object
that maps each tensor name to ``{"dtype", "shape", "data_offsets": [BEGIN, END]}``, plus an optional
``__metadata__`` of strings), then the data section; offsets are relative to the data section.

Trust model for reading: the file may be hostile. A caller opens it with ``_fsio.open_for_reading`` (regular files
only). The header is at most ``MAX_HEADER`` bytes, must start with ``{`` (checked before it is parsed) and is strict
JSON (``_json.strict_json``: no duplicate names, bounded nesting and numbers); ``__metadata__`` maps strings to
strings; there are at most ``max_tensors`` tensors, each of rank at most ``MAX_RANK``, of a dtype jaxport knows, lying
inside the data section with exactly the size its shape and dtype give; and the tensors cover the data section
exactly, with no overlap, hole or trailing byte. All of it is checked before any data byte is read or viewed. Copied
tensors must fit this machine's memory; mapped ones are read-only views of the file. Nothing is unpickled: the data
is raw little-endian numbers.

The writer lays the data out by decreasing item size (so every tensor is aligned to its item size, as the
safetensors library lays it out) and keeps the caller's order in the header, which the reader returns; the header is
compact JSON padded with spaces to a multiple of 8 bytes. Files it writes are read by ``safetensors.numpy.load``,
and files that library writes are read here (``tests/foundation/test_safetensors.py``).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from .. import dtypes
from .._fsio import open_for_reading, read_at_most
from .._json import strict_json
from .._machine import physical_memory
from . import subbyte
from .npy import MAX_RANK

Error = Callable[[str], Exception]

#: At most this many bytes of JSON header.
MAX_HEADER = 100 << 20
#: At most this many tensors in one file, unless a caller allows more (bound weights: ``bind.MAX_BIND_FILE_MEMBERS``).
MAX_TENSORS = 10_000
#: The key of a header that holds metadata, not a tensor: no tensor can have this name.
METADATA = "__metadata__"


def tag_of(dtype: str) -> str | None:
    """The safetensors tag of a canonical dtype name (``F32`` for ``float32``), or None where the format has none
    (``complex128``, PRNG keys)."""
    d = dtypes.BY_NAME.get(dtype)
    return d.safetensors if d is not None else None


def read_file(path: str | Path, where: str, error: Error, *, mmap: bool = False,
              max_tensors: int = MAX_TENSORS) -> dict[str, Any]:
    """The tensors of the ``.safetensors`` file at ``path`` (see :func:`read`); opening it may fail with ``error``
    too (not found, not a regular file)."""
    with open_for_reading(path, error, directory="a .safetensors file") as f:
        return read(f, where, error, mmap=mmap, max_tensors=max_tensors)


def read(f: BinaryIO, where: str, error: Error, *, mmap: bool = False, max_tensors: int = MAX_TENSORS
         ) -> dict[str, Any]:
    """The tensors of the ``.safetensors`` file open as ``f`` (a regular file, at its start), by name, in the header's
    order: with ``mmap``, read-only views of a memory map of the file (which outlives ``f``); else writable copies in
    native byte order, refused when they would not fit this machine's memory. Anything the module docstring's trust
    model refuses raises ``error`` with a message that starts with ``where``."""
    import numpy as np

    size = os.fstat(f.fileno()).st_size
    head = read_at_most(f, 8)
    if len(head) < 8:
        raise error(f"{where}: too short for a .safetensors file ({size} bytes).")
    (n,) = struct.unpack("<Q", head)
    if n > min(MAX_HEADER, size - 8):
        raise error(f"{where}: the header claims {n} bytes, more than the file holds or {MAX_HEADER} allowed; the "
                    f"file is damaged or not .safetensors.")
    raw = read_at_most(f, n)
    if len(raw) < n:
        raise error(f"{where}: truncated while reading its {n}-byte header.")
    if not raw.startswith(b"{"):
        raise error(f"{where}: the header must start with '{{' (safetensors' rule); it starts with {raw[:1]!r}.")
    try:
        header = strict_json(raw)
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise error(f"{where}: the header is not valid JSON ({e}).") from None
    metadata = header.pop(METADATA, None)
    if metadata is not None and (not isinstance(metadata, dict) or
                                 not all(isinstance(v, str) for v in metadata.values())):
        raise error(f"{where}: {METADATA} must map strings to strings.")
    if len(header) > max_tensors:
        raise error(f"{where}: {len(header)} tensors; at most {max_tensors} are allowed.")
    data_start, data_size = 8 + n, size - 8 - n
    entries: list[tuple[int, int, str, Any, tuple[int, ...]]] = []
    for name, info in header.items():
        here = f"{where}: tensor {name!r}"
        match info:
            case {"dtype": tag, "shape": list() as dims, "data_offsets": [begin, end]} if \
                    all(type(d) is int and d >= 0 for d in [*dims, begin, end]):  # noqa: E721 - no bools
                pass
            case _:
                raise error(f"{here}: expected dtype, shape and data_offsets [begin, end] as non-negative "
                            f"integers.")
        if len(dims) > MAX_RANK:
            raise error(f"{here}: rank {len(dims)}; at most {MAX_RANK} dimensions are allowed.")
        known = dtypes.BY_SAFETENSORS.get(tag) if isinstance(tag, str) else None
        if known is None:
            raise error(f"{here}: dtype {str(tag)[:40]} is not one jaxport reads (it reads "
                        f"{', '.join(dtypes.BY_SAFETENSORS)}).")
        dtype = dtypes.to_numpy(known.name)
        count = 1
        for d in dims:
            count *= d
        if known.packed and count * known.width % 8:
            raise error(f"{here}: shape {dims} of {tag} is {count} elements of {known.width} bits, which do not fill "
                        f"whole bytes (safetensors' rule).")
        if end > data_size or begin > end or end - begin != dtypes.stored_nbytes(known.name, count):
            raise error(f"{here}: bytes {begin}..{end} do not hold shape {dims} of {tag} inside the "
                        f"{data_size}-byte data section.")
        entries.append((begin, end, name, dtype, tuple(dims)))
    pos, previous = 0, None
    for begin, end, name, _, _ in sorted(entries, key=lambda e: (e[0], e[1])):
        if begin < pos:
            raise error(f"{where}: tensor {name!r} (bytes {begin}..{end}) overlaps tensor {previous!r}, which ends "
                        f"at byte {pos}: each byte of the data section belongs to one tensor.")
        if begin > pos:
            raise error(f"{where}: bytes {pos}..{begin} of the data section belong to no tensor (before tensor "
                        f"{name!r}): the data section must be covered exactly, with no holes.")
        pos, previous = end, name
    if pos != data_size:
        raise error(f"{where}: bytes {pos}..{data_size} at the end of the data section belong to no tensor: the "
                    f"data section must be covered exactly, with no trailing bytes.")
    if mmap:
        data = np.memmap(f, dtype=np.uint8, mode="r") if data_size else np.zeros(0, np.uint8)
        data.flags.writeable = False
        return {name: _tensor(data[data_start + begin:data_start + end], dtype, shape)
                for begin, end, name, dtype, shape in entries}
    memory = physical_memory()
    if memory and data_size > memory:
        raise error(f"{where}: its tensors hold {data_size} bytes, more than this machine's memory ({memory} "
                    f"bytes).")
    try:
        buffer = np.empty(data_size, np.uint8)
    except MemoryError:
        raise error(f"{where}: not enough memory to read its {data_size} bytes of tensors.") from None
    f.seek(data_start)
    view, got = memoryview(buffer), 0
    while got < data_size:  # the whole data section straight into one buffer: one copy, from the page cache
        n = f.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            raise error(f"{where}: truncated while reading its tensors ({got} of {data_size} bytes).")
        got += n
    out: dict[str, Any] = {}
    for begin, end, name, dtype, shape in entries:
        array = _tensor(buffer[begin:end], dtype, shape)
        out[name] = array if array.dtype == dtype else array.astype(dtype)
    return out


def _tensor(data: Any, dtype: Any, shape: tuple[int, ...]) -> Any:
    """A tensor from its bytes in the data section (a ``uint8`` array): a view, or for a packed sub-byte type a new
    array of its unpacked elements (read-only when the bytes are)."""
    import math

    if dtypes.BY_NAME[dtype.name].packed:
        array = subbyte.unpack(data, dtype.name, math.prod(shape)).reshape(shape)
        array.flags.writeable = bool(data.flags.writeable)
        return array
    return data.view(_little(dtype)).reshape(shape)


def _little(dtype: Any) -> Any:
    """``dtype`` in the file's byte order (little-endian)."""
    return dtype.newbyteorder("<") if dtype.itemsize > 1 and dtype.kind in "iufc" else dtype


def write(f: BinaryIO, arrays: Mapping[str, Any]) -> int:
    """Write ``arrays`` (name -> array of a dtype :func:`tag_of` names; no name ``__metadata__``) to ``f`` as a
    ``.safetensors`` file (layout: the module docstring); returns the bytes written. The data is written from the
    arrays themselves, without a copy of the whole file in memory."""
    import numpy as np

    prepared: list[tuple[str, Any, str]] = []
    shapes: list[list[int]] = []
    for name, value in arrays.items():
        if name == METADATA:
            raise ValueError(f"a tensor cannot be named {METADATA!r}, the key that holds the header's metadata")
        a = np.asarray(value)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        tag = tag_of(str(a.dtype))
        if tag is None:
            raise ValueError(f"tensor {name!r}: .safetensors has no dtype for {a.dtype}")
        known = dtypes.BY_NAME[str(a.dtype)]
        shapes.append([int(d) for d in a.shape])
        if known.packed:
            if a.size * known.width % 8:
                raise ValueError(f"tensor {name!r} holds {a.size} {a.dtype} elements, which .safetensors cannot store "
                                 f"(it packs {8 // known.width} to a byte, and a tensor fills whole bytes)")
            a = subbyte.pack(a)  # the bytes the file holds; the header keeps the shape and tag
        prepared.append((name, a, tag))
    layout = sorted(range(len(prepared)), key=lambda i: -prepared[i][1].dtype.itemsize)
    offsets: dict[int, tuple[int, int]] = {}
    offset = 0
    for i in layout:
        offsets[i] = (offset, offset + prepared[i][1].nbytes)
        offset += prepared[i][1].nbytes
    header = {name: {"dtype": tag, "shape": shapes[i], "data_offsets": list(offsets[i])}
              for i, (name, _, tag) in enumerate(prepared)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for i in layout:
        a = prepared[i][1]
        if a.size:
            contiguous = a if a.flags.c_contiguous else a.copy(order="C")
            f.write(memoryview(contiguous.reshape(-1).view(np.uint8)))
    return 8 + len(text) + offset
