"""The artifact container: the writer's bytes on disk, and the reader's refusal of every kind of damaged file."""

from __future__ import annotations

import copy
import errno
import hashlib
import io
import json
import os
import struct
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest

import jaxport
from jaxport._fsio import atomic_write
from jaxport.artifact import container
from jaxport.artifact.container import ALIGNMENT, MANIFEST_NAME, manifest_bytes, open_artifact, write_artifact
from jaxport.errors import FormatError, IntegrityError, OutputError

PAYLOAD = "functions/f.jaxexport"

MODEL = """\
import jax.numpy as jnp


def f(x, y):
    return jnp.tanh(x) * y
"""
SPEC = "jaxport: 1\ndims: {batch: {max: 64}}\nargs: ['f32[batch, 3]', 'f32[3]']\n"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real artifact, exported once for the module."""
    d = tmp_path_factory.mktemp("exported")
    (d / "model.py").write_text(MODEL)
    (d / "spec.yaml").write_text(SPEC)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        return jaxport.export("model.py:f", "spec.yaml", output=d / "f.jaxport").path


@pytest.fixture(scope="module")
def parts(exported: Path) -> tuple[dict[str, Any], bytes]:
    """The real artifact's manifest (without its ``members`` listing) and its payload."""
    with zipfile.ZipFile(exported) as z:
        m = json.loads(z.read(MANIFEST_NAME))
        payload = z.read(PAYLOAD)
    del m["members"]
    return m, payload


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # messages name files as given: "bad.jaxport: ..."


