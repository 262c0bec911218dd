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

import jax
import ml_dtypes
import numpy as np
import pytest

import jaxport
from jaxport.artifact.window.compat import version_key
from jaxport.errors import EntrypointError, FormatError
from jaxport.program import jaxser
from tests.hostile.boundary_classes import PARENS, serialization_with

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "jaxexport"
VERSIONS = sorted((p.name for p in GOLDEN.iterdir() if p.is_dir()), key=version_key)
#: Producers older than JAX's window as jax 0.12 counts it (their layout: serialization versions 1-4).
EXPIRED = [v for v in VERSIONS if version_key(v) < (0, 8, 2)]
SINGLE_DEVICE = ["mlp", "scan", "dict_io", "gather", "bf16", "multiplatform", "constrained", "vjp", "chlo", "linalg"]
#: Producers whose LAPACK calls are the legacy kernels jaxlib no longer provides (jax 0.4.35: lapack_spotrf, ...).
LEGACY_LAPACK = [v for v in VERSIONS if version_key(v) < (0, 4, 36)]
#: Producers whose LAPACK kernels (the first FFI forms) take other operands than every supported jaxlib's.
OLD_FFI_LAPACK = [v for v in VERSIONS if (0, 4, 36) <= version_key(v) < (0, 6, 0)]
#: The fast tier: every case of the oldest producer, two of the others; the slow tier runs them all.
FAST = {(VERSIONS[0], c) for c in SINGLE_DEVICE} | {(v, c) for v in VERSIONS[1:] for c in ("mlp", "dict_io")}
RUNNING = version_key(jax.__version__)


def _array(z, key):
    return z[key] if key in z else z[key + "_bf16bits"].view(ml_dtypes.bfloat16)


def _cases():
    for v in VERSIONS:
        for c in SINGLE_DEVICE:
            marks = () if (v, c) in FAST else (pytest.mark.slow,)
            yield pytest.param(v, c, id=f"{v}-{c}", marks=marks)


@pytest.mark.parametrize("version,case", list(_cases()))
def test_a_serialization_imports_and_calls_as_its_producer(version, case, tmp_path):
    """Written by an older JAX (or this one): it imports and gives the producer's outputs. By a newer one: the same,
    or, when its StableHLO uses what this JAX's lacks, one line saying so and what to do."""
    blob = GOLDEN / version / f"{case}.jaxexport"
    meta = json.loads((GOLDEN / version / "cases.json").read_text())["cases"][case]
    if case == "linalg" and version in LEGACY_LAPACK:
        with pytest.raises(jaxport.PolicyError, match=re.escape(
                f"{blob}: its program calls blas_strsm (now lapack_strsm_ffi), lapack_spotrf (now lapack_spotrf_ffi): "
                f"the legacy form of a kernel this JAX provides only in its new form, so it cannot run under this JAX "
                f"(jaxlib removed the legacy kernels). Run it under the JAX that wrote it, or export the function "
                f"again with a current JAX.")):
            jaxport.import_stablehlo(blob, output=tmp_path / "a.jaxport")
        return
    cannot_run = (f"{blob}: this JAX cannot run its program (tried on zeros at k=1): ", "A kernel it calls (a custom "
                  "call) may exist here in another form: run it under the JAX that wrote it, or export the function "
                  "again with a current JAX.")
    try:
        result = jaxport.import_stablehlo(blob, output=tmp_path / "a.jaxport")
    except FormatError as e:
        assert version_key(version) > RUNNING, e
        assert str(e).startswith(f"{blob}: its program is written as StableHLO 1."), e
        assert str(e).endswith(f"Import it under the JAX that wrote it with --for-jax {jax.__version__} (jaxport "
                               f"import {case}.jaxexport --for-jax {jax.__version__}) and call that artifact here.")
        return
    except jaxport.ExportError as e:  # the kernel exists here in another calling form: refused, never a crash
        assert case == "linalg" and (version in OLD_FFI_LAPACK or version_key(version) > RUNNING), e
        assert str(e).startswith(cannot_run[0]) and str(e).endswith(cannot_run[1]), e
        return
    assert not (case == "linalg" and version in OLD_FFI_LAPACK and RUNNING >= (0, 10)), "expected a refusal"
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
    refuses = rec.short_device_count and RUNNING >= (0, 11, 1)
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


@pytest.mark.parametrize("version", EXPIRED + ["0.8.3"])
def test_a_serialization_with_xla_hlo_shardings_is_refused_naming_why(version, tmp_path):
    blob = GOLDEN / version / "sharded2.jaxexport"
    with pytest.raises(EntrypointError, match=re.escape(
            f"{blob}: the serialization is for 2 devices, and its shardings are XLA HloSharding protos (jax before "
            f"0.9 wrote them), not a mesh's PartitionSpecs, so its shardings cannot be shown to mean the same over "
            f"this JAX's mesh. Export the function again with jaxport (a spec with mesh: and sharding:).")):
        jaxport.import_stablehlo(blob, output=tmp_path / "s.jaxport")
    assert not (tmp_path / "s.jaxport").exists()


