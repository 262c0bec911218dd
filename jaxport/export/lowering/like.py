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
import inspect
import math
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from ... import dimexpr, dtypes
from ...artifact import pathtree
from ...artifact.calltree import key_name
from ...errors import SpecError
from ...spec import ArrayLeaf, FunctionSpec, ShapeSpec, StaticLeaf, Where
from ...spec.like import LikeLeaf
from ...spec.tree import leaves, map_leaves
from ..weights.bind import entry_modules, load_bind_source


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

    # how deep each like: sits in the spec's argument tree: its value may nest the fewer levels (max_depth)
    above = {id(x): len(path) - 1 for path, x in [*leaves(fspec.args), *leaves(fspec.kwargs)]}

    def loaded(leaf: Any) -> Any:
        if not isinstance(leaf, LikeLeaf):
            return leaf
        base = leaf.base_dir or spec.base_dir or Path.cwd()
        return like_tree(leaf, load_bind_source(leaf.source, base, str(leaf.where), modules),
                         max_depth(above.get(id(leaf), 0)))

    return dataclasses.replace(fspec, args=map_leaves(loaded, fspec.args), kwargs=map_leaves(loaded, fspec.kwargs))


def like_tree(leaf: LikeLeaf, value: Any, depth: int = 0) -> LikeTree:
    """The ``LikeTree`` of ``value`` as ``leaf`` describes it (see the module docstring); ``depth``: the most levels
    the value may nest (default :data:`MAX_DEPTH`)."""
    from jax import tree_util

    where = str(leaf.where)
    check_value(value, leaf, depth or MAX_DEPTH)
    flat, treedef = tree_util.tree_flatten_with_path(value)
    sizes = dict(leaf.sizes)
    given = dict(leaf.leaves)
    arrays: list[tuple[Any, ArrayLeaf]] = []
    kept: list[int] = []
    baked: dict[int, Any] = {}
    pinned: list[tuple[Any, StaticLeaf]] = []
    names = pathtree.leaf_paths(flat)
    for i, ((path, item), name) in enumerate(zip(flat, names)):
        if isinstance(given.get(name), StaticLeaf):
            pinned.append((path, _pinned(leaf, name, item, given[name])))
            baked[i] = item
            continue
        if is_python_number(item):
            spec_leaf = given[name] if name in given else _number_leaf(leaf, name, item)
            if len(spec_leaf.shape) != 0:
                raise SpecError(f"{where}: leaves[{name!r}] has {len(spec_leaf.shape)} axes, but the leaf of "
                                f"{leaf.source} is the Python number {item!r}. Give it no axes (shape []).")
            kept.append(i)
            arrays.append((path, spec_leaf))
            continue
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
            spec_leaf = ArrayLeaf(dims, canonical.name, Where(leaf.where.file, leaf.where.line),
                                  range=example_range(item, canonical.name), range_example=True)
        kept.append(i)
        arrays.append((path, spec_leaf))
    unknown = sorted(set(given) - {names[i] for i in kept} - {pathtree.leaf_paths([p])[0] for p in pinned})
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
    mirror = pathtree.nest([*arrays, *pinned])
    paths: list[tuple[Any, ...] | None] = [None] * len(flat)
    for i, (path, _) in zip(kept, arrays):
        paths[i] = _steps(mirror, path)
    return LikeTree(leaf, mirror, treedef, tuple(paths), baked)


#: The most leaves a ``like:`` value may have: JAX's export time grows with the square of the number of inputs with
#: symbolic dimensions (1000 take about half a minute).
MAX_LEAVES = 4096
#: The deepest a ``like:`` value may nest (levels of nodes above its leaves) when it is a top-level argument: the
#: deepest any argument's value may nest (``pathtree.MAX_VALUE_DEPTH``, from the manifest's 64 levels). A ``like:``
#: deeper in the spec's tree may nest one level less for each level it sits below the top (:func:`max_depth`).
MAX_DEPTH = pathtree.MAX_VALUE_DEPTH


def max_depth(above: int) -> int:
    """The deepest a ``like:`` value may nest when it sits ``above`` levels below a top-level argument (``args:
    [{a: {like: ...}}]`` is 1): at least 1."""
    return max(MAX_DEPTH - above, 1)