def listed(manifest: dict[str, Any], members: dict[str, bytes]) -> dict[str, Any]:
    """``manifest`` with a ``members`` listing that matches ``members``."""
    m = copy.deepcopy(manifest)
    m["members"] = {n: {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for n, b in members.items()}
    return m


def hand_zip(path: str | Path, entries: list[tuple[str, bytes]], compress: int = zipfile.ZIP_STORED) -> None:
    """Write a zip with Python's zipfile (no jaxport alignment), entries in the order given."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names, which some tests want
        with zipfile.ZipFile(path, "w") as z:
            for name, data in entries:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = compress
                z.writestr(info, data)


def hostile(parts: tuple[dict[str, Any], bytes], *, manifest: dict[str, Any] | bytes | None = None,
            extra: list[tuple[str, bytes]] = (), path: str = "bad.jaxport", **kw: Any) -> str:
    """A hand-built artifact: the manifest (correct unless given), the payload, then ``extra`` members."""
    m, payload = parts
    if manifest is None:
        manifest = listed(m, {PAYLOAD: payload})
    raw = manifest if isinstance(manifest, bytes) else manifest_bytes(manifest)
    hand_zip(path, [(MANIFEST_NAME, raw), (PAYLOAD, payload), *extra], **kw)
    return path


def refusal(path: str | Path, kind: type[FormatError] = FormatError) -> str:
    """The message of the error opening (and verifying) ``path`` raises; it must be exactly ``kind``."""
    with pytest.raises(FormatError) as e:
        with open_artifact(path) as art:
            art.verify_all()
    assert type(e.value) is kind
    return str(e.value)


def central_entries(data: bytes) -> list[int]:
    """Offsets of the central-directory headers in a zip."""
    out, pos = [], data.find(b"PK\x01\x02")
    while pos >= 0:
        out.append(pos)
        pos = data.find(b"PK\x01\x02", pos + 4)
    return out


def data_offset(data: bytes, member: str) -> int:
    """Where ``member``'s data starts in the zip ``data``, read from its local header."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        info = z.getinfo(member)
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    return info.header_offset + 30 + name_len + extra_len


# --- writing -----------------------------------------------------------------------------------------------------


def test_round_trip(parts):
    m, payload = parts
    members = {PAYLOAD: payload, "weights/w.bin": bytes(range(256)) * 3}
    man = {**copy.deepcopy(m)}
    raw = write_artifact("a.jaxport", man, members)
    assert man == m  # the caller's JSON is left as it was; the written one lists the members
    written = {**man, "members": {PAYLOAD: {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()},
                                  "weights/w.bin": {"size": 768,
                                                    "sha256": hashlib.sha256(bytes(range(256)) * 3).hexdigest()}}}
    with open_artifact("a.jaxport") as art:
        assert art.manifest == written
        assert art.manifest_bytes == raw == manifest_bytes(written)
        assert list(art.members) == [MANIFEST_NAME, PAYLOAD, "weights/w.bin"]
        for name, data in members.items():
            assert art.read(name) == data
            assert bytes(art.view(name)) == data
        assert art.size == os.path.getsize("a.jaxport")


def test_layout_on_disk(exported: Path):
    data = exported.read_bytes()
    with zipfile.ZipFile(exported) as z:
        infos = z.infolist()
    assert [i.filename for i in infos] == [MANIFEST_NAME, PAYLOAD]
    assert data_offset(data, MANIFEST_NAME) == 64
    for info in infos:
        assert info.compress_type == zipfile.ZIP_STORED
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.create_system == 3
        assert info.external_attr == 0o644 << 16
        assert info.flag_bits & 0x9 == 0
        assert data_offset(data, info.filename) % ALIGNMENT == 0
        name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
        pad_id, pad_len = struct.unpack_from("<HH", data, info.header_offset + 30 + name_len)
        assert (pad_id, extra_len) == (0xA1A0, 4 + pad_len)
        assert 0 <= pad_len < 64
    assert data[-22:-18] == b"PK\x05\x06" and data[-2:] == b"\0\0"  # end record last, no comment
    sidecar = exported.with_name(exported.name + ".manifest.json")
    with zipfile.ZipFile(exported) as z:
        assert sidecar.read_bytes() == z.read(MANIFEST_NAME)


@pytest.mark.parametrize("name_len", [1, 2, 3, 5, 8, 13, 21, 30, 33, 34, 35, 36, 37, 55, 60, 64, 65, 97, 130])
def test_every_members_data_is_aligned_to_64(parts, name_len):
    m, payload = parts
    members = {PAYLOAD: payload[: 7 * name_len % 200 + 1], "x" * name_len: b"y" * (name_len % 70),
               "w" * (name_len % 7 + 1): b"z" * 3}
    write_artifact("a.jaxport", copy.deepcopy(m), members)
    data = Path("a.jaxport").read_bytes()
    with open_artifact("a.jaxport") as art:
        for name, member in art.members.items():
            assert member.offset % ALIGNMENT == 0, (name, member.offset)
            assert member.offset == data_offset(data, name)
        for name, content in members.items():
            assert art.read(name) == content


def test_equal_content_gives_equal_bytes(parts, exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    m, payload = parts
    write_artifact("one.jaxport", copy.deepcopy(m), {PAYLOAD: payload})
    write_artifact("two.jaxport", copy.deepcopy(m), {PAYLOAD: payload})
    assert Path("one.jaxport").read_bytes() == Path("two.jaxport").read_bytes()
    # and exporting the same function again reproduces the artifact byte for byte
    monkeypatch.chdir(exported.parent)
    again = jaxport.export("model.py:f", "spec.yaml", output=tmp_path / "again.jaxport").path
    assert again.read_bytes() == exported.read_bytes()


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    Path("out.jaxport").write_bytes(b"old artifact")

    def fail(f):
        f.write(b"half of a new one")
        raise RuntimeError("writer crashed")

    with pytest.raises(RuntimeError, match="writer crashed"):
        atomic_write("out.jaxport", fail)
    assert Path("out.jaxport").read_bytes() == b"old artifact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jaxport"]

    def interrupted(f):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write("out.jaxport", interrupted)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jaxport"]


def test_an_os_error_while_writing_is_an_output_error(tmp_path: Path):
    Path("out.jaxport").write_bytes(b"old artifact")

    def full(f):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OutputError) as e:
        atomic_write("out.jaxport", full)
    assert str(e.value) == ("out.jaxport: cannot write: No space left on device. Free space on that disk, or write the "
                            "file elsewhere.")
    assert Path("out.jaxport").read_bytes() == b"old artifact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jaxport"]


