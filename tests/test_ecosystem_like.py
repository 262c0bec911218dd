"""Arguments shaped like a Python value (``like:``, ``jaxport.like``): an optax train step with its optimizer state
as a free input, a jraph ``GraphsTuple`` over padded graphs, an equinox module and a flax struct; inputs and
outputs named by key path, called back with the same pytree, verified; values compared with the live function."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import SpecError

TRAIN = '''import jax, jax.numpy as jnp, numpy as np, optax

rng = np.random.default_rng(0)
PARAMS = {"w1": rng.normal(size=(4, 8)).astype(np.float32), "w2": rng.normal(size=(8, 2)).astype(np.float32)}
OPT = optax.adamw(1e-2)
OPT_STATE = OPT.init(PARAMS)


def loss_fn(params, x, y):
    return jnp.mean((jnp.tanh(x @ params["w1"]) @ params["w2"] - y) ** 2)


def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = OPT.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
'''
TRAIN_SPEC = """jaxport: 1
dims: {b: {max: 64}}
args:
  - {like: train.py:PARAMS}
  - {like: train.py:OPT_STATE}
  - "f32[b, 4]"
  - "f32[b, 2]"
"""
OPT_INPUTS = ["params/w1", "params/w2", "opt_state/0/count", "opt_state/0/mu/w1", "opt_state/0/mu/w2",
              "opt_state/0/nu/w1", "opt_state/0/nu/w2", "x", "y"]


def _module(path: Path, name: str, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _same(actual, expected) -> None:
    import jax

    got, want = jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.fixture
def train(tmp_path, monkeypatch):
    pytest.importorskip("optax")
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(TRAIN)
    Path("spec.yaml").write_text(TRAIN_SPEC)
    return _module(tmp_path / "train.py", "ecosystem_optax_train", monkeypatch)


def test_optax_train_step_from_the_command_line(train, run_cli):
    res = run_cli("export", "train.py:train_step", "-s", "spec.yaml", "-o", "t.jaxport")
    assert res.exit_code == 0, res.stderr
    loaded = jaxport.load("t.jaxport")
    assert loaded.input_names == OPT_INPUTS
    assert loaded.output_names == ["0/w1", "0/w2", "1/0/count", "1/0/mu/w1", "1/0/mu/w2", "1/0/nu/w1",
                                   "1/0/nu/w2", "2"]
    rng = np.random.default_rng(1)
    for b in (3, 17):
        x, y = rng.normal(size=(b, 4)).astype(np.float32), rng.normal(size=(b, 2)).astype(np.float32)
        out = loaded(train.PARAMS, train.OPT_STATE, x, y)  # the optax state itself
        want = train.train_step(train.PARAMS, train.OPT_STATE, x, y)
        _same(out, want)
        # what the artifact returned (the state as the dicts and lists of its paths), fed back: a second step
        _same(loaded(out[0], out[1], x, y), train.train_step(want[0], want[1], x, y))
    res = run_cli("verify", "t.jaxport", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["passed"] and report["spec"]["differences"] == []


def test_optax_train_step_call_takes_the_inputs_by_path(train, run_cli):
    assert run_cli("export", "train.py:train_step", "-s", "spec.yaml", "-o", "t.jaxport").exit_code == 0
    x, y = np.ones((2, 4), np.float32), np.zeros((2, 2), np.float32)
    arrays = {"params/w1": train.PARAMS["w1"], "params/w2": train.PARAMS["w2"], "x": x, "y": y,
              "opt_state/0/count": np.asarray(train.OPT_STATE[0].count)}
    for part in ("mu", "nu"):
        for w in ("w1", "w2"):
            arrays[f"opt_state/0/{part}/{w}"] = np.asarray(getattr(train.OPT_STATE[0], part)[w])
    np.savez("in.npz", **arrays)
    res = run_cli("call", "t.jaxport", "--inputs", "in.npz", "-o", "out.npz")
    assert res.exit_code == 0, res.stderr
    out = np.load("out.npz")
    want = train.train_step(train.PARAMS, train.OPT_STATE, x, y)
    np.testing.assert_allclose(out["1/0/mu/w1"], np.asarray(want[1][0].mu["w1"]), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out["2"], np.asarray(want[2]), rtol=1e-6)


def test_optax_train_step_from_python(train):
    spec = jaxport.Spec(args=[jaxport.like(train.PARAMS), jaxport.like(train.OPT_STATE), "f32[b, 4]", "f32[b, 2]"],
                        dims={"b": {"max": 64}})
    result = jaxport.export(train.train_step, spec, "api.jaxport")
    loaded = result.load()
    assert loaded.input_names == OPT_INPUTS
    for b in (1, 9):
        x, y = np.full((b, 4), 0.5, np.float32), np.full((b, 2), -0.5, np.float32)
        _same(loaded(train.PARAMS, train.OPT_STATE, x, y), train.train_step(train.PARAMS, train.OPT_STATE, x, y))
    report = jaxport.verify_artifact("api.jaxport", against="train.py:train_step", spec=spec)
    assert report.passed and report.spec_differences == []


GRAPH = '''import jax.numpy as jnp, jraph, numpy as np

rng = np.random.default_rng(0)
W_NODE = rng.normal(size=(4, 8)).astype(np.float32)
W_EDGE = rng.normal(size=(3, 8)).astype(np.float32)

# an example of the input: 5 nodes, 7 edges, 2 graphs (the spec names the sizes 5 and 7)
EXAMPLE = jraph.GraphsTuple(
    nodes=np.zeros((5, 4), np.float32), edges=np.zeros((7, 3), np.float32), senders=np.zeros(7, np.int32),
    receivers=np.zeros(7, np.int32), globals=np.zeros((2, 1), np.float32), n_node=np.array([3, 2], np.int32),
    n_edge=np.array([4, 3], np.int32))


def net(graph):
    def update_edge(e, s, r, g):
        return jnp.tanh(e @ W_EDGE + s @ W_NODE + r @ W_NODE)

    def update_node(n, s, r, g):
        return n @ W_NODE + r

    return jraph.GraphNetwork(update_edge_fn=update_edge, update_node_fn=update_node)(graph)
'''
GRAPH_SPEC = """jaxport: 1
dims: {nodes: {max: 64}, edges: {max: 128}}
args:
  - like: graph.py:EXAMPLE
    sizes: {5: nodes, 7: edges}
    leaves:
      senders: {shape: [edges], dtype: i32, range: [0, nodes]}
      receivers: {shape: [edges], dtype: i32, range: [0, nodes]}
