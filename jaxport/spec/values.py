"""The values a spec gives that other readers check by the same rules: platforms, artifact and function names, and
input ranges (``range: [LO, HI]``; the manifest reader and ``--range`` use ``input_range`` too).

Each check raises the error class its caller reports (``SpecError`` for names and platforms, ``ValueError`` with the
reason for a range, which each caller words as its own error). No JAX or numpy.
"""

from __future__ import annotations

import math
import re

from .. import dimexpr, dtypes
from .._text import closest as closest  # the one did-you-mean rule, which spec messages use
from .._text import suggest as suggest
from ..errors import SpecError

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _number_text(x: Any) -> str:
    return repr(x) if not isinstance(x, int) or abs(x) < 10**30 else f"a {len(str(abs(x)))}-digit number"


def parse_range(raw: Any, dtype: str) -> tuple[tuple[Any, Any], list[str]]:
    """A spec's ``range: [LO, HI]`` of an input of canonical dtype ``dtype``: the checked bounds (``input_range``, or
    ``dimension_range`` when a bound is a dimension expression) and the dimension variables they name. Raises
    ValueError with the reason (no trailing period)."""
    if not isinstance(raw, list) or len(raw) != 2:
        raise ValueError(f"must be a list of two numbers [LO, HI], such as [0, 32000], found {raw!r}")
    if any(isinstance(v, str) for v in raw) and dtypes.BY_NAME[dtype].kind in ("int", "uint"):
        return dimension_range(raw[0], raw[1], dtype)
    return input_range(raw[0], raw[1], dtype), []


def dimension_range(lo: Any, hi: Any, dtype: str) -> tuple[tuple[int | str, int | str], list[str]]:
    """``range: [0, nodes]``: the range of an integer input whose bounds may be dimension expressions (the indices of
    an axis; evaluated at each call's dimension values), the expressions in canonical text, and the dimension
    variables they name. Raises ValueError with the reason (no trailing period), as ``input_range`` does."""
    if dtypes.BY_NAME[dtype].kind not in ("int", "uint"):
        raise ValueError(f"only an integer input's range may name a dimension (its values index an axis); this input "
                         f"is {dtype}: give numbers")
    out: list[int | str] = []
    names: list[str] = []
    for name, x in (("LO", lo), ("HI", hi)):
        if isinstance(x, str):
            try:
                expr = dimexpr.parse(x)
            except dimexpr.DimExprError as e:
                raise ValueError(f"{name} {x!r} is not a number nor a dimension expression: {e}") from None
            if not dimexpr.variables(expr):
                raise ValueError(f"{name} {x!r} names no dimension; write a number without quotes")
            names += sorted(dimexpr.variables(expr))
            out.append(str(expr))
        elif isinstance(x, int) and not isinstance(x, bool) or isinstance(x, float) and x.is_integer():
            out.append(int(x))
        else:
            raise ValueError(f"{name} must be an integer or a dimension expression such as 'nodes', found {x!r}")
    return (out[0], out[1]), names


#: The size a dimension variable without a ``max`` is taken at when a range naming it is checked at export: the
#: largest axis an int32 index addresses. A range that fits only below it needs a ``max`` under ``dims``.
UNBOUNDED_DIMENSION = (1 << 31) - 1
#: The most dimension variables one range may name (its corners are checked one by one: 2**N of them).
MAX_RANGE_VARIABLES = 8
#: Bounds that hold at most this many sizes are checked at every size, not only at their corners: a bound that is
#: not monotone (``mod(n, 4)``, ``n*n - 6*n + 9``) can be empty between the corners.
MAX_RANGE_SIZES = 4096


def check_corners(bounds: tuple[Any, Any], dtype: str, dims: Mapping[str, tuple[int, int | None]],
                  constraints: Sequence[dimexpr.Constraint] = ()) -> None:
    """Refuse a dimension-dependent range (``dimension_range``'s bounds) that is empty or leaves ``dtype`` at some
    corner of the dimension bounds: every variable it names at its min and its max (``dims``: ``var -> (min, max or
    None)``, a variable not listed is at least 1; one without a max is taken at :data:`UNBOUNDED_DIMENSION`), and,
    when the bounds hold at most :data:`MAX_RANGE_SIZES` sizes, at every size between them too (a bound that is not
    monotone, ``mod(n, 4)``, can fail there only); each size where one of ``constraints`` fails left out. Raises
    ValueError naming the size (no trailing period)."""
    import itertools

    exprs = [dimexpr.parse(b) if isinstance(b, str) else None for b in bounds]
    names = sorted({v for e in exprs if e is not None for v in dimexpr.variables(e)})
    shown = f"[{bounds[0]}, {bounds[1]}]"
    if len(names) > MAX_RANGE_VARIABLES:
        raise ValueError(f"{shown} names {len(names)} dimension variables; a range may name at most "
                         f"{MAX_RANGE_VARIABLES}")
    ends, spans = [], []
    for v in names:
        least, most = dims.get(v, (1, None))
        top = UNBOUNDED_DIMENSION if most is None else most
        ends.append(sorted({least, top}))
        spans.append(range(least, top + 1))
    corners = list(itertools.product(*ends))
    at_corner = set(corners)
    between: Any = () if math.prod(len(s) for s in spans) > MAX_RANGE_SIZES else (
        p for p in itertools.product(*spans) if p not in at_corner)
    for values in itertools.chain(corners, between):
        env = dict(zip(names, values))
        try:
            if not all(c.holds(env) for c in constraints if c.variables() <= env.keys()):
                continue
        except dimexpr.DimExprError:
            continue
        unbounded = [v for v in names if dims.get(v, (1, None))[1] is None and env[v] == UNBOUNDED_DIMENSION]
        where = "a corner of the dimension bounds" if values in at_corner else \
            "a size between the corners of the dimension bounds"
        corner = ", ".join(f"{v}={env[v]}" for v in names) + f" ({where}" + (
            f"; {', '.join(unbounded)} {'has' if len(unbounded) == 1 else 'have'} no max under 'dims', so "
            f"{'it is' if len(unbounded) == 1 else 'they are'} taken as 2**31 - 1" if unbounded else "") + ")"
        try:
            lo, hi = (dimexpr.evaluate(e, env) if e is not None else b for e, b in zip(exprs, bounds))
        except dimexpr.DimExprError as e:
            raise ValueError(f"{shown} at {corner}: {e}") from None
        try:
            input_range(lo, hi, dtype)
        except ValueError as e:
            raise ValueError(f"{shown} is [{_number_text(lo)}, {_number_text(hi)}) at {corner}: {e}") from None


