"""Element types jaxport accepts, by their spec spellings and their canonical manifest names.

Pure data: reading a manifest must not import numpy or JAX. The canonical name of a dtype is numpy's
(``float32``, ``bfloat16``); the short name (``f32``, ``bf16``) is what ``inspect`` prints and specs may use.

Every fact about a dtype is a field of its :class:`DType` entry in :data:`TABLE` (its safetensors tag, MLIR element
type, whether ml_dtypes defines it, precision, default tolerances, ...): the lookup tables other modules use
(:data:`BY_SAFETENSORS`, :data:`BY_MLIR`, :data:`NOT_IN_NPY`, ``tolerance.TOLERANCES``, ...) are derived from
it, so a new dtype is one entry (``tests/foundation/test_dtypes.py`` checks that no module spells such a table itself).

Sub-byte types (``int4``, ``uint4``, ``float4_e2m1fn``) take one byte per element in memory, as ml_dtypes holds them,
and ``bits`` (4) per element where jaxport stores them itself: packed two per byte in an artifact's weights
(:func:`stored_nbytes`; specs/FORMAT.md, "Sub-byte types"). ``int2`` and ``uint2``, which ml_dtypes and JAX also
define, are not types of jaxport: JAX's serialization has no code for them (``jax.export`` fails to serialize a
function that takes or returns one), as :data:`NOT_EXPORTABLE` says.

Typed PRNG keys (``jax.random.key`` arrays) are element types too, of kind ``key``: their canonical name is JAX's
(``key<fry>`` for threefry2x32, ``key<rbg>``, ``key<urbg>`` for unsafe_rbg), which is also their short name. A key
array has no numpy dtype; its *key data* (``jax.random.key_data``) is ``uint32`` with ``KEYS[name].data_shape``
appended to the array's shape.
"""

from __future__ import annotations

import functools

from ._record import dataclass


@dataclass(frozen=True)
class KeyType:
    """A typed PRNG key's implementation: JAX's name for it, and the shape of one key's ``uint32`` data."""

    impl: str  # as jax.random.key(..., impl=...) takes it
    data_shape: tuple[int, ...]


#: Default ``(atol, rtol)`` of a type whose values must be equal (integers, bools, keys).
EXACT = (0.0, 0.0)


@dataclass(frozen=True)
class DType:
    """Everything jaxport knows about one element type. A new dtype is one entry of ``TABLE``: every table other
    modules use (safetensors tags, MLIR names, tolerances, ``.npy`` support, ...) is derived from it."""

    name: str  # canonical, numpy / ml_dtypes spelling
    short: str
    itemsize: int
    kind: str  # "bool", "int", "uint", "float", "complex", "key"
    #: The MLIR element type (``f32``, ``complex<f32>``); None for a key (it lowers to its ``uint32`` data).
    mlir: str | None = None
    #: The safetensors dtype tag (``F32``, ``BF16``); None where the format has none (``complex128``, keys).
    safetensors: str | None = None
    #: Defined by ml_dtypes, not numpy: a ``.npy`` header cannot name it, and numpy saves it as raw void bytes.
    ml_dtypes: bool = False
    #: Significand bits, the implicit one included, of a float (of a complex type's parts).
    precision: int | None = None
    #: The float and complex types a value converts to and back unchanged (numpy's 'safe' table).
    safe_floats: tuple[str, ...] = ()
    #: The type of a complex type's real and imaginary parts.
    part: str | None = None
    #: Default ``(atol, rtol)`` when an output of this type is compared with a reference (``jaxport/tolerance.py``).
    tolerance: tuple[float, float] = EXACT
    #: Default ``(atol, rtol)`` when two compilers' outputs are compared (``verify --runtime iree``).
    compiler_tolerance: tuple[float, float] = EXACT
    #: A typed PRNG key's implementation; None for an array type.
    key: KeyType | None = None
    #: The Open Inference Protocol (v2) datatype (``FP32``); None where the protocol has none (``jaxport serve``).
    oip: str | None = None
    #: The Spark SQL type's class in ``pyspark.sql.types`` (``FloatType``); None where Spark has none.
    spark: str | None = None
    #: Bits per element where jaxport stores the type packed (a sub-byte type: 4); None for a whole-byte type.
    bits: int | None = None

    @property
    def packed(self) -> bool:
        """Whether the type is stored packed, several elements per byte (``int4``, ``uint4``, ``float4_e2m1fn``)."""
        return self.bits is not None

    @property
    def width(self) -> int:
        """Bits per element: ``bits`` of a sub-byte type, else 8 x the item size."""
        return self.bits if self.bits is not None else self.itemsize * 8

    @property
    def npy(self) -> bool:
        """Whether a ``.npy`` header records this type by name (numpy's own types; keys are stored as their
        data)."""
        return not self.ml_dtypes and self.kind != "key"

    @property
    def x64(self) -> bool:
        """Whether JAX keeps this type only with ``jax_enable_x64`` on (the 64-bit types)."""
        return self.kind != "key" and self.itemsize == (16 if self.kind == "complex" else 8)


