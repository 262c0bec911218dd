"""Splitting a batch into calls and merging requests into one call (``jaxport.run.buckets.rowwise``'s ``split``
verdict): allowed only where every output row depends on its own input row alone, not on its position, and the
variable sizes axis 0 of every input and output and nothing else. Padding at the end keeps rows' positions, so a
position-dependent program is still padded; it is never split or merged (``serve.batching``, ``serve.batcher``) and
a batch engine refuses it (``serve.engine``). Values are compared with ``jax.jit`` of the live function."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
import threading

import jax
import numpy as np
import pytest

import jaxport
from jaxport.run.buckets.padding import padding_verdicts, specializer
from jaxport.serve.batcher import Batcher
from jaxport.serve.batching import Batched

MODELS = '''
import jax
import jax.numpy as jnp

W = jnp.linspace(-1, 1, 16 * 8).reshape(16, 8)


@jax.jit
def _twice(a):
    return a * 2.0


def mlp(x): return jax.nn.relu(x @ W)
def numbered(x): return x + jnp.arange(x.shape[0], dtype=x.dtype)[:, None]
def first_rows(x): return jnp.where(jnp.arange(x.shape[0])[:, None] < 2, x, 0.0)
def noise(x): return x + jax.random.normal(jax.random.key(0), x.shape)
def gram(x): return x @ x.T
def pairs(x): return (x[:, None, :] - x[None, :, :]).sum(axis=2)
def layers(x):
    return jax.lax.scan(lambda c, w: (jnp.tanh(c @ w), None), x, jnp.ones((3, 16, 16)) * 0.1)[0]
def in_loop(x):
    return jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5 + jnp.arange(x.shape[0], dtype=x.dtype)[:, None], x)
def called(x): return {"plain": _twice(x), "numbered": _twice(x + jnp.arange(x.shape[0], dtype=x.dtype)[:, None])}
def called_plainly(x): return {"a": _twice(x), "b": _twice(x + 1.0)}
def centered(x): return x - x.mean(axis=0)
def size_capped(x): return x * jnp.minimum(x.shape[0], 8)  # 8 at both 11 and 13, the sizes specialized
'''

ROWS = "f32[b, 16]"
POSITIONS = "the rows' positions along b (stablehlo.iota: an arange over b)"
#: (function, its split verdict: True or the reason), every one padding-safe but ``centered``.
CASES = [
    ("mlp", True),
    ("layers", True),
    ("called_plainly", True),
    ("numbered", f"output 'output' depends on {POSITIONS}"),
    ("first_rows", f"output 'output' depends on {POSITIONS}"),
    ("noise", f"output 'output' depends on {POSITIONS}"),  # a row's random numbers depend on its index
    ("in_loop", f"output 'output' depends on {POSITIONS}"),
    ("called", f"output 'numbered' depends on {POSITIONS}"),
    ("gram", "output 'output' (shape [b, b]) has b as axis 1 too: its rows are not one per row of the batch"),
    ("pairs", "output 'output' (shape [b, b]) has b as axis 1 too: its rows are not one per row of the batch"),
    ("centered", "output 'output' depends on a reduction over b (stablehlo.reduce)"),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("positions")
    (d / "models.py").write_text(MODELS)
    (d / "spec.yaml").write_text(f"jaxport: 1\ndims: {{b: {{min: 1, max: 64}}}}\nargs: ['{ROWS}']\n")
    return d


@pytest.fixture(scope="module")
def live(models):
    """The module's functions themselves (what ``jax.jit`` of the live function gives is the reference)."""
    sys.path.insert(0, str(models))
    try:
        spec = importlib.util.spec_from_file_location("position_models", models / "models.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(models))
    return module


@pytest.fixture(scope="module")
def artifacts(models):
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            with contextlib.chdir(models):
                cache[name] = jaxport.export(f"models.py:{name}", "spec.yaml",
                                             output=models / f"{name}.jaxport").path
        return cache[name]

    return get


def _x(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 16), dtype=np.float32)


