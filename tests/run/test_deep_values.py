"""Values from outside that nest too deep or hold themselves (issue 46): pytrees given to a loaded function, to
``save_inputs`` and bound in memory (``export(bind=...)``, ``rebind``) are walked by jaxport one level at a time
(``pathtree.walk``) before JAX's native flatten sees them, and refused with one line naming the path; the process
keeps working: each refusal is followed by a valid call in the same process that gives the right numbers.

Before: a state that held itself through a custom pytree node raised ``RecursionError`` and left the interpreter's
recursion count spent, so that every later call failed (a bound value doing the same lost the interpreter's stderr);
a dict nested 5000 deep made ``save_inputs`` raise jaxlib's ``SystemError``; a list that held itself reached numpy
and raised its ``ValueError``."""

from __future__ import annotations

import dataclasses
import functools
import re

import jax
import numpy as np
import pytest

import jaxport
from jaxport import InputError, SpecError, UsageError


class Node:
    """A custom pytree node whose children are a list: it can hold itself, as a graph's node or a linked state can."""

    def __init__(self, *kids):
        self.kids = list(kids)


jax.tree_util.register_pytree_node(Node, lambda n: (n.kids, None), lambda _, kids: Node(*kids))


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class State:
    w: object
    extra: object


def _nested(depth: int, make, leaf):
    return functools.reduce(lambda inner, _: make(inner), range(depth), leaf)


def step(state, x):
    return state.w * x


X = np.arange(3, dtype=np.float32)
W = np.full(3, 2.0, np.float32)
GOOD = State(W, [np.zeros(2, np.float32)])


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    out = tmp_path_factory.mktemp("deep") / "state.jaxport"
    jaxport.export(step, jaxport.Spec(args=[jaxport.like(GOOD), "f32[3]"]), output=out, write_manifest=False)
    return jaxport.load(out)


def _cyclic_node() -> Node:
    n = Node(np.zeros(2, np.float32))
    n.kids.append(n)
    return n


def _self_state() -> State:
    s = State(W, None)
    s.extra = [s]
    return s


DEEP = "is nested more than 29 levels deep, which no artifact's argument is (its manifest nests at most 64 levels). " \
       "Flatten the value."
CYCLE = "contains itself (a cycle), so it has no finite structure. Give a value without the cycle."


@pytest.mark.parametrize("state, message", [
    (State(W, [_cyclic_node()]), f"positional argument 1.extra[0].1: {CYCLE}"),
    (_self_state(), f"positional argument 1.extra[0]: {CYCLE}"),
    (State(W, [_nested(5000, Node, np.zeros(2, np.float32))]),
     f"positional argument 1.extra[0].0.0.0.0....0.0.0.0: {DEEP}"),
    (State(W, [_nested(5000, lambda v: {"a": v}, np.zeros(2, np.float32))]),
     f"positional argument 1.extra[0]['a']['a']['a']['a']...['a']['a']['a']['a']: {DEEP}"),
    (State(W, [_nested(5000, lambda v: (v,), np.zeros(2, np.float32))]),
     f"positional argument 1.extra[0][0][0][0][0]...[0][0][0][0]: {DEEP}"),
], ids=["cycle-through-node", "state-holds-itself", "nodes-5000", "dicts-5000", "tuples-5000"])
def test_a_state_that_holds_itself_or_nests_too_deep_is_refused_and_the_process_runs_on(loaded, state, message):
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        loaded(state, X)
    np.testing.assert_array_equal(loaded(GOOD, X), W * X)


def test_the_same_as_a_keyword_argument(loaded):
    with pytest.raises(InputError, match=f"^{re.escape(f'argument {chr(39)}state{chr(39)}.extra[0].1: {CYCLE}')}$"):
        loaded(state=State(W, [_cyclic_node()]), x=X)
    np.testing.assert_array_equal(loaded(state=GOOD, x=X), W * X)


def _leaf(kind: str) -> object:
    if kind == "list-cycle":
        value: list = []
        value.append(value)
        return value
    if kind == "dict-cycle":
        d: dict = {"a": 1.0}
        d["self"] = d
        return d
    return _nested(100_000, lambda v: [v], 1.0)


