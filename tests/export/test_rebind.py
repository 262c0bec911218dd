"""jaxport rebind: new weights into an artifact without re-exporting. The program stays byte-identical, the result
is the artifact a fresh export with the new weights writes, and any change of the bound tree is refused."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jsonschema
import numpy as np
import pytest
from referencing import Registry, Resource

import jaxport
from jaxport.artifact.container import open_artifact
from jaxport.export.entry.paths import RootPaths
from tests.support import EXAMPLES, REPO, load_module

PAYLOAD = "functions/apply.jaxexport"


def _sha(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _nest(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    """``{"a/b": x}`` -> ``{"a": {"b": x}}``: a weights file as the model takes it."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        node = root
        *parents, leaf = key.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return root


def _member(artifact: str | Path, name: str) -> bytes:
    with open_artifact(artifact) as art:
        return art.read(name)


def _listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.fixture
def mlp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """examples/mlp in a fresh directory (the cwd): ``a.jaxport`` exported from spec-npz.yaml with params.npz (W1),
    and ``w2.npz``, other weights of the same shapes."""
    d = tmp_path / "mlp"
    d.mkdir()
    for name in ("model.py", "spec-npz.yaml", "spec.yaml", "params.npz", "x.npy"):
        shutil.copy(EXAMPLES / "mlp" / name, d / name)
    monkeypatch.chdir(d)
    model = load_module(d / "model.py", "rebind_mlp_model")
    np.savez(d / "w2.npz", **model.init_params(1))
    jaxport.export("model.py:apply", "spec-npz.yaml", output="a.jaxport")
    return d


def _w(d: Path, name: str = "w2.npz") -> dict[str, np.ndarray]:
    with np.load(d / name) as z:
        return {k: z[k] for k in z.files}


def _run_model(d: Path, params: dict[str, Any], x: np.ndarray) -> np.ndarray:
    return np.asarray(jax.jit(load_module(d / "model.py", "rebind_mlp_reference").apply)(params, x))


# --- the result is a fresh export with the new weights -------------------------------------------------------------


def test_rebind_gives_the_bytes_of_a_fresh_export_with_the_new_weights(mlp):
    result = jaxport.rebind("a.jaxport", {"params": "w2.npz"}, "b.jaxport")
    fresh = jaxport.export("model.py:apply", "spec-npz.yaml", output="fresh.jaxport", bind={"params": "w2.npz"})
    assert _sha("b.jaxport") == _sha(fresh.path)
    assert Path("b.jaxport.manifest.json").read_bytes() == Path("fresh.jaxport.manifest.json").read_bytes()
    assert _sha("b.jaxport") != _sha("a.jaxport")
    assert _member("b.jaxport", PAYLOAD) == _member("a.jaxport", PAYLOAD)

    w2 = _w(mlp)
    tensors = result.manifest["weights"]["tensors"]
    assert {n: t["sha256"] for n, t in tensors.items()} == {
        f"params/{k}": hashlib.sha256(v.tobytes()).hexdigest() for k, v in w2.items()}
    assert result.manifest["functions"]["apply"]["signature"]["args"][0] == {"bound": "w2.npz", "name": "params"}
    assert result.path == Path("b.jaxport") and result.size == Path("b.jaxport").stat().st_size
    assert result.manifest_path == Path("b.jaxport.manifest.json")
    assert [(r.name, r.source, r.recorded, r.tensors, r.changed) for r in result.rebound] == [
        ("params", "w2.npz", "w2.npz", ["params/b1", "params/b2", "params/w1", "params/w2"],
         ["params/w1", "params/w2"])]  # the biases are zeros in both
    assert result.kept_members == [PAYLOAD] and result.warnings == []

    x = np.load("x.npy")
    out = np.asarray(jaxport.load("b.jaxport")(x))
    np.testing.assert_allclose(out, _run_model(mlp, _nest({f"params/{k}": v for k, v in w2.items()})["params"], x),
                               rtol=1e-6, atol=1e-6)
    assert not np.allclose(out, np.asarray(jaxport.load("a.jaxport")(x)), atol=1e-3)


