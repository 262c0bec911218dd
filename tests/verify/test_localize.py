"""``verify --localize`` / ``jaxport.localize``: single-operation changes injected into a function are localized to
the injected line and operation, for the live function against the artifact, for two artifacts, and for JAX against
IREE; outputs that agree blame nothing; the search gives the same answer under a tiny memory budget; the blamed
operation is written as an artifact that ``jaxport call`` runs; locations and the correspondence on their own."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.errors import UsageError
from jaxport.verify.localize import locations
from jaxport.verify.localize.report import OPERATION, UNMATCHED
from tests.support import REPO

MODEL = '''import jax
import jax.numpy as jnp


def dense(x, w):
    return x @ w


def cell(c, x):
    c = jnp.tanh(c * 0.5 + x)
    return c, c.sum()


def f(x, w1, w2):
    h = dense(x, w1) * 2.0
    h = jnp.sin(h) + h
    h = h - jnp.max(h, axis=1)[:, None]
    h = jnp.abs(h)
    c, ys = jax.lax.scan(cell, h[0], h)
    return jnp.tanh(h @ w2), c, ys
'''

SPEC = '''jaxport: 1
args:
  - "f32[16, 16]"
  - "f32[16, 16]"
  - "f32[16, 8]"
'''

#: name -> (line, text before, text after, the operation blamed, its JAX primitive, the kind of blame, in a loop)
INJECTIONS = {
    "constant": (15, "dense(x, w1) * 2.0", "dense(x, w1) * 2.5", "stablehlo.multiply", "mul", OPERATION, False),
    "transcendental": (16, "jnp.sin(h) + h", "jnp.cos(h) + h", "stablehlo.cosine", "cos", OPERATION, False),
    "swapped axis": (17, "jnp.max(h, axis=1)", "jnp.max(h, axis=0)", "stablehlo.reduce", "reduce_max", OPERATION,
                     False),
    "cast to bf16": (18, "h = jnp.abs(h)", "h = jnp.abs(h).astype(jnp.bfloat16).astype(jnp.float32)",
                     "stablehlo.convert", "convert_element_type", UNMATCHED, False),
    "scan body": (10, "c * 0.5 + x", "c * 0.7 + x", "stablehlo.multiply", "mul", OPERATION, True),
}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A directory with model.py, spec.yaml and old.jaxport exported from the unchanged model."""
    d = tmp_path_factory.mktemp("localize")
    (d / "model.py").write_text(MODEL)
    (d / "spec.yaml").write_text(SPEC)
    with contextlib.chdir(d):
        jaxport.export("model.py:f", "spec.yaml", output="old.jaxport")
    return d


@pytest.fixture(scope="module", params=list(INJECTIONS))
def injected(request, base, tmp_path_factory) -> tuple[str, Path]:
    """A directory holding old.jaxport (the unchanged model), model.py with one change injected, and new.jaxport
    exported from it."""
    name = request.param
    _, before, after, *_ = INJECTIONS[name]
    assert MODEL.count(before) == 1
    d = tmp_path_factory.mktemp(name.replace(" ", "_"))
    shutil.copy(base / "old.jaxport", d)
    shutil.copy(base / "spec.yaml", d)
    (d / "model.py").write_text(MODEL.replace(before, after))
    with contextlib.chdir(d):
        jaxport.export("model.py:f", "spec.yaml", output="new.jaxport")
    return name, d


def _schema_errors(doc: dict) -> list[str]:
    """What keeps ``doc`` from being valid ``verify --json`` output (specs/schemas/cli/verify.schema.json)."""
    import jsonschema

    schema = json.loads((REPO / "specs" / "schemas" / "cli" / "verify.schema.json").read_text())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]


def _check_blame(report, name: str) -> None:
    line, _, _, operation, primitive, kind, in_loop = INJECTIONS[name]
    assert not report.outputs_agree
    b = report.blame
    assert b is not None, report.notes
    op = report.op()
    assert (op.where.file, op.where.line, op.operation, op.where.primitive) == ("model.py", line, operation, primitive)
    assert b.kind == kind
    assert bool(b.inside) == in_loop
    if in_loop:
        assert (b.inside[0].op.where.line, b.inside[0].iteration, b.inside[0].op.operation) == \
            (19, 0, "stablehlo.while")
    assert f"model.py:{line}" in report.summary()


