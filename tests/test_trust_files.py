"""Files that are not files (FIFOs, devices, sockets, directories, unopenable paths) and the known gaps of bound
weights files: every reader goes through ``_fsio.open_regular`` (regular files only, checked on the opened
descriptor) and reads with a cap on the bytes actually read; bound ``.npz`` files share the input reader's caps;
``.safetensors`` files must be indexed exactly; an artifact truncated while it is read is an integrity error, never
SIGBUS.

A test that would hang if a reader blocked on a FIFO runs under an alarm (in-process) or a timeout (subprocess).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jaxport._fsio import open_for_reading, read_file
from jaxport.arrayfiles import npy as npyfile
from jaxport.arrayfiles import safetensors as safetensors_io
from jaxport.artifact.container import open_artifact
from jaxport.artifact.policy import load_policy
from jaxport.errors import (
    EntrypointError,
    FormatError,
    InputError,
    IntegrityError,
    PolicyFileError,
    SpecError,
)
from jaxport.export.entry.entrypoint import load_entrypoint
from jaxport.export.weights import bind
from jaxport.importer.mlir import read_module
from jaxport.run.calls.streaming import NpyRows
from jaxport.run.values import npyio
from jaxport.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "1.0"
ONLY_REGULAR = "jaxport reads regular files only. Save the data to a file and give its path."


@pytest.fixture(autouse=True)
def alarm() -> Iterator[None]:
    """Fail, instead of hanging forever, if a reader blocks (on a FIFO without a writer)."""

    def hung(signum: int, frame: Any) -> None:
        raise TimeoutError("the reader blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _special(tmp_path: Path, kind: str, suffix: str) -> tuple[Path, str]:
    """A path of ``kind`` named ``thing{suffix}``, and how messages name what it is."""
    path = tmp_path / f"thing{suffix}"
    if kind == "fifo":
        os.mkfifo(path)
        return path, "a FIFO (named pipe)"
    if kind == "fifo-link":
        os.mkfifo(tmp_path / "pipe")
        path.symlink_to(tmp_path / "pipe")
        return path, "a FIFO (named pipe)"
    if kind in ("zero", "urandom", "null"):
        path.symlink_to(f"/dev/{kind}")
        return path, "a character device"
    if kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))  # the socket file stays after the socket is closed
        return path, "a socket"
    if kind == "directory":
        path.mkdir()
        return path, "a directory"
    raise AssertionError(kind)


KINDS = ["fifo", "fifo-link", "zero", "urandom", "null", "socket"]


def _expected(path: Path, kind: str, noun: str) -> str:
    return f"{path}: is {kind}, not {noun}: {ONLY_REGULAR}"


#: reader name -> (suffix, call, error class, noun in the message, prefix of the message)
READERS: dict[str, tuple[str, Callable[[Path], Any], type[Exception], str, str]] = {
    "spec": (".yaml", load_spec, SpecError, "a spec file", ""),
    "policy": (".yaml", load_policy, PolicyFileError, "a policy file", ""),
    "artifact": (".jaxport", open_artifact, FormatError, "an artifact", ""),
    "npy": (".npy", lambda p: npyio.read_npy(p, "float32", "x"), InputError, "a .npy file", ""),
    "npz": (".npz", lambda p: npyio.read_npz(p, {"x": "float32"}), InputError, "a .npz file", ""),
    "npy-rows": (".npy", lambda p: NpyRows(p, "float32", "x"), InputError, "a .npy file", ""),
    "module": (".mlir", read_module, FormatError, "a StableHLO module", ""),  # a file that is no module: exit 7
    "bind-npz": (".npz", lambda p: bind.load_bind_source(p.name, p.parent, "spec.yaml:4"), SpecError,
                 "a weights file", "spec.yaml:4: bound file "),
    "bind-npy": (".npy", lambda p: bind.load_bind_source(p.name, p.parent, "spec.yaml:4"), SpecError,
                 "a weights file", "spec.yaml:4: bound file "),
    "bind-safetensors": (".safetensors", lambda p: bind.load_bind_source(p.name, p.parent, "spec.yaml:4"),
                         SpecError, "a weights file", "spec.yaml:4: bound file "),
    "safetensors": (".safetensors", lambda p: safetensors_io.read_file(p, "w", SpecError, mmap=True), SpecError,
                    "a .safetensors file", ""),
    "entrypoint": (".py", lambda p: load_entrypoint(f"{p}:f"), EntrypointError, "a Python file", "entry point "),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_refuses_what_is_not_a_regular_file(tmp_path, reader, kind):
    suffix, call, error, noun, prefix = READERS[reader]
    path, what = _special(tmp_path, kind, suffix)
    with pytest.raises(error) as e:
        call(path)
    shown = path
    if reader == "entrypoint":  # the entry point's path is resolved, links included
        prefix, shown = f"entry point '{path}:f': ", path.resolve()
    assert str(e.value) == prefix + _expected(shown, what, noun)


@pytest.mark.parametrize("reader", ["spec", "policy", "artifact", "npy", "npz", "module"])
def test_a_directory_is_refused_with_the_existing_message(tmp_path, reader):
    suffix, call, error, noun, _ = READERS[reader]
    path, _ = _special(tmp_path, "directory", suffix)
    with pytest.raises(error) as e:
        call(path)
    assert str(e.value) == f"{path}: is a directory, not {noun}."


def test_paths_that_cannot_be_opened(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    cases = {
        str(tmp_path / "a\0b.yaml"): f"{tmp_path}/a\\0b.yaml: cannot read the spec: the path contains a NUL byte.",
        str(tmp_path / "loop"): f"{tmp_path}/loop: cannot read the spec: Too many levels of symbolic links.",
        str(tmp_path / ("x" * 300)): f"{tmp_path}/{'x' * 300}: cannot read the spec: File name too long.",
        str(tmp_path / "file.yaml" / "below"): f"{tmp_path}/file.yaml/below: cannot read the spec: Not a directory.",
    }
    (tmp_path / "file.yaml").write_text("jaxport: 1\n")
    for path, message in cases.items():
        with pytest.raises(SpecError) as e:
            load_spec(path)
        assert str(e.value) == message


def test_a_very_long_path_is_shown_cut(tmp_path):
    path = "/" + "/".join(["y" * 200] * 30)
    with pytest.raises(SpecError) as e:
        load_spec(path)
    assert str(e.value) == f"{path[:512]}... ({len(path)} characters): cannot read the spec: File name too long."


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_without_read_permission(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("jaxport: 1\n")
    path.chmod(0)
    with pytest.raises(SpecError) as e:
        load_spec(path)
    assert str(e.value) == f"{path}: cannot read the spec: Permission denied."


def test_reads_are_capped_on_bytes_read_not_the_size_the_file_reports(tmp_path):
    """A regular file whose size reads as 0 (procfs) is read no further than the cap."""
    with open_for_reading("/proc/self/status", SpecError) as f:
        assert os.fstat(f.fileno()).st_size == 0
    with pytest.raises(SpecError) as e:
        read_file("/proc/self/status", SpecError, 16, lambda n: f"too big: {n} bytes read")
    assert str(e.value) == "too big: 17 bytes read"
    path = tmp_path / "ok"
    path.write_bytes(b"x" * 16)
    assert read_file(path, SpecError, 16, lambda n: "") == b"x" * 16


def test_the_opened_descriptor_is_checked_not_the_path(tmp_path, monkeypatch):
    """The check is on what was opened: a path that is a regular file when looked up and a FIFO when opened (a
    swap between the two) is still refused."""
    from jaxport import _fsio

    real = tmp_path / "spec.yaml"
    real.write_text("jaxport: 1\nargs: ['f32[4]']\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    opened = os.open

    def swapped(path: Any, flags: int, *args: Any) -> int:
        return opened(fifo if str(path) == str(real) else path, flags, *args)

    monkeypatch.setattr(_fsio.os, "open", swapped)
    with pytest.raises(SpecError) as e:
        load_spec(real)
    assert str(e.value) == _expected(real, "a FIFO (named pipe)", "a spec file")


def _cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from jaxport_cli.main import main; main()", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.slow
@pytest.mark.parametrize(("args", "code", "line"), [
    (["inspect", "{fifo}"], 7, "error[format]: {fifo}: is a FIFO (named pipe), not an artifact: " + ONLY_REGULAR),
    (["inspect", "{zero}"], 7, "error[format]: {zero}: is a character device, not an artifact: " + ONLY_REGULAR),
    (["check", "{golden}", "--policy", "{fifo}"], 2,
     "error[policy-file]: {fifo}: is a FIFO (named pipe), not a policy file: " + ONLY_REGULAR),
    (["check", "{golden}", "--policy", "{urandom}"], 2,
     "error[policy-file]: {urandom}: is a character device, not a policy file: " + ONLY_REGULAR),
    (["export", "model.py:f", "--shapes", "{fifo}", "-o", "out.jaxport"], 3,
     "error[spec]: {fifo}: is a FIFO (named pipe), not a spec file: " + ONLY_REGULAR),
    (["export", "model.py:f", "--shapes", "{zero}", "-o", "out.jaxport"], 3,
     "error[spec]: {zero}: is a character device, not a spec file: " + ONLY_REGULAR),
], ids=["inspect-fifo", "inspect-zero", "policy-fifo", "policy-urandom", "spec-fifo", "spec-zero"])
def test_the_command_line_never_blocks_on_a_fifo_or_reads_a_device(tmp_path, args, code, line):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "urandom").symlink_to("/dev/urandom")
    (tmp_path / "model.py").write_text("def f(x):\n    return x\n")
    names = {"fifo": "fifo", "zero": "zero", "urandom": "urandom", "golden": str(GOLDEN / "mlp.jaxport")}
    p = _cli(*[a.format(**names) for a in args], cwd=tmp_path)
    assert (p.returncode, p.stderr) == (code, line.format(**names) + "\n")


def test_call_inputs_from_a_fifo_or_a_device(tmp_path, run_cli):
    os.mkfifo(tmp_path / "x.npy")
    (tmp_path / "in.npz").symlink_to("/dev/zero")
    art = GOLDEN / "mlp.jaxport"
    res = run_cli("call", art, "--inputs", tmp_path / "x.npy", "--no-cache")
    assert (res.exit_code, res.stderr) == (
        9, f"error[input]: {tmp_path / 'x.npy'}: is a FIFO (named pipe), not a .npy file: {ONLY_REGULAR}\n")
    res = run_cli("call", art, "--inputs", tmp_path / "in.npz", "--no-cache")
    assert (res.exit_code, res.stderr) == (
        9, f"error[input]: {tmp_path / 'in.npz'}: is a character device, not a .npz file: {ONLY_REGULAR}\n")


# --- bound .npz: the input reader's caps -----------------------------------------------------------------------


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _raw_zip(entries: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A zip with hand-set fields: (name, stored bytes, method, crc, declared uncompressed size)."""
    out, central = bytearray(), bytearray()
    for name, data, method, crc, usize in entries:
        nb = name.encode()
        off = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0x800, method, 0, 0x21, crc, len(data), usize,
                           len(nb), 0) + nb + data
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0x800, method, 0, 0x21, crc,
                               len(data), usize, len(nb), 0, 0, 0, 0, 0, off) + nb
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(out), 0)
    return bytes(out + central + end)


