"""What an input takes beyond its dtype and shape: ``range:`` as an opt-in contract (``load(check_ranges=True)``,
``call``/``verify``/``serve --check-ranges``), and weakly typed inputs (a Python number at export), which take any
integer or float array whose values they keep."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

import jaxport
from jaxport.errors import InputError
from jaxport.serve.batching import Batched
from jaxport.serve.transport import oip

#: An embedding lookup: token ids outside the table read past it (JAX clamps a gather, or fills NaN with mode='fill').
EMBED = textwrap.dedent("""
    import jax.numpy as jnp
    import numpy as np

    TABLE = np.arange(40, dtype=np.float32).reshape(10, 4)


    def f(tokens, scale):
        return jnp.take(TABLE, tokens, axis=0, mode="fill", fill_value=jnp.nan) * scale
""")
EMBED_SPEC = textwrap.dedent("""
    jaxport: 1
    dims: {b: {max: 8}}
    args:
      - {shape: [b], dtype: i32, range: [0, 10]}
      - {shape: [], dtype: f32, range: [0.0, 2.0]}
""")


@pytest.fixture
def embed(make_artifact):
    return make_artifact(EMBED, EMBED_SPEC)


def test_without_the_contract_a_range_only_shapes_random_inputs(embed):
    out = np.asarray(jaxport.load(embed)(np.array([1, 50], np.int32), np.float32(1)))
    assert out[0].tolist() == [4, 5, 6, 7] and np.isnan(out[1]).all()  # id 50 runs: NaN, and no error


def test_a_load_that_checks_ranges_refuses_the_input_the_index_and_the_value(embed):
    loaded = jaxport.load(embed, check_ranges=True)
    np.testing.assert_array_equal(np.asarray(loaded(np.array([1, 9], np.int32), np.float32(1))),
                                  np.arange(40, dtype=np.float32).reshape(10, 4)[[1, 9]])
    with pytest.raises(InputError, match=re.escape(
            "input 'tokens': tokens[2] = 5000 lies outside its declared range [0, 10), which this call checks "
            "(--check-ranges); give values in the range.")):
        loaded(np.array([1, 2, 5000], np.int32), np.float32(1))
    for scale in (2.0, np.nan):  # half-open, and NaN lies in no range
        with pytest.raises(InputError, match=re.escape(f"input 'scale': scale = {np.float32(scale)} lies outside")):
            loaded(np.array([1], np.int32), np.float32(scale))
    for _ in range(2):  # a signature already checked and compiled is checked again: values are each call's own
        with pytest.raises(InputError, match=re.escape("tokens[0] = -1 lies outside")):
            loaded(np.array([-1], np.int32), np.float32(1))


def test_call_and_verify_take_check_ranges(embed, run_cli, tmp_path):
    np.save(tmp_path / "tokens.npy", np.array([3, 5000], np.int32))
    np.save(tmp_path / "scale.npy", np.float32(1))
    given = ("--inputs", f"tokens={tmp_path / 'tokens.npy'}", "--inputs", f"scale={tmp_path / 'scale.npy'}")
    assert run_cli("call", embed, *given, "--no-cache").exit_code == 0
    res = run_cli("call", embed, *given, "--no-cache", "--check-ranges")
    assert (res.exit_code, res.stderr) == (9, (
        "error[input]: input 'tokens': tokens[1] = 5000 lies outside its declared range [0, 10), which this call "
        "checks (--check-ranges); give values in the range.\n"))
    np.savez(tmp_path / "gold-in.npz", tokens=np.array([3, 5000], np.int32), scale=np.float32(1))
    res = run_cli("verify", embed, "--inputs", tmp_path / "gold-in.npz", "--check-ranges")
    assert res.exit_code == 9 and "tokens[1] = 5000 lies outside its declared range [0, 10)" in res.stderr


def test_a_range_of_dimensions_is_checked_at_the_call_s_sizes(make_artifact):
    path = make_artifact("import jax.numpy as jnp\n\ndef f(table, idx):\n    return table[idx]\n",
                         "jaxport: 1\ndims: {nodes: {max: 40}, k: {max: 8}}\nargs:\n  - 'f32[nodes, 2]'\n"
                         "  - {shape: [k], dtype: i32, range: [0, nodes]}\n")
    loaded = jaxport.load(path, check_ranges=True)
    with pytest.raises(InputError, match=re.escape(
            "input 'idx': idx[0] = 3 lies outside its declared range [0, 3) ([0, nodes) at nodes=3), which this "
            "call checks (--check-ranges); give values in the range.")):
        loaded(np.zeros((3, 2), np.float32), np.array([3, 0], np.int32))


def test_serving_shows_the_ranges_and_checks_every_request(embed):
    loaded = jaxport.load(embed, check_ranges=True)
    tensors = [oip.tensor(i, "input") for i in loaded.function_record.inputs]  # a model's metadata's inputs
    assert [t["parameters"] for t in tensors] == [{"shape": ["b"], "range": [0, 10]}, {"shape": [], "range": [0, 2]}]
    batched = Batched(loaded, {"b": [2]})
    good = {"tokens": np.array([1, 2], np.int32), "scale": np.array(1, np.float32)}
    assert batched(good)["output"].shape == (2, 4)
    for _ in range(2):  # the second of a signature admitted before is checked all the same
        with pytest.raises(InputError, match=re.escape("tokens[1] = 10 lies outside its declared range [0, 10)")):
            batched({**good, "tokens": np.array([1, 10], np.int32)})


#: A training step's state, as a flax TrainState holds it: a Python int step and a Python float learning rate.
STATE = textwrap.dedent("""
    import numpy as np

    STATE = {"w": np.ones(3, np.float32), "step": 0, "lr": 0.5}


    def f(state, x):
        return {"w": state["w"] - state["lr"] * x, "step": state["step"] + 1, "lr": state["lr"]}
