"""``jaxport extract``: bound weights out as .npz, .safetensors and .npy equal to what was bound, named relative to
their argument so that they bind again to the same tensors; a function's JAX serialization that JAX loads and runs
on its own, its StableHLO as text and bytecode, and usage errors."""

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
from jaxport.errors import SpecError
from tests.support import EXAMPLES

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
    return path, {k: np.asarray(v) for k, v in ns["PARAMS"].items()}


@pytest.fixture(scope="module")
def unbound(mlp_path: Path) -> Path:
    """The MLP with its parameters closed over: no weights member."""
    return mlp_path


@pytest.fixture
def extract(run_cli, tmp_path, monkeypatch):
    """``jaxport extract ARGS...`` from a temporary directory."""
    monkeypatch.chdir(tmp_path)
    return lambda *args: run_cli("extract", *args)


def _mlp_expected(prefix: str = "") -> dict[str, np.ndarray]:
    """The MLP's parameters by the keys of params.npz (relative to the argument ``params``), or with ``prefix``."""
    with np.load(MLP_PARAMS, allow_pickle=False) as z:
        return {f"{prefix}{k}": z[k] for k in z.files}


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
    assert (res.exit_code, res.stdout, res.stderr) == (
        0, f"wrote w.npz (weights, {size} bytes; 4 tensors of argument 'params', named relative to it)\n", "")
    with np.load(tmp_path / "w.npz", allow_pickle=False) as z:
        found = {k: z[k] for k in z.files}
    _assert_same(found, _mlp_expected())
    assert sorted(found) == ["b1", "b2", "w1", "w2"]  # the keys of the bound params.npz


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
    from jaxport.arrayfiles import safetensors as safetensors_io
    from jaxport.errors import SpecError

    path, expected = mixed
    assert extract(path, "--weights", "w.safetensors").exit_code == 0
    found = safetensors_io.read_file(tmp_path / "w.safetensors", "test", SpecError, mmap=True)
    _assert_same(found, expected)
    assert found["scale"].shape == ()
    header = json.loads((tmp_path / "w.safetensors").read_bytes()[8:][:int.from_bytes(
        (tmp_path / "w.safetensors").read_bytes()[:8], "little")])
    assert header["emb"]["dtype"] == "BF16" and header["scale"]["shape"] == []


def test_bfloat16_cannot_go_to_npz(extract, mixed, tmp_path):
    path, _ = mixed
    res = extract(path, "--weights", "w.npz")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: w.npz: .npz cannot record the dtype of 1 tensor(s): "
                                              "'emb' (bfloat16); numpy would store them as raw bytes. Write "
                                              ".safetensors instead.\n")
    assert not (tmp_path / "w.npz").exists()


def test_extracted_weights_bind_again_to_the_same_tensors(extract, mlp_bound, tmp_path, run_cli):
    """extract, then bind the file to the same argument: the same tensor names and values (no doubled prefix), and
    diff finds nothing but the weights' new source."""
    assert extract(mlp_bound, "--weights", "w.npz").exit_code == 0
    again = jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", EXAMPLES / "mlp" / "spec-npz.yaml",
                           output="again.jaxport", bind={"params": "w.npz"}).path
    with open_artifact(mlp_bound) as a, open_artifact(again) as b:
        assert b.manifest["weights"]["tensors"] == a.manifest["weights"]["tensors"]
        assert sorted(b.manifest["weights"]["tensors"]) == ["params/b1", "params/b2", "params/w1", "params/w2"]
    res = run_cli("diff", mlp_bound, again, "--fail-on", "breaking", "--json")
    assert res.exit_code == 0, res.stdout
    out = json.loads(res.stdout)
    assert [(c["severity"], c["kind"]) for c in out["changes"]] == [("compatible", "bound_source_changed")]
    assert out["programs"]["apply"]["status"] == "identical"
    x = np.load(EXAMPLES / "mlp" / "x.npy")
    np.testing.assert_array_equal(jaxport.load(again)(x), jaxport.load(mlp_bound)(x))


def test_full_names_keep_the_argument_prefix(extract, mlp_bound, tmp_path):
    res = extract(mlp_bound, "--weights", "w.npz", "--full-names")
    size = (tmp_path / "w.npz").stat().st_size
    assert (res.exit_code, res.stdout) == (0, f"wrote w.npz (weights, {size} bytes; 4 tensors, full names)\n")
    with np.load(tmp_path / "w.npz", allow_pickle=False) as z:
        _assert_same({k: z[k] for k in z.files}, _mlp_expected("params/"))


def test_full_names_do_not_bind_again_and_the_error_says_why(extract, mlp_bound, tmp_path):
    assert extract(mlp_bound, "--weights", "w.npz", "--full-names").exit_code == 0
    with pytest.raises(SpecError) as e:
        jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", EXAMPLES / "mlp" / "spec-npz.yaml",
                       output="again.jaxport", bind={"params": "w.npz"})
    assert str(e.value) == (
        "the function reads key 'w1' from a bound argument, and the bound value has no such key. Missing: 'w1'. "
        "--bind params: 'params' is bound to w.npz with keys: params/b1, params/b2, params/w1, "
        "params/w2 (did you mean 'w1'?) (every key starts with 'params/', the argument's own name: the file holds "
        "the artifact's full tensor names, as 'jaxport extract --weights --full-names' writes them; extract without "
        "--full-names for names relative to 'params'). Make the bound file's keys match what the function reads.")
    assert not (tmp_path / "again.jaxport").exists()


