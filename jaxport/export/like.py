"""Arguments shaped like a Python value (``like: train.py:OPT_STATE``, ``jaxport.like(value)``): custom pytree nodes
as free inputs.

The value (read as a ``bind:`` source is, so that ``model.py:NAME`` comes from the entry point's own module) gives
the argument's structure and, from its array leaves, each input's dtype and shape; ``sizes: {SIZE: DIM}`` makes
every axis of that size the symbolic dimension DIM, and ``leaves: {PATH: LEAF}`` gives a leaf's spec outright (a
shape, a dtype, a range). The exported program takes the leaves as the nested dicts and lists of their key paths
(``artifact.pathtree``), so the artifact records only plain structure and its inputs are named by path
(``opt_state/0/mu/w1``); the program rebuilds the user's node (``LikeTree.rebuild``) before calling the function.
Leaves that are not arrays (a Python number in a module) are baked into the program, as a bound value's are.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import dimexpr, dtypes
from .._jax_internals import serializable_node_types
from ..artifact import pathtree
from ..artifact.calltree import key_name
from ..errors import SpecError
from ..spec import ArrayLeaf, FunctionSpec, ShapeSpec, Where
from ..spec.like import LikeLeaf
from ..spec.tree import leaves, map_leaves
from .bind import entry_modules, load_bind_source


@dataclasses.dataclass(frozen=True)
class LikeTree:
    """A ``like:`` argument, loaded: the plain tree of its inputs and how to rebuild the user's value from it."""

    leaf: LikeLeaf
    #: Nested dicts and lists of ``ArrayLeaf`` (``pathtree.nest`` of the value's array leaves).
    mirror: Any
    treedef: Any
    #: Each leaf of ``treedef``: its key path (read from the mirror), or None for a baked leaf.
    paths: tuple[tuple[Any, ...] | None, ...]
    baked: Mapping[int, Any]
    #: The custom node types of the value (``node_types``): outputs of these types are recorded by path too.
    types: frozenset[type] = frozenset()

    def rebuild(self, value: Any) -> Any:
        """The user's pytree from ``value``, a tree shaped as ``mirror`` (of tracers, in the program)."""
        from jax import tree_util

        leaves = []
        for i, path in enumerate(self.paths):
            if path is None:
                leaves.append(self.baked[i])
                continue
            node = value
            for step in path:
                node = node[step]
            leaves.append(node)
        return tree_util.tree_unflatten(self.treedef, leaves)


def expand_likes(fspec: FunctionSpec, spec: ShapeSpec, modules: Mapping[Path, ModuleType] | None = None
                 ) -> FunctionSpec:
    """``fspec`` with each ``like:`` argument loaded (a ``LikeTree`` in its place)."""

    def loaded(leaf: Any) -> Any:
        if not isinstance(leaf, LikeLeaf):
            return leaf
        base = leaf.base_dir or spec.base_dir or Path.cwd()
        return like_tree(leaf, load_bind_source(leaf.source, base, str(leaf.where), modules))

    return dataclasses.replace(fspec, args=map_leaves(loaded, fspec.args), kwargs=map_leaves(loaded, fspec.kwargs))


