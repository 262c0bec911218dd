"""Functions that take and return state, from the libraries' own code: a haiku ResNet18 with its BatchNorm state, haiku
dropout with typed and legacy PRNG keys, numpyro's potential energy and ``Predictive``, blackjax's NUTS and HMC
steps (``HMCState`` in, ``HMCState`` and ``NUTSInfo`` namedtuples out), a flax ``TrainState`` train step (its Python
``step=0``) and an nnx split/merge train step (an ``Rngs`` key in the state). Each is exported, inspected, called at
two sizes of its symbolic dimension with the returned state fed back twice (values compared with ``jax.jit`` of the
live function at every step), verified and, with IREE installed, compiled and called by IREE."""

from __future__ import annotations

import numpy as np
import pytest

import jaxport
from jaxport.errors import PlatformError
from tests.support import (
    assert_iree_matches,
    assert_same_tree,
    assert_steps,
    exported_manifest,
    module_writer,
    tree_by_path,
    verified,
)

#: Real models from haiku, numpyro, blackjax, flax and nnx: each exports, calls at two sizes and verifies.
pytestmark = pytest.mark.slow


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    return module_writer(tmp_path, monkeypatch)


def _inputs(manifest: dict, function: str) -> dict[str, tuple[str, list]]:
    return {i["name"]: (i["dtype"], i["shape"]) for i in manifest["functions"][function]["inputs"]}


# --- haiku -----------------------------------------------------------------------------------------------------------

RESNET = '''import haiku as hk, jax, numpy as np


def _forward(x, is_training):
    # ResNet18's layout (four groups of two basic blocks) with a few channels, so the test stays quick
    net = hk.nets.ResNet(blocks_per_group=(2, 2, 2, 2), num_classes=10, bottleneck=False,
                         channels_per_group=(4, 8, 8, 16), use_projection=(False, True, True, True),
                         initial_conv_config={"output_channels": 4}, name="resnet18")
    return net(x, is_training)


NET = hk.transform_with_state(_forward)
PARAMS, STATE = jax.jit(NET.init, static_argnums=2)(jax.random.key(0), np.zeros((2, 16, 16, 3), np.float32), True)


def train_forward(params, state, x):
    return NET.apply(params, state, None, x, True)  # the logits and the BatchNorm state after this batch
'''
RESNET_SPEC = "jaxport: 1\ndims: {b: {max: 8}}\nargs:\n  - {like: resnet.py:STATE}\n  - 'f32[b, 16, 16, 3]'\n"


def test_haiku_resnet18_with_its_batchnorm_state(workdir, run_cli, tmp_path):
    live = workdir("ecosystem_haiku_resnet", {"resnet.py": RESNET, "spec.yaml": RESNET_SPEC})
    manifest = exported_manifest(run_cli, "resnet.py:train_forward", "-s", "spec.yaml",
                                 "--bind", "params=resnet.py:PARAMS", "-o", "r.jaxport")
    inputs = _inputs(manifest, "train_forward")
    ema = "state/resnet18/~/block_group_0/~/block_0/~/batchnorm_0/~/var_ema"
    assert inputs[f"{ema}/average"] == ("float32", [1, 1, 1, 4]) and inputs[f"{ema}/counter"] == ("int32", [])
    assert inputs["x"] == ("float32", ["b", 16, 16, 3]) and len(inputs) == 1 + 3 * len(live.STATE)
    loaded = jaxport.load("r.jaxport")
    rng = np.random.default_rng(0)
    for b in (2, 5):
        x = rng.normal(size=(b, 16, 16, 3)).astype(np.float32)
        # the state haiku returned, fed back: its moving averages advance as jit's do
        assert_steps(loaded, lambda state, x: live.train_forward(live.PARAMS, state, x), (live.STATE, x),
                     lambda args, out: (out[1], args[1]), rtol=1e-3, atol=1e-4)
    verified(run_cli, "r.jaxport")
    assert_iree_matches("r.jaxport", (live.STATE, np.ones((3, 16, 16, 3), np.float32)), tmp_path / "iree",
                        rtol=1e-4, atol=1e-4)


DROPOUT = '''import haiku as hk, jax, numpy as np


def _forward(x):
    h = jax.nn.relu(hk.Linear(16)(x))
    return hk.Linear(3)(hk.dropout(hk.next_rng_key(), 0.5, h))


NET = hk.transform(_forward)
PARAMS = NET.init(jax.random.key(0), np.zeros((1, 4), np.float32))


def apply(params, key, x):
    return NET.apply(params, key, x)
'''


