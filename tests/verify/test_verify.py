"""``jaxport verify``: passes for correct artifacts at their boundary shapes, fails naming the assignment and the
output for an artifact of a subtly different function and for a wrong spec; case planning, input generation and
output comparison on their own."""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import tolerance
from jaxport.artifact import model
from jaxport.artifact.bounds import Bounds
from jaxport.errors import UsageError
from jaxport.run.values.inputs import random_inputs
from jaxport.verify import plan, spec_check
from jaxport.verify.api import verify
from tests.support import EXAMPLES

MODEL = '''
import jax.numpy as jnp


def f(x, scale, *, p):
    return {"y": jnp.tanh(x) * scale + p["b"], "s": jnp.sum(x, axis=1)}


def g(x, scale, *, p):
    """f, except from row 100 on: a change only large shapes reveal."""
    y = jnp.tanh(x) * scale + p["b"]
    late = jnp.arange(x.shape[0])[:, None] >= 100
    return {"y": jnp.where(late, y + 1e-3, y), "s": jnp.sum(x, axis=1)}


def raises(x, scale, *, p):
    raise ValueError("broken on purpose")


def ids(i, table):
    return table[i] * 2, i + 1
'''

SPEC = '''jaxport: 1
dims:
  b: {min: 1, max: 512}
args:
  - "f32[b, 8]"
  - {static: 2.0}
kwargs:
  p: {b: "f32[8]"}
'''

