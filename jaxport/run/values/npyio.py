"""Reading ``.npy`` and ``.npz`` files that may be hostile, without ``numpy.load``: ``call``'s input files and
cotangents, and the rows a streamed call reads. No JAX.

Trust model: input files may be hostile. They are parsed by ``arrayfiles.npy`` (which also reads the weights files
a spec binds), never handed to ``numpy.load``, and opened by ``_fsio.open_for_reading`` (regular files only, never a
FIFO or a device). A ``.npy`` header is
read with ``ast.literal_eval`` (literals only, never ``eval``), capped at ``MAX_HEADER_BYTES``, and must be exactly
``{'descr': str, 'fortran_order': bool, 'shape': tuple of ints}``. Object, structured, string, datetime and
sub-array dtypes are refused, so nothing is ever unpickled. The size the header declares (shape x itemsize) must
equal the bytes that follow it before any array memory is allocated, and exactly that many bytes are read. An
``.npz`` is checked from its zip directory before any member is read: at most ``MAX_NPZ_MEMBERS`` members, with safe
names ending in ``.npy``, stored or deflated, unencrypted, whose declared sizes total at most ``MAX_NPZ_BYTES``; a
member never yields more than its declared size, and its CRC is checked.

A raw void ``.npy`` (``<V2``, ``<V1``), which is how numpy saves ``bfloat16``, ``float8`` and the sub-byte arrays
(``int4``, ``uint4``, ``float4_e2m1fn``: one element per byte), is accepted only for an input the artifact declares
with that ml_dtypes type of the same width, and is reinterpreted as it; a sub-byte element's unused high bits are
cleared (``arrayfiles.subbyte.canonical``), so that every check sees the value the program runs on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import dtypes
from ..._fsio import open_for_reading
from ..._machine import physical_memory
from ...arrayfiles import safetensors, subbyte
from ...arrayfiles.npy import (
    MAX_HEADER_BYTES,
    MAX_NPZ_BYTES,
    MAX_NPZ_MEMBERS,
    MAX_RANK,
    Header,
    NpzRules,
    check_memory,
    read_header,
    read_npy_data,
    read_npz_file,
    safe_member,
    shaped,
    size_text,
)
from ...artifact.bounds import Bounds
from ...artifact.contract import constant_mismatch, parsed_shape, rank_mismatch, unknown_input_error
from ...artifact.model import Input
from ...errors import InputError

#: Arrays larger than this are checked against the input they are for from their header alone, before reading.
EARLY_CHECK_BYTES = 16 << 20
#: Names other modules import from here; the readers themselves live in ``arrayfiles.npy``, shared with
#: ``export.weights.bind``.
__all__ = ["MAX_HEADER_BYTES", "MAX_NPZ_BYTES", "MAX_NPZ_MEMBERS", "MAX_RANK", "EARLY_CHECK_BYTES", "Header",
           "check_fits", "final_dtype", "physical_memory", "read_header", "read_named_arrays", "read_npy", "read_npz",
           "safe_member", "size_text"]


def final_dtype(header: Header, declared: str | None, name: str | None, where: str) -> Any:
    """The dtype the array is read as: native byte order; a void dtype reinterpreted as a declared ml_dtypes type."""
    dt = header.dtype
    if dt.kind == "V":
        candidates = dtypes.raw_void(dt.itemsize)
        if declared in candidates:
            return dtypes.to_numpy(declared)
        if not candidates:
            raise InputError(f"{where}: the array has the raw void dtype {dt.str!r}, which jaxport does not read.")
        kinds = _or(candidates)
        target = f"input {name!r} is {declared}" if name and declared else \
            f"the input is {declared}" if declared else "the input is not known"
        raise InputError(f"{where}: the array has the raw void dtype {dt.str!r} (how numpy saves {kinds}); jaxport "
                         f"reads it only for a {kinds} input, and {target}.")
    return dt.newbyteorder("=") if not dt.isnative else dt


def _or(names: tuple[str, ...]) -> str:
    """``a, b or c``."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)


@dataclass(frozen=True)
class Expected:
    """The input a file should hold (for a key input, the key data its file holds) and the function's bounds."""

    input: Input
    bounds: Mapping[str, Bounds]


def check_fits(header: Header, expected: Expected | None, where: str) -> None:
    """Refuse, before any array memory is allocated or any data read, an array whose header cannot be the
    ``expected`` input: its rank, its constant dimensions, the bounds of dimensions that are a variable.
    Also refuse an array larger than this machine's memory. Small arrays are left to ``check``, which sees every
    input at once and reports the first problem in the manifest's order."""
    if expected is not None and header.nbytes > EARLY_CHECK_BYTES:
        inp, bounds = expected.input, expected.bounds
        dims = parsed_shape(inp)
        problem = rank_mismatch(inp, dims, header.shape) or constant_mismatch(inp, dims, header.shape)
        if problem:
            raise InputError(f"{where}: {problem}")
        for axis, (d, n) in enumerate(zip(dims, header.shape)):
            if isinstance(d, int) or d.op != "var" or str(d.value) not in bounds:
                continue
            b = bounds[str(d.value)]
            if not b.holds(n):
                raise InputError(f"{where}: input {inp.name!r}: shape[{axis}] = {n}, but dimension {d.value!r} must "
                                 f"satisfy {b.text(str(d.value))} (spec bound).")
    check_memory(header, where)