def test_cli_output_and_json(mlp, run_cli):
    res = run_cli("rebind", "a.jaxport", "--bind", "params=w2.npz", "-o", "b.jaxport")
    assert res.exit_code == 0, res.stderr
    size = Path("b.jaxport").stat().st_size
    assert res.stdout == (f"Rebound b.jaxport ({size / 1e3:.1f} kB)\n"
                          "  params <- w2.npz: 4 tensors, 2 changed\n"
                          f"  programs kept byte for byte: {PAYLOAD}\n"
                          "  manifest: b.jaxport.manifest.json\n")
    assert res.stderr == ""

    res = run_cli("rebind", "a.jaxport", "--bind", "params=w2.npz", "-o", "c.jaxport", "--json", "--no-manifest",
                  "--version", "1.1.0")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    schemas = [json.loads(p.read_text()) for p in [REPO / "specs" / "schemas" / "manifest.schema.json",
                                                   REPO / "specs" / "schemas" / "cli" / "rebind.schema.json"]]
    registry = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas])
    assert list(jsonschema.Draft202012Validator(schemas[1], registry=registry).iter_errors(doc)) == []
    assert {k: doc[k] for k in ("artifact", "input", "size", "manifest_file", "kept_members", "warnings")} == {
        "artifact": "c.jaxport", "input": "a.jaxport", "size": Path("c.jaxport").stat().st_size,
        "manifest_file": None, "kept_members": [PAYLOAD], "warnings": []}
    assert doc["rebound"] == [{"name": "params", "source": "w2.npz", "recorded": "w2.npz",
                               "tensors": ["params/b1", "params/b2", "params/w1", "params/w2"],
                               "changed": ["params/w1", "params/w2"]}]
    assert doc["manifest"]["metadata"]["version"] == "1.1.0"
    assert not Path("c.jaxport.manifest.json").exists()
    with open_artifact("c.jaxport") as art:
        assert art.manifest == doc["manifest"]


def test_diff_after_rebind_reports_only_a_weights_change(mlp, run_cli):
    jaxport.rebind("a.jaxport", {"params": "w2.npz"}, "b.jaxport")
    res = run_cli("diff", "a.jaxport", "b.jaxport", "--fail-on", "breaking", "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert {(c["severity"], c["kind"]) for c in doc["changes"]} == {("compatible", "weights_changed"),
                                                                    ("compatible", "bound_source_changed")}
    assert doc["programs"]["apply"]["status"] == "identical"
    assert doc["breaking"] == 0 and not doc["failed"]


@pytest.mark.parametrize(("example", "fn", "arg"), [("flax_linen", "apply", "variables"),
                                                     ("flax_nnx", "apply", "state"),
                                                     ("equinox", "apply_arrays", "arrays")])