def input_range(lo: Any, hi: Any, dtype: str) -> tuple[int | float, int | float]:
    """The half-open range ``[lo, hi)`` of values an input of canonical dtype ``dtype`` takes, checked and normalized:
    integers for integer dtypes (``[0, 32000]`` is token ids 0..31999), floats otherwise.

    Raises ValueError with the reason (no trailing period; the caller prefixes where): a boolean or key dtype, a bound
    that is not a number or not finite, ``lo >= hi``, and for integer dtypes a non-integral bound or one outside the
    dtype's values (``hi`` may be one past the largest). The spec (``range:``), the manifest reader and the command
    line (``--range``) apply these same rules."""
    kind = dtypes.BY_NAME[dtype].kind
    if kind == "bool":
        raise ValueError(f"a {dtype} input takes no range (its values are false and true); remove 'range'")
    if kind == "key":
        raise ValueError(f"a {dtype} input (a PRNG key) takes no range (random keys come from the seed); remove "
                         f"'range'")
    for name, x in (("LO", lo), ("HI", hi)):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ValueError(f"{name} must be a number, found {x!r}; write [LO, HI] such as [0, 1]")
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError(f"{name} must be a finite number, found {x!r}")
    if kind in ("int", "uint"):
        ints = []
        for name, x in (("LO", lo), ("HI", hi)):
            if isinstance(x, float) and not x.is_integer():
                raise ValueError(f"{dtype} values are integers, but {name} is {x!r}; give whole numbers")
            ints.append(int(x))
        least, most = dtypes.int_limits(dtype)
        a, b = ints
        if a >= b:
            raise ValueError(f"LO {_number_text(a)} is not below HI {_number_text(b)}; the range is half-open "
                             f"[LO, HI), so give LO < HI ([0, 10] is 0..9)")
        if a < least or b > most + 1:
            raise ValueError(f"[{_number_text(a)}, {_number_text(b)}) does not fit {dtype}, whose values are "
                             f"{least}..{most}; give LO >= {least} and HI <= {most + 1}")
        return a, b
    try:
        a_f, b_f = float(lo), float(hi)
    except OverflowError:
        raise ValueError(f"LO and HI must be finite numbers, found {_number_text(lo)} and {_number_text(hi)}") \
            from None
    if a_f >= b_f:
        raise ValueError(f"LO {_number_text(lo)} is not below HI {_number_text(hi)}; the range is half-open "
                         f"[LO, HI), so give LO < HI")
    return a_f, b_f


def platform_hint(name: str) -> str:
    """`` Did you mean 'cuda'?`` for an unknown platform name: JAX names a GPU by its vendor's platform (``gpu``:
    ``cuda``, or ``rocm`` for AMD's), other names by the closest spelling; "" when none is close."""
    if name.strip().lower() in ("gpu", "nvidia", "cuda12", "cuda13"):
        return " Did you mean 'cuda'? (JAX names an NVIDIA GPU cuda, an AMD one rocm.)"
    return suggest(name.lower(), PLATFORMS)


def check_platform(name: Any, where: str) -> str:
    if not isinstance(name, str) or name.lower() not in PLATFORMS:
        raise SpecError(f"{where}: unknown platform {name!r}.{platform_hint(str(name))} "
                        f"Use some of: {', '.join(PLATFORMS)}.")
    return name.lower()


def check_function_name(name: Any, where: str) -> str:
    """A function's name in an artifact: an identifier (``[A-Za-z_][A-Za-z0-9_]*``, at most 256 characters), since
    it names the program member ``functions/NAME.jaxexport`` and the manifest's ``functions`` key."""
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 256:
        raise SpecError(f"{where}: {name!r} is not a valid function name: use letters, digits and '_', not starting "
                        f"with a digit (at most 256 characters).")
    return name


def check_artifact_name(name: str, where: str) -> str:
    if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", name):
        raise SpecError(f"{where}: {name!r} is not a valid artifact name: use letters, digits, '_', '-', '.' "
                        f"(at most 128 characters, not starting with '.' or '-').")
    return name