@pytest.mark.parametrize(("key_spec", "dtype", "make_key"), [
    ("key[]", "key<fry>", lambda seed: __import__("jax").random.key(seed)),
    ("u32[2]", "uint32", lambda seed: __import__("jax").random.PRNGKey(seed)),
], ids=["typed", "legacy"])
def test_haiku_dropout_with_a_prng_key(workdir, run_cli, tmp_path, key_spec, dtype, make_key):
    import jax

    live = workdir("ecosystem_haiku_dropout", {
        "drop.py": DROPOUT, "spec.yaml": f"jaxport: 1\ndims: {{b: {{max: 16}}}}\nargs: ['{key_spec}', 'f32[b, 4]']\n"})
    manifest = exported_manifest(run_cli, "drop.py:apply", "-s", "spec.yaml", "--bind", "params=drop.py:PARAMS",
                         "-o", "d.jaxport")
    assert _inputs(manifest, "apply") == {"key": (dtype, [] if dtype != "uint32" else [2]), "x": ("float32", ["b", 4])}
    loaded = jaxport.load("d.jaxport")
    x = np.random.default_rng(1).normal(size=(16, 4)).astype(np.float32)
    outs = []
    for b, seed in ((1, 1), (16, 2), (16, 3)):
        key = make_key(seed)
        got = loaded(key, x[:b])
        np.testing.assert_allclose(np.asarray(got), np.asarray(jax.jit(live.apply)(live.PARAMS, key, x[:b])),
                                   rtol=1e-6, atol=1e-6)
        outs.append(np.asarray(got))
    assert not np.allclose(outs[1], outs[2])  # the key is an input, not baked: another key drops other units
    verified(run_cli, "d.jaxport")
    assert_iree_matches("d.jaxport", (make_key(4), x[:5]), tmp_path / "iree")


# --- numpyro ---------------------------------------------------------------------------------------------------------

REGRESSION = '''import jax, numpy as np, numpyro, numpyro.distributions as dist
from numpyro.infer import Predictive
from numpyro.infer.util import potential_energy


def model(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([x.shape[1]]).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    numpyro.sample("obs", dist.Normal(x @ w + b, sigma), obs=y)


# a point in the unconstrained space (sigma's log), as an MCMC kernel sees it
PARAMS = {"w": np.array([0.5, -1.0, 2.0], np.float32), "b": np.float32(0.3), "sigma": np.float32(-0.2)}
# four posterior draws, as mcmc.get_samples() returns them
SAMPLES = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "b": np.linspace(-1, 1, 4, dtype=np.float32),
           "sigma": np.full(4, 0.5, np.float32)}


def energy_and_grad(params, x, y):
    return jax.value_and_grad(lambda p: potential_energy(model, (x, y), {}, p))(params)


def predict(key, samples, x):
    return Predictive(model, posterior_samples=samples)(key, x)["obs"]
'''
REGRESSION_SPEC = ("jaxport: 1\ndims: {n: {max: 256}}\nargs:\n  - {like: regress.py:PARAMS}\n  - 'f32[n, 3]'\n"
                   "  - 'f32[n]'\n")


def test_numpyro_potential_energy_and_its_gradient(workdir, run_cli, tmp_path):
    live = workdir("ecosystem_numpyro_energy", {"regress.py": REGRESSION, "spec.yaml": REGRESSION_SPEC})
    manifest = exported_manifest(run_cli, "regress.py:energy_and_grad", "-s", "spec.yaml", "-o", "e.jaxport")
    assert _inputs(manifest, "energy_and_grad") == {
        "params/b": ("float32", []), "params/sigma": ("float32", []), "params/w": ("float32", [3]),
        "x": ("float32", ["n", 3]), "y": ("float32", ["n"])}
    loaded = jaxport.load("e.jaxport")
    assert loaded.output_names == ["0", "1/b", "1/sigma", "1/w"]
    rng = np.random.default_rng(2)
    for n in (7, 200):
        x = rng.normal(size=(n, 3)).astype(np.float32)
        y = (x @ np.array([1.0, 0.0, -1.0], np.float32) + 0.1 * rng.normal(size=n)).astype(np.float32)
        # a few gradient steps on the unconstrained point, each side following its own gradient
        assert_steps(loaded, live.energy_and_grad, (live.PARAMS, x, y),
                     lambda args, out: ({k: v - 1e-3 * out[1][k] for k, v in args[0].items()}, *args[1:]),
                     rtol=1e-4, atol=1e-4)
    verified(run_cli, "e.jaxport")
    x = np.ones((4, 3), np.float32)
    assert_iree_matches("e.jaxport", (live.PARAMS, x, np.zeros(4, np.float32)), tmp_path / "iree", rtol=1e-4)


