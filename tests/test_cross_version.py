"""Artifacts across the supported JAX range (``make test-compat`` / ``make test-cross``): each JAX reads the others'.

Runs only when ``$JAXPORT_COMPAT_PYTHON`` names the Pythons of other environments with other supported JAX releases
(``os.pathsep``-separated; ``make test-cross`` builds ``.venv-compat`` with the oldest, jax 0.9.1, and
``.venv-compat-mid`` with jax 0.10.2, and runs this file under ``.venv``, the newest). Each JAX exports the examples
``mlp`` (a polymorphic batch, its weights as constants) and ``sharded`` (8 devices over a data x model mesh, bound
weights, a VJP) and runs their functions directly; then each calls every other's artifacts through the command line
(``--host-devices 8`` simulates the mesh).

- exported with an older JAX, an artifact loads under a newer one inside JAX's 6-month backward window, and its
  outputs are those of the reader's own export and of the function run directly under either JAX, within float32
  rounding: each JAX lowers and compiles the function its own way (measured: 4.8e-7 at most, jax 0.9.1 against
  0.12.0.1), and the 8-way sums of ``sharded`` add in another order than one device's;
- exported with a newer JAX, an artifact loads under an older one and gives the same outputs (measured: jax 0.10.2
  to 0.9.1), or, outside JAX's 3-week forward promise (jax 0.12.0.1 writes StableHLO 1.18.0; jax 0.10.2 reads up to
  1.17), is refused with exit 7 and one line naming both JAX versions, the StableHLO and calling-convention
  versions and the JAX to install;
- the payload's named shardings survive every loadable crossing: the reading JAX's ``Exported`` has them.
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
from tests.support import EXAMPLES

OTHERS = [p for p in os.environ.get("JAXPORT_COMPAT_PYTHON", "").split(os.pathsep) if p]
pytestmark = pytest.mark.skipif(not OTHERS, reason="set JAXPORT_COMPAT_PYTHON to other JAX's Pythons, separated by "
                                                    f"{os.pathsep!r} (make test-compat does)")
#: The environments crossed: this one (the newest JAX) and every other one named.
PYTHONS = [sys.executable, *OTHERS]
PAIRS = [(w, r) for w in range(len(PYTHONS)) for r in range(len(PYTHONS)) if w != r]

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
    """Per environment (the index into PYTHONS): (python, jax version, directory of its exports and direct outputs)."""
    procs = []
    for i, python in enumerate(PYTHONS):  # all at once: each waits mostly on its own JAX
        out = tmp_path_factory.mktemp(f"jax{i}")
        procs.append((python, out, subprocess.Popen(
            [python, "-c", _PRODUCE, str(EXAMPLES), str(out), json.dumps(CASES)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={k: v for k, v in os.environ.items() if k != "XLA_FLAGS"})))
    found = []
    for python, out, p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr
        found.append((python, json.loads(stdout.splitlines()[-1]), out))
    if len({jax for _, jax, _ in found}) < len(found):
        pytest.skip(f"two environments have the same JAX: {[jax for _, jax, _ in found]}")
    return found


def _call(python: str, artifact: Path, name: str, out: Path) -> subprocess.CompletedProcess:
    devices = CASES[name][3]
    return _run(python, "-c", "from jaxport_cli.main import main; main()", "call", str(artifact),
                "--inputs", str(EXAMPLES / name / "x.npy"), "--no-cache", "-o", str(out),
                *(["--host-devices", str(devices)] if devices else []), cwd=out.parent)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("writer,reader", PAIRS, ids=lambda i: f"env{i}")
def test_an_artifact_loads_under_another_jax_or_is_refused_naming_the_jax(sides, name, writer, reader, tmp_path):
    """Older -> newer: inside JAX's 6-month backward window it must load and give the reader's own export's outputs
    bit for bit (the same program, compiled by the same XLA) and the function's direct outputs. Newer -> older: it
    loads and matches the same way, or (outside JAX's 3-week forward promise) is refused before anything compiles,
    with exit 7 and one line naming both JAX versions, the StableHLO versions and the JAX to install."""
    (_, w_jax, w_dir), (r_py, r_jax, r_dir) = sides[writer], sides[reader]
    out = tmp_path / "out.npy"
    res = _call(r_py, w_dir / f"{name}.jaxport", name, out)
    w = window(w_jax)
    r_released = window(r_jax).dating.released
    inside = (w.loadable_from is not None and w.loadable_until is not None and r_released is not None
              and w.loadable_from <= r_released <= w.loadable_until)
    if res.returncode != 0:
        assert not inside, f"jax {r_jax} is inside the window of jax {w_jax}: {res.stderr}"
        assert res.returncode == 7, res.stderr
        line = res.stderr.strip()
        assert "\n" not in line, line
        for text in (f"written with jax {w_jax}", f"this jax {r_jax}", f"install jax=={w_jax}", "StableHLO 1.",
                     "calling convention"):
            assert text in line, (text, line)
        return
    own = tmp_path / "own.npy"
    assert _call(r_py, r_dir / f"{name}.jaxport", name, own).returncode == 0
    got = np.load(out)
    # Each JAX lowers the function its own way (jax 0.9.1's program for mlp is not 0.12's) and compiles it with its
    # own XLA: float32 rounding apart (measured: 4.8e-7 at most).
    for want in (own, r_dir / f"{name}-direct.npy", w_dir / f"{name}-direct.npy"):
        np.testing.assert_allclose(got, np.load(want), rtol=1e-5, atol=1e-5, err_msg=str(want.name))


@pytest.mark.parametrize("writer,reader", PAIRS, ids=lambda i: f"env{i}")
def test_named_shardings_survive_across_versions(sides, writer, reader, tmp_path):
    """The payload's shardings over the mesh, as the other JAX reads them (not only the manifest's copy)."""
    # x over data; the bound weights b1, w1, w2 over model (sorted by name); the output over data
    expected = [[["data", None], ["model"], [None, "model"], ["model", None]], [["data", None]]]
    res = _run(sides[reader][0], "-c", _SHARDINGS, str(sides[writer][2] / "sharded.jaxport"), cwd=tmp_path)
    if res.returncode != 0 and "deserialize" in res.stderr.lower():  # refused: a newer StableHLO (test above)
        assert _version(sides[reader][1]) < _version(sides[writer][1]), res.stderr
        return
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == expected, (reader, writer)
