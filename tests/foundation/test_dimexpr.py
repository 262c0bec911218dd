"""Dimension expressions: parsing, rendering as JAX prints them, evaluation, linear solving and errors."""

from __future__ import annotations

import re

import pytest

from jaxport.dimexpr import DimExprError, evaluate, linear, parse, parse_constraint, solve, variables

ENV = {"a": 17, "b": 5, "c": 2, "h": 4, "batch": 8}


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("784", "784"),
        (" 7 ", "7"),
        ("batch", "batch"),
        ("2*h", "2*h"),
        ("h*2", "h*2"),
        ("a+b*c", "a + b*c"),
        ("(a+b)*c", "(a + b)*c"),
        ("a-b-c", "a - b - c"),
        ("a-(b-c)", "a - (b - c)"),
        ("a-(b+c)", "a - (b + c)"),
        ("a-b+c", "a - b + c"),
        ("-a", "-a"),
        ("-(a+b)", "-(a + b)"),
        ("-(a*b)", "-(a*b)"),
        ("2*-a", "2*-a"),
        ("a - -b", "a - -b"),
        ("a//2", "a//2"),
        ("a % 3", "a%3"),
        ("a//b//c", "a//b//c"),
        ("a//(b//c)", "a//(b//c)"),
        ("a*(b//c)", "a*(b//c)"),
        ("a//(b*c)", "a//(b*c)"),
        ("a*(b*c)", "a*(b*c)"),
        ("((a))", "a"),
        ("floordiv(a,2)", "floordiv(a, 2)"),
        ("mod( a , 3 )", "mod(a, 3)"),
        ("max(a,b)+1", "max(a, b) + 1"),
        ("min(a, 2*b)", "min(a, 2*b)"),
        ("non_negative(a-3)", "non_negative(a - 3)"),
        ("max(floordiv(a, 2), mod(b, 3)) * 4", "max(floordiv(a, 2), mod(b, 3))*4"),
    ],
)
def test_parse_renders_as_jax_prints_and_round_trips(text, rendered):
    e = parse(text)
    assert str(e) == rendered
    assert str(parse(rendered)) == rendered
    assert evaluate(parse(rendered), ENV) == evaluate(e, ENV)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a+b*c", 17 + 5 * 2),
        ("(a+b)*c", (17 + 5) * 2),
        ("a-b-c", 17 - 5 - 2),
        ("a-b+c", 17 - 5 + 2),
        ("a*b%c", (17 * 5) % 2),
        ("a//b*c", (17 // 5) * 2),
        ("a-b//c", 17 - 5 // 2),
        ("-a*b", -17 * 5),
        ("--a", 17),
        ("a//b//c", 17 // 5 // 2),
        ("a % b % c", 17 % 5 % 2),
        ("2*h + 1", 9),
        ("floordiv(a, b)", 3),
        ("mod(a, b)", 2),
        ("a // b", 3),
        ("a % b", 2),
        ("max(a, b)", 17),
        ("min(a, b)", 5),
        ("max(min(a, b), c)", 5),
        ("non_negative(b - a)", 0),
        ("non_negative(a - b)", 12),
    ],
)
def test_evaluate_respects_precedence(text, value):
    assert evaluate(parse(text), ENV) == value


@pytest.mark.parametrize(("n", "d"), [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, 3), (6, 3)])
def test_floordiv_and_mod_round_towards_negative_infinity_as_jax_does(n, d):
    env = {"n": n, "d": d}
    assert evaluate(parse("floordiv(n, d)"), env) == n // d
    assert evaluate(parse("n // d"), env) == n // d
    assert evaluate(parse("mod(n, d)"), env) == n % d
    assert evaluate(parse("n % d"), env) == n % d


def test_variables():
    assert variables(parse("max(floordiv(a, 2), b) + 3*c - a")) == {"a", "b", "c"}
    assert variables(parse("16")) == set()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty dimension expression"),
        ("   ", "empty dimension expression"),
        ("a+", "unexpected end of 'a+'"),
        ("(a", "unexpected end of '(a'"),
        ("-", "unexpected end of '-'"),
        ("a)", "unexpected ')' in 'a)'"),
        ("()", "unexpected ')' in '()'"),
        ("a b", "unexpected 'b' in 'a b'"),
        ("3a", "unexpected 'a' in '3a'"),
        ("a,b", "unexpected ',' in 'a,b'"),
        ("a**2", "unexpected '*' in 'a**2'"),
        ("1.5", "unexpected character '.' in '1.5'"),
        ("a^b", "the exponent after '^' must be an integer up to 64 in 'a^b'"),
        ("a=b", "unexpected character '=' in 'a=b'"),
        ("max(a b)", "expected ')' but found 'b' in 'max(a b)'"),
        ("foo(a)", "unknown function 'foo' in 'foo(a)' (known: floordiv, max, min, mod, non_negative)"),
        ("max(a)", "max() takes 2 arguments, found 1, in 'max(a)'"),
        ("floordiv(a, 2, 3)", "floordiv() takes 2 arguments, found 3, in 'floordiv(a, 2, 3)'"),
        ("non_negative(a, b)", "non_negative() takes 1 argument, found 2, in 'non_negative(a, b)'"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(DimExprError) as e:
        parse(text)
    assert str(e.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("(" * 70 + "a" + ")" * 70, "expression nests deeper than 64 levels"),
        ("-" * 3000 + "a", "expression nests deeper than 64 levels"),
        ("max(" * 70 + "a" + ", 1)" * 70, "expression nests deeper than 64 levels"),
        # A long flat chain is a deep tree: it must be refused, not overflow the stack when rendered or evaluated.
        ("+".join(["a"] * 2000), "expression has more than 128 levels of operations"),
        ("*".join(["2"] * 1500), "expression has more than 128 levels of operations"),
        ("a" * 4097, "expression is longer than 4096 characters"),
    ],
)
def test_hostile_expressions_are_refused(text, message):
    with pytest.raises(DimExprError) as e:
        parse(text)
    assert str(e.value) == message


def test_longest_accepted_chain_renders_and_evaluates():
    e = parse("+".join(["a"] * 128))
    assert evaluate(e, {"a": 2}) == 256
    assert linear(e, "a", {}) == (128, 0)
    assert str(e) == " + ".join(["a"] * 128)


def test_evaluate_errors():
    with pytest.raises(DimExprError, match=re.escape("dimension variable 'q' has no value")):
        evaluate(parse("2*q"), {})
    with pytest.raises(DimExprError) as e:
        evaluate(parse("a // (b - 5)"), ENV)
    assert str(e.value) == "division by zero in a//(b - 5)"
    with pytest.raises(DimExprError) as e:
        evaluate(parse("mod(a, 0)"), ENV)
    assert str(e.value) == "division by zero in mod(a, 0)"


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("h", {}, (1, 0)),
        ("7", {}, (0, 7)),
        ("2*h", {}, (2, 0)),
        ("h*2", {}, (2, 0)),
        ("2*h + 1", {}, (2, 1)),
        ("(h + 1)*3", {}, (3, 3)),
        ("2*(h - 1)", {}, (2, -2)),
        ("10 - h", {}, (-1, 10)),
        ("-h", {}, (-1, 0)),
        ("b*h + b", {"b": 4}, (4, 4)),
        ("h + floordiv(b, 2)", {"b": 9}, (1, 4)),
        ("h*h", {}, None),
        ("floordiv(h, 2)", {}, None),
        ("h // 2", {}, None),
        ("mod(h, 2)", {}, None),
        ("max(h, 2)", {}, None),
        ("b + h", {}, None),  # b unknown
    ],
)
def test_linear(text, env, expected):
    assert linear(parse(text), "h", env) == expected