def _bomb(rows: int) -> tuple[bytes, int, int]:
    """A raw deflate stream of a .npy header declaring ``rows`` x 4 float32 and that many zero bytes."""
    header = _npy(np.zeros((0, 4), np.float32)).replace(b"(0, 4)", f"({rows}, 4)".encode())
    header = header[:8] + struct.pack("<H", len(header) - 10) + header[10:]
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    mib = 1 << 20
    stream = comp.compress(header) + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(b"\0" * mib) + comp.flush(zlib.Z_FULL_FLUSH)
    n = rows * 16 // mib
    crc = zlib.crc32(header)
    for _ in range(n):
        crc = zlib.crc32(b"\0" * mib, crc)
    return stream + block * n + comp.flush(zlib.Z_FINISH), crc, len(header) + n * mib


def _bind(tmp_path: Path, name: str, data: bytes) -> Any:
    (tmp_path / name).write_bytes(data)
    return bind.load_bind_source(name, tmp_path, "spec.yaml:4")


def test_bound_npz_reads_members_with_caps(tmp_path, monkeypatch):
    good = _npy(np.arange(12, dtype=np.float32).reshape(4, 3))
    value = _bind(tmp_path, "ok.npz", _raw_zip([("w.npy", good, 0, zlib.crc32(good), len(good))]))
    np.testing.assert_array_equal(value["w"], np.arange(12, dtype=np.float32).reshape(4, 3))

    stream, crc, total = _bomb(1 << 20)  # 16 MiB from a few kilobytes
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "small.npz", _raw_zip([("w.npy", stream, 8, crc, 4096)]))
    # zipfile stops at the declared 4096 bytes, whose CRC is not the one of the whole stream
    assert str(e.value) == ("spec.yaml:4: bound file small.npz: member 'w.npy': cannot be read (Bad CRC-32 for file "
                            "'w.npy'); the file is damaged.")

    monkeypatch.setattr(npyfile, "MAX_NPZ_BYTES", 1 << 20)
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "bomb.npz", _raw_zip([("w.npy", stream, 8, crc, total)]))
    assert str(e.value) == (f"spec.yaml:4: bound file bomb.npz: the .npz members declare {total} bytes in all; at "
                            f"most {1 << 20} are allowed.")
    monkeypatch.setattr(npyfile, "MAX_NPZ_BYTES", 16 << 30)
    monkeypatch.setattr(npyfile, "physical_memory", lambda: 1 << 20)
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "bomb.npz", _raw_zip([("w.npy", stream, 8, crc, total)]))
    assert str(e.value) == (f"spec.yaml:4: bound file bomb.npz: the .npz members declare {total} bytes in all, more "
                            f"than this machine's memory ({1 << 20} bytes).")
    monkeypatch.setattr(npyfile, "physical_memory", lambda: 8 << 20)
    with pytest.raises(SpecError) as e:  # a header larger than memory is refused before its data is inflated
        _bind(tmp_path, "lies.npz", _raw_zip([("w.npy", stream, 8, crc, 4 << 20)]))
    assert str(e.value) == ("spec.yaml:4: bound file lies.npz: member 'w.npy': the array declares shape (1048576, 4) "
                            "of float32 = 16777216 bytes, more than this machine's memory (8388608 bytes).")


