"""``jaxport diff``: each kind of change between two exports is found and classified as breaking or compatible;
identical re-exports report identical; --fail-on sets the exit code."""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.artifact import diff, model
from jaxport.artifact.manifest import validate

MODEL = '''
import jax
import jax.numpy as jnp


def f(x, y, scale, *, w):
    return {"out": jnp.tanh(x) * scale + y, "proj": x @ w, "total": jnp.sum(x)}
'''

SPEC = '''jaxport: 1
dims:
  b: {min: 1, max: 512}
  h: {min: 2, max: 64}
constraints: ["b <= 8*h"]
args:
  - "f32[b, h]"
  - "f32[b, h]"
  - {static: 2.0}
kwargs:
  w: "f32[h, 4]"
metadata: {name: m, version: "1.0", description: "a model"}
'''

WEIGHTS_MODEL = '''
def lin(x, *, p):
    return x @ p["w"]
'''

WEIGHTS_SPEC = '''jaxport: 1
dims: [b]
args: ["f32[b, 3]"]
kwargs:
  p: {bind: w.npz}
'''

FFI_LINE = '    y = jax.ffi.ffi_call("my_target", jax.ShapeDtypeStruct(y.shape, y.dtype))(y)\n'


class Exporter:
    """Exports (model, spec, options) once per module, each in its own directory."""

    def __init__(self, root: Path):
        self.root = root
        self.cache: dict[tuple, Path] = {}
        self.counter = itertools.count()

    def __call__(self, model: str = MODEL, spec: str = SPEC, entry: str = "model.py:f", files=None,
                 **options) -> Path:
        key = (model, spec, entry, json.dumps(files, sort_keys=True, default=str), json.dumps(options, sort_keys=True))
        if key not in self.cache:
            d = self.root / f"e{next(self.counter)}"
            d.mkdir()
            (d / "model.py").write_text(model)
            (d / "spec.yaml").write_text(spec)
            for name, arrays in (files or {}).items():
                np.savez(d / name, **arrays)
            with contextlib.chdir(d):
                self.cache[key] = d / jaxport.export(entry, "spec.yaml", output="a.jaxport", **options).path
        return self.cache[key]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return Exporter(tmp_path_factory.mktemp("diff"))


def _kinds(report: diff.DiffReport) -> set[tuple[str, str]]:
    return {(c.severity, c.kind) for c in report.changes if c.kind not in ("program_changed", "producer_changed")}


def _model(old: str, new: str) -> str:
    assert old in MODEL
    return MODEL.replace(old, new)


def _spec(old: str, new: str, base: str = SPEC) -> str:
    assert old in base
    return base.replace(old, new)


def test_identical_reexport_from_another_directory(export, tmp_path):
    first = export()
    again = tmp_path / "elsewhere"
    again.mkdir()
    shutil.copy(first.parent / "model.py", again)
    shutil.copy(first.parent / "spec.yaml", again)
    with contextlib.chdir(again):
        second = jaxport.export("model.py:f", "spec.yaml", output="b.jaxport").path
    report = diff.diff(first, again / second)
    assert report.identical and report.changes == []
    assert report.programs["f"].status == "identical"
    assert report.summary() == f"{again / second} is identical to {first}."


