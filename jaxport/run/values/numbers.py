"""Python numbers as the arrays an input of a given dtype takes: their value kept exactly as JAX takes it, or an
``InputError`` (``jaxport.load(...)(3)``, ``jaxport.save_inputs(state=...)``). numpy only."""

from __future__ import annotations

from typing import Any

from ... import dtypes
from ...errors import InputError


def as_dtype(arr: Any, dtype: str) -> Any:
    """``arr`` as ``dtype``, without the warnings numpy gives for values the conversion changes (judged apart)."""
    import warnings

    import numpy as np

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return arr.astype(dtypes.to_numpy(dtype))


def python_scalar(name: str, value: bool | int | float | complex, dtype: str, *, subject: str = "input") -> Any:
    """A Python number given for input ``name`` (``jaxport.load(...)(3)``) as a 0-d array of the input's ``dtype``,
    where it keeps its value as JAX would take it: a ``bool`` for a ``bool`` input only (and nothing else for one);
    an ``int`` or a whole ``float`` within an integer input's range; any real number for a float input, rounded to
    it but not overflowing to infinity (any number for a complex one). Else an ``InputError`` naming the input and
    the value (``Exported.call`` itself refuses a float for an integer input, and ``astype`` would truncate it);
    ``subject`` names what ``name`` is in it (``leaf`` for ``save_inputs``)."""
    import math

    import numpy as np

    kind = dtypes.BY_NAME[dtype].kind
    text = repr(value)
    shown = f"{subject} {name!r} is the Python {type(value).__name__} " + (
        text if len(text) <= 40 else f"{text[:12]}...{text[-4:]} ({len(text)} characters)")
    if kind == "key":
        raise InputError(f"{shown}, but the artifact expects a PRNG key ({dtype}); give jax.random.key(seed).")
    if (kind == "bool") != isinstance(value, (bool, np.bool_)):
        raise InputError(f"{shown}, but the artifact expects {dtype}: give "
                         f"{'True or False' if kind == 'bool' else 'a number, not a bool'}.")
    if kind == "bool":
        return np.asarray(bool(value))
    if isinstance(value, complex):
        if kind != "complex":
            raise InputError(f"{shown}, but the artifact expects {dtype}, which holds no complex number.")
        finite = math.isfinite(value.real) and math.isfinite(value.imag)
        converted = as_dtype(np.asarray(value), dtype)
    elif kind in ("int", "uint"):
        least, most = dtypes.int_limits(dtype)
        whole = value if isinstance(value, int) else int(value) if math.isfinite(value) and value == int(value) \
            else None
        if whole is None or not least <= whole <= most:
            raise InputError(f"{shown}, which {dtype} cannot hold (integers {least} to {most}); give a "
                             f"whole number in that range.")
        return np.asarray(whole, dtype=dtypes.to_numpy(dtype))
    else:
        try:  # an int beyond every float overflows here already
            real = float(value)
        except OverflowError:
            raise InputError(f"{shown}, which overflows {dtype}; give a value within its range.") from None
        finite, converted = math.isfinite(real), as_dtype(np.asarray(real), dtype)
    if finite and not np.all(np.isfinite(converted)):
        raise InputError(f"{shown}, which overflows {dtype}; give a value within its range.")
    return converted


def value_array(name: str, value: Any) -> Any:
    """An input given as a Python value that is not an array (a list of numbers, nested lists) as the numpy array it
    reads as; an ``InputError`` naming the input for a value numpy cannot read as one array of numbers: ragged lists,
    a list that holds itself or nests more than numpy's 64 dimensions (numpy's ``ValueError``), and a value numpy
    reads only as an array of Python objects (a dict, an object, a list of those)."""
    import numpy as np

    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError, RecursionError) as e:
        said = (str(e).strip().splitlines() or [""])[0][:200].rstrip(".")
        raise InputError(f"input {name!r} ({type(value).__name__}) cannot be read as an array: {type(e).__name__}: "
                         f"{said}. Give an array.") from None
    if arr.dtype.kind == "O":
        raise InputError(f"input {name!r} is a {type(value).__name__}, not an array of numbers (numpy reads it only "
                         f"as an array of Python objects); give an array.")
    return arr
