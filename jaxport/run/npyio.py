"""Reading ``.npy`` and ``.npz`` files that may be hostile, without ``numpy.load``: ``call``'s input files and
cotangents, and the rows a streamed call reads. No JAX.

Trust model: input files may be hostile. They are parsed here, never handed to ``numpy.load``. A ``.npy`` header is
read with ``ast.literal_eval`` (literals only, never ``eval``), capped at ``MAX_HEADER_BYTES``, and must be exactly
``{'descr': str, 'fortran_order': bool, 'shape': tuple of ints}``. Object, structured, string, datetime and
sub-array dtypes are refused, so nothing is ever unpickled. The size the header declares (shape x itemsize) must
equal the bytes that follow it before any array memory is allocated, and exactly that many bytes are read. An
``.npz`` is checked from its zip directory before any member is read: at most ``MAX_NPZ_MEMBERS`` members, with safe
names ending in ``.npy``, stored or deflated, unencrypted, whose declared sizes total at most ``MAX_NPZ_BYTES``; a
member never yields more than its declared size, and its CRC is checked.

A raw void ``.npy`` (``<V2``, ``<V1``), which is how numpy saves ``bfloat16`` and ``float8`` arrays, is accepted
only for an input the artifact declares with that ml_dtypes type of the same width, and is reinterpreted as it.
"""

from __future__ import annotations

import ast
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .. import dtypes
from .._fsio import open_for_reading
from ..artifact.bounds import Bounds
from ..artifact.contract import parsed_shape, unknown_input_error
from ..artifact.summary import array_type
from ..errors import InputError

MAX_HEADER_BYTES = 10_000  # numpy's own default cap for untrusted headers
MAX_RANK = 64
MAX_NPZ_MEMBERS = 10_000
MAX_NPZ_BYTES = 16 << 30
#: Arrays larger than this are checked against the input they are for from their header alone, before reading.
EARLY_CHECK_BYTES = 16 << 20
_MAGIC = b"\x93NUMPY"
_HEADER_KEYS = {"descr", "fortran_order", "shape"}
_EOCD = struct.Struct("<4s4H2LH")
_VOID_AS = {2: ("bfloat16",), 1: ("float8_e4m3fn", "float8_e5m2")}


# --- reading .npy ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Header:
    """A checked ``.npy`` header: what the array declares before any of its data is read."""

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: Any  # numpy dtype, as stored
    header_bytes: int  # magic + version + length field + header text

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        return n


def _read_exact(fp: IO[bytes], n: int) -> bytes:
    data = fp.read(n)
    return data if data is not None else b""


def read_header(fp: IO[bytes], where: str) -> Header:
    """Parse a .npy header from ``fp`` (positioned at the start of the array file) without trusting it."""
    import numpy as np

    magic = _read_exact(fp, 8)
    if len(magic) < 8 or magic[:6] != _MAGIC:
        raise InputError(f"{where}: not a .npy file (it does not start with the \\x93NUMPY magic). Save arrays "
                         f"with numpy.save.")
    version = (magic[6], magic[7])
    if version == (1, 0):
        length_field, encoding = "<H", "latin1"
    elif version in ((2, 0), (3, 0)):
        length_field, encoding = "<I", "latin1" if version == (2, 0) else "utf8"
    else:
        raise InputError(f"{where}: .npy format version {version[0]}.{version[1]} is not supported (1.0, 2.0, 3.0 "
                         f"are).")
    raw_len = _read_exact(fp, struct.calcsize(length_field))
    if len(raw_len) < struct.calcsize(length_field):
        raise InputError(f"{where}: truncated .npy file: it ends inside the header.")
    (length,) = struct.unpack(length_field, raw_len)
    if length > MAX_HEADER_BYTES:
        raise InputError(f"{where}: the .npy header is {length} bytes; at most {MAX_HEADER_BYTES} are allowed.")
    text = _read_exact(fp, length)
    if len(text) < length:
        raise InputError(f"{where}: truncated .npy file: it ends inside the header.")
    try:
        header = ast.literal_eval(text.decode(encoding))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError, TypeError):
        raise InputError(f"{where}: the .npy header is not a Python literal; the file is damaged.") from None
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        raise InputError(f"{where}: the .npy header must be a dict with keys 'descr', 'fortran_order' and 'shape'.")
    shape, fortran, descr = header["shape"], header["fortran_order"], header["descr"]
    if not isinstance(shape, tuple) or len(shape) > MAX_RANK or \
            not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise InputError(f"{where}: the .npy header's shape {shape!r} is not a tuple of at most {MAX_RANK} "
                         f"non-negative integers.")
    if not isinstance(fortran, bool):
        raise InputError(f"{where}: the .npy header's fortran_order {fortran!r} is not a bool.")
    if not isinstance(descr, str):
        raise InputError(f"{where}: the array has a structured dtype ({str(descr)[:80]}); jaxport reads plain "
                         f"numeric arrays only.")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError, SyntaxError):
        raise InputError(f"{where}: the .npy header's dtype {descr[:40]!r} is not a numpy dtype.") from None
    if dtype.hasobject:
        raise InputError(f"{where}: the array holds Python objects (dtype {descr!r}), which could only be read "
                         f"by unpickling; jaxport refuses them. Save a numeric array instead.")
    if dtype.names is not None or dtype.subdtype is not None:
        raise InputError(f"{where}: the array has a structured dtype ({descr!r}); jaxport reads plain numeric "
                         f"arrays only.")
    if dtype.kind in "USMm":
        raise InputError(f"{where}: the array has dtype {dtype} ({descr!r}); jaxport reads numeric and bool "
                         f"arrays only.")
    span = max(dtype.itemsize, 1)
    for d in shape:
        span *= max(d, 1)  # numpy needs this, zero dimensions aside, to fit its index type
    if span > (1 << 63) - 1:
        raise InputError(f"{where}: the .npy header's shape {shape!r} of {dtype} is larger than any array can be.")
    return Header(tuple(shape), fortran, dtype, 8 + struct.calcsize(length_field) + length)


