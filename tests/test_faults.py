"""Writer faults: a writer killed at any point, a full disk, a read-only directory, two writers at once.

The kill points are enumerated by ``tests/hostile/faults.py`` (every step of the real writer, in a child killed
with SIGKILL there); the real commands are also killed at random times.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import jaxport
from jaxport._fsio import atomic_write, remove_stale_temporaries
from jaxport.errors import OutputError
from tests.hostile import faults
from tests.support import EXAMPLES

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def base_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("faults")
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml",
                          output=d / "mlp.jaxport", write_manifest=False).path


_temporaries = faults.temporaries


@pytest.mark.parametrize("previous", [True, False], ids=["over-a-previous-file", "new-file"])
def test_an_artifact_writer_killed_at_every_step_leaves_old_or_new(tmp_path, base_artifact, previous):
    report = faults.kill_artifact_writer(tmp_path, base_artifact, previous)
    assert report.problems == []
    assert report.points > 10
    assert report.new >= 1 and (report.old if previous else report.absent) >= 5
    assert report.temporaries_removed >= 5  # killed writers did leave temporary files, which the next write removed


def test_an_output_writer_killed_at_every_step_leaves_old_or_new(tmp_path):
    """``call -o``: the outputs (.npz) are written the same way."""
    report = faults.kill_output_writer(tmp_path)
    assert report.problems == []
    assert report.points > 5 and report.old >= 1 and report.new >= 1


def test_stale_temporaries_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    target = tmp_path / "a.jaxport"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    (tmp_path / f".a.jaxport.{dead_pid}-k1b2c3.tmp").write_bytes(b"half")  # killed writer
    old_style = tmp_path / ".a.jaxport.x7y8z9.tmp"  # no process id, two hours old
    old_style.write_bytes(b"half")
    os.utime(old_style, (time.time() - 7200, time.time() - 7200))
    (tmp_path / ".a.jaxport.q1w2e3.tmp").write_bytes(b"fresh")  # no process id, fresh: kept
    (tmp_path / f".b.jaxport.{dead_pid}-k1b2c3.tmp").write_bytes(b"other target")  # kept
    # a live writer: another process, holding the lock on its temporary file
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, time
        f = open(os.path.join({str(tmp_path)!r}, ".a.jaxport." + str(os.getpid()) + "-l1v2e3.tmp"), "wb")
        fcntl.flock(f, fcntl.LOCK_EX)
        print(os.path.basename(f.name), flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        live = holder.stdout.readline().strip()
        atomic_write(target, lambda f: f.write(b"new"))
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".a.jaxport.q1w2e3.tmp", f".b.jaxport.{dead_pid}-k1b2c3.tmp", live, "a.jaxport"])
    assert remove_stale_temporaries(target) == [live]  # its writer is gone now
    assert target.read_bytes() == b"new"


CONCURRENT = textwrap.dedent('''
    import sys, time
    from jaxport._fsio import atomic_write

    target, tag = sys.argv[1], sys.argv[2].encode()
    while time.time() < float(sys.argv[3]):  # start together
        time.sleep(0.001)

    def write(f):
        for _ in range(50):
            f.write(tag * 2000)
            f.flush()
            time.sleep(0.002)

    atomic_write(target, write)
''')


@pytest.mark.parametrize("round_", range(3))
def test_two_concurrent_writers_to_one_path_leave_one_complete_file(tmp_path, round_):
    script = tmp_path / "writer.py"
    script.write_text(CONCURRENT)
    target = tmp_path / "shared.jaxport"
    start = str(time.time() + 1.0)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, str(script), str(target), tag, start], env=env, stderr=subprocess.PIPE,
                              text=True) for tag in ("A", "B")]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    data = target.read_bytes()
    assert data in (b"A" * 100000, b"B" * 100000)
    assert _temporaries(tmp_path, "shared.jaxport") == []


# --- a full disk, a read-only directory ----------------------------------------------------------------------------


class _Full:
    """A file object whose writes fail with ENOSPC after ``budget`` bytes."""

    def __init__(self, f, budget: int):
        self._f, self._budget = f, budget

    def write(self, data):
        n = len(memoryview(data).cast("B"))
        if n > self._budget:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._budget -= n
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@pytest.fixture
def disk_full(monkeypatch):
    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda *a, **k: _Full(real(*a, **k), 3000))


def test_a_full_disk_during_export_is_an_output_error_and_keeps_the_old_artifact(tmp_path, run_cli, disk_full,
                                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("mlp.jaxport").write_bytes(b"old")
    res = run_cli("export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", EXAMPLES / "mlp" / "spec.yaml", "-o",
                  "mlp.jaxport")
    assert res.exit_code == 11
    assert res.stderr == ("error[output]: mlp.jaxport: cannot write: No space left on device. Free space on that disk, "
                          "or write the file elsewhere.\n")
    assert Path("mlp.jaxport").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.jaxport"]


def test_a_full_disk_during_call_output_is_an_output_error(tmp_path, run_cli, base_artifact, monkeypatch):
    monkeypatch.chdir(tmp_path)
    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda *a, **k: _Full(real(*a, **k), 10))
    res = run_cli("call", base_artifact, "--random", "--no-cache", "-o", "out.npz")
    assert res.exit_code == 11, res.stderr
    assert res.stderr == ("error[output]: out.npz: cannot write: No space left on device. Free space on that disk, or "
                          "write the file elsewhere.\n")
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_directory_is_an_output_error(tmp_path, run_cli, monkeypatch):
    """Tests may run as root, for whom a chmod 0o555 directory stays writable: the refusal is simulated."""
    monkeypatch.chdir(tmp_path)
    Path("ro").mkdir()

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    res = run_cli("export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", EXAMPLES / "mlp" / "spec.yaml", "-o",
                  "ro/mlp.jaxport")
    assert res.exit_code == 11
    assert res.stderr == ("error[output]: ro/mlp.jaxport: cannot write in ro: Permission denied. Choose a directory "
                          "you can write to.\n")
    assert list(Path("ro").iterdir()) == []


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into a 0o555 directory")
def test_a_read_only_directory_for_real(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        with pytest.raises(OutputError) as e:
            atomic_write(d / "x.jaxport", lambda f: f.write(b"x"))
        assert str(e.value) == f"{d}/x.jaxport: cannot write in {d}: Permission denied. Choose a directory you can " \
                               f"write to."
    finally:
        d.chmod(0o755)


# --- the real command, killed at random times ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("command", ["export", "call"])
def test_the_real_command_killed_at_random_times(tmp_path, base_artifact, command):
    """SIGKILL of a real ``jaxport export`` / ``jaxport call -o`` at seeded random times within its run."""
    rng = random.Random(7)
    out = tmp_path / ("mlp.jaxport" if command == "export" else "out.npz")
    argv = ["export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", str(EXAMPLES / "mlp" / "spec.yaml"), "-o",
            str(out), "--no-manifest"] if command == "export" else \
        ["call", str(base_artifact), "--random", "--no-cache", "-o", str(out)]
    cmd = [sys.executable, "-c", "from jaxport_cli.main import main; main()", *argv]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=tmp_path)
    duration = time.perf_counter() - start
    new = out.read_bytes()
    digests = {hashlib.sha256(new).hexdigest()}
    for _ in range(4):
        out.write_bytes(b"previous")
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
        time.sleep(rng.uniform(0.5, 1.0) * duration)
        p.send_signal(signal.SIGKILL)
        p.wait()
        data = out.read_bytes()
        assert data == b"previous" or hashlib.sha256(data).hexdigest() in digests
    subprocess.run(cmd, check=True, capture_output=True, cwd=tmp_path)
    assert _temporaries(tmp_path, out.name) == []
