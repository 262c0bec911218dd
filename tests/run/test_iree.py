"""The second runtime: IREE's CPU backend gives the JAX runtime's numbers, behind the same checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from tests.support import EXAMPLES

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


@pytest.mark.slow
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
    first = jaxport.load(artifacts["mlp"], runtime="iree", module_dir=tmp_path / "iree").run({"x": x})
    second = jaxport.load(artifacts["mlp"], runtime="iree", module_dir=tmp_path / "iree").run({"x": x})
    assert first.compilation.cache_hit is False and second.compilation.cache_hit is True
    assert len(list((tmp_path / "iree").glob("*.vmfb"))) == 1
    # cache_dir is JAX's compilation cache, as in every command: IREE's modules go beside it
    third = jaxport.load(artifacts["mlp"], runtime="iree", cache_dir=tmp_path / "cache" / "xla").run({"x": x})
    assert third.compilation.cache_hit is False
    assert len(list((tmp_path / "cache" / "iree").glob("*.vmfb"))) == 1
    fourth = jaxport.load(artifacts["mlp"], runtime="iree", cache_dir=tmp_path / "mine").run({"x": x})
    assert fourth.compilation.cache_hit is False and len(list((tmp_path / "mine" / "iree").glob("*.vmfb"))) == 1


def test_cli_call_with_iree(artifacts, run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.load(EXAMPLES / "mlp" / "x.npy"))
    res = run_cli("call", artifacts["bound"], "--inputs", tmp_path / "x.npy", "--runtime", "iree",
                  "--cache-dir", tmp_path / "cache" / "xla", "--json", "-o", tmp_path / "out.npy")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["runtime"] == "iree"
    want = jaxport.load(artifacts["bound"])(np.load(tmp_path / "x.npy"))
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), want, rtol=1e-5, atol=1e-6)
    assert list((tmp_path / "cache" / "iree").glob("*.vmfb"))


def test_a_custom_call_iree_has_no_kernel_for_is_a_platform_error(make_artifact, run_cli, tmp_path):
    src = ("import jax\n\ndef f(x):\n    return jax.ffi.ffi_call('my_target', "
           "jax.ShapeDtypeStruct(x.shape, x.dtype))(x)\n")
    path = make_artifact(src, "jaxport: 1\nargs: ['f32[4]']\nallow_custom_calls: [my_target]\n")
    message = (f"{path}: function 'f': IREE cannot run this program: it calls the custom call my_target (1x), for "
               f"which IREE has no kernel; run it with the JAX runtime (--runtime jax), or export the function "
               f"without the operation that lowers to it.")
    with pytest.raises(jaxport.PlatformError) as e:
        jaxport.load(path, runtime="iree", allow_custom_calls=["my_target"])
    assert str(e.value) == message
    for args in (["call", path, "--random", "--runtime", "iree"], ["compile", path, "-o", tmp_path / "m.vmfb"],
                 ["verify", path, "--runtime", "iree"]):
        res = run_cli(*args, "--allow-custom-call", "my_target")
        assert (res.exit_code, res.stderr) == (10, f"error[platform]: {message}\n"), args
    assert not list(tmp_path.glob("m.*"))


def test_lapack_custom_calls_are_named_with_what_lowers_to_them(make_artifact, run_cli):
    path = make_artifact("import jax.numpy as jnp\n\ndef f(x):\n    return jnp.linalg.inv(x)\n",
                         "jaxport: 1\nargs: ['f32[4, 4]']\n")
    res = run_cli("call", path, "--random", "--runtime", "iree")
    assert (res.exit_code, res.stderr) == (10, (
        f"error[platform]: {path}: function 'f': IREE cannot run this program: it calls the custom calls "
        f"lapack_sgetrf_ffi (1x), lapack_strsm_ffi (2x), for which IREE has no kernel (on CPU, jnp.linalg "
        f"decompositions and solvers lower to LAPACK custom calls); run it with the JAX runtime (--runtime jax), or "
        f"export the function without the operation that lowers to them.\n"))


def test_an_iree_compile_failure_names_the_operation():
    from jaxport.run.iree import compile_error

    failure = Exception("Error invoking IREE compiler tool iree-compile\nDiagnostics:\n<stdin>:3:10: error: failed to "
                        "legalize operation 'stablehlo.foo' that was explicitly marked illegal\n  %0 = ...")
    assert str(compile_error("m.jaxport: function 'f'", failure, "for inputs of shapes (4, 8)")) == (
        "m.jaxport: function 'f': IREE cannot compile the program for inputs of shapes (4, 8): failed to legalize "
        "operation 'stablehlo.foo' that was explicitly marked illegal; run it with the JAX runtime (--runtime jax).")


def test_an_iree_runtime_failure_is_quoted_without_its_source_location():
    """IREE's runtime reports its own bugs as IndexError/RuntimeError with a C source location first: the message
    keeps IREE's words (never 'damaged or hostile', which the program is not) and says to run it with JAX."""
    from jaxport.run.iree import run_error

    failure = IndexError("Error invoking function: c/runtime/src/iree/hal/command_buffer_validation.c:196: "
                         "OUT_OF_RANGE; indirect buffer reference slot 0 is out range of the declared binding capacity "
                         "of the command buffer 0; while invoking native function hal.command_buffer.copy_buffer; "
                         "while calling import;\n[ 1]   bytecode module.main$async:1234")
    assert run_error(failure) == (
        "OUT_OF_RANGE; indirect buffer reference slot 0 is out range of the declared binding capacity of the command "
        "buffer 0; while invoking native function hal.command_buffer.copy_buffer; while calling import")
    assert run_error(RuntimeError("x " * 400)).endswith(" ...") and len(run_error(RuntimeError("x " * 400))) <= 304