def test_framework_models_rebound_from_files_equal_a_fresh_export(tmp_path, monkeypatch, example, fn, arg):
    """Each framework example bound from params.npz, rebound to other values: the bytes of a fresh export, and the
    outputs of the model run directly with the new weights."""
    d = tmp_path / example
    shutil.copytree(EXAMPLES / example, d)
    monkeypatch.chdir(d)
    jaxport.export(f"model.py:{fn}", "spec-npz.yaml", output="a.jaxport")
    rng = np.random.default_rng(7)
    new = {k: (v * rng.uniform(0.5, 1.5, v.shape)).astype(v.dtype) for k, v in _w(d, "params.npz").items()}
    np.savez("new.npz", **new)
    jaxport.rebind("a.jaxport", {arg: "new.npz"}, "b.jaxport")
    fresh = jaxport.export(f"model.py:{fn}", "spec-npz.yaml", output="fresh.jaxport", bind={arg: "new.npz"})
    assert _sha("b.jaxport") == _sha(fresh.path)
    payload = f"functions/{fn}.jaxexport"
    assert _member("b.jaxport", payload) == _member("a.jaxport", payload)
    x = np.load("x.npy")
    model = load_module(d / "model.py", f"rebind_{example}_model")
    want = np.asarray(jax.jit(getattr(model, fn))(_nest(new), x))
    np.testing.assert_allclose(np.asarray(jaxport.load("b.jaxport")(x)), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("example", ["flax_linen", "flax_nnx", "equinox"])
def test_live_framework_objects_rebind_from_memory(tmp_path, monkeypatch, example):
    """An artifact that binds the model's own object (model.py:VARIABLES, STATE, MODEL) rebound to a new live object
    of the same structure: outputs equal the new model run directly; the source is recorded as in memory."""
    d = tmp_path / example
    shutil.copytree(EXAMPLES / example, d)
    monkeypatch.chdir(d)
    jaxport.export("model.py:apply", "spec.yaml", output="a.jaxport")
    model = load_module(d / "model.py", f"rebind_live_{example}")
    if example == "flax_linen":
        value = model.init_variables(7)
    elif example == "flax_nnx":
        from flax import nnx

        value = nnx.split(model.MLP(nnx.Rngs(7)))[1]
    else:
        value = model.ConvNet(jax.random.key(7))
    result = jaxport.rebind("a.jaxport", {"model" if example == "equinox" else "variables" if example == "flax_linen"
                                          else "state": value}, "b.jaxport")
    (r,) = result.rebound
    assert r.recorded == "<in-memory>" and r.changed
    assert result.warnings == [f"'{r.name}' was bound from an in-memory value; the artifact records '<in-memory>' as "
                               f"its source, so verify needs --bind {r.name}=SOURCE to reproduce it."]
    assert _member("b.jaxport", PAYLOAD) == _member("a.jaxport", PAYLOAD)
    x = np.load("x.npy")
    want = np.asarray(jax.jit(model.apply)(value, x)) if example != "equinox" else np.asarray(model.apply(value, x))
    np.testing.assert_allclose(np.asarray(jaxport.load("b.jaxport")(x)), want, rtol=1e-5, atol=1e-5)
    assert not np.allclose(np.asarray(jaxport.load("a.jaxport")(x)), want, atol=1e-3)


def test_in_memory_dict_of_jax_arrays(mlp):
    model = load_module(mlp / "model.py", "rebind_mlp_memory")
    w3 = {k: jax.numpy.asarray(v) * 2 for k, v in model.init_params(3).items()}
    result = jaxport.rebind("a.jaxport", {"params": w3}, "b.jaxport")
    assert result.manifest["functions"]["apply"]["signature"]["args"][0] == {"bound": "<in-memory>",
                                                                             "name": "params"}
    x = np.load("x.npy")
    np.testing.assert_allclose(np.asarray(jaxport.load("b.jaxport")(x)), _run_model(mlp, w3, x), rtol=1e-6,
                               atol=1e-6)


def test_other_sources_safetensors_npy_attribute_and_extracted_weights(mlp, run_cli):
    from safetensors.numpy import save_file

    save_file(_w(mlp), "w2.safetensors")
    jaxport.rebind("a.jaxport", {"params": "w2.npz"}, "from-npz.jaxport")
    jaxport.rebind("a.jaxport", {"params": "w2.safetensors"}, "from-st.jaxport")
    with open_artifact("from-npz.jaxport") as a, open_artifact("from-st.jaxport") as b:
        assert a.manifest["weights"] == b.manifest["weights"]
        assert b.manifest["functions"]["apply"]["signature"]["args"][0]["bound"] == "w2.safetensors"

    # model.py:PARAMS holds the values params.npz was written from: nothing changes but the recorded source
    result = jaxport.rebind("a.jaxport", {"params": "model.py:PARAMS"}, "attr.jaxport")
    assert result.rebound[0].changed == [] and result.rebound[0].recorded == "model.py:PARAMS"

    # the weights 'extract --weights' writes bind again as they are: keys without the argument's name (w1), and
    # with --full-names the artifact's tensor names (params/w1)
    x = np.load("x.npy")
    for i, flags in enumerate([(), ("--full-names",)]):
        assert run_cli("extract", "from-npz.jaxport", "--weights", f"extracted{i}.npz", *flags).exit_code == 0
        halved = {k: v / (2 + i) for k, v in _w(mlp, f"extracted{i}.npz").items()}
        assert sorted(halved) == [f"{'params/' if i else ''}{k}" for k in ("b1", "b2", "w1", "w2")]
        np.savez(f"halved{i}.npz", **halved)
        res = run_cli("rebind", "a.jaxport", "--bind", f"params=halved{i}.npz", "-o", f"halved{i}.jaxport")
        assert res.exit_code == 0, res.stderr
        params = _nest(halved)["params"] if i else _nest(halved)
        np.testing.assert_allclose(np.asarray(jaxport.load(f"halved{i}.jaxport")(x)), _run_model(mlp, params, x),
                                   rtol=1e-6, atol=1e-6)


def test_a_single_array_bound_from_npy(tmp_path, monkeypatch):
    d = tmp_path / "npy"
    d.mkdir()
    monkeypatch.chdir(d)
    Path("model.py").write_text("def f(w, x):\n    return x @ w\n")
    Path("spec.yaml").write_text('jaxport: 1\nargs:\n  - bind: w.npy\n  - "f32[2, 3]"\n')
    np.save("w.npy", np.ones((3, 4), np.float32))
    np.save("w2.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    np.save("w3.npy", np.ones((4, 3), np.float32))
    jaxport.export("model.py:f", "spec.yaml", output="a.jaxport")
    jaxport.rebind("a.jaxport", {"w": "w2.npy"}, "b.jaxport")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(jaxport.load("b.jaxport")(x)), x @ np.load("w2.npy"))
    with pytest.raises(jaxport.InputError) as e:
        jaxport.rebind("a.jaxport", {"w": "w3.npy"}, "c.jaxport")
    assert str(e.value) == ("w: shape (3, 4) in the artifact, (4, 3) in w3.npy; rebind keeps the program, so shapes "
                            "must match; re-export to change them.")


def test_weights_shared_by_two_functions_are_rebound_for_both(tmp_path, monkeypatch):
    d = tmp_path / "shared"
    d.mkdir()
    monkeypatch.chdir(d)
    Path("model.py").write_text("import jax\n\n\ndef scores(params, x):\n    return x @ params['w'] + params['b']\n\n\n"
                                "def hidden(params, x):\n    return jax.nn.relu(x @ params['w'])\n")
    Path("spec.yaml").write_text("jaxport: 1\nfunctions:\n  scores:\n    entrypoint: model.py:scores\n    args: "
                                 "[{bind: p.npz}, 'f32[2, 3]']\n  hidden:\n    entrypoint: model.py:hidden\n    "
                                 "args: [{bind: p.npz}, 'f32[2, 3]']\n")
    rng = np.random.default_rng(0)
    np.savez("p.npz", w=np.ones((3, 4), np.float32), b=np.zeros(4, np.float32))
    new = {"w": rng.standard_normal((3, 4)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32)}
    np.savez("new.npz", **new)
    jaxport.export(None, "spec.yaml", output="a.jaxport")
    result = jaxport.rebind("a.jaxport", {"params": "new.npz"}, "b.jaxport")
    assert result.rebound[0].changed == ["params/b", "params/w"]
    assert [f["signature"]["args"][0]["bound"] for f in result.manifest["functions"].values()] == ["new.npz"] * 2
    assert result.kept_members == ["functions/scores.jaxexport", "functions/hidden.jaxexport"]
    x = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jaxport.load("b.jaxport", function="scores")(x)),
                               x @ new["w"] + new["b"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jaxport.load("b.jaxport", function="hidden")(x)),
                               np.maximum(x @ new["w"], 0), rtol=1e-6, atol=1e-6)


