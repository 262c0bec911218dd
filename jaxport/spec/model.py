"""A parsed shape spec as records: what ``parse.parse_spec`` returns and the export, ``import`` and ``verify`` read
(the language: ``specs/SPEC.md``). ``jaxport.spec`` gives the same names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Where:
    """A place in a spec file, for messages."""

    file: str
    line: int  # 1-based; 0 when unknown

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class ArrayLeaf:
    """An array argument: symbolic shape (one string per axis, or int) and canonical dtype name."""

    shape: tuple[int | str, ...]
    dtype: str
    where: Where
    #: The PartitionSpec over the spec's mesh (see sharding.py); None: replicated.
    sharding: tuple[Any, ...] | None = None
    #: The values the input takes, half-open ``[LO, HI)`` (``input_range``); a bound of an integer input may be a
    #: dimension expression (``nodes``); None: not declared.
    range: tuple[int | float | str, int | float | str] | None = None
    #: Traced weakly typed, as ``jax.jit`` traces a Python number (a ``like:`` value's ``int``/``float`` leaf), so
    #: that it takes the other operand's dtype (``w * lr`` stays bfloat16); the artifact records it (``weak``).
    weak: bool = False
    #: The range was taken from an example value (a ``like:`` leaf), not declared: it shapes random inputs only, and
    #: ``check_ranges`` does not hold a call to it.
    range_example: bool = False

    def shape_text(self) -> str:
        return ", ".join(str(d) for d in self.shape)


@dataclass(frozen=True)
class StaticLeaf:
    """A Python value baked into the program at export."""

    value: Any
    where: Where


@dataclass(frozen=True)
class BindLeaf:
    """A subtree whose value is loaded at export (weights) and stored in the artifact as named tensors.

    ``source`` is a file (relative to the spec's directory) or a Python attribute ``model.py:NAME``.
    """

    source: str
    where: Where
    base_dir: Path | None = None
    #: ``(key, PartitionSpec)`` pairs for the bound tensors, keys relative to the bound value ("" for one array).
    sharding: tuple[tuple[str, tuple[Any, ...]], ...] | None = None


@dataclass(frozen=True)
class DimVar:
    name: str
    min: int | None
    max: int | None
    where: Where


@dataclass(frozen=True)
class ConstraintSpec:
    text: str
    where: Where


@dataclass
class FunctionSpec:
    """Arguments of one function: ``args`` a list and ``kwargs`` a dict of pytrees with leaf objects."""

    name: str | None
    entrypoint: str | None
    args: list[Any]
    kwargs: dict[str, Any]
    where: Where
    #: One PartitionSpec (or None: unspecified) per output leaf, in flattening order; None when not given.
    outputs_sharding: list[Any] | None = None
    #: The output names (``outputs:``, see ``outputs``): a tree of names, lists and dicts; None when not given.
    outputs: Any = None
    #: Where ``outputs:`` is, for messages.
    outputs_where: Where | None = None


@dataclass
class ShapeSpec:
    """A parsed spec file."""

    file: str
    version: int
    dims: dict[str, DimVar]
    constraints: list[ConstraintSpec]
    functions: dict[str | None, FunctionSpec]
    platforms: list[str] | None = None
    allow_custom_calls: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    base_dir: Path | None = None
    #: The device mesh, ``{axis name: size}`` in order (see sharding.py); None: not sharded.
    mesh: dict[str, int] | None = None
    #: The highest order of derivatives (VJPs) stored with each function.
    vjp_order: int = 0
    #: The sha256 of the spec's text (UTF-8), which the manifest records so that ``verify`` can find the file.
    sha256: str | None = None
    #: A single-function spec's top-level ``name:``: the function's name in the artifact (None: the Python name).
    name: str | None = None