def test_the_live_function_changed_since_the_export_is_localized_to_the_injected_line(injected):
    name, d = injected
    with contextlib.chdir(d):
        report = jaxport.localize("old.jaxport")
    assert report.verify is not None and not report.verify.passed
    assert (report.actual, report.expected, report.source_side) == ("artifact", "live", "live")
    _check_blame(report, name)
    assert report.op().program == "live"  # the line of the code as it is now
    assert report.op().where.function == ("cell" if name == "scan body" else "f")


def test_two_artifacts_are_localized_to_the_injected_line(injected):
    name, d = injected
    with contextlib.chdir(d):
        report = jaxport.localize("new.jaxport", against_artifact="old.jaxport")
    assert (report.actual, report.expected, report.source_side) == ("artifact", "other", "artifact")
    _check_blame(report, name)
    assert report.op().program == "artifact"
    b = report.blame
    if b.kind == OPERATION:  # the same operation in the other program: measured on both sides, checked alone
        assert b.results and all(m.departs for m in b.results[:1])
        assert b.alone is not None and b.alone.departs and b.alone.verdict == "departs alone"
        assert b.expected is not None and b.expected.where.line == INJECTIONS[name][0]
        departing = [m for m in b.operands if m.departs]
        if name in ("constant", "scan body"):
            assert b.cause == "a constant operand differs between the programs (operand 1)"
            assert [m.note for m in departing] == ["computed from constants"]
        else:
            assert departing == []
    if name == "transcendental":
        assert b.cause == "the operation differs: cos in artifact's program, sin in other's"
    if name == "swapped axis":
        assert b.cause is not None and b.cause.startswith("its attributes differ: dimensions = array<i64: 0>")


def test_outputs_that_agree_blame_nothing(base, run_cli):
    with contextlib.chdir(base):
        report = jaxport.localize("old.jaxport")
        assert report.verify.passed and report.outputs_agree and report.blame is None
        assert report.summary() == ("the outputs of artifact and live agree within the tolerances: nothing to "
                                    "localize, nothing blamed.")
        assert report.notes == ["no case's outputs differ: nothing was localized"]
        result = run_cli("verify", "old.jaxport", "--localize", "--json")
        assert result.exit_code == 0
        doc = json.loads(result.stdout)
        assert _schema_errors(doc) == []
        assert doc["passed"] is True and doc["localize"]["outputs_agree"] is True
        assert doc["localize"]["blamed"] is None and doc["localize"]["blame"] is None
        plain = json.loads(run_cli("verify", "old.jaxport", "--json").stdout)
        assert "localize" not in plain  # without --localize, verify's document is as it was


@pytest.mark.slow  # many small tapped runs: 4 s
def test_a_tiny_memory_budget_bisects_to_the_same_operation(base, tmp_path):
    shutil.copy(base / "old.jaxport", tmp_path)
    shutil.copy(base / "spec.yaml", tmp_path)
    (tmp_path / "model.py").write_text(MODEL.replace("jnp.sin(h) + h", "jnp.cos(h) + h"))
    with contextlib.chdir(tmp_path):
        wide = jaxport.localize("old.jaxport")
        narrow = jaxport.localize("old.jaxport", localize_budget=1024)
    assert wide.op().where.line == narrow.op().where.line == 16
    assert narrow.op().operation == "stablehlo.cosine"
    assert narrow.runs > wide.runs
    assert 0 < narrow.largest_tap_bytes <= 4096  # never more than the budget, or one operation and its operands
    assert wide.largest_tap_bytes > 4096


