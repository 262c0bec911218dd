"""The engine-free core of serving and batch inference (``jaxport.serve.batching``): buckets from the bounds, padding
where the row-wise proof allows it, splitting over the largest bucket, refusals with the reason, and no compilation
after warm-up. Outputs are compared with the function called directly."""

from __future__ import annotations

import re

import numpy as np
import pytest

import jaxport
from jaxport.serve.batching import Batched, plan_served
from tests.support import EXAMPLES


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    out = tmp_path_factory.mktemp("batching") / "mlp.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=out).path


def _x(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 784), dtype=np.float32)


def test_buckets_come_from_the_bounds_or_the_given_sizes(mlp):
    f = jaxport.load(mlp).function_record
    # powers of two with three sizes between each: 1, 2, ..., 8, 10, 12, 14, 16, 20, ..., 3584, 4096
    expected = sorted({(1 << k) * (4 + j) // 4 for k in range(13) for j in range(4)} - {4480, 5120, 6144, 7168})
    assert plan_served(f).buckets == [{"batch": b} for b in expected]
    assert len(expected) == 44 and expected[:12] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]
    assert plan_served(f).source == "spec bounds"
    assert plan_served(f, {"batch": [32, 1, 8]}).buckets == [{"batch": 1}, {"batch": 8}, {"batch": 32}]
    with pytest.raises(jaxport.UsageError, match=re.escape(
            "--dim batch=8,5000: 5000 is outside the spec bound 1 <= batch <= 4096.")):
        plan_served(f, {"batch": [8, 5000]})
    with pytest.raises(jaxport.UsageError, match=re.escape(
            "--dim seq: the function has no dimension variable 'seq'; it has batch.")):
        plan_served(f, {"seq": [8]})


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


def test_where_padding_is_not_proven_a_size_runs_on_its_own_bucket_compiled_on_first_use(make_artifact):
    path = make_artifact("def f(x):\n    return x - x.mean(axis=0)\n",
                         "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - \"f32[batch, 3]\"\n")
    batched = Batched(jaxport.load(path), {"batch": [2, 4]})
    assert batched.batch is None
    assert batched.no_batch_reason == ("padding batch is not proven safe: output 'output' depends on a reduction "
                                       "over batch (stablehlo.reduce)")
    batched.warmup()
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    for rows in (4, 3, 3, 10, 2):  # 3 and 10 are no planned size: each compiles once, on first use
        np.testing.assert_allclose(batched({"x": x[:rows]})["output"], x[:rows] - x[:rows].mean(axis=0), rtol=1e-6)
    assert (batched.compilations, batched.compilations_after_warmup) == (4, 2)
    assert batched.compiled.warm == [{"batch": 2}, {"batch": 4}]
    assert batched.compiled.held == [{"batch": 2}, {"batch": 4}, {"batch": 3}, {"batch": 10}]
    assert {k: s.calls for k, s in batched.stats.items()} == {"batch=4": 1, "batch=3": 2, "batch=10": 1, "batch=2": 1}
    with pytest.raises(jaxport.InputError, match=re.escape(
            "input 'x': shape[1] = 2, but the artifact expects 3 (f32[batch, 3]).")):
        batched({"x": x[:, :2]})


def test_strict_refuses_a_size_no_planned_bucket_fits_with_the_reason(make_artifact):
    path = make_artifact("def f(x):\n    return x - x.mean(axis=0)\n",
                         "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - \"f32[batch, 3]\"\n")
    batched = Batched(jaxport.load(path), {"batch": [2, 4]}, strict=True)
    batched.warmup()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(batched({"x": x})["output"], x - x.mean(axis=0))
    with pytest.raises(jaxport.InputError, match=re.escape(
            f"{path}: function 'f': no compiled bucket fits batch=3: batch must equal a bucket's value (2, 4) "
            f"because padding it is not proven safe: output 'output' depends on a reduction over batch "
            f"(stablehlo.reduce). Serve with --dim to compile the sizes you call with (dims={{...}} in Python).")):
        batched({"x": x[:3]})
    assert batched.compilations_after_warmup == 0
    with pytest.raises(jaxport.UsageError, match=re.escape(
            f"{path}: function 'f': batch=3 is not one of the planned buckets (batch in 2, 4).")):
        batched.warmup(buckets=[{"batch": 3}])


def test_padding_to_the_default_buckets_wastes_under_a_tenth_of_the_rows_over_sizes_1_to_100(mlp):
    f = jaxport.load(mlp).function_record
    sizes = [b["batch"] for b in plan_served(f).buckets]
    padded = sum(min(s for s in sizes if s >= n) - n for n in range(1, 101))
    assert padded / sum(range(1, 101)) < 0.09  # powers of two alone: 0.45


def test_admitted_requests_merge_into_one_call_and_split_back(mlp):
    loaded = jaxport.load(mlp)
    batched = Batched(loaded, {"batch": [1, 8, 32]})
    batched.warmup()
    xs = [_x(n, n) for n in (1, 3, 2)]
    admitted = [batched.admit({"x": x}) for x in xs]
    assert [a.rows for a in admitted] == [1, 3, 2] and len({a.key for a in admitted}) == 1
    outs = batched.run(admitted)
    direct = jaxport.load(mlp)
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out["output"], np.asarray(direct(x)), rtol=1e-5, atol=1e-6)
    s = batched.stats["batch=8"]
    assert (s.calls, s.rows, s.padded_rows) == (1, 6, 2)
    assert batched.compilations_after_warmup == 0


