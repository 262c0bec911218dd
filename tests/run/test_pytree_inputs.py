"""A pytree argument fed from one file: ``call --inputs state=state.npz`` (keys: the leaf paths below ``state``, or
the full input names), ``FILE:PATH`` for the state a call's ``-o`` file returns, ``.safetensors``, and
``jaxport.save_inputs`` writing such files from live pytrees (an optax state, a NamedTuple, a flax struct, Python
numbers); the refusals name the keys; ``call --random`` warns when an output is NaN everywhere. Values are compared
with ``jax.jit`` of the live function, the state fed back twice."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import jaxport
from jaxport import InputError, UsageError

TRAIN = '''import jax, jax.numpy as jnp, numpy as np, optax

rng = np.random.default_rng(0)
PARAMS = {"w1": rng.normal(size=(4, 8)).astype(np.float32), "w2": rng.normal(size=(8, 2)).astype(np.float32)}
OPT = optax.adam(1e-2)
STATE = {"params": PARAMS, "opt": OPT.init(PARAMS)}


def loss_fn(params, x, y):
    return jnp.mean((jnp.tanh(x @ params["w1"]) @ params["w2"] - y) ** 2)


def step(state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(state["params"], x, y)
    updates, opt = OPT.update(grads, state["opt"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates), "opt": opt}, loss
'''
SPEC = """jaxport: 1
dims: {b: {max: 64}}
args:
  - {like: train.py:STATE}
  - "f32[b, 4]"
  - "f32[b, 2]"
"""
LEAVES = ["opt/0/count", "opt/0/mu/w1", "opt/0/mu/w2", "opt/0/nu/w1", "opt/0/nu/w2", "params/w1", "params/w2"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The optax train step exported with its state as a ``like:`` argument, the live module, and x, y files."""
    pytest.importorskip("optax")
    root = tmp_path_factory.mktemp("pytree")
    (root / "train.py").write_text(TRAIN)
    (root / "spec.yaml").write_text(SPEC)
    spec = importlib.util.spec_from_file_location("pytree_inputs_train", root / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["pytree_inputs_train"] = module
    spec.loader.exec_module(module)
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32)
    np.save(root / "x.npy", x)
    np.save(root / "y.npy", y)
    jaxport.export(str(root / "train.py") + ":step", str(root / "spec.yaml"), output=str(root / "t.jaxport"))
    yield root, module, x, y
    sys.modules.pop("pytree_inputs_train", None)


@pytest.fixture
def here(trained, monkeypatch):
    root, module, x, y = trained
    monkeypatch.chdir(root)
    return module, x, y


def _outputs(path: str) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _same_as_jit(out: dict[str, np.ndarray], state, x, y) -> tuple:
    """``out`` (a call's -o file) equals ``jax.jit(step)(state, x, y)``; returns the live result."""
    import jax

    module = sys.modules["pytree_inputs_train"]
    new_state, loss = jax.jit(module.step)(state, x, y)
    flat = {"/".join(jaxport_key(k) for k in path): leaf
            for path, leaf in jax.tree_util.tree_flatten_with_path(new_state)[0]}
    assert sorted(out) == sorted([f"0/{k}" for k in flat] + ["1"])
    for k, v in flat.items():
        np.testing.assert_allclose(out[f"0/{k}"], np.asarray(v), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["1"], np.asarray(loss), rtol=1e-5, atol=1e-6)
    return new_state, loss


def jaxport_key(k) -> str:
    from jaxport.artifact.calltree import key_name

    return key_name(k)


def test_save_inputs_and_feed_the_state_back_twice(here, run_cli):
    """``save_inputs(state=...)`` + ``--inputs state=s.npz``, then the returned state fed back with
    ``out.npz:0`` twice: each step equals jax.jit's, from the state jax.jit returned."""
    module, x, y = here
    assert jaxport.save_inputs("s.npz", state=module.STATE) == [f"state/{k}" for k in LEAVES]
    with np.load("s.npz") as f:
        assert sorted(f.files) == sorted(f"state/{k}" for k in LEAVES)
    res = run_cli("call", "t.jaxport", "-i", "state=s.npz", "-i", "x=x.npy", "-i", "y=y.npy", "-o", "out1.npz",
                  "--no-cache")
    assert res.exit_code == 0, res.stderr
    state, _ = _same_as_jit(_outputs("out1.npz"), module.STATE, x, y)
    for i in (2, 3):
        res = run_cli("call", "t.jaxport", "-i", f"state=out{i - 1}.npz:0", "-i", "x=x.npy", "-i", "y=y.npy",
                      "-o", f"out{i}.npz", "--no-cache", "--json")
        assert res.exit_code == 0, res.stderr
        sources = {i["name"]: i["source"] for i in json.loads(res.stdout)["inputs"]}
        assert sources["state/params/w1"] == f"out{i - 1}.npz[0/params/w1]"
        state, _ = _same_as_jit(_outputs(f"out{i}.npz"), state, x, y)
    assert int(_outputs("out3.npz")["0/opt/0/count"]) == 3


