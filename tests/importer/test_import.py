"""``jaxport import``: StableHLO modules written by other producers become artifacts whose outputs equal the
expected ones through ``call``, ``jaxport.load`` and the IREE runtime; the manifest describes them; every refusal
has its exact message and exit code.

The corpus is ``tests/foreign`` (see its README): hand-written modules, modules in the styles of torch-xla and older
JAX, and modules the current JAX wrote, each with inputs and expected outputs computed with numpy.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jax
import jsonschema
import numpy as np
import pytest
from referencing import Registry, Resource

import jaxport
from jaxport.artifact import model, summary
from jaxport.artifact.bounds import Bounds
from jaxport.artifact.container import open_artifact
from jaxport.importer import build as importer
from jaxport.importer import signature
from jaxport.program.module_scan import module_text
from tests.support import REPO, npz_arrays

FOREIGN = Path(__file__).resolve().parents[1] / "foreign"
CASES = json.loads((FOREIGN / "cases.json").read_text())
HOW = ("Give MLIR text (.mlir), MLIR bytecode, or a StableHLO portable artifact (.mlirbc) whose functions use the "
       "func, stablehlo and chlo dialects, or a JAX serialization (.jaxexport: Exported.serialize()'s bytes).")


def _assert_outputs(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(expected)
    for name, want in expected.items():
        have = np.asarray(got[name])
        assert (have.dtype, have.shape) == (want.dtype, want.shape), name
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(have, want, err_msg=name)
        else:
            np.testing.assert_allclose(have, want, rtol=2e-6, atol=2e-6, err_msg=name)


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """A copy of the corpus as the current directory, so that messages name files as a user would."""
    d = tmp_path / "foreign"
    shutil.copytree(FOREIGN, d)
    monkeypatch.chdir(d)
    return d


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, Path]:
    """Every case of the corpus imported with the Python API, by case name."""
    d = tmp_path_factory.mktemp("imported")
    out = {}
    for case in CASES:
        spec = FOREIGN / case["spec"] if case["spec"] else None
        result = importer.import_stablehlo(FOREIGN / case["module"], spec, output=d / f"{case['name']}.jaxport",
                                           write_manifest=False)
        out[case["name"]] = result.path
    return out


# --- the corpus ------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_through_the_command_line(case, work, run_cli):
    spec = ["--shapes", case["spec"]] if case["spec"] else []
    res = run_cli("import", case["module"], *spec, "-o", "out.jaxport", *case["args"])
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("Imported out.jaxport (")
    res = run_cli("call", "out.jaxport", "--inputs", f"{case['name']}.inputs.npz", "-o", "out.npz", "--no-cache")
    assert res.exit_code == 0, res.stderr
    _assert_outputs(npz_arrays(work / "out.npz"), npz_arrays(work / f"{case['name']}.expected.npz"))
    res = run_cli("inspect", "out.jaxport")
    assert res.exit_code == 0, res.stderr
    assert f"entry point {case['module']}:main;" in res.stdout


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_through_python(case, imported):
    inputs = npz_arrays(FOREIGN / f"{case['name']}.inputs.npz")
    expected = npz_arrays(FOREIGN / f"{case['name']}.expected.npz")
    loaded = jaxport.load(imported[case["name"]])
    assert loaded.input_names == case["inputs"]
    assert loaded.output_names == case["outputs"]
    _assert_outputs(dict(loaded.run(inputs).leaves), expected)
    by_keyword = loaded(**inputs)  # every imported argument can be passed by its name
    leaves = jax.tree_util.tree_leaves(by_keyword)
    _assert_outputs({n: np.asarray(v) for n, v in zip(case["outputs"], leaves)}, expected)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_through_iree(case, imported):
    pytest.importorskip("iree.runtime")
    loaded = jaxport.load(imported[case["name"]], runtime="iree")
    run = loaded.run(npz_arrays(FOREIGN / f"{case['name']}.inputs.npz"))
    _assert_outputs(dict(run.leaves), npz_arrays(FOREIGN / f"{case['name']}.expected.npz"))


def test_corpus_is_what_cases_json_says():
    files = {p.name for p in FOREIGN.iterdir()}
    for case in CASES:
        assert case["module"] in files
        assert case["spec"] is None or case["spec"] in files
        assert sorted(npz_arrays(FOREIGN / f"{case['name']}.inputs.npz")) == sorted(case["inputs"])
        assert sorted(npz_arrays(FOREIGN / f"{case['name']}.expected.npz")) == sorted(case["outputs"])
    for path in FOREIGN.iterdir():  # the committed modules record no machine's paths
        assert b"/tmp/" not in path.read_bytes() and b"/home/" not in path.read_bytes(), path.name


# --- what the manifest says --------------------------------------------------------------------------------------


def _registry() -> Registry:
    schemas = [REPO / "specs" / "schemas" / "manifest.schema.json", REPO / "specs" / "schemas" / "cli" /
               "export.schema.json"]
    resources = []
    for path in schemas:
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def test_json_output_and_manifest_follow_the_schemas(work, run_cli):
    res = run_cli("import", "scale_rows.mlir", "--shapes", "scale_rows.yaml", "-o", "scale.jaxport", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    schema = json.loads((REPO / "specs" / "schemas" / "cli" / "export.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema, registry=_registry()).iter_errors(out)) == []
    assert out["artifact"] == "scale.jaxport"
    assert out["manifest_file"] == "scale.jaxport.manifest.json"
    with open_artifact(work / "scale.jaxport") as art:
        assert json.loads(art.manifest_bytes) == out["manifest"]
    m = out["manifest"]
    assert m["metadata"] == {"name": "scale-rows", "version": "1.0.0", "labels": {}, "description": None}
    assert m["source"] == {"spec": "scale_rows.yaml"}
    f = m["functions"]["scale_rows"]
    assert f["entrypoint"] == "scale_rows.mlir:main"
    assert f["payload"] == "functions/scale_rows.jaxexport"
    assert f["calling_convention_version"] == jax.config.jax_export_calling_convention_version
    assert f["platforms"] == ["cpu"]
    assert f["signature"] == {"args": [], "kwargs": {"x": {"input": 0}, "scale": {"input": 1}}}
    assert [(i["name"], i["spec_path"], i["shape"], i["dtype"]) for i in f["inputs"]] == [
        ("x", "kwargs['x']", ["batch", 3], "float32"), ("scale", "kwargs['scale']", [3], "float32")]
    assert [(o["name"], o["shape"], o["dtype"]) for o in f["outputs"]] == [("output", ["batch", 3], "float32")]
    assert f["dims"] == {"batch": {"min": 1, "max": 1024,
                                   "derived_from": {"input": "x", "axis": 0, "expression": "batch"}}}
    assert f["custom_calls"] == [] and f["x64"] is False and f["nr_devices"] == 1
    assert f["kept_inputs"] == [0, 1]


def test_inspect_shows_the_signature(work, run_cli):
    assert run_cli("import", "scale_rows.mlir", "-s", "scale_rows.yaml", "-o", "s.jaxport").exit_code == 0
    res = run_cli("inspect", "s.jaxport")
    assert res.exit_code == 0
    assert "scale_rows: scale_rows(x: f32[batch, 3], scale: f32[3]) -> f32[batch, 3]   where 1 <= batch <= 1024" \
        in res.stdout


def test_dynamic_output_size_is_an_expression_of_the_inputs(imported):
    with open_artifact(imported["stack_twice"]) as art:
        f = art.manifest["functions"]["stack_twice"]
    assert [o["shape"] for o in f["outputs"]] == [["2*n", 2], [2]]
    loaded = jaxport.load(imported["stack_twice"])
    for n in (1, 4, 9):
        x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
        first, second = loaded(x)
        np.testing.assert_array_equal(first, np.concatenate([x, x]))
        np.testing.assert_array_equal(second, x.sum(axis=0))


def test_a_static_spec_specializes_a_dynamic_module(imported):
    with open_artifact(imported["scale_rows_static"]) as art:
        f = art.manifest["functions"]["scale_rows"]
        payload = art.read(f["payload"])
    assert [i["shape"] for i in f["inputs"]] == [[4, 3], [3]]
    assert f["dims"] == {}
    text = module_text(jax.export.deserialize(bytearray(payload)).mlir_module_serialized)
    assert "?" not in text  # refined at import: the stored program has static shapes throughout


def test_the_spec_bounds_are_checked_before_running(work, run_cli):
    assert run_cli("import", "scale_rows.mlir", "-s", "scale_rows.yaml", "-o", "s.jaxport").exit_code == 0
    res = run_cli("call", "s.jaxport", "--random", "--dim", "batch=2000", "--no-cache")
    assert res.exit_code == 2
    assert res.stderr == "error[usage]: --dim batch=2000: 2000 is outside the spec bound 1 <= batch <= 1024.\n"


def test_tuple_result_is_flattened(imported):
    with open_artifact(imported["torch_linear"]) as art:
        f = art.manifest["functions"]["torch_linear"]
        exp = jax.export.deserialize(bytearray(art.read(f["payload"])))
    assert f["output_tree"] == {"output": 0}
    text = module_text(exp.mlir_module_serialized)
    assert "func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<3x4xf32>, %arg2: tensor<2x4xf32>) -> " \
           "tensor<2x3xf32>" in text
    assert "func.func private @_jaxport_imported_main(" in text


def test_int64_module_records_x64(imported):
    with open_artifact(imported["int_compare"]) as art:
        f = art.manifest["functions"]["int_compare"]
    assert f["x64"] is True
    assert [(o["name"], o["dtype"]) for o in f["outputs"]] == [("0", "int64"), ("1", "bool")]


def test_platform_index_is_added_for_several_platforms(work, run_cli):
    (work / "two.yaml").write_text('jaxport: 1\nargs: ["f32[4]", "f32[4]"]\nplatforms: [cpu, cuda]\n')
    res = run_cli("import", "add.mlir", "-s", "two.yaml", "-o", "two.jaxport")
    assert res.exit_code == 0, res.stderr
    with open_artifact(work / "two.jaxport") as art:
        f = art.manifest["functions"]["add"]
        exp = jax.export.deserialize(bytearray(art.read(f["payload"])))
    assert f["platforms"] == ["cpu", "cuda"] and exp.uses_global_constants
    assert 'func.func @main(%arg0: tensor<i32> {jax.global_constant = "_platform_index"}, %arg1: ' \
           'tensor<4xf32>, %arg2: tensor<4xf32>)' in module_text(exp.mlir_module_serialized)
    inputs = npz_arrays(work / "add.inputs.npz")
    _assert_outputs(dict(jaxport.load(work / "two.jaxport").run(inputs).leaves), npz_arrays(work / "add.expected.npz"))


OLD_MULTIPLATFORM = """\
// main as JAX wrote it for two platforms before the platform index had an attribute.
func.func @main(%arg0: tensor<i32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %arg1, %arg1 : tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""


def test_platform_index_without_attribute(work, run_cli):
    (work / "old.mlir").write_text(OLD_MULTIPLATFORM)
    (work / "one.yaml").write_text('jaxport: 1\nargs: ["f32[3]"]\n')
    res = run_cli("import", "old.mlir", "-s", "one.yaml", "-o", "old.jaxport")
    assert res.exit_code == 3
    assert res.stderr == (
        "error[spec]: one.yaml: the spec gives 1 argument, but main in old.mlir takes 2: main(tensor<i32>, "
        "tensor<3xf32>) -> (tensor<3xf32>). Give one array per argument of main, in order. If main's first argument "
        "is the platform index of a module lowered for several platforms, list those platforms, in the module's "
        "order, under 'platforms'.\n")
    res = run_cli("import", "old.mlir", "-s", "one.yaml", "--platform", "cpu", "--platform", "tpu", "-o", "old.jaxport")
    assert res.exit_code == 0, res.stderr
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(jaxport.load(work / "old.jaxport")(x), 2 * x)


def test_calling_convention_is_recorded(work, run_cli):
    lo = jax.export.minimum_supported_calling_convention_version
    res = run_cli("import", "add.mlir", "--calling-convention", str(lo), "-o", "add.jaxport")
    assert res.exit_code == 0, res.stderr
    assert f"platforms: cpu; calling convention {lo}" in res.stdout
    with open_artifact(work / "add.jaxport") as art:
        f = art.manifest["functions"]["add"]
        assert f["calling_convention_version"] == lo
        assert jax.export.deserialize(bytearray(art.read(f["payload"]))).calling_convention_version == lo


def test_an_import_into_a_directory_writes_name_jaxport_there_and_says_so(work, run_cli):
    Path("out").mkdir()
    res = run_cli("import", "add.mlir", "-o", "out")
    assert res.exit_code == 0, res.stderr
    assert sorted(p.name for p in Path("out").iterdir()) == ["add.jaxport", "add.jaxport.manifest.json"]
    size = summary.human_bytes(Path("out/add.jaxport").stat().st_size)
    with open_artifact(work / "out" / "add.jaxport") as art:
        f = art.model.functions["add"]
        assert res.stdout == (f"Imported out/add.jaxport ({size})\n  {summary.signature('add', f)}\n"
                              f"  platforms: cpu; calling convention {f.calling_convention_version}\n"
                              f"  manifest: out/add.jaxport.manifest.json\n")


@pytest.mark.parametrize("version", ["8", "11"])
def test_unsupported_calling_convention(version, work, run_cli):
    res = run_cli("import", "add.mlir", "--calling-convention", version)
    assert res.exit_code == 2
    lo = jax.export.minimum_supported_calling_convention_version
    hi = jax.export.maximum_supported_calling_convention_version
    assert res.stderr == (f"error[usage]: --calling-convention {version}: this JAX ({jax.__version__}) supports "
                          f"calling conventions {lo} to {hi}. State one of those; the module is wrapped to follow "
                          f"it.\n")
    assert not (work / "add.jaxport").exists()


CUSTOM_CALL = """\
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @my_vendor_kernel(%arg0) {api_version = 4 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def test_custom_calls_are_checked_against_the_allowlist(work, run_cli):
    (work / "kernel.mlir").write_text(CUSTOM_CALL)
    message = (
        "kernel.mlir: the program uses custom-call targets that JAX does not guarantee to keep stable:\n"
        "  my_vendor_kernel (used 1x, first at kernel.mlir:2:8)\nAn artifact using them may stop loading with another "
        "jaxlib. If you ship the kernels yourself, allow them with 'allow_custom_calls: [my_vendor_kernel]' in the "
        "spec or --allow-custom-call my_vendor_kernel.")
    with pytest.raises(jaxport.PolicyError, match=f"^{re.escape(message)}$"):
        importer.import_stablehlo("kernel.mlir", output="k.jaxport")
    res = run_cli("import", "kernel.mlir", "-o", "k.jaxport")
    assert res.exit_code == 6
    assert res.stderr.startswith("error[policy]: kernel.mlir: the program uses custom-call targets that JAX does not")
    assert not (work / "k.jaxport").exists()
    res = run_cli("import", "kernel.mlir", "--allow-custom-call", "my_vendor_kernel", "-o", "k.jaxport")
    assert res.exit_code == 0, res.stderr
    with open_artifact(work / "k.jaxport") as art:
        f = art.manifest["functions"]["kernel"]
    assert f["custom_calls"] == [{"target": "my_vendor_kernel", "count": 1, "stability": "allowed"}]
    assert f["allowed_custom_calls"] == ["my_vendor_kernel"]
    assert f["disabled_safety_checks"] == ["custom_call:my_vendor_kernel"]


# --- refusals ----------------------------------------------------------------------------------------------------

ADD_SIG = "main(tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>)"

SPEC_ERRORS = [
    ('args: ["f32[4]"]',
     f"spec.yaml: the spec gives 1 argument, but main in add.mlir takes 2: {ADD_SIG}. Give one array per argument "
     f"of main, in order."),
    ('args: ["f32[4]", "f32[4]", "f32[4]"]',
     f"spec.yaml: the spec gives 3 arguments, but main in add.mlir takes 2: {ADD_SIG}. Give one array per argument "
     f"of main, in order."),
    ('args: ["f32[4]", "i32[4]"]',
     "spec.yaml:2: args[1] is i32[4], but main's argument 1 is tensor<4xf32>: the dtype differs. Write 'f32[...]' "
     "(float32)."),
    ('args: ["f32[4]", "f32[4, 1]"]',
     "spec.yaml:2: args[1] is f32[4, 1], but main's argument 1 is tensor<4xf32>: rank 2 against 1. Give 1 "
     "dimensions."),
    ('args: ["f32[5]", "f32[4]"]',
     "spec.yaml:2: args[0] is f32[5], but main's argument 0 is tensor<4xf32>: axis 0 has the static size 4 in the "
     "module. Write 4 there."),
    ('dims: [b]\nargs: ["f32[4]", "f32[b]"]',
     "spec.yaml:3: args[1] is f32[b], but main's argument 1 is tensor<4xf32>: axis 0 has the static size 4 in the "
     "module. Write 4 there."),
    ('args: [["f32[4]", "f32[4]"]]',
     "spec.yaml:1: args[0] is a list; a StableHLO module takes a flat list of arrays, so an imported argument is one "
     "array leaf such as 'f32[b, 3]' per argument of main."),
    ('args: ["f32[4]", {static: 3}]',
     "spec.yaml:2: args[1] is a static value; a StableHLO module takes a flat list of arrays, so an imported "
     "argument is one array leaf such as 'f32[b, 3]' per argument of main."),
    ('args: ["f32[4]", {bind: w.npy}]',
     "spec.yaml:2: args[1] is a bound value; a StableHLO module takes a flat list of arrays, so an imported "
     "argument is one array leaf such as 'f32[b, 3]' per argument of main."),
    ('kwargs: {"a b": "f32[4]", c: "f32[4]"}',
     "spec.yaml:1: kwargs['a b']: an imported argument's name must be an identifier (letters, digits, '_'): callers "
     "pass it by that name."),
    ('args: ["f32[4]"]\nkwargs: {arg0: "f32[4]"}',
     "spec.yaml:1: kwargs['arg0'] has the name of positional argument arg0; rename it."),
    ('args: ["f32[4]", "f32[4]"]\nvjp_order: 1',
     "spec.yaml: 'vjp_order': jaxport cannot differentiate a foreign module, so an imported function has no "
     "derivative to store. Remove 'vjp_order'."),
    ('functions:\n  f: {args: ["f32[4]", "f32[4]"]}',
     "spec.yaml: 'functions' describes several Python functions; a module has one function, main. Give its "
     "arguments as top-level 'args' (and 'kwargs' to name them)."),
]


@pytest.mark.parametrize(("body", "message"), SPEC_ERRORS, ids=[str(i) for i in range(len(SPEC_ERRORS))])
def test_spec_that_does_not_fit_main(body, message, work, run_cli):
    (work / "spec.yaml").write_text(f"jaxport: 1\n{body}\n")
    res = run_cli("import", "add.mlir", "--shapes", "spec.yaml", "-o", "bad.jaxport")
    assert (res.exit_code, res.stderr) == (3, f"error[spec]: {message}\n")
    assert not (work / "bad.jaxport").exists()


MODULE_ERRORS = [  # a file that is no module is exit 7, as a file that is no artifact
    ("not mlir at all\n", 7,
     f"error[format]: m.mlir: cannot read a StableHLO module: m.mlir:1:1: custom op 'not' is unknown (tried "
     f"'builtin.not' as well). {HOW}"),
    ("", 7, f"error[format]: m.mlir: the module file is empty. {HOW}"),
    (b"\xff\xfe\x00garbage", 7,
     f"error[format]: m.mlir: not a StableHLO module: neither MLIR bytecode nor UTF-8 text (byte 0 is 0xff). "
     f"{HOW}"),
    (b"ML\xefR\x00garbage", 7,
     f"error[format]: m.mlir: cannot read a StableHLO module: m.mlir:0:0: attempting to parse 8 bytes when only 7 "
     f"remain. {HOW}"),
    ("func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  return %arg0 : tensor<4xf32>\n}\n", 4,
     "error[entrypoint]: m.mlir: the module has no function 'main'; it defines 'forward'. jaxport imports a "
     "module's public 'main' function: rename the entry function to main."),
    ('func.func @main(%arg0: tensor<i64> {jax.global_constant = "b"}, %arg1: tensor<?x3xf32>) -> tensor<?x3xf32> '
     '{\n  return %arg1 : tensor<?x3xf32>\n}\n', 4,
     "error[entrypoint]: m.mlir: main's argument 0 (tensor<i64>) is the value of dimension variable 'b' "
     "(jax.global_constant), which the caller would have to pass: this is a JAX lowering with symbolic shapes, not "
     "an export. Export it with jax.export (whose main computes its dimension variables from the arrays), or lower "
     "it with concrete shapes."),
    ("func.func @main(%arg0: !stablehlo.token, %arg1: tensor<3xf32>) -> (!stablehlo.token, tensor<3xf32>) {\n"
     "  return %arg0, %arg1 : !stablehlo.token, tensor<3xf32>\n}\n", 4,
     "error[entrypoint]: m.mlir: main's argument 0 is a token (!stablehlo.token): the module has side effects "
     "(ordered effects), which jaxport does not import. Produce it without effects."),
    ("func.func @main(%arg0: tuple<tensor<3xf32>>) -> tensor<3xf32> {\n"
     "  %0 = stablehlo.get_tuple_element %arg0[0] : (tuple<tensor<3xf32>>) -> tensor<3xf32>\n"
     "  return %0 : tensor<3xf32>\n}\n", 4,
     "error[entrypoint]: m.mlir: main's argument 0 has type tuple<tensor<3xf32>>; jaxport imports functions whose "
     "arguments are ranked tensors."),
    ("func.func @main(%arg0: tensor<3xui8>) -> tensor<3xf8E4M3FNUZ> {\n"
     "  %0 = stablehlo.convert %arg0 : (tensor<3xui8>) -> tensor<3xf8E4M3FNUZ>\n"
     "  return %0 : tensor<3xf8E4M3FNUZ>\n}\n",
     4, "error[entrypoint]: m.mlir: main's result 0 (tensor<3xf8E4M3FNUZ>) has element type f8E4M3FNUZ, which jaxport "
        "does not support. Supported: i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64, bf16, f16, f32, f64, "
        "complex<f32>, complex<f64>, f8E4M3FN, f8E5M2, i4, ui4, f4E2M1FN."),
    ("module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {\n"
     "  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n    return %arg0 : tensor<4xf32>\n  }\n}\n", 4,
     "error[entrypoint]: m.mlir: the module is partitioned for 4 devices (mhlo.num_partitions, mhlo.num_replicas); "
     "jaxport imports single-device modules."),
    ("func.func @main(%arg0: tensor<?x3xf32>) -> tensor<?x3xf32> {\n  return %arg0 : tensor<?x3xf32>\n}\n", 3,
     "error[spec]: m.mlir: main's argument 0 (tensor<?x3xf32>) has dynamic dimensions; give a spec (--shapes) whose "
     "'args' name them, e.g. args: [\"f32[b, 3]\"]."),
]


@pytest.mark.parametrize(("content", "code", "message"), MODULE_ERRORS, ids=[str(i) for i in range(len(MODULE_ERRORS))])
def test_module_that_cannot_be_imported(content, code, message, work, run_cli):
    path = work / "m.mlir"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    res = run_cli("import", "m.mlir", "-o", "bad.jaxport")
    assert (res.exit_code, res.stderr) == (code, message + "\n")
    assert not (work / "bad.jaxport").exists()


def test_missing_module(work, run_cli):
    res = run_cli("import", "nowhere.mlir", "--json")
    assert res.exit_code == 7
    assert json.loads(res.stdout) == {"error": {"kind": "format", "message": "nowhere.mlir: module file not found.",
                                                "exit_code": 7}}


NON_LINEAR = """\
func.func @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  %n = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?xf32>) -> tensor<i32>
  %nn = stablehlo.multiply %n, %n : tensor<i32>
  %s = stablehlo.reshape %nn : (tensor<i32>) -> tensor<1xi32>
  %0 = stablehlo.dynamic_iota %s, dim = 0 : (tensor<1xi32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""


def test_output_size_that_is_not_linear(work, run_cli):
    (work / "square.mlir").write_text(NON_LINEAR)
    (work / "n.yaml").write_text('jaxport: 1\nargs: ["f32[n]"]\n')
    res = run_cli("import", "square.mlir", "-s", "n.yaml")
    assert res.exit_code == 5
    assert res.stderr == (
        "error[export]: square.mlir: main's result 0 (tensor<?xf32>) has a dynamic size on axis 0 that is not a "
        "linear function of n (sizes seen: n=5: 25; n=6: 36; n=7: 49). jaxport records output shapes as expressions "
        "of the input dimensions: make that size static, or specialize the input dimensions in the spec.\n")
    (work / "n4.yaml").write_text('jaxport: 1\nargs: ["f32[4]"]\n')
    assert run_cli("import", "square.mlir", "-s", "n4.yaml", "-o", "sq.jaxport").exit_code == 0
    np.testing.assert_array_equal(jaxport.load(work / "sq.jaxport")(np.zeros(4, np.float32)), np.arange(16.0))


def test_multiplatform_module_needs_its_platforms(work, run_cli):
    (work / "one.yaml").write_text('jaxport: 1\nargs: ["f32[3]"]\n')
    res = run_cli("import", "jax_export_multiplatform.mlirbc", "-s", "one.yaml")
    assert res.exit_code == 3
    assert res.stderr == (
        "error[spec]: one.yaml: main in jax_export_multiplatform.mlirbc takes a platform index first (the module was "
        "lowered for several platforms); list those platforms, in the module's order, under 'platforms' (or repeat "
        "--platform).\n")


# --- other properties --------------------------------------------------------------------------------------------


def test_import_is_reproducible_and_records_no_directory(work, run_cli):
    for out in ("a.jaxport", "b.jaxport"):
        assert run_cli("import", str(work / "scale_rows.mlir"), "-s", "scale_rows.yaml", "-o", out).exit_code == 0
    data = (work / "a.jaxport").read_bytes()
    assert data == (work / "b.jaxport").read_bytes()
    assert str(work).encode() not in data
    with open_artifact(work / "a.jaxport") as art:
        exp = jax.export.deserialize(bytearray(art.read("functions/scale_rows.jaxexport")))
    text = module_text(exp.mlir_module_serialized, debug_info=True)
    assert 'loc("scale_rows.mlir":' in text and 'loc("-"' not in text


def test_strip_locations(work, run_cli):
    assert run_cli("import", "add.mlir", "--strip-locations", "-o", "add.jaxport").exit_code == 0
    with open_artifact(work / "add.jaxport") as art:
        exp = jax.export.deserialize(bytearray(art.read("functions/add.jaxexport")))
    assert "add.mlir" not in module_text(exp.mlir_module_serialized, debug_info=True)


def test_names_and_options(work, run_cli):
    res = run_cli("import", "add.mlir", "--function", "plus", "--name", "adder", "--version", "2.0", "-o", ".",
                  "--no-manifest")
    assert res.exit_code == 0, res.stderr
    with open_artifact(work / "adder.jaxport") as art:
        assert list(art.manifest["functions"]) == ["plus"]
        assert art.manifest["metadata"]["version"] == "2.0"
    assert not (work / "adder.jaxport.manifest.json").exists()
    res = run_cli("import", "add.mlir", "--function", "a-b")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: --function 'a-b': a function name must be an identifier "
                                              "(letters, digits, '_').\n")


