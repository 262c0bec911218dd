"""Specs written in Python: the ``jaxport.Spec`` builder, and the forms ``jaxport.export`` takes as its spec.

A spec is always the YAML language of ``specs/SPEC.md``, read by ``parse.parse_spec``: a ``Spec`` or a dict with the
YAML's structure (``{"jaxport": 1, "dims": {...}, "args": [...]}``) is written out as YAML text
(``yaml.safe_dump``) and parsed like a file, so every rule and every message is the file's. Messages name
``<jaxport.Spec>`` or ``<spec dict>`` and the place inside it (``<spec dict>: args[0]: unknown dtype 'f33'...``),
without the line of the generated text, which the user never wrote.

``as_shape_spec`` decides what a ``spec`` argument is: a ``ShapeSpec`` (already parsed), a ``Spec``, a mapping, a
``pathlib.Path`` (a file), or a string, which is YAML text when it holds a line break or starts with ``jaxport:`` or
``{`` (``"jaxport: 1\\nargs: [f32[n]]"``), and otherwise the path of a spec file.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .._yaml import Map, Seq, load
from ..errors import SpecError
from .model import ShapeSpec, Where
from .parse import SPEC_DOCUMENT, load_spec, parse_spec

#: How messages name a spec given as a ``Spec``, as a dict, and as YAML text.
BUILT = "<jaxport.Spec>"
DICT = "<spec dict>"
TEXT = "<spec text>"

#: How a spec's text names a value given in memory (``export.entry.paths.IN_MEMORY``, which this layer cannot import).
IN_MEMORY = "<in-memory>"

#: The keys ``Spec`` writes first, in this order (the others follow in the order given).
_ORDER = ("jaxport", "name", "dims", "constraints", "args", "kwargs", "platforms", "allow_custom_calls", "metadata")


class Spec:
    """A spec built in Python, the same language as a YAML spec file (``specs/SPEC.md``).

    ``Spec(args=["f32[batch, 784]"], dims={"batch": {"min": 1, "max": 4096}})`` is the spec file ``jaxport: 1``,
    ``dims: ...``, ``args: [...]``. ``args`` and ``kwargs`` leaves are what a spec file has (``"f32[b, 16]"``,
    ``{"shape": "b, 16", "dtype": "f32"}``, ``{"static": 3}``, ``{"bind": "params.npz"}``, nested dicts and lists), or
    an example array (anything with ``shape`` and ``dtype``: a numpy or JAX array, a ``jax.ShapeDtypeStruct``), which
    stands for its dtype and shape. Any other top-level key of the language (``functions``, ``mesh``, ``vjp_order``,
    ...) is given as a keyword. The spec is checked when built: a problem is a ``SpecError`` naming the place
    (``<jaxport.Spec>: args[0]: ...``). ``to_yaml()`` gives the file; ``Spec.from_yaml(text)`` reads one back.
    """

    def __init__(self, args: list[Any] | tuple[Any, ...] | None = None, kwargs: Mapping[str, Any] | None = None, *,
                 dims: Mapping[str, Any] | list[str] | None = None, constraints: list[str] | None = None,
                 name: str | None = None, platforms: list[str] | None = None,
                 allow_custom_calls: list[str] | None = None, metadata: Mapping[str, Any] | None = None,
                 **more: Any):
        given = {"name": name, "dims": dims, "constraints": constraints, "args": args, "kwargs": kwargs,
                 "platforms": platforms, "allow_custom_calls": allow_custom_calls, "metadata": metadata, **more}
        data: dict[str, Any] = {"jaxport": more.pop("jaxport", 1)}
        for key in [*_ORDER[1:], *more]:
            if given.get(key) is not None:
                data[key] = given[key]
        self.like_values = like_values(data)
        self._data = plain(data, BUILT)
        self.parse()  # refuse a bad spec when it is built

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Spec:
        """The spec whose YAML has the structure of ``data`` (``{"jaxport": 1, "args": [...]}``)."""
        if not isinstance(data, Mapping):
            raise SpecError(f"{DICT}: a spec must be a mapping such as {{'jaxport': 1, 'args': [...]}}, not "
                            f"{type(data).__name__}.")
        spec = cls.__new__(cls)
        spec.like_values = like_values(data)
        spec._data = plain(dict(data), DICT)
        spec.parse(DICT)
        return spec

    @classmethod
    def from_yaml(cls, text: str) -> Spec:
        """The spec of a YAML document (a spec file's text)."""
        parse_spec(text, TEXT)  # every refusal of the file format, with the text's lines
        raw, _ = load(text, TEXT, SPEC_DOCUMENT)
        return cls.from_dict(_unwrapped(raw))

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain dicts, lists and scalars: the YAML's structure."""
        return _copy(self._data)

    def to_yaml(self) -> str:
        """The spec as a YAML spec file (readable by ``jaxport export --shapes``)."""
        return yaml.safe_dump(self._data, sort_keys=False, default_flow_style=None, allow_unicode=True, width=100)

    def parse(self, file: str = BUILT, base_dir: str | Path | None = None) -> ShapeSpec:
        """The parsed spec (bound files relative to ``base_dir``, default: the current directory at export)."""
        return parse_text(self.to_yaml(), file, base_dir, lines=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and self._data == other._data

    __hash__ = None  # type: ignore[assignment]  # mutable contents

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self._data.items() if k != "jaxport")
        return f"jaxport.Spec({body})"


class Like:
    """An argument shaped like a Python value, for a ``Spec``'s ``args`` and ``kwargs``: ``jaxport.like(value)``.

    It is the spec language's ``{like: SOURCE, sizes: ..., leaves: ...}`` (``specs/SPEC.md``) with the value given in
    memory (the spec's text names it ``<in-memory>:likeN``): ``jaxport.export`` and ``jaxport.verify_artifact`` of
    a spec holding it read the value from the object.
    """

    _count = itertools.count(1)

    def __init__(self, value: Any, sizes: Mapping[int, str] | None = None,
                 leaves: Mapping[str, Any] | None = None):
        self.value = value
        self.sizes = dict(sizes or {})
        self.leaves = dict(leaves or {})
        self.name = f"like{next(Like._count)}"

    def entry(self) -> dict[str, Any]:
        """The spec language's entry for this argument."""
        sizes = {int(k) if not isinstance(k, bool) and isinstance(k, int) else k: v for k, v in self.sizes.items()}
        return {"like": f"{IN_MEMORY}:{self.name}", **({"sizes": sizes} if sizes else {}),
                **({"leaves": self.leaves} if self.leaves else {})}

    def __repr__(self) -> str:
        return f"jaxport.like({type(self.value).__name__}, sizes={self.sizes!r}, leaves={self.leaves!r})"


def like(value: Any, sizes: Mapping[int, str] | None = None, leaves: Mapping[str, Any] | None = None) -> Like:
    """An argument whose structure, dtypes and shapes are ``value``'s (any pytree: an optax state, a
    ``jraph.GraphsTuple``, an equinox module); ``sizes`` (``{32: "batch"}``) makes every axis of that size that
    dimension, ``leaves`` (``{"senders": "i32[edges]"}``) gives a leaf's spec by its path. See ``Like``."""
    return Like(value, sizes, leaves)


def like_values(spec: Any) -> dict[str, Any]:
    """The values of the ``jaxport.like`` arguments in a spec given as a ``Spec`` or a dict, by their in-memory
    names (for ``export.entry.entrypoint.in_memory_values``)."""
    if isinstance(spec, Spec):
        return dict(spec.like_values)
    found: dict[str, Any] = {}

    def walk(value: Any) -> None:
        if isinstance(value, Like):
            found[value.name] = value.value
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    if isinstance(spec, Mapping):
        walk(spec)
    return found


def as_shape_spec(spec: Any, base_dir: str | Path | None = None) -> ShapeSpec:
    """``spec`` parsed (see the module docstring for the forms); a dict's, a ``Spec``'s or a text's bound files are
    relative to ``base_dir`` (default: the current directory at export)."""
    if isinstance(spec, ShapeSpec):
        return spec
    if isinstance(spec, Spec):
        return spec.parse(BUILT, base_dir)
    if isinstance(spec, Mapping):
        return parse_text(Spec.from_dict(spec).to_yaml(), DICT, base_dir, lines=False)
    if isinstance(spec, str) and is_yaml_text(spec):
        return parse_text(spec, TEXT, base_dir, lines=True)
    if isinstance(spec, (str, os.PathLike)):
        return load_spec(os.fspath(spec))
    raise SpecError(f"the spec is {type(spec).__name__}; give a spec file's path, YAML text, a dict with the YAML's "
                    f"structure ({{'jaxport': 1, 'args': [...]}}) or a jaxport.Spec.")


def is_yaml_text(text: str) -> bool:
    """Whether a string given as a spec is YAML text rather than a path (a line break, or ``jaxport:`` or ``{``
    first)."""
    return "\n" in text or text.lstrip().startswith(("jaxport:", "{"))


def parse_text(text: str, file: str, base_dir: str | Path | None, *, lines: bool) -> ShapeSpec:
    """``parse_spec`` of text jaxport or the caller generated; without ``lines``, messages and places carry no line
    number (the text is jaxport's rendering of a dict)."""
    base = Path(base_dir) if base_dir is not None else None
    if lines:
        return parse_spec(text, file, base)
    try:
        parsed = parse_spec(text, file, base)
    except SpecError as e:
        text = re.sub(rf"^{re.escape(file)}:\d+: ", f"{file}: ", str(e))
        raise SpecError(re.sub(r" at line \d+", "", text)) from None  # a line of the text the user never wrote
    return _without_lines(parsed)


def plain(value: Any, where: str) -> Any:
    """``value`` as YAML's plain data (dicts with string keys, lists, str, int, float, bool, None): tuples become
    lists, paths strings, numpy scalars Python numbers, and an example array (with ``shape`` and ``dtype``) its
    ``dtype[d0, d1]`` text. Anything else is refused, naming where it is."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Like):
        return plain(value.entry(), where)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise SpecError(f"{where}: key {k!r} is {type(k).__name__}; spec keys are strings.")
            out[k] = plain(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        if type(value).__module__ == "numpy" and type(value).__name__ != "ndarray":  # a numpy scalar
            return plain(value.item(), where)
        return f"{getattr(dtype, 'name', dtype)}[{', '.join(str(d) for d in shape)}]"
    raise SpecError(f"{where}: {type(value).__name__} is not a spec value; give what a YAML spec holds (strings such "
                    f"as 'f32[batch, 16]', numbers, lists, dicts) or an example array for its shape and dtype.")


def _unwrapped(value: Any) -> Any:
    """``_yaml``'s ``Map``/``Seq`` (which remember lines) as plain dicts and lists."""
    if isinstance(value, Map):
        return {k: _unwrapped(v) for k, v in value.items()}
    if isinstance(value, Seq):
        return [_unwrapped(v) for v in value]
    return value


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _without_lines(value: Any) -> Any:
    """A parsed spec whose places (``Where``) carry no line number."""
    if isinstance(value, Where):
        return Where(value.file, 0)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _without_lines(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    if type(value) is dict:
        return {k: _without_lines(v) for k, v in value.items()}
    if type(value) is list:
        return [_without_lines(v) for v in value]
    if type(value) is tuple:
        return tuple(_without_lines(v) for v in value)
    return value
