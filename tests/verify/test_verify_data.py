"""``jaxport verify`` with real data: golden inputs and reference outputs (``--inputs``, ``--expect``), outputs that
are NaN everywhere (inconclusive) or NaN at different places, value ranges of random inputs (``--range`` and a
spec's ``range:``), sharded artifacts on simulated devices (``--host-devices``), IREE against XLA with the tolerances
for two compilers, and imported StableHLO modules checked against reference outputs or a Python function. Values are
compared with the functions run directly."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import tolerance
from jaxport.run.values.inputs import random_inputs
from jaxport.verify import runner
from jaxport.verify.api import verify
from tests.support import EXAMPLES, REPO

MODEL = '''
import jax.numpy as jnp


def f(x, w):
    return {"y": jnp.tanh(x @ w), "s": jnp.sum(x, axis=1)}


def f_changed(x, w):
    return {"y": jnp.tanh(x @ w) + 1e-3, "s": jnp.sum(x, axis=1)}


def nan_log(x):
    return jnp.log(-jnp.abs(x) - 1)


def nan_sqrt(x):
    return jnp.sqrt(-jnp.abs(x) - 1) * 2


def holes(x):
    return jnp.where(x > 0, jnp.nan, x)


def other_holes(x):
    return jnp.where(x > 0.5, jnp.nan, x)


def log_above_5(x):
    return jnp.log(x - 5.0)


def log_ids(tok):
    return jnp.log((tok - 1000).astype(jnp.float32))
'''

SPEC = '''jaxport: 1
dims:
  b: {max: 64}
args: ["f32[b, 4]", "f32[4, 3]"]
'''
VECTOR = 'jaxport: 1\nargs: ["f32[16]"]\n'
IDS = 'jaxport: 1\nargs: ["i32[8]"]\n'
RANGED = 'jaxport: 1\nargs: [{shape: "16", dtype: f32, range: [5.5, 6]}]\n'


def _valid(report: dict) -> dict:
    """``report`` after checking it against verify's JSON schema."""
    import jsonschema

    schema = json.loads((REPO / "specs" / "schemas" / "cli" / "verify.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    return report


def _f(x, w):
    """``f`` in numpy: what the artifacts' outputs are checked against."""
    return {"y": np.tanh(x @ w), "s": x.sum(axis=1)}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("verify_data")
    (d / "model.py").write_text(MODEL)
    for name, text in (("spec.yaml", SPEC), ("vector.yaml", VECTOR), ("ids.yaml", IDS), ("ranged.yaml", RANGED)):
        (d / name).write_text(text)
    with contextlib.chdir(d):
        jaxport.export("model.py:f", "spec.yaml", output="f.jaxport")
        jaxport.export("model.py:f_changed", "spec.yaml", output="changed.jaxport")
        for fn in ("nan_log", "holes", "log_above_5"):
            jaxport.export(f"model.py:{fn}", "vector.yaml", output=f"{fn}.jaxport")
        jaxport.export("model.py:log_ids", "ids.yaml", output="log_ids.jaxport")
        jaxport.export("model.py:log_above_5", "ranged.yaml", output="ranged.jaxport")
    return d


@pytest.fixture
def in_project(project, monkeypatch):
    monkeypatch.chdir(project)
    return project


@pytest.fixture
def golden(in_project, run_cli):
    """Golden data written by ``call``: the random inputs it used and its outputs."""
    res = run_cli("call", "f.jaxport", "--random", "--dim", "b=5", "--seed", "3", "--save-inputs", "in.npz",
                  "-o", "out.npz")
    assert res.exit_code == 0, res.stderr
    return _arrays("in.npz"), _arrays("out.npz")


def _arrays(path: str) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z}


# --- golden data: --inputs and --expect ----------------------------------------------------------------------------


def test_golden_data_round_trip_passes(golden, run_cli):
    inputs, outputs = golden
    assert sorted(inputs) == ["w", "x"] and inputs["x"].shape == (5, 4)
    direct = _f(inputs["x"], inputs["w"])
    assert sorted(outputs) == ["s", "y"]
    for name in ("s", "y"):
        np.testing.assert_allclose(outputs[name], direct[name], rtol=1e-5, atol=1e-6)
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--expect", "out.npz", "--json")
    assert res.exit_code == 0, res.stderr
    report = _valid(json.loads(res.stdout))
    assert report["passed"] is True
    assert report["functions"] == [{"name": "f", "against": "out.npz", "actual": "artifact", "sides": ["reference"],
                                    "platforms": ["cpu"], "cases": 1}]
    (case,) = report["cases"]
    assert (case["label"], case["dims"]) == ("--inputs", {"b": 5})
    assert [(o["name"], o["max_abs_error"], o["sides"]) for o in case["outputs"]] == [
        ("s", 0.0, {"actual": "artifact", "expected": "reference"}),
        ("y", 0.0, {"actual": "artifact", "expected": "reference"})]
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--expect", "out.npz")
    assert res.exit_code == 0 and "f against out.npz on cpu" in res.stdout and "OK: 1 case matches." in res.stdout


def test_golden_data_catches_a_changed_function(golden, run_cli):
    res = run_cli("verify", "changed.jaxport", "--inputs", "in.npz", "--expect", "out.npz")
    assert res.exit_code == 12
    assert re.match(r"error\[verification\]: changed\.jaxport: verification failed: 1 of 1 case differs: f_changed on "
                    r"cpu at b=5 \(--inputs\): output 'y': 15 of 15 values differ \(max abs error 0\.001, tolerance "
                    r"1e-06 \+ 1e-05\*\|expected\|\); worst at index \(\d, \d\): artifact \S+, reference \S+\.\n$",
                    res.stderr), res.stderr
    assert "'s'" not in res.stderr  # the unchanged output passes


def test_golden_data_catches_a_perturbed_reference(golden, run_cli):
    inputs, outputs = golden
    y = outputs["y"].copy()
    y[2, 1] += 0.01
    np.savez("perturbed.npz", y=y, s=outputs["s"])
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--expect", "perturbed.npz")
    assert res.exit_code == 12
    direct = _f(inputs["x"], inputs["w"])["y"][2, 1]
    assert f"output 'y': 1 of 15 values differ (max abs error 0.01, tolerance 1e-06 + 1e-05*|expected|); worst at " \
           f"index (2, 1): artifact {direct:.6g}, reference {y[2, 1]:.6g}." in res.stderr
    assert "FAILED: 1 of 1 case differs." in res.stdout
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--expect", "perturbed.npz", "--atol", "0.02")
    assert res.exit_code == 0 and "0.02 + 1e-05·|x|" in res.stdout  # the tolerance options apply to --expect


def test_expect_and_against_compare_with_both(golden, run_cli):
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--expect", "out.npz", "--against", "model.py:f",
                  "--json")
    assert res.exit_code == 0, res.stderr
    report = _valid(json.loads(res.stdout))
    assert report["functions"][0]["sides"] == ["live", "reference"]
    assert report["functions"][0]["against"] == "model.py:f and out.npz"
    assert [(o["name"], o["sides"]["expected"]) for o in report["cases"][0]["outputs"]] == [
        ("s", "live"), ("y", "live"), ("s", "reference"), ("y", "reference")]
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--expect", "out.npz", "--against", "model.py:f")
    assert "y vs reference" in res.stdout and "y vs live" in res.stdout


