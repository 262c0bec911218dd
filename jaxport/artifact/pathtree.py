"""Pytrees as the nested dicts and lists of their leaves' key paths, the form a custom pytree node (an optax state,
a ``jraph.GraphsTuple``, an equinox module) takes in an artifact's call tree. No JAX: callers flatten with
``jax.tree_util.tree_flatten_with_path`` and pass the key paths.

A level whose keys are the sequence indices 0..n-1 is a list; any other level (attribute names, dict keys, indices
with gaps, where a subtree had no leaves) is a dict keyed by the keys' names (``calltree.key_name``). So
``(ScaleByAdamState(count, mu={"w": ...}, nu=...), EmptyState())`` becomes ``[{"count": ..., "mu": {"w": ...},
"nu": ...}]``, whose leaves are named ``0/count``, ``0/mu/w``, ``0/nu/w`` below the argument.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import InputError
from .calltree import key_name

#: The deepest a value given for one argument may nest (levels of nodes above its leaves): the manifest records an
#: argument in the function's call tree, which a reader takes nested at most 64 deep (``_json.strict_json``,
#: FORMAT.md), and the call tree spends 6 of them above the argument and 2 on each level below it (a node and its
#: list of children). So no artifact takes an argument nested deeper, and no value nested deeper is walked.
MAX_VALUE_DEPTH = 29


class TreeShapeError(ValueError):
    """A value :func:`walk` will not walk: ``kind`` is ``"cycle"`` (a node that holds itself), ``"depth"`` (nested
    deeper than the limit) or ``"flatten"`` (a custom node whose own flatten raised ``detail``), at ``path``."""

    def __init__(self, kind: str, path: str, detail: str = ""):
        super().__init__(f"{path or 'the value'}: {kind}{': ' + detail if detail else ''}")
        self.kind, self.path, self.detail = kind, path, detail


def walk(value: Any, depth_limit: int = MAX_VALUE_DEPTH) -> Iterator[tuple[Any, str, list[tuple[str, Any]] | None]]:
    """Every node of the pytree ``value`` but ``None`` as ``(node, path, children)``, depth first in JAX's order:
    ``children`` is None for a leaf, else the node's ``(step, child)`` pairs (``[0]``, ``['key']``, ``.attr``), and
    ``path`` the steps from the root. Raises :class:`TreeShapeError` at a node that holds itself, one nested deeper
    than ``depth_limit`` and a custom node that cannot be flattened.

    The walk is iterative and goes one level of each node at a time (JAX flattens a custom node with
    ``tree_flatten_with_path`` told that every node below the first is a leaf), so it finishes on values that JAX's
    own flatten cannot take: that recursion is native, and on a value that holds itself through a custom node (or
    nests thousands deep) it fails with ``RecursionError`` or ``SystemError`` and can leave the interpreter's
    recursion count spent, after which every later call in the process fails. Every place jaxport hands a user's
    value to JAX's pytree code walks it first."""
    from jax import tree_util

    stack: list[tuple[Any, str, int, frozenset[int]]] = [(value, "", 0, frozenset())]
    while stack:
        node, path, depth, above = stack.pop()
        if node is None:
            continue
        if tree_util.all_leaves([node]):
            yield node, path, None
            continue
        if id(node) in above:
            raise TreeShapeError("cycle", path)
        if depth >= depth_limit:
            raise TreeShapeError("depth", path)
        children: list[tuple[str, Any]]
        if type(node) is dict:
            children = [(f"[{k!r}]", v) for k, v in node.items()]
        elif type(node) in (list, tuple):
            children = [(f"[{i}]", v) for i, v in enumerate(node)]
        else:
            try:  # one level: every node below the first is a leaf (a child that is the node itself included)
                flat = tree_util.tree_flatten_with_path(node, is_leaf=_below_the_first())[0]
            except Exception as e:  # noqa: BLE001 - the node's own flatten failed
                raise TreeShapeError("flatten", path, f"{type(e).__name__}: {str(e)[:200]}") from None
            children = [(f".{key_name(p[0])}", v) for p, v in flat]
        yield node, path, children
        below = above | {id(node)}
        stack.extend((child, path + step, depth + 1, below) for step, child in reversed(children))


def _below_the_first() -> Callable[[Any], bool]:
    """An ``is_leaf`` that is false for the first node it is asked about (the root of a flatten) and true for every
    later one: ``tree_flatten`` then goes one level down, even into a node whose child is the node itself."""
    asked: list[bool] = []

    def is_leaf(_: Any) -> bool:
        if asked:
            return True
        asked.append(True)
        return False

    return is_leaf


