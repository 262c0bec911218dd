"""Reading ``.npy`` and ``.npz`` files that may be hostile, without ``numpy.load``: the one reader behind ``call``'s
input files (``run.values.npyio``) and the weights files a spec binds at export (``export.weights.bind``). numpy is
imported inside the functions that need it.

Trust model: the file may be hostile. A ``.npy`` header is read with ``ast.literal_eval`` (literals only, never
``eval``), capped at ``MAX_HEADER_BYTES``, and must be exactly ``{'descr': str, 'fortran_order': bool, 'shape': tuple
of ints}``. Object, structured, string, datetime and sub-array dtypes are refused, so nothing is ever unpickled. An
``.npz`` is checked from its zip directory before any member is read: a bounded member count, safe names ending in
``.npy``, stored or deflated, unencrypted, declared sizes totalling at most ``MAX_NPZ_BYTES``; each member's header
is checked (by the caller's ``prepare``, and against this machine's memory) before its data is inflated; a member
never yields more than its declared size (so a zip bomb inflates no further than it declares), and its CRC is
checked. Errors are raised with the caller's error class.
"""

from __future__ import annotations

import ast
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from .._machine import physical_memory
from ..errors import InputError

MAX_HEADER_BYTES = 10_000  # numpy's own default cap for untrusted headers
MAX_RANK = 64
MAX_NPZ_MEMBERS = 10_000
MAX_NPZ_BYTES = 16 << 30
_MAGIC = b"\x93NUMPY"
_HEADER_KEYS = {"descr", "fortran_order", "shape"}
_EOCD = struct.Struct("<4s4H2LH")
#: A one-byte float, which numpy has not: how numpy saves an ml_dtypes type of kind 'f' (``float8_e5m2`` is
#: ``'<f1'`` under ml_dtypes 0.7). Read as the raw void bytes it is, like the ``'<V1'`` of the others.
_RAW_FLOAT = re.compile(r"^[<>|=]?f(1)$")
#: Deflate's largest expansion (about 1032:1): a member declaring more than this is damaged or lying.
_DEFLATE_RATIO = 1032
#: The expansion allowed to a member larger than ``BOMB_FLOOR`` when a caller sets ``max_ratio``.
BOMB_FLOOR = 64 << 20

Error = Callable[[str], Exception]


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


def read_header(fp: IO[bytes], where: str, error: Error = InputError, *, numeric_only: bool = True) -> Header:
    """Parse a .npy header from ``fp`` (positioned at the start of the array file) without trusting it.

    Object and structured dtypes are always refused; string and datetime dtypes too unless ``numeric_only`` is
    false (a bound file's caller names them with the leaf they are for)."""
    import numpy as np

    magic = _read_exact(fp, 8)
    if len(magic) < 8 or magic[:6] != _MAGIC:
        raise error(f"{where}: not a .npy file (it does not start with the \\x93NUMPY magic). Save arrays "
                    f"with numpy.save.")
    version = (magic[6], magic[7])
    if version == (1, 0):
        length_field, encoding = "<H", "latin1"
    elif version in ((2, 0), (3, 0)):
        length_field, encoding = "<I", "latin1" if version == (2, 0) else "utf8"
    else:
        raise error(f"{where}: .npy format version {version[0]}.{version[1]} is not supported (1.0, 2.0, 3.0 "
                    f"are).")
    raw_len = _read_exact(fp, struct.calcsize(length_field))
    if len(raw_len) < struct.calcsize(length_field):
        raise error(f"{where}: truncated .npy file: it ends inside the header.")
    (length,) = struct.unpack(length_field, raw_len)
    if length > MAX_HEADER_BYTES:
        raise error(f"{where}: the .npy header is {length} bytes; at most {MAX_HEADER_BYTES} are allowed.")
    text = _read_exact(fp, length)
    if len(text) < length:
        raise error(f"{where}: truncated .npy file: it ends inside the header.")
    try:
        header = ast.literal_eval(text.decode(encoding))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError, TypeError):
        raise error(f"{where}: the .npy header is not a Python literal; the file is damaged.") from None
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        raise error(f"{where}: the .npy header must be a dict with keys 'descr', 'fortran_order' and 'shape'.")
    shape, fortran, descr = header["shape"], header["fortran_order"], header["descr"]
    if not isinstance(shape, tuple) or len(shape) > MAX_RANK or \
            not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise error(f"{where}: the .npy header's shape {shape!r} is not a tuple of at most {MAX_RANK} "
                    f"non-negative integers.")
    if not isinstance(fortran, bool):
        raise error(f"{where}: the .npy header's fortran_order {fortran!r} is not a bool.")
    if not isinstance(descr, str):
        raise error(f"{where}: the array has a structured dtype ({str(descr)[:80]}); jaxport reads plain "
                    f"numeric arrays only.")
    try:
        dtype = np.dtype(_RAW_FLOAT.sub(r"V\1", descr))
    except (TypeError, ValueError, SyntaxError):
        raise error(f"{where}: the .npy header's dtype {descr[:40]!r} is not a numpy dtype.") from None
    if dtype.hasobject:
        raise error(f"{where}: the array holds Python objects (dtype {descr!r}), which could only be read "
                    f"by unpickling; jaxport refuses them. Save a numeric array instead.")
    if dtype.names is not None or dtype.subdtype is not None:
        raise error(f"{where}: the array has a structured dtype ({descr!r}); jaxport reads plain numeric "
                    f"arrays only.")
    if numeric_only and dtype.kind in "USMm":
        raise error(f"{where}: the array has dtype {dtype} ({descr!r}); jaxport reads numeric and bool "
                    f"arrays only.")
    span = max(dtype.itemsize, 1)
    for d in shape:
        span *= max(d, 1)  # numpy needs this, zero dimensions aside, to fit its index type
    if span > (1 << 63) - 1:
        raise error(f"{where}: the .npy header's shape {shape!r} of {dtype} is larger than any array can be.")
    return Header(tuple(shape), fortran, dtype, 8 + struct.calcsize(length_field) + length)


