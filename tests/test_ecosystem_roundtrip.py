"""State that goes round: a step function taking and returning a library's state (numpyro's SVI state, optax's
``inject_hyperparams`` and ``MultiSteps`` states, a flax ``TrainState``, an equinox module's ``State``), exported with a
``like:`` spec, loaded in a fresh process (which has only the manifest to rebuild what the program returns) and called
three times, each time on what the previous call returned; the values match ``jax.jit`` of the live function run the
same way. The nodes a library registers without keys (numpyro's ``OptimizerState``, equinox's ``State``) come back
in the plain form the artifact takes them in. ``verify`` passes on the optimizer and SVI steps with no range written:
the hyperparameters in the state (Adam's ``b2 = 0.999``) keep their example's value."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import assert_steps, module_writer

#: Real libraries, exported and run in a second process (make test runs them).
pytestmark = pytest.mark.slow

STEPS = '''import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import optax
from flax.training import train_state
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.autoguide import AutoNormal

rng = np.random.default_rng(0)
PARAMS = {"w1": rng.normal(size=(4, 8)).astype(np.float32), "w2": rng.normal(size=(8, 2)).astype(np.float32)}
X = rng.normal(size=(5, 4)).astype(np.float32)
Y = rng.normal(size=(5, 2)).astype(np.float32)


def loss_fn(params, x, y):
    return jnp.mean((jnp.tanh(x @ params["w1"]) @ params["w2"] - y) ** 2)


# optax: Adam with its hyperparameters in the state (b1, b2, eps, eps_root, learning_rate are state leaves)
INJECTED = optax.inject_hyperparams(optax.adam)(learning_rate=1e-2)
INJECTED_STATE = INJECTED.init(PARAMS)


def injected_step(params, opt_state, x, y):
    updates, opt_state = INJECTED.update(jax.grad(loss_fn)(params, x, y), opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss_fn(params, x, y)  # the loss after the update: NaN wherever the update is


# optax: gradients accumulated over two steps
MULTI = optax.MultiSteps(optax.adam(1e-2), every_k_schedule=2)
MULTI_STATE = MULTI.init(PARAMS)


def multi_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = MULTI.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


# flax: a TrainState (its apply_fn and tx are static fields, its step a Python int)
TRAIN_STATE = train_state.TrainState.create(apply_fn=None, params=PARAMS, tx=optax.sgd(0.1, momentum=0.9))


def train_step(state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(state.params, x, y)
    return state.apply_gradients(grads=grads), loss


# equinox: a BatchNorm's running statistics in an eqx.nn.State, a node registered without keys
class Net(eqx.Module):
    linear: eqx.nn.Linear
    norm: eqx.nn.BatchNorm

    def __call__(self, x, state):
        return self.norm(self.linear(x), state)


NET, NET_STATE = eqx.nn.make_with_state(
    lambda: Net(eqx.nn.Linear(4, 2, key=jax.random.key(0)), eqx.nn.BatchNorm(2, axis_name="batch", mode="batch")))()


def norm_step(state, x):
    return jax.vmap(NET, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)


# numpyro: SVI with an AutoNormal guide; its optimizer state holds jax.example_libraries' OptimizerState
DATA = rng.normal(1.0, 0.5, size=(20,)).astype(np.float32)


def model(data):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("n", data.shape[0]):
        numpyro.sample("obs", dist.Normal(mu, sigma), obs=data)


SVI_ = SVI(model, AutoNormal(model), numpyro.optim.Adam(1e-2), Trace_ELBO())
SVI_STATE = SVI_.init(jax.random.PRNGKey(0), DATA)


def svi_step(svi_state, data):
    return SVI_.update(svi_state, data)


#: name: (function, spec args, first arguments, next arguments from the arguments and what the step returned)
CASES = {
    "injected": (injected_step, "[{like: steps.py:PARAMS}, {like: steps.py:INJECTED_STATE}, 'f32[b, 4]', 'f32[b, 2]']",
                 (PARAMS, INJECTED_STATE, X, Y), lambda a, out: (out[0], out[1], *a[2:])),
    "multi": (multi_step, "[{like: steps.py:PARAMS}, {like: steps.py:MULTI_STATE}, 'f32[b, 4]', 'f32[b, 2]']",
              (PARAMS, MULTI_STATE, X, Y), lambda a, out: (out[0], out[1], *a[2:])),
    "train": (train_step, "[{like: steps.py:TRAIN_STATE}, 'f32[b, 4]', 'f32[b, 2]']", (TRAIN_STATE, X, Y),
              lambda a, out: (out[0], *a[1:])),
    "norm": (norm_step, "[{like: steps.py:NET_STATE}, 'f32[5, 4]']", (NET_STATE, X), lambda a, out: (out[1], a[1])),
    "svi": (svi_step, "[{like: steps.py:SVI_STATE}, 'f32[20]']", (SVI_STATE, DATA), lambda a, out: (out[0], a[1])),
}
#: Which argument of a step is the state (the others' is the first).
STATE_AT = {"injected": 1, "multi": 1}
'''

#: Run in a fresh process: each artifact loaded, called three times on what it returned, against jax.jit.
FRESH = '''import json, sys
import jax, numpy as np
import jaxport
import steps
from jaxport.artifact.calltree import key_name

def by_path(tree):
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    out = {}
    for path, leaf in flat:
        if jax.dtypes.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out["/".join(key_name(k) for k in path)] = np.asarray(leaf)
    return out

report = {}
for name, (fn, _, first, advance) in steps.CASES.items():
    loaded, live = jaxport.load(f"{name}.jaxport"), jax.jit(fn)
    got_args = want_args = first
    worst = 0.0
    for step in range(3):
        got, want = loaded(*got_args), live(*want_args)
        g, w = by_path(got), by_path(want)
        assert sorted(g) == sorted(w), (name, step, sorted(g), sorted(w))
        for k in w:
            np.testing.assert_allclose(g[k], w[k], rtol=1e-5, atol=1e-6, err_msg=f"{name} step {step}: {k}")
        got_args, want_args = advance(got_args, got), advance(want_args, want)
    report[name] = type(advance(got_args, got)[steps.STATE_AT.get(name, 0)]).__name__
json.dump(report, sys.stdout)
'''


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """steps.py and each case exported from it with a like: spec (b at most 64), in one directory."""
    from click.testing import CliRunner
    from jaxport_cli.main import cli

    d = tmp_path_factory.mktemp("roundtrip")
    (d / "steps.py").write_text(STEPS)
    mp = pytest.MonkeyPatch()
    live = module_writer(d, mp)("steps", {"steps.py": STEPS})
    try:
        for name, (fn, args, _, _) in live.CASES.items():
            dims = "dims: {b: {max: 64}}\n" if "b," in args else ""
            (d / f"{name}.yaml").write_text(f"jaxport: 1\n{dims}args: {args}\n")
            res = CliRunner().invoke(cli, ["export", f"steps.py:{fn.__name__}", "-s", f"{name}.yaml", "-o",
                                           f"{name}.jaxport"], catch_exceptions=False)
            assert res.exit_code == 0, res.stderr
        yield d, live
    finally:
        mp.undo()


def test_each_state_goes_round_in_a_fresh_process(exported):
    """Only the manifest rebuilds what comes back: a namedtuple, a dataclass it can build and dicts are the user's
    types (numpyro's SVIState, optax's states); a node it cannot build (a TrainState, whose apply_fn and tx are not
    in the artifact; an eqx.nn.State) comes back as the dict it is taken in, and goes back in as it is."""
    d, _ = exported
    res = subprocess.run([sys.executable, "-c", FRESH], cwd=d, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout) == {"injected": "InjectStatefulHyperparamsState", "multi": "MultiStepsState",
                                      "train": "dict", "norm": "dict", "svi": "SVIState"}


def test_each_state_goes_round_after_the_export_in_this_process(exported):
    """In the exporting process the returned value's own tree structure rebuilds every node exactly: the state fed
    back is the library's own, and so is what each step returns."""
    import jaxport

    d, live = exported
    for name, (fn, _, first, advance) in live.CASES.items():
        out = assert_steps(jaxport.load(d / f"{name}.jaxport"), fn, first, advance)
        at = live.STATE_AT.get(name, 0)
        assert type(advance(first, out)[at]) is type(first[at]), name


@pytest.mark.parametrize("name", ["injected", "svi"])
def test_verify_passes_on_an_optimizer_and_an_svi_step_with_no_range_written(exported, name, run_cli, monkeypatch):
    """The state's scalars keep their example's value (Adam's b2 = 0.999: drawn above 1, every updated parameter and
    the loss after the update were NaN on both sides, an inconclusive verify of a correct artifact)."""
    d, _ = exported
    monkeypatch.chdir(d)
    res = run_cli("verify", f"{name}.jaxport", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["passed"] and not any(o["inconclusive"] for c in report["cases"] for o in c["outputs"])
    if name == "injected":
        inspected = run_cli("inspect", "injected.jaxport")
        assert "opt_state/hyperparams/b2" in inspected.stdout
        row = next(line for line in inspected.stdout.splitlines() if "opt_state/hyperparams/b2" in line)
        assert row.split("│")[2].strip() == "0.999 (example)"