def test_numpyro_predictive_over_posterior_samples(workdir, tmp_path):
    import jax

    live = workdir("ecosystem_numpyro_predictive", {"regress.py": REGRESSION})
    # Predictive counts the draws with int(): their number stays static, the data's length symbolic
    spec = jaxport.Spec(args=["key[]", jaxport.like(live.SAMPLES), "f32[n, 3]"], dims={"n": {"max": 256}})
    result = jaxport.export(live.predict, spec, "p.jaxport")
    loaded = result.load()
    assert loaded.input_names == ["key", "samples/b", "samples/sigma", "samples/w", "x"]
    for n, seed in ((1, 0), (100, 1)):
        x, key = np.random.default_rng(n).normal(size=(n, 3)).astype(np.float32), jax.random.key(seed)
        got = loaded(key, live.SAMPLES, x)
        assert np.asarray(got).shape == (4, n)
        np.testing.assert_allclose(np.asarray(got), np.asarray(jax.jit(live.predict)(key, live.SAMPLES, x)),
                                   rtol=1e-5, atol=1e-5)
    report = jaxport.verify_artifact("p.jaxport", against="regress.py:predict", spec=spec)
    assert report.passed
    assert_iree_matches("p.jaxport", (jax.random.key(3), live.SAMPLES, np.ones((5, 3), np.float32)),
                        tmp_path / "iree")


# --- blackjax --------------------------------------------------------------------------------------------------------

MCMC = '''import blackjax, jax.numpy as jnp, numpy as np


def logdensity(x):
    return -0.5 * jnp.sum(x ** 2) - 0.1 * jnp.sum(x ** 4)


STATE = blackjax.nuts.init(np.zeros(5, np.float32), logdensity)  # HMCState(position, logdensity, logdensity_grad)


def nuts_step(key, state):
    kernel = blackjax.nuts(logdensity, step_size=0.3, inverse_mass_matrix=jnp.ones_like(state.position))
    return kernel.step(key, state)  # (HMCState, NUTSInfo), NUTSInfo holding two IntegratorStates


def hmc_step(key, state):
    kernel = blackjax.hmc(logdensity, step_size=0.3, inverse_mass_matrix=jnp.ones_like(state.position),
                          num_integration_steps=5)
    return kernel.step(key, state)  # (HMCState, HMCInfo)
'''
MCMC_SPEC = "jaxport: 1\ndims: {d: {max: 16}}\nargs:\n  - 'key[]'\n  - {like: mcmc.py:STATE, sizes: {5: d}}\n"


def _state(live, d: int):
    return live.STATE._replace(position=np.linspace(-1, 1, d, dtype=np.float32),
                               logdensity=np.float32(live.logdensity(np.linspace(-1, 1, d, dtype=np.float32))),
                               logdensity_grad=np.zeros(d, np.float32))


def _chain(args, out):
    import jax

    return jax.random.fold_in(args[0], 1), out[0]


def _iree_refuses_blackjax(path: str, fname: str, args: tuple, cache_dir) -> None:
    """IREE 3.13 cannot compile blackjax's steps (HMC: its stream partitioning reports a "circular dependency" in the
    integrator's while loop; NUTS: iree-compile crashes): the load refuses it as a platform error (exit 10) naming
    IREE's failure and the JAX runtime. When IREE compiles them, this fails: compare the values then
    (``assert_iree_matches``)."""
    pytest.importorskip("iree.compiler")
    with pytest.raises(PlatformError) as e:
        jaxport.load(path, runtime="iree", cache_dir=cache_dir)(*args)
    assert str(e.value).startswith(f"{path}: function {fname!r}: IREE cannot compile the program for inputs of shapes ")
    assert ("circular dependency" in str(e.value) if fname == "hmc_step"
            else "iree-compile crashed (SIGSEGV, a bug of IREE's compiler)" in str(e.value))
    assert str(e.value).endswith("; run it with the JAX runtime (--runtime jax).")


