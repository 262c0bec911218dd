"""The call tree: how a function's Python arguments map to the artifact's inputs (the manifest's ``signature``).

A ``model.Signature`` has one ``CallNode`` per positional argument (each also carrying its ``name``) and one per
keyword argument. A node's kind is one of ``NODE_KINDS`` (specs/FORMAT.md, "Call trees"):

- ``input``: the array ``inputs[I]``;
- ``static``: a value baked in at export; the caller does not pass it;
- ``bound``: weights bound at export, stored in the artifact; the caller does not pass them;
- ``list`` / ``dict``: containers of nodes.

This module is the one place that walks a call tree (building one from a spec is the export's, in
``export.lowering.lower.call_tree``): listing its nodes, binding a
caller's arguments to input names, rebuilding Python arguments from flat arrays, and finding where a program takes
its free and bound arguments. It reads the records of a validated manifest. No JAX at module level.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from .._record import dataclass
from ..errors import FormatError, InputError
from .model import CallNode, Signature

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any

#: The keyword argument through which an exported program receives its bound tensors, ``{name: array}``.
WEIGHTS_KWARG = "__jaxport_weights__"


def _name(node: CallNode, default: str) -> str:
    """A positional argument's name."""
    return node.name or default


@dataclass(frozen=True)
class Site:
    """One node of a call tree and where it sits.

    ``path`` is the Python-style path (``args[0]['w']``, ``kwargs['mask'][1]``), ``name`` the ``/``-joined leaf name
    (``x/w``) used for leaf names and bound trees."""

    path: str
    name: str
    node: CallNode

    @property
    def kind(self) -> str:
        return self.node.kind

    @property
    def value(self) -> Any:
        """The node's content (``CallNode.value``)."""
        return self.node.value


def walk(sig: Signature) -> Iterator[Site]:
    """Every node of a call tree, parents before children."""

    def visit(node: CallNode, path: str, name: str) -> Iterator[Site]:
        yield Site(path, name, node)
        if node.kind == "dict":
            for k, v in node.value.items():
                yield from visit(v, f"{path}[{k!r}]", f"{name}/{k}")
        elif node.kind == "list":
            for i, v in enumerate(node.value):
                yield from visit(v, f"{path}[{i}]", f"{name}/{i}")

    for i, a in enumerate(sig.args):
        yield from visit(a, f"args[{i}]", _name(a, f"arg{i}"))
    for k, v in sig.kwargs.items():
        yield from visit(v, f"kwargs[{k!r}]", k)


def leaves(sig: Signature, node_kind: str) -> dict[str, Any]:
    """``{path: value}`` of every node of one kind (``static``, ``bound`` or ``input``), by Python-style path."""
    return {s.path: s.value for s in walk(sig) if s.kind == node_kind}


# -- building a call tree at export ---------------------------------------------------------------------------------


def recorded_source(source: str) -> str:
    """A bound source as the manifest records it: as written when relative, else its file's base name (an artifact
    holds no absolute path)."""
    target, colon, attribute = source.rpartition(":") if not source.lower().endswith(
        (".npz", ".npy", ".safetensors")) else ("", "", source)
    path = target if colon else attribute
    if not (os.path.isabs(path) or Path(path).is_absolute()):
        return source
    name = Path(path).name
    return f"{name}:{attribute}" if colon else name


# -- rebuilding Python arguments from flat arrays -------------------------------------------------------------------


def static_value(value: Any) -> Any:
    """A static value as the function received it at export (the manifest stores tuples as lists)."""
    if isinstance(value, list):
        return tuple(static_value(v) for v in value)
    return value


