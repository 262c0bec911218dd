"""Writers killed at every step: the kill-point enumeration shared by tests/test_faults.py and the runner.

A child process runs the real writer (``container.write_artifact`` for ``export``, ``runtime.save_outputs`` for
``call -o``) with its system calls wrapped so that its N-th step kills it with SIGKILL: a write (after writing half
of that write's bytes), a flush, an fsync, the chmod, just before and just after the rename. N runs from 1 until the
writer completes, so every step is a kill point. After each kill the output path must hold the previous file (or
nothing, when there was none) or the new complete file, and the next write of that path must leave no temporary
file behind.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The child: wraps the writer's system calls so that its N-th step kills the process, then writes.
KILLER = textwrap.dedent('''
    import os, signal, sys, json

    n, mode, target, source = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    count = [0]

    def step():
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    class Killing:
        def __init__(self, f):
            self._f = f

        def write(self, data):
            count[0] += 1
            if count[0] == n:  # die in the middle of this write: half of it reaches the file
                view = memoryview(data).cast("B")
                self._f.write(view[:len(view) // 2])
                self._f.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return self._f.write(data)

        def flush(self):
            step()
            return self._f.flush()

        def __getattr__(self, name):
            return getattr(self._f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._f.__exit__(*exc)

    real_fdopen, real_fsync, real_chmod, real_replace = os.fdopen, os.fsync, os.chmod, os.replace
    os.fdopen = lambda *a, **k: Killing(real_fdopen(*a, **k))
    os.fsync = lambda fd: (step(), real_fsync(fd))[1]
    os.chmod = lambda *a, **k: (step(), real_chmod(*a, **k))[1]

    def replace(a, b):
        step()
        real_replace(a, b)
        step()

    os.replace = replace
    if mode == "artifact":
        from jaxport.artifact.container import write_artifact
        spec = json.load(open(source))
        members = {k: bytes.fromhex(v) for k, v in spec["members"].items()}
        write_artifact(target, spec["manifest"], members)
    else:
        import numpy as np
        from jaxport.run.values.outputs import save_outputs
        save_outputs(target, [("output", np.arange(int(source), dtype=np.float32))])
    print(json.dumps({"steps": count[0]}))
''')


def _killer(tmp: Path, n: int, mode: str, target: Path, source: str) -> subprocess.CompletedProcess:
    script = tmp / "killer.py"
    if not script.exists():
        script.write_text(KILLER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(script), str(n), mode, str(target), source], capture_output=True,
                          text=True, env=env, timeout=120)



@dataclass
class KillReport:
    """What the kill points of one writer left: counts by state, and the problems found (empty when none)."""

    writer: str
    points: int = 0
    old: int = 0
    absent: int = 0
    new: int = 0
    temporaries_removed: int = 0
    problems: list[str] = field(default_factory=list)


def _killer(tmp: Path, n: int, mode: str, target: Path, source: str) -> subprocess.CompletedProcess:
    script = tmp / "killer.py"
    if not script.exists():
        script.write_text(KILLER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(script), str(n), mode, str(target), source], capture_output=True,
                          text=True, env=env, timeout=120)


def temporaries(d: Path, name: str) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(f".{name}.") and p.name.endswith(".tmp"))


def artifact_source(tmp: Path, base: Path, tag: str) -> tuple[Path, bytes]:
    """A writer's input (``base``'s manifest with ``tag`` as description, and its members), and the bytes it
    writes."""
    from jaxport.artifact import container

    with zipfile.ZipFile(base) as z:
        manifest = json.loads(z.read("manifest.json"))
        members = {n: z.read(n) for n in z.namelist() if n != "manifest.json"}
    manifest["metadata"]["description"] = tag
    src = tmp / f"source-{tag}.json"
    src.write_text(json.dumps({"manifest": manifest, "members": {k: v.hex() for k, v in members.items()}}))
    expected = tmp / f"expected-{tag}.jaxport"
    container.write_artifact(expected, json.loads(json.dumps(manifest)), members)
    return src, expected.read_bytes()


def kill_artifact_writer(tmp: Path, base: Path, previous: bool) -> KillReport:
    """Every kill point of writing an artifact (over a previous one, or where none was)."""
    from jaxport.artifact import container

    report = KillReport(f"export ({'over a previous artifact' if previous else 'new file'})")
    src_old, old = artifact_source(tmp, base, "old")
    src_new, new = artifact_source(tmp, base, "new")
    spec = json.loads(src_new.read_text())
    out_dir = tmp / f"out-{previous}"
    out_dir.mkdir()
    target = out_dir / "model.jaxport"
    n = 0
    while n < 1000:
        n += 1
        if previous:
            target.write_bytes(old)
        elif target.exists():
            target.unlink()
        res = _killer(tmp, n, "artifact", target, str(src_new))
        if res.returncode == 0:
            if target.read_bytes() != new:
                report.problems.append("the completed writer left different bytes")
            if json.loads(res.stdout)["steps"] != n - 1:
                report.problems.append("the writer took a different number of steps than it was killed at")
            break
        if res.returncode != -signal.SIGKILL:
            report.problems.append(f"kill point {n}: the child exited {res.returncode}: {res.stderr[-300:]}")
            continue
        report.points += 1
        state = target.read_bytes() if target.exists() else None
        if state == new:
            report.new += 1
        elif previous and state == old:
            report.old += 1
        elif not previous and state is None:
            report.absent += 1
        else:
            report.problems.append(f"kill point {n}: the output is neither the old nor the new file")
        left = temporaries(out_dir, "model.jaxport")
        container.write_artifact(target, json.loads(json.dumps(spec["manifest"])),
                                 {k: bytes.fromhex(v) for k, v in spec["members"].items()})
        report.temporaries_removed += len(left)
        if temporaries(out_dir, "model.jaxport") or target.read_bytes() != new:
            report.problems.append(f"kill point {n}: the next write left a temporary file or a wrong artifact")
    return report


def kill_output_writer(tmp: Path, count: int = 100000) -> KillReport:
    """Every kill point of ``call -o out.npz`` writing its outputs over a previous file."""
    import numpy as np

    from jaxport._fsio import atomic_write

    report = KillReport("call -o (outputs .npz)")
    target = tmp / "out.npz"
    expected = np.arange(count, dtype=np.float32)
    old = b"previous outputs"
    n = 0
    while n < 1000:
        n += 1
        target.write_bytes(old)
        res = _killer(tmp, n, "outputs", target, str(count))
        if res.returncode == 0:
            with np.load(target) as z:
                if not np.array_equal(z["output"], expected):
                    report.problems.append("the completed writer left different outputs")
            break
        if res.returncode != -signal.SIGKILL:
            report.problems.append(f"kill point {n}: the child exited {res.returncode}: {res.stderr[-300:]}")
            continue
        report.points += 1
        data = target.read_bytes()
        if data == old:
            report.old += 1
        else:
            try:
                with np.load(io.BytesIO(data)) as z:
                    complete = np.array_equal(z["output"], expected)
            except Exception:  # noqa: BLE001 - anything unreadable is a partial file
                complete = False
            if complete:
                report.new += 1
            else:
                report.problems.append(f"kill point {n}: the output file is partial")
        left = temporaries(tmp, "out.npz")
        atomic_write(target, lambda f: f.write(b"next"))
        report.temporaries_removed += len(left)
        if temporaries(tmp, "out.npz"):
            report.problems.append(f"kill point {n}: the next write left a temporary file")
    return report