def check_value(value: Any, leaf: LikeLeaf, depth_limit: int = MAX_DEPTH) -> None:
    """Refuse a ``like:`` value JAX's pytree code cannot take, that would make the export run for hours or that the
    artifact's manifest could not record, before JAX sees it (``pathtree.walk``: iteratively, one level of each node
    at a time): a value that contains itself, one nested deeper than ``depth_limit`` (:data:`MAX_DEPTH` at the top
    of the arguments), one with more than ``MAX_LEAVES`` leaves, a dict with two keys of one name (``1`` and
    ``"1"``: the inputs are named by the keys' names) and one whose keys cannot be ordered (JAX sorts them)."""

    def fail(path: str, msg: str) -> SpecError:
        return SpecError(f"{leaf.where}: {leaf.source}{pathtree.shown_path(path)}: {msg}")

    count = 0
    try:
        for node, path, children in pathtree.walk(value, depth_limit):
            if children is None:
                if inspect.isgenerator(node) or inspect.isasyncgen(node) or inspect.iscoroutine(node):
                    raise fail(path, f"is a {type(node).__name__}, which a program cannot hold (it is consumed "
                                     f"once; JAX takes it as a leaf only until a future version refuses it). Give "
                                     f"its values as a list or an array.")
                count += 1
                if count > MAX_LEAVES:
                    raise fail("", f"has more than {MAX_LEAVES} leaves, which a 'like:' argument does not take "
                                   f"(JAX's export time grows with the square of the inputs). Bind large trees of "
                                   f"weights with 'bind:' instead, or split the value into several arguments.")
            elif type(node) is dict:
                _check_keys(node, path, fail)
    except pathtree.TreeShapeError as e:
        if e.kind == "cycle":
            raise fail(e.path, "contains itself (a cycle), so it has no finite structure. Give a value without the "
                               "cycle.") from None
        if e.kind == "depth":
            raise fail(e.path, f"is nested more than {depth_limit} levels deep, which a 'like:' argument "
                               f"{'' if depth_limit == MAX_DEPTH else 'at this place of the spec '}does not take "
                               f"(the artifact's manifest nests at most 64 levels). Flatten the value.") from None
        raise fail(e.path, f"cannot be flattened as a pytree ({e.detail}).") from None


def _check_keys(node: dict[Any, Any], path: str, fail: Any) -> None:
    """Refuse a dict of a ``like:`` value whose keys cannot name its inputs (see :func:`check_value`)."""
    names: dict[str, Any] = {}
    for key in node:
        if _ADDRESS.search(str(key)):
            raise fail(path, f"has the key {_short(key)}, whose name holds a memory address, which differs in every "
                             f"process: it cannot name an input that verify and later exports find again. Use "
                             f"string keys.")
        if str(key) in names:
            raise fail(path, f"has the keys {names[str(key)]!r} and {key!r}, which name one input ({str(key)!r}). "
                             f"Rename one.")
        names[str(key)] = key
    try:
        sorted(node)  # JAX flattens a dict in the order of its keys
    except TypeError:
        kinds = sorted({type(k).__name__ for k in node})
        raise fail(path, f"has keys of types that cannot be ordered ({', '.join(kinds)}), and JAX sorts a dict's "
                         f"keys to flatten it. Give the keys one type (strings).") from None


#: A memory address in a default ``repr`` (``<K object at 0x7f...>``): a dict key named by it names no input twice.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def is_python_number(value: Any) -> bool:
    """Whether a leaf is a Python ``bool``, ``int``, ``float`` or ``complex`` (not a numpy scalar, which has a
    dtype): ``jax.jit`` traces it as a weakly typed scalar, and so does a ``like:`` argument."""
    return dtypes.python_number(value) is not None


def _number_leaf(leaf: LikeLeaf, name: str, value: Any) -> ArrayLeaf:
    """The scalar input a Python number of a ``like:`` value becomes, typed as ``jax.jit`` types it."""
    typed = dtypes.python_number(value)
    assert typed is not None
    dtype, weak = typed[0].name, typed[1]
    if dtype == "int32" and not -(1 << 31) <= value < (1 << 31):
        raise SpecError(f"{leaf.where}: leaf {name!r} of {leaf.source} is the Python int {value}, which int32 (the "
                        f"dtype jax.jit gives a Python int) cannot hold. Make it a numpy int64 (with "
                        f"jax_enable_x64), or give the leaf under 'leaves'.")
    return ArrayLeaf((), dtype, Where(leaf.where.file, leaf.where.line), weak=weak,
                     range=example_range(value, dtype), range_example=True)


