"""The artifact container: a zip archive of stored (uncompressed) members, manifest first.

Writer: members are written in a fixed order with fixed timestamps and permissions, so equal inputs give equal
bytes; each member's data starts at a multiple of ``ALIGNMENT`` (padding goes in the local header's extra field), so
tensors can be memory-mapped; the file is written to a locked temporary sibling, fsynced and renamed into place
(``_fsio.atomic_write``), and temporary files left by killed writers are removed by the next write.

Reader trust model: the file may be hostile. It must be a regular file (``_fsio.open_regular``), and it is read
through its descriptor with ``os.pread``, never a memory map, so a file truncated while it is read is an
``IntegrityError``, not SIGBUS (only bound weights are mapped, by ``Artifact.view``). Before any member's bytes are
handed to another parser (JSON, JAX's flatbuffer and StableHLO readers, numpy), the reader checks that the file is a
plain zip whose members are stored, unencrypted, with safe unique names, laid out back to back from offset 0 with no
holes, overlaps or trailing bytes; that its end records and directory agree with each other and with every local
header (sizes, flags, CRC, names), all read and bounded before Python's zipfile parses anything; that
``manifest.json`` comes first, is at most ``MAX_MANIFEST_BYTES`` and matches its CRC-32 (the manifest has no digest
of its own, so this catches accidental damage to it); that the manifest validates; that the members are exactly
those the manifest lists, with the listed sizes; and, when a member is read, that its sha256 matches. Nothing is
ever unpickled or executed. Digests and CRCs detect damage, not deliberate edits: a hostile writer makes them match,
which is why the program is then read in a child process first (``isolate.check_payload``).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from .._fsio import atomic_write, open_regular
from .._json import strict_json
from .._record import dataclass
from .._text import plural
from ..errors import FormatError, IntegrityError
from . import manifest as manifest_mod
from . import zipwrite
from .layout import ALIGNMENT, MANIFEST_NAME, MAX_MANIFEST_BYTES, MAX_MEMBERS, UNSAFE_NAME, is_safe_member_name
from .model import Manifest, MemberInfo, replace
from .zipread import ReadOnly

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    import mmap
    from collections.abc import Callable, Mapping
    from typing import Any

_PAD_ID = 0xA1A0  # extra-field id of jaxport's alignment padding
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_EOCD = b"PK\x05\x06"
_EOCD_RECORD = struct.Struct("<4sHHHHIIH")
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_ZIP64_END = struct.Struct("<4sQHHIIQQQQ")
_UTF8_NAME = 0x800  # general-purpose flag bit 11: the name is UTF-8; the only flag a jaxport member may carry
#: The largest central directory a reader parses: MAX_MEMBERS entries with 1024-byte names and some extra fields.
MAX_DIRECTORY_BYTES = MAX_MEMBERS * (46 + 1024 + 128)


def sha256(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_bytes(manifest: dict[str, Any] | Manifest) -> bytes:
    """The canonical JSON encoding of a manifest, its records or its JSON (also the sidecar file's content)."""
    if isinstance(manifest, Manifest):
        manifest = manifest.to_json()
    return (json.dumps(manifest, indent=2, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")


# --- writing ----------------------------------------------------------------------------------------------------
# The zip records themselves are written by ``zipwrite`` (the same bytes as Python's zipfile writes).


def _size(data: Any) -> int:
    return data.size if hasattr(data, "chunks") else len(data)


def _padding(name: str, size: int, offset: int) -> bytes:
    """The extra field that puts the data of the member whose local header is at ``offset`` at a multiple of
    ``ALIGNMENT`` (the padding counts the name's UTF-8 bytes, as it always has)."""
    start = offset + 30 + len(name.encode("utf-8")) + (20 if zipwrite.local_zip64(size) else 0)  # the data's
    pad = (-start) % ALIGNMENT
    if pad and pad < 4:
        pad += ALIGNMENT
    return struct.pack("<HH", _PAD_ID, pad - 4) + b"\0" * (pad - 4) if pad else b""


def _write_members(fp: Any, members: list[tuple[str, Any]], direct: bool = False,
                   written: tuple[str, ...] = ()) -> None:
    """Write members (bytes, or streamed: objects with ``size``, ``crc32`` and ``chunks()``) as stored entries,
    each member's data aligned to ``ALIGNMENT``; ``direct``: large streamed members with direct I/O where the file
    allows it (``bulkwrite``); ``written``: streamed members whose data is in the file already (``data_offset``)."""
    zipwrite.write_stored(fp, members, _padding, direct=direct, written=written)


def data_offset(manifest_size: int, members: dict[str, Any], name: str) -> int:
    """Where ``write_members`` puts the data of member ``name`` in a file it writes from offset 0, given the
    manifest's size in bytes (so a large member can be written before the manifest is final: its digests do not
    change its size)."""
    sizes = [(MANIFEST_NAME, manifest_size), *((n, _size(d)) for n, d in members.items())]
    return zipwrite.data_offsets(sizes, _padding)[1 + list(members).index(name)]


def listing(members: dict[str, Any]) -> dict[str, MemberInfo]:
    """What the manifest lists of each member: its size and sha256 (a member is bytes, or streamed weights with
    ``size``, ``sha256`` and ``chunks()``)."""
    return {name: MemberInfo(_size(d), d.sha256 if hasattr(d, "chunks") else sha256(d)) for name, d in members.items()}


def with_members(manifest: Manifest, members: dict[str, Any]) -> Manifest:
    """The manifest as it is written: ``members`` listed (``listing``), labelled with the format version its fields
    need (``manifest.written_version``)."""
    return replace(manifest, members=listing(members), format_version=manifest_mod.written_version(manifest))


def fill_members(manifest: dict[str, Any], members: dict[str, Any]) -> bytes:
    """The bytes of a manifest's JSON with its ``members`` listing ``members`` (``listing``), in the place the JSON
    has them (else last)."""
    return manifest_bytes({**manifest, "members": {name: info.to_json() for name, info in listing(members).items()}})


def write_members(fp: Any, manifest_raw: bytes, members: dict[str, Any], *, direct: bool = False,
                  written: tuple[str, ...] = ()) -> None:
    """Write an artifact into the seekable binary file ``fp`` (a file or memory: the same bytes): the manifest's
    bytes (``fill_members``), then ``members`` in order. ``direct``: write the bound weights to the
    disk directly, bypassing the page cache (``bulkwrite``), for a file that is not read back at once. ``written``:
    the streamed members whose data the caller has already written at ``data_offset``."""
    _write_members(fp, [(MANIFEST_NAME, manifest_raw), *members.items()], direct, written)


def write_artifact(path: str | Path, manifest: Manifest | dict[str, Any], members: dict[str, Any]) -> bytes:
    """Write the artifact file ``path`` atomically with ``members`` listed in ``manifest`` (its records, or its JSON,
    which is filled in: ``fill_members``); returns the manifest's bytes."""
    mbytes = manifest_bytes(with_members(manifest, members)) if isinstance(manifest, Manifest) else \
        fill_members(manifest, members)
    atomic_write(path, lambda f: write_members(f, mbytes, members))
    return mbytes


# --- reading ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    name: str
    offset: int  # of the data, from the start of the file
    size: int


_strict_json = strict_json  # the name tests/test_fuzz.py checks


class Artifact:
    """An opened artifact. Use :func:`open_artifact`.

    Members are read and hashed through the file descriptor (``os.pread``), never through a memory map: a file
    truncated by another process while it is read gives a short read, refused as an ``IntegrityError``, where a
    memory map would kill the process with SIGBUS. Only :meth:`view` (bound weights, handed to numpy and XLA without
    a copy) maps the file, after checking it still has its size; see README "Untrusted artifacts" for what a file
    truncated after that does.
    """

    def __init__(self, path: Path, file: _FileBytes, model: Manifest, members: dict[str, Member],
                 manifest_raw: bytes, manifest: dict[str, Any]):
        #: ``model``: the validated manifest as records (``artifact.model``), what readers read;
        #: ``manifest_bytes``: the ``manifest.json`` member's bytes, as stored; ``members``: where each member's
        #: data lies in the file.
        self.path, self._file, self.model, self.members = path, file, model, members
        self.manifest_bytes = manifest_raw
        #: The manifest as parsed JSON (transitional: for readers not yet on the records).
        self.manifest = manifest
        self._map: mmap.mmap | None = None
        self._verified: set[str] = set()

    @property
    def size(self) -> int:
        return len(self._file)

    def fileno(self) -> int:
        """The artifact's open file descriptor (the file opened once, whatever its path names since)."""
        return self._file.fileno()

    def view(self, name: str) -> memoryview:
        """A member's bytes as a read-only view of the file's memory map (no copy, no digest check)."""
        m = self.members[name]
        if self._map is None:
            import mmap  # only bound weights are mapped: inspect does not import it
            self._file.check_size(f"member {name!r}")
            self._map = mmap.mmap(self._file.fileno(), len(self._file), access=mmap.ACCESS_READ)
        return memoryview(self._map)[m.offset:m.offset + m.size]

    def read(self, name: str, verify: bool = True) -> bytes:
        """A member's bytes, after checking its sha256 against the manifest (the digest of the bytes returned)."""
        if name not in self.members:
            raise FormatError(f"{self.path}: no member {name!r} in the artifact.")
        m = self.members[name]
        data = self._file.pread(m.offset, m.size, f"member {name!r}")
        if verify:
            self._check_digest(name, sha256(data))
        return data

    def verify(self, name: str) -> None:
        """Check a member's sha256, reading it in bounded chunks."""
        if name in self._verified:
            return
        m = self.members[name]
        digest = hashlib.sha256()
        for chunk in self._file.chunks(m.offset, m.size, f"member {name!r}"):
            digest.update(chunk)
        self._check_digest(name, digest.hexdigest())

    def _check_digest(self, name: str, actual: str) -> None:
        expected = self.model.members[name].sha256
        if actual != expected:
            raise IntegrityError(f"{self.path}: member {name!r} is damaged: its sha256 is {actual[:16]}..., the "
                                 f"manifest says {expected[:16]}.... Re-download or re-export the artifact.")
        self._verified.add(name)

    def file_sha256(self) -> str:
        """The sha256 of the whole file as opened, read through its descriptor (whatever its path names since)."""
        digest = hashlib.sha256()
        for chunk in self._file.chunks(0, len(self._file), "the whole file"):
            digest.update(chunk)
        return digest.hexdigest()

    def verify_all(self) -> None:
        for name in self.members:
            if name != MANIFEST_NAME:
                self.verify(name)

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # views of it are still in use (a loaded function's weights): they keep it
                pass
        self._file.close()

    def __enter__(self) -> Artifact:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_artifact(path: str | Path) -> Artifact:
    """Open and check an artifact (see the module docstring for what is checked)."""
    path = Path(path)
    return read_artifact(path, open_regular(path, FormatError, directory="an artifact"))


def read_artifact(path: Path, fd: int) -> Artifact:
    """The artifact of ``fd``, an open descriptor of the regular file ``path``, checked as :func:`open_artifact`
    checks it; the artifact owns the descriptor (closed with it, or at once when the file is refused). A signature
    check hashes a descriptor, then reads the artifact from it (``signing.check.open_signed``)."""
    where = str(path)
    data = _FileBytes(fd, where)
    try:
        if len(data) < 22:
            raise FormatError(f"{where}: not a jaxport artifact: the file is {plural(len(data), 'byte')}, too "
                              f"short for a zip archive.")
        return _open(path, data, len(data))
    except BaseException:
        data.close()
        raise


class _FileBytes:
    """An artifact file's bytes, read on demand through its descriptor (``os.pread``, no memory map), with the
    size it had when opened. A read that comes back short (the file was truncated meanwhile) or fails raises
    ``IntegrityError`` naming the file: never SIGBUS, never a partial result."""

    CHUNK = 4 << 20  # bytes read at a time when hashing and searching

    def __init__(self, fd: int, where: str):
        self._fd, self._where = fd, where
        self._size = os.fstat(fd).st_size

    def fileno(self) -> int:
        return self._fd

    def __len__(self) -> int:
        return self._size

    def close(self, _close: Any = os.close) -> None:
        # ``os.close`` is bound at definition time: at interpreter shutdown, ``__del__`` may run after the ``os``
        # module's globals are cleared.
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                _close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        self.close()

    def check_size(self, what: str) -> None:
        """Refuse a file that no longer has the size it had when opened."""
        now = os.fstat(self._fd).st_size
        if now < self._size:
            raise IntegrityError(self._truncated(now, what))

    def _truncated(self, now: int, what: str) -> str:
        return (f"{self._where}: the file was truncated while it was read ({what}): it is now {now} bytes, it was "
                f"{self._size}. Do not modify an artifact while jaxport reads it; re-download or re-export it.")

    def pread(self, offset: int, n: int, what: str = "") -> bytes:
        """Exactly ``n`` bytes at ``offset``."""
        parts: list[bytes] = []
        got = 0
        while got < n:
            try:
                chunk = os.pread(self._fd, min(n - got, 1 << 30), offset + got)
            except OSError as e:
                raise IntegrityError(f"{self._where}: cannot read the file at offset {offset + got}: "
                                     f"{e.strerror or e}.") from None
            if not chunk:
                try:
                    now = os.fstat(self._fd).st_size
                except OSError:
                    now = offset + got
                raise IntegrityError(self._truncated(now, what or f"bytes {offset}..{offset + n}"))
            parts.append(chunk)
            got += len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def __getitem__(self, key: slice) -> bytes:
        start, stop, _ = key.indices(self._size)
        return self.pread(start, stop - start) if stop > start else b""

    def chunks(self, offset: int, n: int, what: str = "") -> Iterator[bytes]:
        """``n`` bytes at ``offset``, ``CHUNK`` bytes at a time."""
        end = offset + n
        while offset < end:
            step = min(self.CHUNK, end - offset)
            yield self.pread(offset, step, what)
            offset += step

    def rfind(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """``bytes.rfind`` over the file, reading backwards ``CHUNK`` bytes at a time."""
        end = self._size if end is None else min(end, self._size)
        hi = end
        while hi - start >= len(sub):
            lo = max(start, hi - self.CHUNK)
            window = self.pread(lo, min(end, hi + len(sub) - 1) - lo)
            at = window.rfind(sub)
            if at >= 0:
                return lo + at
            if lo == start:
                break
            hi = lo
        return -1


def _unpack(layout: struct.Struct, data: _FileBytes | bytes, offset: int) -> tuple[Any, ...]:
    return layout.unpack(data[offset:offset + layout.size])


def _open(path: Path, data: _FileBytes, size: int) -> Artifact:
    """The artifact in ``data`` (``size`` bytes), every rule of the container checked (specs/FORMAT.md, "What a
    reader checks"): the zip directory, each member's headers and place, the manifest, and the members it lists."""
    where = str(path)

    def bad(msg: str) -> FormatError:
        return FormatError(f"{where}: {msg}")

    infos, start_dir = _directory_entries(data, size, bad)
    members: dict[str, Member] = {}
    folded: set[str] = set()
    expected_offset = 0
    for i, info in enumerate(infos):
        name = info.filename
        if not is_safe_member_name(name) or info.orig_filename != name:  # zipfile cuts a name at its first NUL
            raise bad(f"member {info.orig_filename!r} has an unsafe name ({UNSAFE_NAME}).")
        if not name.isprintable() or (not name.isascii() and not info.flag_bits & _UTF8_NAME):
            raise bad(f"member {name!r} has a name with control characters, or non-ASCII characters not marked "
                      f"as UTF-8.")
        if name in members:
            raise bad(f"member {name!r} appears twice.")
        if name.casefold() in folded:
            raise bad(f"member {name!r} differs from another member's name only in case; it would overwrite it "
                      f"when extracted on some systems.")
        folded.add(name.casefold())
        members[name] = _member(data, info, expected_offset, start_dir, bad)
        expected_offset = members[name].offset + info.compress_size
        if i == 0 and name != MANIFEST_NAME:
            raise bad(f"not a jaxport artifact: the first member is {name!r}, not {MANIFEST_NAME!r}.")
    if expected_offset != start_dir:
        raise bad(f"damaged artifact: {start_dir - expected_offset} unaccounted bytes between the last member and "
                  f"the zip directory.")
    raw, manifest, typed = _manifest(data, members[MANIFEST_NAME], infos[0].CRC, where, bad)
    _check_listing(typed.members, members, where, bad)
    return Artifact(path, data, typed, members, raw, manifest)


def _directory_entries(data: _FileBytes, size: int, bad: Callable[[str], FormatError]) -> tuple[list[Any], int]:
    """The zip directory's entries and its offset, checked against the end record."""
    if data[:4] != b"PK\x03\x04":
        raise bad("not a jaxport artifact: it does not start with a zip local header (PK\\x03\\x04).")
    if data[size - 22:size - 18] != _EOCD or data[size - 2:size] != b"\0\0":
        raise bad(_misplaced_end(data, size))
    count, dir_size, dir_offset = _directory(data, size, bad)
    try:
        zf = zipfile.ZipFile(ReadOnly(data), "r")
        infos = zf.infolist()
        start_dir = zf.start_dir
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, struct.error, OSError, EOFError,
            UnicodeDecodeError, OverflowError, MemoryError, IndexError, KeyError, NotImplementedError) as e:
        raise bad(f"damaged artifact: the zip directory cannot be read ({e}).") from None
    if not infos:
        raise bad("damaged artifact: the zip archive has no members.")
    if len(infos) > MAX_MEMBERS:
        raise bad(f"the artifact has {len(infos)} members; at most {MAX_MEMBERS} are allowed.")
    if len(infos) != count or start_dir != dir_offset:
        raise bad(f"damaged artifact: the zip directory holds {len(infos)} entries at offset {start_dir}, "
                  f"but the end record says {count} at offset {dir_offset}. Re-download or re-export the artifact.")
    return infos, start_dir


def _member(data: _FileBytes, info: zipfile.ZipInfo, expected_offset: int, start_dir: int,
            bad: Callable[[str], FormatError]) -> Member:
    """One member, its flags, local header and place checked: it starts at ``expected_offset``, where the one before
    it ended, and ends before the zip directory."""
    name = info.filename
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x9:
        raise bad(f"member {name!r} is compressed, encrypted or streamed; jaxport artifacts store members "
                  f"as is.")
    if info.flag_bits & ~_UTF8_NAME or info.volume:
        raise bad(f"member {name!r} uses zip features jaxport artifacts do not (flags {info.flag_bits:#06x}, "
                  f"disk {info.volume}).")
    if info.file_size != info.compress_size:
        raise bad(f"member {name!r}: stored size {info.compress_size} differs from its size {info.file_size}.")
    if info.header_offset != expected_offset:
        raise bad(f"member {name!r} starts at offset {info.header_offset}, expected {expected_offset}: "
                  f"members must follow each other with no gaps or overlaps.")
    if info.header_offset + 30 > start_dir:
        raise bad(f"member {name!r}: local header lies past the zip directory.")
    fields = _unpack(_LOCAL, data, info.header_offset)
    if fields[0] != b"PK\x03\x04":
        raise bad(f"member {name!r}: no local header at offset {info.header_offset}.")
    name_len, extra_len = fields[9], fields[10]
    if info.header_offset + 30 + name_len + extra_len > start_dir:
        raise bad(f"member {name!r}: local header lies past the zip directory.")
    raw_name = data[info.header_offset + 30:info.header_offset + 30 + name_len]
    if raw_name != name.encode("utf-8") and raw_name != name.encode("cp437", "replace"):
        raise bad(f"member {name!r}: local header names a different file.")
    local_extra = data[info.header_offset + 30 + name_len:info.header_offset + 30 + name_len + extra_len]
    if not _extra_fields_tile(local_extra, 0, extra_len) or not _extra_fields_tile(info.extra, 0, len(info.extra)):
        raise bad(f"member {name!r}: a malformed zip extra field. Re-download or re-export the artifact.")
    local_sizes = _local_sizes(local_extra, 0, extra_len, fields[7], fields[8])
    if (fields[2], fields[3], fields[6]) != (info.flag_bits, info.compress_type, info.CRC) or \
            local_sizes != (info.compress_size, info.file_size):
        raise bad(f"member {name!r}: its local header disagrees with the zip directory (flags, method, CRC or "
                  f"sizes). Re-download or re-export the artifact.")
    offset = info.header_offset + 30 + name_len + extra_len
    if offset + info.compress_size > start_dir:
        raise bad(f"member {name!r}: its data (offset {offset}, size {info.compress_size}) runs past the zip "
                  f"directory at {start_dir}: the file is truncated or the sizes are wrong.")
    return Member(name, offset, info.file_size)


def _manifest(data: _FileBytes, mm: Member, crc: int, where: str, bad: Callable[[str], FormatError]
              ) -> tuple[bytes, Any, Manifest]:
    """The manifest member's bytes, its JSON and its records, its size, CRC-32, JSON and fields checked."""
    if mm.size > MAX_MANIFEST_BYTES:
        raise bad(f"manifest.json is {mm.size} bytes; at most {MAX_MANIFEST_BYTES} are allowed.")
    raw = data[mm.offset:mm.offset + mm.size]
    if zlib.crc32(raw) != crc:
        raise IntegrityError(f"{where}: manifest.json is damaged: its CRC-32 is {zlib.crc32(raw):08x}, the zip "
                             f"directory says {crc:08x}. Re-download or re-export the artifact.")
    try:
        manifest = strict_json(raw)
    except UnicodeDecodeError as e:
        raise bad(f"manifest.json is not UTF-8 (byte {e.start}).") from None
    except (ValueError, RecursionError) as e:
        raise bad(f"manifest.json is not valid JSON: {e}.") from None
    try:
        typed = manifest_mod.validate(manifest)
    except FormatError as e:
        raise FormatError(f"{where}: {e}") from None
    except (TypeError, KeyError, AttributeError, ValueError, IndexError, RecursionError) as e:
        # a gap in validate: still a refusal of the file, never a crash of the reader (and a bug to report)
        raise bad(f"manifest.json is malformed in a way the validator does not name ({type(e).__name__}: {e}). "
                  f"Re-export the artifact, and report this message.") from None
    return raw, manifest, typed


def _check_listing(listed: Mapping[str, MemberInfo], members: dict[str, Member], where: str,
                   bad: Callable[[str], FormatError]) -> None:
    """The archive's members are exactly those the manifest lists, each of the listed size."""
    for name, member in members.items():
        if name == MANIFEST_NAME:
            continue
        if name not in listed:
            raise bad(f"member {name!r} is not listed in the manifest.")
        if listed[name].size != member.size:
            raise IntegrityError(f"{where}: member {name!r} is {member.size} bytes, the manifest says "
                                 f"{listed[name].size}.")
    for name in listed:
        if name not in members:
            raise bad(f"member {name!r} is listed in the manifest but missing from the archive.")


def _directory(data: _FileBytes, size: int, bad: Any) -> tuple[int, int, int]:
    """The member count, size and offset of the central directory from the end records (zip64 when present),
    checked before zipfile parses anything: one disk, the directory right before the end records, bounded sizes."""
    _, disk, dir_disk, n_disk, count, dir_size, dir_offset, _ = _unpack(_EOCD_RECORD, data, size - 22)
    dir_end, loc = size - 22, size - 22 - _ZIP64_LOCATOR.size
    if loc >= 0 and data[loc:loc + 4] == b"PK\x06\x07":
        _, loc_disk, end64, disks = _unpack(_ZIP64_LOCATOR, data, loc)
        if end64 + _ZIP64_END.size != loc or loc_disk != 0 or disks != 1:
            raise bad("damaged artifact: its zip64 end records are inconsistent. Re-download or re-export it.")
        sig, rec_size, _, _, disk64, dir_disk64, n_disk64, count64, size64, offset64 = _unpack(
            _ZIP64_END, data, end64)
        if sig != b"PK\x06\x06" or rec_size != _ZIP64_END.size - 12 or disk64 or dir_disk64 or n_disk64 != count64:
            raise bad("damaged artifact: its zip64 end record is malformed. Re-download or re-export it.")
        for classic, wide, escape in ((count, count64, 0xFFFF), (n_disk, count64, 0xFFFF),
                                      (dir_size, size64, 0xFFFFFFFF), (dir_offset, offset64, 0xFFFFFFFF)):
            if classic not in (wide, escape):
                raise bad("damaged artifact: its zip and zip64 end records disagree. Re-download or re-export it.")
        n_disk, count, dir_size, dir_offset, dir_end = count64, count64, size64, offset64, end64
    if disk or dir_disk or n_disk != count:
        raise bad("damaged artifact: its end record describes a multi-disk archive. Re-download or re-export it.")
    if count > MAX_MEMBERS:
        raise bad(f"the artifact has {count} members; at most {MAX_MEMBERS} are allowed.")
    if dir_size > MAX_DIRECTORY_BYTES:
        raise bad(f"the artifact's zip directory is {dir_size} bytes; at most {MAX_DIRECTORY_BYTES} are allowed.")
    if dir_offset + dir_size != dir_end:
        raise bad(f"damaged artifact: the zip directory (offset {dir_offset}, {dir_size} bytes) does not end where "
                  f"the end record begins ({dir_end}): the file is truncated, or bytes were added or removed.")
    directory = data[dir_offset:dir_end]  # bounded by MAX_DIRECTORY_BYTES above
    pos = dir_offset
    for k in range(count):  # the entries must tile the directory exactly
        if pos + 46 > dir_end or directory[pos - dir_offset:pos - dir_offset + 4] != b"PK\x01\x02":
            raise bad(f"damaged artifact: zip directory entry {k} is missing or malformed. Re-download or re-export "
                      f"the artifact.")
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", directory, pos - dir_offset + 28)
        pos += 46 + name_len + extra_len + comment_len
    if pos != dir_end:
        raise bad(f"damaged artifact: the zip directory's entries end at offset {pos}, not at {dir_end} where the "
                  f"directory does. Re-download or re-export the artifact.")
    return count, dir_size, dir_offset


def _extra_fields_tile(data: Any, start: int, length: int) -> bool:
    """Whether the extra fields (id, length, data) fill the extra block exactly."""
    pos, end = start, start + length
    while pos + 4 <= end:
        pos += 4 + struct.unpack_from("<H", data, pos + 2)[0]
    return pos == end


def _local_sizes(data: bytes, extra_at: int, extra_len: int, compressed: int, size: int) -> tuple[int, int]:
    """A local header's (compressed size, size), from its zip64 extra field when they are escaped."""
    if compressed != 0xFFFFFFFF and size != 0xFFFFFFFF:
        return compressed, size
    pos, end = extra_at, extra_at + extra_len
    while pos + 4 <= end:
        hid, hlen = struct.unpack_from("<HH", data, pos)
        if hid == 1 and pos + 4 + hlen <= end:
            values = [struct.unpack_from("<Q", data, pos + 4 + 8 * k)[0] for k in range(hlen // 8)]
            if size == 0xFFFFFFFF and values:
                size = values.pop(0)
            if compressed == 0xFFFFFFFF and values:
                compressed = values.pop(0)
            break
        pos += 4 + hlen
    return compressed, size


def _misplaced_end(data: _FileBytes, size: int) -> str:
    """Why the zip end-of-central-directory record is not the last 22 bytes: trailing data, a comment, or truncation."""
    pos = data.rfind(_EOCD, max(0, size - 22 - 0xFFFF - (1 << 20)))
    while pos > 0:
        if pos + 22 <= size:
            _, _, _, _, _, dir_size, dir_offset, comment = _unpack(_EOCD_RECORD, data, pos)
            if dir_offset + dir_size == pos:  # a record that really closes the archive, not bytes of a member
                extra = size - pos - 22
                if comment and comment == extra:
                    return (f"the zip archive carries a {comment}-byte comment; jaxport artifacts have none. "
                            f"Re-export the artifact.")
                return (f"damaged artifact: the file has {plural(extra - comment, 'unexpected byte')} after the "
                        f"end of the zip archive (at offset {pos + 22 + comment}). Remove them, or re-download or "
                        f"re-export the artifact.")
        pos = data.rfind(_EOCD, 0, pos)
    return ("damaged artifact: the file is truncated: its zip end-of-central-directory record is missing. "
            "Re-download or re-export the artifact.")

