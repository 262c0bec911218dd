"""Gradients: derivatives stored at export (vjp_order), jax.grad through jaxport.load, call --vjp, verify of the
derivative, and ordered effects refused at export."""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxport
from jaxport.artifact.container import open_artifact
from jaxport.verify.api import verify

MODEL = '''
import jax.numpy as jnp

def f(x, params, n):
    h = jnp.tanh(x @ params["w1"])
    return {"y": h @ params["w2"], "norm": jnp.sum(h ** 2), "n": n * 2}
'''
SPEC = '''jaxport: 1
vjp_order: 1
dims: [b]
args:
  - "f32[b, 4]"
  - {w1: "f32[4, 8]", w2: "f32[8, 3]"}
  - "i32[b]"
'''


def source(x, params, n):
    h = jnp.tanh(x @ params["w1"])
    return {"y": h @ params["w2"], "norm": jnp.sum(h ** 2), "n": n * 2}


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    params = {"w1": rng.standard_normal((4, 8)).astype(np.float32),
              "w2": rng.standard_normal((8, 3)).astype(np.float32)}
    return x, params, np.arange(5, dtype=np.int32)


def loss_of(fn):
    return lambda x, p, n: jnp.sum(fn(x, p, n)["y"] ** 2) + fn(x, p, n)["norm"]


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    """The model exported three ways (each export and first load costs seconds: shared by the tests here):
    ``two`` with vjp_order 2, ``none`` without derivatives, ``bound`` with its parameters bound (vjp_order 1)."""
    import os

    d = tmp_path_factory.mktemp("vjp")
    (d / "model.py").write_text(MODEL)
    rng = np.random.default_rng(0)
    np.savez(d / "w.npz", w1=rng.standard_normal((4, 8)).astype(np.float32),
             w2=rng.standard_normal((8, 3)).astype(np.float32))
    specs = {"two": SPEC.replace("vjp_order: 1", "vjp_order: 2"), "none": SPEC.replace("vjp_order: 1\n", ""),
             "bound": SPEC.replace('{w1: "f32[4, 8]", w2: "f32[8, 3]"}', "bind: w.npz")}
    cwd = os.getcwd()
    os.chdir(d)
    try:
        out = {}
        for name, text in specs.items():
            (d / f"{name}.yaml").write_text(text)
            path = jaxport.export("model.py:f", f"{name}.yaml", output=d / f"{name}.jaxport").path
            out[name] = jaxport.load(path)
    finally:
        os.chdir(cwd)
    return out


def test_jax_grad_through_load_matches_the_source(arts, data):
    loaded = arts["two"]
    x, p, n = data
    got = jax.grad(loss_of(loaded), argnums=(0, 1))(x, p, n)
    want = jax.grad(loss_of(source), argnums=(0, 1))(x, p, n)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    for k in ("w1", "w2"):
        np.testing.assert_allclose(got[1][k], want[1][k], rtol=1e-5, atol=1e-6)
    # jax.vjp and jax.jit go through the same traced path
    out, pullback = jax.vjp(lambda x: loaded(x, p, n)["y"], x)
    ct = np.ones_like(out)
    np.testing.assert_allclose(pullback(ct)[0], jax.vjp(lambda x: source(x, p, n)["y"], x)[1](ct)[0], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda x: loaded(x, p, n)["y"])(x), source(x, p, n)["y"], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.slow
def test_second_order_through_load_and_beyond_the_stored_orders(arts, data):
    x, p, n = data
    loaded = arts["two"]

    def hessian_sum(fn):
        return jax.grad(lambda x: jnp.sum(jax.grad(loss_of(fn))(x, p, n)))(x)

    np.testing.assert_allclose(hessian_sum(loaded), hessian_sum(source), rtol=1e-4, atol=1e-5)
    with pytest.raises(jaxport.UsageError, match="^" + re.escape(
            f"{loaded.path}: function 'f' carries derivatives up to order 2, and differentiating it 3 times needs "
            f"order 3. Re-export it with --vjp-order 3 (or 'vjp_order: 3' in the spec).")):
        jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(jax.grad(loss_of(loaded))(x, p, n)))(x)))(x)


