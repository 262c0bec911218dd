"""``.safetensors`` files for ``call``: reading reference outputs and input arrays that may be hostile, and writing
outputs with their reduced-precision dtypes intact (``BF16``, ``F8_E4M3``, ``F8_E5M2``), which ``.npy`` can only
store as raw void bytes. No JAX.

The format (the safetensors README, "Format"): an 8-byte little-endian header length N, N bytes of JSON (an object
that maps each tensor name to ``{"dtype", "shape", "data_offsets": [BEGIN, END]}``, plus an optional
``__metadata__`` of strings), then the data section; offsets are relative to the data section.

Trust model for reading: the file is opened by ``_fsio.open_for_reading`` (regular files only); the header is at
most ``MAX_HEADER`` bytes of strict JSON (no duplicate names, bounded nesting and numbers) that starts with ``{``;
every tensor must lie inside the data section with exactly the size its shape and dtype give, and the tensors must
cover the data section exactly (no overlap, hole or trailing byte), all checked before any data byte is read; the
total must fit this machine's memory. Nothing is unpickled: the data is raw little-endian numbers.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from .. import dtypes
from .._fsio import read_at_most
from .._npyfile import physical_memory
from ..artifact.container import strict_json

Error = Callable[[str], Exception]

#: At most this many bytes of JSON header.
MAX_HEADER = 100 << 20
#: At most this many tensors in one file.
MAX_TENSORS = 10_000
#: The key of a header that holds metadata, not a tensor.
METADATA = "__metadata__"
#: safetensors dtype tag -> jaxport (numpy) dtype name.
TAGS = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16", "U32": "uint32", "I32": "int32",
    "U64": "uint64", "I64": "int64", "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64",
    "C64": "complex64", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}
#: jaxport dtype name -> safetensors tag.
TAG_OF = {name: tag for tag, name in TAGS.items()}


def read(f: BinaryIO, where: str, error: Error) -> dict[str, Any]:
    """The tensors of the ``.safetensors`` file open as ``f`` (a regular file, at its start), by name, in the
    header's order, as writable numpy arrays (see the module docstring for what is refused)."""
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
        raise error(f"{where}: not a .safetensors file (its header does not start with '{{').")
    try:
        header = strict_json(raw)
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise error(f"{where}: the .safetensors header is not valid JSON ({e}).") from None
    metadata = header.pop(METADATA, None)
    if metadata is not None and (not isinstance(metadata, dict) or
                                 not all(isinstance(v, str) for v in metadata.values())):
        raise error(f"{where}: {METADATA} must map strings to strings.")
    if len(header) > MAX_TENSORS:
        raise error(f"{where}: {len(header)} tensors; at most {MAX_TENSORS} are allowed.")
    data_size = size - 8 - n
    entries: list[tuple[int, int, str, Any, tuple[int, ...]]] = []
    for name, info in header.items():
        here = f"{where}: tensor {name!r}"
        try:
            tag, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            if not isinstance(shape, list) or len(shape) > 64 or \
                    not all(type(d) is int and d >= 0 for d in [*shape, begin, end]):  # noqa: E721 - no bools
                raise TypeError
        except (KeyError, TypeError, ValueError):
            raise error(f"{here}: expected dtype, shape and data_offsets [BEGIN, END] as non-negative "
                        f"integers.") from None
        dname = TAGS.get(tag) if isinstance(tag, str) else None
        if dname is None:
            raise error(f"{here}: dtype {str(tag)[:40]} is not one jaxport reads ({', '.join(TAGS)}).")
        dtype = dtypes.to_numpy(dname)
        count = 1
        for d in shape:
            count *= d
        if end > data_size or begin > end or end - begin != count * dtype.itemsize:
            raise error(f"{here}: bytes {begin}..{end} do not hold shape {shape} of {tag} inside the "
                        f"{data_size}-byte data section; the file is damaged.")
        entries.append((begin, end, name, dtype, tuple(shape)))
    pos = 0
    for begin, end, name, _, _ in sorted(entries, key=lambda e: (e[0], e[1])):
        if begin != pos:
            raise error(f"{where}: tensor {name!r} starts at byte {begin} of the data section, not at {pos}: the "
                        f"tensors must cover it exactly, without overlap or holes; the file is damaged.")
        pos = end
    if pos != data_size:
        raise error(f"{where}: bytes {pos}..{data_size} of the data section belong to no tensor; the file is "
                    f"damaged.")
    memory = physical_memory()
    if memory and data_size > memory:
        raise error(f"{where}: its tensors hold {data_size} bytes, more than this machine's memory ({memory} "
                    f"bytes).")
    out: dict[str, Any] = {}
    for begin, end, name, dtype, shape in entries:
        f.seek(8 + n + begin)
        try:
            data = read_at_most(f, end - begin)
        except MemoryError:
            raise error(f"{where}: tensor {name!r}: not enough memory to read {end - begin} bytes.") from None
        if len(data) != end - begin:
            raise error(f"{where}: tensor {name!r}: truncated ({len(data)} of {end - begin} bytes).")
        little = dtype.newbyteorder("<") if dtype.itemsize > 1 and dtype.kind in "iufc" else dtype
        out[name] = np.frombuffer(data, dtype=little).astype(dtype).reshape(shape)
    return out


def unwritable(arrays: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (name, dtype) of each array whose dtype a ``.safetensors`` file cannot record (``complex128``)."""
    return [(n, str(a.dtype)) for n, a in arrays.items() if str(a.dtype) not in TAG_OF]


def write(f: BinaryIO, arrays: Mapping[str, Any]) -> None:
    """Write ``arrays`` (name -> numpy array of a dtype in ``TAG_OF``) to ``f`` as a ``.safetensors`` file, in the
    given order, with the header padded by spaces to a multiple of 8 bytes (as the safetensors library writes)."""
    import numpy as np

    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, value in arrays.items():
        a = np.asarray(value)
        if a.dtype.itemsize > 1 and a.dtype.kind in "iufc" and a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        blob = a.tobytes(order="C")
        header[name] = {"dtype": TAG_OF[str(value.dtype)], "shape": [int(d) for d in a.shape],
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for blob in blobs:
        f.write(blob)