def test_lazy_compiles_the_first_bucket_a_call_needs_and_pads_smaller_calls_to_it(mlp):
    loaded = jaxport.load(mlp)
    batched = Batched(loaded, {"batch": [1, 8, 32, 64]}, lazy=True)
    assert (batched.compilations, batched.compilations_after_warmup) == (0, None)
    direct = jaxport.load(mlp)
    for rows in (20, 3, 32, 1):  # 20 compiles 32; 3, 32 and 1 run on it
        x = _x(rows, rows)
        np.testing.assert_allclose(batched({"x": x})["output"], np.asarray(direct(x)), rtol=1e-5, atol=1e-6)
    assert (batched.compilations, batched.compilations_after_warmup) == (1, 0)
    assert batched.stats["batch=32"].calls == 4 and "batch=1" not in batched.stats  # stats of the buckets that ran
    batched({"x": _x(50)})  # over the compiled bucket: 64 compiles, once
    batched({"x": _x(40)})
    assert (batched.compilations, batched.compilations_after_warmup) == (2, 1)
    assert batched.bucket_of_rows(9) == {"batch": 32} and batched.bucket_of_rows(65) is None


def test_admit_remembers_only_what_passed_and_checks_every_name_and_dtype(mlp):
    batched = Batched(jaxport.load(mlp), {"batch": [1, 8]})
    x = _x(3)
    assert batched.admit({"x": x}).dims == {"batch": 3}  # remembered from here on
    for arrays, message in [
            ({"y": x}, "unknown input name 'y'; the inputs are: x."),
            ({}, "missing input 'x'."),
            ({"x": x, "y": x}, "unknown input name 'y'; the inputs are: x."),
            ({"x": x.astype(np.float64)}, "input 'x' has dtype float64, but the artifact expects float32. Convert "
                                          "it with x.astype(np.float32) (import numpy as np)."),
            ({"x": x[:, :5]}, "input 'x': shape[1] = 5, but the artifact expects 784 (f32[batch, 784]).")]:
        with pytest.raises(jaxport.InputError) as e:
            batched.admit(arrays)
        assert str(e.value) == message
    admitted = batched.admit({"x": x + 1})
    np.testing.assert_array_equal(admitted.flat[0], x + 1)  # the remembered check, this request's arrays


def test_lazy_runs_smaller_calls_on_a_bucket_warmed_ahead(mlp):
    batched = Batched(jaxport.load(mlp), {"batch": [1, 8, 32, 64]}, lazy=True)
    batched.warmup(buckets=[{"batch": 32}])
    direct = jaxport.load(mlp)
    for rows in (1, 5, 32):
        x = _x(rows, rows)
        np.testing.assert_allclose(batched({"x": x})["output"], np.asarray(direct(x)), rtol=1e-5, atol=1e-6)
    assert (batched.compilations, batched.compilations_after_warmup) == (1, 0)
    assert batched.stats["batch=32"].calls == 3
    with pytest.raises(jaxport.UsageError, match=re.escape("batch=7 is not one of the planned buckets")):
        batched.warmup(buckets=[{"batch": 7}])