def test_writing_into_a_missing_directory(parts):
    m, payload = parts
    with pytest.raises(OutputError) as e:
        write_artifact("missing/out.jaxport", copy.deepcopy(m), {PAYLOAD: payload})
    assert str(e.value) == "missing/out.jaxport: directory missing does not exist. Create it first."


def test_a_write_replaces_the_previous_artifact(parts, tmp_path: Path):
    m, payload = parts
    Path("a.jaxport").write_bytes(b"previous")
    write_artifact("a.jaxport", copy.deepcopy(m), {PAYLOAD: payload})
    with open_artifact("a.jaxport") as art:
        assert art.read(PAYLOAD) == payload
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jaxport"]


# --- reading: the zip container ----------------------------------------------------------------------------------


def test_a_hand_built_unaligned_artifact_is_accepted(parts):
    """The control for the hostile files below: zipfile's plain output, which each of them changes in one way."""
    with open_artifact(hostile(parts)) as art:
        art.verify_all()
        assert art.read(PAYLOAD) == parts[1]


def test_not_a_zip():
    Path("bad.jaxport").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    assert refusal("bad.jaxport") == ("bad.jaxport: not a jaxport artifact: it does not start with a zip local header "
                                      "(PK\\x03\\x04).")


@pytest.mark.parametrize(("content", "size"), [(b"", "0 bytes"), (b"P", "1 byte"), (b"PK\x03\x04" + b"\0" * 17,
                                                                                    "21 bytes")])
def test_too_short(content, size):
    Path("bad.jaxport").write_bytes(content)
    assert refusal("bad.jaxport") == f"bad.jaxport: not a jaxport artifact: the file is {size}, too short for a zip " \
                                     f"archive."


def test_missing_file_and_directory(tmp_path: Path):
    assert refusal("nope.jaxport") == "nope.jaxport: file not found."
    Path("dir.jaxport").mkdir()
    assert refusal("dir.jaxport") == "dir.jaxport: is a directory, not an artifact."


@pytest.mark.parametrize("cut", [22, 40, 64, 100, 0.5, -23, -22, -10, -1])
def test_truncated(exported: Path, cut):
    data = exported.read_bytes()
    end = int(len(data) * cut) if isinstance(cut, float) else cut if cut > 0 else len(data) + cut
    Path("bad.jaxport").write_bytes(data[:end])
    assert refusal("bad.jaxport") == ("bad.jaxport: damaged artifact: the file is truncated: its zip "
                                      "end-of-central-directory record is missing. Re-download or re-export the "
                                      "artifact.")


@pytest.mark.parametrize(("tail", "what"), [(b"\0", "1 unexpected byte"), (b"trailing garbage", "16 unexpected bytes"),
                                            (b"PK\x05\x06", "4 unexpected bytes")])
def test_trailing_bytes(exported: Path, tail, what):
    data = exported.read_bytes()
    Path("bad.jaxport").write_bytes(data + tail)
    assert refusal("bad.jaxport") == (f"bad.jaxport: damaged artifact: the file has {what} after the end of the zip "
                                      f"archive (at offset {len(data)}). Remove them, or re-download or re-export "
                                      f"the artifact.")


