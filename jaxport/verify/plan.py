"""The cases ``verify`` runs a function at: assignments of its dimension variables, each under a memory budget.

:func:`plan_cases` picks them from the manifest's bounds and constraints: the smallest valid values, then for each
variable a value that is not a power of two and its upper bound (or, without one, a large value), each with the
other variables at the smallest values the constraints allow. Each case's inputs and outputs are kept under a memory
budget (:data:`DEFAULT_BUDGET_BYTES`): a larger value is scaled down until they fit, and the case says so. Values
chosen with ``--dim`` replace the plan with their product. No JAX.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from .. import dimexpr, dtypes
from .._text import human_bytes
from ..artifact import contract
from ..artifact.model import Function, Input, Output
from ..errors import InputError, UsageError
from ..run.buckets import sizes

#: Each case's inputs and outputs together stay under this many bytes (unless the smallest shapes already exceed
#: it, or ``--dim`` asks for more).
DEFAULT_BUDGET_BYTES = 64 << 20
#: The "large" value of a dimension variable without an upper bound.
LARGE_VALUE = 4096
#: Candidates for "a value that is not a power of two", the first that fits the bounds is used.
_NOT_POWERS_OF_TWO = (7, 13, 37, 100, 1000)
#: At most this many cases per function and platform (``--dim`` lists multiply).
MAX_CASES = 256
#: Evaluation steps that all the searches of one function's plan may take together (see contract.resolve_dims).
PLAN_STEPS = 4 * contract.MAX_RESOLVE_STEPS


@dataclass(frozen=True)
class Case:
    """One assignment of the dimension variables: why it was chosen, and a note when it was scaled down."""

    label: str
    dims: dict[str, int]
    note: str | None = None


def case_bytes(f: Function, env: Mapping[str, int]) -> int:
    """Bytes of a function's inputs and outputs at an assignment (outputs that cannot be evaluated count 0)."""
    total = 0
    arrays: list[Input | Output] = [*f.inputs, *f.outputs]
    for arr in arrays:
        try:
            shape = contract.concrete_shape(arr, env)
        except dimexpr.DimExprError:
            continue
        n = dtypes.BY_NAME[arr.dtype].itemsize
        for d in shape:
            n *= max(d, 0)
        total += n
    return total




def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _resolve(f: Function, given: dict[str, int], steps: dimexpr.Budget) -> dict[str, int] | None:
    try:
        return contract.resolve_dims(f, given, steps)
    except InputError:
        return None


def _fit(f: Function, var: str, value: int, lowest: int, why: str, budget: int,
         steps: dimexpr.Budget) -> Case | None:
    """The case ``var = value`` (others at their smallest valid values), scaled down to the budget if needed."""
    wanted = value
    while True:
        env = _resolve(f, {var: value}, steps)
        if env is not None and case_bytes(f, env) <= budget:
            note = None
            if value != wanted:
                note = (f"{var}={wanted} scaled down to {value}: its inputs and outputs would take more than "
                        f"{human_bytes(budget, binary=True)}")
            return Case(f"{var}: {why}", env, note)
        if value <= lowest:
            return None
        value = max(lowest, value * 3 // 4)


def _not_power_of_two(lo: int, hi: int | None) -> list[int]:
    picks = [v for v in _NOT_POWERS_OF_TWO if v > lo and (hi is None or v <= hi)]
    extra = [v for v in (lo + 1, lo + 2) if not _is_power_of_two(v) and (hi is None or v <= hi)]
    return picks + extra


def plan_cases(f: Function, chosen: Mapping[str, list[int]] | None = None,
               budget: int = DEFAULT_BUDGET_BYTES) -> list[Case]:
    """The dimension assignments to verify a function at (see the module docstring)."""
    variables = contract.dimension_variables(f)
    if chosen:
        count = 1
        for n in chosen:
            count *= len(chosen[n])
        if count > MAX_CASES:
            raise UsageError(f"--dim asks for {count} combinations; at most {MAX_CASES} are allowed. Give fewer "
                             f"values.")
    checked = sizes.given(f, chosen)
    if not variables:
        return [Case("fixed shapes", {})]
    # One evaluation budget for every search of the plan: an artifact's constraints cannot make each costly.
    steps = dimexpr.Budget(PLAN_STEPS, "planning the verification cases from the constraints")
    if checked:
        planned = [Case("--dim", sizes.resolved(f, dict(zip(checked, combo)), steps))
                   for combo in itertools.product(*checked.values())]
        return _dedupe(planned)
    base = contract.resolve_dims(f, {}, steps)
    planned = [Case("smallest valid", base, None if case_bytes(f, base) <= budget else
                    f"the smallest shapes already take {human_bytes(case_bytes(f, base), binary=True)}")]
    uppers: dict[str, int] = {}
    for v in variables:
        lo, hi = base[v], f.bounds_of(v).hi
        for candidate in _not_power_of_two(lo, hi):
            if _resolve(f, {v: candidate}, steps) is not None:
                case = _fit(f, v, candidate, lo, "not a power of two", budget, steps)
                if case is not None:
                    planned.append(case)
                break
        if hi is not None:
            uppers[v] = hi
            case = _fit(f, v, hi, lo, "upper bound", budget, steps)
        else:
            case = _fit(f, v, max(LARGE_VALUE, 2 * lo), lo, "large", budget, steps)
        if case is not None:
            planned.append(case)
    if len(uppers) > 1:
        together = _resolve(f, uppers, steps)
        if together is not None and case_bytes(f, together) <= budget:
            planned.append(Case("all upper bounds", together))
    return _dedupe(planned)


def chosen_for(f: Function, dims: Mapping[str, list[int]] | None, several: bool) -> dict[str, list[int]]:
    """The ``--dim`` values that apply to one function: all of them for the only function, else those of its
    variables and the names its constraints define (a name no function has is refused before)."""
    if not dims:
        return {}
    if not several:
        return dict(dims)
    have = set(sizes.names_of(f))
    return {k: v for k, v in dims.items() if k in have}


def _dedupe(cases: list[Case]) -> list[Case]:
    seen: set[tuple[tuple[str, int], ...]] = set()
    out: list[Case] = []
    for c in cases:
        key = tuple(sorted(c.dims.items()))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out