def size_text(header: Header) -> str:
    """The declared size of an array, for messages: ``shape (2, 3) of float32 = 24 bytes``."""
    return f"shape {header.shape} of {header.dtype} = {header.nbytes} bytes"


def check_memory(header: Header, where: str, error: Error = InputError) -> None:
    """Refuse, before any array memory is allocated, an array larger than this machine's memory."""
    total = physical_memory()
    if total and header.nbytes > total:
        raise error(f"{where}: the array declares {size_text(header)}, more than this machine's memory "
                    f"({total} bytes).")


def check_size(header: Header, size: int, where: str, error: Error = InputError, what: str = ".npy file") -> None:
    """Refuse a ``.npy`` file (``what``: or an ``.npz`` member, an "array") of ``size`` bytes whose data is not
    exactly the size its ``header`` declares."""
    available = size - header.header_bytes
    if available < header.nbytes:
        raise error(f"{where}: truncated {what}: the header declares {size_text(header)}, but only "
                    f"{max(available, 0)} bytes follow it.")
    if available > header.nbytes:
        raise error(f"{where}: damaged {what}: {available - header.nbytes} bytes follow the array data "
                    f"({size_text(header)}).")


def read_npy_data(f: IO[bytes], header: Header, size: int, stored: Any, where: str, error: Error = InputError
                  ) -> Any:
    """The data of a ``.npy`` file of ``size`` bytes whose header was just read from ``f``, as a flat array of
    ``stored``: the declared size must be exactly the bytes that follow the header, and exactly that many are
    read."""
    import numpy as np

    check_size(header, size, where, error)
    count = header.nbytes // header.dtype.itemsize if header.dtype.itemsize else 0
    try:
        flat = np.fromfile(f, dtype=stored, count=count)
    except MemoryError:
        raise error(f"{where}: not enough memory to read {size_text(header)}.") from None
    except OSError as e:
        raise error(f"{where}: cannot read: {e}.") from None
    if flat.size != count:
        raise error(f"{where}: truncated .npy file: read {flat.size} of {count} elements.")
    return flat


def shaped(flat: Any, header: Header) -> Any:
    return flat.reshape(header.shape, order="F" if header.fortran_order else "C")


# --- reading .npz ----------------------------------------------------------------------------------------------


def safe_member(name: str) -> bool:
    """Whether ``name`` is a safe zip member name: relative, no ``..``, backslash, NUL or drive letter."""
    if not name or "\0" in name or "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return False
    return all(p not in ("", ".", "..") for p in name.split("/"))


def _check_eocd(f: IO[bytes], size: int, where: str, error: Error, max_members: int) -> None:
    """Refuse an archive whose end-of-directory record declares too many members, before zipfile parses it."""
    tail_len = min(size, _EOCD.size + 0xFFFF)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(tail):
        raise error(f"{where}: not a .npz file (no zip end-of-directory record). Save arrays with "
                    f"numpy.savez.")
    total = _EOCD.unpack_from(tail, at)[4]
    if total != 0xFFFF and total > max_members:
        raise error(f"{where}: the .npz declares {total} members; at most {max_members} are allowed.")
    f.seek(0)


@dataclass(frozen=True)
class NpzRules:
    """What an ``.npz`` may hold (:func:`read_npz_file`): the error its refusals raise; at most ``max_members``
    members (default ``MAX_NPZ_MEMBERS``) declaring at most ``max_bytes`` in all (default ``MAX_NPZ_BYTES``);
    ``holds`` says what the file should hold, for the message about a member that is not a ``.npy``;
    ``numeric_only``: see ``read_header``. With ``max_ratio``, a member over ``BOMB_FLOOR`` bytes that inflates more
    than ``max_ratio`` times its compressed size is refused as a zip bomb before it is inflated (for files with no
    declared shape to check a member against, like bound weights)."""

    error: Error = InputError
    max_members: int | None = None
    max_bytes: int | None = None
    holds: str = "only arrays named after inputs"
    numeric_only: bool = True
    max_ratio: int | None = None


