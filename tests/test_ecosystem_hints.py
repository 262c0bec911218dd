"""Dimension-dependent ranges (``range: [0, nodes]``, ``--range NAME=0:nodes``) and the hints for libraries'
failures: equinox's ``error_if`` callbacks and Pallas kernels given a symbolic dimension, and a call that needs a
Python integer for a symbolic size."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import ExportError, SpecError

GATHER = ("import jax.numpy as jnp\n\n\ndef f(table, idx):\n"
          "    return jnp.take(table, idx, axis=0, mode='fill', fill_value=-1.0)\n")
GATHER_SPEC = ("jaxport: 1\ndims: {nodes: {max: 40}, k: {max: 16}}\nargs:\n  - 'f32[nodes, 2]'\n"
               "  - {shape: [k], dtype: i32, range: [0, nodes]}\n")


def test_a_range_that_depends_on_a_dimension(tmp_path, monkeypatch, run_cli):
    """Indices drawn in [0, nodes) at every size: an index out of range would give the fill value -1."""
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text(GATHER)
    Path("spec.yaml").write_text(GATHER_SPEC)
    assert run_cli("export", "model.py:f", "-s", "spec.yaml", "-o", "g.jaxport").exit_code == 0
    loaded = jaxport.load("g.jaxport")
    assert loaded.function_record.inputs[1].range == (0, "nodes")
    for nodes in (1, 3, 40):
        arrays = loaded.random_inputs({"nodes": nodes, "k": 16}, seed=nodes)
        assert 0 <= arrays["idx"].min() and arrays["idx"].max() < nodes
    res = run_cli("call", "g.jaxport", "--random", "--dim", "nodes=2", "--dim", "k=16", "--save-inputs", "in.npz",
                  "-o", "out.npz")
    assert res.exit_code == 0, res.stderr
    idx = np.load("in.npz")["idx"]
    assert sorted(set(idx.tolist())) == [0, 1]
    assert (np.load("out.npz")["output"] == np.load("in.npz")["table"][idx]).all()
    res = run_cli("verify", "g.jaxport")
    assert res.exit_code == 0, res.stdout + res.stderr
    # --range takes an expression too: an integer input's indices of the last row only
    res = run_cli("call", "g.jaxport", "--random", "--dim", "nodes=5", "--range", "idx=nodes - 1:nodes",
                  "--save-inputs", "in2.npz")
    assert res.exit_code == 0, res.stderr
    assert set(np.load("in2.npz")["idx"].tolist()) == {4}


@pytest.mark.parametrize(("leaf", "message"), [
    ("{shape: [k], dtype: f32, range: [0, nodes]}",
     "spec.yaml:5: args[1].range: HI must be a number, found 'nodes'; write [LO, HI] such as [0, 1]."),
    ("{shape: [k], dtype: i32, range: [0, rows]}",
     "spec.yaml:5: args[1].range: 'rows' is not a dimension of any argument's shape; a range may name only those."),
    ("{shape: [k], dtype: i32, range: [0, 'nodes +']}",
     "spec.yaml:5: args[1].range: HI 'nodes +' is not a number nor a dimension expression: "),
])
def test_dimension_ranges_the_reader_refuses(leaf, message):
    spec = f"jaxport: 1\ndims: [nodes, k]\nargs:\n  - 'f32[nodes, 2]'\n  - {leaf}\n"
    with pytest.raises(SpecError) as e:
        jaxport.parse_spec(spec, "spec.yaml")
    assert str(e.value).startswith(message)


def test_a_float_range_on_the_command_line_cannot_name_a_dimension(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text(GATHER)
    Path("spec.yaml").write_text(GATHER_SPEC)
    assert run_cli("export", "model.py:f", "-s", "spec.yaml", "-o", "g.jaxport").exit_code == 0
    res = run_cli("call", "g.jaxport", "--random", "--range", "table=0:nodes")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: --range: 'table=0:nodes': LO and HI must be finite numbers (only an integer input's bound "
        "may be a dimension; 'table' is float32).\n"))
    res = run_cli("call", "g.jaxport", "--random", "--range", "idx=0:rows")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: --range: the range bound 'rows' of input 'idx' names 'rows', which is not a dimension "
        "variable of the function (k, nodes).\n"))


EQX = "import equinox as eqx\n\n\ndef f(x):\n    return eqx.error_if(x, x < -1e9, 'too small') * 2\n"


def test_equinox_error_if_names_its_switch(make_artifact):
    pytest.importorskip("equinox")
    with pytest.raises(ExportError) as e:
        make_artifact(EQX, "jaxport: 1\nargs: ['f32[3]']\n")
    assert str(e.value) == (
        "model.py:f: the function uses host callbacks (pure_callback from equinox.error_if), which call back into "
        "Python and cannot be serialized. They are equinox's runtime checks (eqx.error_if, used by diffrax, "
        "optimistix and lineax), which call back to raise their error: for diffrax, pass diffeqsolve(..., "
        "throw=False) and read sol.result instead; else set the environment variable EQX_ON_ERROR=nan before "
        "equinox is imported (EQX_ON_ERROR=nan jaxport export ...), so that a failed check gives NaN instead (with "
        "static shapes only: equinox makes the NaNs with numpy, at the shape's size).")


def test_equinox_error_if_exports_with_the_switch_set(tmp_path):
    pytest.importorskip("equinox")
    (tmp_path / "model.py").write_text(EQX)
    (tmp_path / "spec.yaml").write_text("jaxport: 1\nargs: ['f32[3]']\n")
    env = {**os.environ, "EQX_ON_ERROR": "nan"}
    command = [sys.executable, "-c", "from jaxport_cli.main import main; main()", "export", "model.py:f", "-s",
               "spec.yaml", "-o", "m.jaxport"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = jaxport.load(tmp_path / "m.jaxport")
    np.testing.assert_array_equal(np.asarray(loaded(np.array([1.0, 2.0, 3.0], np.float32))), [2.0, 4.0, 6.0])
    assert np.isnan(np.asarray(loaded(np.array([1.0, -1e10, 3.0], np.float32)))).all()


ODE = '''import diffrax, jax.numpy as jnp, numpy as np

W = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32) * 0.3


def solve(y0, throw=True):
    term = diffrax.ODETerm(lambda t, y, args: jnp.tanh(y @ W))
    sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), t0=0.0, t1=1.0, dt0=0.1, y0=y0, saveat=diffrax.SaveAt(t1=True),
                              throw=throw)
    return sol.ys[0]


def solve_quietly(y0):
    return solve(y0, throw=False)
'''
ODE_SPEC = "jaxport: 1\ndims: {b: {max: 32}}\nargs: ['f32[b, 3]']\n"


def test_a_diffrax_neural_ode_with_a_symbolic_batch(tmp_path, monkeypatch, run_cli):
    """diffrax's error check is a callback (the hint names throw=False); without it the ODE exports and verifies."""
    pytest.importorskip("diffrax")
    monkeypatch.chdir(tmp_path)
    Path("ode.py").write_text(ODE)
    Path("spec.yaml").write_text(ODE_SPEC)
    res = run_cli("export", "ode.py:solve", "-s", "spec.yaml", "-o", "o.jaxport")
    assert res.exit_code == 5 and "pass diffeqsolve(..., throw=False)" in res.stderr, res.stderr
    res = run_cli("export", "ode.py:solve_quietly", "-s", "spec.yaml", "-o", "o.jaxport")
    assert res.exit_code == 0, res.stderr
    spec = importlib.util.spec_from_file_location("ecosystem_diffrax_ode", tmp_path / "ode.py")
    live = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(live)
    loaded = jaxport.load("o.jaxport")
    for b in (1, 12):
        y0 = np.random.default_rng(b).normal(size=(b, 3)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(loaded(y0)), np.asarray(live.solve(y0)), rtol=1e-5, atol=1e-6)
    assert run_cli("verify", "o.jaxport").exit_code == 0