def test_solve_reads_variables_from_shapes_in_dependency_order():
    shapes = [
        ("y", [parse("b + h")], [10]),
        ("x", [parse("b"), 3], [4, 3]),
        ("z", [parse("floordiv(c, 2)")], [3]),
    ]
    env, source, conflicts = solve(shapes)
    assert env == {"b": 4, "h": 6}  # c only appears non-linearly: left for the caller to report
    assert source == {"b": ("x", 0, "b"), "h": ("y", 0, "b + h")}
    assert conflicts == []


def test_solve_reports_a_size_the_expression_cannot_take():
    env, source, conflicts = solve([("x", [parse("2*h"), 3], [33, 3])])
    assert conflicts == ["input 'x': shape[0] = 33 cannot be written as 2*h for an integer h"]
    assert source == {"h": ("x", 0, "2*h")}


def test_solve_uses_the_first_axis_and_keeps_the_value():
    env, source, conflicts = solve([("x", [parse("n"), parse("n")], [3, 5])])
    assert env == {"n": 3}
    assert source == {"n": ("x", 0, "n")}
    assert conflicts == []


@pytest.mark.parametrize(
    ("text", "env", "holds"),
    [
        ("b <= 8*h", {"b": 32, "h": 4}, True),
        ("b <= 8*h", {"b": 33, "h": 4}, False),
        ("b >= h + 1", {"b": 5, "h": 4}, True),
        ("mod(b, h) == 0", {"b": 12, "h": 4}, True),
        ("mod(b, h) == 0", {"b": 13, "h": 4}, False),
    ],
)
def test_constraints(text, env, holds):
    c = parse_constraint(text)
    assert c.holds(env) is holds
    assert c.variables() == set(env)
    assert c.text == text


def test_constraint_keeps_its_text_stripped_and_its_parts():
    c = parse_constraint("  2*h >= floordiv(b,2) ")
    assert (str(c.lhs), c.op, str(c.rhs), c.text) == ("2*h", ">=", "floordiv(b, 2)", "2*h >= floordiv(b,2)")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a", "a constraint needs one of >=, <=, == in 'a'"),
        ("a < b", "unexpected character '<' in 'a < b'"),
        ("a >= ", "unexpected end of 'a >= '"),
        (">= 3", "unexpected '>=' in '>= 3'"),
        ("a >= b >= c", "unexpected '>=' in 'a >= b >= c'"),
    ],
)
def test_constraint_errors(text, message):
    with pytest.raises(DimExprError) as e:
        parse_constraint(text)
    assert str(e.value) == message



def test_power_as_jax_prints_it():
    # JAX writes a reshape of f32[b, b] to one axis as b^2; artifacts with it must open and check.
    e = parse("2*b^2 + 1")
    assert str(e) == "2*b^2 + 1"
    assert evaluate(e, {"b": 3}) == 19
    assert linear(e, "b", {}) is None