# Each case: (model, spec) of the new artifact, and the classified changes expected against the base export.
CASES = {
    "input removed": (
        _model("def f(x, y, scale, *, w):", "def f(x, scale, *, w):").replace("+ y", ""),
        _spec('  - "f32[b, h]"\n  - "f32[b, h]"\n', '  - "f32[b, h]"\n'),
        {("breaking", "input_removed")}),
    "input renamed": (
        _model("def f(x, y, scale, *, w):", "def f(x, z, scale, *, w):").replace("+ y", "+ z"), SPEC,
        {("breaking", "input_renamed")}),
    "dtype changed": (MODEL, _spec('  - "f32[b, h]"\n  - {static', '  - "f16[b, h]"\n  - {static'),
                      {("breaking", "input_dtype_changed")}),
    "rank changed": (MODEL, _spec('  - "f32[b, h]"\n  - {static', '  - "f32[h]"\n  - {static'),
                     {("breaking", "input_rank_changed")}),
    "constant dimension changed": (MODEL, _spec('"f32[h, 4]"', '"f32[h, 5]"'),
                                   {("breaking", "input_dimension_changed"), ("breaking", "output_dimension_changed")}),
    "max bound tightened": (MODEL, _spec("max: 512", "max: 256"), {("breaking", "bound_tightened")}),
    "min bound tightened": (MODEL, _spec("h: {min: 2, max: 64}", "h: {min: 4, max: 64}"),
                            {("breaking", "bound_tightened")}),
    "bound relaxed": (MODEL, _spec("max: 512", "max: 1024"), {("compatible", "bound_relaxed")}),
    "constraint added": (MODEL, _spec('["b <= 8*h"]', '["b <= 8*h", "b >= 2"]'), {("breaking", "constraint_added")}),
    "constraint removed": (MODEL, _spec('constraints: ["b <= 8*h"]\n', ""), {("compatible", "constraint_removed")}),
    "constraint changed, relaxed": (MODEL, _spec("b <= 8*h", "b <= 16*h"), {("compatible", "constraint_relaxed")}),
    "constraint changed, tightened": (MODEL, _spec("b <= 8*h", "b <= 4*h"), {("breaking", "constraint_tightened")}),
    "output removed": (_model(', "total": jnp.sum(x)', ""), SPEC, {("breaking", "output_removed")}),
    "output dtype changed": (_model("jnp.sum(x)}", "jnp.sum(x).astype(jnp.float16)}"), SPEC,
                             {("breaking", "output_dtype_changed")}),
    "output rank changed": (_model("jnp.sum(x)}", "jnp.sum(x, axis=0)}"), SPEC,
                            {("breaking", "output_rank_changed")}),
    "output added": (_model('"total": jnp.sum(x)}', '"total": jnp.sum(x), "max": jnp.max(x)}'), SPEC,
                     {("compatible", "output_added")}),
    "static changed": (MODEL, _spec("static: 2.0", "static: 3.0"), {("breaking", "static_changed")}),
    "metadata changed": (MODEL, _spec('version: "1.0"', 'version: "1.1"'), {("compatible", "metadata_changed")}),
    "program changed": (_model("jnp.tanh(x)", "jnp.sin(x)"), SPEC, set()),
    "dimension renamed": (MODEL, SPEC.replace("b", "n"),
                          {("compatible", "dimension_renamed")}),
    "unstable custom call added": (
        _model('    return {"out"', '    y = jax.ffi.ffi_call("my_target", jax.ShapeDtypeStruct(y.shape, y.dtype))(y)\n'
                                    '    return {"out"'),
        SPEC + "allow_custom_calls: [my_target]\n", {("breaking", "custom_call_added")}),
}


@pytest.mark.parametrize("name", CASES)
def test_change_is_classified(name, export):
    model, spec, expected = CASES[name]
    report = diff.diff(export(), export(model, spec))
    assert _kinds(report) == expected
    assert not report.identical
    assert report.fails("breaking") == any(s == "breaking" for s, _ in expected)
    assert report.fails("any")


def test_messages_say_what_changed(export):
    report = diff.diff(export(), export(MODEL, _spec("b <= 8*h", "b <= 4*h")))
    (change,) = [c for c in report.changes if c.kind == "constraint_tightened"]
    assert change.message == ("constraint 'b <= 8*h' -> 'b <= 4*h': fewer shapes accepted (b=9, h=2 was accepted and "
                              "is now rejected)")
    report = diff.diff(export(), export(MODEL, _spec("max: 512", "max: 256")))
    assert [c.as_dict() for c in report.changes if c.kind == "bound_tightened"] == [{
        "severity": "breaking", "kind": "bound_tightened", "function": "f", "path": "dims['b']",
        "message": "dimension 'b': 1 <= b <= 512 -> 1 <= b <= 256 (fewer shapes accepted: b=257, h=33 was accepted "
                   "and is now rejected)",
        "old": {"min": 1, "max": 512}, "new": {"min": 1, "max": 256}, "breaks": "callers"}]
    renamed = diff.diff(export(), export(*CASES["input renamed"][:2]))
    assert [c.message for c in renamed.changes if c.kind == "input_renamed"] == ["input 'y' renamed to 'z' (args[1])"]