"""


def _graph(module, nodes: int, edges: int, seed: int):
    rng = np.random.default_rng(seed)
    return module.EXAMPLE._replace(
        nodes=rng.normal(size=(nodes, 4)).astype(np.float32), edges=rng.normal(size=(edges, 3)).astype(np.float32),
        senders=rng.integers(0, nodes, edges).astype(np.int32),
        receivers=rng.integers(0, nodes, edges).astype(np.int32),
        n_node=np.array([nodes - 1, 1], np.int32), n_edge=np.array([edges - 2, 2], np.int32))


@pytest.fixture
def graph(tmp_path, monkeypatch):
    pytest.importorskip("jraph")
    monkeypatch.chdir(tmp_path)
    Path("graph.py").write_text(GRAPH)
    Path("spec.yaml").write_text(GRAPH_SPEC)
    return _module(tmp_path / "graph.py", "ecosystem_jraph_graph", monkeypatch)


def test_jraph_graphs_tuple_from_the_command_line(graph, run_cli):
    res = run_cli("export", "graph.py:net", "-s", "spec.yaml", "-o", "g.jaxport")
    assert res.exit_code == 0, res.stderr
    loaded = jaxport.load("g.jaxport")
    shapes = {i.name: list(i.shape) for i in loaded.function_record.inputs}
    assert shapes == {"graph/edges": ["edges", 3], "graph/globals": [2, 1], "graph/n_edge": [2], "graph/n_node": [2],
                      "graph/nodes": ["nodes", 4], "graph/receivers": ["edges"], "graph/senders": ["edges"]}
    ranges = {i.name: list(i.range) for i in loaded.function_record.inputs if i.range}
    assert ranges["graph/receivers"] == ranges["graph/senders"] == [0, "nodes"]  # as the spec gives them
    assert sorted(ranges) == sorted(shapes)  # the others around the example's own values
    for nodes, edges in ((6, 11), (30, 90)):
        g = _graph(graph, nodes, edges, nodes)
        out = loaded(g)
        assert type(out) is type(g)  # the GraphsTuple back, jraph being imported
        want = graph.net(g)
        for name in want._fields:
            np.testing.assert_allclose(np.asarray(getattr(out, name)), np.asarray(getattr(want, name)), rtol=1e-5,
                                       atol=1e-5)
    # verify draws the senders and receivers in [0, nodes) at every size it tries
    res = run_cli("verify", "g.jaxport", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert len(json.loads(res.stdout)["cases"]) >= 3


def test_jraph_graphs_tuple_from_python(graph):
    spec = jaxport.Spec(args=[jaxport.like(graph.EXAMPLE, sizes={5: "nodes", 7: "edges"}, leaves={
        "senders": {"shape": ["edges"], "dtype": "i32", "range": [0, "nodes"]},
        "receivers": {"shape": ["edges"], "dtype": "i32", "range": [0, "nodes"]}})],
        dims={"nodes": {"max": 64}, "edges": {"max": 128}})
    result = jaxport.export(graph.net, spec, "api.jaxport")
    loaded = result.load()
    for nodes, edges in ((2, 3), (64, 128)):
        g = _graph(graph, nodes, edges, 7)
        out, want = loaded(g), graph.net(g)
        np.testing.assert_allclose(np.asarray(out.nodes), np.asarray(want.nodes), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(out.edges), np.asarray(want.edges), rtol=1e-5, atol=1e-5)
    report = jaxport.verify_artifact("api.jaxport", against="graph.py:net", spec=spec)
    assert report.passed


MODULES = '''import equinox as eqx, jax, jax.numpy as jnp, numpy as np
from flax import struct


class Mlp(eqx.Module):
    w: jax.Array
    b: jax.Array
    scale: float = 2.0  # a Python number: a weakly typed scalar input, as jax.jit takes it


@struct.dataclass
class Batch:
    x: jax.Array
    mask: jax.Array
    name: str = struct.field(pytree_node=False, default="batch")


MODEL = Mlp(np.ones((3, 4), np.float32), np.zeros(4, np.float32))
BATCH = Batch(np.zeros((6, 3), np.float32), np.ones(6, np.float32))


def apply(model, batch):
    return (batch.x @ model.w + model.b) * model.scale * batch.mask[:, None]
'''


def test_an_equinox_module_and_a_flax_struct_as_free_inputs(tmp_path, monkeypatch, run_cli):
    pytest.importorskip("equinox")
    pytest.importorskip("flax")
    monkeypatch.chdir(tmp_path)
    Path("mods.py").write_text(MODULES)
    Path("spec.yaml").write_text("jaxport: 1\ndims: [n]\nargs:\n  - {like: mods.py:MODEL}\n"
                                 "  - {like: mods.py:BATCH, sizes: {6: n}}\n")
    live = _module(tmp_path / "mods.py", "ecosystem_modules", monkeypatch)
    res = run_cli("export", "mods.py:apply", "-s", "spec.yaml", "-o", "m.jaxport")
    assert res.exit_code == 0, res.stderr
    loaded = jaxport.load("m.jaxport")
    assert [(i.name, list(i.shape)) for i in loaded.function_record.inputs] == [
        ("model/b", [4]), ("model/scale", []), ("model/w", [3, 4]), ("batch/mask", ["n"]), ("batch/x", ["n", 3])]
    rng = np.random.default_rng(0)
    for n in (1, 10):
        model = live.Mlp(rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32))
        batch = live.Batch(rng.normal(size=(n, 3)).astype(np.float32), (rng.random(n) > 0.5).astype(np.float32))
        np.testing.assert_allclose(np.asarray(loaded(model, batch)), np.asarray(live.apply(model, batch)),
                                   rtol=1e-6, atol=1e-6)
    res = run_cli("verify", "m.jaxport")
    assert res.exit_code == 0, res.stdout + res.stderr


@pytest.mark.parametrize(("entry", "message"), [
    ("{like: 3}", "spec.yaml:3: args[0]: 'like' takes a Python attribute 'model.py:NAME' (or a file .npz, "
                  ".safetensors, .npy) whose value has the argument's structure, found 3."),
    ("{like: m.py:V, sizes: {0: n}}", "spec.yaml:3: args[0].sizes: key '0' is not an axis size (an integer >= 1)."),
    ("{like: m.py:V, sizes: {5: 3}}", "spec.yaml:3: args[0].sizes[5]: must be a dimension such as 'batch' or "
                                      "'2*h', found 3."),
    ("{like: m.py:V, leaves: {w: ['f32[2]']}}", "spec.yaml:3: args[0].leaves['w']: must be an array spec such "
                                                "as 'f32[nodes, 4]' or {shape: ..., dtype: ..., range: ...}, or "
                                           "{static: true} to keep a Python number of the value baked in."),
    ("{like: m.py:V, shape: 3}", "spec.yaml:3: unknown key 'shape' in the 'like' argument args[0]. Allowed keys: "
                                 "like, sizes, leaves."),
])
def test_like_entries_the_reader_refuses(entry, message):
    with pytest.raises(SpecError) as e:
        jaxport.parse_spec(f"jaxport: 1\nargs:\n  - {entry}\n", "spec.yaml")
    assert str(e.value) == message


LIKE_VALUE = "import numpy as np\nV = {'w': np.zeros((5, 2), np.float32), 'k': 3}\n\n\ndef f(v):\n    return v['w']\n"


@pytest.mark.parametrize(("entry", "message"), [
    ("{like: m.py:V, leaves: {q: 'f32[2]'}}", "spec.yaml:3: leaves['q'] is not an array leaf of m.py:V; its "
                                              "leaves: k, w."),
    ("{like: m.py:V, leaves: {w: 'f32[2]'}}", "spec.yaml:3: leaves['w'] has 1 axes, but the leaf of m.py:V has "
                                              "shape (5, 2). Give it the leaf's rank."),
])
def test_like_leaves_that_do_not_fit_the_value(tmp_path, monkeypatch, entry, message):
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text(LIKE_VALUE)
    Path("spec.yaml").write_text(f"jaxport: 1\nargs:\n  - {entry}\n")
    with pytest.raises(SpecError) as e:
        jaxport.export("m.py:f", "spec.yaml")
    assert str(e.value) == message


def test_like_takes_a_python_number_as_a_scalar_input_or_pins_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text(LIKE_VALUE)
    Path("spec.yaml").write_text("jaxport: 1\ndims: [r]\nargs:\n  - {like: m.py:V, sizes: {5: r}}\n")
    loaded = jaxport.export("m.py:f", "spec.yaml").load()
    assert [(i.name, list(i.shape), i.dtype) for i in loaded.function_record.inputs] == [
        ("v/k", [], "int32"), ("v/w", ["r", 2], "float32")]
    w = np.arange(14, dtype=np.float32).reshape(7, 2)
    np.testing.assert_array_equal(np.asarray(loaded({"w": w, "k": 3})), w)
    Path("spec.yaml").write_text("jaxport: 1\ndims: [r]\nargs:\n  - {like: m.py:V, sizes: {5: r}, "
                                 "leaves: {k: {static: true}}}\n")
    pinned = jaxport.export("m.py:f", "spec.yaml").load()
    assert [i.name for i in pinned.function_record.inputs] == ["v/w"]
    np.testing.assert_array_equal(np.asarray(pinned({"w": w, "k": 3})), w)
    with pytest.raises(jaxport.InputError) as e:
        pinned({"w": w, "k": 4})
    assert str(e.value) == ("argument v['k'] was fixed to 3 when the artifact was exported; got 4. Leave it out (or "
                            "pass None), or re-export with the new value.")


#: Real models from keras, optax, jraph, equinox, diffrax: each exports and compiles at two sizes (make test runs them).
pytestmark = pytest.mark.slow


ABSTRACT = '''import jax, jax.numpy as jnp
import flax.linen as nn


class Mlp(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(nn.relu(nn.Dense(8)(x)))


MODEL = Mlp()
PARAMS = jax.eval_shape(lambda: MODEL.init(jax.random.key(0), jnp.zeros((1, 4))))  # ShapeDtypeStructs, no values


def predict(params, x):
    return MODEL.apply(params, x)
'''


def test_like_takes_abstract_parameters_from_eval_shape(tmp_path, monkeypatch, run_cli):
    """``jax.eval_shape(model.init, ...)`` gives a model's parameters as ``jax.ShapeDtypeStruct`` leaves, with no
    values: each is an input of its shape and dtype, drawn N(0, 1) by ``verify`` (no example range)."""
    pytest.importorskip("flax")
    import jax
    import jax.numpy as jnp

    monkeypatch.chdir(tmp_path)
    Path("abstract.py").write_text(ABSTRACT)
    Path("spec.yaml").write_text('jaxport: 1\ndims: {b: {max: 64}}\nargs: [{like: abstract.py:PARAMS}, "f32[b, 4]"]\n')
    live = _module(tmp_path / "abstract.py", "ecosystem_abstract", monkeypatch)
    res = run_cli("export", "abstract.py:predict", "-s", "spec.yaml", "-o", "a.jaxport")
    assert res.exit_code == 0, res.stderr
    loaded = jaxport.load("a.jaxport")
    assert [(i.name, list(i.shape), i.range) for i in loaded.function_record.inputs] == [
        ("params/params/Dense_0/bias", [2], None), ("params/params/Dense_0/kernel", [8, 2], None),
        ("params/params/Dense_1/bias", [8], None), ("params/params/Dense_1/kernel", [4, 8], None),
        ("x", ["b", 4], None)]
    params = live.MODEL.init(jax.random.key(1), jnp.zeros((1, 4)))
    for b in (1, 9):
        x = np.random.default_rng(b).normal(size=(b, 4)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(loaded(params, x)), np.asarray(jax.jit(live.predict)(params, x)),
                                   rtol=1e-6, atol=1e-6)
    with pytest.raises(jaxport.InputError, match=r"^input 'params/params/Dense_0/bias' is a ShapeDtypeStruct "
                                                  r"float32\[2\], which holds no values: give an array of that "
                                                  r"shape and dtype\.$"):
        loaded(live.PARAMS, np.ones((2, 4), np.float32))
    res = run_cli("verify", "a.jaxport")
    assert res.exit_code == 0, res.stdout + res.stderr
