"""Trust boundary: dimension arithmetic has a bounded cost, and odd numbers are clean errors, never internal ones.

Covers issue 12 classes 3 (unbounded arithmetic: parse limits, capped evaluation, ranges within the bounds,
bounded searches and diff decisions) and 7 (internal errors on bad input: rendering that round-trips, huge numbers
in policies and options, division by zero).
"""

from __future__ import annotations

import copy
import json
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxport_cli.main import cli

from jaxport import dimexpr
from jaxport.artifact import contract, diff, model, policy
from jaxport.errors import FormatError, InputError, PolicyFileError, SpecError
from jaxport.spec import parse_spec
from tests.hostile.corpus import artifact
from tests.support import function_record

GOLDEN = Path(__file__).parent / "golden" / "1.0" / "mlp.jaxport"
BOMB = "max(max(max(max(max(max(b,0)^64,0)^64,0)^64,0)^64,0)^64,0)^64 >= 1"


def _error(fn, *args, kind=dimexpr.DimExprError) -> str:
    with pytest.raises(kind) as e:
        fn(*args)
    return str(e.value)


# --- parsing: bounded depth, terms, degree and literals ------------------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    (BOMB, f"expression {BOMB!r} has a polynomial degree above 64"),
    ("(b^64)^2 >= 1", "expression '(b^64)^2 >= 1' has a polynomial degree above 64"),
    ("b^64*b >= 1", "expression 'b^64*b >= 1' has a polynomial degree above 64"),
    ("b^63^63 >= 1", "a constraint needs one of >=, <=, == in 'b^63^63 >= 1'"),
    ("b <= 4611686018427387905", "the integer 4611686018427387905 in 'b <= 4611686018427387905' is larger than 2**62"),
    ("b <= " + "9" * 3000, f"the integer {'9' * 20}... (3000 digits) in {('b <= ' + '9' * 75)!r}... is larger "
                           f"than 2**62"),
    ("b^" + "9" * 3000 + " >= 1", f"the exponent after '^' must be an integer up to 64 in {'b^' + '9' * 78!r}..."),
    (" + ".join(["b"] * 10_000) + " >= 1", "expression is longer than 4096 characters"),
    ("max(" * 65 + "b" + ", 1)" * 65 + " >= 1", "expression nests deeper than 64 levels"),
    ("-(" * 40 + "b" + ")" * 40 + " >= 1", "expression nests deeper than 64 levels"),
])
def test_hostile_constraints_are_refused_when_parsed(text, message):
    assert _error(dimexpr.parse_constraint, text) == message


def test_chained_exponent_is_refused_as_an_expression():
    assert _error(dimexpr.parse, "b^63^63") == "unexpected '^' in 'b^63^63'"


def test_term_count_is_capped():
    # Balanced sums stay under the depth caps; their number of terms is capped on its own.
    group = "(" + "+".join(["b"] * 60) + ")"
    text = "+".join([group] * 18)
    assert len(text) < 4096
    assert _error(dimexpr.parse, text) == "expression has more than 1024 terms"


def test_literals_up_to_2_62_parse():
    assert dimexpr.evaluate(dimexpr.parse(str(1 << 62)), {}) == 1 << 62
    assert dimexpr.evaluate(dimexpr.parse("0" * 100 + "7"), {}) == 7


# --- evaluation: capped magnitude, clean division by zero -----------------------------------------------------------


@pytest.mark.parametrize(("text", "env", "message"), [
    ("b^64", {"b": 2}, "the value of 'b^64' exceeds 2**62 in magnitude"),
    ("b^63", {"b": -2}, "the value of 'b^63' exceeds 2**62 in magnitude"),
    ("b*b*b", {"b": 1 << 21}, "the value of 'b*b*b' exceeds 2**62 in magnitude"),
    ("b + b", {"b": 1 << 62}, "the value of 'b + b' exceeds 2**62 in magnitude"),
    ("b", {"b": 10**30}, "the value of 'b' exceeds 2**62 in magnitude"),
    ("floordiv(b, b - b)", {"b": 3}, "division by zero in floordiv(b, b - b)"),
    ("mod(b, b - 3)", {"b": 3}, "division by zero in mod(b, b - 3)"),
])
def test_evaluation_is_capped(text, env, message):
    assert _error(dimexpr.evaluate, dimexpr.parse(text), env) == message


