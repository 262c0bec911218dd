"""Several bound positional parameters (``bind=``, ``--bind`` twice, the spec's own ``bind:``), a Keras model's
``stateless_call`` with its two variable lists bound, and Keras variables named by their paths."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import SpecError

os.environ.setdefault("KERAS_BACKEND", "jax")

AFFINE = "def f(a, b, x):\n    return a * x + b\n"
N_SPEC = {"jaxport": 1, "dims": {"n": {"max": 8}}, "args": ["f32[n]"]}
A = np.asarray(2.0, np.float32)
B = np.asarray(0.5, np.float32)


def _module(path: Path, name: str, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def affine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text(AFFINE)
    np.save("a.npy", A)
    np.save("b.npy", B)
    return tmp_path


def _check(loaded) -> None:
    for n in (3, 8):
        x = np.linspace(-1, 1, n, dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(loaded(x)), A * x + B)


def test_two_bound_arguments_from_python(affine):
    result = jaxport.export("model.py:f", N_SPEC, bind={"a": A, "b": B})
    sig = result.manifest["functions"]["f"]["signature"]
    assert [arg["name"] for arg in sig["args"]] == ["a", "b", "x"]
    assert [next(iter(k for k in arg if k != "name")) for arg in sig["args"]] == ["bound", "bound", "input"]
    _check(result.load())


def test_two_bound_arguments_from_the_command_line_and_verify(affine, run_cli):
    Path("spec.yaml").write_text("jaxport: 1\ndims: {n: {max: 8}}\nargs: ['f32[n]']\n")
    res = run_cli("export", "model.py:f", "-s", "spec.yaml", "--bind", "a=a.npy", "--bind", "b=b.npy",
                  "-o", "f.jaxport")
    assert res.exit_code == 0, res.stderr
    _check(jaxport.load("f.jaxport"))
    res = run_cli("verify", "f.jaxport", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr


def test_two_bound_arguments_in_the_spec_itself(affine):
    spec = "jaxport: 1\ndims: {n: {max: 8}}\nargs: [{bind: a.npy}, {bind: b.npy}, 'f32[n]']\n"
    Path("spec.yaml").write_text(spec)
    _check(jaxport.export("model.py:f", "spec.yaml").load())
    # --bind replaces what the spec binds, keeping the other
    np.save("a2.npy", A * 3)
    loaded = jaxport.export("model.py:f", "spec.yaml", bind={"a": "a2.npy"}).load()
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(np.asarray(loaded(x)), 3 * A * x + B)


def test_a_spec_that_lacks_an_argument_is_told_which(affine):
    with pytest.raises(SpecError) as e:
        jaxport.export("model.py:f", {"jaxport": 1}, bind={"a": A, "b": B})
    assert str(e.value) == (
        "<spec dict>: with --bind a, b, the spec's arguments do not fit f(a, b, x): missing a required argument: "
        "'x'; the function's parameters: a, b, x; the spec lists: no arguments. The spec's 'args' give the "
        "parameters that are not bound, in order (x): add an entry for each, or give it under 'kwargs'.")


def test_a_spec_listing_every_parameter_has_the_bound_ones_replaced(affine):
    loaded = jaxport.export("model.py:f", {**N_SPEC, "args": ["f32[]", "f32[]", "f32[n]"]},
                            bind={"a": A, "b": B}).load()
    assert loaded.input_names == ["x"]
    _check(loaded)


# --- Keras ---------------------------------------------------------------------------------------------------------

KERAS_MODEL = '''import os
os.environ.setdefault("KERAS_BACKEND", "jax")
import keras

keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, name="dense"),
                          keras.layers.BatchNormalization(name="bn"), keras.layers.Dropout(0.1, name="drop"),
                          keras.layers.Dense(2, name="head")])
TRAINABLE = model.trainable_variables
NON_TRAINABLE = model.non_trainable_variables


def predict(trainable, non_trainable, x):
    y, _ = model.stateless_call(trainable, non_trainable, x)
    return y
'''


def test_keras_stateless_call_with_both_variable_lists_bound(tmp_path, monkeypatch, run_cli):
    pytest.importorskip("keras")
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text(KERAS_MODEL)
    Path("spec.yaml").write_text("jaxport: 1\ndims: {b: {max: 16}}\nargs: ['f32[b, 4]']\n")
    live = _module(tmp_path / "model.py", "ecosystem_keras_model", monkeypatch)
    trainable = [np.asarray(v.value) for v in live.TRAINABLE]
    non_trainable = [np.asarray(v.value) for v in live.NON_TRAINABLE]
    # Python: the variable lists themselves, bound from memory
    api = jaxport.export(live.predict, "spec.yaml",
                         bind={"trainable": live.TRAINABLE, "non_trainable": live.NON_TRAINABLE})
    # the command line: the module's attributes
    res = run_cli("export", "model.py:predict", "-s", "spec.yaml", "--bind", "trainable=model.py:TRAINABLE",
                  "--bind", "non_trainable=model.py:NON_TRAINABLE", "-o", "k.jaxport")
    assert res.exit_code == 0, res.stderr
    for loaded in (api.load(), jaxport.load("k.jaxport")):
        for b in (2, 5):
            x = np.random.default_rng(b).normal(size=(b, 4)).astype(np.float32)
            np.testing.assert_allclose(np.asarray(loaded(x)),
                                       np.asarray(live.predict(trainable, non_trainable, x)), rtol=1e-6, atol=1e-6)
    # the tensors are named by the variables' paths, not by list index
    names = sorted(api.manifest["weights"]["tensors"])
    assert names == [
        "non_trainable/seed_generator/seed_generator_state",
        "non_trainable/sequential/bn/moving_mean", "non_trainable/sequential/bn/moving_variance",
        "trainable/sequential/bn/beta", "trainable/sequential/bn/gamma", "trainable/sequential/dense/bias",
        "trainable/sequential/dense/kernel", "trainable/sequential/head/bias", "trainable/sequential/head/kernel"]
    # the dropout layer's seed state is never read at inference: the export says so
    assert [w for w in api.warnings if "never reads" in w] == [
        "function 'predict' never reads the 1 Keras seed-generator state tensor(s) bound with it (dropout's random "
        "state, read only in training, e.g. non_trainable/seed_generator/seed_generator_state); they are stored "
        "anyway (a few bytes each)."]
    res = run_cli("verify", "k.jaxport", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr


def test_keras_variables_whose_paths_clash_keep_their_index(tmp_path):
    keras = pytest.importorskip("keras")
    from jaxport.export.weights.bind import flatten_bound

    first, second = keras.Variable(np.ones(2, np.float32), name="w"), keras.Variable(np.zeros(2, np.float32),
                                                                                       name="w")
    assert first.path == second.path == "w"
    tree, tensors = flatten_bound([first, second], "params", "here")
    assert [t.name for t in tensors] == ["params/w", "params/1"]
    rebuilt = tree.rebuild({t.name: t.array for t in tensors})
    np.testing.assert_array_equal(rebuilt[0], np.ones(2))
    np.testing.assert_array_equal(rebuilt[1], np.zeros(2))


def test_a_keras_hub_backbone_with_two_bound_variable_lists(tmp_path, monkeypatch):
    """keras-hub's BERT backbone (random weights): its seven seed-generator states draw one short warning."""
    pytest.importorskip("keras_hub")
    monkeypatch.chdir(tmp_path)
    Path("bert.py").write_text(
        "import os\nos.environ.setdefault('KERAS_BACKEND', 'jax')\nimport keras, keras_hub\n\n"
        "keras.utils.set_random_seed(0)\nmodel = keras_hub.models.BertBackbone(vocabulary_size=100, num_layers=2, "
        "num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=32)\n\n\n"
        "def encode(trainable, non_trainable, token_ids, segment_ids, padding_mask):\n"
        "    out, _ = model.stateless_call(trainable, non_trainable, {'token_ids': token_ids, "
        "'segment_ids': segment_ids, 'padding_mask': padding_mask})\n    return out['sequence_output']\n")
    live = _module(tmp_path / "bert.py", "ecosystem_keras_hub_bert", monkeypatch)
    spec = {"jaxport": 1, "dims": {"b": {"max": 4}, "t": {"max": 32}},
            "args": [{"shape": "b, t", "dtype": "i32", "range": [0, 100]}, {"shape": "b, t", "dtype": "i32",
                                                                           "range": [0, 2]}, "bool[b, t]"]}
    result = jaxport.export(live.encode, spec, bind={"trainable": live.model.trainable_variables,
                                                     "non_trainable": live.model.non_trainable_variables})
    (warning,) = [w for w in result.warnings if "never reads" in w]
    # Keras numbers its seed generators process-wide: the example's name depends on the models built before
    assert warning.startswith("function 'encode' never reads the 7 Keras seed-generator state tensor(s) bound with "
                              "it (dropout's random state, read only in training, e.g. non_trainable/")
    assert warning.endswith("/seed_generator_state); they are stored anyway (a few bytes each).")
    assert "trainable/token_embedding/embeddings" in result.manifest["weights"]["tensors"]
    loaded = result.load()
    trainable = [np.asarray(v.value) for v in live.model.trainable_variables]
    non_trainable = [np.asarray(v.value) for v in live.model.non_trainable_variables]
    rng = np.random.default_rng(0)
    for b, t in ((1, 5), (3, 17)):
        ids, segments = rng.integers(0, 100, (b, t)).astype(np.int32), rng.integers(0, 2, (b, t)).astype(np.int32)
        mask = np.ones((b, t), bool)
        np.testing.assert_allclose(np.asarray(loaded(ids, segments, mask)),
                                   np.asarray(live.encode(trainable, non_trainable, ids, segments, mask)),
                                   rtol=1e-5, atol=1e-5)


#: Real models from keras, optax, jraph, equinox, diffrax: each exports and compiles at two sizes (make test runs them).
pytestmark = pytest.mark.slow