def test_archive_comment(exported: Path):
    with zipfile.ZipFile(exported) as src, zipfile.ZipFile("bad.jaxport", "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.comment = b"hello"
    assert refusal("bad.jaxport") == "bad.jaxport: the zip archive carries a 5-byte comment; jaxport artifacts have " \
                                     "none. Re-export the artifact."


@pytest.mark.parametrize("where", [0, 100, -1])
def test_a_flipped_byte_in_a_member_fails_its_digest(exported: Path, parts, where):
    data = bytearray(exported.read_bytes())
    start = data_offset(bytes(data), PAYLOAD)
    payload = parts[1]
    i = start + (where % len(payload))
    data[i] ^= 0x20
    Path("bad.jaxport").write_bytes(data)
    damaged = bytes(data[start:start + len(payload)])
    actual = hashlib.sha256(damaged).hexdigest()
    expected = hashlib.sha256(payload).hexdigest()
    with open_artifact("bad.jaxport") as art:  # the structure is intact: the damage shows when the member is read
        with pytest.raises(IntegrityError) as e:
            art.read(PAYLOAD)
        assert art.read(PAYLOAD, verify=False) == damaged
    assert str(e.value) == (f"bad.jaxport: member '{PAYLOAD}' is damaged: its sha256 is {actual[:16]}..., the "
                            f"manifest says {expected[:16]}.... Re-download or re-export the artifact.")


def test_a_flipped_byte_in_a_local_header(exported: Path):
    data = bytearray(exported.read_bytes())
    data[31] ^= 0x01  # second letter of "manifest.json" in the first local header
    Path("bad.jaxport").write_bytes(data)
    assert refusal("bad.jaxport") == "bad.jaxport: member 'manifest.json': local header names a different file."


def test_a_member_not_listed_in_the_manifest(parts):
    path = hostile(parts, extra=[("evil.so", b"\x7fELF")])
    assert refusal(path) == "bad.jaxport: member 'evil.so' is not listed in the manifest."


def test_a_listed_member_missing_from_the_archive(parts):
    m, payload = parts
    manifest = listed(m, {PAYLOAD: payload, "weights/w.bin": b"123"})
    assert refusal(hostile(parts, manifest=manifest)) == ("bad.jaxport: member 'weights/w.bin' is listed in the "
                                                          "manifest but missing from the archive.")


def test_manifest_must_come_first(parts):
    m, payload = parts
    hand_zip("bad.jaxport", [(PAYLOAD, payload), (MANIFEST_NAME, manifest_bytes(listed(m, {PAYLOAD: payload})))])
    assert refusal("bad.jaxport") == ("bad.jaxport: not a jaxport artifact: the first member is "
                                      "'functions/f.jaxexport', not 'manifest.json'.")


def test_compressed_member(parts):
    assert refusal(hostile(parts, compress=zipfile.ZIP_DEFLATED)) == (
        "bad.jaxport: member 'manifest.json' is compressed, encrypted or streamed; jaxport artifacts store members "
        "as is.")


@pytest.mark.parametrize("flag", [0x1, 0x8])
def test_encrypted_or_streamed_member(parts, flag):
    data = bytearray(Path(hostile(parts)).read_bytes())
    second = central_entries(bytes(data))[1]
    struct.pack_into("<H", data, second + 8, flag)
    Path("bad.jaxport").write_bytes(data)
    assert refusal("bad.jaxport") == (f"bad.jaxport: member '{PAYLOAD}' is compressed, encrypted or streamed; "
                                      f"jaxport artifacts store members as is.")


def test_duplicate_member(parts):
    path = hostile(parts, extra=[(PAYLOAD, parts[1])])
    assert refusal(path) == f"bad.jaxport: member '{PAYLOAD}' appears twice."


def test_a_hole_between_members(parts):
    data = Path(hostile(parts)).read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        hole = z.getinfo(PAYLOAD).header_offset
    junk = b"\0" * 10
    patched = bytearray(data[:hole] + junk + data[hole:])
    second, cd = central_entries(bytes(patched))[1], central_entries(bytes(patched))[0]
    struct.pack_into("<I", patched, second + 42, hole + len(junk))  # the payload's local header offset
    struct.pack_into("<I", patched, len(patched) - 6, cd)  # the end record's directory offset
    Path("bad.jaxport").write_bytes(patched)
    assert refusal("bad.jaxport") == (f"bad.jaxport: member '{PAYLOAD}' starts at offset {hole + 10}, expected "
                                      f"{hole}: members must follow each other with no gaps or overlaps.")


def test_bytes_between_the_last_member_and_the_directory(parts):
    data = Path(hostile(parts)).read_bytes()
    cd = central_entries(data)[0]
    junk = b"hidden payload"
    patched = bytearray(data[:cd] + junk + data[cd:])
    struct.pack_into("<I", patched, len(patched) - 6, cd + len(junk))  # the end record's directory offset
    Path("bad.jaxport").write_bytes(patched)
    assert refusal("bad.jaxport") == (f"bad.jaxport: damaged artifact: {len(junk)} unaccounted bytes between the last "
                                      f"member and the zip directory.")


@pytest.mark.parametrize("name", ["../x", "/abs", "a/../../x", "./x", "a//b", "a\\b", "C:/x", "x" * 1025])
def test_unsafe_member_names(parts, name):
    m, payload = parts
    manifest = listed(m, {PAYLOAD: payload, name: b"x"})
    path = hostile(parts, manifest=manifest, extra=[(name, b"x")])
    assert refusal(path) == (f"bad.jaxport: member {name!r} has an unsafe name (absolute, an empty, '.' or '..' "
                             f"component, a drive, a backslash or NUL).")


def test_caps_on_members_and_manifest_size(parts, monkeypatch: pytest.MonkeyPatch):
    path = hostile(parts)
    monkeypatch.setattr(container, "MAX_MEMBERS", 1)
    assert refusal(path) == "bad.jaxport: the artifact has 2 members; at most 1 are allowed."
    monkeypatch.setattr(container, "MAX_MEMBERS", 2)
    monkeypatch.setattr(container, "MAX_MANIFEST_BYTES", 100)
    size = len(manifest_bytes(listed(parts[0], {PAYLOAD: parts[1]})))
    assert refusal(path) == f"bad.jaxport: manifest.json is {size} bytes; at most 100 are allowed."


def test_size_mismatch_is_an_integrity_error(parts):
    m, payload = parts
    manifest = listed(m, {PAYLOAD: payload})
    manifest["members"][PAYLOAD]["size"] = len(payload) + 1
    assert refusal(hostile(parts, manifest=manifest), IntegrityError) == (
        f"bad.jaxport: member '{PAYLOAD}' is {len(payload)} bytes, the manifest says {len(payload) + 1}.")


def test_reading_an_unknown_member(exported: Path):
    with open_artifact(exported) as art:
        with pytest.raises(FormatError) as e:
            art.read("nope.bin")
    assert str(e.value) == f"{exported}: no member 'nope.bin' in the artifact."


# --- reading: the manifest ---------------------------------------------------------------------------------------


def good_manifest(parts) -> dict[str, Any]:
    return listed(parts[0], {PAYLOAD: parts[1]})


def test_manifest_with_duplicate_keys(parts):
    raw = manifest_bytes(good_manifest(parts)).replace(b'"format": "jaxport",', b'"format": "jaxport",\n  "format": '
                                                                                 b'"jaxport",', 1)
    assert refusal(hostile(parts, manifest=raw)) == ("bad.jaxport: manifest.json is not valid JSON: duplicate key "
                                                     "'format'.")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_manifest_with_non_finite_numbers(parts, constant):
    m = good_manifest(parts)
    m["metadata"]["description"] = "PLACEHOLDER"
    raw = manifest_bytes(m).replace(b'"PLACEHOLDER"', constant.encode())
    assert refusal(hostile(parts, manifest=raw)) == f"bad.jaxport: manifest.json is not valid JSON: {constant} is " \
                                                    f"not valid JSON."


@pytest.mark.parametrize("raw", [b"[" * 10000 + b"]" * 10000, b'{"a": ' * 10000 + b"1" + b"}" * 10000])
def test_deeply_nested_manifest(parts, raw):
    assert refusal(hostile(parts, manifest=raw)) == ("bad.jaxport: manifest.json is not valid JSON: nesting deeper "
                                                     "than 64 levels.")


def test_brackets_inside_strings_are_not_nesting(parts):
    m = good_manifest(parts)
    m["metadata"]["description"] = "[" * 100 + '"\\' + "{" * 100
    with open_artifact(hostile(parts, manifest=m)) as art:
        assert art.manifest["metadata"]["description"] == m["metadata"]["description"]


def test_manifest_bad_utf8(parts):
    raw = manifest_bytes(good_manifest(parts))
    at = raw.index(b'"jaxport"') + 1
    raw = raw[:at] + b"\xff" + raw[at + 1:]
    assert refusal(hostile(parts, manifest=raw)) == f"bad.jaxport: manifest.json is not UTF-8 (byte {at})."


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{nope", "manifest.json is not valid JSON: Expecting property name enclosed in double quotes: line 1 "
                   "column 2 (char 1)."),
        (b"[]", "manifest.json: (top level): expected an object, found list"),
        (b"", "manifest.json is not valid JSON: Expecting value: line 1 column 1 (char 0)."),
    ],
)
def test_manifest_not_an_object(parts, raw, message):
    assert refusal(hostile(parts, manifest=raw)) == f"bad.jaxport: {message}"