_TO_WIDE = ("float32", "float64", "complex64", "complex128")

TABLE: tuple[DType, ...] = (
    DType("bool", "bool", 1, "bool", mlir="i1", safetensors="BOOL", oip="BOOL", spark="BooleanType"),
    DType("int8", "i8", 1, "int", mlir="i8", safetensors="I8", oip="INT8", spark="ByteType"),
    DType("int16", "i16", 2, "int", mlir="i16", safetensors="I16", oip="INT16", spark="ShortType"),
    DType("int32", "i32", 4, "int", mlir="i32", safetensors="I32", oip="INT32", spark="IntegerType"),
    DType("int64", "i64", 8, "int", mlir="i64", safetensors="I64", oip="INT64", spark="LongType"),
    DType("uint8", "u8", 1, "uint", mlir="ui8", safetensors="U8", oip="UINT8"),
    DType("uint16", "u16", 2, "uint", mlir="ui16", safetensors="U16", oip="UINT16"),
    DType("uint32", "u32", 4, "uint", mlir="ui32", safetensors="U32", oip="UINT32"),
    DType("uint64", "u64", 8, "uint", mlir="ui64", safetensors="U64", oip="UINT64"),
    # rtol of the compiler tolerances: about 2**10 units in the last place of the output's largest value (2**4 for
    # the 8-bit floats, which have 2 or 3 mantissa bits): room for reductions summed in another order, never for a
    # different function.
    DType("bfloat16", "bf16", 2, "float", mlir="bf16", safetensors="BF16", ml_dtypes=True, precision=8,
          safe_floats=_TO_WIDE, tolerance=(1e-2, 1e-2), compiler_tolerance=(1e-2, 4e-2)),
    DType("float16", "f16", 2, "float", mlir="f16", safetensors="F16", precision=11, safe_floats=_TO_WIDE,
          tolerance=(1e-3, 1e-3), compiler_tolerance=(1e-3, 5e-3), oip="FP16"),
    DType("float32", "f32", 4, "float", mlir="f32", safetensors="F32", precision=24, safe_floats=_TO_WIDE[1:],
          tolerance=(1e-6, 1e-5), compiler_tolerance=(1e-6, 1e-4), oip="FP32", spark="FloatType"),
    DType("float64", "f64", 8, "float", mlir="f64", safetensors="F64", precision=53, safe_floats=("complex128",),
          tolerance=(1e-12, 1e-9), compiler_tolerance=(1e-12, 1e-9), oip="FP64", spark="DoubleType"),
    DType("complex64", "c64", 8, "complex", mlir="complex<f32>", safetensors="C64", precision=24,
          safe_floats=("complex128",), part="float32", tolerance=(1e-6, 1e-5), compiler_tolerance=(1e-6, 1e-4)),
    DType("complex128", "c128", 16, "complex", mlir="complex<f64>", precision=53, part="float64",
          tolerance=(1e-12, 1e-9), compiler_tolerance=(1e-12, 1e-9)),
    DType("float8_e4m3fn", "f8e4m3fn", 1, "float", mlir="f8E4M3FN", safetensors="F8_E4M3", ml_dtypes=True,
          precision=4, safe_floats=_TO_WIDE, tolerance=(1.25e-1, 1.25e-1), compiler_tolerance=(1.25e-1, 2.5e-1)),
    DType("float8_e5m2", "f8e5m2", 1, "float", mlir="f8E5M2", safetensors="F8_E5M2", ml_dtypes=True, precision=3,
          safe_floats=_TO_WIDE, tolerance=(2.5e-1, 2.5e-1), compiler_tolerance=(2.5e-1, 5e-1)),
    # Sub-byte types: one byte per element in memory (ml_dtypes), two per byte where jaxport stores them.
    # float4_e2m1fn's tolerances by float8's rule: its one mantissa bit makes a step a third to a half of a value.
    DType("int4", "i4", 1, "int", mlir="i4", ml_dtypes=True, bits=4),
    DType("uint4", "u4", 1, "uint", mlir="ui4", ml_dtypes=True, bits=4),
    DType("float4_e2m1fn", "f4e2m1fn", 1, "float", mlir="f4E2M1FN", safetensors="F4", ml_dtypes=True, precision=2,
          safe_floats=("bfloat16", "float8_e4m3fn", "float8_e5m2", *_TO_WIDE), tolerance=(5e-1, 5e-1),
          compiler_tolerance=(5e-1, 1.0), bits=4),
    # Typed PRNG keys: the item size is that of one key's data (uint32 words).
    DType("key<fry>", "key<fry>", 8, "key", key=KeyType("threefry2x32", (2,))),
    DType("key<rbg>", "key<rbg>", 16, "key", key=KeyType("rbg", (4,))),
    DType("key<urbg>", "key<urbg>", 16, "key", key=KeyType("unsafe_rbg", (4,))),
)

#: Canonical key dtype name -> its implementation.
KEYS: dict[str, KeyType] = {d.name: d.key for d in TABLE if d.key is not None}