def test_a_value_bound_inside_an_argument(tmp_path, monkeypatch):
    d = tmp_path / "nested"
    d.mkdir()
    monkeypatch.chdir(d)
    Path("model.py").write_text("def f(inp, x):\n    return (x @ inp['p']['w']) * inp['s']\n")
    Path("spec.yaml").write_text('jaxport: 1\nargs:\n  - {p: {bind: w.npz}, s: "f32[]"}\n  - "f32[2, 3]"\n')
    np.savez("w.npz", w=np.ones((3, 4), np.float32))
    np.savez("w2.npz", w=np.arange(12, dtype=np.float32).reshape(3, 4))
    jaxport.export("model.py:f", "spec.yaml", output="a.jaxport")
    result = jaxport.rebind("a.jaxport", {"inp/p": "w2.npz"}, "b.jaxport")
    assert result.manifest["functions"]["f"]["signature"]["args"][0]["dict"]["p"] == {"bound": "w2.npz"}
    assert "binds" not in result.manifest["source"]  # 'export --bind' names top-level arguments only
    assert result.warnings == [
        "'inp/p' is bound inside an argument, where the spec's 'bind:' names w.npz and the artifact now w2.npz: "
        "verify reports that difference unless it is given a spec that binds w2.npz (--shapes)."]
    x = np.ones((2, 3), np.float32)
    out = jaxport.load("b.jaxport")({"s": np.float32(2)}, x)
    with np.load("w2.npz") as w2:
        np.testing.assert_array_equal(np.asarray(out), (x @ w2["w"]) * 2)


