"""The sizes a user gives dimension variables (``--dim NAME=V[,V...]`` on the command line, ``dims=`` in Python): the
one home of their rules, for every command that takes ``--dim`` (``call --random``, ``warmup``, ``compile``,
``serve``, ``check``, ``verify``) and the Python API.

- :func:`parse` reads ``NAME=V[,V...]`` texts (the command line's ``--dim`` calls it); :func:`parse_assignments` a
  ``--bucket NAME=V,NAME=V`` text.
- :func:`given` checks sizes against a function: every name a dimension variable of it, or a name its constraints
  define, turned into the value of its variable (``d=128`` with ``d == 64*heads``: ``heads=2``); every size an
  integer inside the spec's bounds. :func:`check_names` checks the names alone, against several functions (a
  server's, a target's: a name one of them has).
- :func:`resolved` checks one assignment so and solves the variables not given (``contract.resolve_dims``: the
  smallest values the bounds and constraints allow), where a call runs one shape.

A mistake is a ``UsageError`` (exit 2: ``--dim`` is how the command was asked, not an input it was given) whose
line starts with the option as given (``--dim batch=0: ...``) and reads the same whichever command or function
meets it. A size that the inputs' own shapes give (``call --inputs``) is checked with the inputs (``InputError``,
exit 9). No JAX.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Iterable, Mapping, Sequence

from ... import dimexpr
from ...artifact import contract
from ...artifact.model import Function
from ...errors import InputError, UsageError
from ...spec.values import suggest

#: The largest dimension size (what a manifest may record).
MAX_DIMENSION = dimexpr.MAX_VALUE

#: Sizes by name as a caller gives them: one size, or several (every combination, where a command takes several).
Sizes = Mapping[str, int | Sequence[int]]


def listed(values: Iterable[int]) -> str:
    """``1,8,32``: sizes as ``--dim`` gives them."""
    return ",".join(map(str, values))


def shown(assignment: Mapping[str, int]) -> str:
    """``batch=8,seq=128``: one assignment as messages show it."""
    return ",".join(f"{k}={v}" for k, v in assignment.items())


# --- texts ------------------------------------------------------------------------------------------------------------


def _size(text: str) -> int:
    """An integer size; one of more digits than any dimension has reads as just above the cap (int() refuses
    thousands of digits with a message about Python, not about the option)."""
    digits = text.strip().lstrip("+")
    if digits.isdigit() and len(digits.lstrip("0")) > 19:
        return MAX_DIMENSION + 1
    return int(text.strip())


def _parse_one(text: str, into: dict[str, list[int]], one_value: bool) -> str:
    """One ``NAME=V[,V...]`` text's sizes added to ``into``; its name."""
    example = "--dim batch=8" if one_value else "--dim batch=1,7,128"
    name, eq, rest = text.partition("=")
    name = name.strip()
    if not eq or not name.isidentifier():
        raise UsageError(f"{text!r} is not {'NAME=VALUE' if one_value else 'NAME=VALUE[,VALUE...]'} (e.g. "
                         f"{example}).")
    chosen = into.setdefault(name, [])
    for item in rest.split(","):
        try:
            value = _size(item)
        except ValueError:
            other, is_pair, _ = item.partition("=")
            if is_pair and other.strip().isidentifier():  # --dim batch=3,seq=17: two variables in one
                raise UsageError(f"{text[:60]!r} sets two variables; give each its own --dim (repeat the option): "
                                 f"--dim {name}={rest.split(',')[0].strip()} --dim {item.strip()[:40]}.") from None
            raise UsageError(f"{text[:60]!r}: {item.strip()[:40]!r} is not an integer.") from None
        if value < 0:
            raise UsageError(f"{text!r}: a dimension cannot be negative.")
        if value > MAX_DIMENSION:
            raise UsageError(f"{text[:60]!r}: a dimension is at most 2**62.")
        if value not in chosen:
            chosen.append(value)
    return name


def parse(texts: Iterable[str], *, one_value: bool = False) -> dict[str, list[int]]:
    """``--dim`` texts (``NAME=V[,V...]``, a name repeated adds its sizes) as ``{name: [sizes]}`` in the order
    given; ``one_value``: a command that runs one shape, where a second size of a name is a mistake."""
    dims: dict[str, list[int]] = {}
    for text in texts:
        name = _parse_one(text, dims, one_value)
        chosen = dims[name]
        if one_value and len(chosen) > 1:
            more = listed(chosen[:4]).replace(",", ", ") + (", ..." if len(chosen) > 4 else "")
            raise UsageError(f"{name} has {len(chosen)} values ({more}), and this command runs one shape; give one "
                             f"(e.g. --dim {name}={chosen[0]}).")
    return dims


def parse_assignments(text: str, flag: str) -> dict[str, list[int]]:
    """``NAME=N1,N2`` (``--dims``) or ``NAME=N,NAME=N`` (``--bucket``) as ``{name: [values]}``; raises UsageError.

    For ``--dims`` the text names one variable and several values; for ``--bucket`` several variables with one
    value each. Which one is meant is the caller's check."""
    out: dict[str, list[int]] = {}
    name = None
    for part in text.split(","):
        part = part.strip()
        if "=" in part:
            name, _, value = part.partition("=")
            name = name.strip()
            if not name.isidentifier():
                raise UsageError(f"{flag} {text}: {name!r} is not a dimension variable name.")
            if name in out:
                raise UsageError(f"{flag} {text}: {name!r} is given twice.")
            out[name] = []
        elif name is None:
            raise UsageError(f"{flag} {text}: expected NAME=VALUE (e.g. {flag} batch=1,8,32).")
        else:
            value = part
        value = value.strip()
        if not value.isdigit() or len(value) > 19:
            raise UsageError(f"{flag} {text}: {value[:40]!r} is not a size (a non-negative integer).")
        out[name].append(int(value))
    return out


