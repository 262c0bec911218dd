"""The user's types back on a loaded function's outputs: the program returns plain dicts, lists and tuples and key
data (``export.lowering.returns``); ``jaxport.load`` gives back what ``jax.jit`` of the function returns.

- After an export in this process, the returned value's own tree structure (``remember``, by the payload's sha256)
  rebuilds it exactly, whatever its node types hold.
- Else from the manifest's ``output_tree`` (format 1.2): a node whose type is a class of a module already imported
  in this process (never imported because an artifact names it) is rebuilt when it is a namedtuple, a dataclass
  whose fields are its children's keys, or a dict subclass; any other node stays in the plain form the program
  returns it in (``artifact.pathtree.nest``: a list where its children's keys are sequence indices, else a dict of
  them by key name, as a node with no keys of its own, numpyro's ``OptimizerState``, is), which is also the form the
  same node takes as an input: what ``load`` returns goes back in.
- Outputs that are a PRNG key's data (``Output.key``) are wrapped back into keys.

The modules an artifact names are only looked up in ``sys.modules``: reading an artifact imports nothing. No JAX at
module level.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from .. import dtypes
from .model import Function, OutputNode

#: The payload's sha256 -> ``(treedef, order)`` of a function exported in this process: the returned value's tree
#: structure and, for each of its leaves in that structure's order, its output index.
_LIVE: dict[str, tuple[Any, tuple[int, ...]]] = {}


def remember(sha256: str, treedef: Any, order: tuple[int, ...]) -> None:
    """Record how a function exported in this process returned its value (``_LIVE``)."""
    _LIVE[sha256] = (treedef, order)


def rebuilder(f: Function, sha256: str | None) -> Callable[[Any], Any] | None:
    """What turns the outputs a loaded program returns into the user's value (see the module docstring); None when
    they are that value already."""
    keys = {i: dtypes.KEYS[o.key].impl for i, o in enumerate(f.outputs) if o.key is not None}
    live = _LIVE.get(sha256) if sha256 is not None else None
    tree = f.output_tree
    if live is None and not keys and not (tree is not None and _typed(tree)):
        return None

    def rebuild(outputs: Any) -> Any:
        import jax

        leaves = jax.tree_util.tree_leaves(outputs)
        if len(leaves) != len(f.outputs):
            return outputs
        for i, impl in keys.items():
            leaves[i] = jax.random.wrap_key_data(leaves[i], impl=impl)
        if live is not None:
            treedef, order = live
            return jax.tree_util.tree_unflatten(treedef, [leaves[i] for i in order])
        if tree is None or not _typed(tree):
            return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(outputs), leaves)
        return _build(tree, leaves, outputs)

    return rebuild


def _typed(node: OutputNode) -> bool:
    """Whether an output tree has a node with its type's module (format 1.2)."""
    if node.kind in ("output", "none"):
        return False
    if node.kind == "node" and node.module is not None:
        return True
    return any(_typed(c) for c in (node.value.values() if node.kind == "dict" else node.value))


def _build(node: OutputNode, leaves: list[Any], plain: Any) -> Any:
    """The value of ``node``; ``plain`` is the same subtree as the program returned it (its plain dicts and lists)."""
    if node.kind == "output":
        return leaves[node.value]
    if node.kind == "none":
        return None
    if node.kind == "dict":
        return {k: _build(v, leaves, _at(plain, k)) for k, v in node.value.items()}
    if node.kind != "node":
        children = [_build(c, leaves, _at(plain, i)) for i, c in enumerate(node.value)]
        return children if node.kind == "list" else tuple(children)
    keys = list(node.keys) if node.keys is not None else [str(i) for i in range(len(node.value))]
    children = [_build(c, leaves, _at(plain, k)) for k, c in zip(keys, node.value)]
    cls = find_class(node.module, node.type_name)
    if cls is not None:
        value = _construct(cls, keys, children)
        if value is not None:
            return value
    if isinstance(plain, dict):  # keys that are not sequence indices (or no keys, as JAX gives a node without any)
        return {k: child for k, child in zip(keys, children) if k in plain}
    if isinstance(plain, (list, tuple)) or keys == [str(i) for i in range(len(keys))]:
        return children
    return dict(zip(keys, children))


def _at(plain: Any, key: str | int) -> Any:
    """The child ``key`` of a plain container the program returned (a dict's key, a list's index), else None."""
    if isinstance(plain, dict):
        return plain.get(str(key), plain.get(key)) if not isinstance(key, int) else plain.get(key)
    if isinstance(plain, (list, tuple)):
        i = int(key) if isinstance(key, int) or str(key).isdigit() else -1
        return plain[i] if 0 <= i < len(plain) else None
    return None


def find_class(module: str | None, qualname: str | None) -> type | None:
    """The class ``module.qualname`` when that module is already imported (``sys.modules``), else None."""
    if not module or not qualname or "<" in qualname:
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None) if found is not None else None
    return found if isinstance(found, type) else None


def _construct(cls: type, keys: list[str], children: list[Any]) -> Any:
    """An instance of ``cls`` holding ``children`` under ``keys``, or None where the class cannot be built from
    them alone (fields that are not children and have no default, a node of another form)."""
    try:
        if issubclass(cls, tuple) and list(getattr(cls, "_fields", ())) == keys:
            return cls(*children)
        if issubclass(cls, dict):
            return cls(zip(keys, children))
        if dataclasses.is_dataclass(cls):
            fields = {f.name: f for f in dataclasses.fields(cls)}
            if not set(keys) <= set(fields):
                return None
            missing = [f for name, f in fields.items() if f.init and name not in keys
                       and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
            if missing or any(not fields[k].init for k in keys):
                return None
            return cls(**dict(zip(keys, children)))
    except Exception:  # noqa: BLE001 - the class refused its children: the plain form stays
        return None
    return None
