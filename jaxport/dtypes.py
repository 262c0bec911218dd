"""Element types jaxport accepts, by their spec spellings and their canonical manifest names.

Pure data: reading a manifest must not import numpy or JAX. The canonical name of a dtype is numpy's
(``float32``, ``bfloat16``); the short name (``f32``, ``bf16``) is what ``inspect`` prints and specs may use.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # canonical, numpy / ml_dtypes spelling
    short: str
    itemsize: int
    kind: str  # "bool", "int", "uint", "float", "complex"


_TABLE = [
    DType("bool", "bool", 1, "bool"),
    DType("int8", "i8", 1, "int"),
    DType("int16", "i16", 2, "int"),
    DType("int32", "i32", 4, "int"),
    DType("int64", "i64", 8, "int"),
    DType("uint8", "u8", 1, "uint"),
    DType("uint16", "u16", 2, "uint"),
    DType("uint32", "u32", 4, "uint"),
    DType("uint64", "u64", 8, "uint"),
    DType("bfloat16", "bf16", 2, "float"),
    DType("float16", "f16", 2, "float"),
    DType("float32", "f32", 4, "float"),
    DType("float64", "f64", 8, "float"),
    DType("complex64", "c64", 8, "complex"),
    DType("complex128", "c128", 16, "complex"),
    DType("float8_e4m3fn", "f8e4m3fn", 1, "float"),
    DType("float8_e5m2", "f8e5m2", 1, "float"),
]

#: Canonical name -> DType.
BY_NAME: dict[str, DType] = {d.name: d for d in _TABLE}

_ALIASES: dict[str, str] = {d.short: d.name for d in _TABLE}
_ALIASES.update({d.name: d.name for d in _TABLE})
_ALIASES.update({"float": "float32", "int": "int32", "half": "float16", "double": "float64", "bool_": "bool"})


def canonical(spelling: str) -> DType | None:
    """The dtype a spec spelling names (``f32``, ``float32``, ``bf16``), or None if unknown."""
    name = _ALIASES.get(spelling.strip().lower())
    return BY_NAME[name] if name is not None else None


def spellings() -> list[str]:
    """Every accepted spelling, for "did you mean" suggestions."""
    return sorted(_ALIASES)


def is_64bit(name: str) -> bool:
    """True for dtypes that JAX only keeps with ``jax_enable_x64`` on."""
    return name in ("int64", "uint64", "float64", "complex128")


def to_numpy(name: str):
    """The numpy dtype for a canonical name (imports numpy, and ml_dtypes for bfloat16 and float8)."""
    import numpy as np

    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def from_numpy(dtype) -> DType | None:
    """The jaxport dtype of a numpy dtype, or None if jaxport does not support it."""
    return BY_NAME.get(str(dtype))