def test_without_derivatives_grad_says_how_to_re_export(arts, data):
    loaded = arts["none"]
    x, p, n = data
    assert loaded.function_record.vjp_order == 0
    with pytest.raises(jaxport.UsageError, match="^" + re.escape(
            f"{loaded.path}: function 'f' carries no derivatives, and differentiating it 1 time needs order 1. "
            f"Re-export it with --vjp-order 1 (or 'vjp_order: 1' in the spec).")):
        jax.grad(loss_of(loaded))(x, p, n)


def test_transformations_jax_cannot_apply_to_an_exported_call_say_what_to_use(arts, data):
    """jax.vmap (no batching rule for exported calls) and forward mode (the stored derivatives are VJPs) are a
    UsageError naming what works instead, not JAX's NotImplementedError or an unnamed TypeError."""
    loaded = arts["two"]
    x, p, n = data
    batched = np.stack([x, x])
    with pytest.raises(jaxport.UsageError, match="^" + re.escape(
            f"{loaded.path}: function 'f' cannot be batched by jax.vmap (JAX has no batching rule for exported "
            f"calls); give the batch as a symbolic dimension at export (jax.vmap the function before exporting it), "
            f"or call it once per element with jax.lax.map.")):
        jax.vmap(lambda v: loaded(v, p, n)["y"])(batched)
    forward = re.escape(f"{loaded.path}: function 'f' has reverse-mode derivatives only (the VJPs stored at export, "
                        f"--vjp-order): use jax.grad, jax.vjp or jax.jacrev, not jax.jvp, jax.jacfwd or jax.hessian.")
    with pytest.raises(jaxport.UsageError, match="^" + forward):
        jax.jvp(lambda v: loaded(v, p, n)["y"], (x,), (x,))
    with pytest.raises(jaxport.UsageError, match="^" + forward):
        jax.hessian(loss_of(loaded))(x, p, n)
    mapped = jax.lax.map(lambda v: loaded(v, p, n)["y"], batched)  # what the message offers works
    np.testing.assert_allclose(np.asarray(mapped[1]), np.asarray(loaded(x, p, n)["y"]), rtol=1e-6)


def test_bound_weights_are_constants_and_their_cotangents_are_available(arts, data):
    x, _, n = data
    loaded = arts["bound"]
    p = dict(np.load(loaded.path.parent / "w.npz"))
    got = jax.grad(lambda x: loss_of(lambda x, _, n: loaded(x, n=n))(x, None, n))(x)
    np.testing.assert_allclose(got, jax.grad(loss_of(source))(x, p, n), rtol=1e-5, atol=1e-6)
    res = loaded.vjp({"x": x, "n": n}, weights=True)
    assert [name for name, _ in res.cotangents] == ["x"] and res.skipped == ["n"]
    want = jax.grad(lambda p: jnp.sum(source(x, p, n)["y"]) + source(x, p, n)["norm"])(p)
    for (name, value), key in zip(res.weight_cotangents, ("w1", "w2")):
        assert name == f"params/{key}"
        np.testing.assert_allclose(value, want[key], rtol=1e-5, atol=1e-5)


def test_call_vjp_writes_input_cotangents(arts, run_cli, data, tmp_path):
    path = arts["two"].path
    x, p, n = data
    d = tmp_path
    np.savez(d / "in.npz", **{"x": x, "params/w1": p["w1"], "params/w2": p["w2"], "n": n})
    rng = np.random.default_rng(1)
    cts = {"y": rng.standard_normal((5, 3)).astype(np.float32), "norm": np.float32(0.5)}
    np.savez(d / "ct.npz", **cts)
    res = run_cli("call", path, "--inputs", d / "in.npz", "--vjp", "--cotangents", d / "ct.npz", "-o", d / "g.npz",
                  "--json", "--no-cache")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert [c["name"] for c in report["vjp"]["cotangents"]] == ["x", "params/w1", "params/w2"]
    assert report["vjp"]["not_differentiable"] == ["n"]
    got = dict(np.load(d / "g.npz"))
    _, pullback = jax.vjp(lambda x, p: source(x, p, n), x, p)
    want_x, want_p = pullback({"y": cts["y"], "norm": cts["norm"], "n": np.zeros(5, jax.dtypes.float0)})
    assert sorted(got) == ["params/w1", "params/w2", "x"]
    np.testing.assert_allclose(got["x"], want_x, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["params/w1"], want_p["w1"], rtol=1e-5, atol=1e-6)


