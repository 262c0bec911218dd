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

from jaxport.artifact.window.compat import window
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
from jaxport.jaxprivate.exported import named_shardings
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


# --- beyond JAX's window: old serializations, artifacts for an older JAX, upgrades ---------------------------------

GOLDEN = Path(__file__).resolve().parent / "golden" / "jaxexport"
#: Run under a JAX: import every single-device golden serialization (jax 0.4.35 - 0.12.0.1) and call it at both
#: sizes; prints one JSON object: case -> the largest difference from the producer's outputs (or the error).
_IMPORT_GOLDENS = """
import json, sys
from pathlib import Path
import ml_dtypes, numpy as np
import jaxport
golden, out = Path(sys.argv[1]), Path(sys.argv[2])
found = {}
for vdir in sorted(p for p in golden.iterdir() if p.is_dir()):
    for case, info in json.loads((vdir / "cases.json").read_text())["cases"].items():
        if info["nr_devices"] != 1:
            continue
        key = f"{vdir.name}/{case}"
        try:
            jaxport.import_stablehlo(vdir / f"{case}.jaxexport", output=out / f"{vdir.name}-{case}.jaxport")
            loaded = jaxport.load(out / f"{vdir.name}-{case}.jaxport")
            with np.load(vdir / f"{case}.npz") as npz:
                z = dict(npz)
            arr = lambda k: z[k] if k in z else z[k + "_bf16bits"].view(ml_dtypes.bfloat16)
            worst = 0.0
            for s in ("s0", "s1"):
                names = loaded.function_record.input_names
                run = loaded.run({n: arr(f"{s}_in_{i}") for i, n in enumerate(names)})
                for k, (_, v) in enumerate(run.leaves):
                    want = arr(f"{s}_out_{k}")
                    assert v.shape == want.shape and v.dtype == want.dtype, (v.shape, want.shape)
                    if want.size:
                        worst = max(worst, float(np.max(np.abs(np.asarray(v, np.float64) - want.astype(np.float64)))))
            found[key] = worst
        except Exception as e:
            found[key] = f"{type(e).__name__}: {e}"
print(json.dumps(found))
"""


@pytest.mark.parametrize("python", OTHERS)
def test_serializations_import_and_give_their_producers_outputs_under_an_older_jax(python, tmp_path):
    """jax 0.9.1 and 0.10.2 import what jax 0.4.35 - 0.8.3 (and each other) serialized; a newer producer's file
    imports too, or is refused in one line when its StableHLO uses what the reader's lacks (the newest reader:
    tests/importer)."""
    res = _run(python, "-c", _IMPORT_GOLDENS, str(GOLDEN), str(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout.splitlines()[-1])
    producers = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
    assert len(found) == 10 * len(producers), sorted(found)  # 10 single-device cases each
    reader = _version(_run(python, "-c", "import jax; print(jax.__version__)", cwd=tmp_path).stdout.strip())
    refused = "FormatError: "
    legacy = "PolicyError: " + str(GOLDEN / "0.4.35" / "linalg.jaxexport") + ": its program calls blas_strsm"

    def refused_as_documented(key: str, value: object) -> bool:
        producer, case = key.split("/")
        text = str(value)
        if case == "linalg" and producer == "0.4.35":  # the legacy LAPACK kernels: refused by name
            return text.startswith(legacy)
        newer = _version(producer) > reader and text.startswith(refused) and "is written as StableHLO 1." in text
        if case == "linalg" and (producer.startswith("0.5.") or _version(producer) > reader):  # other kernel forms
            return newer or (text.startswith("ExportError: ") and "this JAX cannot run its program" in text)
        return newer

    # a few float32 units in the last place: LAPACK's CPU kernels round differently from one processor to another
    # (the linalg case differs by 2.4e-7 from its producer's outputs on some machines)
    bad = {k: v for k, v in found.items() if not (isinstance(v, float) and v <= 1e-6)
           and not refused_as_documented(k, v)}
    assert bad == {}
    assert all(isinstance(v, float) for k, v in found.items() if _version(k.split("/")[0]) <= reader
               and not k.endswith("/linalg"))


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("reader", range(1, len(PYTHONS)), ids=lambda i: f"env{i}")
def test_an_artifact_written_for_an_older_jax_runs_there(sides, name, reader, tmp_path):
    """The newest JAX exports ``--for-jax`` the reader's JAX; the reader calls it and gets its own export's numbers
    (the same function, each JAX lowering it its own way: float32 rounding apart)."""
    r_py, r_jax, r_dir = sides[reader]
    d = EXAMPLES / name
    entry, spec = CASES[name][0], CASES[name][1]
    made = _run(sys.executable, "-c", "from jaxport_cli.main import main; main()", "export", entry, "--shapes", spec,
                "--for-jax", r_jax, "-o", str(tmp_path / "for.jaxport"), cwd=d)
    assert made.returncode == 0, made.stderr
    out, own = tmp_path / "out.npy", tmp_path / "own.npy"
    res = _call(r_py, tmp_path / "for.jaxport", name, out)
    assert res.returncode == 0, res.stderr
    assert _call(r_py, r_dir / f"{name}.jaxport", name, own).returncode == 0
    np.testing.assert_allclose(np.load(out), np.load(own), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("writer", range(1, len(PYTHONS)), ids=lambda i: f"env{i}")
def test_an_older_jaxs_artifact_upgrades_to_this_one(sides, name, writer, tmp_path):
    """The newest JAX upgrades what jax 0.9.1 / 0.10.2 wrote: written by it, a fresh window (``check
    --min-days-left 90``), the same numbers as the old artifact called under it."""
    _, w_jax, w_dir = sides[writer]
    devices = CASES[name][3]
    host = ["--host-devices", str(devices)] if devices else []
    cli = ["-c", "from jaxport_cli.main import main; main()"]
    res = _run(sys.executable, *cli, "upgrade", str(w_dir / f"{name}.jaxport"), "-o", str(tmp_path / "new.jaxport"),
               *host, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "same outputs as the old program" in res.stdout, res.stdout
    manifest = json.loads((tmp_path / "new.jaxport.manifest.json").read_text())
    import jax

    assert manifest["producer"]["jax"] == jax.__version__
    assert manifest["producer"]["upgraded_from"]["jax"] == w_jax
    # Today: the newest JAX's release day, when its window is fresh, whatever day the test runs.
    env = {**os.environ, "JAXPORT_TODAY": window(jax.__version__).dating.released.isoformat()}
    check = subprocess.run([sys.executable, *cli, "check", str(tmp_path / "new.jaxport"), "--min-days-left", "90"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    new, old = tmp_path / "new.npy", tmp_path / "old.npy"
    assert _call(sys.executable, tmp_path / "new.jaxport", name, new).returncode == 0
    assert _call(sys.executable, w_dir / f"{name}.jaxport", name, old).returncode == 0
    np.testing.assert_array_equal(np.load(new), np.load(old))