def example_range(value: Any, dtype: str) -> tuple[int | float, int | float] | None:
    """The values ``verify`` and ``call --random`` draw for a leaf whose example ``value`` (an array or a number)
    the ``like:`` value holds, so that a state is drawn where the function takes it (a variance stays positive, a
    step count stays a count, Adam's ``b2 = 0.999`` stays below 1):

    - a single value (a scalar: a learning rate, a decay, a distribution's scale, a step) keeps exactly that value,
      as the range [LO, HI) around it that holds no other value of ``dtype``;
    - integers ``[min, max + 1)``;
    - floats ``[min, max]`` widened by a tenth of its width (of its magnitude, or 0.1 around 0, for a constant
      array), never below 0 when no value is, and never to 1 when every value lies in [0, 1) (probabilities).

    None for bool, complex and key leaves, an empty value, one with no finite value, and a leaf with no values (a
    ``jax.ShapeDtypeStruct``, as ``jax.eval_shape`` gives a model's parameters)."""
    import numpy as np

    kind = dtypes.BY_NAME[dtype].kind
    if kind not in ("int", "uint", "float"):
        return None
    a = np.asarray(value)
    if a.size == 0 or a.dtype == object:
        return None
    if kind in ("int", "uint"):
        return int(a.min()), int(a.max()) + 1
    wide = a.astype(np.float64)
    finite = wide[np.isfinite(wide)]
    if finite.size == 0:
        return None
    if a.size == 1:
        return _one_value(float(finite[0]), dtype)
    lo, hi = float(np.min(finite)), float(np.max(finite))
    margin = (hi - lo) / 10 or abs(lo) / 10 or 0.1
    top = float(np.finfo(dtypes.to_numpy(dtype)).max)
    low = max(lo - margin, 0.0) if lo >= 0 else max(lo - margin, -top)
    high = min(hi + margin, top)
    if lo >= 0 and hi < 1:
        high = min(high, 1.0)
    return _short_float(low), _short_float(high)


def _one_value(value: float, dtype: str) -> tuple[float, float] | None:
    """The half-open range whose only value of ``dtype`` is ``value`` rounded to it, with the shortest decimal bounds
    that do so (``0.999`` in float32: ``[0.999, 0.99900007)``); None when the rounded value is not finite or is the
    dtype's largest (no bound above it)."""
    import numpy as np

    x = np.asarray(value, dtype=np.float64).astype(dtypes.to_numpy(dtype))[()]
    above, below = dtypes.neighbour(x, up=True), dtypes.neighbour(x, up=False)
    if not (np.isfinite(x) and np.isfinite(above)):
        return None
    return _shortest_in(float(below), float(x)), _shortest_in(float(x), float(above))


def _shortest_in(low: float, high: float) -> float:
    """The decimal with the fewest significant digits in (low, high]."""
    from decimal import ROUND_FLOOR, Decimal

    exact = Decimal(high)
    for digits in range(1, 18):
        if high == 0:
            return 0.0
        unit = Decimal(1).scaleb(exact.adjusted() - digits + 1)
        candidate = float(exact.quantize(unit, rounding=ROUND_FLOOR))
        if low < candidate <= high:
            return candidate
    return high


def _short_float(x: float) -> float:
    """``x`` to 6 significant digits, so the manifest records a readable bound."""
    return float(f"{x:.6g}")


def _pinned(leaf: LikeLeaf, name: str, value: Any, given: StaticLeaf) -> StaticLeaf:
    """``leaves: {PATH: {static: true}}``: the leaf keeps the value's own value, baked into the program; the call
    tree records it, so a call passing another value is refused."""
    if given.value is not True:
        raise SpecError(f"{given.where}: leaves[{name!r}]: {{static: true}} keeps the leaf at the value of "
                        f"{leaf.source} ({_short(value)}); found {{static: {given.value!r}}}. Change the value "
                        f"itself to pin another one.")
    if not is_python_number(value) or (isinstance(value, float) and not math.isfinite(value)):
        raise SpecError(f"{given.where}: leaves[{name!r}]: only a Python number (finite) can be pinned with "
                        f"{{static: true}}; the leaf of {leaf.source} is {_short(value)}, which stays an input. To "
                        f"draw it where the function is defined, give it a range under leaves ({{shape: ..., dtype: "
                        f"..., range: [LO, HI]}}); to verify on real values, save them with jaxport.save_inputs and "
                        f"give them to verify --inputs.")
    return StaticLeaf(value, given.where)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


def called_like(fn: Any, fspec: FunctionSpec, spec: ShapeSpec) -> Any:
    """``fn`` called as the exported program calls it: each ``like:`` argument of ``fspec``, given in its recorded
    form (the dicts and lists of its key paths), rebuilt into the user's pytree (``verify`` records the outputs as
    the export did, ``returns.recorded``). ``fn`` itself when the spec has no ``like:`` argument. For ``verify``'s
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
        return fn(*args, **kwargs)

    return call


def _has_like(tree: Any) -> bool:
    return any(isinstance(leaf, LikeLeaf) for _, leaf in leaves(tree))