def test_program_comparison(export):
    changed = diff.diff(export(), export(*CASES["program changed"][:2]))
    assert changed.programs["f"].status == "changed"
    assert [(c.severity, c.kind) for c in changed.changes] == [("compatible", "program_changed")]
    assert changed.programs["f"].old_program_sha256 != changed.programs["f"].new_program_sha256
    same_program = diff.diff(export(), export(*CASES["metadata changed"][:2]))
    assert same_program.programs["f"].status == "identical"
    stripped = diff.diff(export(), export(strip_locations=True))
    assert stripped.identical, [c.message for c in stripped.changes]
    assert stripped.programs["f"].status == "identical"
    assert stripped.programs["f"].old_payload_sha256 != stripped.programs["f"].new_payload_sha256
    unread = diff.diff(export(), export(*CASES["program changed"][:2]), programs=False)
    assert unread.programs["f"].status == "not compared"
    assert [c.kind for c in unread.changes] == ["payload_changed"]


def test_platforms_added_and_removed(export):
    one, two = export(), export(platforms=["cpu", "tpu"])
    assert _kinds(diff.diff(one, two)) == {("compatible", "platform_added")}
    assert _kinds(diff.diff(two, one)) == {("breaking", "platform_removed")}


def test_functions_added_and_removed(export):
    several = ('jaxport: 1\ndims: [b]\nfunctions:\n  f: {entrypoint: model.py:f, args: ["f32[b]"]}\n'
               '  g: {entrypoint: model.py:g, args: ["f32[b]"]}\n')
    model = "def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x * 2\n"
    single = export(model, several.replace('  g: {entrypoint: model.py:g, args: ["f32[b]"]}\n', ""), entry=None)
    both = export(model, several, entry=None)
    added = diff.diff(single, both)  # the callers of a one-function artifact name none: now they must
    assert _kinds(added) == {("breaking", "function_added")}
    assert [c.message for c in added.changes if c.kind == "function_added"] == [
        "function 'g' added to a one-function artifact: its callers named no function, and now must choose one "
        "(--function NAME, function= in Python)"]
    assert added.programs["f"].status == "identical"
    assert _kinds(diff.diff(both, single)) == {("breaking", "function_removed")}
    three = export(model + "\n\ndef h(x):\n    return x - 1\n", several + '  h: {entrypoint: model.py:h, args: '
                   '["f32[b]"]}\n', entry=None)
    assert _kinds(diff.diff(both, three)) == {("compatible", "function_added")}


def test_a_returned_tuple_that_grows_is_breaking_a_dict_that_grows_is_not(export):
    spec = 'jaxport: 1\ndims: [b]\nargs: ["f32[b]"]\n'
    pair = export("def f(x):\n    return x * 2, x + 1\n", spec)
    triple = export("def f(x):\n    return x * 2, x + 1, x.sum()\n", spec)
    grew = diff.diff(pair, triple)
    assert _kinds(grew) == {("compatible", "output_added"), ("breaking", "output_structure_changed")}
    assert [c.message for c in grew.changes if c.kind == "output_structure_changed"] == [
        "the returned tuple grew from 2 to 3 items: a caller unpacking it by position breaks"]
    two = export("def f(x):\n    return {'a': x * 2, 'b': x + 1}\n", spec)
    three = export("def f(x):\n    return {'a': x * 2, 'b': x + 1, 'c': x.sum()}\n", spec)
    assert _kinds(diff.diff(two, three)) == {("compatible", "output_added")}