def test_call_vjp_needs_derivatives_and_cotangents_need_vjp(arts, run_cli):
    path = arts["none"].path
    res = run_cli("call", path, "--random", "--vjp", "--no-cache")
    assert res.exit_code == 2
    assert res.stderr == (f"error[usage]: {path}: function 'f' carries no derivatives (exported with vjp_order 0). "
                          f"Re-export it with --vjp-order 1 (or 'vjp_order: 1' in the spec).\n")
    res = run_cli("call", path, "--random", "--cotangents", "ct.npz")
    assert res.exit_code == 2
    assert "--cotangents gives the output cotangents of --vjp; add --vjp." in res.stderr
    res = run_cli("inspect", path)
    assert "  derivatives: none (export with --vjp-order 1 to differentiate it)\n" in res.stdout


@pytest.mark.slow
def test_export_vjp_order_option_inspect_and_verify(make_artifact, run_cli):
    path = make_artifact(MODEL, SPEC.replace("vjp_order: 1\n", ""))
    res = run_cli("export", "model.py:f", "-s", "spec.yaml", "-o", "v.jaxport", "--vjp-order", "1")
    assert res.exit_code == 0, res.stderr
    with open_artifact(path.parent / "v.jaxport") as art:
        assert art.manifest["functions"]["f"]["vjp_order"] == 1
    res = run_cli("inspect", "v.jaxport")
    assert "  derivatives: VJPs up to order 1 (jax.grad through jaxport.load, call --vjp)\n" in res.stdout
    report = verify("v.jaxport", dims={"b": [3]})
    assert report.passed, report.summary()
    (case,) = report.cases
    assert [o.name for o in case.outputs] == ["n", "norm", "y", "vjp(x)", "vjp(params/w1)", "vjp(params/w2)"]


def test_verify_catches_a_wrong_derivative(make_artifact):
    """A custom_vjp whose backward pass lies: the outputs agree, the stored derivative does not."""
    model = MODEL + '''
import jax

@jax.custom_vjp
def g(x):
    return x * 2

g.defvjp(lambda x: (x * 2, None), lambda _, ct: (ct * 3,))

def h(x):
    return g(x)
'''
    path = make_artifact(model, "jaxport: 1\nvjp_order: 1\nargs: ['f32[3]']\n", entry="model.py:h")
    # the live function differentiates to 2 (plain x * 2), the artifact's stored VJP to 3
    (path.parent / "live.py").write_text("def h(x):\n    return x * 2\n")
    report = verify(path, against="live.py:h")
    assert not report.passed
    failing = [o for c in report.cases for o in c.outputs if not o.passed]
    assert {o.name for o in failing} == {"vjp(x)"}


ORDERED = '''
import dataclasses
import jax
from jax._src import effects
from jax._src.interpreters import mlir
from jax.extend.core import Primitive

@dataclasses.dataclass(frozen=True)
class Logged(effects.Effect):
    def __str__(self):
        return "Logged"

effects.ordered_effects.add_type(Logged)
effects.lowerable_effects.add_type(Logged)
log_p = Primitive("log_for_test")
log_p.def_effectful_abstract_eval(lambda x: (x, {Logged()}))

def _lower(ctx, x):
    ctx.set_tokens_out(ctx.tokens_in)
    return [x]

mlir.register_lowering(log_p, _lower)

def f(x):
    return log_p.bind(x) * 2
'''


def test_ordered_effects_are_refused_at_export(make_artifact):
    with pytest.raises(jaxport.ExportError, match="^" + re.escape(
            "model.py:f: function 'f' has ordered effects: Logged. An artifact cannot carry them: JAX "
            "stores an effect by its Python class name, so the artifact would load only in a process that imports the "
            "code defining it, and the token its calls thread has no meaning elsewhere. Remove the effectful operation "
            "from the exported function (or make its effect unordered).") + "$"):
        make_artifact(ORDERED, "jaxport: 1\nargs: ['f32[3]']\n")