def test_inputs_alone_verify_against_the_live_function(golden, run_cli):
    res = run_cli("verify", "changed.jaxport", "--inputs", "x=in.npz", "--json")  # not a .npy: refused
    assert res.exit_code == 9
    np.save("x.npy", golden[0]["x"])
    np.save("w.npy", golden[0]["w"])
    report = verify("changed.jaxport", "model.py:f", inputs=["x.npy", "w.npy"])
    assert not report.passed
    assert [(c.label, c.dims) for c in report.cases] == [("--inputs", {"b": 5})]
    assert [o.passed for o in report.cases[0].outputs] == [True, False]
    by_name = verify("f.jaxport", inputs=golden[0], expect="out.npz")
    assert by_name.passed and by_name.cases[0].dims == {"b": 5}


def test_reference_with_missing_and_extra_outputs(golden, run_cli):
    np.savez("partial.npz", y=golden[1]["y"], logits=golden[1]["y"])
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--expect", "partial.npz")
    assert res.exit_code == 9
    assert res.stderr == ("error[input]: --expect partial.npz: the reference lacks output 's' and has 'logits', "
                          "which the artifact does not return (the artifact's outputs: 's', 'y'); write it with "
                          "'jaxport call ARTIFACT --inputs ... -o FILE.npz', which names each array after its "
                          "output.\n")
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--expect", "nowhere.npz")
    assert (res.exit_code, res.stderr) == (9, "error[input]: nowhere.npz: file not found.\n")