def test_padding_verdicts_are_remembered_in_the_cache_and_a_damaged_record_is_ignored(mlp, tmp_path, monkeypatch):
    from jaxport.run.buckets import verdicts

    cache = tmp_path / "cache"
    first = Batched(jaxport.load(mlp), {"batch": [1, 8]}, cache_dir=cache)
    records = sorted(cache.glob(f"jaxport-{verdicts.PADDING_RECORD.replace('-', '_')}-*.json"))
    assert len(records) == 1 and first.verdicts["batch"].allowed

    def no_specializing(*args, **kwargs):
        raise AssertionError("the program was specialized again")

    monkeypatch.setattr(verdicts, "specializer", lambda *args: no_specializing)
    second = Batched(jaxport.load(mlp), {"batch": [1, 8]}, cache_dir=cache)
    assert second.verdicts == first.verdicts and second.batch == "batch"
    monkeypatch.undo()

    for damage in ('{"key": 1}', "[]", "not json", '{"key": ' + records[0].read_text().split('"key": ', 1)[1]
                   .replace('"allowed": true', '"allowed": "yes"')):
        records[0].write_text(damage)
        again = Batched(jaxport.load(mlp), {"batch": [1, 8]}, cache_dir=cache)
        assert again.verdicts == first.verdicts  # recomputed, and remembered again
    cache.chmod(0o777)  # a directory others can write: its records are not read
    records[0].write_text(records[0].read_text().replace('"allowed": true', '"allowed": false'))
    assert Batched(jaxport.load(mlp), {"batch": [1, 8]}, cache_dir=cache).verdicts["batch"].allowed


def test_a_batch_jobs_known_batch_size_is_its_one_bucket(mlp):
    from jaxport.serve.engine import Engine

    engine = Engine(mlp, batch_size=1000)
    assert engine.batched.buckets == [{"batch": 1000}] and engine.batched.compilations == 1
    direct = jaxport.load(mlp)
    for rows in (1000, 1000, 37, 2500):  # full batches unpadded, a ragged one padded to 1000, a larger one split
        x = _x(rows, rows)
        np.testing.assert_allclose(engine.predict({"x": x})["output"], np.asarray(direct(x)), rtol=1e-5, atol=1e-6)
    s = engine.batched.stats["batch=1000"]
    assert (s.calls, s.rows, s.padded_rows) == (6, 4537, 963 + 500)
    assert (engine.batched.compilations, engine.compilations_after_warmup) == (1, 0)
    assert Engine(mlp, batch_size=5000).batched.buckets[-1] == {"batch": 4096}  # outside the bound: the default plan


def test_an_engine_loads_by_load_options_and_takes_their_fields_by_keyword(mlp, tmp_path):
    from jaxport.errors import UsageError
    from jaxport.run.options import LoadOptions
    from jaxport.serve.engine import Engine

    cache = tmp_path / "cache"
    engine = Engine(mlp, load=LoadOptions(verify_weights=False), cache_dir=cache, function=None)
    assert (engine.load, engine.cache_dir) == (LoadOptions(verify_weights=False, cache_dir=cache), cache)
    assert Engine(mlp, load=LoadOptions(cache_dir=cache, cache=False)).cache_dir is None
    with pytest.raises(UsageError, match=re.escape("runtime 'iree' cannot serve: serving compiles every shape bucket "
                                                   "ahead, which the 'jax' runtime does; load with that one.")):
        Engine(mlp, load=LoadOptions(runtime="iree"))
    with pytest.raises(TypeError, match=re.escape("Engine.__init__() got an unexpected keyword argument "
                                                  "'cache_directory'")):
        Engine(mlp, cache_directory=cache)


