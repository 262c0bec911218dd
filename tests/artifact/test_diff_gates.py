"""``diff`` as a CI gate that neither cries wolf nor guesses: bound and constraint changes decided exactly (linear
integer arithmetic, checked against brute force), "undecided" reported as such and failing ``--fail-on breaking``
with a message that says so, ``--rename`` for renamed functions, and weights that round-trip through ``extract``
with a weights-only change reported as one compatible data change. Real exports through the real command."""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import dimexpr
from jaxport.artifact import diff
from jaxport.artifact.bounds import Bounds
from jaxport.artifact.container import open_artifact
from jaxport.artifact.diff.implication import IMPLIED, REFUTED, UNDECIDED, System, implies
from jaxport.artifact.diff.linear_integer import GaveUp, row, solve
from tests.support import EXAMPLES

STEPS = 2_000_000


def _verdict(bounds: dict[str, tuple[int, int | None]], old: list[str], claim: str, steps: int = STEPS):
    system = System({v: Bounds(*b) for v, b in bounds.items()}, [dimexpr.parse_constraint(c) for c in old])
    return implies(system, dimexpr.parse_constraint(claim), dimexpr.Budget(steps, "comparing the constraints"))


def _accepted(bounds, old, env) -> bool:
    return all(Bounds(*bounds[v]).holds(env[v]) for v in env if v in bounds) and all(
        dimexpr.parse_constraint(c).holds(env) for c in old if dimexpr.parse_constraint(c).variables() <= set(env))


# --- the decision procedure ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("hi", [4096, 1 << 40, None])
def test_relaxing_a_constraint_is_proved_whatever_the_bounds(hi):
    """d <= 2*n -> d <= 4*n: more than 100 000 assignments (the old enumeration's limit), or none to count."""
    v = _verdict({"d": (1, hi), "n": (1, hi)}, ["d <= 2*n"], "d <= 4*n")
    assert (v.status, v.how, v.example) == (IMPLIED, "proved", None)


@pytest.mark.parametrize("hi", [4096, None])
def test_tightening_gives_a_counterexample_checked_by_evaluation(hi):
    bounds = {"d": (1, hi), "n": (1, hi)}
    v = _verdict(bounds, ["d <= 4*n"], "d <= 2*n")
    assert (v.status, v.example) == (REFUTED, {"d": 3, "n": 1})
    assert _accepted(bounds, ["d <= 4*n"], v.example)
    assert not dimexpr.parse_constraint("d <= 2*n").holds(v.example)


@pytest.mark.parametrize(("old", "claim", "status", "example"), [
    (["a == 2*b"], "mod(a, 2) == 0", IMPLIED, None),
    (["a == 2*b"], "floordiv(a, 2) == b", IMPLIED, None),
    (["a == 2*b + 1"], "mod(a, 2) == 0", REFUTED, {"a": 3, "b": 1}),
    (["a <= b", "a >= b"], "a == b", IMPLIED, None),
    (["a <= b"], "a == b", REFUTED, {"a": 1, "b": 2}),
    (["a == b"], "a <= b", IMPLIED, None),
    (["2*a == 2*b + 1"], "a >= 1000", IMPLIED, None),  # no integer solution at all: accepts nothing
    (["a == 2*b"], "mod(a, 4) == 0", REFUTED, {"a": 2, "b": 1}),
    (["a // 3 == b"], "a <= 3*b + 2", IMPLIED, None),
    (["a // 3 == b"], "a <= 3*b + 1", REFUTED, {"a": 5, "b": 1}),
])
def test_equalities_floordiv_and_mod(old, claim, status, example):
    v = _verdict({"a": (1, None), "b": (1, None)}, old, claim)
    assert (v.status, v.example) == (status, example)


