"""Writing an artifact with bound weights: the zip writer's bytes against Python's zipfile, direct I/O of the weights,
the digests computed ahead, and the unread-weights warning without a second trace."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import os
import random
import struct
import sys
import warnings
import zipfile
import zlib
from typing import Any

import numpy as np
import pytest

import jaxport
from jaxport.artifact import bulkwrite, container, tensors
from jaxport.artifact.tensors import Tensor

# --- the zip writer writes what zipfile wrote --------------------------------------------------------------------


def zipfile_writer(fp: Any, members: list[tuple[str, Any]]) -> None:
    """The writer artifacts were first written with (jaxport 0.1 to this change): Python's zipfile, the same
    alignment padding in each local header's extra field."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names
        with zipfile.ZipFile(fp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, data in members:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_STORED
                info.create_system = 3
                info.external_attr = 0o644 << 16
                size = data.size if hasattr(data, "chunks") else len(data)
                info.file_size = size
                zip64 = size * 1.05 > zipfile.ZIP64_LIMIT
                start = fp.tell() + 30 + len(name.encode("utf-8")) + (20 if zip64 else 0)
                pad = (-start) % container.ALIGNMENT
                if pad:
                    if pad < 4:
                        pad += container.ALIGNMENT
                    info.extra = struct.pack("<HH", 0xA1A0, pad - 4) + b"\0" * (pad - 4)
                if hasattr(data, "chunks"):
                    with zf.open(info, mode="w", force_zip64=zip64) as out:
                        for chunk in data.chunks():
                            out.write(chunk)
                else:
                    zf.writestr(info, data)


class Streamed:
    """A streamed member of ``size`` bytes (``byte`` repeated), in chunks of ``step`` bytes."""

    def __init__(self, size: int, step: int = 7, byte: int = 0):
        self.size, self._chunk = size, memoryview(bytes([byte]) * min(step, max(size, 1)))
        self.crc32 = 0
        for chunk in self.chunks():
            self.crc32 = zlib.crc32(chunk, self.crc32)

    def chunks(self):
        left = self.size
        while left:
            n = min(left, len(self._chunk))
            yield self._chunk[:n]
            left -= n


class Sink:
    """A seekable file that keeps the bytes of writes under 1 MB (by offset; a later write replaces an earlier
    one) and only the place and length of larger ones: enough to compare multi-gigabyte archives' records."""

    def __init__(self):
        self.pos = self.end = 0
        self.small: dict[int, int] = {}
        self.large: list[tuple[int, int]] = []

    def write(self, data):
        n = memoryview(data).nbytes
        if n < 1 << 20:
            self.small.update(zip(range(self.pos, self.pos + n), bytes(data)))
        else:
            self.large.append((self.pos, n))
        self.pos += n
        self.end = max(self.end, self.pos)
        return n

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.end + offset
        return self.pos

    def seekable(self):
        return True

    def flush(self):
        pass


def both(members: list[tuple[str, Any]]) -> tuple[bytes, bytes]:
    old, new = io.BytesIO(), io.BytesIO()
    zipfile_writer(old, members)
    container._write_members(new, members)
    return old.getvalue(), new.getvalue()


NAMES = ["weights.bin", "functions/f.jaxexport", "a" * 300, "ünï/cödé.bin", "cut\0here", "twice", "twice", "x"]


@pytest.mark.parametrize("limits", [None, (3000, 3)], ids=["zipfile-limits", "zip64-from-3000-bytes-3-members"])
def test_the_writer_writes_what_zipfile_wrote_for_any_members(monkeypatch, limits):
    if limits is not None:  # both writers read zipfile's limits: lowered, small archives take every zip64 path
        monkeypatch.setattr(zipfile, "ZIP64_LIMIT", limits[0])
        monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", limits[1])
    rng = random.Random(0)
    for case in range(150):
        names = [container.MANIFEST_NAME] + [rng.choice(NAMES) for _ in range(rng.randint(0, 5))]
        members: list[tuple[str, Any]] = [(n, rng.randbytes(rng.randint(0, 3000))) for n in names]
        if case % 3 == 0:
            members.append(("weights.bin", Streamed(rng.randint(0, 5000), step=rng.randint(1, 600), byte=case)))
        old, new = both(members)
        assert new == old, (case, [(n, len(d) if isinstance(d, bytes) else d.size) for n, d in members])


def _zipfile_bytes(path) -> bytes:
    """What zipfile writes for the members of the artifact ``path``."""
    with container.open_artifact(path) as art:
        members = [(name, art.manifest_bytes if name == container.MANIFEST_NAME else art.read(name))
                   for name in art.members]
    old = io.BytesIO()
    zipfile_writer(old, members)
    return old.getvalue()


def test_an_exported_artifact_has_the_bytes_zipfile_would_have_written(tmp_path, example_dir):
    example_dir("mlp")
    result = jaxport.export("model.py:predict", "spec.yaml")
    path = result.save(tmp_path / "a.jaxport")
    assert path.read_bytes() == _zipfile_bytes(path) == result.to_bytes()
    assert result.size == path.stat().st_size


@pytest.mark.slow
@pytest.mark.parametrize("sizes", [
    [int(zipfile.ZIP64_LIMIT / 1.05) - 5],  # the largest member without zip64 fields
    [int(zipfile.ZIP64_LIMIT / 1.05) + 5],  # zip64 in the local header only
    [zipfile.ZIP64_LIMIT + 10],  # and in the central directory
    [zipfile.ZIP64_LIMIT - 100, 1 << 30],  # a local header past the limit
    [zipfile.ZIP64_LIMIT + 1000, zipfile.ZIP64_LIMIT + 5000, 1 << 28],  # the directory past 4 GiB: zip64 end records
], ids=["below", "local-zip64", "central-zip64", "offset-zip64", "directory-past-4GiB"])
def test_zip64_records_are_those_zipfile_wrote(sizes):
    members: list[tuple[str, Any]] = [(container.MANIFEST_NAME, b"m" * 1000), ("functions/f.jaxexport", b"p" * 99)]
    members += [(f"big{i}.bin", Streamed(size, step=64 << 20, byte=i)) for i, size in enumerate(sizes)]
    members.append(("z", b"tail"))
    old, new = Sink(), Sink()
    zipfile_writer(old, members)
    container._write_members(new, members)
    assert (new.small, new.large, new.end) == (old.small, old.large, old.end)


@pytest.mark.slow
def test_more_members_than_a_zip_end_record_counts():
    members: list[tuple[str, Any]] = [(container.MANIFEST_NAME, b"{}")] + [(f"m{i}", b"") for i in range(70000)]
    old, new = Sink(), Sink()
    zipfile_writer(old, members)
    container._write_members(new, members)
    assert (new.small, new.end) == (old.small, old.end)


# --- direct I/O of the weights -------------------------------------------------------------------------------------


@pytest.fixture
def small_blocks(monkeypatch):
    """Direct I/O for members from 64 kB, through a 16 kB buffer: every path of the writer on small data."""
    monkeypatch.setattr(bulkwrite, "DIRECT_MIN", 64 << 10)
    monkeypatch.setattr(bulkwrite, "BOUNCE", 16 << 10)


def _spy_direct(monkeypatch) -> list[int]:
    """Record the length of every write made while O_DIRECT is set on its descriptor."""
    real = os.pwrite
    direct: list[int] = []

    def pwrite(fd, data, offset):
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            assert offset % bulkwrite.BLOCK == 0 and memoryview(data).nbytes % bulkwrite.BLOCK == 0
            direct.append(memoryview(data).nbytes)
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    return direct


@pytest.mark.parametrize("head", [0, 1, 4095, 4096, 5000])
@pytest.mark.parametrize("step", [1, 999, 4096, 70000])
def test_direct_writes_give_the_same_bytes(tmp_path, small_blocks, monkeypatch, head, step):
    rng = random.Random(head * 7 + step)
    data = rng.randbytes(200_003)
    chunks = [data[i:i + step] for i in range(0, len(data), step)]
    direct = _spy_direct(monkeypatch)
    path = tmp_path / "out.bin"
    with open(path, "wb") as f:
        f.write(b"h" * head)
        written = bulkwrite.write_data(f, iter(chunks), len(data), direct=True, crc=True)
        assert written == (len(data), zlib.crc32(data))
        assert f.tell() == head + len(data)
        f.write(b"after")
        assert not fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_DIRECT
    assert path.read_bytes() == b"h" * head + data + b"after"
    aligned = (head + len(data)) // 4096 * 4096 - -(-head // 4096) * 4096
    assert sum(direct) in (0, aligned)  # all whole blocks went directly (0: this file system refuses direct I/O)


def test_an_artifact_written_directly_has_the_same_bytes(tmp_path, small_blocks, monkeypatch):
    arrays = {f"params/w{i}": np.random.default_rng(i).standard_normal((i + 1) * 1000, dtype=np.float32)
              for i in range(20)}
    packed = tensors.pack([Tensor(n, a) for n, a in arrays.items()])
    members = {"functions/f.jaxexport": b"program" * 100, "weights.bin": packed}
    manifest = container.fill_members({"format": "x"}, members)
    memory = io.BytesIO()
    container.write_members(memory, manifest, members)
    direct = _spy_direct(monkeypatch)
    with open(tmp_path / "a.jaxport", "wb") as f:
        container.write_members(f, manifest, members, direct=True)
    assert (tmp_path / "a.jaxport").read_bytes() == memory.getvalue()
    with zipfile.ZipFile(memory) as zf:
        header = zf.getinfo("weights.bin").header_offset
    start = header + 30 + sum(struct.unpack_from("<HH", memory.getvalue(), header + 26))  # where the data begins
    assert sum(direct) in (0, (start + packed.size) // 4096 * 4096 - -(-start // 4096) * 4096)


def test_a_file_system_that_refuses_direct_io_gets_plain_writes(tmp_path, small_blocks, monkeypatch):
    data = bytes(range(256)) * 1000
    real = fcntl.fcntl

    def no_direct(fd, cmd, arg=0):
        if cmd == fcntl.F_SETFL and arg & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, cmd, arg)

    monkeypatch.setattr(fcntl, "fcntl", no_direct)
    with open(tmp_path / "out.bin", "wb") as f:
        f.write(b"x" * 10)
        written = bulkwrite.write_data(f, [data], len(data), direct=True, crc=True)
        assert written == (len(data), zlib.crc32(data))
    assert (tmp_path / "out.bin").read_bytes() == b"x" * 10 + data


def test_a_refused_direct_write_falls_back_and_other_errors_are_raised(tmp_path, small_blocks, monkeypatch):
    data = bytes(range(256)) * 1000
    real = os.pwrite
    calls = []

    def einval_when_direct(fd, buf, offset):
        calls.append(offset)
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, buf, offset)

    monkeypatch.setattr(os, "pwrite", einval_when_direct)
    with open(tmp_path / "out.bin", "wb") as f:
        f.write(b"x" * 10)
        bulkwrite.write_data(f, [data], len(data), direct=True)
        assert not fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_DIRECT
    assert (tmp_path / "out.bin").read_bytes() == b"x" * 10 + data
    assert calls[:2] == [4096, 4096]  # the first block, refused directly, then written plainly

    def full_disk(fd, buf, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with open(tmp_path / "full.bin", "wb") as f:
        with pytest.raises(OSError) as e:
            bulkwrite.write_data(f, [data], len(data), direct=True)
        assert e.value.errno == errno.ENOSPC
        assert not fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_DIRECT


def test_writes_to_memory_never_use_direct_io(monkeypatch):
    monkeypatch.setattr(os, "pwrite", lambda *a: pytest.fail("pwrite"))
    out = io.BytesIO()
    assert bulkwrite.write_data(out, [b"a" * (64 << 20)], 64 << 20, direct=True, crc=True) == \
        (64 << 20, zlib.crc32(b"a" * (64 << 20)))
    assert out.getvalue() == b"a" * (64 << 20)


# --- digests ------------------------------------------------------------------------------------------------------


def _expected(arrays: dict[str, np.ndarray]) -> tuple[dict[str, str], str, int, bytes]:
    member = bytearray()
    per = {}
    for name in sorted(arrays):
        member += b"\0" * ((-len(member)) % container.ALIGNMENT)
        per[name] = hashlib.sha256(arrays[name].tobytes()).hexdigest()
        member += arrays[name].tobytes()
    return per, hashlib.sha256(member).hexdigest(), zlib.crc32(member), bytes(member)


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "computed-by-pack"])
def test_digests_and_crc_of_the_weights_member(prepared):
    rng = np.random.default_rng(0)
    arrays = {f"t{i}": rng.standard_normal(n, dtype=np.float32) for i, n in enumerate([1, 3, 700, 5000, 300_000])}
    arrays["b"] = np.arange(10, dtype=np.int8)
    given = [Tensor(n, a) for n, a in arrays.items()]
    interval = sys.getswitchinterval()
    if prepared:
        tensors.prepare(given)
    packed = tensors.pack(given)
    per, whole, crc, member = _expected(arrays)
    assert {n: t.sha256 for n, t in packed.index.items()} == per
    assert (packed.sha256, packed.crc32, packed.size) == (whole, crc, len(member))
    assert b"".join(bytes(c) for c in packed.chunks()) == member
    assert sys.getswitchinterval() == interval  # lowered while the prepared digests ran, then restored


