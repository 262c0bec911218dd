"""The call tree: how a function's Python arguments map to the artifact's inputs (the manifest's ``signature``).

``signature`` is ``{"args": [...], "kwargs": {...}}`` with one node per positional argument (each also carrying
``name``) and one per keyword argument. A node has exactly one of the keys of ``NODE_KINDS`` (specs/FORMAT.md,
"Call trees"):

- ``{"input": I}``: the array ``inputs[I]``;
- ``{"static": VALUE}``: a value baked in at export; the caller does not pass it;
- ``{"bound": SOURCE}``: weights bound at export, stored in the artifact; the caller does not pass them;
- ``{"list": [...]}`` / ``{"dict": {...}}``: containers of nodes.

This module is the one place that walks a call tree (building one from a spec is the export's, in
``export.lower.call_tree``): listing its nodes, binding a
caller's arguments to input names, rebuilding Python arguments from flat arrays, and finding where a program takes
its free and bound arguments. It reads manifests that ``manifest.validate`` has checked; ``manifest.validate``
itself uses ``kind`` and ``NODE_KINDS``. No JAX at module level.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from .._record import dataclass
from ..errors import FormatError, InputError

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any

NODE_KINDS = ("input", "static", "list", "dict", "bound")

#: The keyword argument through which an exported program receives its bound tensors, ``{name: array}``.
WEIGHTS_KWARG = "__jaxport_weights__"


def kind(node: Any) -> str | None:
    """The node's kind (one of ``NODE_KINDS``), or None when it is not a node with exactly one kind."""
    if not isinstance(node, Mapping):
        return None
    kinds = [k for k in NODE_KINDS if k in node]
    return kinds[0] if len(kinds) == 1 else None


def of_function(f: Mapping[str, Any]) -> dict[str, Any]:
    """A function's call tree; a manifest entry without one takes its inputs as positional arguments in order."""
    sig = f.get("signature")
    if sig:
        return dict(sig)
    return {"args": [{"input": i, "name": inp["name"]} for i, inp in enumerate(f.get("inputs") or [])],
            "kwargs": {}}