def test_weights_changed_with_the_same_shapes_is_compatible(export):
    w1 = {"w": np.ones((3, 2), np.float32)}
    w2 = {"w": np.full((3, 2), 2.0, np.float32)}
    w3 = {"w": np.ones((3, 4), np.float32)}
    old = export(WEIGHTS_MODEL, WEIGHTS_SPEC, entry="model.py:lin", files={"w.npz": w1})
    same_shape = diff.diff(old, export(WEIGHTS_MODEL, WEIGHTS_SPEC, entry="model.py:lin", files={"w.npz": w2}))
    assert _kinds(same_shape) == {("compatible", "weights_changed")}
    (change,) = same_shape.changes
    assert (change.path, change.message) == ("weights.tensors", "weights: 1 of 1 bound tensor has new values, with "
                                             "the same names, shapes and dtypes (a data change)")
    assert same_shape.programs["lin"].status == "identical"
    assert not same_shape.fails("breaking") and same_shape.fails("any")
    reshaped = diff.diff(old, export(WEIGHTS_MODEL, WEIGHTS_SPEC, entry="model.py:lin", files={"w.npz": w3}))
    assert ("compatible", "weights_layout_changed") in _kinds(reshaped)
    assert ("breaking", "output_dimension_changed") in _kinds(reshaped)


HIDDEN_MODEL = '''
import jax


def mlp(x, *, p):
    return jax.nn.relu(x @ p["w1"]) @ p["w2"]
'''


def _hidden(width: int) -> dict:
    rng = np.random.default_rng(width)
    return {"w.npz": {"w1": rng.normal(size=(3, width)).astype(np.float32),
                      "w2": rng.normal(size=(width, 2)).astype(np.float32)}}