def test_bound_npz_refuses_a_zip_bomb_before_inflating_it(tmp_path, monkeypatch):
    stream, crc, total = _bomb(1 << 20)  # 16 MiB from a few kilobytes
    monkeypatch.setattr(npyfile, "BOMB_FLOOR", 1 << 20)
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "bomb.npz", _raw_zip([("w.npy", stream, 8, crc, total)]))
    assert str(e.value) == (f"spec.yaml:4: bound file bomb.npz: member 'w.npy' inflates {len(stream)} bytes to "
                            f"{total}, more than 100:1: refusing a likely zip bomb. Save real weights with "
                            f"numpy.savez (uncompressed) if they are this regular.")
    good = _npy(np.zeros(3, np.float32))
    for name, method in (("stored.npz", 0), ("deflated.npz", 8)):
        with pytest.raises(SpecError) as e:  # more than the stored bytes can hold, whatever the caps
            _bind(tmp_path, name, _raw_zip([("w.npy", good, method, zlib.crc32(good), 0xFFFFFFF0)]))
        assert str(e.value) == (f"spec.yaml:4: bound file {name}: member 'w.npy' declares {0xFFFFFFF0} bytes, more "
                                f"than its {len(good)} stored bytes can hold; the file is damaged.")


def test_bound_npz_member_count_and_names(tmp_path, monkeypatch):
    good = _npy(np.zeros(3, np.float32))
    monkeypatch.setattr(bind, "MAX_BIND_FILE_MEMBERS", 2)
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "many.npz", _raw_zip([(f"m{i}.npy", good, 0, zlib.crc32(good), len(good))
                                               for i in range(3)]))
    assert str(e.value) == "spec.yaml:4: bound file many.npz: the .npz declares 3 members; at most 2 are allowed."
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "names.npz", _raw_zip([("../w.npy", good, 0, zlib.crc32(good), len(good))]))
    assert str(e.value) == ("spec.yaml:4: bound file names.npz: member '../w.npy' has an unsafe name (absolute, "
                            "an empty, '.' or '..' component, a drive, a backslash or NUL); refusing the file.")
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "raw.npz", _raw_zip([("w.txt", b"abc", 0, zlib.crc32(b"abc"), 3)]))
    assert str(e.value) == ("spec.yaml:4: bound file raw.npz: member 'w.txt' is not a .npy array; an .npz for jaxport "
                            "holds only arrays.")
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "crc.npz", _raw_zip([("w.npy", good, 0, zlib.crc32(good) ^ 1, len(good))]))
    assert str(e.value).startswith("spec.yaml:4: bound file crc.npz: member 'w.npy': cannot be read (Bad CRC-32")


