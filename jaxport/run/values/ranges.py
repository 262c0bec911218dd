"""Value ranges of random inputs: ``--range NAME=LO:HI`` and a manifest input's ``range``, checked against the input's
dtype, and the arrays drawn from them. No JAX.

A range is half-open, [LO, HI): a float input is uniform in it (and every value, after rounding to the input's
dtype, lies inside it), an integer input takes the integers LO..HI-1 (``--range tok=0:32000`` gives token ids
0..31999). A range is refused on a bool or PRNG key input, when LO >= HI, when a bound is not finite, for an integer
input when a bound is not an integer or the range leaves the dtype (``int8`` takes at most -128:128), and for a float
input when a bound lies beyond the dtype's largest finite value.

An integer input's bound may be a dimension expression (``[0, nodes]``, ``--range senders=0:nodes``: the indices
0..nodes-1 of an axis of size ``nodes``), evaluated at each call's dimension values (``resolved``) and then checked
as a number; before the values are known it must parse and name only the function's dimension variables.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ... import dimexpr, dtypes
from ...artifact.model import Function, Input
from ...errors import FormatError, InputError, UsageError

Range = tuple[float, float]
Error = Callable[[str], Exception]



def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isfinite(value) and value == int(value) and abs(value) < 1e16:
        return str(int(value))
    return f"{value:g}" if abs(value) >= 1e16 else repr(value)


def float_limit(dtype: str) -> float:
    """The largest finite value of a float (or complex: its parts') dtype."""
    import ml_dtypes
    import numpy as np

    part = dtypes.BY_NAME[dtype].part or dtype
    target = dtypes.to_numpy(part)
    info = ml_dtypes.finfo(target) if dtypes.BY_NAME[part].ml_dtypes else np.finfo(target)
    return float(info.max)


class _AtTheseSizes(Exception):
    """A range from dimension expressions that does not hold at the dimension values it was evaluated at."""


def check_range(inp: Input, value: Any, where: str, error: Error = UsageError) -> Range:
    """The range ``value`` (``[LO, HI]``) of the manifest input ``inp``, checked against its dtype (see the module
    docstring); integer bounds come back as ``int``. ``where`` starts the message of ``error``. A :class:`Resolved`
    range that does not hold (empty, or leaving the dtype) is refused with a ``UsageError`` whatever ``error`` is:
    its expressions are valid, and the call's dimension values are what it does not hold at (export refuses a range
    that fails at a corner of the dimension bounds; one from an older artifact, or a ``--range``, may fail
    between)."""
    name, dtype = inp.name, inp.dtype
    if isinstance(value, Resolved) and not any(isinstance(v, str) for v in value):
        try:
            return check_range(inp, tuple(value), f"[{value.given[0]}, {value.given[1]}] evaluated at {value.at}",
                               _AtTheseSizes)
        except _AtTheseSizes as e:
            raise UsageError(f"{where}: {e} Call it at other dimension values (--dim NAME=VALUE), or give the "
                             f"input's values with --range {name}=LO:HI.") from None
    if isinstance(value, (list, tuple)) and len(value) == 2 and any(isinstance(v, str) for v in value):
        return check_expression_range(inp, value, where, error)
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(_number(v) for v in value):
        raise error(f"{where}: the range of input {name!r} must be two numbers [LO, HI]; it is {value!r:.80}.")
    lo, hi = value
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise error(f"{where}: the range {_shown(lo)}:{_shown(hi)} of input {name!r} is not finite; give two "
                    f"finite numbers.")
    if lo >= hi:
        raise error(f"{where}: the range {_shown(lo)}:{_shown(hi)} of input {name!r} is empty; LO must be less "
                    f"than HI (the range is half-open, [LO, HI)).")
    kind = dtypes.BY_NAME[dtype].kind
    if kind == "bool":
        raise error(f"{where}: input {name!r} is bool, which takes no range (random bools are fair coin flips); "
                    f"leave out its range.")
    if kind == "key":
        raise error(f"{where}: input {name!r} is a PRNG key array ({dtype}), which takes no range (random keys are "
                    f"made from the seed); leave out its range.")
    if kind in ("int", "uint"):
        if lo != int(lo) or hi != int(hi):
            raise error(f"{where}: the range {_shown(lo)}:{_shown(hi)} of the {dtype} input {name!r} must have "
                        f"integer bounds (LO..HI-1 are drawn).")
        lo, hi = int(lo), int(hi)
        small, large = dtypes.int_limits(dtype)
        if lo < small or hi - 1 > large:
            raise error(f"{where}: the range {lo}:{hi} of input {name!r} leaves {dtype}, which holds "
                        f"{small}..{large}; give a range within {small}:{large + 1}.")
        return lo, hi
    limit = float_limit(dtype)
    if lo < -limit or hi > limit:
        raise error(f"{where}: the range {_shown(lo)}:{_shown(hi)} of input {name!r} leaves {dtype}, whose largest "
                    f"finite value is {limit:g}; give a range within -{limit:g}:{limit:g}.")
    part = dtypes.BY_NAME[dtype].part or dtype
    if representable(float(lo), float(hi), part) is None:
        raise error(f"{where}: no {part} value lies in the range {_shown(lo)}:{_shown(hi)} of input {name!r}; "
                    f"widen it.")
    return float(lo), float(hi)


def check_expression_range(inp: Input, value: Any, where: str, error: Error = UsageError,
                           variables: set[str] | None = None) -> Any:
    """A range with a dimension expression for a bound (see the module docstring), before the dimensions' values are
    known: an integer input's, each bound a number or an expression that parses (over ``variables`` when given)."""
    name, dtype = inp.name, inp.dtype
    if dtypes.BY_NAME[dtype].kind not in ("int", "uint"):
        raise error(f"{where}: '{name}={value[0]}:{value[1]}': LO and HI must be finite numbers (only an integer "
                    f"input's bound may be a dimension; {name!r} is {dtype}).")
    for bound in value:
        if isinstance(bound, str):
            try:
                expr = dimexpr.parse(bound)
            except dimexpr.DimExprError as e:
                raise error(f"{where}: the range bound {bound!r} of input {name!r} is not a number nor a dimension "
                            f"expression: {e}.") from None
            unknown = sorted(dimexpr.variables(expr) - variables) if variables is not None else []
            if unknown:
                raise error(f"{where}: the range bound {bound!r} of input {name!r} names {unknown[0]!r}, which is "
                            f"not a dimension variable of the function ({', '.join(sorted(variables or ())) or 'none'}"
                            f").")
        elif not _number(bound) or bound != int(bound):
            raise error(f"{where}: the range {value[0]}:{value[1]} of the {dtype} input {name!r} must have integer "
                        f"bounds (LO..HI-1 are drawn).")
    return value[0], value[1]


class Resolved(tuple[Any, ...]):
    """A range ``(LO, HI)`` evaluated from dimension expressions (:func:`resolved`), which remembers them: ``given``,
    the bounds as written, and ``at``, the dimension values they were evaluated at (``n=40, k=3``)."""

    given: tuple[Any, ...]
    at: str

    def __new__(cls, bounds: list[Any], given: tuple[Any, ...], at: str) -> Resolved:
        out = super().__new__(cls, bounds)
        out.given, out.at = given, at
        return out


def resolved(value: Any, dims: Mapping[str, int]) -> Any:
    """``value`` (``[LO, HI]``) with each bound that is a dimension expression evaluated at ``dims``, as a
    :class:`Resolved`; the expression as it is when ``dims`` lacks one of its variables (the range's check then says
    so)."""
    if not isinstance(value, (list, tuple)) or not any(isinstance(v, str) for v in value):
        return value
    out, named = [], set()
    for bound in value:
        if isinstance(bound, str):
            try:
                expr = dimexpr.parse(bound)
                named |= dimexpr.variables(expr)
                bound = dimexpr.evaluate(expr, dict(dims))
            except dimexpr.DimExprError:
                pass
        out.append(bound)
    return Resolved(out, tuple(value), ", ".join(f"{v}={dims[v]}" for v in sorted(named) if v in dims))


def check_ranges(fn: Function, ranges: Mapping[str, Any] | None, where: str = "--range"
                 ) -> None:
    """Refuse (``UsageError``) ranges for inputs the function ``fn`` does not have, listing its inputs, and ranges
    that do not fit their input's dtype (see the module docstring)."""
    inputs = fn.inputs
    by_name = {i.name: i for i in inputs}
    for name, value in (ranges or {}).items():
        if name not in by_name:
            close = difflib.get_close_matches(name, list(by_name), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UsageError(f"{where}: unknown input name {name!r}; the inputs are: "
                             f"{', '.join(by_name) or '(none)'}.{hint}")
        if isinstance(value, (list, tuple)) and len(value) == 2 and any(isinstance(v, str) for v in value):
            check_expression_range(by_name[name], value, where, variables=set(fn.dims) |
                                   _shape_variables(inputs))
        else:
            check_range(by_name[name], value, where)


def _shape_variables(inputs: tuple[Input, ...]) -> set[str]:
    """The dimension variables of a function's input shapes."""
    found: set[str] = set()
    for inp in inputs:
        for d in inp.shape:
            if isinstance(d, str):
                try:
                    found |= dimexpr.variables(dimexpr.parse(d))
                except dimexpr.DimExprError:
                    continue
    return found


def representable(lo: float, hi: float, dtype: str) -> tuple[float, float] | None:
    """The smallest and the largest value of the float dtype ``dtype`` in [lo, hi); None if none is."""
    import numpy as np

    target = dtypes.to_numpy(dtype)
    low = np.asarray(lo, dtype=np.float64).astype(target)[()]
    if float(low) < lo:
        low = dtypes.neighbour(low, up=True)
    high = np.asarray(hi, dtype=np.float64).astype(target)[()]
    if float(high) >= hi:
        high = dtypes.neighbour(high, up=False)
    if float(low) > float(high):
        return None
    return float(low), float(high)


def draw(rng: Any, inp: Input, shape: tuple[int, ...], bounds: Range | None) -> Any:
    """A random array for the manifest input ``inp`` of ``shape``: from ``bounds`` (a checked range) when given,
    else the defaults: floats standard normal (complex: both parts), integers in [0, 8), bools fair coin flips."""
    import numpy as np

    dtype = inp.dtype
    kind = dtypes.BY_NAME[dtype].kind
    target = dtypes.to_numpy(dtype)
    if kind == "bool":
        return rng.random(shape) < 0.5
    if kind in ("int", "uint"):
        if bounds is None:
            return rng.integers(0, 8, size=shape).astype(target)
        if dtypes.BY_NAME[dtype].packed:  # numpy draws no ml_dtypes integer: int8 values that fit int4
            return rng.integers(int(bounds[0]), int(bounds[1]), size=shape, dtype=np.int8).astype(target)
        return rng.integers(int(bounds[0]), int(bounds[1]), size=shape, dtype=target)
    part = dtypes.BY_NAME[dtype].part or dtype

    def one() -> Any:
        if bounds is None:
            return rng.standard_normal(shape)
        inside = representable(float(bounds[0]), float(bounds[1]), part)
        assert inside is not None, "check_range refuses a range that holds no value of the dtype"
        low, high = inside
        values = rng.uniform(float(bounds[0]), float(bounds[1]), size=shape)
        values = values.astype(dtypes.to_numpy(part)).astype(np.float64)
        return np.clip(values, low, high)

    if kind == "complex":
        real = one()
        return (real + 1j * one()).astype(target)
    return one().astype(target)


def check_values(fn: Function, flat: Sequence[Any], dims: Mapping[str, int]) -> None:
    """Refuse the first input value (``flat``: the arrays in the inputs' order, None for one not to check) outside
    the range its manifest entry declares, evaluated at the call's dimension values ``dims``: ``load(check_ranges=
    True)``, ``call --check-ranges``. An ``InputError`` names the input, the index and the value. An integer range
    [LO, HI) holds LO..HI-1, a float one LO <= v < HI, and NaN lies in none; inputs without a declared range (none,
    or one taken from a ``like:`` example, ``range_example``) are not looked at."""
    import numpy as np

    for inp, value in zip(fn.inputs, flat):
        if inp.range is None or inp.range_example or value is None:
            continue
        given = resolved(list(inp.range), dims)
        lo, hi = check_range(inp, given, "the artifact's manifest", FormatError)
        arr = np.asarray(value)
        d = dtypes.BY_NAME.get(str(arr.dtype))
        if d is not None and d.ml_dtypes:  # bfloat16, float8, int4: compared as the numbers they are
            arr = arr.astype(np.float64 if d.kind == "float" else np.int64)
        with np.errstate(invalid="ignore"):
            inside = (arr >= lo) & (arr < hi)
        if inside.all():
            continue
        index = tuple(int(i) for i in np.unravel_index(int(np.argmin(inside.reshape(-1))), arr.shape))
        shown = f"{inp.name}{list(index)}" if index else inp.name
        at = f" ([{given.given[0]}, {given.given[1]}) at {given.at})" if isinstance(given, Resolved) else ""
        raise InputError(f"input {inp.name!r}: {shown} = {np.asarray(value)[index]!s} lies outside its declared range "
                         f"[{_shown(lo)}, {_shown(hi)}){at}, which this call checks (--check-ranges); give values "
                         f"in the range.")
