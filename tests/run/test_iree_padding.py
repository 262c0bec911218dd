"""Which dimension variables a deployed module may pad (``jaxport.run.buckets.rowwise``), and which buckets ``compile``
builds (``jaxport.run.buckets``). Padding is allowed only where the program provably works row by row; every
program allowed here gives, run by XLA on edge-padded inputs and sliced back, what it gives at the exact size."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import jaxport
from jaxport.artifact import model
from jaxport.artifact.bounds import Bounds
from jaxport.errors import UsageError
from jaxport.run import buckets
from jaxport.run.buckets.padding import padding_verdicts, specializer

MODELS = '''
import jax
import jax.numpy as jnp

W = jnp.linspace(-1, 1, 16 * 8).reshape(16, 8)
TABLE = jnp.linspace(0, 1, 50 * 16).reshape(50, 16)


def mlp(x): return jax.nn.log_softmax(jax.nn.relu(x @ W))
def by_size(x): return x / x.shape[0]
def last_row(x): return x[-1] + x
def cumsum_rows(x): return jnp.cumsum(x, axis=0)
def cumulative_columns(x):
    return jnp.cumsum(x, axis=1), jax.lax.cummax(x, axis=1), jax.lax.cumlogsumexp(x, axis=1), jnp.cumprod(x, axis=1)
def centered(x): return x - x.mean(axis=0)
def sort_columns(x): return jnp.sort(x, axis=1), jax.lax.top_k(x, 3)[0]
def sort_rows(x): return jnp.sort(x, axis=0)
def noise(x): return x + jax.random.normal(jax.random.key(0), x.shape)
def layers(x):
    return jax.lax.scan(lambda c, w: (jnp.tanh(c @ w), None), x, jnp.ones((3, 16, 16)) * 0.1)[0]
def stacked(x): return jnp.concatenate([x, x], axis=0)
def flipped(x): return jnp.flip(x, axis=0)
def flattened(x): return x.reshape(-1) * 2
def conv(x): return jax.lax.conv_general_dilated(x[:, None, :, None], jnp.ones((4, 1, 3, 1)), (1, 1), "SAME")
def embed(tok): return TABLE[tok].sum(-1)
def attention(x): return jax.nn.softmax(jnp.einsum("btd,bsd->bts", x, x), axis=-1) @ x
def count_loop(x): return jax.lax.fori_loop(0, x.shape[0], lambda i, c: c + 1.0, x)
def first_rows(x): return jnp.where(jnp.arange(x.shape[0])[:, None] < 2, x, 0.0)
'''

ROWS = "f32[b, 16]"
ALLOWED = True
CASES = [
    ("mlp", ROWS, {"b": ALLOWED}),
    ("by_size", ROWS, {"b": "output 'output' depends on a constant computed from b's value (x.shape[0], x[-1], a "
                            "mean...) (stablehlo.constant)"}),
    ("last_row", ROWS, {"b": "output 'output' depends on a constant computed from b's value (x.shape[0], x[-1], a "
                             "mean...) (stablehlo.constant)"}),
    ("cumsum_rows", ROWS, {"b": "output 'output' depends on an operation whose padding changes with b: it works "
                                "across b or uses its value (stablehlo.reduce_window)"}),
    ("cumulative_columns", ROWS, {"b": ALLOWED}),
    ("centered", ROWS, {"b": "output 'output' depends on a reduction over b (stablehlo.reduce)"}),
    ("sort_columns", ROWS, {"b": ALLOWED}),
    ("sort_rows", ROWS, {"b": "output 'output' depends on a sort along b (stablehlo.sort)"}),
    ("noise", ROWS, {"b": ALLOWED}),  # partitionable threefry: a row's random numbers depend on its index only
    ("layers", ROWS, {"b": ALLOWED}),
    ("stacked", ROWS, {"b": "output 'output' has axis 0 of size 2*b, not b itself"}),
    ("flipped", ROWS, {"b": "output 'output' depends on a reverse along b (stablehlo.reverse)"}),
    ("flattened", ROWS, {"b": "output 'output' has axis 0 of size 16*b, not b itself"}),
    ("conv", ROWS, {"b": ALLOWED}),
    ("embed", "i32[b, t]", {"b": ALLOWED, "t": ALLOWED}),
    ("attention", "f32[b, t, 16]", {"b": ALLOWED, "t": "output 'output' depends on a reduction over t "
                                                        "(stablehlo.reduce)"}),
    ("count_loop", ROWS, {"b": "output 'output' depends on a loop whose condition depends on a constant computed "
                               "from b's value (x.shape[0], x[-1], a mean...) (stablehlo.constant)"}),
    ("first_rows", ROWS, {"b": ALLOWED}),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("padding")
    (d / "models.py").write_text(MODELS)
    return d


def _verdicts(art) -> dict:
    """The padding verdicts 'compile' records in the run description, found as it finds them but compiling nothing."""
    loaded = jaxport.load(art)
    f = loaded.function_record
    return padding_verdicts(f, len(f.weights), specializer(loaded.backend, f),
                                  loaded.backend.exported.mlir_module())


def _export(models, name: str, shape: str):
    dims = "dims: {b: {max: 512}, t: {max: 64}}\n" if ", t" in shape else "dims: {b: {max: 512}}\n"
    (models / f"{name}.yaml").write_text(f"jaxport: 1\n{dims}args: ['{shape}']\n")
    with contextlib.chdir(models):
        return jaxport.export(f"models.py:{name}", f"{name}.yaml", output=models / f"{name}.jaxport").path


@pytest.mark.parametrize("name,shape,expected", CASES, ids=[c[0] for c in CASES])
def test_padding_verdicts(models, name, shape, expected):
    art = _export(models, name, shape)
    verdicts = _verdicts(art)
    assert {v: True if x.allowed else x.reason for v, x in verdicts.items()} == expected
    loaded = jaxport.load(art)
    f = loaded.function_record
    rng = np.random.default_rng(0)
    for v, verdict in verdicts.items():
        if not verdict.allowed:
            continue
        # What padding promises, checked with XLA: edge-pad the inputs from 3 to 8 along v, slice the outputs back.
        sizes = {"b": 3, "t": 5}
        arrays = {}
        for i in f.inputs:
            shape_ = [sizes[d] if isinstance(d, str) else d for d in i.shape]
            arrays[i.name] = (rng.integers(0, 50, shape_) if i.dtype == "int32"
                              else rng.standard_normal(shape_)).astype(i.dtype)
        padded = {}
        for n, a in arrays.items():
            widths = [(0, 5) if ax in verdict.inputs.get(n, []) else (0, 0) for ax in range(a.ndim)]
            padded[n] = np.pad(a, widths, mode="edge")
        exact, wide = dict(loaded.run(arrays).leaves), dict(loaded.run(padded).leaves)
        for n, want in exact.items():
            got = np.asarray(wide[n])[tuple(slice(0, sizes[v]) if ax in verdict.outputs[n] else slice(None)
                                            for ax in range(np.ndim(wide[n])))]
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5, err_msg=f"{name}: {n}")


def test_a_constrained_variable_is_not_padded(models):
    (models / "c.yaml").write_text("jaxport: 1\ndims: {b: {max: 64}}\nconstraints: ['b >= 2']\n"
                                   "args: ['f32[b, 16]']\n")
    with contextlib.chdir(models):
        art = jaxport.export("models.py:mlp", "c.yaml", output=models / "c.jaxport").path
    verdict = _verdicts(art)["b"]
    assert (verdict.allowed, verdict.reason) == (False, "the spec constrains b (b >= 2); a call padded to a "
                                                        "bucket could not be checked against it")


# --- buckets ----------------------------------------------------------------------------------------------------


def _fn(dims: dict, constraints=(), shape=("b", 4)) -> model.Function:
    return model.Function("main.bin", 9, ("cpu",), (model.Input("x", tuple(shape), "float32"),), (),
                          model.Signature(),
                          dims={v: model.DimVar(Bounds(d.get("min", 1), d.get("max"))) for v, d in dims.items()},
                          constraints=tuple(constraints))


def test_proposed_buckets_are_powers_of_two_inside_the_bounds():
    plan = buckets.plan(_fn({"b": {"min": 1, "max": 4096}}))
    assert [b["b"] for b in plan.buckets] == [1, 4, 16, 64, 256, 1024, 4096]
    assert plan.source == "spec bounds"
    assert [b["b"] for b in buckets.plan(_fn({"b": {"min": 3, "max": 100}})).buckets] == [4, 8, 16, 32, 64, 100]
    two = buckets.plan(_fn({"b": {"min": 1, "max": 256}, "t": {"min": 1, "max": 2048}}, shape=("b", "t")))
    assert two.buckets == [{"b": 8, "t": 32}, {"b": 8, "t": 2048}, {"b": 256, "t": 32}, {"b": 256, "t": 2048}]
    assert two.notes == ["no --dim or --bucket given: buckets proposed from the spec's bounds (powers of two inside "
                         "them and the upper bound, at most 8 functions): b in 8, 256; t in 32, 2048"]


def test_proposals_need_an_upper_bound():
    with pytest.raises(UsageError) as e:
        buckets.plan(_fn({"b": {"min": 1}}))
    assert str(e.value) == ("dimension 'b' has no upper bound in the spec, so no buckets can be proposed for it; give "
                            "the sizes to build with --dim b=N1,N2,... (or one with --dim b=N).")


def test_grid_points_that_break_a_constraint_are_left_out():
    fn = _fn({"b": {"max": 64}, "t": {"max": 64}}, ["b * t <= 256"], shape=("b", "t"))
    plan = buckets.plan(fn, grid={"b": [4, 16], "t": [16, 64]})
    assert plan.buckets == [{"b": 4, "t": 16}, {"b": 4, "t": 64}, {"b": 16, "t": 16}]
    assert plan.notes == ["1 grid point left out for breaking the spec's constraints: b=16,t=64"]


def test_grid_and_fixed_and_explicit_buckets():
    fn = _fn({"b": {"max": 64}, "t": {"max": 64}}, shape=("b", "t"))
    assert buckets.plan(fn, fixed={"t": 8}, grid={"b": [2, 1, 2]}).buckets == [{"b": 1, "t": 8}, {"b": 2, "t": 8}]
    assert buckets.plan(fn, fixed={"t": 8}, explicit=[{"b": 4}, {"b": 2, "t": 16}]).buckets == [
        {"b": 2, "t": 16}, {"b": 4, "t": 8}]
    assert buckets.plan(fn, fixed={"b": 3}).buckets == [{"b": 3, "t": 1}]
    with pytest.raises(UsageError) as e:
        buckets.plan(fn, grid={"b": [1, 2]})
    assert str(e.value) == "--dim: give every dimension variable its sizes (t has none), or fix it with --dim t=N."
    with pytest.raises(UsageError) as e:
        buckets.plan(fn, explicit=[{"b": 4}])
    assert str(e.value) == "--bucket b=4: give every dimension variable (t missing), or fix it with --dim t=N."
    assert buckets.function_names([{"b": 1, "t": 8}, {"b": 2, "t": 8}]) == ["main_b1_t8", "main_b2_t8"]
    assert buckets.function_names([{"b": 1}]) == ["main"]
