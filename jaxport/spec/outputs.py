"""Output names: a spec's ``outputs:`` (``[logits, cache]``, or a pytree of names), checked when the spec is read
(``parse``) and matched against what the function returns when it is exported (``assign``). No JAX.

A name names one output array, or a whole subtree of the returned value: its arrays are then ``NAME/PATH``, the path
below it joined with ``/`` as the default names are (``cache/0/k``). ``null`` keeps the default names of a subtree.
The returned value is seen as the manifest's ``output_tree`` (an ``artifact.model.OutputNode``: an output, a tuple,
a list, a dict, another pytree node or None): a list of names matches a tuple, a list or another pytree node (its
children in JAX's flattening order), a mapping matches a dict with the same keys.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import SpecError

#: A declared output name: an identifier, since it becomes a file key (``call -o``) and a path component.
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_NAME = 128


def parse(raw: Any, where: str) -> Any:
    """The ``outputs:`` value as a tree of names (str), None (default names), lists and dicts; ``where`` is
    ``FILE:LINE`` of the key. Raises SpecError for a value that is not such a tree, a name that is not an
    identifier, and a name given twice."""
    seen: dict[str, str] = {}

    def walk(node: Any, path: str) -> Any:
        if node is None:
            return None
        if isinstance(node, str):
            if not NAME.match(node) or len(node) > MAX_NAME:
                raise SpecError(f"{where}: outputs{path}: {node!r} is not a valid output name: use letters, digits "
                                f"and '_', not starting with a digit (at most {MAX_NAME} characters).")
            if node in seen:
                raise SpecError(f"{where}: outputs{path}: the name {node!r} is given twice (also at "
                                f"outputs{seen[node]}); give each output its own name.")
            seen[node] = path
            return node
        if isinstance(node, list):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(node)]
        if isinstance(node, dict):
            return {str(k): walk(v, f"{path}[{str(k)!r}]") for k, v in node.items()}
        raise SpecError(f"{where}: outputs{path}: {node!r} is not an output name. Write a name such as 'logits', a "
                        f"list of names ([logits, cache]), a mapping for a dict output, or null to keep the default "
                        f"name.")

    if isinstance(raw, (str, list, dict)):
        return walk(raw, "")
    raise SpecError(f"{where}: 'outputs' names the function's outputs: a name, a list ([logits, cache]) or a mapping "
                    f"for a dict output, found {raw!r}.")


def _leaves(node: Any) -> list[int]:
    """The output indexes under an ``output_tree`` node."""
    if node.kind == "output":
        return [node.value]
    children = list(node.value.values()) if node.kind == "dict" else _children(node) or []
    return [i for c in children for i in _leaves(c)]


def describe(node: Any) -> str:
    """What an ``output_tree`` node is, for messages: ``an array``, ``a tuple of 3 arrays``, ``a dict with keys 'a',
    'b'``."""
    if node.kind == "output":
        return "an array"
    if node.kind == "none":
        return "None"
    if node.kind == "dict":
        keys = list(node.value)
        shown = ", ".join(map(repr, keys[:8])) + (", ..." if len(keys) > 8 else "")
        return f"a dict with keys {shown}" if keys else "an empty dict"
    what = f"a {node.kind}" if node.kind in ("tuple", "list") else f"a {node.type_name or 'pytree'} node"
    children = _children(node) or []
    n = len(children)
    if all(c.kind == "output" for c in children):
        return f"{what} of {n} array{'s' if n != 1 else ''}"
    return f"{what} of {n} element{'s' if n != 1 else ''}"


def _count(names: list[Any]) -> str:
    n = len(names)
    return f"{n} name{'s' if n != 1 else ''}"


def assign(names: Any, tree: Any, paths: list[list[str]], defaults: list[str], where: str) -> list[str]:
    """The output names, by output index: ``names`` (from :func:`parse`) laid over the ``output_tree`` ``tree``,
    whose output ``I`` sits at ``paths[I]`` (one key per level) and is named ``defaults[I]`` without a declared name.
    Raises SpecError at ``where`` naming the place where the names and the returned value differ, or two outputs
    that end up with one name."""
    out = list(defaults)

    def fail(path: str, msg: str) -> SpecError:
        return SpecError(f"{where}: outputs{path}: {msg}")

    def walk(spec: Any, node: Any, depth: int, path: str) -> None:
        there = " there" if path else ""
        if spec is None:
            return
        if isinstance(spec, str):
            indexes = _leaves(node)
            if not indexes:
                raise fail(path, f"{spec!r} names no array: the function returns {describe(node)}{there}. Write "
                                 f"null in its place.")
            for i in indexes:
                out[i] = "/".join([spec, *paths[i][depth:]])
            return
        if isinstance(spec, list):
            children = _children(node)
            if children is None:
                shape = "a mapping with the same keys" if node.kind == "dict" else "one name"
                raise fail(path, f"the function returns {describe(node)}{there}, but 'outputs' gives a list of "
                                 f"{_count(spec)}. Write {shape}.")
            if len(children) != len(spec):
                raise fail(path, f"the function returns {describe(node)}{there}, but 'outputs' gives "
                                 f"{_count(spec)}. Give one name per element (a name may stand for a whole subtree; "
                                 f"null keeps an element's default name).")
            for i, (s, c) in enumerate(zip(spec, children)):
                walk(s, c, depth + 1, f"{path}[{i}]")
            return
        if node.kind != "dict":
            children = _children(node)
            shape = f"a list of {len(children)} names" if children is not None else "one name"
            raise fail(path, f"the function returns {describe(node)}{there}, but 'outputs' gives a mapping. Write "
                             f"{shape}.")
        keys = list(node.value)
        for k in spec:
            if k not in node.value:
                raise fail(path, f"the function's dict{there} has no key {k!r} (its keys: "
                                 f"{', '.join(map(repr, keys))}).")
        for k in keys:
            if k not in spec:
                raise fail(path, f"no name for the function's key {k!r}; give one (or null to keep its default "
                                 f"name).")
        for k in keys:
            walk(spec[k], node.value[k], depth + 1, f"{path}[{k!r}]")

    top = names
    if isinstance(names, list) and len(names) == 1 and tree.kind == "output":
        top = names[0]  # [logits] for a function that returns one array
    walk(top, tree, 0, "")
    first: dict[str, int] = {}
    for i, n in enumerate(out):
        if n in first:
            raise SpecError(f"{where}: outputs: two outputs get the name {n!r} (outputs {first[n]} and {i}, named "
                            f"{defaults[first[n]]!r} and {defaults[i]!r} by default). Rename one.")
        first[n] = i
    return out


def _children(node: Any) -> list[Any] | None:
    """The children of a sequence-like node (tuple, list, other pytree node), in order; None for others."""
    return list(node.value) if node.kind in ("tuple", "list", "node") else None
