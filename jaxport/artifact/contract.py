"""The input contract of a function: which arrays it accepts, and the dimension values that make a call valid.

``check`` compares actual shapes and dtypes with a manifest entry (ranks, dtypes, constant dimensions, dimension
variables solved from the shapes and checked against their bounds and the constraints) and names the first problem:
the input, the axis, the variable and the relation. ``resolve_dims`` finds values for every dimension variable (for
random inputs, ``compile``, ``verify``). No JAX, no numpy: these read the manifest and plain shapes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import dimexpr, dtypes
from ..errors import FormatError, InputError
from .bounds import Bounds
from .model import Function, Input, Output
from .summary import array_type


def _type(a: Input | Output) -> str:
    """``f32[batch, 784]``."""
    return array_type(a)


def input_names(fn: Function) -> list[str]:
    return fn.input_names


def unknown_input_error(name: str, declared: Mapping[str, Any] | list[str], context: str = "") -> InputError:
    names = list(declared)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return InputError(f"unknown input name {name!r}{context}; the inputs are: {', '.join(names) or '(none)'}.{hint}")


def check_input_names(given: Collection[str], declared: Sequence[str]) -> None:
    """The inputs of a call by name, ``given``, against the function's, ``declared``: a name that is none of them
    (:func:`unknown_input_error`, naming the closest), then any of them missing, is an ``InputError``."""
    for name in given:
        if name not in declared:
            raise unknown_input_error(name, list(declared))
    missing = [n for n in declared if n not in given]
    if missing:
        raise InputError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}.")


# --- checking arrays against the manifest ----------------------------------------------------------------------


def _convert_hint(name: str, dtype: str, actual: str, source: str | None) -> str:
    """How to give input ``name`` as ``dtype``: ``call --cast`` where it applies (it converts when every value is
    kept: always for a pair ``dtypes.safe_cast`` allows, and is named for other pairs of integers, such as numpy's
    default int64 ids for an int32 input, and for any other pair of numbers read from a file, such as numpy's default
    float64 for a float32 input, whose values it judges one by one), and how to convert it into a new file (never
    over the user's own file)."""
    known = dtypes.BY_NAME.get(dtype)
    target = f"ml_dtypes.{dtype}" if known is not None and known.ml_dtypes else f"np.{dtype}"
    imports = "import numpy as np" + ("; import ml_dtypes" if target.startswith("ml_dtypes") else "")
    cast = ""
    if actual in dtypes.BY_NAME and dtypes.safe_cast(actual, dtype):
        cast = " Or let 'jaxport call --cast' convert it on reading (every value is kept)."
    elif actual in dtypes.BY_NAME and known is not None and (
            {dtypes.BY_NAME[actual].kind, known.kind} <= {"int", "uint"}
            or source is not None and "key" not in (dtypes.BY_NAME[actual].kind, known.kind)):
        cast = f" Or let 'jaxport call --cast' convert it on reading: it does when every value is kept as {dtype}."
    if source and source.endswith(".npy") and "'" not in source:
        new = f"{source[:-len('.npy')]}.{dtype}.npy"
        return (f"Convert it into a new file with: python -c \"{imports}; np.save('{new}', np.load('{source}')"
                f".astype({target}))\" and give {new}.{cast}")
    return f"Convert it with {name.replace('/', '_')}.astype({target}) ({imports}).{cast}"


def key_mismatch(i: Input, a: ArrayInfo) -> str:
    """Why an array of another dtype cannot be the PRNG key input ``i`` (or a key the array input ``i``), and what
    to pass instead."""
    given = f"{a.dtype}{list(a.shape)}"
    if not dtypes.is_key(i.dtype):
        return (f"input {i.name!r} is {_type(i)}, but a PRNG key array ({given}) was given; pass an array of "
                f"{i.dtype}.")
    impl = dtypes.KEYS[i.dtype].impl
    data = list(dtypes.KEYS[i.dtype].data_shape)
    raw = (f" (raw key data, uint32 with a last axis of {data[0]}, becomes one with jax.random.wrap_key_data(data, "
           f"impl={impl!r}))")
    return (f"input {i.name!r} is a PRNG key array, {_type(i)}, but {given} was given; pass "
            f"jax.random.key(seed, impl={impl!r}){raw}.")


def parsed_shape(inp: Input) -> list[dimexpr.Expr | int]:
    return [d if isinstance(d, int) else dimexpr.parse(d) for d in inp.shape]


def rank_mismatch(i: Input, dims: list[dimexpr.Expr | int], shape: Sequence[int]) -> str | None:
    """Why an array of ``shape`` cannot be input ``i`` (whose parsed shape is ``dims``) by its rank; None if it
    can."""
    if len(shape) == len(dims):
        return None
    return (f"input {i.name!r} has rank {len(shape)} (shape {tuple(shape)}), but the artifact expects rank "
            f"{len(dims)}: {_type(i)}.")


def constant_mismatch(i: Input, dims: list[dimexpr.Expr | int], shape: Sequence[int]) -> str | None:
    """Why an array of ``shape`` (of the right rank) cannot be input ``i`` by a constant dimension; None if it
    can."""
    for axis, (d, n) in enumerate(zip(dims, shape)):
        if isinstance(d, int) and d != n:
            return f"input {i.name!r}: shape[{axis}] = {n}, but the artifact expects {d} ({_type(i)})."
    return None


def _ordered_variables(text: str) -> list[str]:
    seen: list[str] = []
    for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*(?!\s*\()", text):
        if m.group(0) not in seen:
            seen.append(m.group(0))
    return seen


def _evaluate(d: dimexpr.Expr, env: dict[str, int], name: str, axis: int) -> int:
    try:
        return dimexpr.evaluate(d, env)
    except dimexpr.DimExprError as e:
        raise InputError(f"input {name!r}: shape[{axis}] is {d}, which cannot be evaluated with "
                         f"{', '.join(f'{k} = {v}' for k, v in env.items())}: {e}.") from None


@dataclass(frozen=True)
class ArrayInfo:
    """What the checks look at: an input's name, actual shape and dtype, and where it came from (for messages)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    source: str | None = None


def check(fn: Function, arrays: list[ArrayInfo]) -> dict[str, int]:
    """Check arrays (one per manifest input, in order) against a function's manifest entry.

    Returns the dimension variables solved from the shapes. Raises InputError naming the input, the axis, the
    dimension variable, the relation and the actual value of the first problem found.
    """
    inputs = fn.inputs
    if [a.name for a in arrays] != fn.input_names:
        raise InputError(f"expected the inputs {', '.join(fn.input_names) or '(none)'}, in that order; got "
                         f"{', '.join(a.name for a in arrays) or '(none)'}.")
    declared = [parsed_shape(i) for i in inputs]
    for inp, dims, a in zip(inputs, declared, arrays):
        name = inp.name
        if a.dtype != inp.dtype and (dtypes.is_key(inp.dtype) or dtypes.is_key(a.dtype)):
            raise InputError(key_mismatch(inp, a))
        problem = rank_mismatch(inp, dims, a.shape)
        if problem:
            raise InputError(problem)
        if a.dtype != inp.dtype:
            raise InputError(f"input {name!r} has dtype {a.dtype}, but the artifact expects {inp.dtype}. "
                             f"{_convert_hint(name, inp.dtype, a.dtype, a.source)}")
        problem = constant_mismatch(inp, dims, a.shape)
        if problem:
            raise InputError(problem)

    shapes = [(i.name, d, list(a.shape)) for i, d, a in zip(inputs, declared, arrays)]
    env, source, conflicts = dimexpr.solve(shapes)
    if conflicts:
        raise InputError(conflicts[0] + ".")

    def origin(var: str) -> str:
        src_name, axis, expr = source[var]
        return f"input {src_name!r} (shape[{axis}]{'' if expr == var else f' = {expr}'})"

    for (name, dims, actual) in shapes:
        for axis, (d, n) in enumerate(zip(dims, actual)):
            if isinstance(d, int):
                continue
            unknown = dimexpr.variables(d) - env.keys()
            if unknown:
                continue
            expected = _evaluate(d, env, name, axis)
            if expected == n:
                continue
            here = f"input {name!r} (shape[{axis}]{'' if str(d) in dimexpr.variables(d) else f' = {d}'})"
            vs = sorted(dimexpr.variables(d))
            if len(vs) == 1:
                v = vs[0]
                lin = dimexpr.linear(d, v, {k: x for k, x in env.items() if k != v})
                if lin is not None and lin[0] != 0 and (n - lin[1]) % lin[0] == 0:
                    raise InputError(f"dimension {v!r} is {env[v]} from {origin(v)} but {(n - lin[1]) // lin[0]} "
                                     f"from {here}.")
            given = ", ".join(f"{v} = {env[v]} from {origin(v)}" for v in vs)
            raise InputError(f"input {name!r}: shape[{axis}] = {n}, but it must equal {d} = {expected} ({given}).")

    every = sorted({v for dims in declared for d in dims if not isinstance(d, int) for v in dimexpr.variables(d)})
    unsolved = [v for v in every if v not in env]
    if unsolved:
        raise InputError(f"dimension variable(s) {', '.join(map(repr, unsolved))} cannot be solved from the input "
                         f"shapes (they appear only in non-linear expressions); the artifact cannot be called.")

    def at(var: str) -> tuple[str, str]:
        src_name, axis, expr = source[var]
        n = next(a for a in arrays if a.name == src_name).shape[axis]
        text = f"input {src_name!r}: shape[{axis}] = {n}"
        return text, ("" if expr == var else f"; shape[{axis}] is {expr}, so {var} = {env[var]}")

    for var in list(fn.dims) + [v for v in every if v not in fn.dims]:
        bounds = fn.bounds_of(var)
        if var in env and not bounds.holds(env[var]):
            head, tail = at(var)
            raise InputError(f"{head}, but dimension {var!r} must satisfy {bounds.text(var)} (spec bound){tail}.")
    for text in fn.constraints:
        c = dimexpr.parse_constraint(text)
        if not c.variables() <= env.keys():
            continue  # a constraint on variables of another function of the artifact
        try:
            if c.holds(env):
                continue
        except dimexpr.DimExprError as e:
            raise InputError(f"the constraint {text} cannot be evaluated with "
                             f"{', '.join(f'{k} = {v}' for k, v in env.items())}: {e}.") from None
        order = [v for v in _ordered_variables(text) if v in env]
        if not order:
            raise InputError(f"the constraint {text} (spec constraint) does not hold.")
        var, others = order[0], order[1:]
        head, tail = at(var)
        rest = "".join(f"; {v} = {env[v]} from {origin(v)}" for v in others)
        raise InputError(f"{head}, but dimension {var!r} must satisfy {text} (spec constraint){tail}{rest}.")
    return env


# --- dimension values ------------------------------------------------------------------------------------------


def dimension_variables(fn: Function) -> list[str]:
    """Every dimension variable of a function's inputs, in the manifest's ``dims`` order first."""
    found: list[str] = list(fn.dims)
    for inp in fn.inputs:
        for d in inp.shape:
            if isinstance(d, str):
                for v in sorted(dimexpr.variables(dimexpr.parse(d))):
                    if v not in found:
                        found.append(v)
    return found


def _smallest(holds: Any, start: int, limit: int) -> int | None:
    """The smallest value in (start, limit] for which ``holds`` is true, assuming it stays true once it is."""
    step, hi = 1, None
    while True:
        probe = start + step
        if probe > limit:
            probe = limit
        if probe <= start:
            return None
        if holds(probe):
            hi = probe
            break
        if probe == limit:
            return None
        step *= 2
    lo = probe - step if probe - step > start else start  # holds(lo) is false (or lo == start)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


#: Most evaluation steps (operations evaluated) that one call of :func:`resolve_dims` may take: a search over
#: constraints that an artifact can make arbitrarily costly.
MAX_RESOLVE_STEPS = 2_000_000


def _values(env: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in env.items())


def resolve_dims(fn: Function, given: Mapping[str, int],
                 budget: dimexpr.Budget | None = None) -> dict[str, int]:
    """Values for every dimension variable: ``given`` ones, and for the others the smallest that satisfy the
    bounds and constraints (raises InputError if a given value violates them or none can be found).

    The search evaluates at most ``budget`` steps (default :data:`MAX_RESOLVE_STEPS`; share one across calls to
    bound them together): past it, FormatError, since only an artifact's constraints can make it so costly."""
    variables = dimension_variables(fn)
    given = through_aliases(fn, given, variables)
    for name in given:
        if name not in variables:
            close = difflib.get_close_matches(name, variables, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise InputError(f"unknown dimension variable {name!r}; the function has "
                             f"{', '.join(variables) or 'no dimension variables'}.{hint}")
    bounds = {v: fn.bounds_of(v) for v in variables}
    env = {v: given[v] if v in given else bounds[v].lo for v in variables}
    for v, value in given.items():
        if not bounds[v].holds(value):
            raise InputError(f"dimension {v!r} = {value} (given), but it must satisfy {bounds[v].text(v)} (spec "
                             f"bound).")
        if not 0 <= value <= dimexpr.MAX_VALUE:
            raise InputError(f"dimension {v!r} = {value} (given) is out of range: a dimension is from 0 to 2**62.")
    constraints = [c for c in map(dimexpr.parse_constraint, fn.constraints)
                   if c.variables() <= set(variables)]
    budget = budget or dimexpr.Budget(MAX_RESOLVE_STEPS, "solving the dimension variables from the constraints")
    try:
        _search(constraints, env, given, bounds, budget)
    except dimexpr.BudgetExceeded as e:
        raise FormatError(f"{e}: the artifact's constraints are too costly to solve. Give every dimension with "
                          f"--dim NAME=VALUE.") from None
    for inp in fn.inputs:
        for axis, d in enumerate(inp.shape):
            if isinstance(d, str):
                try:
                    value = dimexpr.evaluate(dimexpr.parse(d), env)
                except dimexpr.DimExprError as e:
                    raise InputError(f"input {inp.name!r}: shape[{axis}] = {d} cannot be evaluated with "
                                     f"{_values(env)}: {e}.") from None
                if value < 0:
                    raise InputError(f"input {inp.name!r}: shape[{axis}] = {d} is negative with "
                                     f"{_values(env)}.")
    return env


def aliases(fn: Function, variables: list[str]) -> dict[str, tuple[dimexpr.Expr, str]]:
    """Names the spec's constraints define in terms of the function's variables (``d == 64*heads``: JAX rewrites
    ``d`` as ``64*heads``, so the program has no ``d``): name -> (expression, the constraint's text)."""
    out: dict[str, tuple[dimexpr.Expr, str]] = {}
    for text in fn.constraints:
        try:
            c = dimexpr.parse_constraint(text)
        except dimexpr.DimExprError:
            continue
        if c.op != "==":
            continue
        for name, expr in ((c.lhs, c.rhs), (c.rhs, c.lhs)):
            if name.op == "var" and name.value not in variables and dimexpr.variables(expr) <= set(variables):
                out.setdefault(str(name.value), (expr, c.text))
    return out


def through_aliases(fn: Function, given: Mapping[str, int], variables: list[str]) -> dict[str, int]:
    """``given`` with a value for a name the constraints define (``--dim d=128`` with ``d == 64*heads``) turned into
    the value of the one variable of its definition left unknown (``heads=2``); a value that no integer fits, or
    that disagrees with the others given, is an InputError naming the constraint."""
    defined = aliases(fn, variables)
    out = {k: v for k, v in given.items() if k not in defined}
    for name, value in given.items():
        if name not in defined:
            continue
        expr, text = defined[name]
        unknown = sorted(dimexpr.variables(expr) - out.keys())
        if not unknown:
            have = dimexpr.evaluate(expr, out)
            if have != value:
                raise InputError(f"dimension {name!r} = {value} (given), but {text} (spec constraint) makes it "
                                 f"{have} with {_values({v: out[v] for v in sorted(dimexpr.variables(expr))})}.")
            continue
        lin = dimexpr.linear(expr, unknown[0], out) if len(unknown) == 1 else None
        if lin is None or lin[0] == 0:
            raise InputError(f"dimension {name!r} is defined by {text} (spec constraint): give "
                             f"{', '.join(unknown)} with --dim instead.")
        a, b = lin
        if (value - b) % a:
            raise InputError(f"dimension {name!r} = {value} (given), but {text} (spec constraint) needs a value "
                             f"of the form {dimexpr.parse(str(expr))} with {unknown[0]} an integer.")
        out[unknown[0]] = (value - b) // a
    return out


def _search(constraints: list[dimexpr.Constraint], env: dict[str, int], given: Mapping[str, int],
            bounds: Mapping[str, Bounds], budget: dimexpr.Budget) -> None:
    """Raise the free variables of ``env`` to the smallest values that satisfy ``constraints`` (in place)."""
    limit_default = 1 << 40

    def holds(c: dimexpr.Constraint, values: Mapping[str, int]) -> bool:
        try:
            return c.holds(values, budget)
        except dimexpr.BudgetExceeded:
            raise
        except dimexpr.DimExprError as e:
            raise InputError(f"the constraint {c.text} (spec constraint) cannot be evaluated with "
                             f"{_values(values)}: {e}; give the dimensions with --dim NAME=VALUE.") from None

    for _ in range(10_000):
        bad = next((c for c in constraints if not holds(c, env)), None)
        if bad is None:
            return
        free = [v for v in _ordered_variables(bad.text) if v in env and v not in given]
        moved = False
        for v in free:
            hi = bounds[v].hi or limit_default

            def holds_at(x: int, v: str = v, c: dimexpr.Constraint = bad) -> bool:
                try:
                    return c.holds({**env, v: x}, budget)
                except dimexpr.BudgetExceeded:
                    raise
                except dimexpr.DimExprError:
                    return False  # a value the constraint cannot be evaluated at does not satisfy it

            found = _smallest(holds_at, env[v], hi)
            if found is not None:
                env[v] = found
                moved = True
                break
        if not moved:
            involved = sorted(bad.variables())
            if not free:
                values = " ".join(f"--dim {v}={env[v]}" for v in involved)
                raise InputError(f"{values} violate{'s' if len(involved) == 1 else ''} {bad.text} (spec "
                                 f"constraint); choose values that satisfy it.")
            values = ", ".join(f"{v}={env[v]}" + (" (given)" if v in given else "") for v in involved)
            raise InputError(f"no value of {' or '.join(free)} satisfies {bad.text} (spec constraint) with {values}; "
                             f"give the dimensions with --dim NAME=VALUE.")
    raise InputError("could not find dimension values that satisfy the constraints; give them with --dim.")


def concrete_shape(inp: Input | Output, dims: Mapping[str, int]) -> tuple[int, ...]:
    """An input's shape at the given dimension values."""
    return tuple(d if isinstance(d, int) else dimexpr.evaluate(dimexpr.parse(d), dict(dims)) for d in inp.shape)
