"""Pytrees as the nested dicts and lists of their leaves' key paths, the form a custom pytree node (an optax state,
a ``jraph.GraphsTuple``, an equinox module) takes in an artifact's call tree. No JAX: callers flatten with
``jax.tree_util.tree_flatten_with_path`` and pass the key paths.

A level whose keys are the sequence indices 0..n-1 is a list; any other level (attribute names, dict keys, indices
with gaps, where a subtree had no leaves) is a dict keyed by the keys' names (``calltree.key_name``). So
``(ScaleByAdamState(count, mu={"w": ...}, nu=...), EmptyState())`` becomes ``[{"count": ..., "mu": {"w": ...},
"nu": ...}]``, whose leaves are named ``0/count``, ``0/mu/w``, ``0/nu/w`` below the argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .calltree import key_name


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

    def plain(value: Any) -> Any:
        if value is None or (hasattr(value, "shape") and hasattr(value, "dtype")) or isinstance(value, (str, int,
                                                                                                       float)):
            return value
        from jax import tree_util

        flat = [(p, v) for p, v in tree_util.tree_flatten_with_path(value)[0] if kept(v)]
        return nest(flat) if flat else value

    if isinstance(values, dict):
        return {k: plain(v) for k, v in values.items()}
    return tuple(plain(v) for v in values)