@pytest.mark.parametrize(("old", "claim", "status", "example"), [
    (["a + b <= c", "c <= 10"], "a <= 9", IMPLIED, None),
    (["a + b <= c", "c <= 10"], "a <= 8", REFUTED, {"a": 9, "b": 1, "c": 10}),
    (["a + b <= c", "c <= 10"], "a + b + c <= 20", IMPLIED, None),
    (["a + b <= c", "c <= 10"], "a + b + c <= 19", REFUTED, {"a": 9, "b": 1, "c": 10}),
    (["a >= b"], "max(a, b) == a", IMPLIED, None),
    (["a >= b"], "min(a, b) == a", REFUTED, {"a": 2, "b": 1}),
    (["a >= b - 3"], "max(a, b) <= a + 2", REFUTED, {"a": 1, "b": 4}),
    (["max(a, b) <= 7"], "a + b <= 14", IMPLIED, None),
    (["non_negative(a - b) == 0"], "a <= b", IMPLIED, None),
    # Pugh's example: rationally feasible, no integer point; the old constraints accept nothing.
    (["27 <= 11*a + 13*b", "11*a + 13*b <= 45", "-10 <= 7*a - 9*b", "7*a - 9*b <= 4"], "a >= 1000", IMPLIED, None),
])
def test_several_variables_and_max_min(old, claim, status, example):
    v = _verdict({"a": (1, None), "b": (1, None), "c": (1, None)}, old, claim)
    assert (v.status, v.example) == (status, example)


def test_bounds_only():
    bounds = {"d": (1, 4096)}
    assert _verdict(bounds, [], "d <= 4096").status == IMPLIED
    v = _verdict(bounds, [], "d <= 2048")
    assert (v.status, v.example) == (REFUTED, {"d": 2049})
    v = _verdict({"d": (1, 4096), "n": (1, 1024)}, ["d <= 2*n"], "d <= 2048")  # the constraint implies the bound
    assert (v.status, v.how) == (IMPLIED, "proved")
    v = _verdict({"d": (1, 4096), "n": (1, 1024)}, ["d <= 2*n"], "d <= 2047")
    assert (v.status, v.example) == (REFUTED, {"d": 2048, "n": 1024})


@pytest.mark.parametrize(("bounds", "old", "claim", "reason"), [
    ({"a": (1, None)}, ["a >= 1"], "a*a >= 2*a - 1",
     "the new condition is not linear: 'a*a' is not linear; 'a' has no max, so its values cannot be enumerated"),
    ({"a": (1, 4096), "b": (1, 4096)}, ["a <= 2*b"], "a*a <= 4*b*b",
     "the new condition is not linear: 'a*a' is not linear; the bounds allow more than 100000 assignments to "
     "enumerate"),
    ({"a": (1, None), "b": (1, None)}, ["a*b <= 100"], "a <= 100",
     "the old constraint 'a*b <= 100' is left out of the linear arithmetic ('a*b' is not linear); 'a' has no max, so "
     "its values cannot be enumerated"),
    ({"a": (1, None), "b": (1, None)}, ["floordiv(a, b) <= 2"], "a <= 3*b",
     "the old constraint 'floordiv(a, b) <= 2' is left out of the linear arithmetic ('floordiv(a, b)' divides by a "
     "variable); 'a' has no max, so its values cannot be enumerated"),
])
def test_what_is_not_linear_is_undecided_not_guessed(bounds, old, claim, reason):
    v = _verdict(bounds, old, claim)
    assert (v.status, v.example, v.reason) == (UNDECIDED, None, reason)


@pytest.mark.parametrize(("old", "claim", "status", "how"), [
    (["a <= 10"], "a*a <= 100", IMPLIED, "proved"),  # the bounds narrowed by a <= 10, then intervals
    (["a <= 10"], "a*a <= 99", REFUTED, "enumerated"),
    (["a <= 300", "b <= 300", "a + b <= 400"], "a*b <= 40000", IMPLIED, "enumerated"),
    (["a >= 1"], "(a^2)^2 >= 2", REFUTED, "found"),  # a point of the old constraints, rejected by the new one
])
def test_what_is_not_linear_is_decided_when_it_can_be(old, claim, status, how):
    v = _verdict({"a": (1, None), "b": (1, None)}, old, claim)
    assert (v.status, v.how) == (status, how)
    if status == REFUTED:
        assert _accepted({"a": (1, None), "b": (1, None)}, old, v.example)
        assert not dimexpr.parse_constraint(claim).holds(v.example)


def test_the_budget_ends_the_search_as_undecided():
    v = _verdict({"d": (1, None), "n": (1, None)}, ["d <= 4*n"], "d <= 2*n", steps=5)
    assert (v.status, v.reason) == (UNDECIDED, "the search stopped: comparing the constraints takes more than 5 "
                                               "evaluation steps")