SHARDED_CHILD = """
import json, sys
import numpy as np
import jaxport
blob, npz, out = sys.argv[1:4]
jaxport.import_stablehlo(blob, output=out)
loaded = jaxport.load(out)
f = loaded.function_record
with np.load(npz) as z:
    run = loaded.run({"arg0": z["s0_in_0"]})
    same = bool(np.array_equal(run.leaves[0][1], z["s0_out_0"]))
print(json.dumps({"mesh": [list(f.mesh.axis_names), list(f.mesh.axis_sizes)], "devices": f.nr_devices,
                  "spec": [list(i.partition_spec) for i in f.inputs], "same": same}))
"""


@pytest.mark.parametrize("version", [v for v in VERSIONS if (0, 9, 1) <= version_key(v) <= RUNNING])
def test_a_serialization_with_named_shardings_imports_over_its_mesh(version, tmp_path):
    """A 2-device serialization of jax 0.9 or later keeps its mesh and PartitionSpecs, and runs on 2 devices."""
    import os
    import subprocess
    import sys

    blob, npz = GOLDEN / version / "sharded2.jaxexport", GOLDEN / version / "sharded2.npz"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    res = subprocess.run([sys.executable, "-c", SHARDED_CHILD, str(blob), str(npz), str(tmp_path / "s.jaxport")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == {"mesh": [["x"], [2]], "devices": 2, "spec": [["x", None]],
                                                       "same": True}


@pytest.mark.parametrize("version,targets", [
    ("0.4.35", "mhlo.erf (1x), mhlo.topk (1x)"),
    ("0.8.3", "mhlo.acos (1x), mhlo.asinh (1x), mhlo.erf (1x), mhlo.sinh (1x), mhlo.topk (1x)"),
])
def test_chlo_operations_written_as_custom_calls_are_chlo_again(version, targets, tmp_path):
    """Older StableHLO wrote erf, top_k, asinh, ... as ``mhlo.*`` custom calls, which no JAX guarantees: imported,
    they are the CHLO operations again, so the allowlist sees only the program's own custom calls."""
    blob = GOLDEN / version / "chlo.jaxexport"
    result = jaxport.import_stablehlo(blob, output=tmp_path / "c.jaxport")
    assert f"{blob}: the custom calls {targets}, which its StableHLO wrote for CHLO operations, are the CHLO " \
           f"operations again." in result.warnings
    assert [c.target for c in result.model.functions["chlo"].custom_calls] == ["shape_assertion"]


def test_a_damaged_jaxexport_file_is_refused_by_jaxports_reader(run_cli, tmp_path, monkeypatch):
    """A ``.jaxexport`` file is read as a serialization, so its damage is named, not "not a StableHLO module"."""
    monkeypatch.chdir(tmp_path)
    data = (GOLDEN / VERSIONS[0] / "mlp.jaxexport").read_bytes()
    (tmp_path / "cut.jaxexport").write_bytes(data[:1500])
    res = run_cli("import", "cut.jaxexport", "-o", "x.jaxport")
    assert res.exit_code == 7
    assert res.stderr.startswith("error[format]: cut.jaxexport: not a JAX serialization: "), res.stderr
    assert "past the end of the 1500-byte file" in res.stderr and not (tmp_path / "x.jaxport").exists()




@pytest.mark.parametrize("stored, where, shown, why", [
    ({"dims_in": [PARENS]}, "input 0 of its signature", repr("(" * 80), "expression nests deeper than 64 levels"),
    ({"dims_in": ["(" * 3000 + "b" + ")" * 3000]}, "input 0 of its signature", repr("(" * 80),
     "expression is longer than 4096 characters"),
    ({"dims_in": ["-" * 3000 + "b"]}, "input 0 of its signature", repr("-" * 80),
     "expression nests deeper than 64 levels"),
    ({"dims_in": ["b"], "dims_out": ["max(" * 1000 + "b" + ", 1)" * 1000]}, "output 0 of its signature",
     repr("max(" * 20), "expression is longer than 4096 characters"),
    ({"dims_in": ["b"], "vjp_dims": [PARENS]}, "input 0 of its VJP", repr("(" * 80),
     "expression nests deeper than 64 levels"),
], ids=["parens-2000", "parens-3000", "minus-3000", "output-calls", "vjp"])
def test_a_dimension_deeper_or_longer_than_the_spec_language_is_refused_before_jax_parses_it(
        run_cli, tmp_path, monkeypatch, stored, where, shown, why):
    """Before: JAX's own parser, which recurses once per parenthesis, ended import in error[internal]
    (RecursionError, or the tokenizer's 'too many nested parentheses'), exit 1."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deep.jaxexport").write_bytes(serialization_with(**stored))
    res = run_cli("import", "deep.jaxexport", "-o", "x.jaxport")
    assert (res.exit_code, res.stderr) == (7, f"error[format]: deep.jaxexport: {where} has the dimension {shown}..., "
                                              f"which is not an expression jaxport reads: {why}.\n")
    assert not (tmp_path / "x.jaxport").exists()
    from jaxport.importer.serialized import module_callable

    for entry in (lambda: jaxport.import_stablehlo("deep.jaxexport", output="y.jaxport"),
                  lambda: module_callable("deep.jaxexport")):  # verify's live side of an imported artifact
        with pytest.raises(FormatError, match=f"^{re.escape(f'deep.jaxexport: {where} has the dimension {shown}...')}"):
            entry()
    (tmp_path / "ok.jaxexport").write_bytes(serialization_with(["b"]))
    assert run_cli("import", "ok.jaxexport", "-o", "ok.jaxport").exit_code == 0