def read_npy(path: str | Path, declared: str | None = None, name: str | None = None,
             expect: Expected | None = None) -> Any:
    """Read one ``.npy`` file safely (see the module docstring) for the input ``name`` of dtype ``declared``;
    ``expect`` (the input it should hold) lets a header that cannot fit be refused before reading the data."""
    where = str(path)
    with open_for_reading(path, InputError, directory="a .npy file") as f:
        size = os.fstat(f.fileno()).st_size
        header = read_header(f, where)
        dtype = final_dtype(header, declared, name, where)
        if size - header.header_bytes == header.nbytes:
            check_fits(header, expect, where)
        flat = read_npy_data(f, header, size, header.dtype if header.dtype.kind != "V" else dtype, where)
    return _canonical(shaped(flat, header).astype(dtype, copy=False))


def _canonical(arr: Any) -> Any:
    """A sub-byte array read from raw bytes with its unused high bits cleared; any other array as it is."""
    d = dtypes.from_numpy(arr.dtype)
    return subbyte.canonical(arr) if d is not None and d.packed else arr


# --- reading .npz ----------------------------------------------------------------------------------------------


def read_npz(path: str | Path, declared: Mapping[str, str],
             expect: Mapping[str, Expected] | None = None) -> dict[str, Any]:
    """Read the arrays of an ``.npz`` whose keys are input names (``declared``: input name -> manifest dtype).

    Every key must name an input; the zip directory is checked (count, names, declared sizes) before any data, and
    each member's header against ``expect`` (input name -> the input it should hold) before its data is inflated.
    """
    where = str(path)

    def accept(key: str) -> None:
        if key not in declared:
            raise unknown_input_error(key, declared, f" (a key of {where})")

    def prepare(key: str, header: Header, here: str) -> Any:
        dtype = final_dtype(header, declared[key], key, here)
        check_fits(header, (expect or {}).get(key), here)
        return dtype

    with open_for_reading(path, InputError, directory="a .npz file") as f:
        arrays = read_npz_file(f, where, NpzRules(max_members=MAX_NPZ_MEMBERS, max_bytes=MAX_NPZ_BYTES),
                               accept=accept, prepare=prepare)
    return {key: _canonical(value) for key, value in arrays.items()}


# --- named arrays: reference outputs, saved inputs ---------------------------------------------------------------

#: The files ``read_named_arrays`` reads, by suffix.
NAMED_SUFFIXES = (".npz", ".safetensors", ".npy")


def read_named_arrays(path: str | Path, where: str | None = None, *, single_name: str | None = None,
                      declared: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The arrays of a file by name: an ``.npz`` (keyed by member name, without ``.npy``), a ``.safetensors`` file
    (keyed by tensor name), or a single ``.npy`` (keyed by ``single_name``, which the caller must give). Reference
    outputs for ``call --expect`` and ``verify --expect`` (named as ``call -o`` writes them) and saved inputs.

    The file is read as untrusted (see the module docstring and ``arrayfiles.safetensors``): regular files only,
    capped reads, never unpickled. ``where`` starts every message (default: the path). ``declared`` (name ->
    manifest dtype) lets a raw void array (how numpy saves ``bfloat16`` and ``float8``) be read as the declared type;
    without it such an array is refused, naming ``.safetensors``. Errors are ``InputError``.
    """
    where = where or str(path)
    suffix = Path(path).suffix.lower()
    if suffix not in NAMED_SUFFIXES:
        raise InputError(f"{where}: arrays are read from .npz (keyed by name), .safetensors or a single .npy; "
                         f"{Path(path).name!r} is none of these.")

    def dtype_of(key: str, header: Header, here: str) -> Any:
        dt = header.dtype
        check_memory(header, here)
        if dt.kind != "V":
            return dt.newbyteorder("=") if not dt.isnative else dt
        want = (declared or {}).get(key)
        if want is not None and want in dtypes.raw_void(dt.itemsize):
            return dtypes.to_numpy(want)
        what = f"{key!r} is {want}" if want else f"nothing says what {key!r} is"
        raise InputError(f"{here}: the array has the raw void dtype {dt.str!r} (how numpy stores "
                         f"{_or(dtypes.raw_void(dt.itemsize)) or 'ml_dtypes types'}), and {what}; write the arrays as "
                         f".safetensors, which records their dtype.")

    if suffix == ".npy":
        if single_name is None:
            raise InputError(f"{where}: a .npy file holds one unnamed array; give an .npz or .safetensors file "
                             f"keyed by name.")
        with open_for_reading(path, InputError, directory="a .npy file") as f:
            size = os.fstat(f.fileno()).st_size
            header = read_header(f, where)
            dtype = dtype_of(single_name, header, where)
            flat = read_npy_data(f, header, size, header.dtype if header.dtype.kind != "V" else dtype, where)
        return {single_name: _canonical(shaped(flat, header).astype(dtype, copy=False))}
    if suffix == ".safetensors":
        return safetensors.read_file(path, where, InputError)
    with open_for_reading(path, InputError, directory="a .npz file") as f:
        arrays = read_npz_file(f, where, NpzRules(max_members=MAX_NPZ_MEMBERS, max_bytes=MAX_NPZ_BYTES,
                                                   holds="arrays keyed by name"), prepare=dtype_of)
    return {key: _canonical(value) for key, value in arrays.items()}