def test_the_solver_is_exact_over_the_integers():
    budget = dimexpr.Budget(STEPS, "test")
    # 3x - 5y == 1 with x, y >= 1
    x = solve([row({"x": 3, "y": -5}, -1), row({"x": -3, "y": 5}, 1), row({"x": -1}, 1), row({"y": -1}, 1)], budget)
    assert x is not None and 3 * x["x"] - 5 * x["y"] == 1 and x["x"] >= 1 and x["y"] >= 1
    assert solve([row({"x": -3}, 1), row({"x": 3}, -2)], budget) is None  # 1 <= 3x <= 2
    assert solve([row({"x": 2, "y": -2}, 1), row({"x": -2, "y": 2}, -1)], budget) is None  # 2x == 2y + 1
    with pytest.raises(GaveUp, match="takes more than 3 evaluation steps"):
        solve([row({"x": 3, "y": 5}, -1), row({"x": -3, "y": -5}, 1)], dimexpr.Budget(3, "test"))


def test_verdicts_agree_with_brute_force():
    """Random small systems (linear, floordiv/mod by constants, max/min) against enumerating every assignment: the
    procedure decides each, and is never wrong."""
    rng = random.Random(0)
    terms = ["a", "b", "c", "2*a", "3*b", "a - c", "floordiv(a, 2)", "mod(b, 3)", "max(a, c)", "min(b, 2*c)"]
    ops = ["<=", ">=", "=="]

    def constraint() -> str:
        lhs = " + ".join(rng.sample(terms, rng.randint(1, 2)))
        rhs = rng.choice([str(rng.randint(0, 9)), rng.choice(terms), f"{rng.choice(terms)} + {rng.randint(-3, 3)}"])
        return f"{lhs} {rng.choice(ops)} {rhs}"

    decided = 0
    for _ in range(300):
        bounds = {v: (rng.randint(0, 2), rng.randint(3, 7)) for v in "abc"}
        old = [constraint() for _ in range(rng.randint(0, 2))]
        claim = constraint()
        v = _verdict(bounds, old, claim)
        boxes = [range(lo, hi + 1) for lo, hi in bounds.values()]
        parsed_claim = dimexpr.parse_constraint(claim)
        truth = all(parsed_claim.holds(dict(zip("abc", vals)))
                    for vals in itertools.product(*boxes) if _accepted(bounds, old, dict(zip("abc", vals))))
        assert v.status != UNDECIDED, (bounds, old, claim, v)
        assert (v.status == IMPLIED) == truth, (bounds, old, claim, v)
        if v.status == REFUTED:  # the example names the claim's variables and those tied to them
            assert _accepted(bounds, old, v.example) and not parsed_claim.holds(v.example), (bounds, old, claim, v)
        decided += 1
    assert decided == 300


# --- the command, on real exports -------------------------------------------------------------------------------

MODEL = "def f(x):\n    return x.sum(axis=0)\n"
SPEC = 'jaxport: 1\ndims:\n  n: {max: 4096}\n  d: {max: 4096}\nconstraints: ["d <= 2*n"]\nargs: ["f32[n, d]"]\n'


class Exports:
    """Each (model, spec, options) exported once, from its own directory (same file names, so only what differs
    shows in a diff)."""

    def __init__(self, root: Path):
        self.root, self.cache, self.count = root, {}, itertools.count()

    def __call__(self, spec: str = SPEC, model: str = MODEL, entry: str = "model.py:f", **options) -> Path:
        key = (spec, model, entry, json.dumps(options, sort_keys=True))
        if key not in self.cache:
            d = self.root / f"e{next(self.count)}"
            d.mkdir()
            (d / "model.py").write_text(model)
            (d / "spec.yaml").write_text(spec)
            with contextlib.chdir(d):
                self.cache[key] = d / jaxport.export(entry, "spec.yaml", output="a.jaxport", **options).path
        return self.cache[key]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    return Exports(tmp_path_factory.mktemp("gates"))


def _changes(res) -> list[tuple[str, str, str]]:
    return [(c["severity"], c["kind"], c["message"]) for c in json.loads(res.stdout)["changes"]
            if c["kind"] != "program_changed"]


def test_cli_relaxed_constraint_passes_the_gate(exports, run_cli):
    old, new = exports(), exports(SPEC.replace("d <= 2*n", "d <= 4*n"))
    res = run_cli("diff", old, new, "--fail-on", "breaking", "--json")
    assert (res.exit_code, res.stderr) == (0, "")
    assert _changes(res) == [("compatible", "constraint_relaxed", "constraint 'd <= 2*n' -> 'd <= 4*n': every shape "
                                                                  "accepted before is still accepted (proved over the "
                                                                  "bounds)")]
    out = json.loads(res.stdout)
    assert (out["breaking"], out["undecided"], out["failed"]) == (0, 0, False)


