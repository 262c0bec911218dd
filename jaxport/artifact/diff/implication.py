"""Whether every shape an old artifact accepted is still accepted: the question ``diff`` asks when a bound or a
constraint changes.

The old accepted set is a :class:`System`: each dimension variable's bounds and the old constraints. A new bound or
constraint (a *claim*) is implied when no assignment within the old system violates it. :func:`implies` decides it
exactly, in this order, and answers "implied", "refuted" (with a counterexample) or "undecided" (with the reason),
never a guess:

1. by intervals: the claim holds over the box of the old bounds, narrowed by what the old linear constraints imply
   about each variable (bound propagation); any claim, linear or not;
2. by linear integer arithmetic (``linear_integer``): whether the old system and the claim's negation have an
   integer solution. ``floordiv`` and ``mod`` by a constant become a new variable and two rows; ``max``, ``min`` and
   ``non_negative`` are split into cases (at most :data:`MAX_CASE_TERMS` such terms). An old constraint that is not
   linear (a product or power of variables, a division by a variable) is left out, which only widens the old set:
   "no solution" is still a proof, and a solution counts only once exact evaluation shows that it satisfies every
   old constraint;
3. for what the linear arithmetic leaves open: a point of the old system, when the claim fails there; then
   enumeration of every assignment of the variables involved, when their (narrowed) bounds are finite and allow at
   most :data:`MAX_ENUMERATION` assignments.

Every counterexample is checked by exact evaluation (``dimexpr.evaluate``) against the old bounds, every old
constraint and the claim. All the work of one diff is charged to one ``dimexpr.Budget``; when it runs out, the
answer is "undecided".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from ... import dimexpr
from ..bounds import Bounds
from .linear_integer import GaveUp, Row, row, solve

#: At most this many assignments are enumerated to decide a claim that is not linear.
MAX_ENUMERATION = 100_000
#: At most this many distinct ``max``/``min``/``non_negative`` terms are split into cases (2**N systems).
MAX_CASE_TERMS = 8

IMPLIED = "implied"
REFUTED = "refuted"
UNDECIDED = "undecided"


@dataclass(frozen=True)
class Verdict:
    """``status`` is IMPLIED, REFUTED or UNDECIDED; ``example`` a verified counterexample (REFUTED) over the
    variables related to the claim; ``how`` "proved" or "enumerated" (IMPLIED); ``reason`` why UNDECIDED."""

    status: str
    example: dict[str, int] | None = None
    how: str = ""
    reason: str = ""


class _NotLinear(Exception):
    """A term the linear arithmetic cannot express; ``str(e)`` names it."""


_CASE_OPS = ("max", "min", "non_negative")


def _case_terms(e: dimexpr.Expr, found: dict[dimexpr.Expr, None]) -> None:
    for a in e.args:
        _case_terms(a, found)
    if e.op in _CASE_OPS:
        found.setdefault(e, None)


@dataclass
class _Linearizer:
    """Linear forms (``{var: coefficient}``, constant) of expressions, with one case chosen for each max/min term
    (``choices``: 0 takes the first argument, 1 the second). ``sides`` collects the rows that define the new
    variables and the conditions of the chosen cases."""

    choices: Mapping[dimexpr.Expr, int]
    sides: list[Row | bool] = field(default_factory=list)
    fresh: dict[dimexpr.Expr, str] = field(default_factory=dict)
    seen: set[dimexpr.Expr] = field(default_factory=set)

    def form(self, e: dimexpr.Expr) -> tuple[dict[str, int], int]:
        op = e.op
        if op == "int":
            return {}, int(e.value)  # type: ignore[arg-type]
        if op == "var":
            return {str(e.value): 1}, 0
        if op in ("+", "-"):
            (lc, lk), (rc, rk) = self.form(e.args[0]), self.form(e.args[1])
            sign = 1 if op == "+" else -1
            out = dict(lc)
            for x, a in rc.items():
                out[x] = out.get(x, 0) + sign * a
            return _capped(out, lk + sign * rk, e)
        if op == "neg":
            c, k = self.form(e.args[0])
            return {x: -a for x, a in c.items()}, -k
        if op == "*":
            (lc, lk), (rc, rk) = self.form(e.args[0]), self.form(e.args[1])
            if lc and rc:
                raise _NotLinear(f"{_clip(e)} is not linear")
            (c, k), s = ((rc, rk), lk) if not lc else ((lc, lk), rk)
            return _capped({x: a * s for x, a in c.items()}, k * s, e)
        if op == "^":
            c, k = self.form(e.args[0])
            power = int(e.args[1].value)  # type: ignore[arg-type]
            if power == 0:
                return {}, 1
            if power == 1:
                return c, k
            if c:
                raise _NotLinear(f"{_clip(e)} is not linear")
            if abs(k) > 1 and (abs(k).bit_length() - 1) * power > 62:
                raise _NotLinear(f"{_clip(e)} exceeds 2**62")
            return {}, k ** power
        if op in ("//", "floordiv", "%", "mod"):
            return self._division(e)
        if op in _CASE_OPS:
            args = (*e.args, dimexpr.Expr("int", value=0)) if op == "non_negative" else e.args
            first, second = self.form(args[0]), self.form(args[1])
            pick, other = (first, second) if self.choices.get(e, 0) == 0 else (second, first)
            if e not in self.seen:  # the chosen argument is the max (>= the other) or the min (<= it)
                self.seen.add(e)
                diff = _sub(other, pick) if op != "min" else _sub(pick, other)
                self.sides.append(row(*diff))
            return pick
        raise _NotLinear(f"{_clip(e)} is not linear")  # pragma: no cover - the parser admits no other operation

    def _division(self, e: dimexpr.Expr) -> tuple[dict[str, int], int]:
        num, (dc, d) = self.form(e.args[0]), self.form(e.args[1])
        if dc:
            raise _NotLinear(f"{_clip(e)} divides by a variable")
        if d == 0:
            raise _NotLinear(f"{_clip(e)} divides by zero")
        key = dimexpr.Expr("floordiv", e.args)
        q = self.fresh.get(key)
        if q is None:
            # named by the expression, so that every linearization names it alike; '#' keeps it from any dimension
            # variable's name
            q = self.fresh[key] = f"#{key}"
            c, k = num
            # q == floor(num / d):  d*q <= num <= d*q + d - 1 for d > 0, d*q >= num >= d*q + d + 1 for d < 0
            below = _sub(({q: d}, 0), (c, k))
            above = _sub((c, k), ({q: d}, d - 1 if d > 0 else d + 1))
            if d > 0:
                self.sides += [row(*below), row(*above)]
            else:
                self.sides += [row(*_neg(below)), row(*_neg(above))]
        if e.op in ("//", "floordiv"):
            return {q: 1}, 0
        c, k = num  # num - d*q
        out = dict(c)
        out[q] = out.get(q, 0) - d
        return out, k


def _sub(a: tuple[dict[str, int], int], b: tuple[dict[str, int], int]) -> tuple[dict[str, int], int]:
    out = dict(a[0])
    for x, c in b[0].items():
        out[x] = out.get(x, 0) - c
    return out, a[1] - b[1]


def _neg(a: tuple[dict[str, int], int]) -> tuple[dict[str, int], int]:
    return {x: -c for x, c in a[0].items()}, -a[1]


def _capped(c: dict[str, int], k: int, e: dimexpr.Expr) -> tuple[dict[str, int], int]:
    if max([abs(k), *(abs(a) for a in c.values())]) > dimexpr.MAX_VALUE:
        raise _NotLinear(f"a coefficient of {_clip(e)} exceeds 2**62")
    return c, k


def _clip(e: dimexpr.Expr) -> str:
    text = str(e)
    return repr(text) if len(text) <= 60 else repr(text[:60]) + "..."


def _rows(c: dimexpr.Constraint, lin: _Linearizer, negate: bool) -> list[list[Row | bool]]:
    """The rows of ``c`` (one alternative), or of its negation over the integers (two alternatives for ==)."""
    diff = _sub(lin.form(c.lhs), lin.form(c.rhs))  # lhs - rhs
    if not negate:
        if c.op == "<=":
            return [[row(*diff)]]
        if c.op == ">=":
            return [[row(*_neg(diff))]]
        return [[row(*diff), row(*_neg(diff))]]
    above = row(*_sub(({}, 1), diff))  # lhs - rhs >= 1
    below = row(diff[0], diff[1] + 1)  # lhs - rhs <= -1
    if c.op == "<=":
        return [[above]]
    if c.op == ">=":
        return [[below]]
    return [[above], [below]]


class System:
    """The shapes an artifact accepted: each variable's bounds (``Bounds``; a variable without an entry is at least
    1) and its constraints (parsed, in the variable names the comparison uses). Linearized once, for every claim."""

    def __init__(self, bounds: Mapping[str, Bounds], constraints: list[dimexpr.Constraint]):
        self.constraints = list(constraints)
        names = set(bounds)
        for c in self.constraints:
            names |= c.variables()
        self.bounds = {v: bounds.get(v, Bounds()) for v in sorted(names)}
        self.linear: list[dimexpr.Constraint] = []
        self.skipped: list[tuple[dimexpr.Constraint, str]] = []  # not linear, and why
        self.plain: list[dimexpr.Constraint] = []  # linear, without a max/min term
        terms: dict[dimexpr.Expr, None] = {}
        for c in self.constraints:
            try:
                _rows(c, _Linearizer({}), negate=False)
            except _NotLinear as e:
                self.skipped.append((c, str(e)))
                continue
            self.linear.append(c)
            own: dict[dimexpr.Expr, None] = {}
            _case_terms(c.lhs, own)
            _case_terms(c.rhs, own)
            if not own:
                self.plain.append(c)
            terms.update(own)
        #: The distinct max/min/non_negative terms of the linear constraints, split into cases.
        self.terms = list(terms)
        self._rows: dict[tuple[int, ...], list[Row | bool]] = {}
        self._narrowed: tuple[dict[str, Bounds] | None] | None = None

    def rows(self, choice: Mapping[dimexpr.Expr, int]) -> list[Row | bool]:
        """The bounds and the linear constraints as rows, in the case ``choice`` picks for each term."""
        key = tuple(choice.get(t, 0) for t in self.terms)
        if key not in self._rows:
            lin = _Linearizer(choice)
            out = _bound_rows(self.bounds)
            for c in self.linear:
                out += _rows(c, lin, negate=False)[0]
            self._rows[key] = out + lin.sides
        return self._rows[key]

    def narrowed(self, budget: dimexpr.Budget) -> dict[str, Bounds] | None:
        """The bounds narrowed by what the linear constraints imply about each variable (bound propagation: every
        accepted assignment stays inside); None when they accept nothing. Raises GaveUp past the budget."""
        if self._narrowed is None:
            self._narrowed = (_narrowed(self, budget),)
        return self._narrowed[0]

    def with_variables(self, names: set[str]) -> dict[str, Bounds]:
        return {v: self.bounds.get(v, Bounds()) for v in sorted(set(self.bounds) | names)}

    def related(self, names: set[str]) -> list[str]:
        """``names`` and every variable tied to them through the constraints, sorted."""
        found, changed = set(names), True
        while changed:
            changed = False
            for c in self.constraints:
                vs = c.variables()
                if vs & found and not vs <= found:
                    found |= vs
                    changed = True
        return sorted(found)

    def accepts(self, env: Mapping[str, int], budget: dimexpr.Budget) -> bool:
        """Whether ``env`` (a value for every variable) is within the bounds and satisfies every constraint."""
        if not all(b.holds(env[v]) for v, b in self.bounds.items()):
            return False
        return all(c.holds(env, budget) for c in self.constraints)


def _bound_rows(bounds: Mapping[str, Bounds]) -> list[Row | bool]:
    out: list[Row | bool] = []
    for v, b in bounds.items():
        out.append(row({v: -1}, b.lo))
        if b.hi is not None:
            out.append(row({v: 1}, -b.hi))
    return out


def _holds_on_box(c: dimexpr.Constraint, bounds: Mapping[str, Bounds]) -> bool:
    """Whether ``c`` holds for every assignment within ``bounds`` (by intervals: True is a proof)."""
    box = {v: (b.lo, b.hi) for v, b in bounds.items()}
    try:
        lo, hi = dimexpr.value_range(dimexpr.Expr("-", (c.lhs, c.rhs)), box)
    except dimexpr.DimExprError:
        return False
    return lo >= 0 if c.op == ">=" else hi <= 0 if c.op == "<=" else lo == hi == 0


def implies(system: System, claim: dimexpr.Constraint, budget: dimexpr.Budget) -> Verdict:
    """Whether every assignment ``system`` accepts satisfies ``claim`` (see the module docstring)."""
    bounds = system.with_variables(claim.variables())
    try:
        narrowed = system.narrowed(budget)
    except GaveUp as e:
        return Verdict(UNDECIDED, reason=f"the search stopped: {e}")
    if narrowed is None:
        return Verdict(IMPLIED, how="proved")  # the old constraints accept no shape at all
    box = {**bounds, **narrowed}
    if _holds_on_box(claim, box):
        return Verdict(IMPLIED, how="proved")
    shown = system.related(claim.variables())
    linear = _by_linear_arithmetic(system, claim, bounds, budget)
    if linear.status != UNDECIDED:
        return _shown(linear, shown)
    if budget.left <= 0:
        return linear
    point = _probe(system, claim, bounds, budget)
    if point is not None:
        return _shown(Verdict(REFUTED, point, "found"), shown)
    enumerated = _by_enumeration(system, claim, box, shown, budget)
    if enumerated.status != UNDECIDED:
        return _shown(enumerated, shown)
    return Verdict(UNDECIDED, reason=f"{linear.reason}; {enumerated.reason}")


#: Rounds of bound propagation (each narrows every variable's interval by what one row implies).
_ROUNDS = 16


def _narrowed(system: System, budget: dimexpr.Budget) -> dict[str, Bounds] | None:
    """``system.narrowed``: bound propagation over the rows of the linear constraints without case splits."""
    lin = _Linearizer({})
    rows: list[Row | bool] = []
    for c in system.plain:
        rows += _rows(c, lin, negate=False)[0]
    rows += lin.sides
    if any(r is False for r in rows):
        return None
    lo: dict[str, int | None] = {v: b.lo for v, b in system.bounds.items()}
    hi: dict[str, int | None] = {v: b.hi for v, b in system.bounds.items()}
    for _ in range(_ROUNDS):
        changed = False
        for r in rows:
            if not isinstance(r, Row):
                continue
            try:
                budget.spend(len(r.coeffs))
            except dimexpr.BudgetExceeded as e:
                raise GaveUp(str(e)) from None
            for x, a in r.coeffs:
                least = _least_rest(r, x, lo, hi)  # a*x <= -(the least value of the rest of the row)
                if least is None:
                    continue
                if a > 0:
                    top = (-least) // a
                    old = hi.get(x)
                    if old is None or top < old:
                        hi[x], changed = top, True
                else:
                    bottom = -(least // a)  # ceil(least / -a)
                    old = lo.get(x)
                    if old is None or bottom > old:
                        lo[x], changed = bottom, True
                low, high = lo.get(x), hi.get(x)
                if low is not None and high is not None and low > high:
                    return None
        if not changed:
            break
    return {v: Bounds(b.lo if (low := lo[v]) is None else low, hi[v]) for v, b in system.bounds.items()}


def _least_rest(r: Row, x: str, lo: Mapping[str, int | None], hi: Mapping[str, int | None]) -> int | None:
    """The least value of row ``r`` without ``x``'s term within the intervals, or None when it has no least."""
    least = r.const
    for y, b in r.coeffs:
        if y == x:
            continue
        end = lo.get(y) if b > 0 else hi.get(y)
        if end is None:
            return None
        least += b * end
    return least