def test_bound_npy_is_checked_and_mapped(tmp_path):
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_bind(tmp_path, "w.npy", _npy(arr)), arr)
    np.testing.assert_array_equal(_bind(tmp_path, "f.npy", _npy(np.asfortranarray(arr))), arr)
    assert _bind(tmp_path, "e.npy", _npy(np.zeros((0, 3), np.float32))).shape == (0, 3)
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "t.npy", _npy(arr)[:-4])
    assert str(e.value) == ("spec.yaml:4: bound file t.npy: the header declares shape (2, 3) of float32 = 24 bytes, "
                            "but 20 bytes follow it; the file is truncated or damaged.")
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "o.npy", _npy(np.array([{}, 1], dtype=object)))
    assert str(e.value) == ("spec.yaml:4: bound file o.npy: the array holds Python objects (dtype '|O'), which could "
                            "only be read by unpickling; jaxport refuses them. Save a numeric array instead.")


# --- bound .safetensors: indexed exactly ----------------------------------------------------------------------


def _safetensors(tensors: dict[str, Any], size: int, *, raw: bytes | None = None, pad: bytes = b" ") -> bytes:
    header = raw if raw is not None else json.dumps(
        {k: v if k == "__metadata__" else {"dtype": v[0], "shape": v[1], "data_offsets": v[2]}
         for k, v in tensors.items()}).encode()
    header += pad * ((-len(header)) % 8)
    return struct.pack("<Q", len(header)) + header + bytes(i % 256 for i in range(size))


