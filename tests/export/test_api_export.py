"""``jaxport.export`` from Python: live callables and models with in-memory weights, specs given as dicts, YAML text
or ``jaxport.Spec``, results that are saved, turned into bytes or loaded in-process, and ``--bind`` of a parameter
the spec does not list."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.artifact.container import open_artifact
from jaxport.errors import EntrypointError, SpecError, UsageError
from jaxport.export.entry.entrypoint import load_attribute
from jaxport.spec import is_yaml_text
from tests.support import EXAMPLES

TIGHT = {"rtol": 1e-5, "atol": 1e-6}
X_SPEC = {"jaxport": 1, "dims": {"batch": {"min": 1, "max": 64}}, "args": ["f32[batch, 16]"]}
IN_MEMORY_NOTE = ("which 'jaxport verify' cannot import: the artifact records <in-memory>:{name} as its entry point, "
                  "so verify needs the function given with --against FILE.py:NAME. Define it at the top level of a "
                  "module file (not in __main__ or a notebook) to have it recorded.")


def _import(path: Path, name: str, monkeypatch: pytest.MonkeyPatch):
    """The module of ``path``, imported as ``name`` (in ``sys.modules`` for the test's duration)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _warning(fname: str, what: str) -> str:
    return f"function {fname!r} was exported from {what}, " + IN_MEMORY_NOTE.format(name=fname)


# --- models from live objects, with in-memory weights ---------------------------------------------------------------


def test_flax_linen_variables_in_memory(example_dir, monkeypatch):
    work = example_dir("flax_linen")
    model = _import(work / "model.py", "api_linen_model", monkeypatch)
    variables = model.init_variables(seed=3)  # not the module's VARIABLES: the weights given are the ones stored
    spec = {"jaxport": 1, "dims": {"batch": {"min": 1, "max": 32}}, "args": ["f32[batch, 8, 8, 1]"]}
    result = jaxport.export(model.apply, spec, bind={"variables": variables})
    assert result.path is None and result.warnings == []
    m = result.manifest
    f = m["functions"]["apply"]
    assert f["entrypoint"] == "model.py:apply"  # relative to the root (the current directory for a dict spec)
    assert f["signature"] == {"args": [{"bound": "<in-memory>", "name": "variables"}, {"input": 0, "name": "x"}],
                              "kwargs": {}}
    assert m["source"] == {"spec": None, "binds": {"variables": "<in-memory>"}}
    assert f["weights"] == sorted(f["weights"]) and "variables/batch_stats/BatchNorm_0/mean" in f["weights"]
    x = _x(5, 8, 8, 1)
    expected = np.asarray(model.MODEL.apply(variables, x))
    np.testing.assert_allclose(result.load()(x), expected, **TIGHT)
    path = result.save(work / "linen.jaxport")
    assert path == work / "linen.jaxport" == result.path
    np.testing.assert_allclose(jaxport.load(path)(x), expected, **TIGHT)
    # the stored tensors are the given values, not the module's
    with open_artifact(path) as art:
        assert art.manifest["weights"]["tensors"]["variables/params/Dense_0/kernel"]["sha256"] != \
            hashlib.sha256(np.asarray(model.VARIABLES["params"]["Dense_0"]["kernel"]).tobytes()).hexdigest()


def test_flax_linen_program_equals_the_cli_export_of_the_example(example_dir, monkeypatch, run_cli):
    """The example's spec binds model.py:VARIABLES in its args; the API binds the same values from memory to a spec
    that lists only x: the program bytes are the same."""
    work = example_dir("flax_linen")
    assert run_cli("export", "model.py:apply", "-s", "spec.yaml", "-o", "cli.jaxport").exit_code == 0
    model = _import(work / "model.py", "api_linen_model_cli", monkeypatch)
    spec = {"jaxport": 1, "dims": {"batch": {"min": 1, "max": 1024}}, "args": ["f32[batch, 8, 8, 1]"]}
    api = jaxport.export(model.apply, spec, bind={"variables": model.VARIABLES})
    cli = _members((work / "cli.jaxport").read_bytes())
    ours = _members(api.to_bytes())
    assert ours["functions/apply.jaxexport"] == cli["functions/apply.jaxexport"]
    assert ours["weights.bin"] == cli["weights.bin"]


def test_flax_nnx_module_and_state_in_memory(tmp_path, monkeypatch):
    from flax import nnx

    monkeypatch.chdir(tmp_path)

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.hidden = nnx.Linear(16, 32, rngs=rngs)
            self.norm = nnx.LayerNorm(32, rngs=rngs)
            self.out = nnx.Linear(32, 4, rngs=rngs)

        def __call__(self, x):
            return self.out(nnx.gelu(self.norm(self.hidden(x))))

    model = MLP(nnx.Rngs(7))
    x = _x(6, 16)
    expected = np.asarray(model(x))

    def forward(model, x):
        return model(x)

    # the module itself, bound to a parameter the spec does not list
    result = jaxport.export(forward, X_SPEC, bind={"model": model})
    assert result.warnings == [_warning("forward", "a closure (defined inside "
                                                   "test_flax_nnx_module_and_state_in_memory)")]
    assert result.manifest["functions"]["forward"]["weights"] == [
        "model/hidden/bias/value", "model/hidden/kernel/value", "model/norm/bias/value", "model/norm/scale/value",
        "model/out/bias/value", "model/out/kernel/value"]
    np.testing.assert_allclose(result.load()(x), expected, **TIGHT)
    np.testing.assert_allclose(jaxport.load(result.save("nnx.jaxport"))(x), expected, **TIGHT)

    # its nnx.State, merged back by a function of the example's kind
    graphdef, state = nnx.split(model)

    def apply(state, x):
        return nnx.merge(graphdef, state)(x)

    result = jaxport.export(apply, X_SPEC, bind={"state": state})
    np.testing.assert_allclose(result.load()(x), expected, **TIGHT)
    assert result.manifest["functions"]["apply"]["inputs"][0]["name"] == "x"


def test_equinox_module_in_memory(example_dir, monkeypatch):
    import jax

    work = example_dir("equinox")
    model = _import(work / "model.py", "api_equinox_model", monkeypatch)
    net = model.ConvNet(jax.random.key(11))  # a model of this test's own, not the module's MODEL
    spec = jaxport.Spec(args=["f32[batch, 1, 8, 8]"], dims={"batch": {"min": 1, "max": 16}})
    x = _x(3, 1, 8, 8)
    expected = np.asarray(jax.vmap(net)(x))
    whole = jaxport.export(model.apply, spec, bind={"model": net})
    np.testing.assert_allclose(whole.load()(x), expected, **TIGHT)
    assert whole.manifest["functions"]["apply"]["weights"] == [
        "model/conv/bias", "model/conv/weight", "model/head/bias", "model/head/weight"]
    # its array half, combined with the module's STATIC by apply_partitioned
    import equinox as eqx

    params, _ = eqx.partition(net, eqx.is_array)
    half = jaxport.export(model.apply_partitioned, spec, bind={"params": params})
    np.testing.assert_allclose(half.load()(x), expected, **TIGHT)
    saved = half.save(work)  # a directory: <name>.jaxport there, the name being the function's
    assert saved == work / "apply_partitioned.jaxport"
    np.testing.assert_allclose(jaxport.load(saved)(x), expected, **TIGHT)


# --- kinds of callables ---------------------------------------------------------------------------------------------


def test_lambda_is_exported_and_recorded_as_in_memory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = jaxport.export(lambda x: 2 * x + 1, {"jaxport": 1, "args": ["f32[n]"]})
    assert list(result.manifest["functions"]) == ["function"] and result.manifest["metadata"]["name"] == "function"
    assert result.manifest["functions"]["function"]["entrypoint"] == "<in-memory>:function"
    assert result.warnings == [_warning("function", "a lambda")]
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(result.load()(x), 2 * x + 1)
    named = jaxport.export(lambda x: 2 * x, {"jaxport": 1, "args": ["f32[n]"]}, name="double")
    assert named.manifest["functions"]["double"]["entrypoint"] == "<in-memory>:double"
    assert list(tmp_path.iterdir()) == []  # nothing written without an output


def test_jitted_partial_and_bound_method(example_dir, monkeypatch):
    import jax

    work = example_dir("mlp")
    model = _import(work / "model.py", "api_mlp_model", monkeypatch)
    spec = "jaxport: 1\ndims: {batch: {min: 1, max: 8}}\nargs: ['f32[batch, 784]']\n"  # YAML text
    x = _x(3, 784)
    expected = np.asarray(model.predict(x))

    jitted = jaxport.export(jax.jit(model.predict), spec)
    assert (jitted.warnings, jitted.manifest["functions"]["predict"]["entrypoint"]) == ([], "model.py:predict")
    np.testing.assert_allclose(jitted.load()(x), expected, **TIGHT)

    partial = jaxport.export(functools.partial(model.apply, model.PARAMS), spec)
    assert partial.manifest["functions"]["apply"]["entrypoint"] == "<in-memory>:apply"
    assert partial.warnings == [_warning("apply", "a functools.partial of apply")]
    np.testing.assert_allclose(partial.load()(x), expected, **TIGHT)

    class Classifier:
        def __init__(self, params):
            self.params = params

        def logits(self, x):
            return model.apply(self.params, x)

    method = jaxport.export(Classifier(model.PARAMS).logits, spec)
    assert method.manifest["functions"]["logits"]["entrypoint"] == "<in-memory>:logits"
    assert method.warnings == [_warning("logits", "a method bound to a Classifier instance")]
    np.testing.assert_allclose(method.load()(x), expected, **TIGHT)


def test_in_memory_values_are_forgotten_after_export(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    jaxport.export(lambda w, x: x * w, {"jaxport": 1, "args": ["f32[3]"]}, bind={"w": np.ones(3, np.float32)})
    with pytest.raises(EntrypointError, match="no value from memory named 'w'"):
        load_attribute("<in-memory>:w")


# --- specs: dict, YAML text, jaxport.Spec ---------------------------------------------------------------------------


def test_spec_forms_give_the_same_artifact(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs: ['f32[batch, 16]']\n"
    (tmp_path / "spec.yaml").write_text(text)
    built = jaxport.Spec(args=["f32[batch, 16]"], dims={"batch": {"min": 1, "max": 64}})
    assert built.to_dict() == X_SPEC
    assert jaxport.Spec.from_yaml(built.to_yaml()) == built == jaxport.Spec.from_dict(X_SPEC)
    assert jaxport.Spec.from_yaml(text) == built
    assert built.to_yaml() == "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs: ['f32[batch, 16]']\n"

    def f(x):
        return x.sum(axis=1)

    outs = [jaxport.export(f, s).manifest["functions"]["f"] for s in (X_SPEC, text, built, Path("spec.yaml"))]
    assert all(o["inputs"] == outs[0]["inputs"] and o["dims"] == outs[0]["dims"] for o in outs)
    payloads = {_members(jaxport.export(f, s).to_bytes())["functions/f.jaxexport"] for s in (X_SPEC, text, built)}
    assert len(payloads) == 1


def test_spec_builder_takes_example_arrays_and_other_keys():
    import jax

    spec = jaxport.Spec(args=[np.zeros((2, 3), np.float32), jax.ShapeDtypeStruct((4,), np.int32)],
                        kwargs={"scale": {"static": np.float32(0.5)}}, name="scaled", vjp_order=1,
                        metadata={"version": "1.0"})
    assert spec.to_dict() == {"jaxport": 1, "name": "scaled", "args": ["float32[2, 3]", "int32[4]"],
                              "kwargs": {"scale": {"static": 0.5}}, "metadata": {"version": "1.0"}, "vjp_order": 1}
    parsed = spec.parse()
    assert parsed.name == "scaled" and parsed.vjp_order == 1


def test_yaml_text_or_path_rule():
    assert is_yaml_text("jaxport: 1")
    assert is_yaml_text("{jaxport: 1, args: ['f32[n]']}")
    assert is_yaml_text("args: ['f32[n]']\njaxport: 1\n")
    assert not is_yaml_text("specs/model.yaml")
    assert not is_yaml_text("C:/specs/model.yaml")


def test_bad_dict_spec_names_the_place():
    def f(x):
        return x

    with pytest.raises(SpecError) as e:
        jaxport.export(f, {"jaxport": 1, "args": ["f32[n]", {"shape": "n", "dtype": "f33"}]})
    assert str(e.value).startswith("<spec dict>: args[1]: unknown dtype 'f33'. Did you mean 'f32'? Use one of: ")
    with pytest.raises(SpecError) as e:
        jaxport.export(f, {"jaxport": 1, "dims": {"n": {"min": 5, "max": 2}}, "args": ["f32[n]"]})
    assert str(e.value) == "<spec dict>: dims['n']: min 5 is greater than max 2."
    with pytest.raises(SpecError) as e:
        jaxport.export(f, {"jaxport": 1, "args": [object()]})
    assert str(e.value) == ("<spec dict>['args'][0]: object is not a spec value; give what a YAML spec holds "
                            "(strings such as 'f32[batch, 16]', numbers, lists, dicts) or an example array for its "
                            "shape and dtype.")
    with pytest.raises(SpecError) as e:
        jaxport.Spec(args=["f32[n"])
    assert str(e.value) == ("<jaxport.Spec>: args[0]: 'f32[n' is not an array spec. Write 'dtype[dims]' such as "
                            "'f32[batch, 784]' ('f32[]' for a scalar), or use {static: ...} for a Python value.")
    with pytest.raises(SpecError) as e:  # YAML text keeps its lines
        jaxport.export(f, "jaxport: 1\nargs:\n  - f32[n\n")
    assert str(e.value).startswith("<spec text>:3: args[0]: 'f32[n' is not an array spec.")


def test_a_place_in_a_dict_spec_has_no_line_in_later_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def f(x, y):
        return x + y

    with pytest.raises(SpecError) as e:
        jaxport.export(f, {"jaxport": 1, "args": ["f32[n]"]})
    assert str(e.value) == ("<spec dict>: the spec gives 1 positional argument, which does not fit "
                            "test_a_place_in_a_dict_spec_has_no_line_in_later_errors.<locals>.f(x, y): missing a "
                            "required argument: 'y'. Make 'args' and 'kwargs' match the function's parameters.")


# --- results: nothing written until saved; bytes; CLI and API agree ----------------------------------------------


def test_result_without_output_writes_nothing_and_saves_the_same_bytes(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)

    def f(x):
        return x * 3

    result = jaxport.export(f, X_SPEC)
    assert list(work.iterdir()) == [] and result.path is None and result.manifest_path is None
    data = result.to_bytes()
    assert result.size == len(data)
    assert result.save("out.jaxport") == Path("out.jaxport")
    assert Path("out.jaxport").read_bytes() == data
    assert Path("out.jaxport.manifest.json").read_bytes() == _members(data)["manifest.json"]
    assert result.size == len(data) and result.manifest_path == Path("out.jaxport.manifest.json")
    assert result.save(tmp_path, write_manifest=False) == tmp_path / "f.jaxport"
    assert (tmp_path / "f.jaxport").read_bytes() == data and not (tmp_path / "f.jaxport.manifest.json").exists()
    with_output = jaxport.export(f, X_SPEC, "again.jaxport", write_manifest=False)
    assert with_output.path == Path("again.jaxport") and Path("again.jaxport").read_bytes() == data
    assert sorted(p.name for p in work.iterdir()) == ["again.jaxport", "out.jaxport", "out.jaxport.manifest.json"]


def test_cli_and_api_give_identical_bytes(tmp_path, monkeypatch, run_cli):
    import shutil

    shutil.copytree(EXAMPLES / "mlp", tmp_path / "examples" / "mlp")
    monkeypatch.chdir(tmp_path)
    res = run_cli("export", "examples/mlp/model.py:predict", "--shapes", "examples/mlp/spec.yaml")
    assert res.exit_code == 0, res.stderr
    model = _import(tmp_path / "examples" / "mlp" / "model.py", "api_cli_mlp_model", monkeypatch)
    api = jaxport.export(model.predict, "examples/mlp/spec.yaml")
    cli = (tmp_path / "mlp.jaxport").read_bytes()
    assert _members(api.to_bytes())["functions/predict.jaxexport"] == _members(cli)["functions/predict.jaxexport"]
    assert hashlib.sha256(api.to_bytes()).hexdigest() == hashlib.sha256(cli).hexdigest()
    assert api.manifest["functions"]["predict"]["entrypoint"] == "model.py:predict"


def test_load_of_a_result_without_a_loader_says_what_to_do(tmp_path, monkeypatch):
    from jaxport.export.pipeline import export

    monkeypatch.chdir(tmp_path)
    result = export(lambda x: x, {"jaxport": 1, "args": ["f32[2]"]})
    with pytest.raises(UsageError) as e:
        result.load()
    assert str(e.value) == ("this export result has no loader (it was not made by jaxport.export); save it with "
                            "result.save(PATH) and open it with jaxport.load(PATH).")


# --- verify of what was exported from memory ----------------------------------------------------------------------


def test_verify_of_a_lambda_needs_against(tmp_path, monkeypatch, run_cli):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ref.py").write_text("def double(x):\n    return 2 * x\n")
    jaxport.export(lambda x: 2 * x, {"jaxport": 1, "dims": {"n": {"max": 16}}, "args": ["f32[n]"]}, "d.jaxport",
                   name="double")
    res = run_cli("verify", "d.jaxport")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: d.jaxport: function 'double': the artifact was exported from a Python object that has no "
        "importable module and name (a lambda, a closure, a functools.partial, a bound method, or code in __main__ "
        "or a notebook), so it records '<in-memory>:double' as its entry point; give the live function with "
        "--against FILE.py:NAME.\n"))
    res = run_cli("verify", "d.jaxport", "--against", "ref.py:double")
    assert res.exit_code == 0, res.stdout + res.stderr


def test_verify_of_in_memory_weights_needs_bind(example_dir, monkeypatch, run_cli):
    work = example_dir("mlp")
    model = _import(work / "model.py", "api_verify_mlp_model", monkeypatch)
    spec = {"jaxport": 1, "dims": {"batch": {"min": 1, "max": 8}}, "args": ["f32[batch, 784]"]}
    jaxport.export(model.apply, spec, "a.jaxport", bind={"params": dict(np.load("params.npz"))})
    res = run_cli("verify", "a.jaxport")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: a.jaxport: function 'apply': params: the artifact records '<in-memory>' as the bound source "
        "(the value was bound from memory, by jaxport.export(..., bind=...) or jaxport.rebind); give it with --bind "
        "params=SOURCE (a .npz, .safetensors or .npy file, or model.py:NAME).\n"))
    res = run_cli("verify", "a.jaxport", "--bind", "params=params.npz", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["passed"]


# --- --bind of a parameter the spec does not list -----------------------------------------------------------------


def test_cli_bind_of_a_parameter_the_spec_does_not_list(example_dir, run_cli, monkeypatch):
    work = example_dir("mlp")
    (work / "spec-x.yaml").write_text("jaxport: 1\ndims: {batch: {min: 1, max: 8}}\nargs: ['f32[batch, 784]']\n")
    res = run_cli("export", "model.py:apply", "-s", "spec-x.yaml", "--bind", "params=params.npz", "-o", "a.jaxport")
    assert res.exit_code == 0, res.stderr
    with open_artifact(work / "a.jaxport") as art:
        assert art.manifest["functions"]["apply"]["signature"] == {
            "args": [{"bound": "params.npz", "name": "params"}, {"input": 0, "name": "x"}], "kwargs": {}}
    model = _import(work / "model.py", "api_bind_mlp_model", monkeypatch)
    x = _x(5, 784)
    np.testing.assert_allclose(jaxport.load("a.jaxport")(x), model.apply(dict(np.load("params.npz")), x), **TIGHT)
    res = run_cli("verify", "a.jaxport", "--json")  # the recorded spec, with the bind placed as export placed it
    assert res.exit_code == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["passed"] and report["spec"]["differences"] == []


def test_bind_of_a_name_the_function_lacks(example_dir, run_cli):
    example_dir("mlp")
    spec = "jaxport: 1\ndims: {batch: {min: 1, max: 8}}\nargs: ['f32[batch, 784]']\n"
    Path("spec-x.yaml").write_text(spec)
    res = run_cli("export", "model.py:apply", "-s", "spec-x.yaml", "--bind", "weights=params.npz")
    assert (res.exit_code, res.stderr) == (3, (
        "error[spec]: spec-x.yaml:1: --bind weights: apply(params, x) has no parameter 'weights'; the function's "
        "parameters: params, x; the spec lists: args[0] float32[batch, 784]. Bind one of the function's "
        "parameters.\n"))
    with pytest.raises(SpecError) as e:
        jaxport.export("model.py:apply", {"jaxport": 1, "args": ["f32[2, 784]", "f32[2, 784]", "f32[3]"]},
                       bind={"params": "params.npz"})
    assert str(e.value) == (
        "<spec dict>: with --bind params, the spec's arguments do not fit apply(params, x): too many positional "
        "arguments; the function's parameters: params, x; the spec lists: args[0] float32[2, 784], args[1] "
        "float32[2, 784], args[2] float32[3]. Give the spec's 'args' and 'kwargs' for the parameters that are not "
        "bound.")


def test_bind_keeps_replacing_what_the_spec_binds_and_binds_by_keyword_after_the_spec(example_dir):
    example_dir("mlp")

    def sig(fn, spec, bind):
        return jaxport.export(fn, spec, bind=bind).manifest["functions"]
    # the spec binds params itself: --bind replaces it
    f = sig("model.py:apply", "spec-npz.yaml", {"params": "params.safetensors"})["apply"]
    assert f["signature"]["args"][0] == {"bound": "params.safetensors", "name": "params"}
    # a parameter after the spec's positional arguments: by keyword, as before

    def g(x, scale):
        return x * scale

    f = sig(g, {"jaxport": 1, "args": ["f32[3]"]}, {"scale": np.float32([1, 2, 3])})["g"]
    assert f["signature"] == {"args": [{"input": 0, "name": "x"}],
                              "kwargs": {"scale": {"bound": "<in-memory>"}}}


def test_bind_name_must_be_an_identifier(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as e:
        jaxport.export(lambda x: x, {"jaxport": 1, "args": ["f32[2]"]}, bind={"a/b": np.zeros(2)})
    assert str(e.value) == ("--bind a/b: not a parameter name; a bind names the function's parameter (a Python "
                            "identifier) it gives the value of, e.g. params=weights.npz (bind={'params': tree}).")


def test_not_a_callable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as e:
        jaxport.export(42, {"jaxport": 1, "args": ["f32[2]"]})
    assert isinstance(e.value, TypeError)  # issue 24: a wrong type names the parameter and the types it takes
    assert str(e.value) == "jaxport.export(): fn must be a callable or str or None, not int"


def test_binds_are_placed_as_the_artifact_records_them():
    """export inserts or replaces; verify (``placed_binds``, from the artifact's signature) places them the same."""
    from jaxport.export.weights.binding import apply_binds, placed_binds

    def f(a, b, x, y=None):
        return x

    fspec = jaxport.Spec(args=[{"bind": "a.npz"}, "f32[3]"]).parse().functions[None]
    binds = {"b": "b.npz", "a": "other.npz"}
    exported = apply_binds(fspec, f, binds, "f")
    shown = [getattr(a, "source", None) or type(a).__name__ for a in exported.args]
    assert shown == ["other.npz", "b.npz", "ArrayLeaf"] and exported.kwargs == {}
    recorded = placed_binds(fspec, binds, ["a", "b", "x"])
    assert [getattr(a, "source", None) or type(a).__name__ for a in recorded.args] == shown
    by_keyword = placed_binds(fspec, {"y": "y.npy"}, ["a", "x"])
    assert list(by_keyword.kwargs) == ["y"] and len(by_keyword.args) == 2