def _shown(v: Verdict, names: list[str]) -> Verdict:
    if v.example is None:
        return v
    return Verdict(v.status, {n: v.example[n] for n in names if n in v.example}, v.how, v.reason)


def _choices(terms: list[dimexpr.Expr]) -> Iterator[dict[dimexpr.Expr, int]]:
    for picks in itertools.product((0, 1), repeat=len(terms)):
        yield dict(zip(terms, picks))


def _extra_rows(system: System, bounds: Mapping[str, Bounds]) -> list[Row | bool]:
    """The bounds of the claim's variables that the system does not name (at least 1, as JAX's)."""
    return _bound_rows({v: b for v, b in bounds.items() if v not in system.bounds})


def _by_linear_arithmetic(system: System, claim: dimexpr.Constraint, bounds: Mapping[str, Bounds],
                          budget: dimexpr.Budget) -> Verdict:
    try:
        _rows(claim, _Linearizer({}), negate=True)
    except _NotLinear as e:
        return Verdict(UNDECIDED, reason=f"the new condition is not linear: {e}")
    found = dict.fromkeys(system.terms)
    _case_terms(claim.lhs, found)
    _case_terms(claim.rhs, found)
    if len(found) > MAX_CASE_TERMS:
        return Verdict(UNDECIDED, reason=f"more than {MAX_CASE_TERMS} max/min terms to split into cases")
    unverified = False
    extra = _extra_rows(system, bounds)
    try:
        for choice in _choices(list(found)):
            lin = _Linearizer(choice)
            for alternative in _rows(claim, lin, negate=True):
                values = solve([*system.rows(choice), *extra, *lin.sides, *alternative], budget)
                if values is None:
                    continue
                env = {v: values.get(v, bounds[v].lo) for v in bounds}
                if _verified(system, claim, env, budget):
                    return Verdict(REFUTED, env, "proved")
                unverified = True
    except GaveUp as e:
        return Verdict(UNDECIDED, reason=f"the search stopped: {e}")
    if not unverified:
        return Verdict(IMPLIED, how="proved")
    if system.skipped:
        c, why = system.skipped[0]
        return Verdict(UNDECIDED, reason=f"the old constraint {c.text!r} is left out of the linear arithmetic "
                                         f"({why})")
    return Verdict(UNDECIDED, reason="a solution of the linear arithmetic could not be verified")