def test_verify_follows_the_new_weights(mlp, run_cli):
    """The artifact records the new source as 'export --bind' does: verify runs the live model with it."""
    assert run_cli("rebind", "a.jaxport", "--bind", "params=w2.npz", "-o", "b.jaxport").exit_code == 0
    res = run_cli("verify", "b.jaxport", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["passed"] is True
    # from memory: verify needs the source, and then passes
    jaxport.rebind("a.jaxport", {"params": {k: v * 2 for k, v in _w(mlp).items()}}, "m.jaxport")
    np.savez("w4.npz", **{k: v * 2 for k, v in _w(mlp).items()})
    assert run_cli("verify", "m.jaxport", "--bind", "params=w4.npz").exit_code == 0
    assert run_cli("verify", "m.jaxport", "--bind", "params=w2.npz").exit_code == 12


# --- refusals ------------------------------------------------------------------------------------------------------


def _refused(run_cli, d: Path, *args: str) -> tuple[int, str]:
    before = _listing(d)
    res = run_cli("rebind", "a.jaxport", *args)
    assert res.stdout == ""
    assert _listing(d) == before  # nothing written, no temporary file left
    return res.exit_code, res.stderr


def _bad_weights(d: Path, name: str, **changes: Any) -> None:
    w = _w(d)
    for k, v in changes.items():
        if v is None:
            del w[k]
        else:
            w[k] = v
    np.savez(d / name, **w)


def test_shape_change_is_refused(mlp, run_cli):
    _bad_weights(mlp, "new.npz", w1=np.zeros((784, 64), np.float32))
    assert _refused(run_cli, mlp, "--bind", "params=new.npz", "-o", "b.jaxport") == (9, (
        "error[input]: params/w1: shape (784, 32) in the artifact, (784, 64) in new.npz; rebind keeps the program, "
        "so shapes must match; re-export to change them.\n"))


def test_dtype_change_is_refused(mlp, run_cli):
    _bad_weights(mlp, "new.npz", w2=np.zeros((32, 10), np.float16))
    assert _refused(run_cli, mlp, "--bind", "params=new.npz", "-o", "b.jaxport") == (9, (
        "error[input]: params/w2: dtype float32 in the artifact, float16 in new.npz; rebind keeps the program, so "
        "dtypes must match; convert it (e.g. astype(np.float32)), or re-export to change them.\n"))


def test_missing_and_extra_tensors_are_refused(mlp, run_cli):
    _bad_weights(mlp, "missing.npz", b2=None)
    assert _refused(run_cli, mlp, "--bind", "params=missing.npz", "-o", "b.jaxport") == (9, (
        "error[input]: params/b2: in the artifact, missing from missing.npz (which holds params/b1, params/w1, "
        "params/w2); rebind keeps the program, so the bound tree's names must match; re-export to change them.\n"))
    _bad_weights(mlp, "extra.npz", w3=np.zeros(3, np.float32))
    assert _refused(run_cli, mlp, "--bind", "params=extra.npz", "-o", "b.jaxport") == (9, (
        "error[input]: params/w3: in extra.npz, not in the artifact (its 'params' holds params/b1, params/b2, "
        "params/w1, params/w2); rebind keeps the program, so the bound tree's names must match; remove it, or "
        "re-export to change them.\n"))


def test_first_difference_in_name_order_is_named(mlp):
    _bad_weights(mlp, "new.npz", w2=np.zeros((32, 11), np.float32), b1=np.zeros(32, np.int32))
    with pytest.raises(jaxport.InputError) as e:
        jaxport.rebind("a.jaxport", {"params": "new.npz"}, "b.jaxport")
    assert str(e.value).startswith("params/b1: dtype float32 in the artifact, int32 in new.npz;")


def test_unknown_name_lists_the_bound_arguments(mlp, run_cli):
    assert _refused(run_cli, mlp, "--bind", "parms=w2.npz", "-o", "b.jaxport") == (2, (
        "error[usage]: a.jaxport: no bound argument 'parms' (did you mean 'params'?); the artifact's bound "
        "arguments: params (4 tensors, bound from params.npz). Give one of them as NAME in NAME=SOURCE.\n"))
    assert _refused(run_cli, mlp, "--bind", "x=w2.npz", "-o", "b.jaxport") == (2, (
        "error[usage]: a.jaxport: no bound argument 'x'; the artifact's bound arguments: params (4 tensors, bound "
        "from params.npz). Give one of them as NAME in NAME=SOURCE.\n"))


def test_artifact_without_bound_weights(mlp, run_cli):
    jaxport.export("model.py:predict", "spec.yaml", output="closed.jaxport")
    res = run_cli("rebind", "closed.jaxport", "--bind", "params=w2.npz", "-o", "b.jaxport")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: closed.jaxport: the artifact has no bound weights; rebind replaces weights bound at export "
        "(a spec's 'bind:', or export --bind NAME=SOURCE). Re-export to bind weights.\n"))
    assert not Path("b.jaxport").exists()


