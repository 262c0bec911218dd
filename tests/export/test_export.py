"""Export: the payload runs like the function, bytes are reproducible, the checks refuse what they must."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxport
from jaxport.artifact.container import open_artifact
from tests.support import EXAMPLES, example


def _deserialize(path: Path, fname: str):
    with open_artifact(path) as art:
        return jax.export.deserialize(bytearray(art.read(art.manifest["functions"][fname]["payload"])))


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlp") / "mlp.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=out)


@pytest.fixture(scope="module")
def pytree_artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("pytree") / "enc.jaxport"
    return jaxport.export(f"{EXAMPLES}/pytree/model.py:encode", EXAMPLES / "pytree" / "spec.yaml", output=out)


@pytest.mark.parametrize("batch", [1, 7, 128, 4096])
def test_mlp_payload_matches_function(mlp_artifact, batch):
    model = example("mlp")
    exp = _deserialize(mlp_artifact.path, "predict")
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype(np.float32)
    np.testing.assert_allclose(exp.call(x), jax.jit(model.predict)(x), rtol=1e-6, atol=1e-6)


def test_mlp_manifest_describes_signature(mlp_artifact):
    f = mlp_artifact.manifest["functions"]["predict"]
    assert f["inputs"] == [{"name": "x", "spec_path": "args[0]", "shape": ["batch", 784], "dtype": "float32",
                            "sharding": None}]
    assert [(o["name"], o["shape"], o["dtype"]) for o in f["outputs"]] == [("output", ["batch", 10], "float32")]
    assert f["dims"] == {"batch": {"min": 1, "max": 4096,
                                   "derived_from": {"input": "x", "axis": 0, "expression": "batch"}}}
    assert f["entrypoint"].endswith("model.py:predict") and not f["entrypoint"].startswith("/")
    assert f["platforms"] == ["cpu"]
    assert f["calling_convention_version"] in range(jax.export.minimum_supported_calling_convention_version,
                                                    jax.export.maximum_supported_calling_convention_version + 1)
    assert any("batch <= 4096" in a for a in f["shape_assertions"])
    assert mlp_artifact.manifest["metadata"]["name"] == "mlp"
    assert mlp_artifact.manifest["producer"]["jax"] == jax.__version__


@pytest.mark.parametrize("batch,h", [(1, 2), (5, 3), (16, 2), (64, 8)])
def test_pytree_payload_matches_function(pytree_artifact, batch, h):
    model = example("pytree")
    exp = _deserialize(pytree_artifact.path, "encode")
    rng = np.random.default_rng(batch * 100 + h)
    x = rng.standard_normal((batch, 2 * h)).astype(np.float32)
    mask = rng.standard_normal((batch, 16)).astype(jnp.bfloat16)
    params = {"w": rng.standard_normal((h, 10)).astype(np.float32), "b": rng.standard_normal(10).astype(np.float32)}
    got = exp.call(x, mask, params=params)
    want = jax.jit(model.encode, static_argnums=2)(x, mask, 3, params=params)
    assert set(got) == {"features", "norm"}
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6)


def test_pytree_manifest_names_leaves_and_records_constraints(pytree_artifact):
    f = pytree_artifact.manifest["functions"]["encode"]
    assert [i["name"] for i in f["inputs"]] == ["x", "mask", "params/b", "params/w"]
    assert [i["shape"] for i in f["inputs"]] == [["batch", "2*h"], ["batch", 16], [10], ["h", 10]]
    assert f["inputs"][1]["dtype"] == "bfloat16"
    assert f["constraints"] == ["batch <= 8 * h"]
    assert f["dims"]["h"]["min"] == 2 and f["dims"]["h"]["max"] is None
    assert f["signature"]["args"][2] == {"static": 3, "name": "scale"}
    assert [o["name"] for o in f["outputs"]] == ["features", "norm"]


def test_multiplatform_export_on_cpu(tmp_path):
    r = jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec-multiplatform.yaml",
                       output=tmp_path / "m.jaxport")
    assert r.manifest["functions"]["predict"]["platforms"] == ["cpu", "cuda", "tpu"]
    exp = _deserialize(r.path, "predict")
    assert exp.platforms == ("cpu", "cuda", "tpu")
    x = np.ones((3, 784), np.float32)
    np.testing.assert_allclose(exp.call(x), jax.jit(example("mlp").predict)(x), rtol=1e-6)


def test_platform_option_overrides_spec(tmp_path):
    r = jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml",
                       output=tmp_path / "m.jaxport", platforms=["tpu", "cpu"])
    assert r.manifest["functions"]["predict"]["platforms"] == ["tpu", "cpu"]


@pytest.mark.slow
def test_pallas_tpu_kernel_exports_from_cpu(tmp_path, run_cli):
    out = tmp_path / "pallas.jaxport"
    res = run_cli("export", f"{EXAMPLES}/pallas/model.py:add", "--shapes", EXAMPLES / "pallas" / "spec.yaml",
                  "-o", out)
    assert res.exit_code == 0, res.stderr
    res = run_cli("inspect", out, "--json")
    calls = json.loads(res.stdout)["functions"]["add"]["custom_calls"]
    assert {"target": "tpu_custom_call", "count": 1, "stability": "guaranteed"} in calls
    text = run_cli("inspect", out).stdout
    assert re.search(r"tpu_custom_call\s+│\s+1\s+│\s+guaranteed", text)


def _export_copy(root: Path) -> bytes:
    shutil.copytree(EXAMPLES / "pytree", root / "pytree")
    out = root / "out.jaxport"
    jaxport.export(f"{root}/pytree/model.py:encode", root / "pytree" / "spec.yaml", output=out)
    return out.read_bytes()


def test_same_export_from_two_directories_is_byte_identical(tmp_path, monkeypatch):
    a_dir, b_dir = tmp_path / "checkout-a" / "deep", tmp_path / "b"
    a_dir.mkdir(parents=True)
    b_dir.mkdir()
    monkeypatch.chdir(a_dir)
    a = _export_copy(a_dir)
    monkeypatch.chdir(b_dir)
    b = _export_copy(b_dir)
    assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest()
    for blob in (a, b):
        assert str(tmp_path).encode() not in blob
        assert b"checkout-a" not in blob


def test_locations_are_relative_or_stripped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(EXAMPLES / "mlp", tmp_path / "mlp")
    kept = jaxport.export("mlp/model.py:predict", "mlp/spec.yaml", output="kept.jaxport")
    stripped = jaxport.export("mlp/model.py:predict", "mlp/spec.yaml", output="bare.jaxport", strip_locations=True)
    from jaxport.program.module_scan import module_text

    kept_text = module_text(_deserialize(kept.path, "predict").mlir_module_serialized, debug_info=True)
    bare_text = module_text(_deserialize(stripped.path, "predict").mlir_module_serialized, debug_info=True)
    assert '"model.py":' in kept_text and str(tmp_path) not in kept_text
    assert "model.py" not in bare_text
    x = np.ones((2, 784), np.float32)
    np.testing.assert_array_equal(_deserialize(stripped.path, "predict").call(x),
                                  _deserialize(kept.path, "predict").call(x))


CUSTOM_CALL_MODEL = """
import jax