def test_cli_tightened_constraint_fails_with_a_counterexample(exports, run_cli):
    old, new = exports(SPEC.replace("d <= 2*n", "d <= 4*n")), exports()
    res = run_cli("diff", old, new, "--fail-on", "breaking")
    assert res.exit_code == 13
    assert "constraint_tightened" in res.stdout
    assert res.stderr == (f"error[diff]: {new} differs from {old}: 1 breaking, 1 compatible change. Failing on "
                          f"breaking changes (--fail-on breaking).\n")
    res = run_cli("diff", old, new, "--json")
    assert _changes(res) == [("breaking", "constraint_tightened", "constraint 'd <= 4*n' -> 'd <= 2*n': fewer shapes "
                                                                  "accepted (d=3, n=1 was accepted and is now "
                                                                  "rejected)")]
    x = np.ones((1, 3), np.float32)  # d=3, n=1: the counterexample runs with the old artifact, not with the new one
    np.testing.assert_array_equal(jaxport.load(old)(x), np.ones(3, np.float32))
    with pytest.raises(jaxport.errors.InputError):
        jaxport.load(new)(x)


def test_cli_undecided_fails_the_gate_and_says_it_is_undecided(exports, run_cli):
    old, new = exports(), exports(SPEC.replace("d <= 2*n", "d*d <= 4*n*n"))
    res = run_cli("diff", old, new, "--fail-on", "breaking")
    assert res.exit_code == 13
    assert res.stderr == (f"error[diff]: {new} differs from {old}: 0 breaking, 1 undecided, 1 compatible change. "
                          f"Failing on breaking changes (--fail-on breaking); the 1 undecided change counts as "
                          f"breaking: not proven breaking, only not proven compatible.\n")
    assert "undecided" in res.stdout and "constraint_undecided" in res.stdout
    res = run_cli("diff", old, new, "--json")
    assert res.exit_code == 0
    assert _changes(res) == [("undecided", "constraint_undecided", "constraint 'd <= 2*n' -> 'd*d <= 4*n*n': "
                              "undecided: could not prove that every shape accepted before is still accepted (the new "
                              "condition is not linear: 'd*d' is not linear; the bounds allow more than 100000 "
                              "assignments to enumerate)")]
    out = json.loads(res.stdout)
    assert (out["breaking"], out["undecided"], out["compatible"]) == (0, 1, 1)
    assert run_cli("diff", old, new, "--fail-on", "never").exit_code == 0


def test_cli_bounds_and_constraints_together(exports, run_cli):
    """A max lowered to what the old constraint already implied accepts every old shape; lowered further, it does
    not, and the counterexample satisfies the old constraint."""
    base = exports(SPEC.replace("n: {max: 4096}", "n: {max: 1024}"))
    implied = exports(SPEC.replace("n: {max: 4096}", "n: {max: 1024}").replace("d: {max: 4096}", "d: {max: 2048}"))
    tighter = exports(SPEC.replace("n: {max: 4096}", "n: {max: 1024}").replace("d: {max: 4096}", "d: {max: 2000}"))
    res = run_cli("diff", base, implied, "--fail-on", "breaking", "--json")
    assert res.exit_code == 0, res.stdout
    assert _changes(res) == [("compatible", "bound_implied", "dimension 'd': 1 <= d <= 4096 -> 1 <= d <= 2048: every "
                              "shape accepted before is still accepted (the old constraints imply the new bounds; "
                              "proved over the bounds)")]
    res = run_cli("diff", base, tighter, "--fail-on", "breaking", "--json")
    assert res.exit_code == 13
    assert _changes(res) == [("breaking", "bound_tightened", "dimension 'd': 1 <= d <= 4096 -> 1 <= d <= 2000 (fewer "
                              "shapes accepted: d=2001, n=1001 was accepted and is now rejected)")]
    # relaxing a bound while adding a constraint that only cuts the new shapes: nothing old is rejected
    both = exports(SPEC.replace("n: {max: 4096}", "n: {max: 1024}").replace("d: {max: 4096}", "d: {max: 8192}")
                   .replace('["d <= 2*n"]', '["d <= 2*n", "d <= 2048"]'))
    res = run_cli("diff", base, both, "--fail-on", "breaking", "--json")
    assert res.exit_code == 0, res.stdout
    assert [k for _, k, _ in _changes(res)] == ["bound_relaxed", "constraint_implied"]


