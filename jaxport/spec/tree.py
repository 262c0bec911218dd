"""The argument trees of a parsed spec, and the one walk over them that their readers share.

A function's arguments (``model.FunctionSpec``: ``args``, a list, and ``kwargs``, a dict) are trees whose inner nodes
are the spec's mappings (``dict``, by the YAML's keys) and lists (``list``), and whose leaves are everything else:
the records of ``model`` (``ArrayLeaf``, ``StaticLeaf``, ``BindLeaf``) and ``like.LikeLeaf``, or what a reader puts
in their place (the export's loaded ``like:`` value, None). :func:`fold` is the recursion; :func:`leaves` and
:func:`map_leaves` are its two common uses. A walk of a spec tree alongside another tree (the values a program
receives, the manifest's call tree) has its own rules for where the two differ, and is written where it is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
#: Where a leaf is: the mapping keys and list indexes from the root (``("params", "w1")``, ``(0, "mu")``).
Path = tuple[Any, ...]


def _same(node: Any) -> Any:
    return node


def fold(tree: Any, leaf: Callable[[Any], T], dict_node: Callable[[dict[Any, T]], T] = _same,
         list_node: Callable[[list[T]], T] = _same) -> T:
    """``tree`` folded from its leaves up: ``leaf(x)`` for each leaf, then ``dict_node({key: folded child})`` for each
    mapping and ``list_node([folded child, ...])`` for each list, children in their order. By default a mapping and a
    list stay what they are (rebuilt as a new dict and list)."""
    if isinstance(tree, dict):
        return dict_node({k: fold(v, leaf, dict_node, list_node) for k, v in tree.items()})
    if isinstance(tree, list):
        return list_node([fold(v, leaf, dict_node, list_node) for v in tree])
    return leaf(tree)


def map_leaves(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with each leaf ``x`` replaced by ``fn(x)`` (mappings and lists rebuilt, ``tree`` left as it is)."""
    return fold(tree, fn)


def leaves(tree: Any) -> list[tuple[Path, Any]]:
    """Every leaf of ``tree`` with its path, depth first in the tree's order (a mapping's keys as given)."""
    return fold(tree, lambda x: [((), x)],
                lambda children: [((k, *path), x) for k, found in children.items() for path, x in found],
                lambda children: [((i, *path), x) for i, found in enumerate(children) for path, x in found])
