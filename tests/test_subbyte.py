"""Sub-byte types (int4, uint4, float4_e2m1fn): an int4 weight-only quantised model through every command, the packed
layout on disk, and each place that reads or writes them (spec, manifest, input files, safetensors, IREE)."""

from __future__ import annotations

import json
import re
import textwrap
import zipfile

import jax
import ml_dtypes
import numpy as np
import pytest

import jaxport
from jaxport import dtypes
from jaxport.arrayfiles import safetensors as safetensors_io
from jaxport.arrayfiles import subbyte
from jaxport.artifact import manifest as manifest_mod
from jaxport.errors import FormatError, InputError, SpecError
from jaxport.run.values import npyio

#: An MLP whose weights ship as an int4 weight-only checkpoint: symmetric int4 codes in groups of 4 input rows, each
#: group and output column with its float32 scale (the GPTQ/AWQ layout), dequantized inside the function.
MODEL = textwrap.dedent('''
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    GROUP = 4


    def quantize(w):
        groups = w.reshape(w.shape[0] // GROUP, GROUP, w.shape[1])
        scale = (np.abs(groups).max(axis=1) / 7).astype(np.float32)
        codes = np.clip(np.round(groups / scale[:, None, :]), -8, 7).reshape(w.shape)
        return {"w4": codes.astype(ml_dtypes.int4), "scale": scale}


    def dense(q, x):
        w = q["w4"].astype(jnp.float32).reshape(-1, GROUP, q["w4"].shape[1]) * q["scale"][:, None, :]
        return x @ w.reshape(q["w4"].shape)


    def apply(params, x):
        return dense(params["out"], jax.nn.gelu(dense(params["hidden"], x)))


    rng = np.random.default_rng(0)
    PARAMS = {"hidden": quantize(rng.standard_normal((16, 12)).astype(np.float32)),
              "out": quantize(rng.standard_normal((12, 3)).astype(np.float32))}
''')
SPEC = textwrap.dedent('''
    jaxport: 1
    dims: {batch: {max: 64}}
    args:
      - bind: ckpt/7
      - "f32[batch, 16]"
''')


@pytest.fixture
def quantized(tmp_path, monkeypatch):
    """The model's directory: model.py, spec.yaml and its int4 checkpoint written by orbax (how JAX training jobs
    save one), the current directory."""
    ocp = pytest.importorskip("orbax.checkpoint")
    from tests.support import load_module

    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "spec.yaml").write_text(SPEC)
    model = load_module(tmp_path / "model.py")
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save((tmp_path / "ckpt" / "7").resolve(), model.PARAMS)
    checkpointer.wait_until_finished()
    monkeypatch.chdir(tmp_path)
    return tmp_path, model


