"""Training state and returned pytrees as real models have them (issue 35, findings 1-3): Python numbers in a
``like:`` value are scalar inputs (flax's ``TrainState.step``), every returned custom node is recorded by path and
rebuilt by ``jaxport.load``, PRNG keys come back as keys, and a spec's mesh is in context while the function is
traced. Values are compared with ``jax.jit`` of the live function, state fed back twice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxport
from jaxport.errors import InputError
from tests.support import load_module

#: The console script, for calls in a fresh process (which never imported the model).
JAXPORT = str(Path(sys.executable).parent / "jaxport")

STATE = '''import collections

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


@struct.dataclass
class State:
    w: jax.Array
    step: int
    lr: float


STATE = State(w=np.zeros(3, np.float32), step=0, lr=0.5)


def train(s, x):
    return s.replace(w=s.w - s.lr * x, step=s.step + 1)


Info = collections.namedtuple("Info", ["position", "logdensity", "grad"])


def info(x):
    return Info(position=x * 2, logdensity=jnp.sum(x, axis=-1), grad=-x), jnp.max(x)
'''


@pytest.fixture
def state_module(tmp_path, monkeypatch):
    pytest.importorskip("flax")
    monkeypatch.chdir(tmp_path)
    Path("state.py").write_text(STATE)
    return load_module(tmp_path / "state.py", "state_under_test")


def test_a_python_int_in_a_like_value_is_an_input_and_the_state_feeds_back(state_module, run_cli):
    Path("spec.yaml").write_text("jaxport: 1\nargs:\n  - {like: state.py:STATE}\n  - f32[3]\n")
    assert run_cli("export", "state.py:train", "-s", "spec.yaml", "-o", "t.jaxport").exit_code == 0
    f = jaxport.load("t.jaxport")
    assert [(i.name, list(i.shape), i.dtype) for i in f.function_record.inputs] == [
        ("s/lr", [], "float32"), ("s/step", [], "int32"), ("s/w", [3], "float32"), ("x", [3], "float32")]
    live = jax.jit(state_module.train)
    s = state_module.State(w=jnp.ones(3), step=3, lr=0.25)
    x = jnp.asarray([1.0, 2.0, 3.0])
    want, got = s, s
    for _ in range(3):  # resumed at step 3, then fed back twice
        want, got = live(want, x), f(got, x)
        assert int(got.step) == int(want.step)
        np.testing.assert_allclose(np.asarray(got.w), np.asarray(want.w))
    assert int(got.step) == 6


def test_a_weak_python_float_keeps_the_arrays_dtype_as_jit_does():
    def scale(state, w):
        return w * state["lr"]

    spec = jaxport.Spec(args=[jaxport.like({"lr": 0.5}), "bf16[4]"])
    f = jaxport.export(scale, spec).load()
    w = jnp.ones(4, jnp.bfloat16)
    got, want = f({"lr": 0.25}, w), jax.jit(scale)({"lr": 0.25}, w)
    assert got.dtype == want.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_a_pinned_number_is_baked_and_another_value_refused():
    def step(state, x):
        return x * state["k"] + state["b"]

    spec = jaxport.Spec(args=[jaxport.like({"k": 3, "b": 1.0}, leaves={"k": {"static": True}}), "f32[2]"])
    f = jaxport.export(step, spec).load()
    assert [i.name for i in f.function_record.inputs] == ["state/b", "x"]
    x = jnp.asarray([1.0, 2.0])
    np.testing.assert_allclose(np.asarray(f({"k": 3, "b": 2.0}, x)), [5.0, 8.0])
    with pytest.raises(InputError) as e:
        f({"k": 4, "b": 2.0}, x)
    assert str(e.value) == ("argument state['k'] was fixed to 3 when the artifact was exported; got 4. Leave it out "
                            "(or pass None), or re-export with the new value.")
    with pytest.raises(jaxport.SpecError) as e:
        jaxport.export(step, jaxport.Spec(args=[jaxport.like({"k": np.ones(2)}, leaves={"k": {"static": True}}),
                                                "f32[2]"]))
    assert str(e.value).startswith("<jaxport.Spec>: leaves['k']: only a Python number (finite) can be pinned with "
                                   "{static: true}; the leaf of <in-memory>")
    assert str(e.value).endswith(" is array([1., 1.]), which stays an input. To draw it where the function is "
                                 "defined, give it a range under leaves ({shape: ..., dtype: ..., range: [LO, HI]}); "
                                 "to verify on real values, save them with jaxport.save_inputs and give them to "
                                 "verify --inputs.")


def test_a_namedtuple_output_exports_and_calls_without_registration(state_module, run_cli):
    Path("spec.yaml").write_text('jaxport: 1\ndims: [b]\nargs: ["f32[b, 3]"]\n')
    res = run_cli("export", "state.py:info", "-s", "spec.yaml", "-o", "i.jaxport")
    assert res.exit_code == 0, res.stderr
    tree = json.loads(Path("i.jaxport.manifest.json").read_text())["functions"]["info"]["output_tree"]
    assert tree == {"tuple": [{"node": "Info", "module": "state", "keys": ["position", "logdensity", "grad"],
                               "children": [{"output": 2}, {"output": 1}, {"output": 0}]}, {"output": 3}]}
    # a fresh process that never imported the model: the CLI calls it, jaxport.load returns plain dicts
    np.save("x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    call = subprocess.run([JAXPORT, "call", "i.jaxport", "--inputs", "x.npy",
                           "-o", "out.npz"], capture_output=True, text=True)
    assert call.returncode == 0, call.stderr
    with np.load("out.npz") as out:
        assert sorted(out) == ["0/grad", "0/logdensity", "0/position", "1"]
        np.testing.assert_array_equal(out["0/position"], np.arange(6, dtype=np.float32).reshape(2, 3) * 2)
    plain = subprocess.run([sys.executable, "-c", "import jaxport, numpy as np; out = jaxport.load('i.jaxport')"
                            "(np.ones((2, 3), np.float32)); print(type(out[0]).__name__, sorted(out[0]))"],
                           capture_output=True, text=True)
    assert plain.stdout.strip() == "dict ['grad', 'logdensity', 'position']", plain.stderr
    # with the model's module imported, the user's type comes back, its values those of jax.jit
    typed = subprocess.run([sys.executable, "-c", "import jaxport, numpy as np, state; out = jaxport.load("
                            "'i.jaxport')(np.ones((2, 3), np.float32)); print(type(out[0]) is state.Info, "
                            "out[0].logdensity.tolist())"], capture_output=True, text=True)
    assert typed.stdout.strip() == "True [3.0, 3.0]", typed.stderr


def test_load_after_an_in_process_export_rebuilds_any_node_exactly():
    class Opaque:  # a registered class that is neither a namedtuple nor a dataclass
        def __init__(self, a, tag):
            self.a, self.tag = a, tag

    jax.tree_util.register_pytree_with_keys(
        Opaque, lambda o: (((jax.tree_util.GetAttrKey("a"), o.a),), o.tag), lambda tag, kids: Opaque(kids[0], tag))

    def f(x):
        return Opaque(x + 1, "tagged")

    out = jaxport.export(f, jaxport.Spec(args=["f32[2]"])).load()(jnp.zeros(2))
    assert type(out) is Opaque and out.tag == "tagged"
    np.testing.assert_array_equal(np.asarray(out.a), [1.0, 1.0])


def test_a_key_inside_a_like_state_round_trips(tmp_path):
    def f(state, x):
        k1, k2 = jax.random.split(state["key"])
        return {"key": k2, "n": state["n"] + 1}, x + jax.random.uniform(k1)

    spec = jaxport.Spec(args=[{"key": "key[]", "n": "i32[]"}, "f32[3]"])
    loaded = jaxport.export(f, spec).load()
    live = jax.jit(f)
    state = want = {"key": jax.random.key(0), "n": jnp.int32(0)}
    x = jnp.zeros(3)
    for _ in range(2):
        (state, y), (want, wy) = loaded(state, x), live(want, x)
        assert jax.dtypes.issubdtype(state["key"].dtype, jax.dtypes.prng_key)
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(state["key"])),
                                      np.asarray(jax.random.key_data(want["key"])))
        np.testing.assert_array_equal(np.asarray(y), np.asarray(wy))


MESH = '''import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P


def f(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, P("data", "model"))
    return jnp.tanh(h) * len(jax.sharding.get_abstract_mesh().axis_names)
'''


def test_the_spec_mesh_is_in_context_while_tracing(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text(MESH)
    Path("spec.yaml").write_text('jaxport: 1\nmesh: {data: 2, model: 2}\ndims: {b: {max: 64}}\nargs:\n'
                                 '  - {shape: "2*b, 8", dtype: f32, sharding: [data, null]}\n'
                                 '  - {shape: "8, 4", dtype: f32, sharding: [null, model]}\n')
    res = run_cli("export", "m.py:f", "-s", "spec.yaml", "-o", "m.jaxport")
    assert res.exit_code == 0, res.stderr
    assert json.loads(Path("m.jaxport.manifest.json").read_text())["functions"]["f"]["nr_devices"] == 4
    x = np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32)
    w = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
    np.save("x.npy", x)
    np.save("w.npy", w)
    call = subprocess.run([JAXPORT, "call", "m.jaxport", "--inputs", "x.npy", "--inputs",
                           "w.npy", "--host-devices", "4", "-o", "y.npy"], capture_output=True, text=True)
    assert call.returncode == 0, call.stderr
    np.testing.assert_allclose(np.load("y.npy"), np.tanh(x @ w) * 2, rtol=1e-5, atol=1e-5)


def test_like_leaves_are_drawn_around_the_example_values():
    def norm(stats, x):
        return (x - stats["mean"]) / jnp.sqrt(stats["var"])

    stats = {"mean": np.zeros(4, np.float32), "var": np.ones(4, np.float32), "count": 3}
    f = jaxport.export(norm, jaxport.Spec(args=[jaxport.like(stats), "f32[4]"])).load()
    ranges = {i.name: i.range for i in f.function_record.inputs}
    assert ranges == {"stats/count": (3, 4), "stats/mean": (0.0, 0.1), "stats/var": (0.9, 1.1), "x": None}
    drawn = f.random_inputs(seed=3)
    assert (drawn["stats/var"] > 0).all()
    assert np.isfinite(np.asarray(f(*[{"mean": drawn["stats/mean"], "var": drawn["stats/var"],
                                       "count": drawn["stats/count"]}, drawn["x"]]))).all()


HOSTILE_LIKES = '''import numpy as np

CYCLE = {"w": np.zeros(2, np.float32)}
CYCLE["self"] = CYCLE
DEEP = np.zeros(2, np.float32)
for _ in range(3000):
    DEEP = [DEEP]
KEYS = {1: np.zeros(2, np.float32), "1": np.zeros(2, np.float32)}
MANY = {f"k{i}": 1.0 for i in range(5000)}


def f(v):
    return 0.0
'''


@pytest.mark.parametrize(("name", "message"), [
    ("CYCLE", "m.py:CYCLE['self']: contains itself (a cycle), so it has no finite structure. Give a value without "
              "the cycle."),
    ("DEEP", "m.py:DEEP[0][0][0][0][0][0]...[0][0][0][0]: is nested more than 29 levels deep, which a 'like:' "
             "argument does not take (the artifact's manifest nests at most 64 levels). Flatten the value."),
    ("KEYS", "m.py:KEYS: has the keys 1 and '1', which name one input ('1'). Rename one."),
    ("MANY", "m.py:MANY: has more than 4096 leaves, which a 'like:' argument does not take (JAX's export time grows "
             "with the square of the inputs). Bind large trees of weights with 'bind:' instead, or split the value "
             "into several arguments."),
])
def test_like_values_jax_cannot_take_are_spec_errors(tmp_path, monkeypatch, run_cli, name, message):
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text(HOSTILE_LIKES)
    Path("spec.yaml").write_text(f"jaxport: 1\nargs:\n  - {{like: m.py:{name}}}\n")
    res = run_cli("export", "m.py:f", "-s", "spec.yaml", "-o", "a.jaxport")
    assert (res.exit_code, res.stderr) == (3, f"error[spec]: spec.yaml:3: {message}\n")
    assert not Path("a.jaxport").exists()