def test_evaluation_is_fast_even_for_the_worst_accepted_expression():
    e = dimexpr.parse("max(max(b, 0)^8, 1)^8")  # degree 64, the most
    start = time.monotonic()
    for b in range(2, 1000):
        with pytest.raises(dimexpr.DimExprError):
            dimexpr.evaluate(e, {"b": b})
    assert dimexpr.evaluate(e, {"b": 1}) == 1
    assert time.monotonic() - start < 2


def test_budget_caps_many_evaluations():
    budget = dimexpr.Budget(100, "a search")
    c = dimexpr.parse_constraint("b + b + b >= 1")
    with pytest.raises(dimexpr.BudgetExceeded, match="^a search takes more than 100 evaluation steps$"):
        for b in range(1000):
            c.holds({"b": b}, budget)


# --- ranges within the bounds ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "bounds", "message"), [
    ("floordiv(b, b - b)", {"b": (1, 64)}, "'floordiv(b, b - b)' divides by 'b - b', which can be 0 within the "
                                            "dimension bounds"),
    ("b % (h - 2)", {"b": (1, 64), "h": (1, None)}, "'b%(h - 2)' divides by 'h - 2', which can be 0 within the "
                                                     "dimension bounds"),
    ("floordiv(b, h)", {"b": (1, 8), "h": (0, 8)}, "'floordiv(b, h)' divides by 'h', which can be 0 within the "
                                                    "dimension bounds"),
    ("2*b", {"b": (1, 1 << 62)}, "'2*b' can reach 9223372036854775808, beyond 2**62, within the dimension bounds"),
    ("b^64", {"b": (1, 64)}, "'b^64' can exceed 2**62 within the dimension bounds"),
    ("(b + 1)^64", {"b": (1, None)}, "'(b + 1)^64' can reach 18446744073709551616, beyond 2**62, within the "
                                     "dimension bounds"),
    ("-b*b", {"b": (1, 1 << 40)}, "'-b*b' can reach -1208925819614629174706176, beyond 2**62, within the dimension "
                                  "bounds"),
])
def test_ranges_are_refused(text, bounds, message):
    assert _error(dimexpr.check_ranges, dimexpr.parse(text), bounds) == message


@pytest.mark.parametrize(("text", "bounds", "expected"), [
    ("2*b", {}, (2, float("inf"))),  # without a max, evaluation is what caps the value
    ("b*h - 4", {"b": (1, 64), "h": (2, 8)}, (-2, 508)),
    ("floordiv(b, 2) + mod(b, 3)", {"b": (1, 10)}, (0, 7)),
    ("floordiv(b, -2)", {"b": (1, 10)}, (-5, -1)),
    ("non_negative(b - 10)", {"b": (1, 4)}, (0, 0)),
    ("(-b)^2", {"b": (1, 10)}, (1, 100)),
    ("b - 5000", {"b": (1, 4096)}, (-4999, -904)),  # negative values are allowed: only too large ones are not
])
def test_value_range(text, bounds, expected):
    assert dimexpr.value_range(dimexpr.parse(text), bounds) == expected


# --- rendering round-trips ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "rendered"), [
    ("(b^2)^2", "(b^2)^2"),
    ("(-b)^2", "(-b)^2"),
    ("-b^2", "-b^2"),
    ("(2*b)^3", "(2*b)^3"),
    ("max(b, 1)^2", "max(b, 1)^2"),
])
def test_powers_render_so_that_they_parse_back(text, rendered):
    e = dimexpr.parse(text)
    assert str(e) == rendered
    assert dimexpr.parse(str(e)) == e


_NAMES = st.sampled_from(["b", "h", "batch"])