def f(x):
    y = jax.ffi.ffi_call("my_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return jax.ffi.ffi_call("other_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(y)
"""


def test_disallowed_custom_calls_are_refused_with_every_target(make_artifact):
    with pytest.raises(jaxport.PolicyError) as e:
        make_artifact(CUSTOM_CALL_MODEL, 'jaxport: 1\nargs: ["f32[b, 4]"]\n')
    assert str(e.value) == (
        "model.py:f: the program uses custom-call targets that JAX does not guarantee to keep stable:\n"
        "  my_target (used 1x, first at model.py:5:8)\n"
        "  other_target (used 1x, first at model.py:6:11)\n"
        "An artifact using them may stop loading with another jaxlib. If you ship the kernels yourself, allow them "
        "with 'allow_custom_calls: [my_target, other_target]' in the spec or --allow-custom-call my_target "
        "--allow-custom-call other_target.")


def test_allowed_custom_calls_are_recorded(make_artifact):
    path = make_artifact(CUSTOM_CALL_MODEL, 'jaxport: 1\nargs: ["f32[b, 4]"]\nallow_custom_calls: [my_target]\n',
                         allow_custom_calls=["other_target"])
    f = open_artifact(path).manifest["functions"]["f"]
    assert f["allowed_custom_calls"] == ["my_target", "other_target"]
    assert {"target": "my_target", "count": 1, "stability": "allowed"} in f["custom_calls"]
    assert sorted(f["disabled_safety_checks"]) == ["custom_call:my_target", "custom_call:other_target"]


def test_host_callback_is_refused(make_artifact):
    src = "import jax\n\ndef f(x):\n    jax.debug.print('x={}', x)\n    return x * 2\n"
    with pytest.raises(jaxport.ExportError) as e:
        make_artifact(src, 'jaxport: 1\nargs: ["f32[b, 4]"]\n')
    assert str(e.value) == (
        "model.py:f: the function uses host callbacks (debug_print), which call back into Python and cannot be "
        "serialized. Remove jax.debug.print, jax.debug.callback, jax.pure_callback and io_callback from the "
        "exported function: print outside it, or return the value as an extra output.")


def test_pure_callback_is_refused_with_concrete_shapes(make_artifact):
    src = ("import jax\n\ndef f(x):\n    return jax.pure_callback(lambda a: a, "
           "jax.ShapeDtypeStruct(x.shape, x.dtype), x)\n")
    with pytest.raises(jaxport.ExportError, match=re.escape("uses host callbacks (pure_callback)")):
        make_artifact(src, 'jaxport: 1\nargs: ["f32[3, 4]"]\n')


def test_large_constants_warn_with_size_and_location(make_artifact, tmp_path):
    src = ("import numpy as np\nW = np.ones((1024, 512), np.float32)\n\ndef f(x):\n    return x @ W\n")
    make_artifact(src, 'jaxport: 1\nargs: ["f32[b, 1024]"]\n')
    result = jaxport.export("model.py:f", "spec.yaml", output=tmp_path / "w.jaxport")
    assert result.warnings == [
        "function 'f' embeds 2.1 MB of constants in its program (largest: tensor<1024x512xf32>, 2.1 MB). "
        "Closed-over arrays bloat the artifact and slow export: make them arguments of the function and bind them "
        "(--bind NAME=params.npz, or 'bind: params.npz' in the spec), which stores them beside the program (README, "
        "\"Weights beside the program\")."]


def test_user_error_while_tracing_shows_user_frame(make_artifact):
    src = "def f(x):\n    return x.reshape(3, -1)\n"
    with pytest.raises(jaxport.ExportError) as e:
        make_artifact(src, 'jaxport: 1\nargs: ["f32[b, 4]"]\n')
    msg = str(e.value)
    assert msg.startswith("model.py:f: exporting with the spec's shapes failed: InconclusiveDimensionOperation:")
    assert 'model.py", line 2, in f' in msg and "jaxport" not in msg.split("\n", 1)[1]


def test_cli_export_writes_artifact_and_sidecar(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(EXAMPLES / "mlp", tmp_path / "mlp")
    res = run_cli("export", "mlp/model.py:predict", "--shapes", "mlp/spec.yaml", "--name", "digits",
                  "--version", "2.0.0")
    assert res.exit_code == 0, res.stderr
    # --name names the artifact and, in a single-function export, the function
    assert "digits(x: f32[batch, 784]) -> f32[batch, 10]   where 1 <= batch <= 4096" in res.stdout
    art = open_artifact(tmp_path / "digits.jaxport")
    assert art.manifest["metadata"]["name"] == "digits" and art.manifest["metadata"]["version"] == "2.0.0"
    assert (tmp_path / "digits.jaxport.manifest.json").read_bytes() == art.manifest_bytes
    # paths are recorded relative to the spec's directory, not to where export ran
    assert art.manifest["functions"]["digits"]["entrypoint"] == "model.py:predict"
    assert art.manifest["source"] == {"spec": "spec.yaml",
                                      "spec_sha256": hashlib.sha256((EXAMPLES / "mlp" / "spec.yaml").read_bytes())
                                      .hexdigest()}


def test_cli_no_manifest_and_json(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run_cli("export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", EXAMPLES / "mlp" / "spec.yaml",
                  "-o", "x.jaxport", "--no-manifest", "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["artifact"] == "x.jaxport" and doc["manifest_file"] is None and doc["warnings"] == []
    assert doc["manifest"]["functions"]["predict"]["inputs"][0]["name"] == "x"
    assert not (tmp_path / "x.jaxport.manifest.json").exists()


def test_cli_unknown_platform(run_cli):
    res = run_cli("export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", EXAMPLES / "mlp" / "spec.yaml",
                  "--platform", "gpu")
    assert res.exit_code == 3
    assert res.stderr == ("error[spec]: --platform: unknown platform 'gpu'. Did you mean 'cuda'? (JAX names an "
                          "NVIDIA GPU cuda, an AMD one rocm.) Use some of: cpu, cuda, rocm, tpu.\n")


def test_cli_output_directory_missing(run_cli, tmp_path):
    res = run_cli("export", f"{EXAMPLES}/mlp/model.py:predict", "--shapes", EXAMPLES / "mlp" / "spec.yaml",
                  "-o", tmp_path / "nope" / "m.jaxport")
    assert res.exit_code == 11
    assert res.stderr == (f"error[output]: {tmp_path}/nope/m.jaxport: directory {tmp_path}/nope does not exist. "
                          f"Create it first.\n")


def test_write_artifact_stores_payloads_metadata_and_sidecar(tmp_path, monkeypatch):
    import zipfile

    from jaxport.artifact.layout import MANIFEST_NAME
    from jaxport.export.writing.write import Contents, artifact_metadata, write_artifact

    monkeypatch.chdir(tmp_path)
    meta = artifact_metadata({"labels": {"team": "a"}}, None, "2", "fallback")
    assert json.dumps(meta.to_json()) == json.dumps(  # the keys in the spec's order, then the others
        {"labels": {"team": "a"}, "name": "fallback", "version": "2", "description": None})
    (tmp_path / "spec.yaml").write_text("")
    payload = b"bytes written as given"
    result = write_artifact(tmp_path, Contents(meta, {}, {"functions/f.jaxexport": payload}, [],
                                               str(tmp_path / "spec.yaml")), warnings=["note"])
    assert (result.path, result.manifest_path, result.warnings) == (
        tmp_path / "fallback.jaxport", tmp_path / "fallback.jaxport.manifest.json", ["note"])
    assert result.manifest["source"] == {"spec": "spec.yaml"}
    assert result.manifest["members"]["functions/f.jaxexport"]["sha256"] == hashlib.sha256(payload).hexdigest()
    with zipfile.ZipFile(result.path) as z:
        assert z.read("functions/f.jaxexport") == payload
        assert z.read(MANIFEST_NAME) == result.manifest_path.read_bytes()
    assert result.size == result.path.stat().st_size
    unnamed = write_artifact(tmp_path / "x.jaxport", Contents(meta, {}, {}, [], "<no spec>"), write_manifest=False)
    assert (unnamed.manifest["source"], unnamed.manifest_path) == ({"spec": None}, None)
