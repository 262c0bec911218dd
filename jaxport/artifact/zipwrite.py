"""Writing the container's zip archive: stored members, byte for byte what Python's ``zipfile`` writes for them.

Artifacts were first written through ``zipfile`` (``ZipFile.writestr`` and ``ZipFile.open(mode="w")`` on a seekable
file, ``allowZip64``); this module writes the same bytes from each member's size and CRC-32, so that a large
member's data goes to the file in plain writes of its buffers (``zipfile`` copies it through its own CRC-32 pass and
rewrites the local header afterwards), or is written by the caller beforehand, its CRC-32 computed as it was
written (``written``). What ``zipfile`` would write, and so what this writes (a test compares both, zip64 cases
included):

- each member: a local header (version 20, or 45 with a zip64 extra field when ``size * 1.05`` exceeds
  ``ZIP64_LIMIT``), the member's extra field (``container`` passes its alignment padding), then the data;
- the central directory: one entry per member, with a zip64 extra field (sizes above ``ZIP64_LIMIT``, then a local
  header offset above it) put before the member's extra field;
- the end record, after zip64 end records when the directory's offset or size exceeds ``ZIP64_LIMIT`` or there are
  more than ``ZIP_FILECOUNT_LIMIT`` members.

The limits are ``zipfile``'s own, read when writing (tests lower them to take the zip64 paths on small files).
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator

from .._record import dataclass
from .bulkwrite import write_data

TYPE_CHECKING = False  # typing's constant, without importing typing: the artifact reader imports this module
if TYPE_CHECKING:
    from typing import Any

_VERSION, _ZIP64_VERSION = 20, 45
_UTF8_NAME = 0x800
_DOS_DATE = (1980 - 1980) << 9 | 1 << 5 | 1  # 1980-01-01, the fixed timestamp of every member
_DOS_TIME = 0
_CREATE_SYSTEM = 3  # Unix
_EXTERNAL_ATTR = 0o644 << 16
_LOCAL = struct.Struct("<4s2B4HL2L2H")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
_END = struct.Struct("<4s4H2LH")
_END64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR64 = struct.Struct("<4sLQL")


def encoded_name(name: str) -> tuple[bytes, int]:
    """A member name as zipfile stores it (cut at a NUL byte, as ``ZipInfo`` does), and its general-purpose flags:
    ASCII, else UTF-8 with flag bit 11."""
    name = name.split("\0", 1)[0]
    try:
        return name.encode("ascii"), 0
    except UnicodeEncodeError:
        return name.encode("utf-8"), _UTF8_NAME


def local_zip64(size: int) -> bool:
    """Whether a member's local header carries a zip64 extra field (zipfile's rule for a member written through
    ``ZipFile.open(mode="w")`` or ``writestr``: the size with 5% to spare exceeds ``ZIP64_LIMIT``)."""
    return size * 1.05 > zipfile.ZIP64_LIMIT


def local_header_size(name: str, extra: bytes, size: int) -> int:
    """The length of the local header ``local_header`` writes: where the member's data begins, from its header."""
    return _LOCAL.size + len(encoded_name(name)[0]) + len(extra) + (20 if local_zip64(size) else 0)


@dataclass(frozen=True)
class Entry:
    """A member as the central directory records it."""

    name: str
    extra: bytes
    size: int
    crc32: int
    offset: int  # of its local header


def local_header(entry: Entry) -> bytes:
    """The local header of a stored member (its data follows it)."""
    raw, flags = encoded_name(entry.name)
    extra, size, version = entry.extra, entry.size, _VERSION
    if local_zip64(size):
        extra += struct.pack("<HHQQ", 1, 16, size, size)
        size, version = 0xFFFFFFFF, _ZIP64_VERSION
    return _LOCAL.pack(b"PK\x03\x04", version, 0, flags, 0, _DOS_TIME, _DOS_DATE, entry.crc32, size, size,
                       len(raw), len(extra)) + raw + extra