def test_an_int4_weight_only_model_exports_binds_calls_and_verifies_bit_for_bit(quantized, run_cli):
    d, model = quantized
    assert run_cli("export", "model.py:apply", "--shapes", "spec.yaml", "-o", "q.jaxport").exit_code == 0
    manifest = json.loads((d / "q.jaxport.manifest.json").read_text())
    assert manifest["format_version"] == "1.3"
    assert manifest["weights"]["tensors"]["params/hidden/w4"] == {
        **manifest["weights"]["tensors"]["params/hidden/w4"], "dtype": "int4", "shape": [16, 12], "nbytes": 96}
    # on disk: the codes two to a byte, the first of each pair in the low nibble
    entry = manifest["weights"]["tensors"]["params/hidden/w4"]
    with zipfile.ZipFile(d / "q.jaxport") as z:
        stored = z.read("weights.bin")[entry["offset"]:entry["offset"] + entry["nbytes"]]
    codes = (np.asarray(model.PARAMS["hidden"]["w4"]).astype(np.int8).reshape(-1) & 0xF).astype(np.uint8)
    assert stored == bytes(codes[0::2] | (codes[1::2] << 4))
    inspected = run_cli("inspect", "q.jaxport")
    assert "format 1.3," in inspected.stdout
    assert re.search(r"params/hidden/w4\s+│ i4\[16, 12\]\s+│ 96 B", inspected.stdout), inspected.stdout

    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    np.save(d / "x.npy", x)
    res = run_cli("call", "q.jaxport", "--inputs", "x.npy", "-o", "y.npy", "--no-cache")
    assert res.exit_code == 0, res.stderr
    want = np.asarray(jax.jit(model.apply)(model.PARAMS, x))
    np.testing.assert_array_equal(np.load(d / "y.npy"), want)
    np.testing.assert_array_equal(np.asarray(jaxport.load("q.jaxport")(x)), want)

    res = run_cli("verify", "q.jaxport")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.rstrip().endswith("OK: 3 cases match.")

    # extracted as numpy saves int4 (one element per byte), rebound: the same weights, byte for byte
    assert run_cli("extract", "q.jaxport", "--weights", "w.npz").exit_code == 0
    assert run_cli("rebind", "q.jaxport", "--bind", "params=w.npz", "-o", "again.jaxport").exit_code == 0
    with zipfile.ZipFile(d / "q.jaxport") as a, zipfile.ZipFile(d / "again.jaxport") as b:
        assert a.read("weights.bin") == b.read("weights.bin")
    res = run_cli("extract", "q.jaxport", "--weights", "w.safetensors")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: w.safetensors: .safetensors cannot record the dtype of 2 tensor(s): 'hidden/w4' (int4), "
        "'out/w4' (int4). Write .npz instead (4-bit tensors as numpy saves them, one element per byte, which rebind "
        "reads back).\n"))


def test_the_model_runs_on_iree_from_its_packed_weights(quantized, run_cli, tmp_path):
    pytest.importorskip("iree.runtime")
    d, model = quantized
    path = jaxport.export("model.py:apply", "spec.yaml", output=d / "q.jaxport").path
    x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
    got = np.asarray(jaxport.load(path, runtime="iree", cache_dir=tmp_path / "cache")(x))
    np.testing.assert_allclose(got, np.asarray(jax.jit(model.apply)(model.PARAMS, x)), rtol=1e-5, atol=1e-5)


#: int4 weights dequantized to bfloat16, the matrix product in bfloat16, the output float32 near 100: XLA and IREE
#: round the bfloat16 intermediates apart, by 1 or 2.
BF16_MODEL = textwrap.dedent('''
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    rng = np.random.default_rng(0)
    W = {"w4": rng.integers(-8, 8, size=(64, 16)).astype(ml_dtypes.int4), "scale": np.full((16,), 0.5, np.float32)}


    def apply(params, x):
        w = params["w4"].astype(jnp.bfloat16) * params["scale"].astype(jnp.bfloat16)
        return ((x.astype(jnp.bfloat16) @ w) * 8 + 100).astype(jnp.float32)
''')