@pytest.mark.parametrize(("tensors", "size", "message"), [
    ({"w": ("F32", [4, 3], [0, 48]), "b": ("F32", [3], [0, 12])}, 48,
     "tensor 'w' (bytes 0..48) overlaps tensor 'b', which ends at byte 12: each byte of the data section belongs to "
     "one tensor."),
    ({"w": ("F32", [2], [0, 8]), "v": ("F32", [2], [4, 12])}, 12,
     "tensor 'v' (bytes 4..12) overlaps tensor 'w', which ends at byte 8: each byte of the data section belongs to "
     "one tensor."),
    ({"w": ("F32", [2], [0, 8]), "v": ("F32", [2], [0, 8])}, 8,
     "tensor 'v' (bytes 0..8) overlaps tensor 'w', which ends at byte 8: each byte of the data section belongs to "
     "one tensor."),
    ({"w": ("F32", [2], [8, 16])}, 16,
     "bytes 0..8 of the data section belong to no tensor (before tensor 'w'): the data section must be covered "
     "exactly, with no holes."),
    ({"w": ("F32", [2], [0, 8]), "v": ("F32", [2], [12, 20])}, 20,
     "bytes 8..12 of the data section belong to no tensor (before tensor 'v'): the data section must be covered "
     "exactly, with no holes."),
    ({"w": ("F32", [2], [0, 8])}, 16,
     "bytes 8..16 at the end of the data section belong to no tensor: the data section must be covered exactly, "
     "with no trailing bytes."),
    ({"__metadata__": {"a": 1}, "w": ("F32", [2], [0, 8])}, 8, "__metadata__ must map strings to strings."),
    ({"w": ("F32", True, [0, 8])}, 8,
     "tensor 'w': expected dtype, shape and data_offsets [begin, end] as non-negative integers."),
], ids=["overlap", "overlap-partial", "same-range", "hole-first", "hole-middle", "trailing", "metadata", "shape"])
def test_safetensors_must_be_indexed_exactly(tmp_path, tensors, size, message):
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "w.safetensors", _safetensors(tensors, size))
    assert str(e.value) == f"spec.yaml:4: bound file w.safetensors: {message}"


