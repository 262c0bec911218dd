"""Inputs of ``call``: reading ``.npy``/``.npz`` files safely, matching them to a function's inputs, checking them
against the manifest, and generating random ones from the signature. No JAX.

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
from ..artifact.bounds import Bounds
from ..artifact.contract import concrete_shape, input_names, parsed_shape, unknown_input_error
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
class _Header:
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


def _read_header(fp: IO[bytes], where: str) -> _Header:
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
    return _Header(tuple(shape), fortran, dtype, 8 + struct.calcsize(length_field) + length)


def _final_dtype(header: _Header, declared: str | None, name: str | None, where: str) -> Any:
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


def _size_text(header: _Header) -> str:
    return f"shape {header.shape} of {header.dtype} = {header.nbytes} bytes"


def _fits(header: _Header, inp: Mapping[str, Any] | None, where: str) -> None:
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
    total = _physical_memory()
    if total and header.nbytes > total:
        raise InputError(f"{where}: the array declares {_size_text(header)}, more than this machine's memory "
                         f"({total} bytes).")


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _expected(fn: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each input's manifest entry, with the function's dimension bounds, for ``_fits``."""
    return {i["name"]: {**i, "_dims": fn.get("dims") or {}} for i in fn["inputs"]}


def read_npy(path: str | Path, declared: str | None = None, name: str | None = None,
             expect: Mapping[str, Any] | None = None) -> Any:
    """Read one ``.npy`` file safely (see the module docstring) for the input ``name`` of dtype ``declared``;
    ``expect`` (the input's manifest entry) lets a header that cannot fit be refused before reading the data."""
    import numpy as np

    where = str(path)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{where}: file not found.") from None
    except IsADirectoryError:
        raise InputError(f"{where}: is a directory, not a .npy file.") from None
    except OSError as e:
        raise InputError(f"{where}: cannot read: {e.strerror}.") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        header = _read_header(f, where)
        dtype = _final_dtype(header, declared, name, where)
        available = size - header.header_bytes
        if available < header.nbytes:
            raise InputError(f"{where}: truncated .npy file: the header declares {_size_text(header)}, but only "
                             f"{available} bytes follow it.")
        if available > header.nbytes:
            raise InputError(f"{where}: damaged .npy file: {available - header.nbytes} bytes follow the array data "
                             f"({_size_text(header)}).")
        _fits(header, expect, where)
        count = header.nbytes // header.dtype.itemsize if header.dtype.itemsize else 0
        try:
            flat = np.fromfile(f, dtype=header.dtype if header.dtype.kind != "V" else dtype, count=count)
        except MemoryError:
            raise InputError(f"{where}: not enough memory to read {_size_text(header)}.") from None
        except OSError as e:
            raise InputError(f"{where}: cannot read: {e}.") from None
    if flat.size != count:
        raise InputError(f"{where}: truncated .npy file: read {flat.size} of {count} elements.")
    return flat.reshape(header.shape, order="F" if header.fortran_order else "C").astype(dtype, copy=False)


# --- reading .npz ----------------------------------------------------------------------------------------------


def _safe_member(name: str) -> bool:
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
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{where}: file not found.") from None
    except IsADirectoryError:
        raise InputError(f"{where}: is a directory, not a .npz file.") from None
    except OSError as e:
        raise InputError(f"{where}: cannot read: {e.strerror}.") from None
    out: dict[str, Any] = {}
    with f:
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
            if not _safe_member(name) or info.orig_filename != name:  # zipfile cuts a name at its first NUL
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
                    header = _read_header(member, here)
                    dtype = _final_dtype(header, declared[key], key, here)
                    _fits(header, (expect or {}).get(key), here)
                    available = info.file_size - header.header_bytes
                    if available < header.nbytes:
                        raise InputError(f"{here}: truncated array: the header declares {_size_text(header)}, but "
                                         f"only {max(available, 0)} bytes follow it.")
                    if available > header.nbytes:
                        raise InputError(f"{here}: damaged array: {available - header.nbytes} bytes follow the "
                                         f"array data ({_size_text(header)}).")
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
                raise InputError(f"{here}: not enough memory to read {_size_text(header)}.") from None
            stored = header.dtype if header.dtype.kind != "V" else dtype
            arr = np.frombuffer(buf, dtype=stored).reshape(header.shape, order="F" if header.fortran_order else "C")
            out[key] = arr.astype(dtype, copy=False)
    return out


# --- matching files to inputs ----------------------------------------------------------------------------------


