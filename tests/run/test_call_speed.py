"""What a call of an artifact does not pay for. The first: LAPACK's start-up for a program that calls no LAPACK
kernel, ``jax.extend`` (Pallas included) for reading the program, waiting for the weights' digest before compiling.
The steady state: binding arguments again for a signature already checked. Structural facts and equal results; the
timings are in benchmarks/bench_first_call.py and bench_call.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.errors import InputError, IntegrityError
from jaxport.jaxprivate import mlir as private_mlir
from jaxport.jaxprivate import runtime as private_runtime
from jaxport.program import checks
from tests.support import EXAMPLES

#: A fresh process that loads an artifact, calls it on ARGS (.npy files) and prints what it imported and the result.
_CALL = """
import json, sys
import numpy as np
import jaxport
f = jaxport.load(sys.argv[1], cache_dir=sys.argv[2])
y = f(*[np.load(p) for p in sys.argv[3:]])
y = [np.asarray(v).tolist() for v in y] if isinstance(y, (tuple, list)) else np.asarray(y).tolist()
print(json.dumps({"scipy": "scipy.linalg" in sys.modules, "extend": sorted(m for m in sys.modules
                  if m == "jax.extend" or m.startswith("jax.extend.") or m.startswith("jax._src.pallas")),
                  "y": y}))