@pytest.mark.slow  # 4-6 s: the whole command line, then a call of the artifact it wrote
@pytest.mark.parametrize("injected", ["constant", "transcendental"], indirect=True)
def test_cli_reports_the_blamed_line_with_exit_12_and_writes_a_callable_artifact(injected, run_cli, tmp_path):
    name, d = injected
    out = tmp_path / "bug"
    with contextlib.chdir(d):
        result = run_cli("verify", "old.jaxport", "--localize", "--localize-out", str(out), "--json")
        assert result.exit_code == 12
        doc = json.loads(result.stdout)
        assert _schema_errors(doc) == []
        assert doc["passed"] is False
        loc = doc["localize"]
        line = INJECTIONS[name][0]
        assert loc["blamed"]["location"]["shown"] == f"model.py:{line} (f)"
        assert loc["blamed"]["operation"] == INJECTIONS[name][3]
        assert loc["blame"]["alone"]["verdict"] == "departs alone"
        assert loc["written"]["directory"] == str(out)
        assert sorted(loc["written"]["files"]) == sorted(
            ["README.md", "counterpart.jaxport", "counterpart.mlir", "inputs.npz", "localize.json", "op.jaxport",
             "op.mlir", "side_a.npz", "side_b.npz"])
        text = run_cli("verify", "old.jaxport", "--localize")
        assert text.exit_code == 12
        assert f"blamed: {INJECTIONS[name][3]} (JAX {INJECTIONS[name][4]}) at model.py:{line} (f)" in \
            re.sub(r"\s+", " ", text.stdout)
    # the operation alone, as artifacts: each side's version reproduces that side's numbers
    assert run_cli("call", out / "op.jaxport", "--inputs", out / "inputs.npz", "--expect", out / "side_b.npz",
                   "--no-cache").exit_code == 0
    assert run_cli("call", out / "counterpart.jaxport", "--inputs", out / "inputs.npz", "--expect",
                   out / "side_a.npz", "--no-cache").exit_code == 0
    assert run_cli("call", out / "op.jaxport", "--inputs", out / "inputs.npz", "--expect", out / "side_a.npz",
                   "--no-cache").exit_code == 12
    assert json.loads((out / "localize.json").read_text())["blamed"]["location"]["line"] == INJECTIONS[name][0]
    assert "jaxport call op.jaxport --inputs inputs.npz --expect side_b.npz" in (out / "README.md").read_text()


SIN_MODEL = '''import jax.numpy as jnp


def g(x):
    y = x * 3.0
    return jnp.sin(y) + 1.0
'''


@pytest.fixture(scope="module")
def sine(tmp_path_factory) -> Path:
    pytest.importorskip("iree.runtime")
    d = tmp_path_factory.mktemp("iree")
    (d / "model.py").write_text(SIN_MODEL)
    (d / "spec.yaml").write_text('jaxport: 1\nargs:\n  - "f32[64, 64]"\n')
    with contextlib.chdir(d):
        jaxport.export("model.py:g", "spec.yaml", output="g.jaxport")
    return d


def test_jax_against_iree_agrees_within_the_compiler_tolerances(sine):
    with contextlib.chdir(sine):
        report = jaxport.localize("g.jaxport", runtime="iree")
    assert (report.actual, report.expected) == ("iree", "xla")
    assert report.outputs_agree and report.blame is None


def test_jax_against_iree_localizes_the_transcendental_that_differs_in_the_last_bits(sine, tmp_path, run_cli):
    with contextlib.chdir(sine):
        report = jaxport.localize("g.jaxport", runtime="iree", atol=0.0, rtol=0.0,
                                  localize_out=str(tmp_path / "bug"))
    assert report.correspondence["same_program"] is True
    op = report.op()
    assert (op.operation, op.where.line, op.where.function, op.program) == ("stablehlo.sine", 6, "g", "iree")
    b = report.blame
    assert b.kind == OPERATION and b.cause is None
    assert [m.departs for m in b.operands] == [False]  # x * 3.0 is exact on both
    assert b.alone.compared == "the same operation" and b.alone.departs
    worst = b.alone.results[0].result.max_abs_error
    assert 0 < worst < 1e-6  # a few units in the last place of values near 1
    out = tmp_path / "bug"
    assert not (out / "counterpart.jaxport").exists()
    inputs = np.load(out / "inputs.npz")
    assert list(inputs) == ["arg0"] and inputs["arg0"].shape == (64, 64)
    assert run_cli("call", out / "op.jaxport", "--inputs", out / "inputs.npz", "--expect", out / "side_a.npz",
                   "--atol", "0", "--rtol", "0", "--no-cache").exit_code == 0
    assert run_cli("call", out / "op.jaxport", "--runtime", "iree", "--inputs", out / "inputs.npz", "--expect",
                   out / "side_b.npz", "--atol", "0", "--rtol", "0", "--no-cache").exit_code == 0


def test_the_first_iteration_at_which_a_loop_body_departs_is_named(tmp_path):
    model = '''import jax
import jax.numpy as jnp


def f(x, w):
    def body(i, c):
        return jnp.tanh(c @ w) * jnp.where(i == 3, 1.5, 1.0)
    return jax.lax.fori_loop(0, 6, body, x)
'''
    (tmp_path / "model.py").write_text(model)
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs:\n  - "f32[4, 4]"\n  - "f32[4, 4]"\n')
    with contextlib.chdir(tmp_path):
        jaxport.export("model.py:f", "spec.yaml", output="old.jaxport")
        (tmp_path / "model.py").write_text(model.replace("1.5, 1.0", "1.25, 1.0"))
        report = jaxport.localize("old.jaxport")
    op = report.op()
    assert (op.operation, op.where.line, op.where.function) == ("stablehlo.select", 7, "f.<locals>.body")
    assert report.blame.cause == "a constant operand differs between the programs (operand 1)"
    assert [(s.op.operation, s.op.where.line, s.iteration) for s in report.blame.inside] == [
        ("stablehlo.while", 8, 3)]