# --- the unread-weights warning ------------------------------------------------------------------------------------


def test_unread_weights_are_found_without_tracing_the_program_again():
    traced = []

    def predict(params, x):
        traced.append(1)
        return x @ params["w"]

    params = {"w": np.ones((4, 3), np.float32), "unused": np.zeros(5, np.float32)}
    spec = {"jaxport": 1, "dims": {"batch": {"min": 1, "max": 8}}, "args": ["f32[batch, 4]"]}
    result = jaxport.export(predict, spec, bind={"params": params})
    assert result.warnings[-1] == ("function 'predict' never reads 1 bound tensor(s): params/unused. They are stored "
                                   "anyway; remove them from the bound value to save space.")
    assert traced == [1]


# --- saving: the weights written while their digests finish -------------------------------------------------------


@pytest.fixture
def written_first(monkeypatch, small_blocks):
    """Export the MLP with its 100 kB of weights bound from params.npz, the weights counting as large (written
    first, by a thread, directly); the threads that wrote weights are recorded."""
    from jaxport.export.writing import write

    started = []

    class Recorded(write._Writer):
        def __init__(self, *args):
            started.append(self)
            super().__init__(*args)

    monkeypatch.setattr(write, "_Writer", Recorded)
    return started


def test_weights_written_first_give_the_bytes_of_a_plain_write(tmp_path, example_dir, written_first):
    example_dir("mlp")
    result = jaxport.export("model.py:apply", "spec-npz.yaml", output=tmp_path / "a.jaxport")
    assert len(written_first) == 1
    data = result.path.read_bytes()
    assert data == _zipfile_bytes(result.path) == result.to_bytes()
    assert result.manifest["members"]["weights.bin"]["sha256"] != tensors.PENDING_SHA256
    again = jaxport.export("model.py:apply", "spec-npz.yaml")  # digests waited for before saving
    assert again.save(tmp_path / "b.jaxport").read_bytes() == data
    assert len(written_first) == 2
    with container.open_artifact(result.path) as art:
        art.verify_all()