# --- names ------------------------------------------------------------------------------------------------------------


def names_of(fn: Function) -> list[str]:
    """The names ``--dim`` may give a function: its dimension variables, then the names its constraints define."""
    variables = contract.dimension_variables(fn)
    return variables + [a for a in contract.aliases(fn, variables) if a not in variables]


def check_names(names: Iterable[str], functions: Sequence[Function], flag: str = "--dim") -> None:
    """Every name one that a function of ``functions`` may be given (:func:`names_of`); else the one line of an
    unknown name, with the closest known one."""
    known = list(dict.fromkeys(n for f in functions for n in names_of(f)))
    variables = list(dict.fromkeys(v for f in functions for v in contract.dimension_variables(f)))
    for name in names:
        if name not in known:
            hint = suggest(name, known)
            have = ", ".join(variables) or "none"
            said = f"the function has no dimension variable {name!r}; it has {have}" if len(functions) == 1 else \
                f"no function has a dimension variable {name!r}; they have {have}"
            raise UsageError(f"{flag} {name}: {said}.{hint}")


# --- sizes ------------------------------------------------------------------------------------------------------------


def _integer(v: object) -> bool:
    """An integer (numpy's too), not a bool nor a float."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _sizes_of(name: str, value: object, flag: str) -> list[int]:
    """A name's sizes as a list, each an integer from 0 to 2**62, without repeats."""
    values = list(value) if isinstance(value, (list, tuple, range)) else [value]
    if not values:
        raise UsageError(f"{flag} {name}: give at least one size.")
    out: list[int] = []
    for v in values:
        size = operator.index(v) if _integer(v) else -1  # type: ignore[arg-type]
        if not 0 <= size <= MAX_DIMENSION:
            shown_values = ",".join(map(str, values))[:80]
            raise UsageError(f"{flag} {name}={shown_values}: {v!r} is not a size (an integer from 0 to 2**62).")
        if size not in out:
            out.append(size)
    return out


def _bounded(fn: Function, variable: str, values: Sequence[int], said: str) -> None:
    bounds = fn.bounds_of(variable)
    for v in values:
        if not bounds.holds(v):
            raise UsageError(f"{said}: {v} is outside the spec bound {bounds.text(variable)}.")


def given(fn: Function, dims: Sizes | None, flag: str = "--dim") -> dict[str, list[int]]:
    """``dims`` checked against function ``fn`` (see the module docstring): ``{variable: [sizes]}``, in the order
    given, a name the constraints define turned into its variable's sizes."""
    dims = dict(dims or {})
    check_names(dims, [fn], flag)
    variables = contract.dimension_variables(fn)
    out: dict[str, list[int]] = {}
    for name, value in dims.items():
        values = _sizes_of(name, value, flag)
        if name in variables:
            _bounded(fn, name, values, f"{flag} {name}={listed(values)}")
            out.setdefault(name, [])
            out[name] += [v for v in values if v not in out[name]]
    fixed = {k: v[0] for k, v in out.items() if len(v) == 1}
    for name, value in dims.items():
        if name not in variables:
            for variable, size in _through(fn, name, _sizes_of(name, value, flag), fixed, flag):
                out.setdefault(variable, [])
                if size not in out[variable]:
                    out[variable].append(size)
    return out


def _through(fn: Function, name: str, values: Sequence[int], fixed: Mapping[str, int],
             flag: str) -> list[tuple[str, int]]:
    """The sizes of a name the constraints define (``d == 64*heads``) as its variable's (``heads``), each checked
    against that variable's bounds; nothing for a size that agrees with the variable's value given with it."""
    variables = contract.dimension_variables(fn)
    _, text = contract.aliases(fn, variables)[name]
    out = []
    for value in values:
        said = f"{flag} {name}={value}"
        try:
            solved = contract.through_aliases(fn, {**fixed, name: value}, variables)
        except InputError as e:
            raise UsageError(f"{said}: {e}") from None
        for variable in (k for k in solved if k not in fixed):
            bounds = fn.bounds_of(variable)
            if not bounds.holds(solved[variable]):
                raise UsageError(f"{said}: {text} (spec constraint) makes {variable} {solved[variable]}, outside the "
                                 f"spec bound {bounds.text(variable)}.")
            out.append((variable, solved[variable]))
    return out


def one(fn: Function, dims: Mapping[str, int] | None, flag: str = "--dim") -> dict[str, int]:
    """One assignment checked (:func:`given`, one size per name): ``{variable: size}``."""
    checked = given(fn, dims, flag)
    several = next((k for k, v in checked.items() if len(v) > 1), None)
    if several is not None:
        raise UsageError(f"{flag} {several}={listed(checked[several])}: give one size (one shape runs).")
    return {k: v[0] for k, v in checked.items()}


def resolved(fn: Function, dims: Mapping[str, int] | None, budget: dimexpr.Budget | None = None,
             flag: str = "--dim") -> dict[str, int]:
    """One assignment checked (:func:`one`) and completed: every variable's value, the ones not given the smallest
    the bounds and constraints allow (``contract.resolve_dims``, within ``budget``). An assignment that breaks a
    constraint is a UsageError naming it."""
    dims = dict(dims or {})
    assignment = one(fn, dims, flag)
    try:
        return contract.resolve_dims(fn, assignment, budget)
    except InputError as e:
        if not assignment:  # nothing given: what fails is the artifact's, not the option's
            raise
        raise UsageError(f"{flag} {shown(dims)}: {e}") from None
