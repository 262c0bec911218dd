"""The engine-free core of serving and batch inference (``jaxport.serve.batching``): buckets from the bounds, padding
where the row-wise proof allows it, splitting over the largest bucket, refusals with the reason, and no compilation
after warm-up. Outputs are compared with the function called directly."""

from __future__ import annotations

import re

import numpy as np
import pytest

import jaxport
from jaxport.serve.batching import Batched, plan_buckets
from tests.support import EXAMPLES


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    out = tmp_path_factory.mktemp("batching") / "mlp.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=out).path


def _x(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 784), dtype=np.float32)


def test_buckets_come_from_the_bounds_or_the_given_sizes(mlp):
    f = jaxport.load(mlp).function_record
    assert plan_buckets(f).buckets == [{"batch": b} for b in (1, 4, 16, 64, 256, 1024, 4096)]
    assert plan_buckets(f, {"batch": [32, 1, 8]}).buckets == [{"batch": 1}, {"batch": 8}, {"batch": 32}]
    with pytest.raises(jaxport.UsageError, match=re.escape(
            "--dim batch=8,5000: 5000 is outside the spec bound 1 <= batch <= 4096.")):
        plan_buckets(f, {"batch": [8, 5000]})
    with pytest.raises(jaxport.UsageError, match=re.escape(
            "--dim seq: the function has no dimension variable 'seq'; it has batch.")):
        plan_buckets(f, {"seq": [8]})


def test_pads_splits_and_equals_a_direct_call_without_compiling_after_warmup(mlp):
    loaded = jaxport.load(mlp)
    batched = Batched(loaded, {"batch": [1, 8, 32]})
    assert (batched.batch, batched.max_rows) == ("batch", 32)
    assert batched.verdicts["batch"].allowed
    warmed = batched.warmup()
    assert [w.dims for w in warmed] == [{"batch": 1}, {"batch": 8}, {"batch": 32}]
    assert batched.compilations_after_warmup == 0
    direct = jaxport.load(mlp)
    for rows in (1, 3, 8, 9, 32, 70, 5000):  # 5000 is over the spec's bound: split into chunks of 32
        x = _x(rows, rows)
        got = batched({"x": x})["output"]
        assert got.shape == (rows, 10)
        expected = np.concatenate([np.asarray(direct(x[i:i + 4096])) for i in range(0, rows, 4096)])
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert batched.compilations_after_warmup == 0
    assert len(loaded.compiled_signatures) == 3
    s = batched.stats
    # 3 -> 8; 8; 9 -> 32; 32; 70 = 32 + 32 + 6 (-> 8); 5000 = 156 * 32 + 8
    assert (s["batch=8"].calls, s["batch=8"].rows, s["batch=8"].padded_rows) == (4, 3 + 8 + 6 + 8, 5 + 2)
    assert (s["batch=32"].calls, s["batch=32"].padded_rows) == (1 + 1 + 2 + 156, 23)
    assert (s["batch=1"].calls, s["batch=1"].padded_rows) == (1, 0)
    assert batched.empty_outputs()["output"].shape == (0, 10)


def test_refuses_with_the_reason_where_padding_is_not_proven(make_artifact):
    path = make_artifact("def f(x):\n    return x - x.mean(axis=0)\n",
                         "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - \"f32[batch, 3]\"\n")
    batched = Batched(jaxport.load(path), {"batch": [2, 4]})
    assert batched.batch is None
    assert batched.no_batch_reason == ("padding batch is not proven safe: output 'output' depends on a reduction "
                                       "over batch (stablehlo.reduce)")
    batched.warmup()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(batched({"x": x})["output"], x - x.mean(axis=0))
    with pytest.raises(jaxport.InputError, match=re.escape(
            f"{path}: function 'f': no compiled bucket fits batch=3: batch must equal a bucket's value (2, 4) "
            f"because padding it is not proven safe: output 'output' depends on a reduction over batch "
            f"(stablehlo.reduce). Serve with --dim to compile the sizes you call with (dims={{...}} in Python).")):
        batched({"x": x[:3]})
    with pytest.raises(jaxport.InputError, match=re.escape(
            "input 'x': shape[1] = 2, but the artifact expects 3 (f32[batch, 3]).")):
        batched({"x": x[:, :2]})
    assert batched.compilations_after_warmup == 0