""")


@pytest.fixture
def stateful(make_artifact):
    return make_artifact(STATE, "jaxport: 1\nargs:\n  - like: model.py:STATE\n  - 'f32[3]'\n")


def test_weak_inputs_are_recorded_and_shown(stateful, run_cli):
    with jaxport.open_artifact(stateful) as art:
        assert art.model.format_version == "1.3"
        assert [(i.name, i.dtype, i.weak) for i in art.model.functions["f"].inputs] == [
            ("state/lr", "float32", True), ("state/step", "int32", True), ("state/w", "float32", False),
            ("x", "float32", False)]
    assert ("f(state: {lr: weak f32[], step: weak i32[], w: f32[3]}, x: f32[3]) -> {lr: f32[], step: i32[], "
            "w: f32[3]}") in run_cli("inspect", stateful).stdout


def test_a_state_saved_by_numpy_feeds_a_weak_input_without_cast(stateful, run_cli, tmp_path):
    """np.savez stores the step as int64 and the learning rate as float64: each value is kept, so each is taken."""
    np.savez(tmp_path / "state.npz", w=np.ones(3, np.float32), step=np.int64(7), lr=np.float64(0.5))
    np.save(tmp_path / "x.npy", np.full(3, 2, np.float32))
    res = run_cli("call", stateful, "--inputs", f"state={tmp_path / 'state.npz'}", "--inputs",
                  f"x={tmp_path / 'x.npy'}", "--no-cache", "-o", tmp_path / "out.npz")
    assert res.exit_code == 0, res.stderr
    with np.load(tmp_path / "out.npz") as out:
        assert (out["step"].dtype, int(out["step"]), out["w"].tolist()) == (np.int32, 8, [0.0, 0.0, 0.0])
    np.savez(tmp_path / "big.npz", w=np.ones(3, np.float32), step=np.int64(2 ** 40), lr=np.float64(0.5))
    res = run_cli("call", stateful, "--inputs", f"state={tmp_path / 'big.npz'}", "--inputs",
                  f"x={tmp_path / 'x.npy'}", "--no-cache")
    assert (res.exit_code, res.stderr) == (9, (
        f"error[input]: input 'state/step' is weakly typed int32 (a Python number at export), which takes an array "
        f"of any integer or float dtype whose values it keeps; state/step = 1099511627776 (int64, from "
        f"{tmp_path / 'big.npz'}[step]) would become 0. Give values int32 holds.\n"))


def test_weak_inputs_in_python_and_serving(stateful):
    loaded = jaxport.load(stateful)
    out = loaded({"w": np.ones(3, np.float32), "step": np.int64(3), "lr": np.array(0.25)}, np.ones(3, np.float32))
    assert (int(out["step"]), np.asarray(out["w"]).tolist()) == (4, [0.75] * 3)
    with pytest.raises(InputError, match=re.escape(
            "input 'state/lr' is weakly typed float32 (a Python number at export), which takes an array of any "
            "integer or float dtype whose values it keeps; state/lr = 0.1 (float64) would become "
            "0.10000000149011612. Give values float32 holds.")):
        loaded({"w": np.ones(3, np.float32), "step": 3, "lr": np.array(0.1)}, np.ones(3, np.float32))
    batched = Batched(jaxport.load(stateful), {})
    request = {"state/w": np.ones(3, np.float32), "state/step": np.array(5, np.int64),
               "state/lr": np.array(0.5, np.float64), "x": np.ones(3, np.float32)}
    for _ in range(2):  # converted each time: an admitted signature that was converted is not taken as it is
        assert int(batched(request)["step"]) == 6
    with pytest.raises(InputError, match=re.escape("state/step = 4294967296 (int64) would become 0")):
        batched({**request, "state/step": np.array(2 ** 32, np.int64)})


def test_a_range_taken_from_a_like_example_is_no_contract(stateful):
    """A like: value's leaves get a range around the example's values, to draw random inputs near it (a scalar:
    the example's value alone, the range [LO, HI) that holds no other float32): a resumed state (step 7, the
    example's is 0) is a call that range does not refuse, even with check_ranges."""
    f = jaxport.load(stateful).function_record
    assert [(i.name, i.range, i.range_example) for i in f.inputs[:3]] == [
        ("state/lr", (0.5, 0.50000005), True), ("state/step", (0, 1), True), ("state/w", (0.9, 1.1), True)]
    loaded = jaxport.load(stateful, check_ranges=True)
    out = loaded({"w": np.ones(3, np.float32), "step": 7, "lr": 0.5}, np.ones(3, np.float32))
    assert int(out["step"]) == 8


@pytest.mark.parametrize(("value", "dtype", "expected", "shown"), [
    (0.999, "float32", (0.999, 0.99900007), "0.999 (example)"),  # Adam's b2: never drawn past 1
    (1e-2, "float32", (0.009999999, 0.01), "0.01 (example)"),  # a learning rate
    (0.0, "float32", (0.0, 1e-45), "0 (example)"),  # eps_root
    (0.9, "bfloat16", (0.898, 0.9), "0.9 (example)"),
    (3, "int32", (3, 4), "3 (example)"),
    (np.array([0.2, 0.9]), "float32", (0.13, 0.97), "[0.13, 0.97) (example)"),  # probabilities stay below 1
    (np.array([0.5, 0.99]), "float32", (0.451, 1.0), "[0.451, 1) (example)"),
    (np.full(4, 1e-8), "float32", (9e-09, 1.1e-08), "[9e-09, 1.1e-08) (example)"),  # a tenth of its magnitude
    (np.zeros(4), "float32", (0.0, 0.1), "[0, 0.1) (example)"),  # Adam's moments at init
    (np.array([-2.0, 3.0]), "float32", (-2.5, 3.5), "[-2.5, 3.5) (example)"),
])
def test_an_example_range_keeps_a_scalar_and_the_values_domain(value, dtype, expected, shown):
    """What verify and call --random draw for a like: leaf: a scalar (a hyperparameter, a distribution's parameter)
    exactly its example's value, an array around its values, never below 0 when none is and never to 1 when each lies
    in [0, 1); inspect shows the range, a scalar's as its value."""
    from jaxport.artifact.model import Input
    from jaxport.artifact.summary import range_text
    from jaxport.export.lowering.like import example_range
    from jaxport.run.values.ranges import check_range, draw

    got = example_range(value, dtype)
    assert got == expected
    leaf = Input("leaf", (64,), dtype, range=got, range_example=True)
    assert range_text(leaf) == shown
    drawn = draw(np.random.default_rng(0), leaf, (64,), check_range(leaf, got, "test"))
    if np.ndim(value) == 0:  # the example's own value, rounded to the dtype, every time
        assert (drawn == np.asarray(value).astype(drawn.dtype)).all()
    else:
        assert ((drawn >= got[0]) & (drawn < got[1])).all()