def test_blackjax_nuts_step_returns_its_namedtuples(workdir, run_cli, tmp_path):
    """No ``register_namedtuple_serialization``: the outputs' namedtuples are recorded by path, rebuilt by load, and
    the command line calls the artifact."""
    import blackjax
    import jax

    live = workdir("ecosystem_blackjax_mcmc", {"mcmc.py": MCMC, "spec.yaml": MCMC_SPEC})
    manifest = exported_manifest(run_cli, "mcmc.py:nuts_step", "-s", "spec.yaml", "-o", "n.jaxport")
    assert _inputs(manifest, "nuts_step") == {"key": ("key<fry>", []), "state/logdensity": ("float32", []),
                                              "state/logdensity_grad": ("float32", ["d"]),
                                              "state/position": ("float32", ["d"])}
    loaded = jaxport.load("n.jaxport")
    assert "1/trajectory_leftmost_state/momentum" in loaded.output_names
    for d in (5, 12):
        out = assert_steps(loaded, live.nuts_step, (jax.random.key(d), _state(live, d)), _chain)
        assert isinstance(out[0], blackjax.mcmc.hmc.HMCState) and isinstance(out[1], blackjax.mcmc.nuts.NUTSInfo)
        assert type(out[1].trajectory_leftmost_state).__name__ == "IntegratorState"
    # the command line: the state from one file of its leaf paths, the key from a seed
    state = _state(live, 9)
    np.savez("state.npz", **{name: value for name, (_, value) in tree_by_path(state).items()})
    res = run_cli("call", "n.jaxport", "--inputs", "key=seed:4", "--inputs", "state=state.npz", "-o", "out.npz",
                  "--no-cache")
    assert res.exit_code == 0, res.stderr
    want = tree_by_path(jax.jit(live.nuts_step)(jax.random.key(4), state))
    with np.load("out.npz") as out:
        assert sorted(out.files) == sorted(want)
        for name, (_, value) in want.items():
            np.testing.assert_allclose(out[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    verified(run_cli, "n.jaxport")
    _iree_refuses_blackjax("n.jaxport", "nuts_step", (jax.random.key(1), _state(live, 6)), tmp_path / "iree")


def test_blackjax_hmc_step_from_python(workdir, tmp_path):
    import blackjax
    import jax

    live = workdir("ecosystem_blackjax_hmc", {"mcmc.py": MCMC})
    spec = jaxport.Spec(args=["key[]", jaxport.like(live.STATE, sizes={5: "d"})], dims={"d": {"max": 16}})
    loaded = jaxport.export(live.hmc_step, spec, "h.jaxport").load()
    for d in (2, 16):
        out = assert_steps(loaded, live.hmc_step, (jax.random.key(0), _state(live, d)), _chain)
        assert isinstance(out[1], blackjax.mcmc.hmc.HMCInfo)
    report = jaxport.verify_artifact("h.jaxport", against="mcmc.py:hmc_step", spec=spec)
    assert report.passed
    _iree_refuses_blackjax("h.jaxport", "hmc_step", (jax.random.key(2), _state(live, 3)), tmp_path / "iree")


# --- flax TrainState, nnx split/merge --------------------------------------------------------------------------------

TRAINER = '''import jax, jax.numpy as jnp, numpy as np, optax
from flax import linen as nn
from flax.training import train_state


class Mlp(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(nn.tanh(nn.Dense(8)(x)))


MODEL = Mlp()
# TrainState.create sets step=0, a Python int
STATE = train_state.TrainState.create(apply_fn=MODEL.apply, params=MODEL.init(jax.random.key(0), np.zeros((1, 4))),
                                      tx=optax.adam(1e-2))


def train_step(state, x, y):
    def loss_fn(params):
        return jnp.mean((state.apply_fn(params, x) - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss
'''
TRAINER_SPEC = ("jaxport: 1\ndims: {b: {max: 64}}\nargs:\n  - {like: trainer.py:STATE}\n  - 'f32[b, 4]'\n"
                "  - 'f32[b, 2]'\n")


def _batch(b: int, seed: int):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(b, 4)).astype(np.float32), rng.normal(size=(b, 2)).astype(np.float32)


def test_flax_train_state_resumed_keeps_counting(workdir, run_cli, tmp_path):
    """TrainState's Python ``step`` is an input (weak i32, as jit traces it): a state resumed at step 3 comes back at
    step 4, and what comes back is a TrainState that feeds back."""
    from flax.training.train_state import TrainState

    live = workdir("ecosystem_flax_train_state", {"trainer.py": TRAINER, "spec.yaml": TRAINER_SPEC})
    manifest = exported_manifest(run_cli, "trainer.py:train_step", "-s", "spec.yaml", "-o", "t.jaxport")
    assert _inputs(manifest, "train_step")["state/step"] == ("int32", [])
    loaded = jaxport.load("t.jaxport")
    resumed = live.STATE.replace(step=3)
    for b in (3, 40):
        out = assert_steps(loaded, live.train_step, (resumed, *_batch(b, b)), lambda args, out: (out[0], *args[1:]))
        assert isinstance(out[0], TrainState) and int(out[0].step) == 6
    assert int(loaded(live.STATE.replace(step=7), *_batch(2, 0))[0].step) == 8
    # the command line: the inputs saved by path from the pytrees themselves
    x, y = _batch(5, 1)
    jaxport.save_inputs("in.npz", state=resumed, x=x, y=y)
    res = run_cli("call", "t.jaxport", "--inputs", "in.npz", "-o", "out.npz", "--no-cache")
    assert res.exit_code == 0, res.stderr
    want = tree_by_path(live.train_step(resumed, x, y))
    with np.load("out.npz") as out:
        assert out["0/step"] == 4 and sorted(out.files) == sorted(want)
        for name, (_, value) in want.items():
            np.testing.assert_allclose(out[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    verified(run_cli, "t.jaxport")
    assert_iree_matches("t.jaxport", (resumed, x, y), tmp_path / "iree")


NNX = '''import jax.numpy as jnp, optax
from flax import nnx


class Net(nnx.Module):
    def __init__(self, rngs):
        self.l1 = nnx.Linear(4, 8, rngs=rngs)
        self.drop = nnx.Dropout(0.2, rngs=rngs)  # its Rngs stream: a PRNG key in the state
        self.l2 = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x):
        return self.l2(self.drop(nnx.relu(self.l1(x))))


_model = Net(nnx.Rngs(0))
GRAPHDEF, STATE = nnx.split((_model, nnx.Optimizer(_model, optax.adam(1e-2), wrt=nnx.Param)))


def train_step(state, x, y):
    model, optimizer = nnx.merge(GRAPHDEF, state)
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return nnx.state((model, optimizer)), loss
'''
NNX_SPEC = "jaxport: 1\ndims: {b: {max: 64}}\nargs:\n  - {like: nnx_step.py:STATE}\n  - 'f32[b, 4]'\n  - 'f32[b, 2]'\n"


def test_nnx_split_merge_train_step_with_its_rng_key(workdir, run_cli, tmp_path):
    """The state holds the dropout stream's typed key and count: the key comes back as a key, the count advances."""
    from flax import nnx

    live = workdir("ecosystem_nnx_train_step", {"nnx_step.py": NNX, "spec.yaml": NNX_SPEC})
    manifest = exported_manifest(run_cli, "nnx_step.py:train_step", "-s", "spec.yaml", "-o", "s.jaxport")
    inputs = _inputs(manifest, "train_step")
    assert inputs["state/0/drop/rngs/key/value"] == ("key<fry>", [])
    assert inputs["state/0/drop/rngs/count/value"] == ("uint32", [])
    loaded = jaxport.load("s.jaxport")
    for b in (1, 33):
        out = assert_steps(loaded, live.train_step, (live.STATE, *_batch(b, b)), lambda args, out: (out[0], *args[1:]))
        assert isinstance(out[0], nnx.State) and int(out[0][0]["drop"]["rngs"]["count"][...]) == 3
    verified(run_cli, "s.jaxport")
    assert_iree_matches("s.jaxport", (live.STATE, *_batch(4, 0)), tmp_path / "iree")


def test_the_steps_compare_the_returned_structure(workdir):
    """The helper itself: a dict of the paths is not the user's namedtuple."""
    import jax

    live = workdir("ecosystem_blackjax_structure", {"mcmc.py": MCMC})
    state = _state(live, 3)
    as_dict = {"position": state.position, "logdensity": state.logdensity, "logdensity_grad": state.logdensity_grad}
    assert_same_tree(as_dict, state, structure=False)
    with pytest.raises(AssertionError):
        assert_same_tree(as_dict, state)
    with pytest.raises(AssertionError):
        assert_same_tree(jax.tree_util.tree_map(lambda a: a + 1, state), state)