TWO_BINDS_MODEL = """\
import numpy as np

PARAMS = {"w": np.arange(6, dtype=np.float32).reshape(3, 2), "b": np.ones(2, np.float32)}
SCALE = np.float32(0.5) * np.ones(2, np.float32)


def f(params, scale, x):
    return (x @ params["w"] + params["b"]) * scale
"""


@pytest.fixture(scope="module")
def two_binds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two arguments bound: a dict of two arrays and a single array."""
    d = tmp_path_factory.mktemp("two")
    (d / "model.py").write_text(TWO_BINDS_MODEL)
    (d / "spec.yaml").write_text("jaxport: 1\ndims: [b]\nargs:\n  - bind: model.py:PARAMS\n  - bind: model.py:SCALE\n"
                                 "  - \"f32[b, 3]\"\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        return jaxport.export("model.py:f", "spec.yaml", output=d / "two.jaxport").path


def test_several_bound_arguments_need_arg(extract, two_binds, tmp_path):
    res = extract(two_binds, "--weights", "w.npz")
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {two_binds}: the artifact binds 2 arguments to weights "
                                              f"(params, scale); extract one with --arg NAME (its tensors named "
                                              f"relative to it, as --bind NAME=FILE reads them), or all with "
                                              f"--full-names.\n")
    assert not (tmp_path / "w.npz").exists()
    res = extract(two_binds, "--weights", "w.npz", "--arg", "params")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.endswith("bytes; 2 tensors of argument 'params', named relative to it)\n")
    with np.load(tmp_path / "w.npz") as z:
        assert sorted(z.files) == ["b", "w"]
        np.testing.assert_array_equal(z["w"], np.arange(6, dtype=np.float32).reshape(3, 2))
    assert extract(two_binds, "--weights", "all.npz", "--full-names").exit_code == 0
    with np.load(tmp_path / "all.npz") as z:
        assert sorted(z.files) == ["params/b", "params/w", "scale"]


def test_a_single_array_argument_goes_to_npy_and_binds_again(extract, two_binds, tmp_path):
    res = extract(two_binds, "--weights", "s.npz", "--arg", "scale")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: s.npz: argument 'scale' is bound to a single array; "
                                              "write it as .npy (which --bind scale=FILE.npy reads), or with "
                                              "--full-names.\n")
    res = extract(two_binds, "--weights", "s.npy", "--arg", "scale")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.endswith("bytes; 1 tensor of argument 'scale', named relative to it)\n")
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), np.full(2, 0.5, np.float32))
    assert extract(two_binds, "--weights", "p.npz", "--arg", "params").exit_code == 0
    again = jaxport.export(f"{two_binds.parent}/model.py:f", two_binds.parent / "spec.yaml", output="again.jaxport",
                           bind={"params": "p.npz", "scale": "s.npy"}).path
    with open_artifact(two_binds) as a, open_artifact(again) as b:
        assert b.manifest["weights"]["tensors"] == a.manifest["weights"]["tensors"]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(jaxport.load(again)(x), (x @ np.arange(6, dtype=np.float32).reshape(3, 2) + 1) * 0.5)
    res = extract(two_binds, "--weights", "p.npy", "--arg", "params")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: p.npy: a .npy file holds one array, and 2 tensors would "
                                              "be written; write .npz or .safetensors instead.\n")


def test_unknown_arg(extract, two_binds):
    res = extract(two_binds, "--weights", "w.npz", "--arg", "parms")
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {two_binds}: --arg parms: no argument of that name is "
                                              f"bound to weights (bound arguments: params, scale).\n")


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
    weights = {k: jax.numpy.asarray(v) for k, v in _mlp_expected("params/").items()}
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


@pytest.mark.parametrize("name", ["w.txt", "w.np", "w"])
def test_weights_need_npz_or_safetensors(extract, mlp_bound, tmp_path, name):
    res = extract(mlp_bound, "--weights", name)
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {name}: weights are written as .npz or .safetensors (or "
                                              f"one array as .npy); choose one of those extensions.\n")
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(("args", "message"), [
    ([], "choose exactly one of --weights OUT, --payload FUNCTION or --mlir FUNCTION."),
    (["--weights", "w.npz", "--mlir", "apply", "-o", "m.mlir"],
     "choose exactly one of --weights OUT, --payload FUNCTION or --mlir FUNCTION."),
    (["--payload", "apply"], "--payload and --mlir write to the file given with -o."),
    (["--mlir", "apply"], "--payload and --mlir write to the file given with -o."),
    (["--mlir", "apply", "-o", "m.mlir", "--arg", "params"], "--arg and --full-names go with --weights."),
    (["--payload", "apply", "-o", "p.bin", "--full-names"], "--arg and --full-names go with --weights."),
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
    assert str(e.value) == ("w.npz: .npz cannot record the dtype of 3 tensor(s): 'bfloat16' (bfloat16), "
                            "'float8_e4m3fn' (float8_e4m3fn), 'float8_e5m2' (float8_e5m2); numpy would store "
                            "them as raw bytes. Write .safetensors instead.")
    assert np.zeros(1, ml_dtypes.bfloat16).dtype.str == "<V2"  # why: numpy has no name for it