ATTENTION = ("import jax\nimport jax.numpy as jnp\n\n\ndef f(x):\n    s = jnp.einsum('bqd,bkd->bqk', x, x)\n"
             "    return jax.nn.softmax(s, axis=-1) @ x\n")


def test_the_default_plan_holds_for_every_variable_of_a_model_with_several(make_artifact):
    """A tagger's batch 1..64 and seq 1..512 each take the ladder (no thinning to 64 buckets): 20 x 32 sizes."""
    from jaxport.run.buckets.served import fitting, warmup_order

    path = make_artifact(ATTENTION, "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\n  seq: {min: 1, max: 512}\n"
                                    "args:\n  - \"f32[batch, seq, 2]\"\n")
    f = jaxport.load(path).function_record
    plan = plan_served(f)
    sizes = {v: sorted({b[v] for b in plan.buckets}) for v in ("batch", "seq")}
    assert sizes["batch"] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64]
    assert sizes["seq"][:13] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20] and sizes["seq"][-2:] == [448, 512]
    assert (len(sizes["seq"]), len(plan.buckets), plan.source) == (32, 640, "spec bounds")
    padded = {"batch": True, "seq": False}.__getitem__
    # batch pads up the ladder; seq runs at its own size (strict: only a planned one)
    assert fitting(f, sizes, padded, {"batch": 9, "seq": 100}, strict=False)[:2] == [{"batch": 10, "seq": 100},
                                                                                      {"batch": 12, "seq": 100}]
    assert fitting(f, sizes, padded, {"batch": 9, "seq": 100}, strict=True) == []
    assert fitting(f, sizes, padded, {"batch": 9, "seq": 96}, strict=True)[0] == {"batch": 10, "seq": 96}
    must, rest = warmup_order(f, plan.buckets, {"seq": [128]}, strict=False)
    assert must == [{"batch": 1, "seq": 1}, {"batch": 1, "seq": 128}] and rest[:2] == [{"batch": 1, "seq": 2},
                                                                                      {"batch": 2, "seq": 1}]
    assert warmup_order(f, plan.buckets, {}, strict=True) == (sorted(plan.buckets, key=lambda b: (
        b["batch"] * b["seq"], b["batch"], b["seq"])), [])


def test_one_compile_per_bucket_however_many_ask_and_eviction_past_the_bound(make_artifact):
    import concurrent.futures

    path = make_artifact(ATTENTION, "jaxport: 1\ndims:\n  batch: {min: 1, max: 4}\n  seq: {min: 1, max: 16}\n"
                                    "args:\n  - \"f32[batch, seq, 2]\"\n")
    direct = jaxport.load(path)
    batched = Batched(jaxport.load(path), most=2)
    batched.warmup(buckets=[{"batch": 1, "seq": 1}])
    base = np.random.default_rng(0).standard_normal((3, 16, 2), dtype=np.float32)
    x = base[:, :9]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:  # eight callers of one new bucket at once
        outs = list(pool.map(lambda _: batched({"x": x})["output"], range(8)))
    for out in outs:
        np.testing.assert_allclose(out, np.asarray(direct(x)), rtol=1e-5, atol=1e-6)
    assert (batched.compilations, batched.compilations_after_warmup) == (2, 1)
    admitted = batched.admit({"x": base[:, :11]})
    pending = batched.pending(admitted)  # the compile of (3, 11), on the compile thread
    assert pending is not None and batched.pending(admitted) is pending  # one flight
    pending.result(timeout=120)
    assert batched.pending(admitted) is None and batched.compiled_for(admitted)
    for part in (base[:, :13], base[:, :9], base[:1, :1]):  # 13 evicts (3, 9); (3, 9) compiles again and evicts
        np.testing.assert_allclose(batched({"x": part})["output"], np.asarray(direct(part)), rtol=1e-5, atol=1e-6)
    assert batched.compiled.evicted == 2 and batched.compilations_after_warmup == 4
    assert batched.compiled.held == [{"batch": 1, "seq": 1}, {"batch": 3, "seq": 13}, {"batch": 3, "seq": 9}]
    #   ((3, 11) evicted; (1, 1), the warm-up's, kept)
    assert batched.compiled.counts == {"warmup": 1, "background": 0, "request": 4}