def test_safetensors_header_rules(tmp_path):
    dup = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, ' \
          b'"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "d.safetensors", _safetensors({}, 8, raw=dup))
    assert str(e.value) == ("spec.yaml:4: bound file d.safetensors: the header is not valid JSON (duplicate key "
                            "'w').")
    lead = b' {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}'
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "l.safetensors", _safetensors({}, 8, raw=lead))
    assert str(e.value) == ("spec.yaml:4: bound file l.safetensors: the header must start with '{' (safetensors' "
                            "rule); it starts with b' '.")
    deep = b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}"
    with pytest.raises(SpecError) as e:
        _bind(tmp_path, "n.safetensors", _safetensors({}, 0, raw=deep))
    assert str(e.value) == ("spec.yaml:4: bound file n.safetensors: the header is not valid JSON (nesting deeper "
                            "than 64 levels).")


def test_valid_safetensors_layouts_still_bind(tmp_path):
    """Offsets out of name order, empty tensors and string metadata are valid safetensors."""
    data = _safetensors({"__metadata__": {"format": "np"}, "b": ("U8", [4], [8, 12]), "a": ("F32", [2], [0, 8]),
                         "e": ("F32", [0, 3], [12, 12])}, 12)
    value = _bind(tmp_path, "ok.safetensors", data)
    assert set(value) == {"a", "b", "e"}
    np.testing.assert_array_equal(value["b"], np.array([8, 9, 10, 11], np.uint8))
    np.testing.assert_array_equal(value["a"], np.frombuffer(bytes(range(8)), np.float32))
    assert value["e"].shape == (0, 3)


# --- an artifact truncated while it is read -------------------------------------------------------------------

_TRUNCATE = """
import os, sys
from jaxport.artifact.container import open_artifact
from jaxport.errors import JaxportError
path, action = sys.argv[1], sys.argv[2]
art = open_artifact(path)
payload = next(iter(art.manifest["functions"].values()))["payload"]
os.truncate(path, 2000)
try:
    if action == "verify":
        art.verify_all()
    elif action == "read":
        art.read(payload)
    else:
        art.view("weights.bin").tobytes()
except JaxportError as e:
    print(type(e).__name__, e)
"""


@pytest.mark.parametrize("action", ["verify", "read", "view"])
def test_an_artifact_truncated_while_it_is_read_is_an_integrity_error(tmp_path, action):
    """Hashing, reading and mapping a member of a file cut short after it was opened: an IntegrityError naming the
    member (once a SIGBUS through the memory map)."""
    path = tmp_path / "a.jaxport"
    shutil.copyfile(GOLDEN / "mlp-bound.jaxport", path)
    size = path.stat().st_size
    with zipfile.ZipFile(path) as z:
        manifest = json.loads(z.read("manifest.json"))
        first = z.infolist()[1].filename  # the first member verify_all hashes
    payload = next(iter(manifest["functions"].values()))["payload"]
    what = {"verify": f"member {first!r}", "read": f"member {payload!r}", "view": "member 'weights.bin'"}[action]
    p = subprocess.run([sys.executable, "-c", _TRUNCATE, str(path), action], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout == (f"IntegrityError {path}: the file was truncated while it was read ({what}): it is now 2000 "
                        f"bytes, it was {size}. Do not modify an artifact while jaxport reads it; re-download or "
                        f"re-export it.\n")


def test_an_artifact_reads_the_same_through_its_descriptor(tmp_path):
    """Members read through ``pread`` equal the zip's own reading of them, and their digests check."""
    with open_artifact(GOLDEN / "mlp-bound.jaxport") as art, zipfile.ZipFile(GOLDEN / "mlp-bound.jaxport") as z:
        art.verify_all()
        for name in art.members:
            assert art.read(name, verify=False) == z.read(name)
        assert bytes(art.view("weights.bin")) == z.read("weights.bin")
    assert IntegrityError.__mro__[1] is FormatError