def final_dtype(header: Header, declared: str | None, name: str | None, where: str) -> Any:
    """The dtype the array is read as: native byte order; a void dtype reinterpreted as a declared ml_dtypes type."""
    dt = header.dtype
    if dt.kind == "V":
        candidates = _VOID_AS.get(dt.itemsize, ())
        if declared in candidates:
            return dtypes.to_numpy(declared)
        if not candidates:
            raise InputError(f"{where}: the array has the raw void dtype {dt.str!r}, which jaxport does not read.")
        kinds = " or ".join(candidates)
        target = f"input {name!r} is {declared}" if name and declared else \
            f"the input is {declared}" if declared else "the input is not known"
        raise InputError(f"{where}: the array has the raw void dtype {dt.str!r} (how numpy saves {kinds}); jaxport "
                         f"reads it only for a {kinds} input, and {target}.")
    return dt.newbyteorder("=") if not dt.isnative else dt


def size_text(header: Header) -> str:
    """The declared size of an array, for messages: ``shape (2, 3) of float32 = 24 bytes``."""
    return f"shape {header.shape} of {header.dtype} = {header.nbytes} bytes"


def check_fits(header: Header, inp: Mapping[str, Any] | None, where: str) -> None:
    """Refuse, before any array memory is allocated or any data read, an array whose header cannot be the input
    ``inp`` (a manifest entry): its rank, its constant dimensions, the bounds of dimensions that are a variable.
    Also refuse an array larger than this machine's memory. Small arrays are left to ``check``, which sees every
    input at once and reports the first problem in the manifest's order."""
    if inp is not None and header.nbytes > EARLY_CHECK_BYTES:
        name = inp["name"]
        dims = parsed_shape(inp)
        if len(header.shape) != len(dims):
            raise InputError(f"{where}: input {name!r} has rank {len(header.shape)} (shape {header.shape}), but the "
                             f"artifact expects rank {len(dims)}: {array_type(dict(inp))}.")
        for axis, (d, n) in enumerate(zip(dims, header.shape)):
            if isinstance(d, int) and d != n:
                raise InputError(f"{where}: input {name!r}: shape[{axis}] = {n}, but the artifact expects {d} "
                                 f"({array_type(dict(inp))}).")
        bounds = inp.get("_dims") or {}
        for axis, (d, n) in enumerate(zip(dims, header.shape)):
            if not isinstance(d, int) and d.op == "var" and d.value in bounds and \
                    not Bounds.of(bounds[d.value]).holds(n):
                raise InputError(f"{where}: input {name!r}: shape[{axis}] = {n}, but dimension {d.value!r} must "
                                 f"satisfy {Bounds.of(bounds[d.value]).text(str(d.value))} (spec bound).")
    total = physical_memory()
    if total and header.nbytes > total:
        raise InputError(f"{where}: the array declares {size_text(header)}, more than this machine's memory "
                         f"({total} bytes).")


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where it cannot be known."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def read_npy(path: str | Path, declared: str | None = None, name: str | None = None,
             expect: Mapping[str, Any] | None = None) -> Any:
    """Read one ``.npy`` file safely (see the module docstring) for the input ``name`` of dtype ``declared``;
    ``expect`` (the input's manifest entry) lets a header that cannot fit be refused before reading the data."""
    import numpy as np

    where = str(path)
    with open_for_reading(path, InputError, directory="a .npy file") as f:
        size = os.fstat(f.fileno()).st_size
        header = read_header(f, where)
        dtype = final_dtype(header, declared, name, where)
        available = size - header.header_bytes
        if available < header.nbytes:
            raise InputError(f"{where}: truncated .npy file: the header declares {size_text(header)}, but only "
                             f"{available} bytes follow it.")
        if available > header.nbytes:
            raise InputError(f"{where}: damaged .npy file: {available - header.nbytes} bytes follow the array data "
                             f"({size_text(header)}).")
        check_fits(header, expect, where)
        count = header.nbytes // header.dtype.itemsize if header.dtype.itemsize else 0
        try:
            flat = np.fromfile(f, dtype=header.dtype if header.dtype.kind != "V" else dtype, count=count)
        except MemoryError:
            raise InputError(f"{where}: not enough memory to read {size_text(header)}.") from None
        except OSError as e:
            raise InputError(f"{where}: cannot read: {e}.") from None
    if flat.size != count:
        raise InputError(f"{where}: truncated .npy file: read {flat.size} of {count} elements.")
    return flat.reshape(header.shape, order="F" if header.fortran_order else "C").astype(dtype, copy=False)