def _exprs() -> st.SearchStrategy[dimexpr.Expr]:
    leaves = st.one_of(st.integers(0, 1 << 62).map(lambda v: dimexpr.Expr("int", value=v)),
                       _NAMES.map(lambda v: dimexpr.Expr("var", value=v)))

    def grow(inner: st.SearchStrategy[dimexpr.Expr]) -> st.SearchStrategy[dimexpr.Expr]:
        binary = st.tuples(st.sampled_from(["+", "-", "*", "//", "%", "max", "min", "floordiv", "mod"]), inner, inner)
        return st.one_of(
            binary.map(lambda t: dimexpr.Expr(t[0], (t[1], t[2]))),
            inner.map(lambda a: dimexpr.Expr("neg", (a,))),
            inner.map(lambda a: dimexpr.Expr("non_negative", (a,))),
            st.tuples(inner, st.integers(0, 3)).map(
                lambda t: dimexpr.Expr("^", (t[0], dimexpr.Expr("int", value=t[1])))),
        )

    return st.recursive(leaves, grow, max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(_exprs())
def test_every_expression_renders_as_text_that_parses_back_to_it(e):
    text = str(e)
    try:
        parsed = dimexpr.parse(text)
    except dimexpr.DimExprError as err:  # only the documented caps may refuse a rendering
        assert "polynomial degree" in str(err) or "longer than" in str(err), (text, err)
        return
    assert parsed == e, text
    c = dimexpr.parse_constraint(f"{e} >= {e}")
    assert (c.lhs, c.rhs) == (e, e)


# --- the input contract: bounded searches, clean errors ---------------------------------------------------------------


def _fn(constraints, dims=None, shape=("b", "h")):
    return function_record({"inputs": [{"name": "x", "shape": list(shape), "dtype": "float32"}],
                            "dims": dims or {"b": {"min": 1, "max": 4096}, "h": {"min": 1, "max": 4096}},
                            "constraints": constraints})


def _unchecked(fn, shape=None, constraints=None):
    """FN with its input's shape or its constraints changed without the validator's checks."""
    if shape is not None:
        fn = model.replace(fn, inputs=(model.replace(fn.inputs[0], shape=shape),))
    return model.replace(fn, constraints=constraints) if constraints is not None else fn


def test_resolve_dims_has_a_bounded_cost():
    heavy = " + ".join(["max(b, h)*2"] * 40) + " >= 1"
    fn = _fn([heavy] * 200 + ["b >= 4000", "h >= b"])
    assert contract.resolve_dims(fn, {}) == {"b": 4000, "h": 4000}
    budget = dimexpr.Budget(100_000, "solving the dimension variables from the constraints")
    start = time.monotonic()
    message = _error(contract.resolve_dims, fn, {}, budget, kind=FormatError)
    assert message == ("solving the dimension variables from the constraints takes more than 100000 evaluation "
                       "steps: the artifact's constraints are too costly to solve. Give every dimension with --dim "
                       "NAME=VALUE.")
    assert time.monotonic() - start < 5


def test_resolve_dims_errors_are_input_errors():
    fn = _fn(["b^64 >= 1"], {"b": {"min": 1}, "h": {"min": 1}})
    assert contract.resolve_dims(fn, {}) == {"b": 1, "h": 1}
    assert _error(contract.resolve_dims, fn, {"b": 2}, kind=InputError) == (
        "the constraint b^64 >= 1 (spec constraint) cannot be evaluated with b=2, h=1: the value of 'b^64' exceeds "
        "2**62 in magnitude; give the dimensions with --dim NAME=VALUE.")
    assert _error(contract.resolve_dims, fn, {"b": 10**30}, kind=InputError) == (
        "dimension 'b' = 1000000000000000000000000000000 (given) is out of range: a dimension is from 0 to 2**62.")
    # Not a manifest the validator passes (it proves h - 2 can be 0 within the bounds): the records' readers still
    # refuse it cleanly, whoever built the record.
    div = _unchecked(_fn([]), shape=("floordiv(b, h - 2)",))
    assert _error(contract.resolve_dims, div, {"h": 2}, kind=InputError) == (
        "input 'x': shape[0] = floordiv(b, h - 2) cannot be evaluated with b=1, h=2: division by zero in "
        "floordiv(b, h - 2).")


def test_check_reports_division_by_zero_as_an_input_error():
    fn = _unchecked(_fn([]), constraints=("floordiv(b, h - 2) >= 0",))
    assert _error(contract.check, fn, [contract.ArrayInfo("x", (3, 2), "float32")], kind=InputError) == (
        "the constraint floordiv(b, h - 2) >= 0 cannot be evaluated with b = 3, h = 2: division by zero in "
        "floordiv(b, h - 2).")


# --- artifacts: refused at load with a format error -----------------------------------------------------------------


def _artifact(tmp_path: Path, name: str, edit) -> Path:
    with zipfile.ZipFile(GOLDEN) as z:
        m = json.loads(z.read("manifest.json"))
        members = {n: z.read(n) for n in z.namelist() if n != "manifest.json"}
    edit(m["functions"]["predict"])
    path = tmp_path / name
    path.write_bytes(artifact(m, members))
    return path


def _constraint(text: str, **dims):
    def edit(f):
        f["constraints"] = [text]
        f["dims"]["batch"].update(dims)
    return edit


LOAD_CASES = {
    "nested-power": (_constraint(BOMB.replace("b,", "batch,")), "constraints[0]: bad constraint: expression "
                     + repr(BOMB.replace("b,", "batch,")) + " has a polynomial degree above 64"),
    "power-within-bounds": (_constraint("batch^64 >= 1"), "constraints[0]: bad constraint: 'batch^64' can exceed "
                                                          "2**62 within the dimension bounds"),
    "max-2**62": (_constraint("2*batch >= 1", max=1 << 62), "constraints[0]: bad constraint: '2*batch' can reach "
                  "9223372036854775808, beyond 2**62, within the dimension bounds"),
    "divisor-zero": (_constraint("floordiv(batch, batch - batch) >= 0"), "constraints[0]: bad constraint: "
                     "'floordiv(batch, batch - batch)' divides by 'batch - batch', which can be 0 within the "
                     "dimension bounds"),
    "divisor-zero-shape": (lambda f: f["outputs"][0]["shape"].__setitem__(0, "mod(batch, batch - 1)"),
                           "outputs[0].shape[0]: bad dimension expression: 'mod(batch, batch - 1)' divides by "
                           "'batch - 1', which can be 0 within the dimension bounds"),
    "always-negative-shape": (lambda f: f["inputs"][0]["shape"].__setitem__(0, "batch - 5000"),
                              "inputs[0].shape[0]: bad dimension expression: 'batch - 5000' is negative for every "
                              "value within the bounds"),
    "huge-literal": (_constraint("batch <= " + "1" * 1000), "constraints[0]: bad constraint: the integer "
                     "11111111111111111111... (1000 digits) in " + repr("batch <= " + "1" * 71) + "... is larger "
                     "than 2**62"),
}


@pytest.mark.parametrize("name", LOAD_CASES)
@pytest.mark.parametrize("command", ["inspect", "call", "diff"])
def test_hostile_arithmetic_in_a_manifest_is_a_format_error(tmp_path, name, command):
    edit, message = LOAD_CASES[name]
    path = _artifact(tmp_path, f"{name}.jaxport", edit)
    argv = {"inspect": ["inspect", str(path)], "call": ["call", str(path), "--random", "--no-cache"],
            "diff": ["diff", str(GOLDEN), str(path)]}[command]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 7, result.output
    assert result.stderr.strip() == f"error[format]: {path}: manifest.json: functions['predict'].{message}"


# --- diff: decided symbolically, or "undecided", never by an unbounded search -------------------------------------


def _manifests(old_constraints, new_constraints, **bounds):
    with zipfile.ZipFile(GOLDEN) as z:
        m = json.loads(z.read("manifest.json"))
    m["functions"]["predict"]["dims"]["batch"].update(bounds)
    old, new = copy.deepcopy(m), copy.deepcopy(m)
    old["functions"]["predict"]["constraints"] = old_constraints
    new["functions"]["predict"]["constraints"] = new_constraints
    return old, new


@pytest.mark.parametrize(("old", "new", "bounds", "kind", "message"), [
    (["batch <= 100"], ["batch <= 200"], {"max": None}, "constraint_relaxed",
     "constraint 'batch <= 100' -> 'batch <= 200': every shape accepted before is still accepted (proved over the "
     "bounds)"),
    (["batch <= 200"], ["batch <= 100"], {"max": None}, "constraint_tightened",
     "constraint 'batch <= 200' -> 'batch <= 100': fewer shapes accepted (batch=101 was accepted and is now "
     "rejected)"),
    (["2*batch >= 10"], ["batch >= 5"], {"max": None}, "constraint_relaxed",
     "constraint '2*batch >= 10' -> 'batch >= 5': every shape accepted before is still accepted (proved over the "
     "bounds)"),
    (["batch == 8"], ["batch <= 8"], {"max": None}, "constraint_relaxed",
     "constraint 'batch == 8' -> 'batch <= 8': every shape accepted before is still accepted (proved over the "
     "bounds)"),
    (["batch >= 1"], ["batch^2 >= 1"], {"max": None}, "constraint_relaxed",
     "constraint 'batch >= 1' -> 'batch^2 >= 1': every shape accepted before is still accepted (proved over the "
     "bounds)"),
    # (b^2)^2 is printed with its parentheses; not linear and without a max, but a point of the old constraints
    # (checked by exact evaluation) is rejected by the new one.
    (["batch >= 1"], ["(batch^2)^2 >= 2"], {"max": None}, "constraint_tightened",
     "constraint 'batch >= 1' -> '(batch^2)^2 >= 2': fewer shapes accepted (batch=1 was accepted and is now "
     "rejected)"),
    # (b - 1)^2 >= 0 always holds, but neither intervals nor linear arithmetic prove it, and without a max nothing
    # is enumerated: undecided, with the reason.
    (["batch >= 1"], ["batch*batch >= 2*batch - 1"], {"max": None}, "constraint_undecided",
     "constraint 'batch >= 1' -> 'batch*batch >= 2*batch - 1': undecided: could not prove that every shape accepted "
     "before is still accepted (the new condition is not linear: 'batch*batch' is not linear; 'batch' has no max, "
     "so its values cannot be enumerated)"),
    (["batch >= 1"], ["batch*batch >= 2*batch - 1"], {"max": 300}, "constraint_relaxed",
     "constraint 'batch >= 1' -> 'batch*batch >= 2*batch - 1': every shape accepted before is still accepted "
     "(checked by enumerating the bounds)"),
    (["batch >= 1"], ["batch^64 >= 2"], {"max": 1}, "constraint_tightened",
     "constraint 'batch >= 1' -> 'batch^64 >= 2': fewer shapes accepted (batch=1 was accepted and is now rejected)"),
])
def test_changed_constraints_are_decided_without_a_search(old, new, bounds, kind, message):
    a, b = _manifests(old, new, **bounds)
    (change,) = diff.compare_manifests(a, b)
    assert (change.kind, change.message) == (kind, message)


@pytest.mark.slow
def test_diff_enumeration_is_bounded_by_a_budget():
    heavy = " + ".join(["max(batch, 3)*2"] * 40)
    old = [f"{heavy} >= {i}" for i in range(100)]
    new = [f"{heavy} >= {i + 1000}" for i in range(100)]
    a, b = _manifests(old, new, max=4096)
    start = time.monotonic()
    changes = diff.compare_manifests(a, b)
    assert time.monotonic() - start < 30
    # Decided (batch=3 is accepted before, rejected after) until the budget runs out; then undecided, saying why.
    assert len(changes) == 100
    assert changes[0].kind == "constraint_tightened"
    assert changes[0].message.endswith("fewer shapes accepted (batch=3 was accepted and is now rejected)")
    assert changes[-1].kind == "constraint_undecided"
    assert changes[-1].message.endswith("undecided: could not prove that every shape accepted before is still "
                                        "accepted (the search stopped: comparing the bounds and constraints takes "
                                        "more than 2000000 evaluation steps)")
    assert {c.kind for c in changes} == {"constraint_tightened", "constraint_undecided"}


def test_renamed_long_constraint_is_not_parsed_again(tmp_path):
    a, b = _manifests(["+".join(["batch"] * 100) + " >= 1"], [], max=64)
    # A renamed variable with a longer name renders past what the parser would take back; diff compares trees.
    for m, name in ((a, "batch"), (b, "n" * 200)):
        f = m["functions"]["predict"]
        f["dims"] = {name: {**f["dims"]["batch"]}}
        f["inputs"][0]["shape"][0] = name
        f["outputs"][0]["shape"][0] = name
    changes = diff.compare_manifests(a, b)
    assert ("dimension_renamed", "compatible") in {(c.kind, c.severity) for c in changes}


# --- spec and export: division that can hit zero is refused --------------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ('jaxport: 1\ndims: [b]\nargs: ["f32[floordiv(b, b - b)]"]\n',
     "spec.yaml:3: args[0].shape[0]: 'floordiv(b, b - b)' divides by 'b - b', which can be 0 within the dimension "
     "bounds. Change the expression, or the bounds under 'dims'."),
    ('jaxport: 1\ndims: {b: {max: 8}, h: {max: 8}}\nargs: ["f32[b, h]"]\nconstraints: ["mod(b, h - 1) == 0"]\n',
     "spec.yaml:4: constraints[0]: 'mod(b, h - 1)' divides by 'h - 1', which can be 0 within the dimension bounds. "
     "Change the expression, or the bounds under 'dims'."),
    ('jaxport: 1\ndims: {b: {max: 4611686018427387904}}\nargs: ["f32[2*b]"]\n',
     "spec.yaml:3: args[0].shape[0]: '2*b' can reach 9223372036854775808, beyond 2**62, within the dimension "
     "bounds. Change the expression, or the bounds under 'dims'."),
])
def test_spec_refuses_what_can_divide_by_zero_or_overflow(text, message):
    assert _error(parse_spec, text, "spec.yaml", kind=SpecError) == message