CUMULATIVE = """
import jax
import jax.numpy as jnp


def f(x):
    return {"sum": jnp.cumsum(x, axis=0), "prod": jnp.cumprod(x, axis=0), "max": jax.lax.cummax(x, axis=0),
            "lse": jax.lax.cumlogsumexp(x, axis=0), "rev": jax.lax.cumsum(x, axis=0, reverse=True)}
"""


@pytest.mark.slow
def test_cumulative_operations_over_a_polymorphic_axis_run_on_iree(make_artifact, run_cli, tmp_path):
    """JAX lowers them to stablehlo.dynamic_reduce_window custom calls, which specialization removes."""
    path = make_artifact(CUMULATIVE, "jaxport: 1\ndims: {b: {max: 64}}\nargs: ['f32[b, 3]']\n")
    f = json.loads(Path(f"{path}.manifest.json").read_text())["functions"]["f"]
    assert any(c["target"].startswith("stablehlo.dynamic_") for c in f["custom_calls"])
    by_jax, by_iree = jaxport.load(path), jaxport.load(path, runtime="iree", cache_dir=tmp_path / "cache")
    for b in (1, 7, 64):
        x = np.random.default_rng(b).uniform(0.5, 1.5, (b, 3)).astype(np.float32)
        want, got = dict(by_jax.run({"x": x}).leaves), dict(by_iree.run({"x": x}).leaves)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=f"b={b} {name}")
    res = run_cli("compile", path, "-o", tmp_path / "c.vmfb", "--dim", "b=5,9")
    assert res.exit_code == 0, res.stderr
    assert ("note: padding not allowed for b: output 'lse' depends on an operation whose padding changes with b: it "
            "works across b or uses its value (stablehlo.reduce_window); a call's b must equal a bucket's") \
        in res.stdout
    from jaxport.run.compile import iree_loader

    x = np.random.default_rng(0).uniform(0.5, 1.5, (9, 3)).astype(np.float32)
    got = iree_loader.load(tmp_path / "c.run.json")(x)
    for name, want in by_jax.run({"x": x}).leaves:
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5, err_msg=name)
    res = run_cli("verify", path, "--runtime", "iree")
    assert res.exit_code == 0, res.stdout + res.stderr


TOP_K = """
import jax
import jax.numpy as jnp
from jax import export

n = export.symbolic_shape("n", constraints=["n >= 3"])[0]
exported = export.export(jax.jit(lambda x: jax.lax.top_k(x, x.shape[1] - 2)))(jax.ShapeDtypeStruct((4, n), jnp.float32))
open("top_k.mlirbc", "wb").write(exported.mlir_module_serialized)
"""


@pytest.mark.slow
def test_an_imported_dynamic_top_k_module_runs_on_iree(tmp_path, run_cli, monkeypatch):
    """A module JAX wrote with a stablehlo.dynamic_top_k custom call (k depends on the input's size), imported."""
    monkeypatch.chdir(tmp_path)
    subprocess.run([sys.executable, "-c", TOP_K], check=True, cwd=tmp_path)
    (tmp_path / "top_k.yaml").write_text("jaxport: 1\ndims: {n: {min: 3, max: 64}}\nargs: ['f32[4, n]']\n")
    res = run_cli("import", "top_k.mlirbc", "--shapes", "top_k.yaml", "-o", "top_k.jaxport")
    assert res.exit_code == 0, res.stderr
    f = json.loads((tmp_path / "top_k.jaxport.manifest.json").read_text())["functions"]["top_k"]
    assert "stablehlo.dynamic_top_k" in {c["target"] for c in f["custom_calls"]}
    by_jax, by_iree = jaxport.load("top_k.jaxport"), jaxport.load("top_k.jaxport", runtime="iree")
    for n in (3, 10):
        x = np.random.default_rng(n).standard_normal((4, n)).astype(np.float32)
        want, got = dict(by_jax.run({"arg0": x}).leaves), dict(by_iree.run({"arg0": x}).leaves)
        np.testing.assert_allclose(got["0"], want["0"], rtol=1e-6)
        np.testing.assert_array_equal(got["1"], want["1"])
        np.testing.assert_array_equal(want["0"], -np.sort(-x, axis=1)[:, :n - 2])
    res = run_cli("compile", "top_k.jaxport", "-o", "top_k.vmfb", "--dim", "n=5,10", "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["padding"]["n"] == {"allowed": False, "reason": "output '0' has axis 1 of size n - 2, not n itself"}
    x = np.random.default_rng(0).standard_normal((4, 10)).astype(np.float32)
    np.save(tmp_path / "arg0.npy", x)
    argv = report["functions"][1]["command"].split()
    tool = Path(sys.executable).parent / "iree-run-module"
    subprocess.run([str(tool) if tool.exists() else "iree-run-module", *argv[1:]], check=True, cwd=tmp_path,
                   capture_output=True)
    np.testing.assert_array_equal(np.load(tmp_path / "0.npy"), -np.sort(-x, axis=1)[:, :8])
    np.testing.assert_array_equal(np.load(tmp_path / "1.npy"), np.argsort(-x, axis=1, kind="stable")[:, :8])


def test_compile_without_dims_needs_bounds_to_propose_buckets(make_artifact, run_cli, tmp_path):
    path = make_artifact("def f(x):\n    return x * 2\n", "jaxport: 1\nargs: ['f32[b, 3]']\n")
    res = run_cli("compile", path, "-o", tmp_path / "m.vmfb")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: dimension 'b' has no upper bound in the spec, so no buckets can be proposed for it; give the "
        "sizes to build with --dim b=N1,N2,... (or one with --dim b=N).\n"))
    assert not list(tmp_path.glob("m.*"))