def test_two_compilers_compare_an_output_computed_in_bfloat16_with_its_tolerance(tmp_path, monkeypatch, run_cli):
    """verify --runtime iree takes the tolerances of the least precise float the program computes in, not the
    output's: an f32 output of bf16 arithmetic differs by 2 near 100 between two correct compilers, which f32's
    tolerances (rtol 1e-4) call a failure and bf16's (rtol 4e-2) agreement; the live function gives the same values as
    the artifact run by JAX, bit for bit."""
    from jaxport.tolerance import lowest_float, tolerance

    assert lowest_float({"i4", "i32", "bf16", "f32"}) == "bfloat16"
    assert lowest_float({"complex<f32>", "f64"}) == "float32" and lowest_float({"i1", "i32"}) is None
    assert tolerance("float32", across_compilers=True, computed_in="bfloat16") == (1e-2, 4e-2)
    assert tolerance("float32", across_compilers=True, computed_in="float64") == (1e-6, 1e-4)
    assert tolerance("float32", computed_in="bfloat16") == (1e-6, 1e-5)  # one compiler: the output's own
    assert tolerance("int32", across_compilers=True, computed_in="bfloat16") == (0.0, 0.0)
    pytest.importorskip("iree.runtime")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.py").write_text(BF16_MODEL)
    (tmp_path / "spec.yaml").write_text('jaxport: 1\ndims: {b: {max: 64}}\nargs:\n  - bind: q.py:W\n'
                                        '  - "f32[b, 64]"\n')
    assert run_cli("export", "q.py:apply", "-s", "spec.yaml", "-o", "q.jaxport").exit_code == 0
    assert run_cli("verify", "q.jaxport").exit_code == 0
    res = run_cli("verify", "q.jaxport", "--runtime", "iree", "--module-dir", str(tmp_path / "iree"), "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["notes"] == ["function 'apply' computes in bfloat16: its output 'output' takes bfloat16's "
                               "tolerances for two compilers (atol 0.01, rtol 0.04), which round its intermediates "
                               "apart"]
    outputs = [o for case in report["cases"] for o in case["outputs"]]
    assert {(o["atol"], o["rtol"]) for o in outputs} == {(0.01, 0.04)}
    assert max(o["max_abs_error"] for o in outputs) >= 1  # the compilers do differ: f32's tolerance would fail it
    res = run_cli("verify", "q.jaxport", "--runtime", "iree", "--module-dir", str(tmp_path / "iree"),
                  "--rtol", "1e-4", "--atol", "1e-6")
    assert res.exit_code == 12 and "FAILED: 3 of 3 cases differ." in res.stdout


@pytest.mark.parametrize("name, values, stored", [
    ("int4", [1, -2, 7, -8, 0], [0xE1, 0x87, 0x00]),
    ("uint4", [15, 0, 3], [0x0F, 0x03]),
    ("float4_e2m1fn", [0.5, -6.0, -0.0, 3.0], [0xF1, 0x58]),
])
def test_sub_byte_elements_pack_two_to_a_byte_first_in_the_low_nibble(name, values, stored):
    arr = np.array(values, np.float32).astype(dtypes.to_numpy(name))
    assert subbyte.pack(arr).tobytes() == bytes(stored)
    assert dtypes.stored_nbytes(name, len(values)) == len(stored)
    back = subbyte.unpack(bytes(stored), name, len(values))
    assert back.dtype == arr.dtype and back.view(np.uint8).tolist() == arr.view(np.uint8).tolist()


def test_a_manifest_whose_sub_byte_tensor_has_unpacked_size_is_refused():
    from tests.support import GOLDEN_MLP

    with zipfile.ZipFile(GOLDEN_MLP) as z:
        raw = json.loads(z.read("manifest.json"))
    raw["weights"] = {"member": "weights.bin", "tensors": {"w": {"dtype": "int4", "shape": [8, 5], "offset": 0,
                                                                  "nbytes": 40, "sha256": "ab" * 32}}}
    raw["members"]["weights.bin"] = {"size": 40, "sha256": "ab" * 32}
    with pytest.raises(FormatError, match=re.escape(
            "weights.tensors['w'].nbytes: 40 bytes, but shape [8, 5] of int4 takes 20")):
        manifest_mod.validate(raw)