def top_level(sig: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(name, node)`` of every top-level argument: positional ones (named by their ``name``), then keywords."""
    for i, a in enumerate(sig.get("args") or []):
        yield (a.get("name", f"arg{i}") if isinstance(a, Mapping) else f"arg{i}"), a
    yield from (sig.get("kwargs") or {}).items()


@dataclass(frozen=True)
class Site:
    """One node of a call tree and where it sits.

    ``path`` is the Python-style path (``args[0]['w']``, ``kwargs['mask'][1]``), ``name`` the ``/``-joined leaf name
    (``x/w``) used for leaf names and bound trees."""

    path: str
    name: str
    node: Mapping[str, Any]

    @property
    def kind(self) -> str | None:
        return kind(self.node)


def walk(sig: Mapping[str, Any] | None) -> Iterator[Site]:
    """Every node of a call tree, parents before children. Tolerates malformed nodes (they yield, unexpanded)."""

    def visit(node: Any, path: str, name: str) -> Iterator[Site]:
        if not isinstance(node, Mapping):
            return
        yield Site(path, name, node)
        sub = node.get("dict")
        if isinstance(sub, Mapping):
            for k, v in sub.items():
                yield from visit(v, f"{path}[{k!r}]", f"{name}/{k}")
        sub = node.get("list")
        if isinstance(sub, list):
            for i, v in enumerate(sub):
                yield from visit(v, f"{path}[{i}]", f"{name}/{i}")

    sig = sig or {}
    for i, a in enumerate(sig.get("args") or []):
        name = a.get("name", f"arg{i}") if isinstance(a, Mapping) else f"arg{i}"
        yield from visit(a, f"args[{i}]", name)
    for k, v in (sig.get("kwargs") or {}).items():
        yield from visit(v, f"kwargs[{k!r}]", k)


def leaves(sig: Mapping[str, Any] | None, node_kind: str) -> dict[str, Any]:
    """``{path: value}`` of every node of one kind (``static``, ``bound`` or ``input``), by Python-style path."""
    return {s.path: s.node[node_kind] for s in walk(sig) if s.kind == node_kind}


def is_free(node: Mapping[str, Any]) -> bool:
    """Whether a caller passes this argument (it is neither static nor bound)."""
    return "static" not in node and "bound" not in node


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


def rebuild(sig: Mapping[str, Any], flat: list[Any], bound: Callable[[str], Any],
            unknown: Callable[[str], Exception]) -> tuple[list[Any], dict[str, Any]]:
    """``(args, kwargs)`` of a call: input nodes take ``flat[I]``, static nodes their value, bound nodes
    ``bound(name)`` (``name`` is the ``/``-joined path of the bound node). ``unknown(name)`` is raised for a node of
    no known kind."""

    def build(node: Mapping[str, Any], name: str) -> Any:
        k = kind(node)
        if k == "input":
            return flat[node["input"]]
        if k == "static":
            return static_value(node["static"])
        if k == "bound":
            return bound(name)
        if k == "dict":
            return {key: build(v, f"{name}/{key}") for key, v in node["dict"].items()}
        if k == "list":
            return [build(v, f"{name}/{i}") for i, v in enumerate(node["list"])]
        raise unknown(name)

    args = [build(a, a.get("name", f"arg{i}")) for i, a in enumerate(sig.get("args") or [])]
    kwargs = {k: build(v, k) for k, v in (sig.get("kwargs") or {}).items()}
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


def bind(sig: Mapping[str, Any], input_names: list[str], function: str, args: tuple[Any, ...],
         kwargs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The input arrays of a call ``function(*args, **kwargs)``, by input name, structure checked against ``sig``.

    Static and bound arguments may be left out (or passed as None; a static one may be passed with its value);
    positional arguments fill the free ones in order, or all of them when every one is given."""
    top = list(sig.get("args") or [])
    top_kwargs = dict(sig.get("kwargs") or {})
    free = [a for a in top if is_free(a)]
    full = len(args) == len(top) and len(free) != len(top)
    targets = top if full else free
    if len(args) > len(targets):
        listed = ", ".join(a["name"] for a in free)
        raise InputError(f"{function}() takes {len(free)} positional array argument"
                         f"{'s' if len(free) != 1 else ''} ({listed}), but {len(args)} were given.")
    given: dict[str, tuple[Any, Any]] = {}
    for node, value in zip(targets, args):
        given[node["name"]] = (node, value)
    by_name = {a["name"]: a for a in top}
    by_name.update(top_kwargs)
    for k, v in kwargs.items():
        if k not in by_name:
            raise InputError(f"{function}() got an unexpected argument {k!r}; its arguments are "
                             f"{', '.join(by_name)}.")
        if k in given:
            raise InputError(f"{function}() got two values for argument {k!r}.")
        given[k] = (by_name[k], v)
    missing = [k for k, node in by_name.items() if k not in given and is_free(node)]
    if missing:
        raise InputError(f"{function}() is missing argument{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(map(repr, missing))}.")
    out: dict[str, Any] = {}

    def visit(node: Mapping[str, Any], value: Any, path: str) -> None:
        if "input" in node:
            out[input_names[node["input"]]] = value
        elif "static" in node:
            if value is not None and not _same_static(value, node["static"]):
                raise InputError(f"argument {_show(path)} was fixed to {node['static']!r} when the artifact was "
                                 f"exported; got {value!r}. Leave it out (or pass None), or re-export with the new "
                                 f"value.")
        elif "bound" in node:
            if value is not None:
                raise InputError(f"argument {_show(path)} is bound to weights stored in the artifact (from "
                                 f"{node['bound']}); leave it out.")
        elif "dict" in node:
            keys = list(node["dict"])
            # Keys whose values are fixed (static) or supplied by the artifact (bound) may be left out.
            needed = {k for k, sub in node["dict"].items() if is_free(sub)}
            if not isinstance(value, Mapping) or not needed <= set(value) <= set(keys):
                got = f"keys {sorted(map(str, value))}" if isinstance(value, Mapping) else type(value).__name__
                raise InputError(f"argument {_show(path)}: expected a dict with keys {sorted(needed)}, got {got}.")
            for k in keys:
                visit(node["dict"][k], value.get(k), f"{path}[{k!r}]")
        elif "list" in node:
            items = node["list"]
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
