"""``jaxport extract``: bound weights out as .npz and .safetensors equal to what was bound, a function's JAX
serialization that JAX loads and runs on its own, its StableHLO as text and bytecode, and usage errors."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

import jaxport
from jaxport.artifact.container import open_artifact

from .conftest import EXAMPLES

MLP_PARAMS = EXAMPLES / "mlp" / "params.npz"

MIXED_MODEL = """\
import ml_dtypes
import numpy as np

PARAMS = {
    "emb": (np.arange(24, dtype=np.float32).reshape(6, 4) / 8).astype(ml_dtypes.bfloat16),
    "w": np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2),
    "ids": np.arange(3, dtype=np.int32),
    "scale": np.float16(0.5),
}


def f(params, x):
    return (x @ params["w"]) * params["scale"] + params["emb"][params["ids"]].sum()
"""


@pytest.fixture(scope="module")
def mlp_bound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP example bound from params.npz."""
    out = tmp_path_factory.mktemp("mlp") / "mlp.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", EXAMPLES / "mlp" / "spec-npz.yaml", output=out).path


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """Bound tensors of four dtypes (bfloat16 and a float16 scalar among them), and the values bound."""
    d = tmp_path_factory.mktemp("mixed")
    (d / "model.py").write_text(MIXED_MODEL)
    (d / "spec.yaml").write_text("jaxport: 1\ndims: {batch: {max: 8}}\nargs:\n  - bind: model.py:PARAMS\n"
                                 "  - \"f32[batch, 4]\"\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        path = jaxport.export("model.py:f", "spec.yaml", output=d / "mixed.jaxport").path
    ns: dict[str, Any] = {}
    exec(MIXED_MODEL, ns)
    return path, {f"params/{k}": np.asarray(v) for k, v in ns["PARAMS"].items()}


@pytest.fixture(scope="module")
def unbound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP with its parameters closed over: no weights member."""
    out = tmp_path_factory.mktemp("plain") / "plain.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=out).path


@pytest.fixture
def extract(run_cli, tmp_path, monkeypatch):
    """``jaxport extract ARGS...`` from a temporary directory."""
    monkeypatch.chdir(tmp_path)
    return lambda *args: run_cli("extract", *args)


def _mlp_expected() -> dict[str, np.ndarray]:
    with np.load(MLP_PARAMS, allow_pickle=False) as z:
        return {f"params/{k}": z[k] for k in z.files}


def _assert_same(found: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(found) == sorted(expected)
    for name, value in expected.items():
        assert found[name].dtype == value.dtype, name
        assert found[name].shape == value.shape, name
        assert found[name].tobytes() == value.tobytes(), name


# --- weights -----------------------------------------------------------------------------------------------------


def test_weights_to_npz_equal_the_bound_arrays(extract, mlp_bound, tmp_path):
    res = extract(mlp_bound, "--weights", "w.npz")
    size = (tmp_path / "w.npz").stat().st_size
    assert (res.exit_code, res.stdout, res.stderr) == (0, f"wrote w.npz (weights, {size} bytes)\n", "")
    with np.load(tmp_path / "w.npz", allow_pickle=False) as z:
        found = {k: z[k] for k in z.files}
    _assert_same(found, _mlp_expected())


def test_weights_to_safetensors_equal_the_bound_arrays(extract, mlp_bound, tmp_path):
    from safetensors.numpy import load_file

    res = extract(mlp_bound, "--weights", "w.safetensors")
    assert res.exit_code == 0, res.stderr
    _assert_same(load_file(str(tmp_path / "w.safetensors")), _mlp_expected())


def test_npz_output_is_reproducible(extract, mlp_bound, tmp_path):
    assert extract(mlp_bound, "--weights", "a.npz").exit_code == 0
    assert extract(mlp_bound, "--weights", "b.npz").exit_code == 0
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.npz") as z:
        assert {i.date_time for i in z.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert [i.filename for i in z.infolist()] == [f"{n}.npy" for n in sorted(_mlp_expected())]


def test_bfloat16_and_scalars_round_trip_through_safetensors(extract, mixed, tmp_path):
    """safetensors stores BF16 and scalars; the file binds again (jaxport reads BF16, which safetensors.numpy
    cannot) to the same tensors."""
    from jaxport.export.bind import read_safetensors

    path, expected = mixed
    assert extract(path, "--weights", "w.safetensors").exit_code == 0
    found = read_safetensors(tmp_path / "w.safetensors", "test")
    _assert_same(found, expected)
    assert found["params/scale"].shape == ()
    header = json.loads((tmp_path / "w.safetensors").read_bytes()[8:][:int.from_bytes(
        (tmp_path / "w.safetensors").read_bytes()[:8], "little")])
    assert header["params/emb"]["dtype"] == "BF16" and header["params/scale"]["shape"] == []


def test_bfloat16_cannot_go_to_npz(extract, mixed, tmp_path):
    path, _ = mixed
    res = extract(path, "--weights", "w.npz")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: w.npz: .npz cannot record the dtype of 1 tensor(s): "
                                              "'params/emb' (bfloat16); numpy would store them as raw bytes. Write "
                                              ".safetensors instead.\n")
    assert not (tmp_path / "w.npz").exists()


def test_extracted_weights_bind_again(extract, mlp_bound, tmp_path):
    """Extracted tensors keep their argument prefix: binding the file gives the same program inputs."""
    assert extract(mlp_bound, "--weights", "w.npz").exit_code == 0
    (tmp_path / "model.py").write_text("def f(weights, x):\n    p = weights['params']\n"
                                       "    return x @ p['w1'] + p['b1']\n")
    (tmp_path / "spec.yaml").write_text("jaxport: 1\nargs:\n  - bind: w.npz\n  - \"f32[2, 784]\"\n")
    result = jaxport.export("model.py:f", "spec.yaml", output="again.jaxport")
    assert sorted(result.manifest["weights"]["tensors"]) == [f"weights/{n}" for n in sorted(_mlp_expected())]
    with open_artifact(mlp_bound) as art:
        before = {n.removeprefix("params/"): t["sha256"] for n, t in art.manifest["weights"]["tensors"].items()}
    after = {n.removeprefix("weights/params/"): t["sha256"] for n, t in result.manifest["weights"]["tensors"].items()}
    assert after == before


def test_damaged_weights_are_not_extracted(extract, mlp_bound, tmp_path):
    data = bytearray(mlp_bound.read_bytes())
    with open_artifact(mlp_bound) as art:
        member = art.members["weights.bin"]
    data[member.offset + member.size // 2] ^= 1
    (tmp_path / "bad.jaxport").write_bytes(bytes(data))
    res = extract("bad.jaxport", "--weights", "w.npz")
    assert res.exit_code == 8
    assert res.stderr.startswith("error[integrity]: bad.jaxport: member 'weights.bin' is damaged: its sha256 is ")
    assert not (tmp_path / "w.npz").exists()


# --- payload and StableHLO -------------------------------------------------------------------------------------


def test_payload_loads_and_runs_with_jax_alone(extract, mlp_bound, tmp_path):
    res = extract(mlp_bound, "--payload", "apply", "-o", "apply.jaxexport")
    data = (tmp_path / "apply.jaxexport").read_bytes()
    assert (res.exit_code, res.stdout) == (0, f"wrote apply.jaxexport (payload, {len(data)} bytes)\n")
    with open_artifact(mlp_bound) as art:
        assert data == art.read("functions/apply.jaxexport")
    exported = jax.export.deserialize(bytearray(data))
    assert len(exported.in_avals) == 5  # x and the four bound tensors
    x = np.load(EXAMPLES / "mlp" / "x.npy")
    weights = {k: jax.numpy.asarray(v) for k, v in _mlp_expected().items()}
    out = exported.call(x, __jaxport_weights__=weights)
    np.testing.assert_allclose(out, jaxport.load(mlp_bound)(x), rtol=1e-6, atol=1e-6)


def test_mlir_text(extract, mlp_bound, tmp_path):
    res = extract(mlp_bound, "--mlir", "apply", "-o", "apply.mlir")
    text = (tmp_path / "apply.mlir").read_text()
    assert (res.exit_code, res.stdout) == (0, f"wrote apply.mlir (mlir, {len(text.encode())} bytes)\n")
    assert "func.func public @main" in text
    assert "stablehlo.dot_general" in text


def test_mlir_bytecode(extract, mlp_bound, tmp_path):
    res = extract(mlp_bound, "--mlir", "apply", "-o", "apply.mlirbc", "--json")
    data = (tmp_path / "apply.mlirbc").read_bytes()
    assert res.exit_code == 0
    assert json.loads(res.stdout) == {"artifact": str(mlp_bound), "written": [
        {"path": "apply.mlirbc", "kind": "mlirbc", "bytes": len(data)}]}
    assert data.startswith(b"ML\xefR")
    with open_artifact(mlp_bound) as art:
        exported = jax.export.deserialize(bytearray(art.read("functions/apply.jaxexport")))
    assert data == exported.mlir_module_serialized


# --- errors ------------------------------------------------------------------------------------------------------


def test_no_weights_to_extract(extract, unbound):
    res = extract(unbound, "--weights", "w.npz")
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {unbound}: the artifact has no bound weights to "
                                              f"extract.\n")


@pytest.mark.parametrize("option", ["--payload", "--mlir"])
def test_unknown_function(extract, mlp_bound, option):
    res = extract(mlp_bound, option, "aply", "-o", "out.bin")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: the artifact has no function 'aply'. Did you mean "
                                              "'apply'? Functions: apply.\n")


@pytest.mark.parametrize("name", ["w.txt", "w.npy", "w"])
def test_weights_need_npz_or_safetensors(extract, mlp_bound, tmp_path, name):
    res = extract(mlp_bound, "--weights", name)
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {name}: weights are written as .npz or .safetensors; "
                                              f"choose one of those extensions.\n")
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(("args", "message"), [
    ([], "choose exactly one of --weights OUT, --payload FUNCTION or --mlir FUNCTION."),
    (["--weights", "w.npz", "--mlir", "apply", "-o", "m.mlir"],
     "choose exactly one of --weights OUT, --payload FUNCTION or --mlir FUNCTION."),
    (["--payload", "apply"], "--payload and --mlir write to the file given with -o."),
    (["--mlir", "apply"], "--payload and --mlir write to the file given with -o."),
])
def test_usage_errors(extract, mlp_bound, args, message):
    res = extract(mlp_bound, *args)
    assert res.exit_code == 2
    assert res.stderr == f"error[usage]: {message[:-1]}. See 'jaxport extract --help'.\n"


def test_json_error(extract, unbound):
    res = extract(unbound, "--weights", "w.npz", "--json")
    assert res.exit_code == 2
    assert json.loads(res.stdout) == {"error": {"kind": "usage", "exit_code": 2, "message": (
        f"{unbound}: the artifact has no bound weights to extract.")}}


def test_npz_dtypes_that_numpy_cannot_name_are_listed(tmp_path, monkeypatch):
    """All three ml_dtypes types are refused for .npz, each named."""
    from jaxport.artifact import extract
    from jaxport.errors import UsageError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(
        "import ml_dtypes\nimport numpy as np\n\nP = {k: np.zeros(2, getattr(ml_dtypes, k)) for k in "
        "('bfloat16', 'float8_e4m3fn', 'float8_e5m2')}\n\n\ndef f(p, x):\n    return x\n")
    (tmp_path / "spec.yaml").write_text("jaxport: 1\nargs:\n  - bind: model.py:P\n  - \"f32[2]\"\n")
    path = jaxport.export("model.py:f", "spec.yaml", output="o.jaxport").path
    with open_artifact(path) as art, pytest.raises(UsageError) as e:
        extract.extract_weights(art, "w.npz")
    assert str(e.value) == ("w.npz: .npz cannot record the dtype of 3 tensor(s): 'p/bfloat16' (bfloat16), "
                            "'p/float8_e4m3fn' (float8_e4m3fn), 'p/float8_e5m2' (float8_e5m2); numpy would store "
                            "them as raw bytes. Write .safetensors instead.")
    assert np.zeros(1, ml_dtypes.bfloat16).dtype.str == "<V2"  # why: numpy has no name for it