def _jit(live, name: str, x: np.ndarray) -> dict[str, np.ndarray]:
    out = jax.jit(getattr(live, name))(x)
    return {k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else {"output": np.asarray(out)}


def _check(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("name,expected", CASES, ids=[c[0] for c in CASES])
def test_split_verdicts_and_what_an_allowed_split_gives(artifacts, live, name, expected):
    loaded = jaxport.load(artifacts(name))
    f = loaded.function_record
    (verdict,) = padding_verdicts(f, len(f.weights), specializer(loaded.backend, f),
                                  loaded.backend.exported.mlir_module()).values()
    assert verdict.allowed == (name != "centered")
    assert (True if verdict.split else verdict.split_reason) == expected
    assert verdict.split_dict() == ({"allowed": True} if verdict.split else {"allowed": False, "reason": expected})
    if verdict.split:  # what the verdict promises: chunks of 3 and 5 rows, and two requests merged, equal one call
        x = _x(8, 1)
        whole = _jit(live, name, x)
        parts = [_jit(live, name, x[:3]), _jit(live, name, x[3:])]
        _check({k: np.concatenate([p[k] for p in parts]) for k in whole}, whole)


def test_a_position_dependent_batch_is_padded_never_split(artifacts, live):
    """``x + arange(rows)`` on buckets 1 and 8: 5 rows pad to 8 and slice back (positions kept), 20 rows run on a
    bucket of their own (compiled on first use) rather than answered 0..7, 0..7, 0..3, or with ``strict`` are
    refused; two requests given to one run are each run alone."""
    path = artifacts("numbered")
    batched = Batched(jaxport.load(path), {"b": [1, 8]})
    batched.warmup()
    assert (batched.batch, batched.splits) == ("b", False)
    reason = f"splitting or merging b is not proven safe: output 'output' depends on {POSITIONS}"
    assert batched.split_reason == reason
    assert batched.describe()["padding"]["b"] == {
        "allowed": True, "fill": "edge", "inputs": {"x": [0]}, "outputs": {"output": [0]},
        "split": {"allowed": False, "reason": f"output 'output' depends on {POSITIONS}"}}
    for rows in (1, 5, 8, 20, 19):  # 20 and 19 pad to 20, the ladder's size past the plan: one compile
        x = _x(rows, rows)
        _check(batched({"x": x}), _jit(live, "numbered", x))
    assert batched.compilations_after_warmup == 1 and batched.stats["b=20"].calls == 2
    a, b = _x(3, 1), _x(4, 2)
    got = batched.run([batched.admit({"x": a}), batched.admit({"x": b})])
    _check(got[0], _jit(live, "numbered", a))
    _check(got[1], _jit(live, "numbered", b))
    assert batched.stats["b=8"].calls == 2 + 2  # 5, 8; then a, b
    strict = Batched(jaxport.load(path), {"b": [1, 8]}, strict=True)
    strict.warmup()
    with pytest.raises(jaxport.InputError, match=re.escape(
            f"{path}: function 'numbered': 20 rows are more than the largest bucket's 8, and the batch may not be "
            f"split into calls of 8 rows: {reason}. Send at most 8 rows per call, or compile a bucket that holds "
            f"them (--dim b=...,20; dims={{...}} in Python).")):
        strict({"x": _x(20)})
    with pytest.raises(jaxport.InputError, match=re.escape(
            "rows are more than the largest bucket's 8, and the batch may not be split into calls of 8 rows: "
            f"{reason}. Send at most 8 rows per call (65 is outside the spec bound 1 <= b <= 64: no bucket can hold "
            f"them).")):
        strict({"x": _x(65)})
    assert strict.compilations_after_warmup == 0


def test_a_batch_by_batch_output_runs_on_its_own_bucket_over_the_largest_not_a_value_error(artifacts, live):
    """``x @ x.T`` ([b, b]): padding is exact (both axes sliced back); splitting it would concatenate [8, 8] and
    [4, 4] blocks, and merging would hand each request other requests' rows: 12 rows run on a bucket of 12, or with
    ``strict`` are refused."""
    path = artifacts("gram")
    batched = Batched(jaxport.load(path), {"b": [1, 8]})
    for rows in (5, 12):
        x = _x(rows, 3)
        _check(batched({"x": x}), _jit(live, "gram", x))
    assert batched.stats["b=8"].padded_rows == 3 and batched.stats["b=12"].padded_rows == 0
    with pytest.raises(jaxport.InputError, match=re.escape(
            f"{path}: function 'gram': 12 rows are more than the largest bucket's 8, and the batch may not be split "
            f"into calls of 8 rows: splitting or merging b is not proven safe: output 'output' (shape [b, b]) has b "
            f"as axis 1 too: its rows are not one per row of the batch.")):
        Batched(jaxport.load(path), {"b": [1, 8]}, strict=True)({"x": _x(12)})


def test_the_window_does_not_merge_requests_whose_rows_depend_on_their_positions(artifacts, live):
    path = artifacts("numbered")
    batched = Batched(jaxport.load(path), {"b": [1, 8]})
    batched.warmup()
    batcher = Batcher(batched, window_ms=200)
    try:
        assert (batcher.merge, batcher.no_merge_reason) == (False, batched.split_reason)
        xs = [_x(3, s) for s in range(4)]
        gate = threading.Event()
        results: list = [None] * len(xs)

        def client(i: int) -> None:
            gate.wait()
            results[i] = batcher.submit(batched.admit({"x": xs[i]})).result(timeout=60)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(xs))]
        for t in threads:
            t.start()
        gate.set()
        for t in threads:
            t.join(60)
        for x, got in zip(xs, results):
            _check(got, _jit(live, "numbered", x))  # each numbered 0, 1, 2: not after another client's rows
        assert batcher.waits.per_call == {1: len(xs)}
    finally:
        batcher.close()
    row_wise = Batcher(Batched(jaxport.load(artifacts("mlp")), {"b": [1, 8]}), window_ms=5)
    try:
        assert (row_wise.merge, row_wise.no_merge_reason) == (True, "")
    finally:
        row_wise.close()