def test_newer_major_format_names_the_writer(parts):
    m = good_manifest(parts)
    m["format_version"] = "2.0"
    m["producer"]["jaxport"] = "9.1.0"
    assert refusal(hostile(parts, manifest=m)) == (
        f"bad.jaxport: artifact format 2.0 was written by jaxport 9.1.0; this jaxport ({jaxport.__version__}) reads "
        f"format 1.x. Upgrade jaxport to read it.")


def test_newer_minor_format_and_unknown_fields_are_accepted(parts):
    m = good_manifest(parts)
    m["format_version"] = "1.9"
    m["added_in_1_9"] = {"anything": [1, 2]}
    m["functions"]["f"]["added_in_1_9"] = True
    with open_artifact(hostile(parts, manifest=m)) as art:
        art.verify_all()
        assert art.manifest["format_version"] == "1.9"


def _without(m: dict[str, Any], *path: str | int) -> dict[str, Any]:
    target = m
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return m


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (("format",), "manifest.json: (top level): missing required field 'format'"),
        (("format_version",), "manifest.json: (top level): missing required field 'format_version'"),
        (("producer",), "manifest.json: (top level): missing required field 'producer'"),
        (("producer", "jax"), "manifest.json: producer: missing required field 'jax'"),
        (("members",), "manifest.json: (top level): missing required field 'members'"),
        (("functions",), "manifest.json: (top level): missing required field 'functions'"),
        (("functions", "f", "payload"), "manifest.json: functions['f']: missing required field 'payload'"),
        (("functions", "f", "inputs"), "manifest.json: functions['f']: missing required field 'inputs'"),
        (("functions", "f", "inputs", 0, "dtype"),
         "manifest.json: functions['f'].inputs[0]: missing required field 'dtype'"),
    ],
)
def test_manifest_missing_fields(parts, path, message):
    m = _without(good_manifest(parts), *path)
    assert refusal(hostile(parts, manifest=m)) == f"bad.jaxport: {message}"