# --- class 7: numbers a user gives ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("max_artifact_size: " + "9" * 5000 + "\n", "policy.yaml:2: the number 99999999999999999999... has 5000 digits; "
                                                "a policy's numbers are at most 2**62. Shorten it."),
    ("max_artifact_size: " + "9" * 300 + "\n", "policy.yaml:2: max_artifact_size is larger than 2**62, the largest "
                                               "number a policy may give."),
    ("max_artifact_size: '" + "9" * 300 + " GB'\n", "policy.yaml:2: max_artifact_size must be a number of bytes or "
     "a size such as '100 MB' or '1 GiB' (units: B, kB, MB, GB, KiB, MiB, GiB), found '" + "9" * 79 + "...."),
    ("max_artifact_size: '9999999999 TB'\n", "policy.yaml:2: max_artifact_size is larger than 2**62, the largest "
                                             "number a policy may give."),
    ("max_age_days: " + "9" * 30 + "\n", "policy.yaml:2: max_age_days is larger than 2**62, the largest number a "
                                        "policy may give."),
    ("calling_convention: {min: 1, max: " + "9" * 30 + "}\n", "policy.yaml:2: calling_convention.max is larger than "
                                                            "2**62, the largest number a policy may give."),
    ("max_age_days: .inf\n", "policy.yaml:2: max_age_days must be a non-negative integer, found inf."),
    ("max_embedded_constant_size: true\n", "policy.yaml:2: max_embedded_constant_size must be a number of bytes or "
     "a size such as '100 MB' or '1 GiB' (units: B, kB, MB, GB, KiB, MiB, GiB), found True."),
])
def test_policy_numbers_are_bounded(text, message):
    assert _error(policy.parse_policy, "jaxport_policy: 1\n" + text, "policy.yaml", kind=PolicyFileError) == message