# --- reading .npz ----------------------------------------------------------------------------------------------


def safe_member(name: str) -> bool:
    """Whether ``name`` is a safe zip member name: relative, no ``..``, backslash, NUL or drive letter."""
    if not name or "\0" in name or "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return False
    return all(p not in ("", ".", "..") for p in name.split("/"))


def _check_eocd(f: IO[bytes], size: int, where: str) -> None:
    """Refuse an archive whose end-of-directory record declares too many members, before zipfile parses it."""
    tail_len = min(size, _EOCD.size + 0xFFFF)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(tail):
        raise InputError(f"{where}: not a .npz file (no zip end-of-directory record). Save arrays with "
                         f"numpy.savez.")
    total = _EOCD.unpack_from(tail, at)[4]
    if total != 0xFFFF and total > MAX_NPZ_MEMBERS:
        raise InputError(f"{where}: the .npz declares {total} members; at most {MAX_NPZ_MEMBERS} are allowed.")
    f.seek(0)


def read_npz(path: str | Path, declared: Mapping[str, str],
             expect: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Read the arrays of an ``.npz`` whose keys are input names (``declared``: input name -> manifest dtype).

    Every key must name an input; the zip directory is checked (count, names, declared sizes) before any data, and
    each member's header against ``expect`` (input name -> manifest entry) before its data is inflated.
    """
    import numpy as np

    where = str(path)
    out: dict[str, Any] = {}
    with open_for_reading(path, InputError, directory="a .npz file") as f:
        size = os.fstat(f.fileno()).st_size
        _check_eocd(f, size, where)
        try:
            zf = zipfile.ZipFile(f)
            infos = zf.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, struct.error,
                UnicodeDecodeError, OverflowError, IndexError, KeyError, NotImplementedError):
            raise InputError(f"{where}: not a readable .npz file (its zip directory is damaged).") from None
        if len(infos) > MAX_NPZ_MEMBERS:
            raise InputError(f"{where}: the .npz has {len(infos)} members; at most {MAX_NPZ_MEMBERS} are allowed.")
        total = 0
        keys: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            name = info.filename
            if not safe_member(name) or info.orig_filename != name:  # zipfile cuts a name at its first NUL
                raise InputError(f"{where}: member {info.orig_filename[:200]!r} has an unsafe name (absolute, '..', "
                                 f"backslash or NUL); refusing the file.")
            if not name.endswith(".npy"):
                raise InputError(f"{where}: member {name[:200]!r} is not a .npy array; an .npz for jaxport holds "
                                 f"only arrays named after inputs.")
            if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise InputError(f"{where}: member {name!r} is encrypted or uses an unsupported compression; "
                                 f"save the file with numpy.savez or numpy.savez_compressed.")
            key = name[:-len(".npy")]
            if key in keys:
                raise InputError(f"{where}: member {name!r} appears twice.")
            if key not in declared:
                raise unknown_input_error(key, declared, f" (a key of {where})")
            keys[key] = info
            total += info.file_size
        if total > MAX_NPZ_BYTES:
            raise InputError(f"{where}: the .npz members declare {total} bytes in all; at most {MAX_NPZ_BYTES} "
                             f"are allowed.")
        for key, info in keys.items():
            here = f"{where}: member {info.filename!r}"
            try:
                with zf.open(info) as member:
                    header = read_header(member, here)
                    dtype = final_dtype(header, declared[key], key, here)
                    check_fits(header, (expect or {}).get(key), here)
                    available = info.file_size - header.header_bytes
                    if available < header.nbytes:
                        raise InputError(f"{here}: truncated array: the header declares {size_text(header)}, but "
                                         f"only {max(available, 0)} bytes follow it.")
                    if available > header.nbytes:
                        raise InputError(f"{here}: damaged array: {available - header.nbytes} bytes follow the "
                                         f"array data ({size_text(header)}).")
                    buf = bytearray(header.nbytes)
                    view = memoryview(buf)
                    got = 0
                    while got < header.nbytes:
                        n = member.readinto(view[got:])  # type: ignore[attr-defined]
                        if not n:
                            raise InputError(f"{here}: truncated array: {got} of {header.nbytes} bytes.")
                        got += n
                    if member.read(1):  # also makes zipfile check the CRC
                        raise InputError(f"{here}: damaged array: data continues past the declared size.")
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, struct.error,
                    NotImplementedError) as e:
                raise InputError(f"{here}: cannot be read ({e}); the file is damaged.") from None
            except MemoryError:
                raise InputError(f"{here}: not enough memory to read {size_text(header)}.") from None
            stored = header.dtype if header.dtype.kind != "V" else dtype
            arr = np.frombuffer(buf, dtype=stored).reshape(header.shape, order="F" if header.fortran_order else "C")
            out[key] = arr.astype(dtype, copy=False)
    return out