def _missing_error(fn: Mapping[str, Any], missing: list[str]) -> InputError:
    by_name = {i["name"]: i for i in fn["inputs"]}
    listed = ", ".join(f"{n!r} ({array_type(by_name[n])})" for n in missing)
    if len(missing) == 1:
        return InputError(f"missing input {listed}: give it with --inputs {missing[0]}=FILE.npy, or use --random.")
    return InputError(f"missing inputs {listed}: give each with --inputs NAME=FILE.npy (or all in one .npz), or "
                      f"use --random.")


def classify(fn: Mapping[str, Any], items: list[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """Split ``--inputs`` values into positional files, ``NAME=FILE`` pairs and ``.npz`` files.

    ``NAME=FILE`` is recognised when NAME is an input name, or when the text has an ``=`` and is not an existing
    file; a file whose name contains ``=`` can be given as ``./a=b.npy``.
    """
    names = input_names(fn)
    positional: list[str] = []
    named: dict[str, str] = {}
    npz: list[str] = []
    for text in items:
        name, eq, file = text.partition("=")
        if eq and (name in names or not Path(text).exists()):
            if name not in names:
                raise unknown_input_error(name, names, f" (in --inputs {text})")
            if name in named:
                raise InputError(f"input {name!r} is given twice: {named[name]} and {file}.")
            named[name] = file
        elif text.lower().endswith(".npz"):
            npz.append(text)
        else:
            positional.append(text)
    return positional, named, npz


def gather(fn: Mapping[str, Any], items: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Read the arrays that ``--inputs`` values name; returns ``{input name: array}`` and each array's source."""
    positional, named, npz = classify(fn, items)
    declared = {i["name"]: i["dtype"] for i in fn["inputs"]}
    expect = _expected(fn)
    names = list(declared)
    if positional and (named or npz):
        raise InputError("give --inputs either all by position (FILE.npy, in the order 'inspect' lists the "
                         "inputs) or all by name (NAME=FILE.npy, or an .npz keyed by input names), not both.")
    arrays: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if positional:
        if len(positional) > len(names):
            shown = ", ".join(names) or "none"
            raise InputError(f"too many inputs: {len(positional)} files given, but the function takes "
                             f"{len(names)} input{'s' if len(names) != 1 else ''} ({shown}); "
                             f"'{positional[len(names)]}' has no input to go to.")
        for name, file in zip(names, positional):
            arrays[name] = read_npy(file, declared[name], name, expect[name])
            sources[name] = file
    for file in npz:
        for name, arr in read_npz(file, declared, expect).items():
            if name in sources:
                raise InputError(f"input {name!r} is given twice: {sources[name]} and {file}.")
            arrays[name] = arr
            sources[name] = f"{file}[{name}]"
    for name, file in named.items():
        if name in sources:
            raise InputError(f"input {name!r} is given twice: {sources[name]} and {file}.")
        arrays[name] = read_npy(file, declared[name], name, expect[name])
        sources[name] = file
    missing = [n for n in names if n not in arrays]
    if missing:
        raise _missing_error(fn, missing)
    return {n: arrays[n] for n in names}, {n: sources[n] for n in names}


# --- random inputs ---------------------------------------------------------------------------------------------


def random_inputs(fn: Mapping[str, Any], dims: Mapping[str, int], seed: int = 0) -> dict[str, Any]:
    """Deterministic random arrays for a function's inputs at the given dimension values, in manifest order.

    Floats are standard normal, signed integers uniform in [-8, 8), unsigned in [0, 8), bools fair coin flips.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for inp in fn["inputs"]:
        shape = concrete_shape(inp, dims)
        kind = dtypes.BY_NAME[inp["dtype"]].kind
        target = dtypes.to_numpy(inp["dtype"])
        count = 1
        for n in shape:
            count *= n
        total = _physical_memory()
        if any(n < 0 for n in shape) or (total and count * 16 > total):  # generated as 64-bit, then converted
            raise InputError(f"a random input {inp['name']!r} of shape {shape} would not fit in this machine's "
                             f"memory; choose smaller dimensions with --dim NAME=VALUE.")
        try:
            if kind == "float":
                arr = rng.standard_normal(shape).astype(target)
            elif kind == "complex":
                arr = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(target)
            elif kind == "int":
                arr = rng.integers(-8, 8, size=shape).astype(target)
            elif kind == "uint":
                arr = rng.integers(0, 8, size=shape).astype(target)
            else:
                arr = rng.random(shape) < 0.5
        except (MemoryError, ValueError, OverflowError):
            raise InputError(f"not enough memory for a random input {inp['name']!r} of shape {shape}.") from None
        out[inp["name"]] = arr
    return out