def test_equinox_nan_mode_with_a_symbolic_dimension_says_what_to_do_instead(tmp_path):
    pytest.importorskip("diffrax")
    (tmp_path / "ode.py").write_text(ODE)
    (tmp_path / "spec.yaml").write_text(ODE_SPEC)
    command = [sys.executable, "-c", "from jaxport_cli.main import main; main()", "export", "ode.py:solve", "-s",
               "spec.yaml", "-o", "o.jaxport"]
    done = subprocess.run(command, cwd=tmp_path, env={**os.environ, "EQX_ON_ERROR": "nan"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 5
    error = next(line for line in done.stderr.splitlines() if line.startswith("error["))
    assert error.startswith(
        "error[export]: ode.py:solve: exporting with the spec's shapes failed: TypeError: '_DimExpr' object cannot be "
        "interpreted as an integer. This is equinox's EQX_ON_ERROR=nan mode, which works (with static shapes only: "
        "equinox makes the NaNs with numpy, at the shape's size). With a symbolic dimension, leave EQX_ON_ERROR "
        "unset and avoid the check: for diffrax, pass diffeqsolve(..., throw=False) and read sol.result.")


PALLAS = '''import jax
from jax.experimental import pallas as pl


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def kernel(x):
    cost = pl.CostEstimate(flops=x.shape[0] * x.shape[1], transcendentals=0, bytes_accessed=8 * x.shape[0])
    return pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True,
                          cost_estimate=cost)(x)


def per_row(x):
    return jax.lax.map(lambda row: kernel(row[None])[0], x)
'''
PALLAS_SPEC = "jaxport: 1\ndims: [batch]\nargs: ['f32[batch, 128]']\n"


def test_pallas_with_a_symbolic_dimension_says_how_to_keep_it_outside_the_kernel(make_artifact):
    with pytest.raises(ExportError) as e:
        make_artifact(PALLAS, PALLAS_SPEC, entry="model.py:kernel")
    assert str(e.value).startswith(
        "model.py:kernel: exporting with the spec's shapes failed: ValueError: All fields in CostEstimate must be "
        "ints. flops is not an int: <class 'jax._src.export.shape_poly._DimExpr'>(128*batch). Pallas kernels need "
        "static shapes: a pallas_call's grid, block shapes and cost estimate are Python integers, so a symbolic "
        "dimension cannot reach the kernel. Keep the batch symbolic outside it: run the kernel on fixed-size blocks "
        "with jax.lax.map over the batch (a scan, whose length may be symbolic), or give the dimension a fixed size "
        "in the spec.")
    # the advice works: the kernel per row, the batch symbolic in the scan around it
    path = make_artifact(PALLAS, PALLAS_SPEC, entry="model.py:per_row")
    loaded = jaxport.load(path)
    for batch in (1, 6):
        x = np.arange(batch * 128, dtype=np.float32).reshape(batch, 128)
        np.testing.assert_array_equal(np.asarray(loaded(x)), 2 * x)


#: Real models from keras, optax, jraph, equinox, diffrax: each exports and compiles at two sizes (make test runs them).
pytestmark = pytest.mark.slow


def test_equinox_nan_hint_only_when_equinox_failed(tmp_path, monkeypatch, run_cli):
    # RoPE-style code that calls float() on a symbolic dimension, with EQX_ON_ERROR=nan set for another model
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EQX_ON_ERROR", "nan")
    pytest.importorskip("equinox")
    Path("rope.py").write_text("import equinox as eqx\n\n\ndef f(x):\n    return eqx.filter_vmap(lambda r: r * "
                               "float(x.shape[0]))(x)\n")  # through equinox, failing in the user's code
    Path("spec.yaml").write_text('jaxport: 1\ndims: [b]\nargs: ["f32[b, 4]"]\n')
    res = run_cli("export", "rope.py:f", "-s", "spec.yaml", "-o", "r.jaxport")
    assert res.exit_code == 5
    assert "_DimExpr" in res.stderr and "EQX_ON_ERROR" not in res.stderr, res.stderr


BRANCHES = '''import jax, jax.numpy as jnp


def by_python(x):
    return jax.lax.cond(x.shape[0] > 3, lambda: x * 2, lambda: x - 1)


def by_array(x):
    return jax.lax.cond(jnp.asarray(x.shape[0]) > 3, lambda: x * 2, lambda: x - 1)


def spectrum(x):
    return jnp.abs(jnp.fft.rfft(x, axis=-1))
'''


def _export_failure(run_cli, entry: str, dims: str, arg: str) -> str:
    """stderr of exporting ``branches.py:ENTRY`` (``BRANCHES``, in the current directory) with a one-argument spec,
    which must fail with exit 5."""
    Path("branches.py").write_text(BRANCHES)
    Path("spec.yaml").write_text(f'jaxport: 1\ndims: {dims}\nargs: ["{arg}"]\n')
    res = run_cli("export", f"branches.py:{entry}", "-s", "spec.yaml", "-o", "failed.jaxport")
    assert res.exit_code == 5, res.stderr
    return res.stderr


def test_a_comparison_of_a_symbolic_dimension_says_what_decides_it(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    stderr = _export_failure(run_cli, "by_python", "{b: {max: 8}}", "f32[b, 3]")
    assert ("\nWhat to do: Python decides this comparison of a symbolic dimension while tracing, for every size at "
            "once. Give the dimension bounds or a constraint that decide it (dims: {b: {min: 4}}, constraints: "
            "['b >= 4']), compute it on arrays so the program decides it at each call (jnp.asarray(x.shape[0]) > 3 "
            "with jnp.where or jax.lax.cond), or give the dimension a fixed size in the spec.\n") in stderr
    # both ways out work
    Path("min.yaml").write_text('jaxport: 1\ndims: {b: {min: 4, max: 8}}\nargs: ["f32[b, 3]"]\n')
    assert run_cli("export", "branches.py:by_python", "-s", "min.yaml", "-o", "m.jaxport").exit_code == 0
    assert run_cli("export", "branches.py:by_array", "-s", "spec.yaml", "-o", "a.jaxport").exit_code == 0
    loaded = jaxport.load("a.jaxport")
    for b in (2, 5):
        x = np.arange(b * 3, dtype=np.float32).reshape(b, 3)
        np.testing.assert_array_equal(np.asarray(loaded(x)), x * 2 if b > 3 else x - 1)


def test_an_fft_over_a_symbolic_axis_says_to_fix_its_size(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    stderr = _export_failure(run_cli, "spectrum", "{b: {max: 8}, n: {max: 64}}", "f32[b, n]")
    assert ("\nWhat to do: JAX lowers an FFT only over axes of fixed size: give the transformed axes fixed sizes in "
            "the spec and keep the symbolic dimension on the others (the batch).") in stderr
    Path("fixed.yaml").write_text('jaxport: 1\ndims: {b: {max: 8}}\nargs: ["f32[b, 16]"]\n')
    assert run_cli("export", "branches.py:spectrum", "-s", "fixed.yaml", "-o", "s.jaxport").exit_code == 0
    x = np.random.default_rng(0).normal(size=(3, 16)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jaxport.load("s.jaxport")(x)), np.abs(np.fft.rfft(x, axis=-1)),
                               rtol=1e-4, atol=1e-4)


SIZES = '''import jax.numpy as jnp
import numpy as np


def fourier(x):  # the neural operator's round trip, the size a Python integer
    n = x.shape[-1]
    return jnp.fft.irfft(jnp.fft.rfft(x), n=n)


def diagonal(x):
    return x[jnp.diag_indices(2 * x.shape[0] // 2)]


def by_numpy(x):
    return x + np.zeros(x.shape[1])


def traced(x):
    return x[jnp.arange(x.shape[0]), jnp.arange(x.shape[0])]
'''


def _hint(size: str, which: str, fixed: str) -> str:
    return (f"\nWhat to do: a call in the frames below needs a Python integer for {which}, which JAX traces for "
            f"every size at once. Either give {fixed} a fixed size in the spec (a number in the shape, one artifact "
            f"per size), or compute with calls that take a traced size: jnp.arange({size}), jnp.zeros(({size},)), "
            f"jnp.eye({size}) and lax operations do; Python's int() and range(), numpy, and library arguments that "
            f"must be Python integers (jnp.fft.irfft(n=...), jnp.diag_indices(...)) do not.\n")


@pytest.mark.parametrize(("entry", "arg", "error", "hint", "frame"), [
    ("fourier", "f32[4, n]", "TypeError: '_DimExpr' object cannot be interpreted as an integer",
     _hint("n", "the spec's dimension 'n'", "'n'"), "    return jnp.fft.irfft(jnp.fft.rfft(x), n=n)\n"),
    ("diagonal", "f32[h, h]", "TypeError: '_DimExpr' object cannot be interpreted as an integer",
     _hint("h", "the spec's dimension 'h'", "'h'"), "    return x[jnp.diag_indices(2 * x.shape[0] // 2)]\n"),
    ("by_numpy", "f32[3, n]", "TypeError: expected a sequence of integers or a single integer, got 'n'",
     _hint("n", "the spec's dimension 'n'", "'n'"), "    return x + np.zeros(x.shape[1])\n"),
], ids=["irfft", "diag_indices", "numpy"])
def test_a_call_that_needs_a_concrete_size_names_the_dimension_and_the_ways_out(tmp_path, monkeypatch, run_cli,
                                                                                entry, arg, error, hint, frame):
    monkeypatch.chdir(tmp_path)
    Path("sizes.py").write_text(SIZES)
    Path("spec.yaml").write_text(f'jaxport: 1\nargs: ["{arg}"]\n')
    res = run_cli("export", f"sizes.py:{entry}", "-s", "spec.yaml", "-o", "s.jaxport")
    assert res.exit_code == 5
    assert f"error[export]: sizes.py:{entry}: exporting with the spec's shapes failed: {error}{hint}" in res.stderr
    assert res.stderr.index(frame) > res.stderr.index("What to do")  # the frame stays: the user's line that called
    # both ways out work: a fixed size, or a call that takes the traced one
    Path("fixed.yaml").write_text(f'jaxport: 1\nargs: ["{arg.replace("n]", "6]").replace("h, h", "5, 5")}"]\n')
    assert run_cli("export", f"sizes.py:{entry}", "-s", "fixed.yaml", "-o", "f.jaxport").exit_code == 0
    Path("square.yaml").write_text('jaxport: 1\nargs: ["f32[h, h]"]\n')
    assert run_cli("export", "sizes.py:traced", "-s", "square.yaml", "-o", "t.jaxport").exit_code == 0
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(np.asarray(jaxport.load("t.jaxport")(x)), np.diag(x))