def test_output_is_never_the_input(mlp, run_cli):
    before = _sha("a.jaxport")
    assert _refused(run_cli, mlp, "--bind", "params=w2.npz", "-o", "a.jaxport") == (11, (
        "error[output]: a.jaxport: is the artifact being rebound; rebind writes a new artifact and never replaces "
        "its input. Choose another output path (and rename it over the old artifact afterwards if you mean to "
        "replace it).\n"))
    os.symlink("a.jaxport", "link.jaxport")
    assert run_cli("rebind", "a.jaxport", "--bind", "params=w2.npz", "-o", "link.jaxport").exit_code == 11
    assert run_cli("rebind", "a.jaxport", "--bind", "params=w2.npz", "-o", "w2.npz").exit_code == 11
    assert _sha("a.jaxport") == before
    # a directory holds the new artifact under the input's file name
    Path("out").mkdir()
    assert run_cli("rebind", "a.jaxport", "--bind", "params=w2.npz", "-o", "out").exit_code == 0
    assert _listing(mlp / "out") == ["a.jaxport", "a.jaxport.manifest.json"]


def test_bad_bind_options_and_sources(mlp, run_cli):
    assert _refused(run_cli, mlp, "--bind", "params", "-o", "b.jaxport") == (2, (
        "error[usage]: Invalid value for '--bind': 'params': expected NAME=SOURCE, e.g. params=finetuned.npz. See "
        "'jaxport rebind --help'.\n"))
    assert _refused(run_cli, mlp, "--bind", "params=w2.npz", "--bind", "params=params.npz", "-o", "b.jaxport") == (
        2, "error[usage]: Invalid value for '--bind': 'params' is given twice; bind each argument once. See 'jaxport "
           "rebind --help'.\n")
    assert _refused(run_cli, mlp, "--bind", "params=nope.npz", "-o", "b.jaxport") == (9, (
        "error[input]: params=nope.npz: nope.npz not found (paths are relative to the current directory).\n"))
    Path("fake.npz").write_bytes(b"not a zip")
    assert _refused(run_cli, mlp, "--bind", "params=fake.npz", "-o", "b.jaxport") == (9, (
        "error[input]: params=fake.npz: bound file fake.npz is not an .npz file (a zip archive of .npy arrays).\n"))
    code, err = _refused(run_cli, mlp, "--bind", "params=model.py:NOPE", "-o", "b.jaxport")
    assert (code, err.startswith("error[entrypoint]: params=model.py:NOPE: bound value model.py:NOPE:")) == (4, True)
    with pytest.raises(jaxport.UsageError, match="^rebind: no weights to bind"):
        jaxport.rebind("a.jaxport", {}, "b.jaxport")


def test_damaged_artifact_is_refused(mlp, run_cli):
    data = bytearray(Path("a.jaxport").read_bytes())
    with open_artifact("a.jaxport") as art:
        at = art.members["weights.bin"].offset + 200
    data[at] ^= 1
    Path("damaged.jaxport").write_bytes(bytes(data))
    res = run_cli("rebind", "damaged.jaxport", "--bind", "params=model.py:PARAMS", "-o", "b.jaxport")
    assert res.exit_code == 8 and "member 'weights.bin' is damaged" in res.stderr
    assert not Path("b.jaxport").exists()


# --- where the new source is recorded ------------------------------------------------------------------------------