def test_keys_below_the_argument_and_safetensors(here, run_cli):
    """A file keyed by the leaf paths below ``state`` (no prefix), as .npz and as .safetensors."""
    import jax

    module, x, y = here
    flat = {"/".join(jaxport_key(k) for k in p): np.asarray(v)
            for p, v in jax.tree_util.tree_flatten_with_path(module.STATE)[0]}
    np.savez("below.npz", **flat)
    from jaxport.arrayfiles.safetensors import write

    with open("below.safetensors", "wb") as f:
        write(f, flat)
    for name in ("below.npz", "below.safetensors"):
        res = run_cli("call", "t.jaxport", "-i", f"state={name}", "-i", "x=x.npy", "-i", "y=y.npy", "-o", "o.npz",
                      "--no-cache")
        assert res.exit_code == 0, res.stderr
        _same_as_jit(_outputs("o.npz"), module.STATE, x, y)


def test_one_file_for_every_input_positionally(here, run_cli):
    """``save_inputs("in.npz", state=..., x=..., y=...)`` writes keys ``state/...``, ``x``, ``y``: the input names,
    which one positional .npz (or .safetensors) gives."""
    module, x, y = here
    assert jaxport.save_inputs("in.npz", state=module.STATE, x=x, y=y)[-2:] == ["x", "y"]
    jaxport.save_inputs("in.safetensors", state=module.STATE, x=x, y=y)
    for name in ("in.npz", "in.safetensors"):
        res = run_cli("call", "t.jaxport", "--inputs", name, "-o", "o.npz", "--no-cache")
        assert res.exit_code == 0, res.stderr
        _same_as_jit(_outputs("o.npz"), module.STATE, x, y)


def test_python_api_takes_the_same_inputs(here):
    """``jaxport.call(CallRequest(inputs=["state=s.npz", ...]))`` reads the pytree file as the command does."""
    module, x, y = here
    jaxport.save_inputs("s2.npz", state=module.STATE)
    report = jaxport.call(jaxport.CallRequest("t.jaxport", inputs=["state=s2.npz", "x=x.npy", "y=y.npy"],
                                              load=jaxport.LoadOptions(cache=False)))
    _same_as_jit(dict(report.leaves), module.STATE, x, y)


def _call_error(run_cli, *inputs: str) -> tuple[int, str]:
    args = []
    for i in inputs:
        args += ["-i", i]
    res = run_cli("call", "t.jaxport", *args, "--no-cache")
    return res.exit_code, res.stderr


def test_a_key_no_leaf_has_and_a_missing_leaf(here, run_cli):
    module, _, _ = here
    jaxport.save_inputs("full.npz", state=module.STATE)
    with np.load("full.npz") as f:
        arrays = {k: f[k] for k in f.files}
    arrays["state/opt/0/mu/w3"] = arrays.pop("state/opt/0/mu/w2")
    np.savez("typo.npz", **arrays)
    assert _call_error(run_cli, "state=typo.npz", "x=x.npy", "y=y.npy") == (9, (
        "error[input]: --inputs state=typo.npz: the keys of typo.npz are not the leaf paths of input 'state' (7 "
        "inputs): the file has key 'state/opt/0/mu/w3' (did you mean 'opt/0/mu/w2'?), which no leaf of 'state' has; "
        "it lacks leaf 'opt/0/mu/w2'. Expected keys: opt/0/count, opt/0/mu/w1, opt/0/mu/w2, opt/0/nu/w1, "
        "opt/0/nu/w2, params/w1, params/w2.\n"))
    del arrays["state/opt/0/mu/w3"]
    arrays["extra"] = np.zeros(2, np.float32)
    np.savez("short.npz", **{k.removeprefix("state/"): v for k, v in arrays.items()})
    assert _call_error(run_cli, "state=short.npz", "x=x.npy", "y=y.npy") == (9, (
        "error[input]: --inputs state=short.npz: the keys of short.npz are not the leaf paths of input 'state' (7 "
        "inputs): the file has key 'extra', which no leaf of 'state' has; it lacks leaf 'opt/0/mu/w2'. Expected "
        "keys: opt/0/count, opt/0/mu/w1, opt/0/mu/w2, opt/0/nu/w1, opt/0/nu/w2, params/w1, params/w2.\n"))


