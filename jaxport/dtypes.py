"""Element types jaxport accepts, by their spec spellings and their canonical manifest names.

Pure data: reading a manifest must not import numpy or JAX. The canonical name of a dtype is numpy's
(``float32``, ``bfloat16``); the short name (``f32``, ``bf16``) is what ``inspect`` prints and specs may use.

Typed PRNG keys (``jax.random.key`` arrays) are element types too, of kind ``key``: their canonical name is JAX's
(``key<fry>`` for threefry2x32, ``key<rbg>``, ``key<urbg>`` for unsafe_rbg), which is also their short name. A key
array has no numpy dtype; its *key data* (``jax.random.key_data``) is ``uint32`` with ``KEYS[name].data_shape``
appended to the array's shape.
"""

from __future__ import annotations

import functools

from ._record import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # canonical, numpy / ml_dtypes spelling
    short: str
    itemsize: int
    kind: str  # "bool", "int", "uint", "float", "complex", "key"


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
    # Typed PRNG keys: the item size is that of one key's data (uint32 words).
    DType("key<fry>", "key<fry>", 8, "key"),
    DType("key<rbg>", "key<rbg>", 16, "key"),
    DType("key<urbg>", "key<urbg>", 16, "key"),
]


@dataclass(frozen=True)
class KeyType:
    """A typed PRNG key's implementation: JAX's name for it, and the shape of one key's ``uint32`` data."""

    impl: str  # as jax.random.key(..., impl=...) takes it
    data_shape: tuple[int, ...]


#: Canonical key dtype name -> its implementation.
KEYS: dict[str, KeyType] = {
    "key<fry>": KeyType("threefry2x32", (2,)),
    "key<rbg>": KeyType("rbg", (4,)),
    "key<urbg>": KeyType("unsafe_rbg", (4,)),
}

#: Canonical name -> DType.
BY_NAME: dict[str, DType] = {d.name: d for d in _TABLE}

_ALIASES: dict[str, str] = {d.short: d.name for d in _TABLE}
_ALIASES.update({d.name: d.name for d in _TABLE})
_ALIASES.update({"float": "float32", "int": "int32", "half": "float16", "double": "float64", "bool_": "bool"})
# A key's spec spellings: ``key`` (threefry2x32, JAX's default implementation) and ``key<IMPL>`` by JAX's
# implementation name or by the short name JAX prints.
_ALIASES.update({"key": "key<fry>", "key<threefry2x32>": "key<fry>", "key<unsafe_rbg>": "key<urbg>"})


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


def is_key(name: str) -> bool:
    """Whether a canonical dtype name is a typed PRNG key's."""
    return name in KEYS


def to_numpy(name: str):
    """The numpy dtype for a canonical name (imports numpy, and ml_dtypes for bfloat16 and float8); for a PRNG key,
    JAX's key dtype (imports JAX), which ``jax.ShapeDtypeStruct`` takes and a key array has."""
    import numpy as np

    if name in KEYS:
        return _key_dtype(KEYS[name].impl)
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


@functools.cache
def _key_dtype(impl: str):
    import jax

    return jax.eval_shape(lambda: jax.random.key(0, impl=impl)).dtype


def from_numpy(dtype) -> DType | None:
    """The jaxport dtype of a numpy dtype, or None if jaxport does not support it."""
    return BY_NAME.get(str(dtype))


#: Significand bits (with the implicit one) of each float type, and of each complex type's parts.
_PRECISION = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53, "float8_e4m3fn": 4, "float8_e5m2": 3,
              "complex64": 24, "complex128": 53}
#: The value-preserving conversions from each float or complex type (numpy's 'safe' table).
_FLOAT_SAFE = {
    "bfloat16": ("float32", "float64", "complex64", "complex128"),
    "float16": ("float32", "float64", "complex64", "complex128"),
    "float8_e4m3fn": ("float32", "float64", "complex64", "complex128"),
    "float8_e5m2": ("float32", "float64", "complex64", "complex128"),
    "float32": ("float64", "complex64", "complex128"),
    "float64": ("complex128",),
    "complex64": ("complex128",),
    "complex128": (),
}


def safe_cast(source: str, target: str) -> bool:
    """Whether converting ``source`` to ``target`` (canonical names) keeps every value: numpy's 'safe' rule, except
    that an integer converts to a float only when the float's significand holds every value of it (numpy calls
    ``int64 -> float64`` safe, and ml_dtypes ``int8 -> float8``; neither is)."""
    s, t = BY_NAME[source], BY_NAME[target]
    if s.kind == "key" or t.kind == "key":  # a key is only ever itself
        return s.name == t.name
    if s.name == t.name or s.kind == "bool":
        return True
    if t.kind == "bool":
        return False
    if s.kind in ("int", "uint"):
        if t.kind == "int":
            return t.itemsize >= s.itemsize if s.kind == "int" else t.itemsize > s.itemsize
        if t.kind == "uint":
            return s.kind == "uint" and t.itemsize >= s.itemsize
        return _PRECISION[t.name] >= s.itemsize * 8 - (s.kind == "int")
    return t.name in _FLOAT_SAFE.get(s.name, ())