def test_a_branch_of_a_conditional_inside_a_loop_is_searched(tmp_path):
    model = '''import jax
import jax.numpy as jnp


def f(x, w):
    def body(i, c):
        return jax.lax.switch(i % 2, [lambda v: v * 0.5, lambda v: jnp.sin(v @ w)], c)
    return jax.lax.fori_loop(0, 4, body, x)
'''
    (tmp_path / "model.py").write_text(model)
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs:\n  - "f32[4, 4]"\n  - "f32[4, 4]"\n')
    with contextlib.chdir(tmp_path):
        jaxport.export("model.py:f", "spec.yaml", output="old.jaxport")
        (tmp_path / "model.py").write_text(model.replace("jnp.sin(v @ w)", "jnp.cos(v @ w)"))
        report = jaxport.localize("old.jaxport")
    op = report.op()
    assert (op.operation, op.where.line) == ("stablehlo.cosine", 7)
    assert [(s.op.operation, s.op.where.line, s.iteration, s.branch) for s in report.blame.inside] == [
        ("stablehlo.while", 8, 1, None), ("stablehlo.case", 7, None, 1)]
    assert "in the body of the loop at model.py:8 (f) (iteration 1) in branch 1 of the conditional at model.py:7" in \
        report.summary()


def test_two_artifacts_with_other_weights_bound_name_the_tensor(tmp_path):
    (tmp_path / "model.py").write_text("import jax.numpy as jnp\n\n\ndef apply(params, x):\n"
                                       "    h = jnp.tanh(x @ params['w1'])\n    return h @ params['w2']\n")
    rng = np.random.default_rng(0)
    p = {"w1": rng.standard_normal((8, 8)).astype(np.float32), "w2": rng.standard_normal((8, 4)).astype(np.float32)}
    with contextlib.chdir(tmp_path):
        for n, scale in ((1, 1.0), (2, 1.01)):
            np.savez(f"p{n}.npz", w1=p["w1"], w2=p["w2"] * np.float32(scale))
            Path(f"spec{n}.yaml").write_text(f'jaxport: 1\nargs:\n  - {{bind: "p{n}.npz"}}\n  - "f32[4, 8]"\n')
            jaxport.export("model.py:apply", f"spec{n}.yaml", output=f"a{n}.jaxport")
        report = jaxport.localize("a2.jaxport", against_artifact="a1.jaxport")
    assert (report.op().operation, report.op().where.line) == ("stablehlo.dot_general", 6)
    assert report.blame.cause == "an argument differs between the sides: bound tensor 'params/w2'"
    assert report.blame.alone is None


def test_operands_swapped_are_named_as_the_cause(tmp_path):
    model = "import jax.numpy as jnp\n\n\ndef f(x, y):\n    a = jnp.tanh(x)\n    b = jnp.sin(y)\n    return a - b\n"
    (tmp_path / "model.py").write_text(model)
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs:\n  - "f32[4, 4]"\n  - "f32[4, 4]"\n')
    with contextlib.chdir(tmp_path):
        jaxport.export("model.py:f", "spec.yaml", output="old.jaxport")
        (tmp_path / "model.py").write_text(model.replace("a - b", "b - a"))
        report = jaxport.localize("old.jaxport")
    assert (report.op().operation, report.op().where.line) == ("stablehlo.subtract", 7)
    assert report.blame.cause == ("it reads other values than the other program's operation does (operand 0, 1: "
                                  "operands swapped or taken from elsewhere)")
    assert report.blame.alone is None


# --- options ----------------------------------------------------------------------------------------------------


def test_options_that_do_not_go_together_are_refused_with_the_command_line_s_words():
    with pytest.raises(UsageError, match=re.escape(
            "--localize-out writes the operation --localize blames; give --localize too.")):
        jaxport.VerifyRequest("a.jaxport", localize_out="bug")
    with pytest.raises(UsageError, match=re.escape(
            "--localize looks inside two programs, and stored reference outputs (--expect) have none: localize "
            "against the live function (--against FILE.py:NAME), another artifact (--against-artifact OLD), IREE "
            "(--runtime iree) or another platform (--against-platform NAME).")):
        jaxport.VerifyRequest("a.jaxport", inputs=["x.npy"], expect="y.npz", localize=True)
    with pytest.raises(UsageError, match=re.escape(
            "--against-artifact and --runtime iree are two comparisons; verify makes one at a time with them. Give "
            "one of them.")):
        jaxport.VerifyRequest("a.jaxport", against_artifact="b.jaxport", runtime="iree")