def test_an_output_file_names_the_path_that_fits(here, run_cli):
    """A call's -o file given whole: the message names ``FILE:0``, whose arrays are the state's leaves."""
    module, x, y = here
    jaxport.save_inputs("s3.npz", state=module.STATE)
    assert run_cli("call", "t.jaxport", "-i", "state=s3.npz", "-i", "x=x.npy", "-i", "y=y.npy", "-o", "ret.npz",
                   "--no-cache").exit_code == 0
    assert _call_error(run_cli, "state=ret.npz", "x=x.npy", "y=y.npy") == (9, (
        "error[input]: --inputs state=ret.npz: the keys of ret.npz are not the leaf paths below 'state', but the "
        "arrays below '0' are (an output file names the leaves of each returned value below its position): give "
        "--inputs state=ret.npz:0.\n"))
    assert _call_error(run_cli, "state=ret.npz:7", "x=x.npy", "y=y.npy") == (9, (
        "error[input]: --inputs state=ret.npz:7: ret.npz has no keys below '7'; its keys: 0/opt/0/count, "
        "0/opt/0/mu/w1, 0/opt/0/mu/w2, 0/opt/0/nu/w1, 0/opt/0/nu/w2, 0/params/w1, 0/params/w2, 1.\n"))


def test_what_a_pytree_argument_is_given(here, run_cli):
    module, _, _ = here
    jaxport.save_inputs("s4.npz", state=module.STATE)
    assert _call_error(run_cli, "state=x.npy", "x=x.npy", "y=y.npy") == (9, (
        "error[input]: --inputs state=x.npy: a .npy file holds one unnamed array; give an .npz or .safetensors file "
        "keyed by name.\n"))
    assert _call_error(run_cli, "state=nothing", "x=x.npy", "y=y.npy") == (9, (
        "error[input]: --inputs state=nothing: 'state' is a pytree argument; give it an .npz or .safetensors file "
        "keyed by the leaf paths below 'state' (as jaxport.save_inputs writes it), optionally as FILE:PATH to read "
        "the arrays below PATH of the file.\n"))
    assert _call_error(run_cli, "state=s4.npz", "state/params/w1=x.npy", "x=x.npy", "y=y.npy") == (9, (
        "error[input]: input 'state/params/w1' is given twice: s4.npz[state/params/w1] and x.npy.\n"))
    code, err = _call_error(run_cli, "x=x.npy", "y=y.npy")
    assert code == 9 and err.endswith(
        "give each with --inputs NAME=FILE.npy (or all in one .npz); a pytree argument at once with --inputs "
        "state=FILE.npz (keyed by the leaf paths below 'state', as jaxport.save_inputs writes it), or use "
        "--random.\n")


def test_a_subtree_by_its_name(here, run_cli):
    """Any dict or list node of the call tree takes a file: ``state/params=p.npz:params`` (the keys save_inputs
    wrote below ``params``) beside ``state/opt=o.npz:opt``."""
    module, x, y = here
    jaxport.save_inputs("p.npz", params=module.STATE["params"])
    jaxport.save_inputs("o.npz", opt=module.STATE["opt"])
    res = run_cli("call", "t.jaxport", "-i", "state/params=p.npz:params", "-i", "state/opt=o.npz:opt", "-i", "x=x.npy",
                  "-i", "y=y.npy", "-o", "sub.npz", "--no-cache")
    assert res.exit_code == 0, res.stderr
    _same_as_jit(_outputs("sub.npz"), module.STATE, x, y)


class Pair(NamedTuple):
    a: object
    b: object


def test_save_inputs_names_leaves_as_jaxport_names_inputs(tmp_path):
    """NamedTuples by field name, a flax struct by attribute, Python numbers typed as jax.jit types them, None and
    strings left out (an export bakes them), a typed PRNG key as its key data."""
    import jax
    import jax.numpy as jnp

    flax_struct = pytest.importorskip("flax.struct")

    @flax_struct.dataclass
    class S:
        w: object
        step: int

    tree = {"pair": Pair(jnp.ones(2), [np.int8(3), None]), "s": S(w=np.zeros((2, 2)), step=7), "lr": 0.5,
            "flag": True, "name": "adam", "key": jax.random.key(0)}
    path = tmp_path / "t.npz"
    keys = jaxport.save_inputs(path, tree=tree, n=3)
    assert keys == ["tree/flag", "tree/key", "tree/lr", "tree/pair/a", "tree/pair/b/0", "tree/s/w", "tree/s/step",
                    "n"]
    with np.load(path) as f:
        got = {k: f[k] for k in f.files}
    assert {k: str(v.dtype) for k, v in got.items()} == {
        "tree/flag": "bool", "tree/key": "uint32", "tree/lr": "float32", "tree/pair/a": "float32",
        "tree/pair/b/0": "int8", "tree/s/step": "int32", "tree/s/w": "float64", "n": "int32"}
    np.testing.assert_array_equal(got["tree/key"], np.asarray(jax.random.key_data(jax.random.key(0))))
    assert int(got["tree/s/step"]) == 7


