"""The ``like:`` argument of the spec language (``specs/SPEC.md``, "Arguments shaped like a Python value"): its
parsed form and its reader, which ``parse`` calls with its own readers of dimensions and array leaves."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._yaml import Map
from ..errors import SpecError
from .model import StaticLeaf

#: The keys a ``like:`` argument may have.
LIKE_KEYS = ("like", "sizes", "leaves")


@dataclass(frozen=True)
class LikeLeaf:
    """An argument whose pytree structure, dtypes and shapes come from a Python value (``like: train.py:STATE``).

    ``source`` is read as a ``bind:`` source is (a Python attribute ``model.py:NAME``, or a file) at export; the
    value's array leaves become the argument's inputs, named by their pytree paths (``opt_state/0/mu/w1``).
    """

    source: str
    where: Any  # model.Where
    base_dir: Path | None = None
    #: ``(size, dimension)`` pairs: every axis of that size in the value's leaves has that dimension.
    sizes: tuple[tuple[int, int | str], ...] = ()
    #: ``(leaf path, model.ArrayLeaf)`` pairs: the leaves the spec gives itself (a shape, a dtype, a range).
    leaves: tuple[tuple[str, Any], ...] = ()


def parse_like(raw: Map, path: str, where: Callable[[int], Any], leaf: Callable[[Any, str, int], Any],
               dimension: Callable[[Any, str, int], int | str], array_leaf: type) -> LikeLeaf:
    """``{like: SOURCE, sizes: {SIZE: DIM}, leaves: {PATH: LEAF}}`` at ``path`` of a spec (its keys checked by the
    caller). ``where(line)`` places a line, ``leaf`` reads an argument's entry, ``dimension`` one dimension (both
    ``parse``'s own readers, so dimensions and leaves follow every rule of the language); ``array_leaf`` is the class
    of an array leaf."""

    def fail(line: int, msg: str) -> SpecError:
        return SpecError(f"{where(line)}: {msg}")

    source, line = raw.entry("like")
    if not isinstance(source, str) or not source.strip():
        raise fail(line, f"{path}: 'like' takes a Python attribute 'model.py:NAME' (or a file .npz, .safetensors, "
                         f".npy) whose value has the argument's structure, found {source!r}.")
    sizes: list[tuple[int, int | str]] = []
    given, at = raw.entry("sizes")
    if given is not None:
        if not isinstance(given, Map):
            raise fail(at, f"{path}.sizes: must map an axis size of the value's leaves to its dimension, e.g. "
                           f"{{32: batch}}, found {given!r}.")
        for key, dim in given.items():
            kline = given.key_lines[key]
            if not re.fullmatch(r"[0-9]{1,18}", str(key)) or int(key) < 1:
                raise fail(kline, f"{path}.sizes: key {key!r} is not an axis size (an integer >= 1).")
            if not isinstance(dim, str):
                raise fail(kline, f"{path}.sizes[{key}]: must be a dimension such as 'batch' or '2*h', found "
                                  f"{dim!r}.")
            sizes.append((int(key), dimension(dim, f"{path}.sizes[{key}]", kline)))
    leaves: list[tuple[str, Any]] = []
    given, at = raw.entry("leaves")
    if given is not None:
        if not isinstance(given, Map):
            raise fail(at, f"{path}.leaves: must map a leaf's path (keys joined with '/', such as '0/mu/w1') to its "
                           f"array spec, found {given!r}.")
        for key, sub in given.items():
            here = f"{path}.leaves[{key!r}]"
            parsed = leaf(sub, here, given.key_lines[key])
            if not isinstance(parsed, (array_leaf, StaticLeaf)):
                raise fail(given.key_lines[key], f"{here}: must be an array spec such as 'f32[nodes, 4]' or "
                                                 f"{{shape: ..., dtype: ..., range: ...}}, or {{static: true}} to "
                                                 f"keep a Python number of the value baked in.")
            leaves.append((str(key).strip("/"), parsed))
    return LikeLeaf(source.strip(), where(line), sizes=tuple(sizes), leaves=tuple(leaves))