# --- --rename ---------------------------------------------------------------------------------------------------

RENAMED = "def f_v2(x):\n    return x.sum(axis=0)\n"


def test_cli_rename_compares_the_renamed_function(exports, run_cli):
    old, new = exports(), exports(model=RENAMED, entry="model.py:f_v2")
    res = run_cli("diff", old, new, "--fail-on", "breaking", "--json")
    assert res.exit_code == 13
    assert [(s, k) for s, k, _ in _changes(res)] == [
        ("compatible", "metadata_changed"), ("breaking", "function_removed"), ("compatible", "function_added")]
    res = run_cli("diff", old, new, "--rename", "f=f_v2", "--fail-on", "breaking", "--json")
    assert (res.exit_code, res.stderr) == (0, "")
    out = json.loads(res.stdout)
    assert [(c["severity"], c["kind"], c["function"]) for c in out["changes"]
            if c["kind"] not in ("program_changed",)] == [
        ("compatible", "metadata_changed", None), ("compatible", "function_renamed", "f_v2"),
        ("compatible", "entrypoint_changed", "f_v2")]
    assert out["changes"][1]["message"] == ("function 'f' renamed to 'f_v2' (paired by --rename; callers of a "
                                            "one-function artifact do not name it)")
    assert list(out["programs"]) == ["f_v2"]
    assert out["programs"]["f_v2"]["status"] in ("identical", "changed")


def test_cli_rename_reports_the_signature_changes_of_the_pair(exports, run_cli):
    old = exports()
    new = exports(SPEC.replace("f32[n, d]", "f16[n, d]").replace("d <= 2*n", "d <= n"), model=RENAMED,
                  entry="model.py:f_v2")
    res = run_cli("diff", old, new, "--rename", "f=f_v2", "--fail-on", "breaking", "--json")
    assert res.exit_code == 13
    kinds = {(s, k) for s, k, _ in _changes(res)}
    assert {("breaking", "input_dtype_changed"), ("breaking", "output_dtype_changed"),
            ("breaking", "constraint_tightened")} <= kinds
    assert all(c["function"] in (None, "f_v2") for c in json.loads(res.stdout)["changes"])


def test_rename_between_several_functions_is_breaking(exports):
    several = ('jaxport: 1\ndims: [b]\nfunctions:\n  f: {entrypoint: model.py:f, args: ["f32[b]"]}\n'
               '  g: {entrypoint: model.py:g, args: ["f32[b]"]}\n')
    model = "def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x * 2\n\n\ndef h(x):\n    return x + 1\n"
    old = exports(several, model, entry=None)
    new = exports(several.replace("  f: {entrypoint: model.py:f", "  h: {entrypoint: model.py:h"), model, entry=None)
    report = diff.diff(old, new, renames={"f": "h"})
    assert [(c.severity, c.kind, c.message) for c in report.changes if c.kind == "function_renamed"] == [
        ("breaking", "function_renamed", "function 'f' renamed to 'h' (paired by --rename): callers that select it "
                                         "by name break")]
    assert set(report.programs) == {"h", "g"}


@pytest.mark.parametrize(("args", "message"), [
    (["--rename", "f"], "--rename expects OLD=NEW (two function names), got 'f'."),
    (["--rename", "=f_v2"], "--rename expects OLD=NEW (two function names), got '=f_v2'."),
    (["--rename", "f=a", "--rename", "f=b"], "--rename f=...: function 'f' is renamed twice; give it once."),
])
def test_cli_rename_usage_errors(exports, run_cli, args, message):
    res = run_cli("diff", exports(), exports(model=RENAMED, entry="model.py:f_v2"), *args)
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {message[:-1]}. See 'jaxport diff --help'.\n")