def test_a_resized_hidden_layer_breaks_rebinding_not_callers(export, run_cli):
    """Bound weights of another layout behind the same inputs and outputs: compatible for callers (--fail-on breaking
    passes), and each reshaped tensor breaks rebinding (--fail-on rebind fails); a changed output still breaks
    callers."""
    spec = WEIGHTS_SPEC
    old = export(HIDDEN_MODEL, spec, entry="model.py:mlp", files=_hidden(8))
    new = export(HIDDEN_MODEL, spec, entry="model.py:mlp", files=_hidden(16))
    report = diff.diff(old, new)
    assert [(c.severity, c.kind, c.breaks, c.message) for c in report.changes] == [
        ("compatible", "weights_layout_changed", "rebinders", "bound tensor 'p/w1': f32[3, 8] -> f32[3, 16] (callers "
         "pass the same inputs; it breaks rebinding: weights of the old layout no longer fit)"),
        ("compatible", "weights_layout_changed", "rebinders", "bound tensor 'p/w2': f32[8, 2] -> f32[16, 2] (callers "
         "pass the same inputs; it breaks rebinding: weights of the old layout no longer fit)"),
        ("compatible", "program_changed", None, "program changed (its StableHLO differs; same signature unless "
         "listed)")]
    assert (report.fails("breaking"), report.fails("rebind"), report.fails("any")) == (False, True, True)
    assert report.summary() == (f"{new} differs from {old}: 0 breaking, 3 compatible changes, 2 of which break "
                                f"rebinding (a bound tensor's layout).")
    res = run_cli("diff", old, new, "--fail-on", "breaking", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert [c["breaks"] for c in out["changes"]] == ["rebinders", "rebinders", None]
    assert (out["breaking"], out["compatible"], out["failed"]) == (0, 3, False)
    res = run_cli("diff", old, new, "--fail-on", "rebind")
    assert res.exit_code == 13
    assert res.stderr == (f"error[diff]: {new} differs from {old}: 0 breaking, 3 compatible changes, 2 of which break "
                          f"rebinding (a bound tensor's layout). Failing on changes that break callers or rebinding "
                          f"(--fail-on rebind).\n")
    removed = export(HIDDEN_MODEL.replace('@ p["w2"]', '@ p["w2"][:, :1]'), spec, entry="model.py:mlp",
                     files=_hidden(8))
    changed = diff.diff(old, removed)
    assert [(c.kind, c.breaks) for c in changed.breaking] == [("output_dimension_changed", "callers")]
    assert changed.fails("breaking") and changed.fails("rebind")


RANGED = '''jaxport: 1
dims: {n: {max: 64}}
args:
  - {shape: "n", dtype: i32, range: RANGE}
  - {shape: "n", dtype: f32}
'''
RANGED_MODEL = "def f(tok, x):\n    return x * tok\n"


@pytest.mark.parametrize(("before", "after", "expected"), [
    ("[0, 100]", "[0, 50]", ("breaking", "input_range_tightened", "callers",
                             "input 'tok': declared range [0, 100) -> [0, 50): 50 was in it and no longer is (a caller "
                             "that checks ranges, --check-ranges, is refused it)")),
    ("[10, 100]", "[20, 200]", ("breaking", "input_range_tightened", "callers",
                                "input 'tok': declared range [10, 100) -> [20, 200): 10 was in it and no longer is (a "
                                "caller that checks ranges, --check-ranges, is refused it)")),
    ("[0, 50]", "[0, 100]", ("compatible", "input_range_relaxed", None,
                             "input 'tok': declared range [0, 50) -> [0, 100): every value it held is still held")),
    ("[0, n]", "[0, 2*n]", ("undecided", "input_range_undecided", "callers",
                            "input 'tok': declared range [0, n) -> [0, 2*n): bounds that are dimension expressions "
                            "are not compared")),
])
def test_a_changed_range_is_classified(export, before, after, expected):
    old = export(RANGED_MODEL, RANGED.replace("RANGE", before))
    new = export(RANGED_MODEL, RANGED.replace("RANGE", after))
    (change,) = [c for c in diff.diff(old, new).changes if c.path == "inputs['tok'].range"]
    assert (change.severity, change.kind, change.breaks, change.message) == expected


def test_a_range_added_or_removed(export):
    plain = export(RANGED_MODEL, RANGED.replace(", range: RANGE", ""))
    ranged = export(RANGED_MODEL, RANGED.replace("RANGE", "[0, 100]"))
    (added,) = [c for c in diff.diff(plain, ranged).changes if c.path == "inputs['tok'].range"]
    assert (added.severity, added.kind, added.message) == (
        "breaking", "input_range_tightened", "input 'tok': a declared range [0, 100) is new: a caller that checks "
        "ranges (--check-ranges) is refused a value outside it")
    (removed,) = [c for c in diff.diff(ranged, plain).changes if c.path == "inputs['tok'].range"]
    assert (removed.severity, removed.kind, removed.message) == (
        "compatible", "input_range_relaxed", "input 'tok': declared range [0, 100) removed: no value is held to it")


def _scaled(state, x):
    return x * state["lr"]


def _like_manifest(tmp_path: Path, lr) -> dict:
    """The manifest of ``_scaled`` exported with ``state`` shaped like ``{"lr": lr}`` (a ``like:`` value)."""
    out = tmp_path / f"like-{type(lr).__name__}-{float(lr)}.jaxport"
    jaxport.export(_scaled, jaxport.Spec(args=[jaxport.like({"lr": lr}), "f32[3]"]), out)
    with jaxport.open_artifact(out) as art:
        return copy.deepcopy(art.manifest)


def test_a_weak_type_and_an_example_range_are_compared(tmp_path):
    """A Python number of a like: value is a weakly typed input whose example range is the number itself: made
    strict (a numpy float32), callers passing another dtype break; its example changing changes only what verify
    draws."""
    weak, strict = _like_manifest(tmp_path, 0.5), _like_manifest(tmp_path, np.float32(0.5))
    other = _like_manifest(tmp_path, 0.25)
    assert [(c.severity, c.kind, c.breaks, c.message) for c in diff.compare_manifests(weak, strict)] == [
        ("breaking", "input_weak_type_changed", "callers", "input 'state/lr': no longer weakly typed (weak f32[] -> "
         "f32[]): a caller passing another integer or float dtype whose values it kept (np.savez's int64 for a Python "
         "int) is refused")]
    assert [(c.severity, c.kind, c.breaks) for c in diff.compare_manifests(strict, weak)] == [
        ("compatible", "input_weak_type_changed", None)]
    assert [(c.severity, c.kind, c.message) for c in diff.compare_manifests(weak, other)
            if c.kind != "program_changed"] == [
        ("compatible", "input_range_changed", "input 'state/lr': the values random inputs are drawn from 0.5 (example) "
         "-> 0.25 (example) (verify and call --random draw others; no call is held to it)")]


# --- manifest-level rules that exports cannot easily produce -------------------------------------------------------


def _manifest(export) -> dict:
    with jaxport.open_artifact(export()) as art:
        return copy.deepcopy(art.manifest)


def test_changed_constraint_on_unbounded_variables_is_decided(export):
    """Without a max to enumerate, linear integer arithmetic decides the change both ways."""
    old = _manifest(export)
    new = copy.deepcopy(old)
    for m in (old, new):
        m["functions"]["f"]["dims"]["h"]["max"] = None
        m["functions"]["f"]["dims"]["b"]["max"] = None
    new["functions"]["f"]["constraints"] = ["b <= 16*h"]
    (change,) = diff.compare_manifests(old, new)
    assert (change.severity, change.kind, change.message) == (
        "compatible", "constraint_relaxed", "constraint 'b <= 8*h' -> 'b <= 16*h': every shape accepted before is "
        "still accepted (proved over the bounds)")
    (change,) = diff.compare_manifests(new, old)
    assert (change.severity, change.kind, change.message) == (
        "breaking", "constraint_tightened", "constraint 'b <= 16*h' -> 'b <= 8*h': fewer shapes accepted (b=17, h=2 "
        "was accepted and is now rejected)")


def test_version_changes(export):
    old = _manifest(export)
    new = copy.deepcopy(old)
    new["functions"]["f"]["calling_convention_version"] += 1
    new["functions"]["f"]["nr_devices"] = 8
    # A manifest of format 2.0 does not validate here (this jaxport refuses it): only its records can say 2.0.
    newer = model.replace(validate(new), format_version="2.0")
    assert {(c.severity, c.kind) for c in diff.compare_manifests(old, newer)} == {
        ("breaking", "format_changed"), ("breaking", "calling_convention_raised"), ("breaking", "devices_changed")}
    new = copy.deepcopy(old)
    new["format_version"] = "1.1"
    new["producer"]["jax"] = "0.10.3"
    assert [(c.severity, c.kind, c.path) for c in diff.compare_manifests(old, new)] == [
        ("compatible", "format_changed", "format_version"), ("compatible", "producer_changed", "producer.jax")]


def test_output_structure_changed(export):
    old = _manifest(export)
    new = copy.deepcopy(old)
    tree = new["functions"]["f"]["output_tree"]
    new["functions"]["f"]["output_tree"] = {"tuple": [tree]}
    assert [c.kind for c in diff.compare_manifests(old, new)] == ["output_structure_changed"]


def test_inputs_reordered(export):
    old = _manifest(export)
    new = copy.deepcopy(old)
    f = new["functions"]["f"]
    f["inputs"] = [f["inputs"][1], f["inputs"][0], *f["inputs"][2:]]
    assert [c.kind for c in diff.compare_manifests(old, new)] == ["inputs_reordered"]


# --- the command -----------------------------------------------------------------------------------------------------


def test_cli_fail_on_levels(export, run_cli):
    base, tightened, relaxed = export(), export(MODEL, _spec("max: 512", "max: 256")), \
        export(MODEL, _spec("max: 512", "max: 1024"))
    res = run_cli("diff", base, tightened)
    assert res.exit_code == 0 and res.stderr == ""
    assert "breaking" in res.stdout and "bound_tightened" in res.stdout
    # The bounds are also checked by the program's shape assertions, so its StableHLO changed too.
    assert f"{tightened} differs from {base}: 1 breaking, 1 compatible change." in res.stdout
    res = run_cli("diff", base, tightened, "--fail-on", "breaking")
    assert res.exit_code == 13
    assert res.stderr == (f"error[diff]: {tightened} differs from {base}: 1 breaking, 1 compatible change. Failing "
                          f"on breaking changes (--fail-on breaking).\n")
    assert run_cli("diff", base, relaxed, "--fail-on", "breaking").exit_code == 0
    res = run_cli("diff", base, relaxed, "--fail-on", "any", "--json")
    assert res.exit_code == 13
    out = json.loads(res.stdout)
    assert (out["failed"], out["breaking"], out["compatible"], out["fail_on"]) == (True, 0, 2, "any")
    assert [c["kind"] for c in out["changes"]] == ["bound_relaxed", "program_changed"]
    res = run_cli("diff", base, base, "--fail-on", "any")
    assert res.exit_code == 0
    assert re.search(r"program f: identical", res.stdout)


def test_cli_refuses_a_damaged_artifact(export, run_cli, tmp_path):
    bad = tmp_path / "bad.jaxport"
    data = bytearray(export().read_bytes())
    with jaxport.open_artifact(export()) as art:
        member = art.members["functions/f.jaxexport"]
        data[member.offset + member.size // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    res = run_cli("diff", export(), bad)
    assert res.exit_code == 8
    assert res.stderr.startswith(f"error[integrity]: {bad}: member 'functions/f.jaxexport'")
    assert "Traceback" not in res.stderr


def test_an_equality_written_the_other_way_round_changes_no_accepted_shape(export):
    """JAX applies ``a == c`` by replacing one variable with the other everywhere; the constraint left in the
    manifest then names a variable no input axis has, and accepts every shape. ``a == c`` against ``c == a`` was
    'constraint added (fewer shapes accepted: a=1, c=2 ...)', a counterexample no call can give."""
    model = "def g(x, y):\n    return x.sum() + y.sum()\n"
    spec = ('jaxport: 1\ndims:\n  a: {{min: 1, max: 100}}\n  c: {{min: 1, max: 100}}\nconstraints: ["{}"]\n'
            'args: ["f32[a]", "f32[c]"]\n')
    one, other = export(model, spec.format("a == c"), entry="model.py:g"), export(model, spec.format("c == a"),
                                                                                  entry="model.py:g")
    assert {s for s, _ in _kinds(diff.diff(one, other))} <= {"compatible"}
    assert {s for s, _ in _kinds(diff.diff(other, one))} <= {"compatible"}


def test_a_stablehlo_version_older_jax_cannot_read_is_breaking():
    """A newer JAX's export raises the StableHLO version past what the oldest JAX that read the old artifact reads:
    its consumers cannot load the new one (jax 0.10.2 refuses StableHLO 1.18.0). One the same releases read is
    compatible."""
    from jaxport.artifact.window import compat

    old = jaxport.open_artifact(Path(__file__).parents[1] / "golden" / "1.0" / "mlp.jaxport").model
    f = old.functions["predict"]
    newer = "1.18.0"
    assert compat.oldest_reader(f.stablehlo_version) != compat.oldest_reader(newer)
    raised = copy.deepcopy(old.to_json())
    raised["functions"]["predict"]["stablehlo_version"] = newer
    changes = [c for c in diff.compare_manifests(old, raised) if "stablehlo" in c.kind]
    assert [(c.severity, c.kind) for c in changes] == [("breaking", "stablehlo_version_raised")]
    assert changes[0].message == (
        f"StableHLO version {f.stablehlo_version} -> {newer}: JAX reads it from {compat.oldest_reader(newer)} on, no "
        f"longer from {compat.oldest_reader(f.stablehlo_version)}, so consumers on an older JAX cannot load it "
        f"(export it --for-jax {compat.oldest_reader(f.stablehlo_version)} to keep them)")
    lowered = [c for c in diff.compare_manifests(raised, old) if "stablehlo" in c.kind]
    assert [(c.severity, c.kind) for c in lowered] == [("compatible", "stablehlo_version_changed")]