def test_option_combinations_that_mean_nothing(golden, run_cli):
    res = run_cli("verify", "f.jaxport", "--expect", "out.npz")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: --expect compares the outputs for given inputs with reference outputs; give "
                          "those inputs with --inputs (e.g. the file 'jaxport call --save-inputs FILE.npz' wrote). See "
                          "'jaxport verify --help'.\n")
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--dim", "b=3")
    assert res.exit_code == 2 and "Leave out --dim." in res.stderr
    res = run_cli("verify", "f.jaxport", "--inputs", "in.npz", "--range", "x=0:1")
    assert res.exit_code == 2 and "Leave out --range." in res.stderr
    res = run_cli("verify", "f.jaxport", "--host-devices", "2", "--coordinator", "127.0.0.1:1", "--num-processes",
                  "2", "--process-id", "0")
    assert res.exit_code == 2 and "verify runs in one process" in res.stderr


# --- non-finite outputs --------------------------------------------------------------------------------------------


def test_all_nan_outputs_are_inconclusive(in_project, run_cli):
    x = random_inputs(jaxport.open_artifact("nan_log.jaxport").model.functions["nan_log"], {}, 0)["x"]
    with np.errstate(invalid="ignore"):  # both functions really are NaN everywhere on these inputs
        assert np.isnan(np.log(-np.abs(x) - 1)).all() and np.isnan(np.sqrt(-np.abs(x) - 1)).all()
    res = run_cli("verify", "nan_log.jaxport", "--against", "model.py:nan_sqrt")
    assert res.exit_code == 12
    assert "INCONCLUSIVE every value is NaN/Inf on both sides" in res.stdout
    fix = ("every value is NaN/Inf on both sides; the inputs were drawn at random (x: standard normal); give those "
           "the function cannot take values it can (--range NAME=LO:HI, or range: [LO, HI] in the spec), or verify on "
           "real inputs (--inputs FILE), or accept it with --allow-nonfinite")
    assert f"inconclusive: {fix}." in res.stdout
    assert "FAILED: 1 of 1 case is inconclusive." in res.stdout
    assert res.stderr == ("error[verification]: nan_log.jaxport: verification failed: 1 of 1 case is inconclusive: "
                          "nan_log on cpu at fixed shapes (fixed shapes): output 'output': inconclusive: every value "
                          "is NaN/Inf on both sides. The inputs were drawn at random (x: standard normal); give those "
                          "the function cannot take values it can (--range NAME=LO:HI, or range: [LO, HI] in the "
                          "spec), or verify on real inputs (--inputs FILE), or accept it with --allow-nonfinite.\n")
    res = run_cli("verify", "nan_log.jaxport", "--against", "model.py:nan_sqrt", "--json")
    out = _valid(json.loads(res.stdout))["cases"][0]["outputs"][0]
    assert (out["passed"], out["inconclusive"], out["max_abs_error"], out["mismatched"]) == (False, fix, None, 0)
    res = run_cli("verify", "nan_log.jaxport", "--against", "model.py:nan_sqrt", "--allow-nonfinite")
    assert res.exit_code == 0, res.stderr
    assert "ok (all NaN/Inf, allowed)" in res.stdout and "OK: 1 case matches." in res.stdout