def test_cli_rename_names_must_exist(exports, run_cli):
    old, new = exports(), exports(model=RENAMED, entry="model.py:f_v2")
    res = run_cli("diff", old, new, "--rename", "g=f_v2")
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: --rename g=f_v2: {old} has no function 'g' (its "
                                              f"functions: f).\n")
    res = run_cli("diff", old, new, "--rename", "f=f_v3")
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: --rename f=f_v3: {new} has no function 'f_v3' (its "
                                              f"functions: f_v2).\n")
    with pytest.raises(jaxport.errors.UsageError) as e:
        diff.function_pairs(["f", "g"], ["h"], {"f": "h", "g": "h"})
    assert str(e.value) == "--rename: f, g are all renamed to 'h'; pair each function once."


# --- weights: extract, bind again, diff ----------------------------------------------------------------------------


@pytest.fixture
def nnx_dir(tmp_path, monkeypatch):
    d = tmp_path / "flax_nnx"
    shutil.copytree(EXAMPLES / "flax_nnx", d)
    monkeypatch.chdir(d)
    return d


@pytest.mark.slow
def test_extracted_weights_bind_again_and_diff_finds_no_breaking_change(nnx_dir, run_cli):
    """The issue's case: state bound from params.npz, extracted, bound again: no 'state/state/...' and no breaking
    lines for an identical program."""
    assert run_cli("export", "model.py:apply", "-s", "spec-npz.yaml", "-o", "one.jaxport").exit_code == 0
    res = run_cli("extract", "one.jaxport", "--weights", "w.npz")
    assert res.exit_code == 0, res.stderr
    with np.load("w.npz") as z:
        assert sorted(z.files) == ["hidden/bias", "hidden/kernel", "norm/bias", "norm/scale", "out/bias", "out/kernel"]
    res = run_cli("export", "model.py:apply", "-s", "spec-npz.yaml", "--bind", "state=w.npz", "-o", "two.jaxport")
    assert res.exit_code == 0, res.stderr
    with open_artifact(nnx_dir / "one.jaxport") as a, open_artifact(nnx_dir / "two.jaxport") as b:
        assert b.manifest["weights"]["tensors"] == a.manifest["weights"]["tensors"]
    res = run_cli("diff", "one.jaxport", "two.jaxport", "--fail-on", "breaking", "--json")
    assert res.exit_code == 0, res.stdout
    out = json.loads(res.stdout)
    assert [(c["severity"], c["kind"]) for c in out["changes"]] == [("compatible", "bound_source_changed")]
    assert out["programs"]["apply"]["status"] == "identical"
    x = np.linspace(-1, 1, 3 * 16, dtype=np.float32).reshape(3, 16)
    np.testing.assert_array_equal(jaxport.load(nnx_dir / "two.jaxport")(x), jaxport.load(nnx_dir / "one.jaxport")(x))


def test_a_weights_only_change_is_one_compatible_data_change(nnx_dir, run_cli):
    assert run_cli("export", "model.py:apply", "-s", "spec-npz.yaml", "-o", "one.jaxport").exit_code == 0
    assert run_cli("extract", "one.jaxport", "--weights", "w.npz").exit_code == 0
    with np.load("w.npz") as z:
        tuned = {k: z[k] * (1.5 if k.endswith("kernel") else 1) for k in z.files}
    np.savez("tuned.npz", **tuned)  # a fine-tuned checkpoint, saved by the user's own code
    res = run_cli("export", "model.py:apply", "-s", "spec-npz.yaml", "--bind", "state=tuned.npz", "-o", "two.jaxport")
    assert res.exit_code == 0, res.stderr
    res = run_cli("diff", "one.jaxport", "two.jaxport", "--fail-on", "breaking")
    assert res.exit_code == 0
    lines = [line for line in res.stdout.splitlines() if "weights" in line]
    assert len(lines) == 2 and "bound_source_changed" in lines[1]
    res = run_cli("diff", "one.jaxport", "two.jaxport", "--json")
    (change,) = [c for c in json.loads(res.stdout)["changes"] if c["kind"] == "weights_changed"]
    assert (change["severity"], change["path"], change["message"]) == (
        "compatible", "weights.tensors", "weights: 2 of 6 bound tensors have new values, with the same names, shapes "
        "and dtypes (a data change)")
    assert sorted(change["new"]) == ["state/hidden/kernel", "state/out/kernel"]
    with open_artifact(nnx_dir / "two.jaxport") as art:
        assert {k: t["sha256"] for k, t in art.manifest["weights"]["tensors"].items() if k in change["new"]} == \
            change["new"]
    assert json.loads(res.stdout)["programs"]["apply"]["status"] == "identical"