def test_a_full_disk_while_the_weights_are_written_keeps_the_old_artifact(tmp_path, example_dir, written_first,
                                                                         monkeypatch):
    from jaxport.errors import OutputError

    example_dir("mlp")
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "a.jaxport"
    out.write_bytes(b"old")

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(OutputError) as e:
        jaxport.export("model.py:apply", "spec-npz.yaml", output=out)
    assert str(e.value) == (f"{out}: cannot write: No space left on device. Free space on that disk, or write the file "
                            f"elsewhere.")
    assert out.read_bytes() == b"old" and [p.name for p in out.parent.iterdir()] == ["a.jaxport"]
    assert len(written_first) == 1 and not written_first[0]._thread.is_alive()


def test_a_failure_while_waiting_for_the_digests_stops_the_writer_first(tmp_path, example_dir, written_first,
                                                                       monkeypatch):
    example_dir("mlp")

    def failing(self):
        raise RuntimeError("digests failed")

    monkeypatch.setattr(tensors._Digests, "result", failing)
    (tmp_path / "out").mkdir()
    with pytest.raises(RuntimeError, match="digests failed"):
        jaxport.export("model.py:apply", "spec-npz.yaml", output=tmp_path / "out" / "a.jaxport")
    assert list((tmp_path / "out").iterdir()) == []
    assert len(written_first) == 1 and not written_first[0]._thread.is_alive()