def _set(m: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    target = m
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return m


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ("O", ("functions", "f", "inputs", 0, "dtype"),
         "manifest.json: functions['f'].inputs[0].dtype: 'O' is not a dtype jaxport supports"),
        ("object", ("functions", "f", "outputs", 0, "dtype"),
         "manifest.json: functions['f'].outputs[0].dtype: 'object' is not a dtype jaxport supports"),
        ([1] * 65, ("functions", "f", "inputs", 0, "shape"),
         "manifest.json: functions['f'].inputs[0].shape: has 65 entries; at most 64 are allowed"),
        (["batch +"], ("functions", "f", "inputs", 0, "shape"),
         "manifest.json: functions['f'].inputs[0].shape[0]: bad dimension expression: unexpected end of 'batch +'"),
        ([-1], ("functions", "f", "inputs", 0, "shape"),
         "manifest.json: functions['f'].inputs[0].shape[0]: -1 is out of range [0, 4611686018427387904]"),
        ("zip", ("format",), "manifest.json: format: expected 'jaxport', found 'zip': this is not a jaxport artifact"),
        ("1", ("format_version",), "manifest.json: format_version: '1' is not of the form MAJOR.MINOR"),
        (1.0, ("format_version",), "manifest.json: format_version: expected a string, found float"),
        ("0.9", ("format_version",), "manifest.json: format_version: '0.9' is not a released format version"),
        ("functions/g.jaxexport", ("functions", "f", "payload"),
         "manifest.json: functions['f'].payload: 'functions/g.jaxexport' is not listed under 'members'"),
        ({}, ("functions",), "manifest.json: functions: the artifact declares no function"),
        ("10", ("functions", "f", "calling_convention_version"),
         "manifest.json: functions['f'].calling_convention_version: expected an integer, found str"),
    ],
)
def test_manifest_bad_fields(parts, value, path, message):
    m = _set(good_manifest(parts), value, *path)
    assert refusal(hostile(parts, manifest=m)) == f"bad.jaxport: {message}"