NUMPY_64 = ("cannot be read as an array: ValueError: setting an array element with a sequence. The requested array "
            "would exceed the maximum number of dimension of 64. Give an array.")


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A function of a dict and an array: its arguments bind without a custom node, so each leaf reaches the input
    checks as it is."""
    out = tmp_path_factory.mktemp("plain") / "plain.jaxport"
    jaxport.export(lambda d, x: d["a"] * x, {"jaxport": 1, "args": [{"a": "f32[3]"}, "f32[3]"]}, output=out,
                   write_manifest=False)
    return jaxport.load(out)


@pytest.mark.parametrize("kind, message", [
    ("list-cycle", f"input 'x' (list) {NUMPY_64}"),
    ("dict-cycle", "input 'x' is a dict, not an array of numbers (numpy reads it only as an array of Python objects); "
                   "give an array."),
    ("lists-100000", f"input 'x' (list) {NUMPY_64}"),
])
def test_an_input_leaf_numpy_cannot_read_is_an_input_error(plain, kind, message):
    """Before: numpy's ValueError escaped (a list), or a dict was read as a rank-0 array of objects."""
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        plain({"a": W}, _leaf(kind))
    np.testing.assert_array_equal(plain({"a": W}, X), W * X)


@pytest.mark.parametrize("kind, message", [
    ("list-cycle", f"positional argument 2[0]: {CYCLE}"),
    ("dict-cycle", f"positional argument 2['self']: {CYCLE}"),
    ("lists-100000", f"positional argument 2[0][0][0][0][0][0]...[0][0][0][0]: {DEEP}"),
])
def test_beside_a_custom_node_the_leaf_is_walked_with_it(loaded, kind, message):
    """A call whose state is a custom node binds through its key paths: every argument is walked first."""
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        loaded(GOOD, _leaf(kind))
    np.testing.assert_array_equal(loaded(GOOD, X), W * X)


@pytest.mark.parametrize("tree, message", [
    (_nested(5000, lambda v: {"a": v}, np.ones(2, np.float32)),
     f"save_inputs(): state['a']['a']['a']['a']['a']['a']...['a']['a']['a']['a']: {DEEP}"),
    (_nested(5000, lambda v: [v], np.ones(2, np.float32)), f"save_inputs(): state[0][0][0][0][0][0]...[0][0][0][0]: "
                                                          f"{DEEP}"),
    ({"n": _cyclic_node()}, f"save_inputs(): state['n'].1: {CYCLE}"),
], ids=["dicts-5000", "lists-5000", "cycle-through-node"])
def test_save_inputs_refuses_what_it_cannot_walk_and_runs_on(tmp_path, tree, message):
    with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
        jaxport.save_inputs(tmp_path / "s.npz", state=tree)
    assert not (tmp_path / "s.npz").exists()
    assert jaxport.save_inputs(tmp_path / "s.npz", state=GOOD) == ["state/w", "state/extra/0"]


def _scale(params, x):
    return x * params["w"]


SPEC = {"jaxport": 1, "args": [{"bind": "params"}, "f32[3]"]}


def test_a_bound_value_that_holds_itself_is_refused_at_export_and_rebind(tmp_path):
    """Before: the interpreter lost its stderr and its recursion count (every later call failed)."""
    bad = {"w": W, "n": _cyclic_node()}
    message = f"--bind params: bound value 'params'['n'].1: {CYCLE}"
    with pytest.raises(SpecError, match=f"^{re.escape(message)}$"):
        jaxport.export(_scale, SPEC, bind={"params": bad}, output=tmp_path / "b.jaxport")
    art = jaxport.export(_scale, SPEC, bind={"params": {"w": W}}, output=tmp_path / "b.jaxport").path
    deep = {"w": _nested(5000, lambda v: {"a": v}, W)}
    message = ("params=<in-memory>: bound value 'params'['w']['a']['a']['a']['a']['a']...['a']['a']['a']['a']: is "
               "nested more than 64 levels deep, which the spec language does not take (it nests at most 64 levels). "
               "Flatten the value.")
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        jaxport.rebind(art, {"params": deep}, tmp_path / "c.jaxport")
    jaxport.rebind(art, {"params": {"w": W * 3}}, tmp_path / "c.jaxport")
    np.testing.assert_array_equal(jaxport.load(tmp_path / "c.jaxport")(X), X * W * 3)
