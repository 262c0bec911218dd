"""Dimension expressions and constraints, without JAX.

The manifest stores shapes as JAX prints them (``batch``, ``2*h``, ``floordiv(b, 2)``, ``b + 1``) and constraints
as JAX accepts them (``batch <= 8*h``). ``inspect`` and the input checks of ``call`` need to read them in a
process that has not imported JAX, so this module parses that small language itself. It never uses ``eval``.

Grammar (integers only)::

    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "//" | "%") unary)*
    unary := "-" unary | power
    power := atom ("^" INT)?
    atom  := INT | NAME | NAME "(" expr ("," expr)* ")" | "(" expr ")"

with the functions ``max``, ``min``, ``floordiv``, ``mod`` and ``non_negative``.

Trust model: the text comes from untrusted manifests and specs, so every cost is bounded. Parsing caps the length,
the nesting, the number of operations, the polynomial degree and every integer literal (at most :data:`MAX_VALUE`);
:func:`evaluate` refuses any intermediate value beyond :data:`MAX_VALUE` in magnitude before computing it (no huge
Python integers), and an optional :class:`Budget` caps the work of a search that evaluates many times.
:func:`check_ranges` refuses, given the declared bounds, an expression whose value can exceed :data:`MAX_VALUE` or
that can divide by zero. Every refusal is a :class:`DimExprError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from ._record import dataclass

_FUNCTIONS = {"max": 2, "min": 2, "floordiv": 2, "mod": 2, "non_negative": 1}
_TOKEN = re.compile(r"\s*(?:([0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(//|>=|<=|==|[-+*%(),^]))")  # ASCII digits only
_MAX_LENGTH = 4096
_MAX_DEPTH = 64  # parentheses, function calls and unary minus
_MAX_TREE_DEPTH = 128  # all operations: bounds the recursion of render, evaluate and linear
_MAX_NODES = 1024  # operations, variables and integers of one expression
_MAX_DEGREE = 64  # polynomial degree: b^64 is the most, (b^64)^2 or b^64*b is refused
#: The largest magnitude of an integer literal and of any value an evaluation computes: a dimension is at most 2**62.
MAX_VALUE = 1 << 62


class DimExprError(ValueError):
    """A dimension expression or constraint cannot be parsed or evaluated."""


class BudgetExceeded(DimExprError):
    """A search evaluated expressions for longer than its :class:`Budget` allows."""


class Budget:
    """A cap on the work of many evaluations (one step per operation evaluated), for searches over assignments.

    ``what`` names the search in the refusal: "solving the dimension variables".
    """

    def __init__(self, steps: int, what: str):
        self.steps = steps
        self.left = steps
        self.what = what

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise BudgetExceeded(f"{self.what} takes more than {self.steps} evaluation steps")


def clipped(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut to ``limit`` characters: messages quote expressions that may be thousands long."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


_clip = clipped


@dataclass(frozen=True)
class Expr:
    op: str  # "int", "var", "+", "-", "*", "//", "%", "neg", or a function name
    args: tuple = ()
    value: int | str | None = None

    def __str__(self) -> str:
        return _render(self, 0)


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2, "^": 4}


def _render(e: Expr, outer: int) -> str:
    if e.op in ("int", "var"):
        return str(e.value)
    if e.op == "neg":
        text = "-" + _render(e.args[0], 3)
        return f"({text})" if outer > 3 else text  # (-b)^2 is not -b^2
    if e.op in _PRECEDENCE:
        p = _PRECEDENCE[e.op]
        joiner = f" {e.op} " if p == 1 else e.op
        # '^' takes an atom: the base of a power is parenthesized unless it is one, (b^2)^2 is not b^2^2
        text = _render(e.args[0], p + 1 if e.op == "^" else p) + joiner + _render(e.args[1], p + 1)
        return f"({text})" if p < outer else text
    return f"{e.op}({', '.join(_render(a, 0) for a in e.args)})"


def _tokenize(text: str) -> list[tuple[str, str]]:
    if len(text) > _MAX_LENGTH:
        raise DimExprError(f"expression is longer than {_MAX_LENGTH} characters")
    tokens, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise DimExprError(f"unexpected character {text[pos:].lstrip()[:1]!r} in {_clip(str(text))}")
        number, name, symbol = m.groups()
        if name == "_":
            raise DimExprError(f"'_' in {_clip(str(text))} is no dimension variable (JAX reads it as 'the size the "
                               f"argument has'); give the dimension a name, such as 'batch'")
        tokens.append(("int", number) if number else ("name", name) if name else ("sym", symbol))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0
        self.depth = 0
        self.tree_depth: dict[int, int] = {}  # id(node) -> height of the node's tree
        self.degree: dict[int, int] = {}  # id(node) -> polynomial degree of the node (an upper bound)
        self.nodes = 0

    def leaf(self, op: str, value: int | str) -> Expr:
        self.count()
        if op == "int" and int(value) > MAX_VALUE:
            raise DimExprError(f"the integer {value} in {_clip(self.text)} is larger than 2**62")
        return Expr(op, value=value)

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > _MAX_NODES:
            raise DimExprError(f"expression has more than {_MAX_NODES} terms")

    def node(self, op: str, args: tuple[Expr, ...]) -> Expr:
        self.count()
        e = Expr(op, args)
        height = 1 + max(self.tree_depth.get(id(a), 1) for a in args)
        if height > _MAX_TREE_DEPTH:
            raise DimExprError(f"expression has more than {_MAX_TREE_DEPTH} levels of operations")
        self.tree_depth[id(e)] = height
        degrees = [self.degree.get(id(a), 1 if a.op == "var" else 0) for a in args]
        if op == "*":
            degree = degrees[0] + degrees[1]
        elif op == "^":
            degree = degrees[0] * int(args[1].value)  # type: ignore[arg-type]
        elif op in ("//", "floordiv"):
            degree = degrees[0]
        else:
            degree = max(degrees)
        if degree > _MAX_DEGREE:
            raise DimExprError(f"expression {_clip(self.text)} has a polynomial degree above {_MAX_DEGREE}")
        self.degree[id(e)] = degree
        return e

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, symbol: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise DimExprError(f"unexpected end of {_clip(self.text)}")
        if symbol is not None and tok != ("sym", symbol):
            raise DimExprError(f"expected {symbol!r} but found {_clip(tok[1], 40)} in {_clip(self.text)}")
        self.pos += 1
        return tok

    def expr(self) -> Expr:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise DimExprError(f"expression nests deeper than {_MAX_DEPTH} levels")
        left = self.term()
        while self.peek() in (("sym", "+"), ("sym", "-")):
            op = self.take()[1]
            left = self.node(op, (left, self.term()))
        self.depth -= 1
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self.peek() in (("sym", "*"), ("sym", "//"), ("sym", "%")):
            op = self.take()[1]
            left = self.node(op, (left, self.unary()))
        return left

    def power(self) -> Expr:
        base = self.atom()
        if self.peek() == ("sym", "^"):
            self.take()
            kind, text = self.take()
            if kind != "int" or len(text) > 3 or int(text) > 64:
                raise DimExprError(f"the exponent after '^' must be an integer up to 64 in {_clip(self.text)}")
            return self.node("^", (base, self.leaf("int", int(text))))
        return base

    def unary(self) -> Expr:
        if self.peek() == ("sym", "-"):
            self.take()
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise DimExprError(f"expression nests deeper than {_MAX_DEPTH} levels")
            inner = self.unary()
            self.depth -= 1
            return self.node("neg", (inner,))
        return self.power()

    def atom(self) -> Expr:
        kind, text = self.take()
        if kind == "int":
            if len(text.lstrip("0")) > 19:  # more digits than 2**62 has: refused before int() converts them
                raise DimExprError(f"the integer {text[:20]}... ({len(text)} digits) in {_clip(self.text)} is "
                                   f"larger than 2**62")
            return self.leaf("int", int(text))
        if kind == "name":
            if self.peek() == ("sym", "("):
                if text not in _FUNCTIONS:
                    raise DimExprError(f"unknown function {_clip(text, 40)} in {_clip(self.text)} "
                                       f"(known: {', '.join(sorted(_FUNCTIONS))})")
                self.take("(")
                args = [self.expr()]
                while self.peek() == ("sym", ","):
                    self.take()
                    args.append(self.expr())
                self.take(")")
                want = _FUNCTIONS[text]
                if len(args) != want:
                    raise DimExprError(f"{text}() takes {want} argument{'s' if want > 1 else ''}, "
                                       f"found {len(args)}, in {_clip(self.text)}")
                return self.node(text, tuple(args))
            return self.leaf("var", text)
        if text == "(":
            inner = self.expr()
            self.take(")")
            return inner
        raise DimExprError(f"unexpected {_clip(text, 40)} in {_clip(self.text)}")

    def done(self) -> None:
        if self.peek() is not None:
            raise DimExprError(f"unexpected {_clip(self.peek()[1], 40)} in {_clip(self.text)}")  # type: ignore[index]


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Expr:
    """Parse one dimension expression (``"2*h"``, ``"784"``). Results are cached: the trees are immutable."""
    p = _Parser(str(text))
    if not p.tokens:
        raise DimExprError("empty dimension expression")
    e = p.expr()
    p.done()
    return e


@dataclass(frozen=True)
class Constraint:
    lhs: Expr
    op: str  # ">=", "<=", "=="
    rhs: Expr
    text: str

    def holds(self, env: Mapping[str, int], budget: Budget | None = None) -> bool:
        a, b = evaluate(self.lhs, env, budget), evaluate(self.rhs, env, budget)
        return a >= b if self.op == ">=" else a <= b if self.op == "<=" else a == b

    def variables(self) -> set[str]:
        return variables(self.lhs) | variables(self.rhs)


@functools.lru_cache(maxsize=4096)
def parse_constraint(text: str) -> Constraint:
    """Parse ``"lhs >= rhs"``, ``"lhs <= rhs"`` or ``"lhs == rhs"`` (cached, as :func:`parse`)."""
    p = _Parser(str(text))
    lhs = p.expr()
    tok = p.peek()
    if tok not in (("sym", ">="), ("sym", "<="), ("sym", "==")):
        raise DimExprError(f"a constraint needs one of >=, <=, == in {_clip(str(text))}")
    op = p.take()[1]
    rhs = p.expr()
    p.done()
    return Constraint(lhs, op, rhs, str(text).strip())


def size(e: Expr) -> int:
    """The number of operations, variables and integers of ``e`` (what one evaluation costs)."""
    return 1 + sum(size(a) for a in e.args)


def variables(e: Expr) -> set[str]:
    if e.op == "var":
        return {str(e.value)}
    out: set[str] = set()
    for a in e.args:
        out |= variables(a)
    return out


def _capped(value: int, e: Expr) -> int:
    if -MAX_VALUE <= value <= MAX_VALUE:
        return value
    raise DimExprError(f"the value of {_clip(str(e))} exceeds 2**62 in magnitude")


def evaluate(e: Expr, env: Mapping[str, int], budget: Budget | None = None) -> int:
    """The integer value of ``e`` with the dimension variables of ``env``.

    Every value, the variables' included, must stay within :data:`MAX_VALUE` in magnitude (DimExprError otherwise,
    raised before a larger integer is built); ``budget``, when given, is charged one step per operation.
    """
    if budget is not None:
        budget.spend()
    op = e.op
    if op == "int":
        return int(e.value)  # type: ignore[arg-type]
    if op == "var":
        if e.value not in env:
            raise DimExprError(f"dimension variable {e.value!r} has no value")
        return _capped(env[str(e.value)], e)
    vals = [evaluate(a, env, budget) for a in e.args]
    if op == "+":
        return _capped(vals[0] + vals[1], e)
    if op == "-":
        return _capped(vals[0] - vals[1], e)
    if op == "*":
        return _capped(vals[0] * vals[1], e)
    if op == "^":
        base, k = vals
        if abs(base) > 1 and (abs(base).bit_length() - 1) * k > 62:
            raise DimExprError(f"the value of {_clip(str(e))} exceeds 2**62 in magnitude")
        return _capped(base ** k, e)
    if op == "neg":
        return -vals[0]
    if op in ("//", "floordiv", "%", "mod"):
        if vals[1] == 0:
            raise DimExprError(f"division by zero in {_clip(str(e), 200)[1:-1]}")
        return _capped(vals[0] // vals[1] if op in ("//", "floordiv") else vals[0] % vals[1], e)
    if op == "max":
        return max(vals)
    if op == "min":
        return min(vals)
    if op == "non_negative":
        return max(vals[0], 0)
    raise DimExprError(f"unknown operation {op!r}")  # pragma: no cover - parser admits no other


# --- what an expression can take within bounds ---------------------------------------------------------------

_INF = float("inf")
Interval = tuple[float, float]  # ints, or -inf / inf for an end without a bound


def _times(x: float, y: float) -> float:
    return 0 if x == 0 or y == 0 else x * y  # 0 * inf is 0 here: a zero factor keeps a product at 0


def _floor_div(x: float, y: float) -> float:
    """floor(x / y) for y > 0, where x and y may be infinite."""
    if x in (_INF, -_INF):
        return x
    if y == _INF:
        return 0 if x >= 0 else -1
    return int(x) // int(y)


def _range(e: Expr, bounds: Mapping[str, tuple[int, int | None]], found: list[str]) -> Interval:
    """An interval holding every value of ``e`` within ``bounds`` (``var -> (min, max or None)``; a variable not
    listed is at least 1, as JAX's are). Appends to ``found`` what can go wrong: a divisor that can be 0, a value
    beyond MAX_VALUE."""
    op = e.op
    if op == "int":
        v = int(e.value)  # type: ignore[arg-type]
        return v, v
    if op == "var":
        least, most = bounds.get(str(e.value), (1, None))
        return least, _INF if most is None else most
    r = [_range(a, bounds, found) for a in e.args]
    if found:
        return -_INF, _INF
    if op == "+":
        out = (r[0][0] + r[1][0], r[0][1] + r[1][1])
    elif op == "-":
        out = (r[0][0] - r[1][1], r[0][1] - r[1][0])
    elif op == "neg":
        out = (-r[0][1], -r[0][0])
    elif op == "*":
        corners = [_times(x, y) for x in r[0] for y in r[1]]
        out = (min(corners), max(corners))
    elif op == "^":
        (lo, hi), k = r[0], int(r[1][0])
        big = max(abs(lo), abs(hi))
        if big != _INF and big > 1 and (int(big).bit_length() - 1) * k > 62:
            found.append(f"{_clip(str(e))} can exceed 2**62 within the dimension bounds")
            return -_INF, _INF
        ends = sorted([lo ** k, hi ** k])  # inf ** k is inf, (-inf) ** k keeps the sign of an odd k
        out = (0, ends[1]) if k % 2 == 0 and lo < 0 < hi else (ends[0], ends[1]) if k else (1, 1)
    elif op in ("//", "floordiv", "%", "mod"):
        (alo, ahi), (blo, bhi) = r
        if blo <= 0 <= bhi:
            found.append(f"{_clip(str(e))} divides by {_clip(str(e.args[1]))}, which can be 0 within the dimension "
                         f"bounds")
            return -_INF, _INF
        if op in ("%", "mod"):
            out = (0, bhi - 1) if blo > 0 else (blo + 1, 0)
        else:
            if bhi < 0:  # floor(a / b) == floor(-a / -b)
                alo, ahi, blo, bhi = -ahi, -alo, -bhi, -blo
            out = (_floor_div(alo, blo if alo < 0 else bhi), _floor_div(ahi, bhi if ahi < 0 else blo))
    elif op == "max":
        out = (max(r[0][0], r[1][0]), max(r[0][1], r[1][1]))
    elif op == "min":
        out = (min(r[0][0], r[1][0]), min(r[0][1], r[1][1]))
    elif op == "non_negative":
        out = (max(r[0][0], 0), max(r[0][1], 0))
    else:  # pragma: no cover - parser admits no other
        raise DimExprError(f"unknown operation {op!r}")
    for end in out:
        if end not in (_INF, -_INF) and abs(end) > MAX_VALUE:
            found.append(f"{_clip(str(e))} can reach {int(end)}, beyond 2**62, within the dimension bounds")
            return -_INF, _INF
    return out


def value_range(e: Expr, bounds: Mapping[str, tuple[int, int | None]]) -> Interval:
    """An interval holding every value of ``e`` within ``bounds`` (see :func:`check_ranges`)."""
    found: list[str] = []
    out = _range(e, bounds, found)
    if found:
        raise DimExprError(found[0])
    return out


def check_ranges(e: Expr | Constraint, bounds: Mapping[str, tuple[int, int | None]]) -> None:
    """Refuse (DimExprError) an expression, or a constraint's sides, that can divide by zero or exceed 2**62 in
    magnitude for some values of its variables within ``bounds`` (``var -> (min, max or None)``; a variable not
    listed is at least 1). A variable without a max may grow without bound: what that makes too large is refused
    when it is evaluated. The analysis is by intervals, so it may refuse what only looks possible, such as
    ``floordiv(b, b - b + 2)``."""
    for side in (e.lhs, e.rhs) if isinstance(e, Constraint) else (e,):
        value_range(side, bounds)


def linear(e: Expr, var: str, env: Mapping[str, int]) -> tuple[int, int] | None:
    """``(a, b)`` such that ``e == a*var + b`` given ``env`` for every other variable, or None (also when a
    coefficient would exceed 2**62).

    This is how a dimension variable is solved from an argument shape: ``2*h`` with a size of 32 gives h = 16.
    """
    out = _linear(e, var, env)
    if out is None or max(abs(out[0]), abs(out[1])) > MAX_VALUE:
        return None
    return out


def _linear(e: Expr, var: str, env: Mapping[str, int]) -> tuple[int, int] | None:
    op = e.op
    if op == "int":
        return 0, int(e.value)  # type: ignore[arg-type]
    if op == "var":
        if e.value == var:
            return 1, 0
        return _within(0, env[str(e.value)]) if e.value in env else None
    if var not in variables(e):
        try:
            return 0, evaluate(e, env)
        except DimExprError:
            return None
    if op in ("+", "-"):
        left, right = _linear(e.args[0], var, env), _linear(e.args[1], var, env)
        if left is None or right is None:
            return None
        sign = 1 if op == "+" else -1
        return _within(left[0] + sign * right[0], left[1] + sign * right[1])
    if op == "neg":
        inner = _linear(e.args[0], var, env)
        return None if inner is None else (-inner[0], -inner[1])
    if op == "*":
        left, right = _linear(e.args[0], var, env), _linear(e.args[1], var, env)
        if left is None or right is None:
            return None
        if left[0] == 0:
            return _within(left[1] * right[0], left[1] * right[1])
        if right[0] == 0:
            return _within(right[1] * left[0], right[1] * left[1])
    return None


def _within(a: int, b: int) -> tuple[int, int] | None:
    return (a, b) if abs(a) <= MAX_VALUE and abs(b) <= MAX_VALUE else None


def solve(
    shapes: list[tuple[str, list[Expr | int], list[int]]],
) -> tuple[dict[str, int], dict[str, tuple[str, int, str]], list[str]]:
    """Solve dimension variables from actual shapes.

    ``shapes`` holds ``(input name, declared dims, actual dims)``. Returns the values found, where each came from
    ``{var: (input, axis, expression)}``, and a list of conflicts, each a ready sentence. Variables that appear only
    non-linearly stay unsolved (the caller reports them).
    """
    env: dict[str, int] = {}
    source: dict[str, tuple[str, int, str]] = {}
    conflicts: list[str] = []
    progress = True
    while progress:
        progress = False
        for name, dims, actual in shapes:
            for axis, (d, n) in enumerate(zip(dims, actual)):
                if isinstance(d, int):
                    continue
                unknown = variables(d) - env.keys()
                if len(unknown) != 1:
                    continue
                (v,) = unknown
                lin = linear(d, v, env)
                if lin is None or lin[0] == 0:
                    continue
                a, b = lin
                if (n - b) % a != 0:
                    conflicts.append(
                        f"input '{name}': shape[{axis}] = {n} cannot be written as {d} for an integer {v}")
                    env[v] = (n - b) // a  # keep going so later messages stay meaningful
                else:
                    env[v] = (n - b) // a
                source[v] = (name, axis, str(d))
                progress = True
    return env, source, conflicts