def read_npz_file(f: IO[bytes], where: str, rules: NpzRules = NpzRules(), *,
                  accept: Callable[[str], None] = lambda key: None,
                  prepare: Callable[[str, Header, str], Any] | None = None) -> dict[str, Any]:
    """The arrays of the ``.npz`` open as ``f`` (a regular file), by key (the member name without ``.npy``).

    The zip directory is checked first (``rules``: members, names, methods, declared sizes); ``accept(key)`` may
    refuse a key before any data is read. Each member's header is then read and ``prepare(key, header, where)``
    returns the dtype the array is read as (and may refuse it from its header, before its data is inflated; default:
    as stored); arrays larger than this machine's memory are refused. A member yields exactly its declared size.
    """
    import numpy as np

    error, holds, numeric_only, max_ratio = rules.error, rules.holds, rules.numeric_only, rules.max_ratio
    max_members = MAX_NPZ_MEMBERS if rules.max_members is None else rules.max_members
    max_bytes = MAX_NPZ_BYTES if rules.max_bytes is None else rules.max_bytes
    size = os.fstat(f.fileno()).st_size
    _check_eocd(f, size, where, error, max_members)
    try:
        zf = zipfile.ZipFile(f)
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, struct.error,
            UnicodeDecodeError, OverflowError, IndexError, KeyError, NotImplementedError):
        raise error(f"{where}: not a readable .npz file (its zip directory is damaged).") from None
    if len(infos) > max_members:
        raise error(f"{where}: the .npz has {len(infos)} members; at most {max_members} are allowed.")
    total = 0
    keys: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        name = info.filename
        if not safe_member(name) or info.orig_filename != name:  # zipfile cuts a name at its first NUL
            raise error(f"{where}: member {info.orig_filename[:200]!r} has an unsafe name (absolute, an "
                        f"empty, '.' or '..' component, a drive, a backslash or NUL); refusing the file.")
        if not name.endswith(".npy"):
            raise error(f"{where}: member {name[:200]!r} is not a .npy array; an .npz for jaxport holds {holds}.")
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise error(f"{where}: member {name!r} is encrypted or uses an unsupported compression; "
                        f"save the file with numpy.savez or numpy.savez_compressed.")
        limit = info.compress_size if info.compress_type == zipfile.ZIP_STORED else \
            info.compress_size * _DEFLATE_RATIO + 1024
        if info.file_size > limit:
            raise error(f"{where}: member {name!r} declares {info.file_size} bytes, more than its "
                        f"{info.compress_size} stored bytes can hold; the file is damaged.")
        if max_ratio and info.file_size > max(BOMB_FLOOR, info.compress_size * max_ratio):
            raise error(f"{where}: member {name!r} inflates {info.compress_size} bytes to {info.file_size}, more "
                        f"than {max_ratio}:1: refusing a likely zip bomb. Save real weights with numpy.savez "
                        f"(uncompressed) if they are this regular.")
        key = name[:-len(".npy")]
        if key in keys:
            raise error(f"{where}: member {name!r} appears twice.")
        accept(key)
        keys[key] = info
        total += info.file_size
    if total > max_bytes:
        raise error(f"{where}: the .npz members declare {total} bytes in all; at most {max_bytes} are allowed.")
    memory = physical_memory()
    if memory and total > memory:  # every array is read into memory
        raise error(f"{where}: the .npz members declare {total} bytes in all, more than this machine's memory "
                    f"({memory} bytes).")
    out: dict[str, Any] = {}
    for key, info in keys.items():
        here = f"{where}: member {info.filename!r}"
        header: Header | None = None
        try:
            with zf.open(info) as member:
                header = read_header(member, here, error, numeric_only=numeric_only)
                dtype = prepare(key, header, here) if prepare else header.dtype
                check_memory(header, here, error)
                check_size(header, info.file_size, here, error, "array")
                buf = bytearray(header.nbytes)
                view = memoryview(buf)
                got = 0
                while got < header.nbytes:
                    n = member.readinto(view[got:])  # type: ignore[attr-defined]
                    if not n:
                        raise error(f"{here}: truncated array: {got} of {header.nbytes} bytes.")
                    got += n
                if member.read(1):  # also makes zipfile check the CRC
                    raise error(f"{here}: damaged array: data continues past the declared size.")
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, struct.error,
                NotImplementedError) as e:
            raise error(f"{here}: cannot be read ({e}); the file is damaged.") from None
        except MemoryError:
            shown = size_text(header) if header is not None else "its array"
            raise error(f"{here}: not enough memory to read {shown}.") from None
        stored = header.dtype if header.dtype.kind != "V" else dtype
        arr = np.frombuffer(buf, dtype=stored).reshape(header.shape, order="F" if header.fortran_order else "C")
        out[key] = arr.astype(dtype, copy=False)
    return out