def test_spec_dtypes_and_ranges_of_sub_byte_types(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text('jaxport: 1\nargs:\n  - "i4[3]"\n  - {shape: [2], dtype: u4, range: [0, 16]}\n  - "f4e2m1fn[2]"\n')
    parsed = jaxport.load_spec(spec)
    assert [leaf.dtype for leaf in parsed.functions[None].args] == ["int4", "uint4", "float4_e2m1fn"]
    spec.write_text('jaxport: 1\nargs:\n  - {shape: [2], dtype: i4, range: [0, 9]}\n')
    with pytest.raises(SpecError, match=re.escape(
            "args[0].range: [0, 9) does not fit int4, whose values are -8..7; give LO >= -8 and HI <= 8")):
        jaxport.load_spec(spec)
    spec.write_text('jaxport: 1\nargs:\n  - "int2[4]"\n')
    with pytest.raises(SpecError, match=re.escape(
            "args[0]: dtype 'int2' cannot be exported: JAX's serialization has no code for it (jax.export cannot "
            "serialize a function that takes or returns one). Use int4 (or a wider type) for its values.")):
        jaxport.load_spec(spec)


@pytest.fixture
def four_bit(make_artifact):
    """An artifact taking an int4 input and returning it, with a float32 output beside it."""
    return make_artifact("import jax.numpy as jnp\n\ndef f(w, x):\n    return x @ w.astype(jnp.float32), w\n",
                         'jaxport: 1\ndims: {b: {max: 8}}\nargs: ["i4[4, 3]", "f32[b, 4]"]\noutputs: [y, w]\n')


def test_int4_input_files_are_read_as_numpy_saves_them_and_int8_needs_cast(four_bit, run_cli, tmp_path):
    w = np.array([[1, -2, 3], [0, 7, -8], [1, 1, 0], [2, -1, 1]], np.int8)
    x = np.ones((2, 4), np.float32)
    np.save(tmp_path / "w4.npy", w.astype(ml_dtypes.int4))  # numpy: raw void bytes, one element per byte
    np.save(tmp_path / "w8.npy", w)
    np.save(tmp_path / "x.npy", x)
    res = run_cli("call", four_bit, "--inputs", tmp_path / "w4.npy", "--inputs", tmp_path / "x.npy", "--no-cache",
                  "-o", tmp_path / "out.npz")
    assert res.exit_code == 0, res.stderr
    assert res.stderr == (f"warning: {tmp_path / 'out.npz'}: 'w' (int4) stored as raw void bytes, which plain numpy "
                          f"cannot use (jaxport and array.view(ml_dtypes.<type>) can); int4 has no dtype in "
                          f".safetensors either.\n")
    out = npyio.read_named_arrays(tmp_path / "out.npz", declared={"y": "float32", "w": "int4"})
    np.testing.assert_array_equal(out["w"].astype(np.int8), w)
    np.testing.assert_array_equal(out["y"], x @ w.astype(np.float32))
    res = run_cli("call", four_bit, "--inputs", tmp_path / "w8.npy", "--inputs", tmp_path / "x.npy", "--no-cache")
    assert res.exit_code == 9
    assert res.stderr.startswith("error[input]: input 'w' has dtype int8, but the artifact expects int4.")
    res = run_cli("call", four_bit, "--inputs", tmp_path / "w8.npy", "--inputs", tmp_path / "x.npy", "--no-cache",
                  "--cast")
    assert res.exit_code == 0, res.stderr


def test_a_raw_int4_byte_is_read_by_its_low_nibble(tmp_path):
    np.save(tmp_path / "w.npy", np.array([0x7F, 0x18, 0xF8], np.uint8).view("V1"))
    got = npyio.read_npy(tmp_path / "w.npy", "int4", "w")
    assert got.view(np.uint8).tolist() == [0x0F, 0x08, 0x08] and got.astype(np.int8).tolist() == [-1, -8, -8]


def test_float4_round_trips_through_safetensors_packed(tmp_path):
    a = np.array([[0.5, -6.0], [3.0, -0.0]], np.float32).astype(ml_dtypes.float4_e2m1fn)
    with open(tmp_path / "a.safetensors", "wb") as f:
        safetensors_io.write(f, {"a": a})
    raw = (tmp_path / "a.safetensors").read_bytes()
    (n,) = np.frombuffer(raw[:8], np.uint64)
    assert json.loads(raw[8:8 + int(n)]) == {"a": {"dtype": "F4", "shape": [2, 2], "data_offsets": [0, 2]}}
    assert raw[8 + int(n):] == bytes([0xF1, 0x85])
    for mmap in (False, True):
        back = safetensors_io.read_file(tmp_path / "a.safetensors", "a.safetensors", InputError, mmap=mmap)["a"]
        assert back.dtype == a.dtype and back.view(np.uint8).tolist() == a.view(np.uint8).tolist()
    with open(tmp_path / "b.safetensors", "wb") as f, pytest.raises(ValueError, match=re.escape(
            "tensor 'b' holds 3 float4_e2m1fn elements, which .safetensors cannot store (it packs 2 to a byte, and a "
            "tensor fills whole bytes)")):
        safetensors_io.write(f, {"b": a.reshape(-1)[:3]})


def test_iree_refuses_float4_with_the_reason(make_artifact):
    pytest.importorskip("iree.runtime")
    path = make_artifact("import jax.numpy as jnp\n\ndef f(w):\n    return w.astype(jnp.float32)\n",
                         'jaxport: 1\nargs: ["f4e2m1fn[4]"]\n')
    with pytest.raises(jaxport.errors.PlatformError, match=re.escape(
            "function 'f': input 'w' is float4_e2m1fn, which IREE cannot compile (it has no f4E2M1FN element type); "
            "run it with the JAX runtime (--runtime jax).")):
        jaxport.load(path, runtime="iree")


def test_iree_run_module_reads_and_writes_int4_as_the_command_line_says(four_bit, tmp_path):
    """The command line ``jaxport compile`` writes reads an int4 input from a packed ``NAME.bin`` with its shape and
    type (``--input=4x3xi4=@w.bin``) and writes an int4 output to one: ``iree-run-module`` has no int4 ``.npy`` (it
    takes numpy's, one element per byte, as packed bytes and computes from the wrong values without an error)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("iree.runtime")
    tool = Path(sys.executable).parent / "iree-run-module"
    if not tool.exists() and shutil.which("iree-run-module") is None:
        pytest.skip("iree-run-module is not installed")
    compiled = jaxport.compile_artifact(four_bit, tmp_path / "m.vmfb", dims={"b": 2}, cpu="host")
    (fn,) = compiled.functions
    assert fn.argv[3:] == ["--function=main", "--input=4x3xi4=@w.bin", "--input=@x.npy", "--output=@y.npy",
                           "--output=@w.bin"]
    w = np.array([[1, -2, 3], [0, 7, -8], [1, 1, 0], [2, -1, 1]], np.int8)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (tmp_path / "w.bin").write_bytes(subbyte.pack(w.astype(ml_dtypes.int4)).tobytes())
    np.save(tmp_path / "x.npy", x)
    argv = [str(tool) if tool.exists() else "iree-run-module", *fn.argv[1:]]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), x @ w.astype(np.float32), rtol=1e-6)
    back = subbyte.unpack(np.frombuffer((tmp_path / "w.bin").read_bytes(), np.uint8), "int4", w.size)
    assert back.reshape(w.shape).astype(np.int8).tolist() == w.tolist()


def test_a_compiled_module_takes_and_returns_int4_packed(four_bit, tmp_path):
    """``jaxport compile`` and the numpy-only loader beside the module: an int4 input goes to IREE packed (its i4
    buffers), an int4 output comes back unpacked, the same values as the artifact run by JAX."""
    pytest.importorskip("iree.runtime")
    from jaxport.run.compile import iree_loader

    compiled = jaxport.compile_artifact(four_bit, tmp_path / "m.vmfb", dims={"b": 2}, cpu="host")
    w = np.array([[1, -2, 3], [0, 7, -8], [1, 1, 0], [2, -1, 1]], np.int8).astype(ml_dtypes.int4)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = iree_loader.load(compiled.run)(w=w, x=x)
    want = jaxport.load(four_bit).call_named({"w": w, "x": x})
    np.testing.assert_allclose(got["y"], np.asarray(want[0]), rtol=1e-6)
    assert got["w"].dtype == w.dtype and got["w"].view(np.uint8).tolist() == w.view(np.uint8).tolist()
