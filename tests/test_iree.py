"""The second runtime: IREE's CPU backend gives the JAX runtime's numbers, behind the same checks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport

from .conftest import EXAMPLES

pytest.importorskip("iree.compiler")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    d = tmp_path_factory.mktemp("iree")
    out = {}
    for name, entry, spec in [("mlp", "mlp/model.py:predict", "mlp/spec.yaml"),
                              ("bound", "mlp/model.py:apply", "mlp/spec-npz.yaml"),
                              ("multi", "mlp/model.py:predict", "mlp/spec-multiplatform.yaml"),
                              ("pytree", "pytree/model.py:encode", "pytree/spec.yaml")]:
        out[name] = jaxport.export(f"{EXAMPLES}/{entry}", EXAMPLES / spec, output=d / f"{name}.jaxport").path
    return out


@pytest.mark.parametrize("name,dims", [("mlp", {"batch": 1}), ("mlp", {"batch": 7}), ("mlp", {"batch": 4096}),
                                       ("bound", {"batch": 3}), ("multi", {"batch": 5}),
                                       ("pytree", {"batch": 4, "h": 3}), ("pytree", {"batch": 16, "h": 2})])
def test_iree_matches_jax(artifacts, tmp_path, name, dims):
    by_jax = jaxport.load(artifacts[name])
    by_iree = jaxport.load(artifacts[name], runtime="iree", cache_dir=tmp_path)
    arrays = by_jax.random_inputs(dims, seed=3)
    want, got = by_jax.leaves(by_jax.call_named(arrays)), by_iree.leaves(by_iree.call_named(arrays))
    assert [n for n, _ in got] == [n for n, _ in want]
    for (n, w), (_, g) in zip(want, got):
        assert g.shape == w.shape and g.dtype == w.dtype, n
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=1e-5, atol=1e-5, err_msg=n)


def test_iree_applies_the_same_input_checks(artifacts, tmp_path):
    by_iree = jaxport.load(artifacts["mlp"], runtime="iree", cache_dir=tmp_path)
    with pytest.raises(jaxport.InputError) as e:
        by_iree.call_named({"x": np.zeros((4097, 784), np.float32)})
    assert str(e.value) == ("input 'x': shape[0] = 4097, but dimension 'batch' must satisfy 1 <= batch <= 4096 "
                            "(spec bound).")


def test_iree_modules_are_cached(artifacts, tmp_path):
    x = np.ones((2, 784), np.float32)
    first = jaxport.load(artifacts["mlp"], runtime="iree", cache_dir=tmp_path / "iree").run({"x": x})
    second = jaxport.load(artifacts["mlp"], runtime="iree", cache_dir=tmp_path / "iree").run({"x": x})
    assert first.compilation.cache_hit is False and second.compilation.cache_hit is True
    assert len(list((tmp_path / "iree").glob("*.vmfb"))) == 1


def test_cli_call_with_iree(artifacts, run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.load(EXAMPLES / "mlp" / "x.npy"))
    res = run_cli("call", artifacts["bound"], "--inputs", tmp_path / "x.npy", "--runtime", "iree",
                  "--cache-dir", tmp_path / "cache" / "xla", "--json", "-o", tmp_path / "out.npy")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["runtime"] == "iree"
    want = jaxport.load(artifacts["bound"])(np.load(tmp_path / "x.npy"))
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), want, rtol=1e-5, atol=1e-6)
    assert list((tmp_path / "cache" / "iree").glob("*.vmfb"))


def test_unsupported_custom_call_is_refused(make_artifact, tmp_path):
    src = ("import jax\n\ndef f(x):\n    return jax.ffi.ffi_call('my_target', "
           "jax.ShapeDtypeStruct(x.shape, x.dtype))(x)\n")
    path = make_artifact(src, "jaxport: 1\nargs: ['f32[4]']\nallow_custom_calls: [my_target]\n")
    with pytest.raises(jaxport.PolicyError) as e:
        jaxport.load(path, runtime="iree", allow_custom_calls=["my_target"])
    assert str(e.value) == (f"{path}: function 'f': the program uses custom calls that IREE does not provide "
                            f"(my_target); run it with the JAX runtime (--runtime jax).")


def test_compile_then_run_without_jax(artifacts, tmp_path, run_cli):
    """`jaxport compile` writes a .vmfb that iree-run-module runs with the extracted weights."""
    vmfb = tmp_path / "m.vmfb"
    res = run_cli("compile", artifacts["bound"], "-o", vmfb, "--dim", "batch=4", "--json")
    assert res.exit_code == 0, res.stderr
    description = json.loads((tmp_path / "m.vmfb.json").read_text())
    assert [a["kind"] for a in description["arguments"]] == ["weight"] * 4 + ["input"]
    assert description["dims"] == {"batch": 4}
    assert run_cli("extract", artifacts["bound"], "--weights", tmp_path / "w.npz").exit_code == 0
    weights = np.load(tmp_path / "w.npz")
    x = np.load(EXAMPLES / "mlp" / "x.npy")
    flags = []
    for i, a in enumerate(description["arguments"]):
        np.save(tmp_path / f"a{i}.npy", weights[a["name"]] if a["kind"] == "weight" else x)
        flags.append(f"--input=@{tmp_path / f'a{i}.npy'}")
    tool = Path(sys.executable).parent / "iree-run-module"
    if not tool.exists():
        tool = Path(shutil.which("iree-run-module") or "iree-run-module")
    subprocess.run([str(tool), "--device=local-task", f"--module={vmfb}", "--function=main", *flags,
                    f"--output=@{tmp_path / 'out.npy'}"], check=True, capture_output=True)
    want = jaxport.load(artifacts["bound"])(x)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), want, rtol=1e-5, atol=1e-6)


def test_compile_polymorphic_program_that_iree_cannot_handle_asks_for_dims(artifacts, tmp_path, run_cli):
    res = run_cli("compile", artifacts["bound"], "-o", tmp_path / "m.vmfb")
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error[usage]: {artifacts['bound']}: function 'apply': IREE cannot compile the "
                                 f"shape-polymorphic program (")
    assert res.stderr.endswith("Compile a module specialized to concrete sizes with --dim (batch=N).\n")
    assert not (tmp_path / "m.vmfb").exists()