def test_verify_with_iree_compares_the_runtimes(work, run_cli):
    pytest.importorskip("iree.runtime")
    assert run_cli("import", "scale_rows.mlir", "-s", "scale_rows.yaml", "-o", "s.jaxport").exit_code == 0
    res = run_cli("verify", "s.jaxport", "--runtime", "iree", "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["passed"] is True  # the spec describes the artifact, and IREE's outputs equal JAX's
    assert len(report["cases"]) >= 2


def test_module_function_is_the_live_function_of_verify(imported):
    with open_artifact(imported["scale_rows"]) as art:
        f = art.model.functions["scale_rows"]
    live = importer.module_function(FOREIGN / "scale_rows.mlir", f)
    inputs = npz_arrays(FOREIGN / "scale_rows.inputs.npz")
    np.testing.assert_allclose(live(**inputs), npz_arrays(FOREIGN / "scale_rows.expected.npz")["output"], rtol=2e-6)


def test_help_lists_the_command(run_cli):
    res = run_cli("--help")
    assert re.search(r"^  import +Import a StableHLO module written by another producer", res.stdout, re.M)
    res = run_cli("import", "--help")
    assert res.exit_code == 0 and "--calling-convention N" in res.stdout


def test_a_zero_minimum_is_honoured_as_written(work):
    """``min: 0`` (which the format allows, and a spec cannot write) reads as written on the import path that
    ``verify`` takes for an imported artifact (``artifact.bounds``): the sizes probed to fit an output expression go
    down to 0, so the first output is fitted as ``2*n``. Read as 1, as it once was, the only size probed would be 1
    and that output would be recorded as the constant 2 rows. JAX itself calls a dimension variable from 1 up."""
    inputs = (model.Input("arg0", ("n", 2), "float32"),)
    f = model.Function("functions/stack_twice.jaxexport", 9, ("cpu",), inputs,
                       (model.Output("0", ("2*n", 2), "float32"), model.Output("1", (2,), "float32")),
                       model.Signature((model.CallNode("input", 0, "arg0"),)), dims={"n": model.DimVar(Bounds(0, 1))})
    spec, inputs = signature.spec_from_manifest(f, "stack_twice.mlir")
    assert {v: (d.min, d.max) for v, d in spec.dims.items()} == {"n": (0, 1)}
    assert signature.pseudo_function(inputs, spec, []).bounds == {"n": Bounds(0, 1)}
    built = importer.build("stack_twice.mlir", inputs, spec, name="stack_twice", platforms=["cpu"],
                           calling_convention=importer._check_calling_convention(None), allow_custom_calls=[])
    assert [str(a) for a in built.lowered.exported.out_avals] == ["float32[2*n,2]", "float32[2]"]
    x = np.arange(2, dtype=np.float32).reshape(1, 2)
    first, second = importer.module_function("stack_twice.mlir", f)(x)
    np.testing.assert_array_equal(first, np.concatenate([x, x]))
    np.testing.assert_array_equal(second, x.sum(axis=0))


def test_output_expressions_are_fitted_below_an_upper_bound(work, run_cli):
    """A variable whose upper bound is the first size probed is probed downwards, to its lower bound."""
    (work / "small.yaml").write_text('jaxport: 1\ndims: {n: {min: 1, max: 2}}\nargs: ["f32[n, 2]"]\n')
    res = run_cli("import", "stack_twice.mlir", "-s", "small.yaml", "-o", "s.jaxport")
    assert res.exit_code == 0, res.stderr
    with open_artifact(work / "s.jaxport") as art:
        f = art.manifest["functions"]["stack_twice"]
    assert {v: (d["min"], d["max"]) for v, d in f["dims"].items()} == {"n": (1, 2)}
    assert [o["shape"] for o in f["outputs"]] == [["2*n", 2], [2]]
    loaded = jaxport.load(work / "s.jaxport")
    for n in (1, 2):
        x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
        first, second = loaded(x)
        np.testing.assert_array_equal(first, np.concatenate([x, x]))
        np.testing.assert_array_equal(second, x.sum(axis=0))