def test_save_inputs_refusals(tmp_path):
    with pytest.raises(UsageError, match=r"^save_inputs\('s.npy'\): inputs are saved as an .npz or .safetensors "
                                         r"file keyed by input name; give a path ending in one of these.$"):
        jaxport.save_inputs("s.npy", x=np.ones(2))
    with pytest.raises(UsageError, match=r"^save_inputs\(\): cfg= holds no array \(a dict\); give the pytree of "
                                         r"arrays the artifact takes as argument 'cfg'.$"):
        jaxport.save_inputs(tmp_path / "s.npz", cfg={"name": "adam"})
    with pytest.raises(UsageError, match="needs at least one pytree"):
        jaxport.save_inputs(tmp_path / "s.npz")
    assert not (tmp_path / "s.npz").exists()


@pytest.mark.parametrize(("leaf", "message"), [
    (2**40, "leaf 'state/n' is the Python int 1099511627776, which int32 cannot hold (integers -2147483648 to "
            "2147483647); give a whole number in that range."),
    (1e300, "leaf 'state/n' is the Python float 1e+300, which overflows float32; give a value within its range."),
    (np.array([object()]), "leaf 'state/n' has dtype object, which no input of an artifact has; give an array of "
                           "numbers, booleans or PRNG keys."),
    (np.array(["a"]), "leaf 'state/n' has dtype <U1, which no input of an artifact has; give an array of numbers, "
                      "booleans or PRNG keys."),
    ("shape-dtype-struct", "leaf 'state/n' is a ShapeDtypeStruct float32[2], which holds no values; give an array."),
])
def test_save_inputs_refuses_leaves_no_input_takes_naming_them(tmp_path, leaf, message):
    import jax

    if isinstance(leaf, str):
        leaf = jax.ShapeDtypeStruct((2,), np.float32)
    with pytest.raises(UsageError) as e:
        jaxport.save_inputs(tmp_path / "s.npz", state={"n": leaf, "w": np.ones(2, np.float32)})
    assert str(e.value) == f"save_inputs(): {message}"
    assert not (tmp_path / "s.npz").exists()
    jaxport.save_inputs(tmp_path / "s.npz", state={"n": 2**31 - 1, "inf": float("inf")})  # what int32/float32 hold
    with np.load(tmp_path / "s.npz") as f:
        assert (f["state/n"].dtype, int(f["state/n"]), f["state/inf"].dtype) == (np.int32, 2**31 - 1, np.float32)


def test_streaming_still_takes_only_leaf_names(here, run_cli):
    """``--batch-size`` reads .npy files by input name; a pytree name is not one of them."""
    module, _, _ = here
    with pytest.raises(InputError):
        from jaxport.run.values.inputs import classify

        fn = jaxport.load("t.jaxport").function_record
        classify(fn, ["state=s.npz"])


NAN_MODEL = "import jax.numpy as jnp\n\n\ndef f(v, x):\n    return jnp.sqrt(v - 100.0) * x, x + 1\n"


def test_random_outputs_nan_everywhere_are_warned(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    Path("nan.py").write_text(NAN_MODEL)
    jaxport.export("nan.py:f", {"jaxport": 1, "args": ["f32[3]", "f32[3]"]}, output="nan.jaxport")
    res = run_cli("call", "nan.jaxport", "--random", "--no-cache")
    assert res.exit_code == 0
    assert res.stderr == (
        "warning: output '0' is NaN everywhere on the --random inputs, which are likely outside what the function "
        "takes (random values for a variance, an optimizer state or a log's argument): draw such inputs from a "
        "range with --range NAME=LO:HI, or give real inputs with --inputs (jaxport.save_inputs writes a pytree "
        "argument's file).\n")
    res = run_cli("call", "nan.jaxport", "--random", "--range", "v=101:200", "--no-cache", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["warnings"] == []