#: Canonical name -> DType.
BY_NAME: dict[str, DType] = {d.name: d for d in TABLE}
#: safetensors dtype tag (``F32``) -> DType.
BY_SAFETENSORS: dict[str, DType] = {d.safetensors: d for d in TABLE if d.safetensors is not None}
#: MLIR element type (``f32``) -> DType.
BY_MLIR: dict[str, DType] = {d.mlir: d for d in TABLE if d.mlir is not None}
#: The dtypes a ``.npy`` header cannot name, which numpy stores as raw void bytes (``|V2``, ``|V1``).
NOT_IN_NPY: tuple[str, ...] = tuple(d.name for d in TABLE if d.ml_dtypes)
#: The sub-byte types, stored packed (``bits`` per element).
PACKED: tuple[str, ...] = tuple(d.name for d in TABLE if d.packed)
#: Types ml_dtypes and JAX define that no artifact can hold, and why (the end of a sentence naming them).
NOT_EXPORTABLE: dict[str, str] = {
    name: "JAX's serialization has no code for it (jax.export cannot serialize a function that takes or returns one)"
    for name in ("int2", "uint2")}

_ALIASES: dict[str, str] = {d.short: d.name for d in TABLE}
_ALIASES.update({d.name: d.name for d in TABLE})
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
    return name in BY_NAME and BY_NAME[name].x64


def is_key(name: str) -> bool:
    """Whether a canonical dtype name is a typed PRNG key's."""
    return name in KEYS


def to_numpy(name: str):
    """The numpy dtype for a canonical name (imports numpy, and ml_dtypes for bfloat16 and float8); for a PRNG key,
    JAX's key dtype (imports JAX), which ``jax.ShapeDtypeStruct`` takes and a key array has."""
    import numpy as np

    if name in KEYS:
        return _key_dtype(KEYS[name].impl)
    if name in BY_NAME and BY_NAME[name].ml_dtypes:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


@functools.cache
def _key_dtype(impl: str):
    import jax

    return jax.eval_shape(lambda: jax.random.key(0, impl=impl)).dtype


def stored_nbytes(name: str, count: int) -> int:
    """The bytes ``count`` elements of a canonical dtype take where jaxport stores them: packed for a sub-byte type
    (``bits`` per element, the last byte's unused bits zero), else ``count`` x the item size."""
    d = BY_NAME[name]
    return (count * d.bits + 7) // 8 if d.bits is not None else count * d.itemsize


def int_limits(name: str) -> tuple[int, int]:
    """The smallest and the largest value of an integer dtype (``int4``: -8 and 7), without numpy (whose ``iinfo``
    does not know ml_dtypes' types)."""
    d = BY_NAME[name]
    if d.kind == "uint":
        return 0, (1 << d.width) - 1
    return -(1 << (d.width - 1)), (1 << (d.width - 1)) - 1


def neighbour(value, up: bool):
    """The value of a float dtype next to the finite scalar ``value`` (a numpy scalar of that dtype), above it or
    below it, by its bits (numpy's ``nextafter`` knows none of ml_dtypes' float8 types)."""
    import numpy as np

    width = BY_NAME[str(value.dtype)].width  # 4 for float4_e2m1fn, held in a byte's low bits
    unsigned = np.dtype(f"uint{max(width, 8)}")
    bits = int(np.asarray(value).view(unsigned)) & ((1 << width) - 1)
    sign = 1 << (width - 1)
    magnitude = bits & (sign - 1)
    negative = bool(bits & sign) and magnitude != 0
    if magnitude == 0:  # +0 or -0
        bits = 1 if up else sign | 1
    elif negative:
        bits = bits - 1 if up else bits + 1
    else:
        bits = bits + 1 if up else bits - 1
    return np.asarray(bits, dtype=unsigned).view(value.dtype)[()]


def raw_void(itemsize: int) -> tuple[str, ...]:
    """The dtypes that numpy stores as the raw void type of ``itemsize`` bytes (``|V2``: ``bfloat16``)."""
    return tuple(n for n in NOT_IN_NPY if BY_NAME[n].itemsize == itemsize)


def from_numpy(dtype) -> DType | None:
    """The jaxport dtype of a numpy dtype, or None if jaxport does not support it."""
    return BY_NAME.get(str(dtype))


#: How ``jax.jit`` types a Python number (without 64-bit mode): its dtype, and whether weakly.
_PYTHON_NUMBERS = {bool: ("bool", False), int: ("int32", True), float: ("float32", True),
                   complex: ("complex64", True)}


def python_number(value) -> tuple[DType, bool] | None:
    """How ``jax.jit`` types a Python ``bool``, ``int``, ``float`` or ``complex``: its dtype and whether it is weakly
    typed; None for anything else (a numpy scalar has a dtype of its own)."""
    found = _PYTHON_NUMBERS.get(type(value))
    return (BY_NAME[found[0]], found[1]) if found is not None else None


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
            return t.width >= s.width if s.kind == "int" else t.width > s.width
        if t.kind == "uint":
            return s.kind == "uint" and t.width >= s.width
        return (t.precision or 0) >= s.width - (s.kind == "int")
    return t.name in s.safe_floats