def test_compile_a_pytree_function_with_several_outputs(artifacts, tmp_path, run_cli):
    """The pytree example: two inputs (one bfloat16), several outputs, run by iree-run-module."""
    res = run_cli("compile", artifacts["pytree"], "-o", tmp_path / "p.vmfb", "--dim", "batch=4", "--dim", "h=3",
                  "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    (fn,) = report["functions"]
    assert fn["name"] == "main" and report["parameters"] is None
    by_jax = jaxport.load(artifacts["pytree"])
    arrays = by_jax.random_inputs({"batch": 4, "h": 3}, seed=1)
    argv = fn["command"].split()
    for spec, flag in zip(fn["inputs"], [a for a in argv if a.startswith("--input=")]):
        np.save(tmp_path / flag.split("@")[1], np.asarray(arrays[spec["name"]]))
    tool = Path(sys.executable).parent / "iree-run-module"
    subprocess.run([str(tool) if tool.exists() else "iree-run-module", *argv[1:]], check=True, cwd=tmp_path,
                   capture_output=True)
    want = dict(by_jax.run(arrays).leaves)
    outs = [a.split("@")[1] for a in argv if a.startswith("--output=")]
    assert [o["name"] for o in fn["outputs"]] == list(want)
    for o, file in zip(fn["outputs"], outs):
        got = np.load(tmp_path / file)
        np.testing.assert_allclose(got.astype(np.float32), np.asarray(want[o["name"]]).astype(np.float32),
                                   rtol=1e-4, atol=1e-5, err_msg=o["name"])


def _run_description() -> dict:
    """A run description as ``compile`` writes it, with only what the loader reads (no module is run)."""
    from jaxport.run.compile import iree_loader

    arrays = [{"name": "x", "shape": [4], "dtype": "float32"}]
    return {"format": iree_loader.FORMAT, "module": "m.vmfb", "parameters": None, "device": "local-task",
            "signature": {"inputs": [{"name": "x", "shape": ["b"], "dtype": "float32"}],
                          "outputs": [{"name": "y", "shape": ["b"], "dtype": "float32"}],
                          "dims": {"b": {"min": 1, "max": 8}}},
            "padding": {"variables": {"b": {"allowed": True, "fill": "edge", "inputs": {"x": [0]},
                                            "outputs": {"y": [0]}}}},
            "functions": [{"name": "main", "dims": {"b": 4}, "inputs": arrays, "outputs": arrays}]}


def test_the_loader_reads_a_run_description_once_and_refuses_an_incomplete_one(tmp_path):
    from jaxport.run.compile import iree_loader

    path = tmp_path / "m.run.json"
    path.write_text(json.dumps(_run_description()))
    module = iree_loader.load(path)
    assert module.choose({"x": (3,)}) == iree_loader.Choice("main", {"b": 4}, {"b": 3}, {"b": 1})
    with pytest.raises(iree_loader.CallError) as e:
        module.choose({"x": (0,)})
    assert str(e.value) == "dimension 'b' = 0, but it must satisfy 1 <= b <= 8 (spec bound)."
    for drop in ("outputs", "inputs"):  # a verdict's axes were read only by the first padded call
        broken = _run_description()
        del broken["padding"]["variables"]["b"][drop]
        path.write_text(json.dumps(broken))
        with pytest.raises(iree_loader.DescriptionError) as e:
            iree_loader.load(path)
        assert str(e.value) == (f"{path}: the run description lacks '{drop}'; give the .run.json that jaxport "
                                f"compile wrote.")
    broken = _run_description()
    broken["functions"][0]["inputs"] = [{"name": "x", "shape": ["b"], "dtype": "float32"}]
    path.write_text(json.dumps(broken))
    with pytest.raises(iree_loader.DescriptionError) as e:
        iree_loader.load(path)
    assert str(e.value) == f"{path}: function 'main' has a non-static shape."