def _verified(system: System, claim: dimexpr.Constraint, env: Mapping[str, int], budget: dimexpr.Budget) -> bool:
    """Whether ``env`` is accepted by ``system`` and rejected by ``claim``, by exact evaluation."""
    try:
        return system.accepts(env, budget) and not claim.holds(env, budget)
    except dimexpr.BudgetExceeded as e:
        raise GaveUp(str(e)) from None
    except dimexpr.DimExprError:
        return False


def _probe(system: System, claim: dimexpr.Constraint, bounds: Mapping[str, Bounds],
           budget: dimexpr.Budget) -> dict[str, int] | None:
    """A point of the old system (the linear arithmetic's, in the first case of each max/min) where the claim
    fails, checked by exact evaluation; or None."""
    try:
        values = solve([*system.rows({}), *_extra_rows(system, bounds)], budget)
        if values is None:
            return None
        env = {v: values.get(v, bounds[v].lo) for v in bounds}
        return env if _verified(system, claim, env, budget) else None
    except GaveUp:
        return None


def _by_enumeration(system: System, claim: dimexpr.Constraint, box: Mapping[str, Bounds], names: list[str],
                    budget: dimexpr.Budget) -> Verdict:
    """Every assignment of ``names`` (the claim's variables and those tied to them) within ``box`` (the old bounds,
    narrowed by the old constraints)."""
    total = 1
    for v in names:
        b = box[v]
        if b.hi is None:
            return Verdict(UNDECIDED, reason=f"{v!r} has no max, so its values cannot be enumerated")
        total *= max(0, b.hi - b.lo + 1)
        if total > MAX_ENUMERATION:
            return Verdict(UNDECIDED, reason=f"the bounds allow more than {MAX_ENUMERATION} assignments to "
                                             f"enumerate")
    related = [c for c in system.constraints if c.variables() <= set(names)]
    cost = sum(dimexpr.size(x.lhs) + dimexpr.size(x.rhs) for x in [*related, claim])
    if total * cost > budget.left:
        return Verdict(UNDECIDED, reason=f"enumerating {total} assignments would take more than the "
                                         f"{max(budget.left, 0)} evaluation steps left")
    ranges = [range(box[v].lo, box[v].hi + 1) for v in names]  # type: ignore[operator]
    for values in itertools.product(*ranges):
        env = dict(zip(names, values))
        try:
            if not all(c.holds(env, budget) for c in related) or claim.holds(env, budget):
                continue
            rest = _rest(system, set(names), budget)
            if rest is _EMPTY:
                return Verdict(IMPLIED, how="enumerated")  # the old constraints accept no shape at all
            full = {**rest, **env} if isinstance(rest, dict) else None
            if full is not None and _verified(system, claim, full, budget):
                return Verdict(REFUTED, full, "enumerated")
            return Verdict(UNDECIDED, reason="the old constraints on the other variables could not be solved")
        except (dimexpr.DimExprError, GaveUp) as e:
            return Verdict(UNDECIDED, reason=str(e))
    return Verdict(IMPLIED, how="enumerated")


_EMPTY = object()


def _rest(system: System, names: set[str], budget: dimexpr.Budget) -> dict[str, int] | object | None:
    """Values for the variables outside ``names`` that the old system accepts (a counterexample over ``names`` is
    one only if the rest of the old system accepts something); ``_EMPTY`` when it accepts nothing, None when no
    values were found."""
    others = {v: b for v, b in system.bounds.items() if v not in names}
    constraints = [c for c in system.constraints if not c.variables() & names]
    if not others:
        return {}
    exact = all(c in system.plain for c in constraints)  # then "no solution" means the rest accepts nothing
    try:
        lin = _Linearizer({})
        rows: list[Row | bool] = _bound_rows(others)
        for c in constraints:
            if c in system.linear:
                rows += _rows(c, lin, negate=False)[0]
        values = solve([*rows, *lin.sides], budget)
    except (GaveUp, _NotLinear):
        return None
    if values is None:
        return _EMPTY if exact else None
    env = {v: values.get(v, b.lo) for v, b in others.items()}
    try:
        return env if all(c.holds(env, budget) for c in constraints) else None
    except dimexpr.DimExprError:
        return None