def test_inconclusive_cases_are_counted_as_such_and_advised_once():
    from jaxport.tolerance import NONFINITE, OutputResult
    from jaxport.verify.report import CaseResult, VerifyReport, failing
    from jaxport.verify.runner import NONFINITE_FIX

    def case(label, **result):
        return CaseResult("f", "cpu", label, {"b": 1}, outputs=[OutputResult("y", "float32", [2], 2, 1e-6, 1e-5,
                                                                             **result)])

    nan = {"inconclusive": f"{NONFINITE}; {NONFINITE_FIX}"}
    cases = [case("lower bound", **nan), case("upper bound", **nan), case("random", **nan)]
    report = VerifyReport("f.jaxport", 0, 0, None, [], [], cases)
    assert failing(cases, 3) == "3 of 3 cases are inconclusive"
    each = "output 'y': inconclusive: every value is NaN/Inf on both sides"
    assert report.summary() == (
        f"f.jaxport: verification failed: 3 of 3 cases are inconclusive: f on cpu at b=1 (lower bound): {each}; f on "
        f"cpu at b=1 (upper bound): {each}; f on cpu at b=1 (random): {each}. Choose inputs where the function is "
        f"finite (--range NAME=LO:HI or --inputs FILE), or accept it with --allow-nonfinite.")
    mixed = [case("lower bound", mismatched=1), case("random", **nan)]
    assert failing(mixed, 3) == "1 of 3 cases differ and 1 is inconclusive"
    assert failing(mixed[:1], 1) == "1 of 1 case differs"
    assert VerifyReport("f.jaxport", 0, 0, None, [], [], mixed).summary().count("--allow-nonfinite") == 1


def test_nan_at_other_positions_is_a_mismatch(in_project):
    x = random_inputs(jaxport.open_artifact("holes.jaxport").model.functions["holes"], {}, 0)["x"]
    differ = int(np.count_nonzero((x > 0) != (x > 0.5)))
    assert 0 < differ < x.size
    report = verify("holes.jaxport", "model.py:other_holes")
    (out,) = report.cases[0].outputs
    assert not report.passed and out.inconclusive is None
    assert out.mismatched == differ
    assert out.worst is not None and out.worst["actual"] == "nan"
    assert out.worst["expected"] == pytest.approx(float(x[tuple(out.worst["index"])]))
    assert verify("holes.jaxport", "model.py:holes").passed  # NaN at the same places matches


# --- value ranges of random inputs ---------------------------------------------------------------------------------


@pytest.fixture
def drawn(monkeypatch):
    """The random inputs verify draws, as they were drawn."""
    seen: list[dict] = []
    real = runner.inputs_mod.random_inputs

    def spy(*args, **kwargs):
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(runner.inputs_mod, "random_inputs", spy)
    return seen


def test_range_reaches_the_inputs(in_project, run_cli, drawn):
    res = run_cli("verify", "log_above_5.jaxport")  # N(0,1) inputs: log(x - 5) is NaN everywhere
    assert res.exit_code == 12 and "INCONCLUSIVE" in res.stdout
    drawn.clear()
    report = verify("log_above_5.jaxport", ranges={"x": (5.5, 6.0)})
    assert report.passed, report.summary()
    (x,) = [d["x"] for d in drawn]
    assert x.dtype == np.float32 and x.min() >= 5.5 and x.max() < 6.0 and len(np.unique(x)) == 16
    out = report.cases[0].outputs[0]
    assert out.inconclusive is None and out.max_abs_error is not None
    res = run_cli("verify", "log_above_5.jaxport", "--range", "x=5.5:6")
    assert res.exit_code == 0, res.stderr


def test_integer_range_reaches_the_inputs(in_project, run_cli, drawn):
    assert run_cli("verify", "log_ids.jaxport").exit_code == 12  # ids 0..7: log of a negative number
    drawn.clear()
    assert verify("log_ids.jaxport", ranges={"tok": (2000, 32000)}).passed
    (tok,) = [d["tok"] for d in drawn]
    assert tok.dtype == np.int32 and tok.min() >= 2000 and tok.max() < 32000
    res = run_cli("verify", "log_ids.jaxport", "--range", "tok=2000:32000")
    assert res.exit_code == 0, res.stderr


def test_range_declared_in_the_spec_is_used_by_default(in_project, drawn):
    f = jaxport.open_artifact("ranged.jaxport").manifest["functions"]["log_above_5"]
    assert f["inputs"][0]["range"] == [5.5, 6]
    assert verify("ranged.jaxport").passed
    (x,) = [d["x"] for d in drawn]
    assert x.min() >= 5.5 and x.max() < 6.0