def shown_path(path: str) -> str:
    """A :func:`walk` path as messages show it: long ones cut in the middle (a value may nest 29 levels)."""
    steps = re.findall(r"\[[^\]]*\]|\.[^.\[]+", path)
    return path if len(steps) <= 12 else "".join(steps[:6]) + "..." + "".join(steps[-4:])


def is_index(key: Any) -> bool:
    """Whether one step of a key path is a sequence index (a tuple's, a list's, a flattened node's)."""
    return hasattr(key, "idx") and not hasattr(key, "key") and not hasattr(key, "name")


def nest(flat: Sequence[tuple[Sequence[Any], Any]]) -> Any:
    """The nested dicts and lists of ``(key path, leaf)`` pairs (see the module docstring); a single leaf at the
    empty path is returned as it is."""
    if len(flat) == 1 and not flat[0][0]:
        return flat[0][1]
    groups: dict[str, list[tuple[Sequence[Any], Any]]] = {}
    indices = True
    for path, leaf in flat:
        if not path:
            raise ValueError("a leaf and a subtree at the same path")
        indices = indices and is_index(path[0])
        groups.setdefault(key_name(path[0]), []).append((path[1:], leaf))
    if indices and sorted(groups) == sorted(str(i) for i in range(len(groups))):
        return [nest(groups[str(i)]) for i in range(len(groups))]
    return {k: nest(v) for k, v in groups.items()}


def leaf_paths(flat: Sequence[tuple[Sequence[Any], Any]]) -> list[str]:
    """Each leaf's path, its keys' names joined with '/' (``0/mu/w``)."""
    return ["/".join(key_name(k) for k in path) for path, _ in flat]


def path_trees(values: Any, numbers: bool = True) -> Any:
    """``values`` (a call's positional arguments, a tuple, or its keyword arguments, a dict) with each argument that
    holds a structured value given as ``nest`` of its array leaves and (``numbers``) Python numbers, which a
    ``like:`` argument takes as scalar inputs or pinned values; other leaves are dropped, as the export baked them
    (``numbers=False``: Python numbers too, as an artifact of jaxport 0.1.0 baked them). So a custom pytree node
    matches the call tree an export recorded for it; a single array, None or any other leaf stays as it is. Imports
    JAX only for an argument that is not a leaf."""

    def kept(v: Any) -> bool:
        return (hasattr(v, "shape") and hasattr(v, "dtype")) or (numbers and type(v) in (bool, int, float, complex))

    def plain(value: Any, argument: str) -> Any:
        if value is None or (hasattr(value, "shape") and hasattr(value, "dtype")) or isinstance(value, (str, int,
                                                                                                       float)):
            return value
        from jax import tree_util

        check_argument(value, argument)  # before JAX's own flatten, which recurses natively
        flat = [(p, v) for p, v in tree_util.tree_flatten_with_path(value)[0] if kept(v)]
        return nest(flat) if flat else value

    if isinstance(values, dict):
        return {k: plain(v, f"argument {k!r}") for k, v in values.items()}
    return tuple(plain(v, f"positional argument {i + 1}") for i, v in enumerate(values))


#: Why a value may nest at most :data:`MAX_VALUE_DEPTH` levels, as messages say it.
VALUE_DEPTH_REASON = "which no artifact's argument is (its manifest nests at most 64 levels)"


def check_argument(value: Any, argument: str, error: Callable[[str], Exception] = InputError, *,
                   depth_limit: int = MAX_VALUE_DEPTH, why: str = VALUE_DEPTH_REASON) -> None:
    """Refuse (``error``, default ``InputError``) a value given for ``argument`` that :func:`walk` does not walk: one
    that contains itself, one nested deeper than ``depth_limit`` (any argument of an artifact: ``why`` says so), one
    with a custom node whose flatten raises. Said before any of JAX's pytree code sees the value."""
    try:
        for _ in walk(value, depth_limit):
            pass
    except TreeShapeError as e:
        where = f"{argument}{shown_path(e.path)}"
        if e.kind == "cycle":
            raise error(f"{where}: contains itself (a cycle), so it has no finite structure. "
                        f"Give a value without the cycle.") from None
        if e.kind == "depth":
            raise error(f"{where}: is nested more than {depth_limit} levels deep, {why}. Flatten the value.") \
                from None
        raise error(f"{where}: cannot be flattened as a pytree ({e.detail}).") from None