@pytest.mark.parametrize("name,reason", [
    ("numbered", f"splitting or merging b is not proven safe: output 'output' depends on {POSITIONS}"),
    ("gram", "splitting or merging b is not proven safe: output 'output' (shape [b, b]) has b as axis 1 too: its "
             "rows are not one per row of the batch"),
    ("centered", "padding b is not proven safe: output 'output' depends on a reduction over b (stablehlo.reduce)"),
])
def test_a_batch_engine_refuses_a_function_whose_rows_may_not_be_split(artifacts, name, reason):
    from jaxport.serve.engine import Engine

    path = artifacts(name)
    with pytest.raises(jaxport.UsageError, match=re.escape(
            f"{path}: function {name!r}: a batch engine cuts the dataset into batches of rows along b, which would "
            f"change the answers: {reason}. Call the function on the whole input (jaxport call, jaxport.load), or "
            f"export one whose output rows each depend on their own input row only.")):
        Engine(path, batch_size=8)


def test_jaxport_call_answers_the_whole_batch(artifacts, live, call, tmp_path):
    """The reference the serving paths keep to: ``jaxport call`` runs 20 rows as one call (rows 0..19)."""
    x = _x(20, 4)
    np.save(tmp_path / "x.npy", x)
    result = call(str(artifacts("numbered")), "--inputs", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 0, result.stderr
    _check({"output": np.load(tmp_path / "y.npy")}, _jit(live, "numbered", x))


def test_the_remembered_verdicts_keep_the_split_verdict(artifacts, tmp_path):
    path = artifacts("numbered")
    first = Batched(jaxport.load(path), {"b": [8]}, cache_dir=tmp_path)
    again = Batched(jaxport.load(path), {"b": [8]}, cache_dir=tmp_path)  # read back from the record
    assert again.verdicts == first.verdicts and not again.verdicts["b"].split
    assert again.split_reason == first.split_reason != ""


def test_a_program_computing_with_the_batch_size_is_never_padded(artifacts, live):
    """``x * min(b, 8)`` is 8 at the two sizes the specializations compare, and so the same program there; padding
    2 rows to a bucket of 4 would multiply by 4. The data-flow walk of the polymorphic program sees b's value reach
    the output: each call runs at its own size, on a bucket it fits exactly (compiled when first needed;
    ``strict``: a size with no bucket is refused)."""
    path = artifacts("size_capped")
    loaded = jaxport.load(path)
    f = loaded.function_record
    (verdict,) = padding_verdicts(f, len(f.weights), specializer(loaded.backend, f),
                                  loaded.backend.exported.mlir_module()).values()
    reason = ("the program computes with the value of b (it reaches output 'output': a size used as a number, as in "
              "min(n, 8), n // 16, n % 2 or a loop of n steps), which padding, splitting and merging change")
    assert (verdict.allowed, verdict.reason, verdict.split) == (False, reason, False)
    batched = Batched(jaxport.load(path), {"b": [2, 4]})
    for rows in (2, 4, 3):  # 3: no planned size, a bucket of its own
        x = _x(rows, rows)
        _check(batched({"x": x}), _jit(live, "size_capped", x))
    assert sorted(batched.stats) == ["b=2", "b=3", "b=4"]
    with pytest.raises(jaxport.InputError):
        Batched(jaxport.load(path), {"b": [2, 4]}, strict=True)({"x": _x(3)})