def test_range_of_an_unknown_input(in_project, run_cli):
    res = run_cli("verify", "log_above_5.jaxport", "--range", "y=0:1")
    assert res.exit_code == 2
    assert res.stderr == "error[usage]: --range: unknown input name 'y'; the inputs are: x.\n"


# --- sharded artifacts on simulated devices ------------------------------------------------------------------------


def _jaxport(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The command line in a new process (a process chooses its device count before JAX starts)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-c", "from jaxport_cli.main import main; main()", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_host_devices_verify_the_sharded_example(tmp_path):
    for name in ("model.py", "spec.yaml", "params.npz", "x.npy"):
        shutil.copy(EXAMPLES / "sharded" / name, tmp_path / name)
    with contextlib.chdir(tmp_path):
        jaxport.export("model.py:predict", "spec.yaml", output="predict.jaxport")
    res = _jaxport("verify", "predict.jaxport", "--dim", "b=1", cwd=tmp_path)
    assert res.returncode == 10 and "--host-devices 8" in res.stderr
    res = _jaxport("verify", "predict.jaxport", "--inputs", "x.npy", "--host-devices", "8", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    (case,) = report["cases"]
    assert case["dims"] == {"b": 8} and case["label"] == "--inputs"
    assert [(o["name"], o["passed"]) for o in case["outputs"]] == [("output", True), ("vjp(x)", True)]
    assert case["outputs"][0]["max_abs_error"] < 1e-5


# --- IREE against XLA ----------------------------------------------------------------------------------------------

CENTERED = '''
import jax.numpy as jnp


def f(x):
    c = x + 16.0
    return {"centered": c - jnp.mean(c, axis=1, keepdims=True), "total": jnp.sum(c * c, axis=1)}
'''


def test_iree_is_compared_with_xla_with_the_tolerances_for_two_compilers(tmp_path, monkeypatch, run_cli):
    pytest.importorskip("iree.runtime")
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text(CENTERED)
    Path("spec.yaml").write_text('jaxport: 1\nargs: ["f32[8, 1000]"]\n')
    jaxport.export("model.py:f", "spec.yaml", output="c.jaxport")
    res = run_cli("verify", "c.jaxport", "--runtime", "iree", "--json")
    assert res.exit_code == 0, res.stderr
    report = _valid(json.loads(res.stdout))
    assert report["functions"][0] | {"platforms": None} == {
        "name": "f", "against": "the JAX runtime", "actual": "iree", "sides": ["xla"], "platforms": None, "cases": 1}
    x = random_inputs(jaxport.open_artifact("c.jaxport").model.functions["f"], {}, 0)["x"].astype(np.float64)
    c = x + 16
    direct = {"centered": c - c.mean(axis=1, keepdims=True), "total": (c * c).sum(axis=1)}
    for o in report["cases"][0]["outputs"]:
        assert o["sides"] == {"actual": "iree", "expected": "xla"}
        assert (o["atol"], o["rtol"]) == (1e-6, 1e-4)
        assert o["scale"] == pytest.approx(np.abs(direct[o["name"]]).max(), rel=1e-5)
        assert o["passed"] and o["max_abs_error"] <= 1e-6 + 1e-4 * o["scale"]
    res = run_cli("verify", "c.jaxport", "--runtime", "iree")
    assert "f (iree) against xla (the JAX runtime) on cpu" in res.stdout
    assert re.search(r"1e-06 \+ 0\.0001·max\(\|x\|, 3\.\d+\)", res.stdout)


def test_compiler_tolerance_rule():
    e = np.array([16.0, 15.9, 1e-3], np.float32)
    a = e + np.array([2.6e-5, 0, 2.6e-5], np.float32)
    assert not tolerance.compare("o", e, a).passed  # per value: 2.6e-5 is far beyond 1e-6 + 1e-5 * 1e-3
    r = tolerance.compare("o", e, a, across_compilers=True, sides=("iree", "xla"))
    assert r.passed and r.scale == 16.0 and (r.atol, r.rtol) == (1e-6, 1e-4)
    assert r.max_rel_error == np.abs(a.astype(np.float64) - e).max() / 16  # about 2.6e-5 / 16
    wrong = tolerance.compare("o", e, e * 1.01, across_compilers=True, sides=("iree", "xla"))
    assert not wrong.passed and wrong.mismatched == 2
    assert wrong.describe().startswith("output 'o': 2 of 3 values differ (max abs error 0.16, tolerance 1e-06 + "
                                       "0.0001*max(|expected|, 16)); worst at index (0,): iree 16.16, xla 16")
    assert tolerance.tolerance("bfloat16", across_compilers=True) == (1e-2, 4e-2)
    assert tolerance.tolerance("int32", across_compilers=True) == (0.0, 0.0)
    assert tolerance.tolerance("float32", atol=0.5, across_compilers=True) == (0.5, 1e-4)


# --- imported StableHLO --------------------------------------------------------------------------------------------

FOREIGN = REPO / "tests" / "foreign"


@pytest.fixture
def imported(tmp_path, monkeypatch, run_cli):
    for name in ("scale_rows.mlir", "scale_rows.yaml", "scale_rows.inputs.npz", "scale_rows.expected.npz"):
        shutil.copy(FOREIGN / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    assert run_cli("import", "scale_rows.mlir", "-s", "scale_rows.yaml", "-o", "s.jaxport").exit_code == 0
    Path("ref.py").write_text("def scale_rows(x, scale):\n    return x * scale + 1\n\n\n"
                              "def wrong(x, scale):\n    return x * scale\n")
    return tmp_path


def test_imported_module_needs_a_reference(imported, run_cli):
    res = run_cli("verify", "s.jaxport")
    assert res.exit_code == 2
    assert res.stderr == (
        "error[usage]: s.jaxport: function 'scale_rows' was imported from the StableHLO module scale_rows.mlir, and "
        "comparing the module with itself proves nothing. Compare its outputs with reference outputs (--inputs IN.npz "
        "--expect OUT.npz, e.g. from the producer that wrote the module) or with a Python reference function "
        "(--against model.py:NAME).\n")


def test_imported_module_against_reference_outputs(imported, run_cli):
    inputs, expected = _arrays("scale_rows.inputs.npz"), _arrays("scale_rows.expected.npz")
    np.testing.assert_allclose(expected["output"], inputs["x"] * inputs["scale"] + 1, rtol=1e-6)
    res = run_cli("verify", "s.jaxport", "--inputs", "scale_rows.inputs.npz", "--expect", "scale_rows.expected.npz",
                  "--json")
    assert res.exit_code == 0, res.stderr
    (case,) = json.loads(res.stdout)["cases"]
    assert case["dims"] == {"batch": 5} and case["outputs"][0]["sides"]["expected"] == "reference"
    np.savez("moved.npz", output=expected["output"] + 0.5)
    res = run_cli("verify", "s.jaxport", "--inputs", "scale_rows.inputs.npz", "--expect", "moved.npz")
    assert res.exit_code == 12 and "output 'output': 15 of 15 values differ (max abs error 0.5" in res.stderr


def test_imported_module_against_a_python_function(imported, run_cli):
    res = run_cli("verify", "s.jaxport", "--against", "ref.py:scale_rows", "--dim", "batch=1,7")
    assert res.exit_code == 0, res.stderr
    res = run_cli("verify", "s.jaxport", "--against", "ref.py:wrong", "--dim", "batch=3")
    assert res.exit_code == 12 and "output 'output': 9 of 9 values differ (max abs error 1," in res.stderr


def test_a_nan_on_one_side_is_said_so_not_max_abs_error_0():
    """log(x) against log(-x): every value differs by where it is NaN; the message does not say 'max abs error 0'."""
    x = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    result = tolerance.compare("o", np.log(x), np.full_like(x, np.nan))
    assert not result.passed and result.max_abs_error == 0.0  # over the values finite on both sides: none
    assert result.describe().startswith("output 'o': 4 of 4 values differ (each as NaN or infinity on one side "
                                        "only); worst at index")
    close = tolerance.compare("o", x, x * (1 + 1e-3))
    assert close.max_abs_error is not None and close.max_abs_error > 0
