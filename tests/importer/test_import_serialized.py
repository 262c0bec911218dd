"""``jaxport import`` of raw JAX serializations (``Exported.serialize()`` bytes) written by older JAX releases.

The golden files (``tests/golden/jaxexport/<jax version>/``, made by ``make_goldens.py`` under jax 0.4.35 - 0.8.3)
hold each function's serialization and its inputs and outputs, computed by the producing JAX, at two sizes of its
symbolic dimensions. Imported under the running JAX (whichever this suite runs under: ``make test`` the newest,
``make test-compat`` the oldest), each must give the producer's outputs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import jaxport
from jaxport import jaxser
from jaxport.errors import EntrypointError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "jaxexport"
VERSIONS = sorted((p.name for p in GOLDEN.iterdir() if p.is_dir()), key=lambda v: tuple(map(int, v.split("."))))
SINGLE_DEVICE = ["mlp", "scan", "dict_io", "gather", "bf16", "multiplatform", "constrained", "vjp"]
#: The fast tier: every case of the oldest and the newest producer; the slow tier runs them all.
FAST = {(VERSIONS[0], c) for c in SINGLE_DEVICE} | {(VERSIONS[-1], c) for c in ("mlp", "dict_io")}


def _array(z, key):
    return z[key] if key in z else z[key + "_bf16bits"].view(ml_dtypes.bfloat16)


def _cases():
    for v in VERSIONS:
        for c in SINGLE_DEVICE:
            marks = () if (v, c) in FAST else (pytest.mark.slow,)
            yield pytest.param(v, c, id=f"{v}-{c}", marks=marks)


@pytest.mark.parametrize("version,case", list(_cases()))
def test_an_old_serialization_imports_and_calls_as_its_producer(version, case, tmp_path):
    blob = GOLDEN / version / f"{case}.jaxexport"
    meta = json.loads((GOLDEN / version / "cases.json").read_text())["cases"][case]
    result = jaxport.import_stablehlo(blob, output=tmp_path / "a.jaxport")
    loaded = jaxport.load(tmp_path / "a.jaxport")
    f = loaded.function_record
    assert list(f.platforms) == meta["platforms"]
    assert [str(list(i.shape)) for i in f.inputs] == [str(list(_dims(a["shape"]))) for a in meta["in_avals"]]
    assert f.vjp_order == meta["vjp_order"]
    with np.load(GOLDEN / version / f"{case}.npz") as npz:
        z = dict(npz)
    for size in ("s0", "s1"):
        arrays = {i.name: _array(z, f"{size}_in_{k}") for k, i in enumerate(f.inputs)}
        run = loaded.run(arrays)
        assert len(run.leaves) == len(meta["out_avals"])
        for k, (_, got) in enumerate(run.leaves):
            want = _array(z, f"{size}_out_{k}")
            assert got.dtype == want.dtype and got.shape == want.shape
            # The producer's own call of the same program; XLA's tanh differs in the last bit across releases.
            np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=2e-6,
                                       atol=2e-7)
    rec = jaxser.read(blob.read_bytes(), str(blob))
    import jax

    refuses = rec.short_device_count and tuple(int(p) for p in jax.__version__.split(".")[:3]) >= (0, 11, 1)
    note = [w for w in result.warnings if "older than this JAX's window" in w]
    assert len(note) == (1 if refuses else 0), result.warnings


def _dims(shape_text: str) -> list[object]:
    """``(b, 8)`` as the manifest records it: ['b', 8]."""
    parts = [p.strip() for p in shape_text.strip("()").split(",") if p.strip()]
    return [int(p) if p.isdigit() else p for p in parts]


def test_a_serialization_imports_whatever_its_name_and_its_artifact_calls_from_the_command_line(run_cli, tmp_path,
                                                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    renamed = tmp_path / "archived.bin"
    renamed.write_bytes((GOLDEN / VERSIONS[0] / "dict_io.jaxexport").read_bytes())
    res = run_cli("import", str(renamed), "-o", str(tmp_path / "d.jaxport"))
    assert res.exit_code == 0, res.stderr
    with np.load(GOLDEN / VERSIONS[0] / "dict_io.npz") as npz:
        z = dict(npz)
    np.savez(tmp_path / "in.npz", **{n: z[f"s1_in_{k}"] for k, n in enumerate(("arg0/a", "arg0/b", "scale"))})
    res = run_cli("call", str(tmp_path / "d.jaxport"), "--inputs", str(tmp_path / "in.npz"),
                  "-o", str(tmp_path / "out.npz"), "--no-cache")
    assert res.exit_code == 0, res.stderr
    with np.load(tmp_path / "out.npz") as npz:
        out = dict(npz)
    np.testing.assert_array_equal(out["prod"], z["s1_out_0"])
    np.testing.assert_array_equal(out["sum"], z["s1_out_1"])


def test_a_spec_adds_bounds_to_an_imported_serialization(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("jaxport: 1\nname: classify\ndims:\n  b: {min: 2, max: 64}\n")
    jaxport.import_stablehlo(GOLDEN / VERSIONS[0] / "mlp.jaxexport", spec, output=tmp_path / "m.jaxport")
    f = jaxport.load(tmp_path / "m.jaxport").function_record
    assert jaxport.load(tmp_path / "m.jaxport").function == "classify"
    assert (f.dims["b"].bounds.lo, f.dims["b"].bounds.hi) == (2, 64)


def test_a_spec_giving_arguments_for_a_serialization_is_refused(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("jaxport: 1\nargs: ['f32[b, 8]']\n")
    with pytest.raises(jaxport.SpecError, match=re.escape(
            f"{spec}: a spec for a JAX serialization gives no args: the file gives the signature.")):
        jaxport.import_stablehlo(GOLDEN / VERSIONS[0] / "mlp.jaxexport", spec, output=tmp_path / "m.jaxport")


def test_a_serialization_for_several_devices_is_refused_naming_why(tmp_path):
    blob = GOLDEN / VERSIONS[0] / "sharded2.jaxexport"
    with pytest.raises(EntrypointError, match=re.escape(
            f"{blob}: the serialization is for 2 devices; jaxport imports single-device serializations")):
        jaxport.import_stablehlo(blob, output=tmp_path / "s.jaxport")