IDS_SPEC = '''jaxport: 1
dims:
  n: {min: 2}
args:
  - "i32[n]"
  - "f32[16, 3]"
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A model directory with f.jaxport (from f) and g.jaxport (from g, recorded entry point model.py:g)."""
    d = tmp_path_factory.mktemp("verify")
    (d / "model.py").write_text(MODEL)
    (d / "spec.yaml").write_text(SPEC)
    (d / "ids.yaml").write_text(IDS_SPEC)
    with contextlib.chdir(d):
        jaxport.export("model.py:f", "spec.yaml", output="f.jaxport")
        jaxport.export("model.py:g", "spec.yaml", output="g.jaxport")
        jaxport.export("model.py:ids", "ids.yaml", output="ids.jaxport")
    return d


@pytest.fixture(scope="module")
def passing(project):
    with contextlib.chdir(project):
        return verify("f.jaxport")


@pytest.fixture(scope="module")
def failing(project):
    """The artifact of g verified against f: they differ only at b > 100."""
    with contextlib.chdir(project):
        return verify("g.jaxport", "model.py:f")


@pytest.fixture
def in_project(project, monkeypatch):
    monkeypatch.chdir(project)
    return project


def test_correct_artifact_passes_at_its_boundary_shapes(passing):
    assert passing.passed
    assert passing.spec == "spec.yaml" and passing.spec_differences == []
    assert [(c.label, c.dims) for c in passing.cases] == [
        ("smallest valid", {"b": 1}), ("b: not a power of two", {"b": 7}), ("b: upper bound", {"b": 512})]
    for case in passing.cases:
        assert case.platform == "cpu" and case.error is None
        assert [o.name for o in case.outputs] == ["s", "y"]
        assert [o.shape for o in case.outputs] == [[case.dims["b"]], [case.dims["b"], 8]]
        assert all(o.passed and o.max_abs_error == 0.0 and o.mismatched == 0 for o in case.outputs)
    assert passing.summary() == "f.jaxport: all 3 cases match."


def test_the_artifact_is_opened_once(in_project, monkeypatch):
    import jaxport.artifact.container as container
    import jaxport.run.load as run_load

    opened: list[str] = []

    def counting(path):
        opened.append(str(path))
        return container.open_artifact(path)

    monkeypatch.setattr(run_load, "open_artifact", counting)
    report = verify("f.jaxport")
    assert report.passed and len(report.cases) == 3
    assert opened == ["f.jaxport"]


def test_subtly_different_function_fails_at_the_right_assignment_and_output(failing):
    assert not failing.passed
    assert [c.dims["b"] for c in failing.failures()] == [512]
    case = failing.failures()[0]
    assert case.label == "b: upper bound"
    s, y = case.outputs
    assert s.passed and not y.passed
    assert y.mismatched == (512 - 100) * 8
    assert y.max_abs_error == pytest.approx(1e-3, rel=1e-3)
    assert y.worst is not None and len(y.worst["index"]) == 2
    assert failing.summary().startswith(
        "g.jaxport: verification failed: 1 of 3 cases differ: g on cpu at b=512 (b: upper bound): output 'y': "
        "3296 of 4096 values differ (max abs error 0.001, tolerance 1e-06 + 1e-05*|expected|); worst at index ")


def test_cli_failure_shows_the_table_and_exits_12(in_project, run_cli):
    res = run_cli("verify", "g.jaxport", "--against", "model.py:f", "--dim", "b=3,200")
    assert res.exit_code == 12
    rows = [line for line in res.stdout.splitlines() if "│" in line]
    assert [re.split(r"\s*│\s*", r.strip())[:4] for r in rows] == [
        ["cpu", "--dim", "b=3", "s"], ["cpu", "--dim", "b=3", "y"],
        ["cpu", "--dim", "b=200", "s"], ["cpu", "--dim", "b=200", "y"]]
    assert rows[3].rstrip().endswith("FAIL 800/1600 values")
    assert "FAILED: 1 of 2 cases differ." in res.stdout
    assert res.stderr.startswith("error[verification]: g.jaxport: verification failed: 1 of 2 cases differ: g on "
                                 "cpu at b=200 (--dim): output 'y': 800 of 1600 values differ")
    assert "Traceback" not in res.stderr


def test_cli_json_has_the_report_and_no_error_object(in_project, run_cli):
    res = run_cli("verify", "g.jaxport", "--against", "model.py:f", "--dim", "b=200", "--json")
    assert res.exit_code == 12
    out = json.loads(res.stdout)
    assert out["passed"] is False and "error" not in out
    (case,) = out["cases"]
    assert case["dims"] == {"b": 200}
    assert [(o["name"], o["passed"]) for o in case["outputs"]] == [("s", True), ("y", False)]


def test_cli_passes_with_exit_0(in_project, run_cli):
    res = run_cli("verify", "f.jaxport", "--dim", "b=1,300")
    assert res.exit_code == 0, res.stderr
    assert "OK: 2 cases match." in res.stdout
    assert res.stderr == ""


def test_tolerance_options_decide(in_project):
    loose = verify("g.jaxport", "model.py:f", dims={"b": [200]}, atol=2e-3)
    assert loose.passed
    assert loose.cases[0].outputs[1].atol == 2e-3
    strict = verify("g.jaxport", "model.py:f", dims={"b": [200]}, atol=0.0, rtol=0.0)
    assert not strict.passed


WRONG_SPECS = {
    "bound": (SPEC.replace("max: 512", "max: 1024"),
              ["dims['b']: 1 <= b <= 512 in the artifact, 1 <= b <= 1024 in the spec"]),
    "dtype and shape": (SPEC.replace('"f32[b, 8]"', '"f16[b, 9]"'),
                        ["args[0]: dtype float32 in the artifact, float16 in the spec",
                         "args[0]: shape [b, 8] in the artifact, [b, 9] in the spec"]),
    "static": (SPEC.replace("static: 2.0", "static: 3.0"),
               ["args[1]: static value 2.0 in the artifact, 3.0 in the spec"]),
    "keyword": (SPEC.replace("p: {b:", "q: {b:"),
                ["kwargs['p']: in the artifact, not in the spec", "kwargs['q']: in the spec, not in the artifact"]),
    "constraint": (SPEC + "constraints: ['b <= 100']\n",
                   ["constraints: 'b <= 100' in the spec, not in the artifact"]),
    "array for static": (SPEC.replace("{static: 2.0}", '"f32[]"'),
                         ["args[1]: a static value 2.0 in the artifact, an array f32[] in the spec"]),
}


@pytest.mark.parametrize("name", WRONG_SPECS)
def test_wrong_spec_fails_with_its_differences(name, in_project, run_cli):
    text, expected = WRONG_SPECS[name]
    Path("wrong.yaml").write_text(text)
    differences = spec_check.spec_differences(jaxport.load_spec("wrong.yaml"), "f",
                                              jaxport.open_artifact("f.jaxport").model.functions["f"])
    assert differences == expected
    res = run_cli("verify", "f.jaxport", "--shapes", "wrong.yaml", "--dim", "b=2")
    assert res.exit_code == 12
    assert res.stdout.startswith("spec wrong.yaml does not describe the artifact:\n")
    assert res.stderr.startswith(f"error[verification]: f.jaxport: verification failed: the spec wrong.yaml does "
                                 f"not describe the artifact: {'; '.join(expected)}.")


def test_equivalent_spec_spellings_describe_the_artifact(in_project):
    text = SPEC.replace('"f32[b, 8]"', "{shape: [b, 8], dtype: float32}").replace("{min: 1, max: 512}", "{max: 512}")
    spec = jaxport.parse_spec(text, "same.yaml")
    f = jaxport.open_artifact("f.jaxport").model.functions["f"]
    assert spec_check.spec_differences(spec, "f", f) == []


def test_a_manifest_min_of_0_is_a_bound_as_written(in_project):
    f = model.replace(jaxport.open_artifact("f.jaxport").model.functions["f"],
                      dims={"b": model.DimVar(Bounds(0, 512))})
    assert spec_check.spec_differences(jaxport.load_spec("spec.yaml"), "f", f) == [
        "dims['b']: 0 <= b <= 512 in the artifact, 1 <= b <= 512 in the spec"]


def test_dimension_expressions_are_compared_by_value():
    eqs = spec_check._equalities(["d == 64*heads"])
    assert spec_check._same_dimension("2*h", "h + h", [])
    assert not spec_check._same_dimension("2*h", "h + 2", [])
    assert spec_check._same_dimension("d", "64*heads", eqs)
    assert not spec_check._same_dimension("b", 8, [])


def test_integer_inputs_are_in_a_safe_range(in_project):
    report = verify("ids.jaxport")
    assert report.passed
    assert [c.dims for c in report.cases] == [{"n": 2}, {"n": 7}, {"n": 4096}]
    f = jaxport.open_artifact("ids.jaxport").model.functions["ids"]
    arrays = random_inputs(f, {"n": 4096}, 3, nonnegative=True)
    assert arrays["i"].dtype == np.int32 and arrays["i"].min() >= 0 and arrays["i"].max() < 8
    assert arrays["table"].dtype == np.float32 and arrays["table"].shape == (16, 3)


def test_live_function_that_raises_fails_the_case(in_project):
    report = verify("f.jaxport", "model.py:raises", dims={"b": [2]})
    assert not report.passed
    assert report.cases[0].error == "the live function raised ValueError: broken on purpose"


def test_recorded_entry_point_missing_says_how_to_fix(in_project, run_cli, tmp_path, monkeypatch):
    shutil.copy("f.jaxport", tmp_path / "f.jaxport")
    monkeypatch.chdir(tmp_path)
    res = run_cli("verify", "f.jaxport", "--dim", "b=1")
    assert res.exit_code == 4
    assert res.stderr == ("error[entrypoint]: entry point 'model.py:f': file model.py not found. (the entry point "
                          "recorded in the artifact, relative to the current directory; give the live function with "
                          "--against FILE.py:NAME, or the directory it is relative to with --root DIR)\n")
    res = run_cli("verify", "f.jaxport", "--against", f"{in_project / 'model.py'}:f", "--dim", "b=1")
    assert res.exit_code == 0, res.stderr


def test_recorded_spec_missing_is_a_note(in_project, tmp_path, monkeypatch):
    shutil.copy("model.py", tmp_path / "model.py")
    shutil.copy("f.jaxport", tmp_path / "f.jaxport")
    monkeypatch.chdir(tmp_path)
    report = verify("f.jaxport", dims={"b": [1]})
    assert report.passed and report.spec is None
    assert report.notes == ["the spec the artifact records (spec.yaml) is not in the current directory; the "
                            "signature was not compared with a spec (give one with --shapes)"]


def test_bad_dim_values(in_project, run_cli):
    res = run_cli("verify", "f.jaxport", "--dim", "b=0")
    assert res.exit_code == 2
    assert res.stderr == "error[usage]: --dim b=0: 0 is outside the spec bound 1 <= b <= 512.\n"
    res = run_cli("verify", "f.jaxport", "--dim", "c=3")
    assert res.exit_code == 2
    assert res.stderr == "error[usage]: --dim c: the function has no dimension variable 'c'; it has b.\n"
    res = run_cli("verify", "f.jaxport", "--dim", "b=x")
    assert res.exit_code == 2
    assert "'b=x': 'x' is not an integer." in res.stderr


def test_platform_not_exported(in_project, run_cli):
    res = run_cli("verify", "f.jaxport", "--platform", "tpu")
    assert res.exit_code == 10
    assert res.stderr == ("error[platform]: f.jaxport: function 'f' was exported for cpu, not tpu; verify it on one "
                          "of those.\n")


def test_against_needs_a_function_when_there_are_several(tmp_path, monkeypatch, run_cli):
    from tests.support import REPO

    monkeypatch.chdir(tmp_path)
    jaxport.export(None, REPO / "specs" / "examples" / "functions.yaml", output="suite.jaxport")
    res = run_cli("verify", "suite.jaxport", "--against", "model.py:f")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: suite.jaxport: --against names one function, but the artifact holds 2 "
                          "(predict, encode); choose one with --function NAME.\n")


def test_inputs_and_ranges_name_one_function_of_several(tmp_path, monkeypatch, run_cli):
    from tests.support import REPO

    monkeypatch.chdir(tmp_path)
    jaxport.export(None, REPO / "specs" / "examples" / "functions.yaml", output="suite.jaxport")
    res = run_cli("verify", "suite.jaxport", "--inputs", "x.npz")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: suite.jaxport: --inputs gives the inputs of one function, but the artifact "
                          "holds 2 (predict, encode); choose one with --function NAME.\n")
    names = sorted({i["name"] for f in jaxport.open_artifact("suite.jaxport").manifest["functions"].values()
                    for i in f["inputs"]})
    res = run_cli("verify", "suite.jaxport", "--range", "tokens=0:9")
    assert res.exit_code == 2
    assert res.stderr == (f"error[usage]: --range: no function of the artifact has an input 'tokens'; their inputs "
                          f"are: {', '.join(names)}.\n")


def test_bound_weights_are_loaded_again_for_the_live_function(example_dir):
    example_dir("mlp")
    jaxport.export("model.py:apply", "spec-bound.yaml", output="bound.jaxport")
    report = verify("bound.jaxport", dims={"batch": [3]})
    assert report.passed, report.summary()
    assert report.spec == "spec-bound.yaml" and report.spec_differences == []
    assert [o.name for o in report.cases[0].outputs] == ["output"]


# --- planning, inputs and comparison on their own (no JAX) ------------------------------------------------------


def _fn(inputs, outputs=(), dims=None, constraints=()) -> model.Function:
    return model.Function("f.bin", 9, ("cpu",), tuple(model.Input(n, tuple(s), d) for n, s, d in inputs),
                          tuple(model.Output(n, tuple(s), d) for n, s, d in outputs), model.Signature(),
                          dims={v: model.DimVar(Bounds(b.get("min", 1), b.get("max")))
                                for v, b in (dims or {}).items()},
                          constraints=tuple(constraints))


def test_plan_follows_bounds_and_constraints():
    f = _fn([("x", ["batch", "2*h"], "float32")], dims={"batch": {"min": 1, "max": 4096}, "h": {"min": 2}},
            constraints=["batch <= 8 * h"])
    cases = plan.plan_cases(f)
    assert [(c.label, c.dims) for c in cases] == [
        ("smallest valid", {"batch": 1, "h": 2}),
        ("batch: not a power of two", {"batch": 7, "h": 2}),
        ("batch: upper bound", {"batch": 4096, "h": 512}),
        ("h: not a power of two", {"batch": 1, "h": 7}),
        ("h: large", {"batch": 1, "h": 4096}),
    ]


def test_plan_scales_large_cases_to_the_budget():
    f = _fn([("x", ["n", 1024], "float32")], outputs=[("y", ["n", 1024], "float32")],
            dims={"n": {"min": 1, "max": 100_000}})
    cases = plan.plan_cases(f, budget=1 << 20)
    upper = cases[-1]
    assert upper.label == "n: upper bound"
    assert plan.case_bytes(f, upper.dims) <= 1 << 20
    assert upper.dims["n"] > 64  # scaled by 3/4 steps, not to the minimum
    assert upper.note == (f"n=100000 scaled down to {upper.dims['n']}: its inputs and outputs would take more than "
                          f"1 MiB")


def test_plan_with_chosen_values_is_their_product():
    f = _fn([("x", ["a", "b"], "float32")])
    cases = plan.plan_cases(f, {"a": [1, 2], "b": [3, 4, 5]})
    assert [c.dims for c in cases] == [{"a": a, "b": b} for a in (1, 2) for b in (3, 4, 5)]
    with pytest.raises(UsageError, match=re.escape("--dim asks for 300 combinations; at most 256 are allowed.")):
        plan.plan_cases(f, {"a": list(range(1, 21)), "b": list(range(1, 16))})
    with pytest.raises(UsageError, match=re.escape("--dim a=0: 0 is outside the spec bound a >= 1.")):
        plan.plan_cases(f, {"a": [0]})


def test_plan_without_dimension_variables_is_one_case():
    assert plan.plan_cases(_fn([("x", [3, 4], "float32")])) == [plan.Case("fixed shapes", {})]


def test_compare_floats_nan_and_tolerance():
    e = np.array([1.0, np.nan, np.inf, 2.0], np.float32)
    assert tolerance.compare("o", e, e.copy()).passed
    a = np.array([1.0, np.nan, -np.inf, 2.5], np.float32)
    r = tolerance.compare("o", e, a)
    assert not r.passed and r.mismatched == 2
    assert r.max_abs_error == 0.5 and r.max_rel_error == 0.25
    assert r.worst == {"index": [2], "expected": "inf", "actual": "-inf"}
    assert tolerance.compare("o", e[[0, 3]], a[[0, 3]], atol=0.5).passed


def test_compare_all_nonfinite_is_inconclusive():
    e = np.array([np.nan, np.inf, -np.inf], np.float32)
    r = tolerance.compare("o", e, e.copy())
    assert (r.passed, r.inconclusive, r.mismatched, r.max_abs_error, r.max_rel_error) == (
        False, "every value is NaN/Inf on both sides", 0, None, None)
    assert r.describe() == "output 'o': inconclusive: every value is NaN/Inf on both sides"
    assert r.as_dict()["inconclusive"] == "every value is NaN/Inf on both sides"
    allowed = tolerance.compare("o", e, e.copy(), allow_nonfinite=True)
    assert allowed.passed and allowed.inconclusive == "every value is NaN/Inf on both sides"
    other = tolerance.compare("o", e, np.array([np.nan, np.nan, -np.inf], np.float32), allow_nonfinite=True)
    assert not other.passed and other.mismatched == 1 and other.worst == {"index": [1], "expected": "inf",
                                                                          "actual": "nan"}
    some_finite = tolerance.compare("o", np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    assert some_finite.passed and some_finite.inconclusive is None
    assert tolerance.compare("o", np.zeros(0, np.float32), np.zeros(0, np.float32)).passed


def test_compare_nan_at_other_positions_is_a_mismatch():
    e = np.array([np.nan, 1.0, 2.0, np.nan], np.float32)
    a = np.array([1.0, np.nan, 2.0, np.nan], np.float32)
    r = tolerance.compare("o", e, a, allow_nonfinite=True)
    assert (r.passed, r.inconclusive, r.mismatched) == (False, None, 2)
    assert r.max_abs_error == 0.0  # over the values finite on both sides


def test_compare_names_its_sides():
    r = tolerance.compare("o", np.zeros(3, np.float32), np.ones(3, np.float32), sides=("artifact", "reference"))
    assert r.describe().endswith("worst at index (0,): artifact 1, reference 0")
    assert r.as_dict()["sides"] == {"actual": "artifact", "expected": "reference"}
    assert r.as_dict()["scale"] is None
    shape = tolerance.compare("o", np.zeros(3), np.zeros(4), sides=("iree", "xla"))
    assert shape.problem == "shape (4,) from IREE, (3,) from XLA"


def test_compare_integers_exactly_and_structure():
    e = np.array([1, 2, 3], np.int32)
    r = tolerance.compare("i", e, np.array([1, 2, 4], np.int32))
    assert (r.passed, r.mismatched, r.atol, r.rtol, r.worst) == (False, 1, 0.0, 0.0,
                                                                 {"index": [2], "expected": 3, "actual": 4})
    assert tolerance.compare("i", e, np.array([1, 2, 3, 4], np.int32)).problem == (
        "shape (4,) from the artifact, (3,) from the live function")
    assert tolerance.compare("i", e, e.astype(np.int64)).problem == (
        "dtype int64 from the artifact, int32 from the live function")
    b = tolerance.compare("b", np.array([True, False]), np.array([True, True]))
    assert (b.passed, b.mismatched) == (False, 1)


def test_default_tolerances_by_dtype():
    assert tolerance.tolerance("float32") == (1e-6, 1e-5)
    assert tolerance.tolerance("bfloat16") == (1e-2, 1e-2)
    assert tolerance.tolerance("int8") == (0.0, 0.0)
    assert tolerance.tolerance("float32", rtol=0.1) == (1e-6, 0.1)
    assert math.isclose(tolerance.tolerance("float64")[1], 1e-9)


def test_example_pytree_verifies(example_dir):
    """The bundled pytree example: static argument, kwargs dict, 2*h dimension and a constraint."""
    example_dir("pytree")
    jaxport.export("model.py:encode", "spec.yaml", output="enc.jaxport")
    report = verify("enc.jaxport", dims={"batch": [1, 9]})
    assert report.passed, report.summary()
    assert [c.dims for c in report.cases] == [{"batch": 1, "h": 2}, {"batch": 9, "h": 2}]
    assert EXAMPLES.is_dir()