def test_manifest_bad_digest_field(parts):
    m = good_manifest(parts)
    m["members"][PAYLOAD]["sha256"] = "A" * 64
    assert refusal(hostile(parts, manifest=m)) == (f"bad.jaxport: manifest.json: members['{PAYLOAD}'].sha256: "
                                                   f"expected 64 lowercase hex digits")


# --- through the command line ------------------------------------------------------------------------------------


def test_inspect_refuses_a_damaged_file(exported: Path, run_cli):
    data = exported.read_bytes()
    Path("cut.jaxport").write_bytes(data[: len(data) // 2])
    result = run_cli("inspect", "cut.jaxport")
    assert result.exit_code == 7
    assert result.stderr == ("error[format]: cut.jaxport: damaged artifact: the file is truncated: its zip "
                             "end-of-central-directory record is missing. Re-download or re-export the artifact.\n")
    assert "Traceback" not in result.stderr + result.stdout


def test_inspect_refuses_a_newer_format(parts, run_cli):
    m = good_manifest(parts)
    m["format_version"] = "3.1"
    m["producer"]["jaxport"] = "7.0.0"
    result = run_cli("inspect", hostile(parts, manifest=m))
    assert result.exit_code == 7
    assert result.stderr == (f"error[format]: bad.jaxport: artifact format 3.1 was written by jaxport 7.0.0; this "
                             f"jaxport ({jaxport.__version__}) reads format 1.x. Upgrade jaxport to read it.\n")


def test_inspect_refuses_a_damaged_member_with_exit_code_8(exported: Path, parts, run_cli):
    data = bytearray(exported.read_bytes())
    data[data_offset(bytes(data), PAYLOAD) + 10] ^= 0xFF
    Path("flipped.jaxport").write_bytes(data)
    result = run_cli("inspect", "flipped.jaxport")
    assert result.exit_code == 8
    assert result.stderr.startswith(f"error[integrity]: flipped.jaxport: member '{PAYLOAD}' is damaged: its sha256 is ")
    assert result.stderr.endswith("Re-download or re-export the artifact.\n")
    assert "Traceback" not in result.stderr + result.stdout


def test_inspect_refuses_an_unlisted_member(parts, run_cli):
    result = run_cli("inspect", hostile(parts, extra=[("evil.py", b"import os")]))
    assert result.exit_code == 7
    assert result.stderr == "error[format]: bad.jaxport: member 'evil.py' is not listed in the manifest.\n"