def test_sources_are_recorded_relative_to_the_export_root(mlp, run_cli, monkeypatch):
    """As export records them: relative to the directory that holds the artifact's spec (the export root), found
    in the current directory, the artifact's or the new weights' directory; else relative to the current directory,
    with a warning; or relative to --root."""
    reference = jaxport.rebind("a.jaxport", {"params": "w2.npz"}, "b.jaxport")
    assert reference.manifest["source"]["binds"] == {"params": "w2.npz"}
    monkeypatch.chdir(mlp.parent)
    for i, args in enumerate([(), ("--root", "mlp")]):
        res = run_cli("rebind", "mlp/a.jaxport", "--bind", "params=mlp/w2.npz", "-o", f"mlp/c{i}.jaxport", *args)
        assert (res.exit_code, res.stderr) == (0, "")
        assert _sha(f"mlp/c{i}.jaxport") == _sha(mlp / reference.path)

    # the artifact elsewhere, the weights beside neither it nor its spec: relative to the current directory
    Path("elsewhere").mkdir()
    shutil.copy("mlp/a.jaxport", "elsewhere/a.jaxport")
    Path("ckpt").mkdir()
    shutil.copy("mlp/w2.npz", "ckpt/w2.npz")
    res = run_cli("rebind", "elsewhere/a.jaxport", "--bind", "params=ckpt/w2.npz", "-o", "d.jaxport", "--json")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["rebound"][0]["recorded"] == "ckpt/w2.npz"
    assert doc["warnings"] == [  # one short line: the README's own flow meets it
        "new sources recorded relative to the current directory (the artifact's spec, spec-npz.yaml, is not here); "
        "--root DIR records them relative to the export's root instead."]

    # --root: a source outside it is recorded with '..', which verify will not follow
    res = run_cli("rebind", "mlp/a.jaxport", "--bind", "params=ckpt/w2.npz", "-o", "e.jaxport", "--root", "mlp",
                  "--json")
    assert res.exit_code == 0
    recorded = RootPaths("mlp").source("ckpt/w2.npz", Path.cwd(), "")  # as export records such a path
    assert json.loads(res.stdout)["warnings"] == [
        f"'params' is bound from ckpt/w2.npz, outside the root mlp, so the artifact records it as {recorded}, which "
        f"verify will not follow (it needs --bind params=SOURCE); rebind with --root DIR, a directory holding the "
        f"artifact's spec and the new weights."]
    res = run_cli("rebind", "mlp/a.jaxport", "--bind", "params=mlp/w2.npz", "-o", "f.jaxport", "--root", "nowhere")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: root nowhere: not a directory; give the directory the artifact's recorded paths are relative "
        "to.\n"))


# --- shardings -----------------------------------------------------------------------------------------------------


@pytest.fixture
def sharded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """examples/sharded exported on this one-device process, with other weights in p2.npz."""
    d = tmp_path / "sharded"
    d.mkdir()
    for name in ("model.py", "spec.yaml", "params.npz", "x.npy"):
        shutil.copy(EXAMPLES / "sharded" / name, d / name)
    monkeypatch.chdir(d)
    np.savez("p2.npz", **load_module(d / "model.py", "rebind_sharded_model").init_params(3))
    jaxport.export("model.py:predict", "spec.yaml", output="predict.jaxport")
    return d


def test_sharded_weights_keep_their_recorded_shardings(sharded):
    result = jaxport.rebind("predict.jaxport", {"params": "p2.npz"}, "p2.jaxport")
    with open_artifact("predict.jaxport") as art:
        old = art.manifest
    new = result.manifest
    f_old, f_new = old["functions"]["predict"], new["functions"]["predict"]
    assert f_new["mesh"] == {"axis_names": ["data", "model"], "axis_sizes": [4, 2]}
    assert f_new["weights_partition_specs"] == {"params/b1": ["model"], "params/w1": [None, "model"],
                                                "params/w2": ["model", None]}
    # every field but the digests and the recorded source is the old artifact's
    assert {k: v for k, v in f_new.items() if k != "signature"} == {k: v for k, v in f_old.items() if k != "signature"}
    assert f_new["signature"]["args"][1] == {"bound": "p2.npz", "name": "params"}
    assert new["source"] == {**old["source"], "binds": {"params": "p2.npz"}}  # as 'export --bind' records it
    strip = {"members", "weights", "source"}
    assert {k: v for k, v in new.items() if k not in strip | {"functions"}} == \
        {k: v for k, v in old.items() if k not in strip | {"functions"}}
    assert {n: {k: v for k, v in t.items() if k != "sha256"} for n, t in new["weights"]["tensors"].items()} == \
        {n: {k: v for k, v in t.items() if k != "sha256"} for n, t in old["weights"]["tensors"].items()}
    assert _member("p2.jaxport", "functions/predict.jaxexport") == _member("predict.jaxport",
                                                                             "functions/predict.jaxexport")