def central_directory(entries: Iterable[Entry], start: int) -> Iterator[bytes]:
    """The central directory of ``entries``, beginning at file offset ``start``, and the end records: one piece
    per entry, then one for the end records."""
    count, pos, limit = 0, start, zipfile.ZIP64_LIMIT
    for e in entries:
        raw, flags = encoded_name(e.name)
        wide = [e.size, e.size] if e.size > limit else []
        if e.offset > limit:
            wide.append(e.offset)
        extra = e.extra
        if wide:
            extra = struct.pack("<HH" + "Q" * len(wide), 1, 8 * len(wide), *wide) + _strip_zip64(extra)
        version = _ZIP64_VERSION if wide or local_zip64(e.size) else _VERSION
        size = 0xFFFFFFFF if e.size > limit else e.size
        piece = _CENTRAL.pack(b"PK\x01\x02", version, _CREATE_SYSTEM, version, 0, flags, 0, _DOS_TIME, _DOS_DATE,
                              e.crc32, size, size, len(raw), len(extra), 0, 0, 0, _EXTERNAL_ATTR,
                              0xFFFFFFFF if e.offset > limit else e.offset) + raw + extra
        count += 1
        pos += len(piece)
        yield piece
    dir_size, end = pos - start, b""
    if count > zipfile.ZIP_FILECOUNT_LIMIT or start > limit or dir_size > limit:
        end = _END64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, dir_size, start) + \
            _LOCATOR64.pack(b"PK\x06\x07", 0, pos, 1)
        count, dir_size, start = min(count, 0xFFFF), min(dir_size, 0xFFFFFFFF), min(start, 0xFFFFFFFF)
    yield end + _END.pack(b"PK\x05\x06", 0, 0, count, count, dir_size, start, 0)


def _strip_zip64(extra: bytes) -> bytes:
    """``extra`` without zip64 fields (id 1), as zipfile drops them before adding its own."""
    out, pos = b"", 0
    while pos + 4 <= len(extra):
        hid, length = struct.unpack_from("<HH", extra, pos)
        if hid != 1:
            out += extra[pos:pos + 4 + length]
        pos += 4 + length
    return out + extra[pos:]


def data_offsets(members: Iterable[tuple[str, int]], extra: Callable[[str, int, int], bytes],
                 start: int = 0) -> list[int]:
    """Where the data of each member (``(name, size)``) begins in the archive ``write_stored`` writes from file
    offset ``start``."""
    out, pos = [], start
    for name, size in members:
        pos += local_header_size(name, extra(name, size, pos), size)
        out.append(pos)
        pos += size
    return out


def write_stored(fp: Any, members: Iterable[tuple[str, Any]], extra: Callable[[str, int, int], bytes], *,
                 direct: bool = False, written: Collection[str] = ()) -> None:
    """Write a zip archive of stored members into the binary file ``fp``, from its current position. ``members``
    are ``(name, data)``: ``data`` bytes, or a streamed member (``size``, ``crc32`` and ``chunks()``, the buffers
    of its data in order), written as they come (``bulkwrite.write_data``: with direct I/O if ``direct`` and the
    member is large). ``extra(name, size, offset)`` gives the extra field of the member whose local header begins
    at file offset ``offset``. The data of the streamed members named in ``written`` is already in the file, where
    ``data_offsets`` puts it: only their headers are written."""
    entries: list[Entry] = []
    pos = fp.tell()
    for name, data in members:
        streamed = hasattr(data, "chunks")
        size = data.size if streamed else len(data)
        crc = data.crc32 if streamed else zlib.crc32(data)
        entry = Entry(name, extra(name, size, pos), size, crc, pos)
        header = local_header(entry)
        fp.write(header)
        if streamed and name in written:
            fp.seek(pos + len(header) + size)
        elif streamed:
            count, _ = write_data(fp, data.chunks(), size, direct)
            if count != size:
                raise ValueError(f"member {name!r}: {count} bytes written, {size} declared")
        else:
            fp.write(data)
        entries.append(entry)
        pos += len(header) + size
    for piece in central_directory(entries, pos):
        fp.write(piece)
