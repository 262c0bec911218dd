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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FUNCTIONS = {"max": 2, "min": 2, "floordiv": 2, "mod": 2, "non_negative": 1}
_TOKEN = re.compile(r"\s*(?:([0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(//|>=|<=|==|[-+*%(),^]))")  # ASCII digits only
_MAX_LENGTH = 4096
_MAX_DEPTH = 64  # parentheses, function calls and unary minus
_MAX_TREE_DEPTH = 128  # all operations: bounds the recursion of render, evaluate and linear


class DimExprError(ValueError):
    """A dimension expression or constraint cannot be parsed or evaluated."""


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
        return "-" + _render(e.args[0], 3)
    if e.op in _PRECEDENCE:
        p = _PRECEDENCE[e.op]
        joiner = f" {e.op} " if p == 1 else e.op
        text = _render(e.args[0], p) + joiner + _render(e.args[1], p + 1)
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
            raise DimExprError(f"unexpected character {text[pos:].lstrip()[:1]!r} in {text!r}")
        number, name, symbol = m.groups()
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

    def node(self, op: str, args: tuple[Expr, ...]) -> Expr:
        e = Expr(op, args)
        height = 1 + max(self.tree_depth.get(id(a), 1) for a in args)
        if height > _MAX_TREE_DEPTH:
            raise DimExprError(f"expression has more than {_MAX_TREE_DEPTH} levels of operations")
        self.tree_depth[id(e)] = height
        return e

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, symbol: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise DimExprError(f"unexpected end of {self.text!r}")
        if symbol is not None and tok != ("sym", symbol):
            raise DimExprError(f"expected {symbol!r} but found {tok[1]!r} in {self.text!r}")
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
            if kind != "int" or int(text) > 64:
                raise DimExprError(f"the exponent after '^' must be an integer up to 64 in {self.text!r}")
            return self.node("^", (base, Expr("int", value=int(text))))
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
            return Expr("int", value=int(text))
        if kind == "name":
            if self.peek() == ("sym", "("):
                if text not in _FUNCTIONS:
                    raise DimExprError(f"unknown function {text!r} in {self.text!r} "
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
                                       f"found {len(args)}, in {self.text!r}")
                return self.node(text, tuple(args))
            return Expr("var", value=text)
        if text == "(":
            inner = self.expr()
            self.take(")")
            return inner
        raise DimExprError(f"unexpected {text!r} in {self.text!r}")

    def done(self) -> None:
        if self.peek() is not None:
            raise DimExprError(f"unexpected {self.peek()[1]!r} in {self.text!r}")  # type: ignore[index]


def parse(text: str) -> Expr:
    """Parse one dimension expression (``"2*h"``, ``"784"``)."""
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

    def holds(self, env: dict[str, int]) -> bool:
        a, b = evaluate(self.lhs, env), evaluate(self.rhs, env)
        return a >= b if self.op == ">=" else a <= b if self.op == "<=" else a == b

    def variables(self) -> set[str]:
        return variables(self.lhs) | variables(self.rhs)


def parse_constraint(text: str) -> Constraint:
    """Parse ``"lhs >= rhs"``, ``"lhs <= rhs"`` or ``"lhs == rhs"``."""
    p = _Parser(str(text))
    lhs = p.expr()
    tok = p.peek()
    if tok not in (("sym", ">="), ("sym", "<="), ("sym", "==")):
        raise DimExprError(f"a constraint needs one of >=, <=, == in {text!r}")
    op = p.take()[1]
    rhs = p.expr()
    p.done()
    return Constraint(lhs, op, rhs, str(text).strip())


def variables(e: Expr) -> set[str]:
    if e.op == "var":
        return {str(e.value)}
    out: set[str] = set()
    for a in e.args:
        out |= variables(a)
    return out


def evaluate(e: Expr, env: dict[str, int]) -> int:
    """The integer value of ``e`` with the dimension variables of ``env``."""
    op = e.op
    if op == "int":
        return int(e.value)  # type: ignore[arg-type]
    if op == "var":
        if e.value not in env:
            raise DimExprError(f"dimension variable {e.value!r} has no value")
        return env[str(e.value)]
    vals = [evaluate(a, env) for a in e.args]
    if op == "+":
        return vals[0] + vals[1]
    if op == "-":
        return vals[0] - vals[1]
    if op == "*":
        return vals[0] * vals[1]
    if op == "^":
        return vals[0] ** vals[1]
    if op == "neg":
        return -vals[0]
    if op in ("//", "floordiv", "%", "mod"):
        if vals[1] == 0:
            raise DimExprError(f"division by zero in {e}")
        return vals[0] // vals[1] if op in ("//", "floordiv") else vals[0] % vals[1]
    if op == "max":
        return max(vals)
    if op == "min":
        return min(vals)
    if op == "non_negative":
        return max(vals[0], 0)
    raise DimExprError(f"unknown operation {op!r}")  # pragma: no cover - parser admits no other


def linear(e: Expr, var: str, env: dict[str, int]) -> tuple[int, int] | None:
    """``(a, b)`` such that ``e == a*var + b`` given ``env`` for every other variable, or None.

    This is how a dimension variable is solved from an argument shape: ``2*h`` with a size of 32 gives h = 16.
    """
    op = e.op
    if op == "int":
        return 0, int(e.value)  # type: ignore[arg-type]
    if op == "var":
        if e.value == var:
            return 1, 0
        return (0, env[str(e.value)]) if e.value in env else None
    if var not in variables(e):
        try:
            return 0, evaluate(e, env)
        except DimExprError:
            return None
    if op in ("+", "-"):
        left, right = linear(e.args[0], var, env), linear(e.args[1], var, env)
        if left is None or right is None:
            return None
        sign = 1 if op == "+" else -1
        return left[0] + sign * right[0], left[1] + sign * right[1]
    if op == "neg":
        inner = linear(e.args[0], var, env)
        return None if inner is None else (-inner[0], -inner[1])
    if op == "*":
        left, right = linear(e.args[0], var, env), linear(e.args[1], var, env)
        if left is None or right is None:
            return None
        if left[0] == 0:
            return left[1] * right[0], left[1] * right[1]
        if right[0] == 0:
            return right[1] * left[0], right[1] * left[1]
    return None


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