"""


def _call_fresh(artifact: Path, tmp_path: Path, *inputs: np.ndarray) -> dict:
    paths = []
    for i, x in enumerate(inputs):
        paths.append(tmp_path / f"x{i}.npy")
        np.save(paths[-1], x)
    proc = subprocess.run([sys.executable, "-c", _CALL, str(artifact), str(tmp_path / "cache"), *map(str, paths)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_program_without_lapack_runs_without_starting_lapack_or_jax_extend(tmp_path):
    artifact = jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp/spec.yaml",
                              output=tmp_path / "mlp.jaxport").path
    x = np.load(EXAMPLES / "mlp/x.npy")
    got = _call_fresh(artifact, tmp_path, x)
    assert got["scipy"] is False  # LAPACK's start-up imports scipy.linalg
    assert got["extend"] == []
    sys.path.insert(0, str(EXAMPLES / "mlp"))
    try:
        from model import predict  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    np.testing.assert_allclose(np.asarray(got["y"], np.float32), np.asarray(predict(x)), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_a_program_that_calls_lapack_still_starts_it(make_artifact, tmp_path):
    """And in a fresh process: under jax 0.9.x, which does not start LAPACK for an exported call, the call crashed
    the process (SIGSEGV) before jaxport started it itself."""
    artifact = make_artifact(
        "import jax.numpy as jnp\n\ndef f(a, b):\n    return jnp.linalg.solve(a, b), jnp.linalg.inv(a)\n",
        "jaxport: 1\ndims:\n  n: {min: 1, max: 8}\nargs:\n  - 'f32[n, n]'\n  - 'f32[n]'\n")
    with jaxport.open_artifact(artifact) as art:
        targets = {c["target"] for c in art.manifest["functions"]["f"]["custom_calls"]}
    assert targets & private_runtime.lapack_targets(), targets  # the program does call LAPACK
    a = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]], np.float32)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    got = _call_fresh(artifact, tmp_path, a, b)
    assert got["scipy"] is True
    solved, inverse = (np.asarray(v, np.float32) for v in got["y"])
    np.testing.assert_allclose(solved, np.linalg.solve(a, b), rtol=1e-5)
    np.testing.assert_allclose(inverse, np.linalg.inv(a), rtol=1e-5)


def test_the_mlir_bindings_are_those_jax_extend_exports():
    """jaxport reads programs with jaxlib's bindings directly (importing jax.extend costs 40-70 ms): they must be the
    very objects jax.extend.mlir re-exports, or a JAX change went unnoticed."""
    import jax.extend.mlir as jmlir
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo

    assert private_mlir.mlir_ir().Context is ir.Context
    assert private_mlir.mlir_ir().Module is ir.Module
    assert private_mlir.stablehlo_dialect().register_dialect is stablehlo.register_dialect
    helpers = private_mlir._jaxlib_mlir()
    assert helpers.deserialize_portable_artifact is jmlir.deserialize_portable_artifact
    assert helpers.serialize_portable_artifact is jmlir.serialize_portable_artifact


def test_checked_targets_come_only_from_a_check_of_that_very_module(tmp_path):
    path = jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp/spec.yaml",
                          output=tmp_path / "mlp.jaxport").path
    from jax import export

    with jaxport.open_artifact(path) as art:
        module = export.deserialize(bytearray(art.read("functions/predict.jaxexport"))).mlir_module_serialized
    assert checks.checked_targets(module) is None  # nothing read it yet
    checks.check_module("here", module, frozenset())
    assert checks.checked_targets(module) == frozenset({"shape_assertion"})
    assert checks.checked_targets(bytes(bytearray(module))) is None  # equal bytes, another object: not known


@pytest.mark.parametrize("depth", [0, 1])
def test_the_lapack_gate_only_acts_inside_its_block(depth, monkeypatch):
    from jax._src.lax import linalg

    if not hasattr(linalg, "initialize_lapack"):
        pytest.skip("this JAX (before 0.10) does not initialize LAPACK when it lowers an exported call")
    calls = []
    monkeypatch.setattr(linalg, "initialize_lapack", lambda: calls.append(1))
    if depth:
        with private_runtime.lapack_left_alone():
            linalg.initialize_lapack()
    assert calls == []
    if depth:
        linalg.initialize_lapack()  # the gate stays installed, and passes through outside the block
        assert calls == [1]
    else:
        with private_runtime.lapack_left_alone():
            pass
        linalg.initialize_lapack()
        assert calls == [1]


def test_deferred_weights_check_refuses_damage_at_the_first_call_and_runs_nothing(tmp_path, run_cli):
    good = jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", EXAMPLES / "mlp" / "spec-npz.yaml",
                          output=tmp_path / "mlp.jaxport").path
    with jaxport.open_artifact(good) as art:
        at = art.members["weights.bin"].offset + 3
    data = bytearray(good.read_bytes())
    data[at] ^= 0x40
    bad = tmp_path / "bad.jaxport"
    bad.write_bytes(bytes(data))
    x = np.load(EXAMPLES / "mlp" / "x.npy")
    with pytest.raises(IntegrityError) as sync:
        jaxport.load(bad)
    loaded = jaxport.load(bad, defer_verify=True)  # the check runs while the program compiles
    for _ in range(2):  # refused at the first call, and at every later one
        with pytest.raises(IntegrityError) as deferred:
            loaded(x)
        assert str(deferred.value) == str(sync.value)
    assert loaded.backend._executables  # it compiled ...
    res = run_cli("call", bad, "--inputs", EXAMPLES / "mlp" / "x.npy", "--no-cache", "-o", tmp_path / "y.npy")
    assert (res.exit_code, res.stderr) == (8, f"error[integrity]: {sync.value}\n")
    assert not (tmp_path / "y.npy").exists()  # ... and nothing ran or was written
    np.testing.assert_array_equal(np.asarray(jaxport.load(good, defer_verify=True)(x)),
                                  np.asarray(jaxport.load(good)(x)))


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("mlp") / "mlp.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp/spec.yaml", output=path).path


def test_the_steady_state_call_skips_binding_and_gives_the_same_results(mlp):
    import jax

    f = jaxport.load(mlp)
    x = np.load(EXAMPLES / "mlp/x.npy")
    expected = np.asarray(f.call_named({"x": x}))
    assert f._direct == {}
    for value in (x, jax.device_put(x), x, jax.device_put(x)):
        np.testing.assert_array_equal(np.asarray(f(value)), expected)
    assert len(f._direct) == 2  # numpy and device arrays, one entry each
    x7 = np.concatenate([x, x[:3]])
    np.testing.assert_array_equal(np.asarray(f(x7)), np.asarray(f.call_named({"x": x7})))
    assert len(f.compiled_signatures) == 2
    with pytest.raises(InputError) as e:  # a dtype never seen goes through the checks, as before
        f(x.astype(np.float64))
    assert "float64" in str(e.value) and "float32" in str(e.value)
    np.testing.assert_allclose(np.asarray(jax.jit(f)(x)), expected, rtol=1e-6)  # tracers: the traced path


def test_a_failing_direct_call_is_run_again_by_the_checked_path(mlp):
    f = jaxport.load(mlp)
    x = np.load(EXAMPLES / "mlp/x.npy")
    expected = np.asarray(f(x))
    f(x)
    (seen,) = f._direct

    def broken(*args):
        raise RuntimeError("boom")

    f._direct[seen] = broken
    np.testing.assert_array_equal(np.asarray(f(x)), expected)


def test_no_direct_call_where_a_call_needs_more(make_artifact):
    f = jaxport.load(make_artifact("def f(x):\n    return x * 2\n", "jaxport: 1\nargs: ['f64[b]']\n"))
    assert f.function_record.x64 is True
    x = np.array([1e300, 1.5], np.float64)
    for _ in range(3):
        y = f(x)
        assert y.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(y), x * 2)
    assert f._direct == {}  # 64-bit mode is entered on every call


def test_the_plain_call_report_is_what_rich_prints(mlp, tmp_path):
    """`call` prints its report without importing rich, exactly as rich prints it (the comparison of test_inspect:
    pipes, colour and plain terminals, NO_COLOR, TERM=dumb), values (--print) included; a row with NaN is red, which
    is left to rich."""
    import io

    from jaxport_cli import call_view, render

    from jaxport.run.calls.report import CallReport
    from tests.cli.test_inspect import _CONSOLES, _Terminal

    f = jaxport.load(mlp)
    x = np.load(EXAMPLES / "mlp/x.npy")
    compared = 0
    for xs in (x, np.concatenate([x, x[:1]])):
        result = f.run({"x": xs})
        report = CallReport.of_run(mlp, f, {"x": xs}, {"x": "x.npy"}, result, None, output=str(tmp_path / "y.npy"))
        for print_values in (False, True):
            doc = call_view._document(report, print_values)
            for kind, env in _CONSOLES:
                if env.get("COLUMNS") == "40":
                    continue
                plain = doc.render_plain(_Terminal() if kind == "terminal" else io.StringIO(), env)
                rich = _Terminal() if kind == "terminal" else io.StringIO()
                doc.render_rich(console=render._console(False, stream=rich, environ=env))
                assert plain == rich.getvalue(), (kind, env)
                compared += 1
        report.outputs[0]["nan"] = 1
        assert call_view._document(report, False).render_plain(io.StringIO(), {}) is None
    assert compared == 2 * 2 * 6


@pytest.mark.slow
def test_a_plain_call_on_a_pipe_imports_no_rich(mlp, tmp_path):
    probe = ("import sys\nfrom jaxport_cli.main import main\nsys.argv = ['jaxport', *sys.argv[1:]]\ntry:\n    main()\n"
             "finally:\n    sys.stderr.write('rich loaded: %s\\n' % any(m == 'rich' or m.startswith('rich.')"
             " for m in sys.modules))\n")
    x = tmp_path / "x.npy"
    np.save(x, np.load(EXAMPLES / "mlp/x.npy"))
    proc = subprocess.run([sys.executable, "-c", probe, "call", str(mlp), "--inputs", str(x), "--cache-dir",
                           str(tmp_path / "cache"), "-o", str(tmp_path / "y.npy")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.endswith("rich loaded: False\n"), proc.stderr
    assert proc.stdout.splitlines()[1:3] == ["outputs", " name   ┃ shape   ┃ dtype   ┃      min ┃      max ┃     mean "
                                                        "┃ NaN ┃ Inf "]