def like_tree(leaf: LikeLeaf, value: Any) -> LikeTree:
    """The ``LikeTree`` of ``value`` as ``leaf`` describes it (see the module docstring)."""
    from jax import tree_util

    where = str(leaf.where)
    flat, treedef = tree_util.tree_flatten_with_path(value)
    sizes = dict(leaf.sizes)
    given = dict(leaf.leaves)
    arrays: list[tuple[Any, ArrayLeaf]] = []
    kept: list[int] = []
    baked: dict[int, Any] = {}
    names = pathtree.leaf_paths(flat)
    for i, ((path, item), name) in enumerate(zip(flat, names)):
        shape, dtype = getattr(item, "shape", None), getattr(item, "dtype", None)
        if shape is None or dtype is None:
            baked[i] = item
            continue
        canonical = dtypes.from_numpy(dtype)
        if canonical is None:
            raise SpecError(f"{where}: leaf {name!r} of {leaf.source} has dtype {dtype}, which an artifact's input "
                            f"cannot have. Convert it (e.g. to float32), or give the leaf under 'leaves'.")
        if name in given:
            spec_leaf = given[name]
            if len(spec_leaf.shape) != len(shape):
                raise SpecError(f"{where}: leaves[{name!r}] has {len(spec_leaf.shape)} axes, but the leaf of "
                                f"{leaf.source} has shape {tuple(shape)}. Give it the leaf's rank.")
        else:
            dims = tuple(sizes.get(int(d), int(d)) for d in shape)
            spec_leaf = ArrayLeaf(dims, canonical.name, Where(leaf.where.file, leaf.where.line))
        kept.append(i)
        arrays.append((path, spec_leaf))
    unknown = sorted(set(given) - {names[i] for i in kept})
    if unknown:
        close = difflib.get_close_matches(unknown[0], names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise SpecError(f"{where}: leaves[{unknown[0]!r}] is not an array leaf of {leaf.source}{hint}; its leaves: "
                        f"{shown or '(none)'}.")
    if not arrays:
        raise SpecError(f"{where}: {leaf.source} has no array leaves, so the argument would take no input. Give it "
                        f"as {{static: ...}} or leave it out.")
    used = {v for d in sizes.values() for v in dimexpr.variables(dimexpr.parse(d))}
    if used and not any(isinstance(d, str) for _, a in arrays for d in a.shape):
        raise SpecError(f"{where}: no axis of {leaf.source}'s leaves has a size that 'sizes' names "
                        f"({', '.join(str(s) for s in sizes)}); its leaves' shapes: "
                        f"{', '.join(str(tuple(getattr(x, 'shape', ()))) for _, x in flat[:8])}.")
    mirror = pathtree.nest(arrays)
    paths: list[tuple[Any, ...] | None] = [None] * len(flat)
    for i, (path, _) in zip(kept, arrays):
        paths[i] = _steps(mirror, path)
    return LikeTree(leaf, mirror, treedef, tuple(paths), baked, node_types(value))


def _steps(mirror: Any, path: Any) -> tuple[Any, ...]:
    """The indices that reach the leaf at the JAX key ``path`` in ``mirror`` (list positions, dict keys)."""
    out: list[Any] = []
    node = mirror
    for key in path:
        step: Any = key_name(key)
        if isinstance(node, list):
            step = int(step)
        out.append(step)
        node = node[step]
    return tuple(out)


def node_types(value: Any) -> frozenset[type]:
    """The types of the custom pytree nodes in ``value`` (not dicts, lists, tuples or None)."""
    from jax import tree_util

    found: set[type] = set()

    def walk(node: Any) -> None:
        if node is None or tree_util.all_leaves([node]):
            return
        if type(node) not in (dict, list, tuple):
            found.add(type(node))
        children, _ = tree_util.tree_flatten(node, is_leaf=lambda x: x is not node)
        for child in children:
            walk(child)

    walk(value)
    return frozenset(found)


def plain_outputs(value: Any, types: frozenset[type]) -> Any:
    """``value`` (a function's output) with each custom pytree node of one of ``types`` (those of the ``like:``
    arguments: an optax state, a ``GraphsTuple``) that ``jax.export`` cannot serialize replaced by the nested dicts
    and lists of its leaves' key paths (``artifact.pathtree``), so its outputs are named by path (``1/0/mu/w1``).
    Any other output is returned as it is: what exported before exports the same (or is refused the same)."""
    from jax import tree_util

    convert = types - serializable_node_types()
    if not convert:
        return value

    def walk(node: Any) -> Any:
        if node is None or tree_util.all_leaves([node]):
            return node
        kind = type(node)
        if kind in (list, tuple):
            return kind(walk(v) for v in node)
        if kind is dict:
            return {k: walk(v) for k, v in node.items()}
        if kind not in convert:
            return node
        flat = tree_util.tree_flatten_with_path(node)[0]
        return pathtree.nest(flat) if flat else {}

    return walk(value)


def called_like(fn: Any, fspec: FunctionSpec, spec: ShapeSpec) -> Any:
    """``fn`` called as the exported program calls it: each ``like:`` argument of ``fspec``, given in its recorded
    form (the dicts and lists of its key paths), rebuilt into the user's pytree, and the outputs in the form the
    export recorded (``plain_outputs``). ``fn`` itself when the spec has no ``like:`` argument. For ``verify``'s
    live function, whose arguments the manifest's call tree gives."""
    if not any(_has_like(t) for t in [*fspec.args, *fspec.kwargs.values()]):
        return fn
    expanded = expand_likes(fspec, spec, entry_modules(fn))

    def rebuilt(tree: Any, value: Any) -> Any:
        if isinstance(tree, LikeTree):
            return tree.rebuild(value)
        if isinstance(tree, dict) and isinstance(value, Mapping):
            return {k: rebuilt(tree.get(k), v) for k, v in value.items()}
        if isinstance(tree, list) and isinstance(value, (list, tuple)):
            return type(value)(rebuilt(t, v) for t, v in zip(tree, value))
        return value

    def call(*args: Any, **kwargs: Any) -> Any:
        args = tuple(rebuilt(t, a) for t, a in zip(expanded.args, args)) + args[len(expanded.args):]
        kwargs = {k: rebuilt(expanded.kwargs.get(k), v) for k, v in kwargs.items()}
        return plain_outputs(fn(*args, **kwargs), like_types(expanded))

    return call


def _has_like(tree: Any) -> bool:
    return any(isinstance(leaf, LikeLeaf) for _, leaf in leaves(tree))


def like_types(fspec: FunctionSpec) -> frozenset[type]:
    """The custom node types of every ``like:`` argument of ``fspec`` (expanded by ``expand_likes``)."""
    return frozenset(kind for _, leaf in leaves([fspec.args, fspec.kwargs]) if isinstance(leaf, LikeTree)
                     for kind in leaf.types)
