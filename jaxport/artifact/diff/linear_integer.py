"""Integer solutions of linear constraints, decided exactly within a budget: the solver behind ``diff``'s verdicts on
shape constraints (``implication``).

A problem is a conjunction of rows ``a_1*x_1 + ... + a_n*x_n + c <= 0`` with integer coefficients over integer
variables. :func:`solve` returns an integer solution, or None when there is none; when its budget runs out, or the
problem grows past :data:`MAX_ROWS` rows or coefficients of :data:`MAX_BITS` bits, it raises :class:`GaveUp`, never
a guess. Python integers and fractions only: no floating point.

Method: Fourier-Motzkin elimination over the rationals, each derived row divided by the gcd of its coefficients
with its constant rounded up (sound for integer solutions: it only removes points that are not integral), then
back-substitution that gives each variable the smallest integer its interval allows. When an interval holds no
integer, branch and bound splits the problem on that variable (``x <= floor(v)`` or ``x >= ceil(v)``). For bounded
variables each split narrows one variable's integer range, so the search ends; without bounds the budget ends it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from ...dimexpr import Budget, BudgetExceeded

#: At most this many rows in one step of the elimination.
MAX_ROWS = 4096
#: At most this many bits in a coefficient or constant of a derived row.
MAX_BITS = 512


class GaveUp(Exception):
    """The solver stopped without an answer: ``str(e)`` says why."""


@dataclass(frozen=True)
class Row:
    """``sum(a * x for x, a in coeffs) + const <= 0``, normalized: coefficients nonzero, sorted by variable, gcd 1."""

    coeffs: tuple[tuple[str, int], ...]
    const: int

    def coeff(self, var: str) -> int:
        for x, a in self.coeffs:
            if x == var:
                return a
        return 0

    def rest(self, var: str, values: Mapping[str, int]) -> int:
        """The row's value without ``var``'s term, with ``values`` for the other variables."""
        return self.const + sum(a * values[x] for x, a in self.coeffs if x != var)


def row(coeffs: Mapping[str, int], const: int) -> Row | bool:
    """The row ``sum(coeffs[x] * x) + const <= 0``, normalized for integer solutions; True when it always holds,
    False when it never does (no variables left)."""
    items = tuple(sorted((x, a) for x, a in coeffs.items() if a))
    if not items:
        return const <= 0
    g = 0
    for _, a in items:
        g = math.gcd(g, a)
    if g > 1:
        items = tuple((x, a // g) for x, a in items)
        const = -((-const) // g)  # ceil(const / g): a*x <= -const holds for integers iff (a/g)*x <= floor(-const/g)
    return Row(items, const)


def _combine(p: Row, n: Row, var: str) -> Row | bool:
    """The row without ``var`` implied by ``p`` (an upper bound on ``var``) and ``n`` (a lower bound)."""
    a, b = p.coeff(var), -n.coeff(var)
    out: dict[str, int] = {}
    for x, c in p.coeffs:
        out[x] = out.get(x, 0) + b * c
    for x, c in n.coeffs:
        out[x] = out.get(x, 0) + a * c
    out.pop(var, None)
    const = b * p.const + a * n.const
    if max([abs(const), *(abs(c) for c in out.values())]).bit_length() > MAX_BITS:
        raise GaveUp(f"coefficients grew past {MAX_BITS} bits")
    return row(out, const)


def _relaxed(rows: list[Row], budget: Budget) -> tuple[dict[str, int], tuple[str, Fraction] | None] | None:
    """A point of ``rows``: None when there is no integer solution (found while eliminating), else the values given
    so far and, when a variable's interval held no integer, that variable and the lower end of its interval (the
    values are then partial)."""
    current: set[Row] = set(rows)
    variables = sorted({x for r in current for x, _ in r.coeffs})
    stages: list[tuple[str, list[Row], list[Row]]] = []
    while variables:
        var = min(variables, key=lambda v, rows=current: (_pairs(rows, v), v))  # type: ignore[misc]
        variables.remove(var)
        upper = sorted((r for r in current if r.coeff(var) > 0), key=_key)
        lower = sorted((r for r in current if r.coeff(var) < 0), key=_key)
        nxt = {r for r in current if r.coeff(var) == 0}
        for p in upper:
            for n in lower:
                budget.spend(1 + len(p.coeffs) + len(n.coeffs))
                combined = _combine(p, n, var)
                if combined is False:
                    return None
                if combined is not True:
                    nxt.add(combined)
        if len(nxt) > MAX_ROWS:
            raise GaveUp(f"the elimination grew past {MAX_ROWS} constraints")
        stages.append((var, upper, lower))
        current = nxt
    values: dict[str, int] = {}
    for var, upper, lower in reversed(stages):
        lo = max((Fraction(r.rest(var, values), -r.coeff(var)) for r in lower), default=None)
        hi = min((Fraction(-r.rest(var, values), r.coeff(var)) for r in upper), default=None)
        if lo is not None and hi is not None and lo > hi:
            raise GaveUp("the elimination left an empty interval (an internal error)")
        if lo is None:
            values[var] = 0 if hi is None else min(0, math.floor(hi))
        elif hi is None or math.ceil(lo) <= hi:
            values[var] = math.ceil(lo)
        else:
            return values, (var, lo)
    return values, None


def _pairs(rows: set[Row], var: str) -> int:
    """How many rows eliminating ``var`` derives (upper bounds times lower bounds)."""
    up = sum(1 for r in rows if r.coeff(var) > 0)
    return up * sum(1 for r in rows if r.coeff(var) < 0)


def _key(r: Row) -> tuple[tuple[tuple[str, int], ...], int]:
    return r.coeffs, r.const


def solve(rows: Iterable[Row | bool], budget: Budget) -> dict[str, int] | None:
    """An integer solution of ``rows`` (every variable they name gets a value), or None when there is none.

    Raises :class:`GaveUp` when the budget, the row limit or the coefficient limit stops the search first."""
    start: list[Row] = []
    for r in rows:
        if r is False:
            return None
        if r is not True:
            start.append(r)  # type: ignore[arg-type]
    stack = [start]
    try:
        while stack:
            budget.spend()
            problem = stack.pop()
            found = _relaxed(problem, budget)
            if found is None:
                continue
            values, split = found
            if split is None:
                return values
            var, v = split
            for branch in (row({var: -1}, math.ceil(v)), row({var: 1}, -math.floor(v))):  # x >= ceil, x <= floor
                if branch is not False:
                    stack.append(problem if branch is True else [*problem, branch])  # type: ignore[list-item]
    except BudgetExceeded as e:
        raise GaveUp(str(e)) from None
    return None