_EIGHT_DEVICES = """
import jax, numpy as np, jaxport
from jaxport.run import distributed
distributed.host_devices(8)
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import model
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
x, p = np.load("x.npy"), model.init_params(5)
put = lambda a, *spec: jax.device_put(a, NamedSharding(mesh, P(*spec)))
good = {"w1": put(p["w1"], None, "model"), "b1": put(p["b1"], "model"), "w2": put(p["w2"], "model", None)}
r = jaxport.rebind("predict.jaxport", {"params": good}, "memory.jaxport")
errors = []
for bad in (dict(good, w1=put(p["w1"], "model", None)), dict(good, b1=put(p["b1"], None))):
    try:
        jaxport.rebind("predict.jaxport", {"params": bad}, "bad.jaxport")
    except jaxport.InputError as e:
        errors.append(str(e))
try:
    w = {k: put(v, "data") if v.shape[0] % 4 == 0 else put(v) for k, v in np.load("mlp-params.npz").items()}
    jaxport.rebind("mlp.jaxport", {"params": w}, "bad.jaxport")
except jaxport.InputError as e:
    errors.append(str(e))
p2 = dict(np.load("p2.npz"))
np.savez("result.npz", memory=np.asarray(jaxport.load("memory.jaxport")(x)), want_memory=model.predict(x, p),
         from_file=np.asarray(jaxport.load("p2.jaxport")(x)), want_file=model.predict(x, p2))
print("\\n".join(errors))
"""


@pytest.mark.slow
def test_on_eight_devices_outputs_match_and_sharding_changes_are_refused(sharded):
    """On 8 simulated devices (a new process): the rebound artifact runs as the model with the new weights, from a
    file and from arrays laid out as recorded; arrays laid out otherwise are refused."""
    jaxport.rebind("predict.jaxport", {"params": "p2.npz"}, "p2.jaxport")
    w = {k: np.ones((784, 32) if k == "w1" else (32,) if k == "b1" else (32, 10) if k == "w2" else (10,),
                    np.float32) for k in ("w1", "b1", "w2", "b2")}
    np.savez("mlp-params.npz", **w)
    shutil.copy(EXAMPLES / "mlp" / "model.py", "mlp_model.py")
    Path("mlp-spec.yaml").write_text('jaxport: 1\nargs:\n  - bind: mlp-params.npz\n  - "f32[4, 784]"\n')
    jaxport.export("mlp_model.py:apply", "mlp-spec.yaml", output="mlp.jaxport")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    res = subprocess.run([sys.executable, "-c", _EIGHT_DEVICES], cwd=sharded, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "params/w1: sharding P(None, 'model') in the artifact, P('model', None) in the bound value; rebind keeps the "
        "program, so shardings must match; re-export to change them.",
        "params/b1: sharding P('model') in the artifact, P(None) in the bound value; rebind keeps the program, so "
        "shardings must match; re-export to change them.",
        "params/b1: sharding P('data') in the bound value, none in the artifact (its program runs on one device); "
        "rebind keeps the program, so shardings must match; re-export with a mesh to shard it."]
    r = np.load(sharded / "result.npz")
    np.testing.assert_allclose(r["memory"], r["want_memory"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r["from_file"], r["want_file"], rtol=1e-5, atol=1e-5)
    assert not np.allclose(r["memory"], r["want_file"], atol=1e-3)


def test_help_lists_the_command(run_cli):
    res = run_cli("--help")
    assert re.search(r"^  rebind +Replace an artifact's bound weights without re-exporting\.$", res.stdout, re.M)
    res = run_cli("rebind", "--help")
    assert res.exit_code == 0 and "--bind NAME=SOURCE" in res.stdout
    res = run_cli("rebind", "a.jaxport", "-o", "b.jaxport")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: Missing option '--bind'. See 'jaxport rebind --help'.\n")