@pytest.mark.parametrize(("argv", "message"), [
    (["call", str(GOLDEN), "--random", "--dim", "batch=99999999999999999999999"],
     "Invalid value for '--dim': 'batch=99999999999999999999999': a dimension is at most 2**62."),
    (["call", str(GOLDEN), "--random", "--dim", "batch=" + "9" * 5000],
     "Invalid value for '--dim': 'batch=" + "9" * 54 + "': a dimension is at most 2**62."),
    (["call", str(GOLDEN), "--random", "--seed", "-5"],
     "Invalid value for '--seed': -5 is not in the range 0<=x<=18446744073709551615."),
    (["call", str(GOLDEN), "--random", "--benchmark", str(10**20)],
     "Invalid value for '--benchmark': 100000000000000000000 is not in the range 1<=x<=1000000."),
    (["verify", str(GOLDEN), "--rtol", "nan"], "Invalid value for '--rtol': nan is not in the range 0<=x<=1e+30."),
    (["verify", str(GOLDEN), "--atol", "inf"], "Invalid value for '--atol': inf is not in the range 0<=x<=1e+30."),
    (["verify", str(GOLDEN), "--seed", "-1"],
     "Invalid value for '--seed': -1 is not in the range 0<=x<=18446744073709551615."),
    (["verify", str(GOLDEN), "--dim", "batch=1," + "9" * 40],
     "Invalid value for '--dim': 'batch=1," + "9" * 40 + "': a dimension is at most 2**62."),
])
def test_odd_numbers_on_the_command_line_are_usage_errors(argv, message):
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error[usage]: {message[:-1]}. See 'jaxport {argv[0]} --help'.\n"
