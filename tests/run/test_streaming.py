"""Large inputs: call --batch-size streams axis 0 through the artifact in chunks, with bounded memory, and gives
the unchunked result."""

from __future__ import annotations

import json
import os
import re
import tracemalloc

import numpy as np
import pytest

import jaxport
from jaxport.run.calls import streaming

MODEL = '''
import jax.numpy as jnp

def rows(x, y):
    return {"a": jnp.tanh(x) * 2 + y[:, None], "b": jnp.sum(x * x, axis=1)}

def pairs(x):
    return x * 3

def total(x):
    return jnp.sum(x), x
'''


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream")
    (d / "model.py").write_text(MODEL)
    specs = {
        "rows": "jaxport: 1\ndims:\n  n: {max: 1000000}\nargs: ['f32[n, 64]', 'f32[n]']\n",
        "pairs": "jaxport: 1\nargs: ['f32[2*n, 8]']\n",
        "total": "jaxport: 1\nargs: ['f32[n, 8]']\n",
    }
    class Artifacts(dict):
        """Exported and loaded on first use (each costs seconds)."""

        def __missing__(self, name: str) -> jaxport.Loaded:
            cwd = os.getcwd()
            os.chdir(d)
            try:
                (d / f"{name}.yaml").write_text(specs[name])
                path = jaxport.export(f"model.py:{name}", f"{name}.yaml", output=d / f"{name}.jaxport").path
            finally:
                os.chdir(cwd)
            self[name] = jaxport.load(path)
            return self[name]

    return Artifacts()


def _inputs(d, n):
    rng = np.random.default_rng(0)
    np.save(d / "x.npy", rng.standard_normal((n, 64)).astype(np.float32))
    np.save(d / "y.npy", rng.standard_normal(n).astype(np.float32))


def test_streamed_call_equals_the_unchunked_call(arts, run_cli, tmp_path):
    _inputs(tmp_path, 1003)
    path = arts["rows"].path
    res = run_cli("call", path, "-i", tmp_path / "x.npy", "-i", tmp_path / "y.npy", "--batch-size", "100", "-o",
                  tmp_path / "out.npz", "--json", "--no-cache")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["streaming"]["rows"] == 1003 and report["streaming"]["chunks"] == 11
    assert report["streaming"]["compilations"] == 2  # chunks of 100, and the last one of 3
    assert report["dims"] == {"n": 1003}
    assert report["output_file"] == str(tmp_path / "out.npz")
    res = run_cli("call", path, "-i", tmp_path / "x.npy", "-i", tmp_path / "y.npy", "-o", tmp_path / "full.npz",
                  "--no-cache")
    assert res.exit_code == 0, res.stderr
    got, full = dict(np.load(tmp_path / "out.npz")), dict(np.load(tmp_path / "full.npz"))
    assert sorted(got) == ["a", "b"] and got["a"].shape == (1003, 64)
    for k in ("a", "b"):
        np.testing.assert_allclose(got[k], full[k], rtol=1e-6, atol=1e-5)
    stats = {s["name"]: s for s in report["outputs"]}
    assert stats["b"]["min"] == pytest.approx(float(full["b"].min()), rel=1e-6)
    assert stats["a"]["mean"] == pytest.approx(float(full["a"].astype(np.float64).mean()), rel=1e-4, abs=1e-6)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_streaming_a_multiple_of_the_axis_factor_into_a_npy(arts, tmp_path):
    x = np.random.default_rng(1).standard_normal((22, 8)).astype(np.float32)
    result = streaming.call(arts["pairs"], {"x": x}, 6, tmp_path / "out.npy")
    assert (result.chunks, result.compilations, result.dims) == (4, 2, {"n": 11})
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), x * 3, rtol=1e-6)
    with pytest.raises(jaxport.UsageError, match="^" + re.escape(
            "--batch-size 5: axis 0 is 2*n, so a chunk must hold a multiple of 2 rows.") + "$"):
        streaming.call(arts["pairs"], {"x": x}, 5)


def test_streaming_needs_axis_0_shared_by_every_input_and_output(arts, run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((4, 8), np.float32))
    res = run_cli("call", arts["total"].path, "-i", tmp_path / "x.npy", "--batch-size", "2")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: output '0' (f32[]) has a scalar. --batch-size streams along axis 0, which "
                          "must be the same dimension variable (times a constant) in every input and output.\n")
    with pytest.raises(jaxport.InputError, match="^" + re.escape(
            "input 'y' has 5 rows (axis 0) and input 'x' has 4; streamed inputs share axis 0 (n).") + "$"):
        streaming.call(arts["rows"], {"x": np.ones((4, 64), np.float32), "y": np.ones(5, np.float32)}, 2)


@pytest.mark.slow
def test_memory_stays_bounded_by_the_chunks(arts, tmp_path):
    """A 32 MB input streamed in 1 MB chunks: Python-side allocations stay a few chunks, not the input."""
    n = 1 << 17
    _inputs(tmp_path, n)
    arrays, _ = streaming.open_inputs(arts["rows"].function_record, [str(tmp_path / "x.npy"),
                                                                       str(tmp_path / "y.npy")])
    assert isinstance(arrays["x"], streaming.NpyRows)
    streaming.call(arts["rows"], arrays, 4096, tmp_path / "warm.npz")  # compile outside the measurement
    tracemalloc.start()
    try:
        result = streaming.call(arts["rows"], arrays, 4096, tmp_path / "out.npz")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.rows == n and result.chunks == 32
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MB for a 32 MB input"
    with np.load(tmp_path / "out.npz") as out:
        b = out["b"]
    x = np.load(tmp_path / "x.npy")
    np.testing.assert_allclose(b, np.sum(x.astype(np.float64) ** 2, axis=1), rtol=1e-5)
