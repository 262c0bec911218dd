"""Artifacts across the supported JAX range (``make test-compat``): the oldest and the newest JAX read each other's.

Runs only when ``$JAXPORT_COMPAT_PYTHON`` names the Python of a second environment with another supported JAX
(``make test-compat`` builds ``.venv-compat`` with the oldest, jax 0.9.1, and runs this file under ``.venv``, the
newest). Each JAX exports the examples ``mlp`` (a polymorphic batch, its weights as constants) and ``sharded`` (8
devices over a data x model mesh, bound weights, a VJP) and runs their functions directly; then each calls the
other's artifacts through the command line (``--host-devices 8`` simulates the mesh).

- exported with the oldest JAX, an artifact loads under the newest (JAX's 6-month backward guarantee) and its
  outputs are those of the same artifact exported with the newest, bit for bit, and those of the function run
  directly: bit for bit for ``mlp``; within float32 rounding for ``sharded``, whose 8-way sums add in another order
  than the direct run on one device (measured: 3.6e-7 at most, with jax 0.9.0 and 0.10.2);
- exported with the newest JAX, an artifact loads under the oldest and gives the same outputs (measured: it does,
  jax 0.10.2 to 0.9.1), or is refused with exit 7 and a message naming the JAX to install; inside JAX's 3-week
  forward window it must load;
- the payload's named shardings survive either way: the reading JAX's ``Exported`` has them (jax 0.8 kept none,
  which is why jaxport does not support it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxport.artifact.compat import window

from .conftest import EXAMPLES

OTHER = os.environ.get("JAXPORT_COMPAT_PYTHON", "")
pytestmark = pytest.mark.skipif(not OTHER, reason="set JAXPORT_COMPAT_PYTHON to another JAX's Python (make "
                                                   "test-compat does)")

#: name: (entry point, spec, the function's arguments after x (``params``: the bound weights), devices to call with)
CASES = {"mlp": ("model.py:predict", "spec.yaml", (), 0),
         "sharded": ("model.py:predict", "spec.yaml", ("params",), 8)}

#: Run under each JAX: export every case and run its function directly on the example's x.npy.
_PRODUCE = """
import importlib.util, json, os, sys
from pathlib import Path
import jax, numpy as np
import jaxport
examples, out, cases = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
for name, (entry, spec, extra, _) in cases.items():
    d = examples / name
    os.chdir(d)
    jaxport.export(entry, spec, output=out / f"{name}.jaxport")
    loader = importlib.util.spec_from_file_location(f"example_{name}", d / entry.split(":")[0])
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    args = [np.load(d / "x.npy")] + [dict(np.load(d / "params.npz")) for _ in extra]
    np.save(out / f"{name}-direct.npy", np.asarray(getattr(module, entry.split(":")[1])(*args)))
print(json.dumps(jax.__version__))
"""

#: Run under the reading JAX: the partition specs of the sharded payload's named shardings, as that JAX reads them.
_SHARDINGS = """
import json, sys, zipfile
from jax import export
from jaxport._jax_internals import named_shardings
with zipfile.ZipFile(sys.argv[1]) as z:
    exported = export.deserialize(bytearray(z.read("functions/predict.jaxexport")))
ins, outs = named_shardings(exported)
print(json.dumps([[None if s is None else [a for a in s.spec] for s in side] for side in (ins, outs)]))
"""


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("+")[0].split(".") if p.isdigit())


def _run(python: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAXPORT_COMPAT_PYTHON")}
    return subprocess.run([python, *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """{"oldest"/"newest": (python, jax version, directory of its exports and direct outputs)}."""
    found = []
    pythons = [sys.executable, OTHER]
    procs = []
    for i, python in enumerate(pythons):  # both at once: each waits mostly on its own JAX
        out = tmp_path_factory.mktemp(f"jax{i}")
        procs.append((python, out, subprocess.Popen(
            [python, "-c", _PRODUCE, str(EXAMPLES), str(out), json.dumps(CASES)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={k: v for k, v in os.environ.items() if k != "XLA_FLAGS"})))
    for python, out, p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr
        found.append((python, json.loads(stdout.splitlines()[-1]), out))
    oldest, newest = sorted(found, key=lambda s: _version(s[1]))
    if oldest[1] == newest[1]:
        pytest.skip(f"both environments have jax {oldest[1]}")
    return {"oldest": oldest, "newest": newest}


def _call(python: str, artifact: Path, name: str, out: Path) -> subprocess.CompletedProcess:
    devices = CASES[name][3]
    return _run(python, "-c", "from jaxport_cli.main import main; main()", "call", str(artifact),
                "--inputs", str(EXAMPLES / name / "x.npy"), "--no-cache", "-o", str(out),
                *(["--host-devices", str(devices)] if devices else []), cwd=out.parent)


def _matches_direct(name: str, got: np.ndarray, direct: np.ndarray) -> None:
    if name == "sharded":  # 8-way partial sums against one device's: float32 rounding
        np.testing.assert_allclose(got, direct, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, direct)


@pytest.mark.parametrize("name", sorted(CASES))
def test_exported_with_the_oldest_jax_loads_and_matches_under_the_newest(sides, name, tmp_path):
    (_, _, old_dir), (new_py, _, new_dir) = sides["oldest"], sides["newest"]
    out = tmp_path / "out.npy"
    res = _call(new_py, old_dir / f"{name}.jaxport", name, out)
    assert res.returncode == 0, res.stderr
    own = tmp_path / "own.npy"
    assert _call(new_py, new_dir / f"{name}.jaxport", name, own).returncode == 0
    got = np.load(out)
    np.testing.assert_array_equal(got, np.load(own))  # the same program, compiled by the same XLA
    _matches_direct(name, got, np.load(new_dir / f"{name}-direct.npy"))
    _matches_direct(name, got, np.load(old_dir / f"{name}-direct.npy"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_exported_with_the_newest_jax_loads_under_the_oldest_or_names_the_jax(sides, name, tmp_path):
    (old_py, old_jax, old_dir), (_, new_jax, new_dir) = sides["oldest"], sides["newest"]
    out = tmp_path / "out.npy"
    res = _call(old_py, new_dir / f"{name}.jaxport", name, out)
    w = window(new_jax)
    oldest_known = window(old_jax).dating.released
    inside = w.loadable_from is not None and oldest_known is not None and oldest_known >= w.loadable_from
    if res.returncode != 0:
        assert not inside, f"jax {old_jax} is inside the forward window of jax {new_jax}: {res.stderr}"
        assert res.returncode == 7, res.stderr
        assert res.stderr.count("\n") == 1 and f"install jax=={new_jax}" in res.stderr, res.stderr
        return
    own = tmp_path / "own.npy"
    assert _call(old_py, old_dir / f"{name}.jaxport", name, own).returncode == 0
    got = np.load(out)
    np.testing.assert_array_equal(got, np.load(own))
    _matches_direct(name, got, np.load(old_dir / f"{name}-direct.npy"))


def test_named_shardings_survive_both_ways(sides, tmp_path):
    """The payload's shardings over the mesh, as the other JAX reads them (not only the manifest's copy)."""
    # x over data; the bound weights b1, w1, w2 over model (sorted by name); the output over data
    expected = [[["data", None], ["model"], [None, "model"], ["model", None]], [["data", None]]]
    for reader, writer in (("newest", "oldest"), ("oldest", "newest")):
        res = _run(sides[reader][0], "-c", _SHARDINGS, str(sides[writer][2] / "sharded.jaxport"), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout.splitlines()[-1]) == expected, (reader, writer)