def test_against_platform_needs_another_platform_of_the_artifact(base):
    with contextlib.chdir(base), pytest.raises(jaxport.PlatformError, match=re.escape(
            "old.jaxport: function 'f' was exported for cpu only; --against-platform cpu compares it with another of "
            "its platforms.")):
        jaxport.localize("old.jaxport", against_platform="cpu")


@pytest.mark.parametrize("injected", ["constant"], indirect=True)
def test_against_artifact_compares_outputs_without_localizing(injected, run_cli):
    name, d = injected
    with contextlib.chdir(d):
        same = run_cli("verify", "old.jaxport", "--against-artifact", "old.jaxport", "--json")
        differs = run_cli("verify", "new.jaxport", "--against-artifact", "old.jaxport", "--json")
    assert same.exit_code == 0
    assert json.loads(same.stdout)["functions"][0]["sides"] == ["other"]
    assert _schema_errors(json.loads(same.stdout)) == [] and _schema_errors(json.loads(differs.stdout)) == []
    assert differs.exit_code == 12
    assert "localize" not in json.loads(differs.stdout)


# --- the pieces on their own ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "shown", "primitive", "stack"), [
    # lowered now, with full tracebacks: the name stack and primitive, then the frames with their functions
    ('loc("jit(f)/dot_general"(callsite("f"("/tmp/m.py":7:20 to :25) at "<module>"("<stdin>":7:5 to :99))))',
     "/tmp/m.py:7 (f)", "dot_general", "jit(f)"),
    # an operation of an inlined nested jit: the callee's name at the caller's location
    ('loc(callsite("max" at "jit(f)/jit(relu)"(callsite("f"("/tmp/m.py":7:8) at "<module>"("<stdin>":7:5)))))',
     "/tmp/m.py:7 (f)", "max", "jit(f)/jit(relu)"),
    # an exported program: one frame, relative to the export root, no function; the primitive wraps the name stack
    ('loc("add"("jit(predict)"("model.py":23:20)))', "model.py:23", "add", "jit(predict)"),
    # an exported loop body: the primitive wraps the file itself
    ('loc(callsite(""(callsite("mul"("model.py":11:17) at "while/body/eval_jaxpr"("model.py":18:12))) at '
     '"jit(f)"("model.py":18:12)))', "model.py:11", "mul", "while/body/eval_jaxpr"),
    ("loc(unknown)", "(no source location)", None, None),
    ("loc(garbage", "(no source location)", None, None),
])
def test_locations_read_as_the_user_s_line(text, shown, primitive, stack):
    where = locations.parse(text)
    assert (where.shown(), where.primitive, where.name_stack) == (shown, primitive, stack)


def test_a_location_takes_its_function_from_the_source_and_prefers_the_user_s_file(tmp_path):
    (tmp_path / "model.py").write_text("import jax\n\n\nclass Net:\n    def __call__(self, x):\n        return x * 2\n")
    where = locations.parse('loc("mul"("model.py":6:15))').relative([tmp_path])
    assert where.shown() == "model.py:6 (Net.__call__)"
    lib = ('loc("jit(f)/dot_general"(callsite("__call__"("/env/lib/python3.13/site-packages/flax/linear.py":300:9) at '
           'callsite("apply"("/home/user/model.py":12:4) at "<module>"("/home/user/run.py":3:1)))))')
    assert locations.parse(lib).shown() == "/home/user/model.py:12 (apply)"


def test_a_library_frame_is_shown_as_python_imports_it_not_by_this_machine_s_path(tmp_path, monkeypatch):
    """What localize.json keeps of a frame outside every root (a library's): its path under ``sys.path``."""
    site = tmp_path / "env" / "site-packages"
    (site / "flax").mkdir(parents=True)
    (site / "flax" / "linear.py").write_text("def dense(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(site))
    text = (f'loc("jit(f)/dot_general"(callsite("dense"("{site}/flax/linear.py":2:11) at '
            f'"apply"("{tmp_path}/model.py":12:4))))')
    where = locations.parse(text).relative([tmp_path / "elsewhere"])
    assert [f["file"] for f in where.to_json()["frames"]] == ["flax/linear.py", str(tmp_path / "model.py")]
