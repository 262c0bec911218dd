"""Whether one set of dimension constraints accepts every shape another accepted: the question ``diff`` asks when a
constraint changes between two artifacts.

Decided with bounded cost: by intervals over the declared bounds, exactly for one variable with linear constraints,
and otherwise by enumerating at most ``MAX_ENUMERATION`` assignments while an evaluation budget lasts; when none of
these answers, the result is "cannot decide", never an unbounded search.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from .. import dimexpr
from .bounds import Bounds

#: At most this many assignments are enumerated to decide one implication.
MAX_ENUMERATION = 100_000


def _linear_form(c: dimexpr.Constraint, var: str) -> tuple[int, int] | None:
    """``(a, b)`` with ``lhs - rhs == a*var + b``, or None when a side is not linear in ``var``."""
    left, right = dimexpr.linear(c.lhs, var, {}), dimexpr.linear(c.rhs, var, {})
    if left is None or right is None:
        return None
    return left[0] - right[0], left[1] - right[1]


def _holds_on_box(c: dimexpr.Constraint, box: Mapping[str, tuple[int, int | None]]) -> bool:
    """Whether ``c`` holds for every assignment in ``box`` (by intervals: True is a proof, False is no answer)."""
    try:
        lo, hi = dimexpr.value_range(dimexpr.Expr("-", (c.lhs, c.rhs)), box)
    except dimexpr.DimExprError:
        return False
    return lo >= 0 if c.op == ">=" else hi <= 0 if c.op == "<=" else lo == hi == 0


def _one_variable(var: str, box: tuple[int, int | None], old: list[dimexpr.Constraint],
                  new: dimexpr.Constraint) -> tuple[bool, dict[str, int] | None] | None:
    """Decide, for one variable and linear constraints, whether every value in ``box`` that satisfies ``old``
    satisfies ``new``: (True, None), (False, the smallest value accepted before and rejected now), or None when a
    constraint is not linear."""
    lo, hi = box
    for c in old:
        form = _linear_form(c, var)
        if form is None:
            return None
        a, b = form  # a*var + b  (op)  0
        if c.op == "==":
            if a == 0:
                if b != 0:
                    return True, None  # the old constraints accept nothing
                continue
            if b % a != 0:
                return True, None
            lo, hi = max(lo, -b // a), -b // a if hi is None else min(hi, -b // a)
        else:
            if c.op == "<=":
                a, b = -a, -b  # now a*var + b >= 0
            if a > 0:
                lo = max(lo, -(b // a))  # var >= ceil(-b / a)
            elif a < 0:
                hi = b // -a if hi is None else min(hi, b // -a)
            elif b < 0:
                return True, None
        if hi is not None and lo > hi:
            return True, None
    form = _linear_form(new, var)
    if form is None:
        return None
    a, b = form
    if new.op == "==":
        if hi == lo:
            return (True, None) if a * lo + b == 0 else (False, {var: lo})
        if a == 0 and b == 0:
            return True, None
        return False, {var: lo if a * lo + b != 0 else lo + 1}
    if new.op == "<=":
        a, b = -a, -b
    bad = lo if a * lo + b < 0 else max(lo, b // -a + 1) if a < 0 else None  # the smallest value with a*v + b < 0
    if bad is None or (hi is not None and bad > hi):
        return True, None
    return False, {var: bad}


def accepts_everything_old_did(dims: Mapping[str, Any], old_c: dimexpr.Constraint, new_c: dimexpr.Constraint,
                               others: list[dimexpr.Constraint],
                               budget: dimexpr.Budget) -> tuple[bool | None, dict[str, int] | None, str]:
    """Whether every assignment within the old bounds (``dims``, the old manifest's under the new variable names)
    that satisfies the old constraints (``others``, ``old_c``
    among them) also satisfies ``new_c``: True (proven), False with a counterexample, or None when it cannot be
    decided within ``budget``; and how it was decided ("proved" or "enumerated").

    First by intervals over the bounds, then exactly for one variable and linear constraints, then by enumerating
    at most :data:`MAX_ENUMERATION` assignments while the budget lasts. Never an unbounded search."""
    variables = sorted(new_c.variables() | old_c.variables())
    bounds = {v: Bounds.of(dims.get(v)) for v in variables}
    box = {v: (b.lo, b.hi) for v, b in bounds.items()}
    if _holds_on_box(new_c, box):
        return True, None, "proved"
    related = [o for o in others if o.variables() <= set(variables)]
    entangled = any(o.variables() & set(variables) and not o.variables() <= set(variables) for o in others)
    if len(variables) == 1:
        verdict = _one_variable(variables[0], box[variables[0]], related, new_c)
        if verdict is not None:
            if verdict[0] is False and entangled:
                return None, None, ""
            return verdict[0], verdict[1], "proved"
    ranges = []
    total = 1
    for v in variables:
        b = bounds[v]
        if b.hi is None:
            return None, None, ""
        ranges.append(range(b.lo, b.hi + 1))
        total *= b.hi - b.lo + 1
        if total > MAX_ENUMERATION:
            return None, None, ""
    cost = sum(dimexpr.size(x.lhs) + dimexpr.size(x.rhs) for x in [*related, new_c])
    if total * cost > budget.left:
        return None, None, ""
    for values in itertools.product(*ranges):
        env = dict(zip(variables, values))
        try:
            if not all(o.holds(env, budget) for o in related):
                continue
            if not new_c.holds(env, budget):
                return (None, None, "") if entangled else (False, env, "enumerated")
        except dimexpr.DimExprError:
            return None, None, ""
    return True, None, "enumerated"
