"""A byte map of a jaxport artifact's zip structure, for structure-aware mutations and for telling where a mutation
landed.

``layout(data)`` names every byte of a well-formed artifact: each field of each local header, central-directory
entry and end record, the member names and extra fields, and the members' data. The corpus uses it to set each
length, offset and size field to hostile values, and the runner uses it to decide whether a flipped byte lies in a
field that carries no meaning for jaxport (a timestamp, the content of the alignment padding), where an artifact that
still opens is a legitimate outcome.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

LOCAL = [("signature", 4, "sig"), ("version_needed", 2, "version"), ("flags", 2, "flags"), ("method", 2, "method"),
         ("mtime", 2, "time"), ("mdate", 2, "time"), ("crc", 4, "crc"), ("compressed_size", 4, "size"),
         ("size", 4, "size"), ("name_length", 2, "length"), ("extra_length", 2, "length")]
CENTRAL = [("signature", 4, "sig"), ("version_made_by", 2, "version"), ("version_needed", 2, "version"),
           ("flags", 2, "flags"), ("method", 2, "method"), ("mtime", 2, "time"), ("mdate", 2, "time"),
           ("crc", 4, "crc"), ("compressed_size", 4, "size"), ("size", 4, "size"), ("name_length", 2, "length"),
           ("extra_length", 2, "length"), ("comment_length", 2, "length"), ("disk_start", 2, "count"),
           ("internal_attributes", 2, "attributes"), ("external_attributes", 4, "attributes"),
           ("local_header_offset", 4, "offset")]
EOCD = [("signature", 4, "sig"), ("disk", 2, "count"), ("directory_disk", 2, "count"),
        ("entries_on_disk", 2, "count"), ("entries", 2, "count"), ("directory_size", 4, "size"),
        ("directory_offset", 4, "offset"), ("comment_length", 2, "length")]

#: Field kinds whose value carries no meaning for a jaxport reader (FORMAT.md: timestamps are fixed by the writer but
#: not read; attributes and "version made by" describe the producing system; padding content is ignored).
NEUTRAL_KINDS = frozenset({"time", "attributes", "padding-data", "extra-id"})


@dataclass(frozen=True)
class Field:
    start: int
    size: int
    name: str  # "central[manifest.json].crc", "data[weights.bin]"
    kind: str  # sig, version, flags, method, time, crc, size, length, count, offset, attributes, name, extra-id,
    # extra-length, padding-data, extra, data

    @property
    def end(self) -> int:
        return self.start + self.size

    def value(self, data: bytes) -> int:
        return int.from_bytes(data[self.start:self.end], "little")


def _fields(spec: list[tuple[str, int, str]], at: int, prefix: str) -> list[Field]:
    out, pos = [], at
    for name, size, kind in spec:
        out.append(Field(pos, size, f"{prefix}.{name}", kind))
        pos += size
    return out


def _extra_fields(data: bytes, start: int, length: int, prefix: str) -> list[Field]:
    out, pos, end = [], start, start + length
    while pos + 4 <= end:
        hid, hlen = struct.unpack_from("<HH", data, pos)
        # Readers skip extra fields whose id they do not know, so the id carries no meaning for jaxport; the length
        # does (the reader checks that the fields tile the extra block).
        out.append(Field(pos, 2, f"{prefix}.extra[{hid:#06x}].id", "extra-id"))
        out.append(Field(pos + 2, 2, f"{prefix}.extra[{hid:#06x}].length", "extra-length"))
        kind = "padding-data" if hid == 0xA1A0 else "extra"
        if hlen:
            out.append(Field(pos + 4, min(hlen, end - pos - 4), f"{prefix}.extra[{hid:#06x}].data", kind))
        pos += 4 + hlen
    if pos < end:
        out.append(Field(pos, end - pos, f"{prefix}.extra.tail", "extra"))
    return out


def layout(data: bytes) -> list[Field]:
    """Every byte range of a well-formed (jaxport-written) artifact, in file order."""
    eocd_at = len(data) - 22
    assert data[eocd_at:eocd_at + 4] == b"PK\x05\x06", "not a jaxport artifact"
    out: list[Field] = []
    # central directory first, to know the names and the offsets of the local headers
    (_, _, _, _, count, dir_size, dir_offset, _) = struct.unpack_from("<4sHHHHIIH", data, eocd_at)
    zip64 = data.rfind(b"PK\x06\x06", 0, eocd_at)
    if dir_offset == 0xFFFFFFFF and zip64 >= 0:
        dir_offset = struct.unpack_from("<Q", data, zip64 + 48)[0]
        count = struct.unpack_from("<Q", data, zip64 + 32)[0]
    central: list[Field] = []
    pos = dir_offset
    locals_: list[tuple[int, str]] = []
    for _ in range(count):
        fields = struct.unpack_from("<4sHHHHHHIIIHHHHHII", data, pos)
        name_len, extra_len, comment_len, lho = fields[10], fields[11], fields[12], fields[16]
        name = data[pos + 46:pos + 46 + name_len].decode("utf-8", "replace")
        prefix = f"central[{name}]"
        central += _fields(CENTRAL, pos, prefix)
        central.append(Field(pos + 46, name_len, f"{prefix}.name", "name"))
        central += _extra_fields(data, pos + 46 + name_len, extra_len, prefix)
        if comment_len:
            central.append(Field(pos + 46 + name_len + extra_len, comment_len, f"{prefix}.comment", "comment"))
        if lho == 0xFFFFFFFF:  # zip64: the offset is in the extra field
            lho = _zip64_offset(data, pos + 46 + name_len, extra_len, fields)
        locals_.append((lho, name))
        pos += 46 + name_len + extra_len + comment_len
    for lho, name in locals_:
        prefix = f"local[{name}]"
        out += _fields(LOCAL, lho, prefix)
        name_len, extra_len = struct.unpack_from("<HH", data, lho + 26)
        out.append(Field(lho + 30, name_len, f"{prefix}.name", "name"))
        out += _extra_fields(data, lho + 30 + name_len, extra_len, prefix)
        start = lho + 30 + name_len + extra_len
        size = struct.unpack_from("<I", data, lho + 22)[0]
        if size == 0xFFFFFFFF:
            size = struct.unpack_from("<Q", data, lho + 30 + name_len + 4)[0]
        out.append(Field(start, size, f"data[{name}]", "data"))
    out += central
    if zip64 >= 0 and zip64 >= pos:
        out.append(Field(zip64, eocd_at - zip64, "zip64-end", "zip64"))
    out += _fields(EOCD, eocd_at, "end")
    out.sort(key=lambda f: f.start)
    return out


def _zip64_offset(data: bytes, extra_at: int, extra_len: int, fields: tuple) -> int:
    pos, end = extra_at, extra_at + extra_len
    while pos + 4 <= end:
        hid, hlen = struct.unpack_from("<HH", data, pos)
        if hid == 1:
            values = list(struct.unpack_from(f"<{hlen // 8}Q", data, pos + 4))
            for raw in (fields[9], fields[8]):  # size, then compressed size, come first when escaped
                if raw == 0xFFFFFFFF:
                    values.pop(0)
            return values[0]
        pos += 4 + hlen
    raise ValueError("zip64 offset not found")


def field_at(fields: list[Field], offset: int) -> Field | None:
    for f in fields:
        if f.start <= offset < f.end:
            return f
    return None


def patch(data: bytes, field: Field, value: int) -> bytes:
    """``data`` with ``field`` set to ``value`` (which must fit its width)."""
    out = bytearray(data)
    out[field.start:field.end] = value.to_bytes(field.size, "little")
    return bytes(out)
