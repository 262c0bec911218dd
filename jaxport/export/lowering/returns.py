"""What a function returns, as an artifact records it: every custom pytree node of the returned value (a namedtuple,
a dataclass, a library's node such as blackjax's ``HMCState`` or an optax state) by path, so that exporting needs no
serialization registration and loading needs no library.

The exported program returns ``plain(value)``: each custom node replaced by the nested dicts and lists of its
leaves' key paths (``artifact.pathtree``), and each typed PRNG key array by its key data (``uint32``). The manifest's
``output_tree`` keeps the returned value's own shape (``Returned.tree``): a node's type (module and qualified name)
and its children's keys, from which ``jaxport.load`` rebuilds the user's types (``run.typed``); the outputs are
named by path in the program's order (``1/position``), as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...artifact import pathtree
from ...artifact.calltree import key_name
from ...artifact.model import OutputNode
from ..entry.entrypoint import ENTRY_MODULE_PREFIX


@dataclasses.dataclass(frozen=True)
class Returned:
    """The recorded form of a returned value: the default name and key path of each output (in the program's order,
    that of ``plain(value)``), the ``output_tree`` and the key dtype of each output that is a PRNG key's data."""

    names: list[str]
    paths: list[list[str]]
    tree: OutputNode
    keys: dict[int, str]
    #: The returned value's own tree structure and, for each of its leaves, its output index (``artifact.typed``
    #: rebuilds the value exactly from them after an export in the same process); None when not recorded.
    treedef: Any = None
    order: tuple[int, ...] = ()


def plain(value: Any) -> Any:
    """``value`` with each custom pytree node given as ``pathtree.nest`` of its leaves' key paths and each typed
    PRNG key array as its key data: the value the exported program returns (only dicts, lists, tuples and None)."""
    from jax import tree_util

    def walk(node: Any) -> Any:
        if node is None:
            return None
        if tree_util.all_leaves([node]):
            return _key_data(node)
        kind = type(node)
        if kind in (list, tuple):
            return kind(walk(v) for v in node)
        if kind is dict:
            return {k: walk(v) for k, v in node.items()}
        flat = [(p, _key_data(v)) for p, v in tree_util.tree_flatten_with_path(node)[0]]
        return pathtree.nest(flat) if flat else {}

    return walk(value)


def recorded(value: Any) -> Returned:
    """How the returned ``value`` (of arrays or tracers) is recorded (see the module docstring)."""
    from jax import tree_util

    flat, _ = tree_util.tree_flatten_with_path(plain(value))
    paths = [[key_name(k) for k in path] for path, _ in flat]
    names = ["/".join(p) or "output" for p in paths]  # a single array: its path is empty, its name "output"
    index = {n: i for i, n in enumerate(names)}
    live, treedef = tree_util.tree_flatten_with_path(value)
    live_names = ["/".join(key_name(k) for k in path) or "output" for path, _ in live]
    keys = {index[n]: str(v.dtype) for n, (_, v) in zip(live_names, live) if n in index and _is_key(v)}
    if len(index) == len(names) == len(live_names) and set(live_names) == set(index):
        try:
            shaped = tree_util.tree_unflatten(treedef, [index[n] for n in live_names])
        except Exception:  # noqa: BLE001 - a node whose unflatten checks its leaves: recorded in its plain form
            shaped = None
        if shaped is not None:
            return Returned(names, paths, _encode(shaped), keys, treedef, tuple(index[n] for n in live_names))
    plain_tree = tree_util.tree_unflatten(tree_util.tree_structure(plain(value)), list(range(len(names))))
    return Returned(names, paths, _encode(plain_tree), keys)


def untyped(node: OutputNode) -> OutputNode:
    """``node`` without its nodes' modules and keys (format 1.2), to compare with a tree an earlier format
    recorded."""
    if node.kind in ("output", "none"):
        return node
    if node.kind == "dict":
        return OutputNode("dict", {k: untyped(v) for k, v in node.value.items()})
    return OutputNode(node.kind, tuple(untyped(v) for v in node.value), node.type_name)


def _encode(tree: Any) -> OutputNode:
    """The ``output_tree`` of a returned value whose leaves are output indexes."""
    from jax import tree_util

    if isinstance(tree, int) and not isinstance(tree, bool):
        return OutputNode("output", tree)
    if tree is None:
        return OutputNode("none")
    if type(tree) is dict:
        return OutputNode("dict", {str(k): _encode(v) for k, v in tree.items()})
    if type(tree) in (list, tuple):
        return OutputNode("list" if type(tree) is list else "tuple", tuple(_encode(v) for v in tree))
    children = tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: x is not tree)[0]
    kind = type(tree)
    module = kind.__module__  # an entry point's file model.py is the module a user imports as model
    module = module[len(ENTRY_MODULE_PREFIX):] if module.startswith(ENTRY_MODULE_PREFIX) else module
    return OutputNode("node", tuple(_encode(c) for _, c in children), kind.__qualname__, module,
                      tuple(key_name(path[0]) for path, _ in children))


def _is_key(value: Any) -> bool:
    import jax

    dtype = getattr(value, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _key_data(value: Any) -> Any:
    """A typed PRNG key array's key data; any other leaf as it is."""
    import jax

    return jax.random.key_data(value) if _is_key(value) else value