def rebuild(sig: Signature, flat: list[Any], bound: Callable[[str], Any],
            unknown: Callable[[str], Exception]) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` of a call: input nodes take ``flat[I]``, static nodes their value, bound nodes
    ``bound(name)`` (``name`` is the ``/``-joined path of the bound node). ``unknown(name)`` is raised for a node of
    no known kind."""

    def build(node: CallNode, name: str) -> Any:
        k, value = node.kind, node.value
        if k == "input":
            return flat[value]
        if k == "static":
            return static_value(value)
        if k == "bound":
            return bound(name)
        if k == "dict":
            return {key: build(v, f"{name}/{key}") for key, v in value.items()}
        if k == "list":
            return [build(v, f"{name}/{i}") for i, v in enumerate(value)]
        raise unknown(name)

    args = [build(a, _name(a, f"arg{i}")) for i, a in enumerate(sig.args)]
    kwargs = {k: build(v, k) for k, v in sig.kwargs.items()}
    return args, kwargs


# -- binding a caller's arguments to input names --------------------------------------------------------------------


def _same_static(value: Any, static: Any) -> bool:
    def norm(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    try:
        return bool(norm(value) == norm(static))
    except Exception:  # noqa: BLE001 - an array compared with a scalar, say
        return False


def _show(path: str) -> str:
    """``'params'`` for a top-level argument, ``params['w']`` inside one."""
    return path if "[" in path else f"'{path}'"


def bind(sig: Signature, input_names: list[str], function: str, args: tuple[Any, ...],
         kwargs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The input arrays of a call ``function(*args, **kwargs)``, by input name, structure checked against ``sig``.

    Static and bound arguments may be left out (or passed as None; a static one may be passed with its value);
    positional arguments fill the free ones in order, or all of them when every one is given."""
    top = list(sig.args)
    top_kwargs = dict(sig.kwargs)
    free = [a for a in top if a.is_free]
    full = len(args) == len(top) and len(free) != len(top)
    targets = top if full else free
    if len(args) > len(targets):
        listed = ", ".join(_name(a, "") for a in free)
        raise InputError(f"{function}() takes {len(free)} positional array argument"
                         f"{'s' if len(free) != 1 else ''} ({listed}), but {len(args)} were given.")
    given: dict[str, tuple[Any, Any]] = {}
    for node, value in zip(targets, args):
        given[_name(node, "")] = (node, value)
    by_name = {_name(a, ""): a for a in top}
    by_name.update(top_kwargs)
    for k, v in kwargs.items():
        if k not in by_name:
            raise InputError(f"{function}() got an unexpected argument {k!r}; its arguments are "
                             f"{', '.join(by_name)}.")
        if k in given:
            raise InputError(f"{function}() got two values for argument {k!r}.")
        given[k] = (by_name[k], v)
    missing = [k for k, node in by_name.items() if k not in given and node.is_free]
    if missing:
        raise InputError(f"{function}() is missing argument{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(map(repr, missing))}.")
    out: dict[str, Any] = {}

    def visit(node: CallNode, value: Any, path: str) -> None:
        k, content = node.kind, node.value
        if k == "input":
            out[input_names[content]] = value
        elif k == "static":
            if value is not None and not _same_static(value, content):
                raise InputError(f"argument {_show(path)} was fixed to {content!r} when the artifact was "
                                 f"exported; got {value!r}. Leave it out (or pass None), or re-export with the new "
                                 f"value.")
        elif k == "bound":
            if value is not None:
                raise InputError(f"argument {_show(path)} is bound to weights stored in the artifact (from "
                                 f"{content}); leave it out.")
        elif k == "dict":
            keys = list(content)
            # Keys whose values are fixed (static) or supplied by the artifact (bound) may be left out.
            needed = {k for k, sub in content.items() if sub.is_free}
            if not isinstance(value, Mapping) or not needed <= set(value) <= set(keys):
                got = f"keys {sorted(map(str, value))}" if isinstance(value, Mapping) else type(value).__name__
                raise InputError(f"argument {_show(path)}: expected a dict with keys {sorted(needed)}, got {got}.")
            for key in keys:
                visit(content[key], value.get(key), f"{path}[{key!r}]")
        elif k == "list":
            items = content
            if not isinstance(value, (list, tuple)) or len(value) != len(items):
                got = f"length {len(value)}" if isinstance(value, (list, tuple)) else type(value).__name__
                raise InputError(f"argument {_show(path)}: expected a list of {len(items)}, got {got}.")
            for i, (sub, v) in enumerate(zip(items, value)):
                visit(sub, v, f"{path}[{i}]")
        else:
            raise FormatError(f"{where}: unreadable signature node at {path}.")

    for k, (node, value) in given.items():
        visit(node, value, k)
    return {n: out[n] for n in input_names}


# -- where a program takes its arguments ----------------------------------------------------------------------------


def key_name(key: Any) -> str:
    """The name of one step of a JAX key path (a dict key, a sequence index or an attribute name)."""
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def argument_positions(exported: Any) -> tuple[list[int], list[int]]:
    """Flat argument positions of an ``Exported``'s free inputs and of its bound tensors (the ``WEIGHTS_KWARG``
    subtree).

    The program takes ``(*args, **kwargs)``, or, when sharded, ``(args, kwargs)`` as two positional arguments (see
    ``sharding.jit_sharded``): the weights are then under ``[0][1][WEIGHTS_KWARG]``.
    """
    from jax import tree_util

    n = len(exported.in_avals)
    flat, _ = tree_util.tree_flatten_with_path(tree_util.tree_unflatten(exported.in_tree, list(range(n))))
    free: list[int] = []
    weights: list[int] = []
    for path, pos in flat:
        keys = [key_name(k) for k in path[:3]]
        is_weight = keys[:2] == ["1", WEIGHTS_KWARG] or keys == ["0", "1", WEIGHTS_KWARG]
        (weights if is_weight else free).append(pos)
    return free, weights
