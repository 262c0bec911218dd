"""``call`` with real data: value ranges of random inputs (``--range``, a spec's ``range:``), ``--save-inputs``,
golden outputs (``--expect``), reduced-precision outputs (``-o .safetensors``, ``--output-dtype f32``) and ``--cast``.
Values are compared with the function run directly."""

from __future__ import annotations

import json
import os
import re
import struct

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxport
from jaxport.arrayfiles import safetensors as safetensors_io
from jaxport.errors import FormatError, InputError, UsageError
from jaxport.run.values import inputs, npyio, outputs
from tests.support import EXAMPLES, REPO, example, function_record, load_module, npz_arrays

EMBED = '''
import jax.numpy as jnp

TABLE = jnp.arange(32 * 4, dtype=jnp.float32).reshape(32, 4) / 7.0


def embed(tok, x):
    return {"emb": TABLE[tok].astype(jnp.bfloat16), "scaled": (x * 2).astype(jnp.bfloat16),
            "q": x.astype(jnp.float8_e4m3fn), "n": tok.sum()}


def poison(x):
    return x * jnp.nan


def f16_in(x):
    return x * 2
'''
SPEC = '''jaxport: 1
dims:
  b: {min: 1, max: 64}
args:
  - {shape: "b", dtype: i32, range: [0, 32]}
  - {shape: "b, 3", dtype: f32, range: [-1, 1]}
'''
SPEC_PLAIN = '''jaxport: 1
dims:
  b: {min: 1, max: 64}
args:
  - "i32[b]"
  - "f32[b, 3]"
'''
MLP_SPEC = '''jaxport: 1
dims:
  batch: {min: 1, max: 8}
args:
  - "f32[batch, 784]"
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The artifacts of this file, exported once: embed with a spec declaring ranges and without, the MLP of
    examples/mlp (spec in the temporary directory), and two small functions."""
    d = tmp_path_factory.mktemp("models")
    (d / "model.py").write_text(EMBED)
    (d / "spec.yaml").write_text(SPEC)
    (d / "plain.yaml").write_text(SPEC_PLAIN)
    (d / "mlp.yaml").write_text(MLP_SPEC)
    (d / "x.yaml").write_text("jaxport: 1\nargs:\n  - \"f32[2, 3]\"\n")
    paths = {
        "embed": jaxport.export(f"{d}/model.py:embed", d / "spec.yaml", output=d / "embed.jaxport").path,
        "plain": jaxport.export(f"{d}/model.py:embed", d / "plain.yaml", output=d / "plain.jaxport").path,
        "mlp": jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", d / "mlp.yaml", output=d / "mlp.jaxport").path,
        "poison": jaxport.export(f"{d}/model.py:poison", d / "x.yaml", output=d / "poison.jaxport").path,
        "f32": jaxport.export(f"{d}/model.py:f16_in", d / "x.yaml", output=d / "f32.jaxport").path,
    }
    return paths, load_module(d / "model.py")


def _safetensors(path):
    """A .safetensors file read by hand (8-byte header length, JSON header, raw data), with ml_dtypes' types."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    kinds = {"BF16": ml_dtypes.bfloat16, "F8_E4M3": ml_dtypes.float8_e4m3fn, "I32": np.int32, "F32": np.float32}
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + begin:8 + n + end], kinds[info["dtype"]]).reshape(info["shape"])
    return header, out


def _direct(module, arrays):
    out = jax.jit(module.embed)(arrays["tok"], arrays["x"])
    return {k: np.asarray(v) for k, v in out.items()}


# --- ranges: the library --------------------------------------------------------------------------------------

FN = function_record({"inputs": [{"name": "x", "shape": [4000], "dtype": "float32"},
                                  {"name": "h", "shape": [4000], "dtype": "bfloat16"},
                                  {"name": "tok", "shape": [4000], "dtype": "int32"},
                                  {"name": "u", "shape": [4000], "dtype": "uint64"},
                                  {"name": "i8", "shape": [4000], "dtype": "int8"},
                                  {"name": "m", "shape": [64], "dtype": "bool"}]})


def test_ranges_reach_the_generated_values():
    got = inputs.random_inputs(FN, {}, seed=3, ranges={"x": (-0.5, 0.25), "h": (0, 1), "tok": (0, 32000),
                                                      "u": (2**64 - 4, 2**64), "i8": (-128, 128)})
    assert got["x"].dtype == np.float32 and -0.5 <= got["x"].min() and got["x"].max() < 0.25
    assert got["x"].min() < -0.49 and got["x"].max() > 0.24  # uniform over the whole range
    h = got["h"].astype(np.float32)  # bf16 rounds 0.999 up to 1.0; the range stays half-open
    assert got["h"].dtype == ml_dtypes.bfloat16 and h.min() >= 0 and h.max() < 1 and h.max() == 0.99609375
    assert got["tok"].dtype == np.int32 and got["tok"].min() >= 0 and got["tok"].max() <= 31999
    assert got["tok"].max() > 31000 and len(np.unique(got["tok"])) > 3000
    assert got["u"].dtype == np.uint64 and set(got["u"].tolist()) == {2**64 - 4, 2**64 - 3, 2**64 - 2, 2**64 - 1}
    assert got["i8"].min() == -128 and got["i8"].max() == 127
    assert got["m"].dtype == np.bool_ and 0 < got["m"].sum() < 64
    again = inputs.random_inputs(FN, {}, seed=3, ranges={"x": (-0.5, 0.25), "h": (0, 1), "tok": (0, 32000),
                                                        "u": (2**64 - 4, 2**64), "i8": (-128, 128)})
    for name in got:
        np.testing.assert_array_equal(got[name], again[name])


def test_defaults_never_give_meaningless_integers_or_bools():
    got = inputs.random_inputs(FN, {}, seed=0)
    for name in ("tok", "u", "i8"):
        assert got[name].min() == 0 and got[name].max() == 7, name  # never negative: valid indices
    assert abs(float(got["x"].std()) - 1) < 0.05  # floats stay standard normal
    assert got["m"].dtype == np.bool_


def test_the_manifest_range_is_the_default_and_range_overrides_it():
    fn = function_record({"inputs": [{"name": "tok", "shape": [500], "dtype": "int32", "range": [100, 104]},
                                      {"name": "x", "shape": [500], "dtype": "float16", "range": [2.0, 3.0]}]})
    got = inputs.random_inputs(fn, {}, seed=1)
    assert set(got["tok"].tolist()) == {100, 101, 102, 103}
    assert got["x"].dtype == np.float16 and got["x"].min() >= 2 and got["x"].max() < 3
    over = inputs.random_inputs(fn, {}, seed=1, ranges={"tok": (7, 8)})
    assert set(over["tok"].tolist()) == {7}
    assert over["x"].min() >= 2 and over["x"].max() < 3


@pytest.mark.parametrize("ranges,message", [
    ({"nope": (0, 1)}, "--range: unknown input name 'nope'; the inputs are: x, h, tok, u, i8, m."),
    ({"tokk": (0, 1)}, "--range: unknown input name 'tokk'; the inputs are: x, h, tok, u, i8, m. Did you mean 'tok'?"),
    ({"m": (0, 2)}, "--range: input 'm' is bool, which takes no range (random bools are fair coin flips); leave out "
                    "its range."),
    ({"i8": (0, 129)}, "--range: the range 0:129 of input 'i8' leaves int8, which holds -128..127; give a range "
                       "within -128:128."),
    ({"u": (-1, 3)}, "--range: the range -1:3 of input 'u' leaves uint64, which holds 0..18446744073709551615; give "
                     "a range within 0:18446744073709551616."),
    ({"tok": (0.5, 8)}, "--range: the range 0.5:8 of the int32 input 'tok' must have integer bounds (LO..HI-1 are "
                        "drawn)."),
    ({"x": (1, 1)}, "--range: the range 1:1 of input 'x' is empty; LO must be less than HI (the range is half-open, "
                    "[LO, HI))."),
    ({"x": (0, float("nan"))}, "--range: the range 0:nan of input 'x' is not finite; give two finite numbers."),
    ({"h": (0, 1e39)}, "--range: the range 0:1e+39 of input 'h' leaves bfloat16, whose largest finite value is "
                       "3.38953e+38; give a range within -3.38953e+38:3.38953e+38."),
    ({"h": (1.001, 1.002)}, "--range: no bfloat16 value lies in the range 1.001:1.002 of input 'h'; widen it."),
])
def test_bad_ranges_are_usage_errors(ranges, message):
    with pytest.raises(UsageError) as e:
        inputs.check_ranges(FN, ranges)
    assert str(e.value) == message
    with pytest.raises(UsageError):
        inputs.random_inputs(FN, {}, ranges=ranges)


def test_a_bad_manifest_range_is_a_format_error():
    with pytest.raises(FormatError, match="^" + re.escape(
            "manifest.json: functions['f'].inputs[0].range: a bool input takes no range (its values are false and "
            "true)") + "$"):  # refused when the manifest is read, before any value is drawn
        function_record({"inputs": [{"name": "m", "shape": [2], "dtype": "bool", "range": [0, 1]}]})


# --- ranges: the command line ---------------------------------------------------------------------------------


def test_call_random_uses_the_spec_ranges_and_range_overrides_them(call, models, tmp_path):
    paths, module = models
    res = call(paths["embed"], "--random", "--dim", "b=64", "--save-inputs", "in.npz", "-o", "out.safetensors")
    assert res.exit_code == 0, res.stderr
    saved = npz_arrays(tmp_path / "in.npz")
    assert saved["tok"].dtype == np.int32 and 0 <= saved["tok"].min() and saved["tok"].max() < 32
    assert saved["x"].dtype == np.float32 and -1 <= saved["x"].min() and saved["x"].max() < 1
    _, got = _safetensors(tmp_path / "out.safetensors")
    want = _direct(module, saved)
    assert set(got) == set(want) == {"emb", "n", "q", "scaled"}
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_array_equal(got[name], want[name])
    res = call(paths["embed"], "--random", "--dim", "b=64", "--range", "tok=30:32", "--range", "x=5:6",
               "--save-inputs", "in2.npz")
    assert res.exit_code == 0, res.stderr
    saved = npz_arrays(tmp_path / "in2.npz")
    assert set(saved["tok"].tolist()) == {30, 31}
    assert 5 <= saved["x"].min() and saved["x"].max() < 6


def test_call_range_for_token_ids(call, models, tmp_path):
    paths, _ = models
    res = call(paths["plain"], "--random", "--dim", "b=64", "--range", "tok=0:2", "--save-inputs", "in.npz",
               "--json")
    assert res.exit_code == 0, res.stderr
    saved = npz_arrays(tmp_path / "in.npz")
    assert set(saved["tok"].tolist()) == {0, 1}
    assert abs(float(saved["x"].std()) - 1) < 0.3  # no range: standard normal
    doc = json.loads(res.stdout)
    assert doc["saved_inputs"] == {"file": "in.npz"}


@pytest.mark.parametrize("args,message", [
    (["--inputs", "x.npy", "--range", "x=0:1"], "--dim, --seed and --range choose what --random generates; add "
                                                "--random."),
    (["--random", "--range", "x"], "'x' is not NAME=LO:HI (e.g. --range tokens=0:32000)."),
    (["--random", "--range", "x=1:a"], "'x=1:a': LO and HI must be finite numbers"),
    (["--random", "--range", "x=2:1"], "'x=2:1': the range is empty; LO must be less than HI"),
    (["--random", "--range", "x=0:inf"], "'x=0:inf': LO and HI must be finite numbers"),
    (["--random", "--range", "x=0:1", "--range", "x=0:2"], "input 'x' has two ranges; give one --range per input."),
    (["--random", "--range", "y=0:1"], "error[usage]: --range: unknown input name 'y'; the inputs are: x.\n"),
    (["--random", "--range", "x=0:1e39"], "error[usage]: --range: the range 0:1e+39 of input 'x' leaves float32"),
    (["--save-inputs", "in.npy", "--random"], "--save-inputs in.npy: inputs are saved as an .npz keyed by input name"),
    (["--random", "--cast"], "--cast converts input files; --random generates every input with its own dtype."),
    (["--random", "--atol", "1"], "--atol, --rtol and --allow-nonfinite set how --expect compares; add --expect."),
    (["--random", "--expect", "r.npz", "--batch-size", "2"], "--expect cannot be combined with --batch-size."),
    (["--random", "--save-inputs", "a.npz", "-o", "a.npz"], "--save-inputs and -o name the same file; give two "
                                                            "files."),
])
def test_usage_errors(call, models, args, message):
    paths, _ = models
    res = call(paths["mlp"], *args)
    assert res.exit_code == 2, res.stderr
    assert message in res.stderr
    assert res.stdout == ""


def test_call_refuses_a_range_on_a_bool_input(call, make_artifact):
    path = make_artifact("def f(m):\n    return m\n", "jaxport: 1\nargs:\n  - \"bool[4]\"\n")
    res = call(path, "--random", "--range", "m=0:2")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: --range: input 'm' is bool, which takes no range (random bools are fair coin "
                          "flips); leave out its range.\n")


# --- --save-inputs --------------------------------------------------------------------------------------------


def test_save_inputs_round_trips_bytes_and_values(call, models, tmp_path):
    paths, module = models
    res = call(paths["mlp"], "--random", "--dim", "batch=3", "--seed", "4", "--save-inputs", "a.npz", "-o", "o1.npz")
    assert res.exit_code == 0, res.stderr
    assert "Wrote a.npz (1 input)" in res.stdout
    res = call(paths["mlp"], "--inputs", "a.npz", "--save-inputs", "b.npz", "-o", "o2.npz")
    assert res.exit_code == 0, res.stderr
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    x = npz_arrays(tmp_path / "a.npz")["x"]
    assert x.shape == (3, 784) and x.dtype == np.float32
    mlp = example("mlp")
    want = np.asarray(jax.jit(mlp.predict)(x))
    for out in ("o1.npz", "o2.npz"):
        np.testing.assert_allclose(npz_arrays(tmp_path / out)["output"], want, rtol=1e-5, atol=1e-6)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_save_inputs_keeps_bfloat16_inputs_readable_by_inputs(call, make_artifact, tmp_path):
    path = make_artifact("def f(x):\n    return x * 2\n", "jaxport: 1\nargs:\n  - \"bf16[5]\"\n")
    res = call(path, "--random", "--save-inputs", "in.npz", "-o", "a.safetensors")
    assert res.exit_code == 0, res.stderr
    res = call(path, "--inputs", "in.npz", "--expect", "a.safetensors")
    assert res.exit_code == 0, res.stderr
    x = npyio.read_named_arrays("in.npz", declared={"x": "bfloat16"})["x"]
    assert x.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(_safetensors(path.parent / "a.safetensors")[1]["output"], x * 2)


def test_save_inputs_refuses_to_replace_an_input(call, models, tmp_path):
    paths, _ = models
    np.savez(tmp_path / "in.npz", x=np.zeros((2, 784), np.float32))
    before = (tmp_path / "in.npz").read_bytes()
    res = call(paths["mlp"], "--inputs", "in.npz", "--save-inputs", "in.npz")
    assert res.exit_code == 11
    assert res.stderr == ("error[output]: in.npz: is the same file as the input in.npz; writing the output there "
                          "would destroy that input. Choose another output file.\n")
    assert (tmp_path / "in.npz").read_bytes() == before


# --- --expect ---------------------------------------------------------------------------------------------------


def test_expect_passes_and_fails_with_exit_codes_and_messages(call, models, tmp_path):
    paths, _ = models
    assert call(paths["mlp"], "--random", "--dim", "batch=2", "--save-inputs", "in.npz", "-o", "ref.npz"
                ).exit_code == 0
    res = call(paths["mlp"], "--inputs", "in.npz", "--expect", "ref.npz")
    assert res.exit_code == 0, res.stderr
    assert "OK: 1 output matches the reference." in res.stdout
    ref = npz_arrays(tmp_path / "ref.npz")["output"]
    bad = ref.copy()
    bad[1, 7] += 0.5
    np.savez(tmp_path / "bad.npz", output=bad)
    res = call(paths["mlp"], "--inputs", "in.npz", "--expect", "bad.npz")
    assert res.exit_code == 12
    assert res.stderr == (
        f"error[verification]: --expect bad.npz: 1 of 1 output differs from the reference: output 'output': 1 of 20 "
        f"values differ (max abs error 0.5, tolerance 1e-06 + 1e-05*|expected|); worst at index (1, 7): artifact "
        f"{float(ref[1, 7]):.6g}, reference {float(bad[1, 7]):.6g}.\n")
    assert "FAILED: 1 of 1 output differs from the reference." in res.stdout
    res = call(paths["mlp"], "--inputs", "in.npz", "--expect", "bad.npz", "--atol", "0.6")
    assert res.exit_code == 0, res.stderr


def test_expect_json_document(call, models, tmp_path):
    import jsonschema

    paths, _ = models
    assert call(paths["mlp"], "--random", "--dim", "batch=2", "--save-inputs", "in.npz", "-o", "ref.npz"
                ).exit_code == 0
    ref = npz_arrays(tmp_path / "ref.npz")["output"]
    np.savez(tmp_path / "bad.npz", output=ref + 1)
    res = call(paths["mlp"], "--inputs", "in.npz", "--expect", "bad.npz", "--json")
    assert res.exit_code == 12
    doc = json.loads(res.stdout)
    schema = json.loads((REPO / "specs" / "schemas" / "cli" / "call.schema.json").read_text())
    jsonschema.validate(doc, schema)
    e = doc["expect"]
    assert e["reference"] == "bad.npz" and e["passed"] is False and e["allow_nonfinite"] is False
    (o,) = e["outputs"]
    assert o["name"] == "output" and o["passed"] is False and o["mismatched"] == 20 and o["problem"] is None
    assert o["max_abs_error"] == pytest.approx(1.0) and (o["atol"], o["rtol"]) == (1e-6, 1e-5)
    assert o["sides"] == {"actual": "artifact", "expected": "reference"}
    assert res.stderr.startswith("error[verification]: --expect bad.npz: 1 of 1 output differs")


@pytest.mark.parametrize("arrays,message", [
    ({"y": np.zeros((2, 10), np.float32)},
     "--expect ref.npz: no reference for output 'output'; the file holds 'y'. Write references with 'jaxport call -o "
     "FILE' (names are the output names: 'output')."),
    ({"output": np.zeros((2, 10), np.float32), "extra": np.zeros(1)},
     "--expect ref.npz: 'extra' is not an output of the function (its outputs: 'output'); the file must hold exactly "
     "the outputs."),
])
def test_expect_names_missing_and_extra_references(call, models, tmp_path, arrays, message):
    paths, _ = models
    np.savez(tmp_path / "ref.npz", **arrays)
    res = call(paths["mlp"], "--random", "--dim", "batch=2", "--expect", "ref.npz")
    assert res.exit_code == 9
    assert res.stderr == f"error[input]: {message}\n"


def test_expect_shape_mismatch_and_single_npy(call, models, tmp_path):
    paths, _ = models
    np.save(tmp_path / "ref.npy", np.zeros((3, 10), np.float32))
    res = call(paths["mlp"], "--random", "--dim", "batch=2", "--expect", "ref.npy")
    assert res.exit_code == 12
    assert "output 'output': shape (2, 10) from the artifact, (3, 10) from the reference" in res.stderr
    assert call(paths["mlp"], "--random", "--dim", "batch=2", "-o", "ok.npy").exit_code == 0
    assert call(paths["mlp"], "--random", "--dim", "batch=2", "--expect", "ok.npy").exit_code == 0


def test_expect_non_finite_outputs_are_inconclusive(call, models, tmp_path):
    paths, _ = models
    assert call(paths["poison"], "--random", "-o", "nan.npz").exit_code == 0
    res = call(paths["poison"], "--random", "--seed", "9", "--expect", "nan.npz")
    assert res.exit_code == 12
    warning, error = res.stderr.splitlines()  # --random gave NaN everywhere: said once, then the verdict
    assert warning.startswith("warning: output 'output' is NaN everywhere on the --random inputs")
    assert error == ("error[verification]: --expect nan.npz: 1 of 1 output is inconclusive: output 'output': "
                     "every value is NaN/Inf on both sides (add --allow-nonfinite to accept outputs that are "
                     "NaN/Inf everywhere on both sides).")
    assert "FAILED: 1 of 1 output is inconclusive." in res.stdout
    res = call(paths["poison"], "--random", "--seed", "9", "--expect", "nan.npz", "--allow-nonfinite")
    assert res.exit_code == 0, res.stderr
    assert "inconclusive (allowed)" in res.stdout
    np.savez(tmp_path / "half.npz", output=np.array([[np.nan, 1, np.nan], [np.nan] * 3], np.float32))
    res = call(paths["poison"], "--random", "--expect", "half.npz", "--allow-nonfinite")
    assert res.exit_code == 12  # a number where the output has NaN is a mismatch, allowed or not
    assert "output 'output': 1 of 6 values differ" in res.stderr


def test_expect_refuses_a_hostile_reference(call, models, tmp_path):
    paths, _ = models
    (tmp_path / "p.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", 64) +
                                     b"{'descr': '|O', 'fortran_order': False, 'shape': (1,)}".ljust(63) + b"\n")
    res = call(paths["mlp"], "--random", "--dim", "batch=2", "--expect", "p.npy")
    assert res.exit_code == 9
    assert "could only be read by unpickling; jaxport refuses them" in res.stderr
    os.mkfifo(tmp_path / "fifo.npz")
    res = call(paths["mlp"], "--random", "--dim", "batch=2", "--expect", "fifo.npz")
    assert res.exit_code == 9
    assert "fifo.npz: is a FIFO (named pipe), not a .npz file" in res.stderr


# --- reduced-precision outputs -------------------------------------------------------------------------------------


def test_bfloat16_and_float8_outputs_to_safetensors(call, models, tmp_path):
    paths, module = models
    assert call(paths["embed"], "--random", "--dim", "b=5", "--save-inputs", "in.npz", "-o", "out.safetensors"
                ).exit_code == 0
    header, got = _safetensors(tmp_path / "out.safetensors")
    assert {k: v["dtype"] for k, v in header.items()} == {"emb": "BF16", "n": "I32", "q": "F8_E4M3",
                                                          "scaled": "BF16"}
    want = _direct(module, npz_arrays(tmp_path / "in.npz"))
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        np.testing.assert_array_equal(got[name], want[name])
    from safetensors import safe_open  # the safetensors library reads the file as written

    with safe_open(str(tmp_path / "out.safetensors"), "flax") as f:
        assert sorted(f.keys()) == ["emb", "n", "q", "scaled"] and f.get_slice("q").get_dtype() == "F8_E4M3"
        np.testing.assert_array_equal(np.asarray(f.get_tensor("emb")), want["emb"])
        assert f.get_tensor("emb").dtype == jnp.bfloat16
    res = call(paths["embed"], "--inputs", "in.npz", "--expect", "out.safetensors")
    assert res.exit_code == 0, res.stderr


def test_bfloat16_to_npz_warns_and_output_dtype_f32_writes_plain_float32(call, models, tmp_path):
    paths, module = models
    res = call(paths["embed"], "--random", "--dim", "b=5", "--save-inputs", "in.npz", "-o", "raw.npz")
    assert res.exit_code == 0
    assert ("warning: raw.npz: 'emb' (bfloat16), 'q' (float8_e4m3fn), 'scaled' (bfloat16) stored as raw void bytes, "
            "which plain numpy cannot use (jaxport and array.view(ml_dtypes.<type>) can); write .safetensors to keep "
            "the dtype, or add --output-dtype f32.") in " ".join(res.stderr.split())
    assert npz_arrays(tmp_path / "raw.npz")["emb"].dtype.kind == "V"
    res = call(paths["embed"], "--inputs", "in.npz", "-o", "f32.npz", "--output-dtype", "f32", "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["warnings"] == [] and res.stderr == ""
    assert {o["name"]: o["dtype"] for o in doc["outputs"]} == {"emb": "float32", "n": "int32", "q": "float32",
                                                               "scaled": "float32"}
    got = npz_arrays(tmp_path / "f32.npz")  # plain numpy
    want = _direct(module, npz_arrays(tmp_path / "in.npz"))
    for name in want:
        expected = want[name].astype(np.float32) if name != "n" else want[name]
        assert got[name].dtype == expected.dtype, name
        np.testing.assert_array_equal(got[name], expected)
    # The raw .npz still serves as a reference, and a bf16 reference checks f32 outputs.
    assert call(paths["embed"], "--inputs", "in.npz", "--expect", "raw.npz").exit_code == 0
    assert call(paths["embed"], "--inputs", "in.npz", "--expect", "raw.npz", "--output-dtype", "f32").exit_code == 0
    res = call(paths["embed"], "--inputs", "in.npz", "--expect", "f32.npz")
    assert res.exit_code == 12
    assert ("output 'emb': dtype bfloat16 from the artifact, float32 from the reference (add --output-dtype f32 to "
            "compare float32 references)") in res.stderr
    assert call(paths["embed"], "--inputs", "in.npz", "--expect", "f32.npz", "--output-dtype", "f32").exit_code == 0


def test_streamed_call_uses_ranges_and_warns_about_raw_bfloat16(call, make_artifact):
    path = make_artifact("import jax.numpy as jnp\n\ndef f(tok):\n    return (tok * 2).astype(jnp.bfloat16)\n",
                         "jaxport: 1\ndims:\n  b: {min: 1, max: 64}\nargs:\n  - \"i32[b]\"\n")
    res = call(path, "--random", "--dim", "b=8", "--batch-size", "4", "--range", "tok=3:5", "-o", "s.npz")
    assert res.exit_code == 0, res.stderr
    assert ("warning: s.npz: 'output' (bfloat16) stored as raw void bytes, which plain numpy cannot use (jaxport and "
            "array.view(ml_dtypes.<type>) can); without --batch-size, write .safetensors to keep the dtype, or add "
            "--output-dtype f32.") in " ".join(res.stderr.split())
    got = npyio.read_named_arrays(path.parent / "s.npz", declared={"output": "bfloat16"})["output"]
    assert got.dtype == ml_dtypes.bfloat16 and set(got.astype(np.float32).tolist()) <= {6.0, 8.0}
    np.testing.assert_array_equal(got, inputs.random_inputs(jaxport.load(path).function_record, {"b": 8},
                                                            ranges={"tok": (3, 5)})["tok"] * 2)


def test_safetensors_output_refuses_complex128_before_running(call, make_artifact):
    path = make_artifact("def f(x):\n    return x * 2\n", "jaxport: 1\nargs:\n  - \"c128[2]\"\n")
    res = call(path, "--random", "-o", "out.safetensors")
    assert res.exit_code == 11
    assert res.stderr == ("error[output]: out.safetensors: .safetensors has no dtype for output 'output' (complex128); "
                          "write .npz instead.\n")


# --- --cast --------------------------------------------------------------------------------------------------------


def test_cast_converts_when_every_value_is_kept(call, models, tmp_path):
    paths, module = models
    x16 = np.arange(6, dtype=np.float16).reshape(2, 3) / 4
    np.save(tmp_path / "x16.npy", x16)
    res = call(paths["f32"], "--inputs", "x16.npy")
    assert res.exit_code == 9
    assert res.stderr == (
        "error[input]: input 'x' has dtype float16, but the artifact expects float32. Convert it into a new file "
        "with: python -c \"import numpy as np; np.save('x16.float32.npy', np.load('x16.npy').astype(np.float32))\" "
        "and give x16.float32.npy. Or let 'jaxport call --cast' convert it on reading (every value is kept).\n")
    res = call(paths["f32"], "--inputs", "x16.npy", "--cast", "-o", "out.npy", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["inputs"][0]["source"] == "x16.npy (cast from float16)"
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), np.asarray(module.f16_in(x16.astype(np.float32))))
    assert np.load(tmp_path / "x16.npy").dtype == np.float16  # the file is untouched
    # float64 -> float32 keeps these values (quarters), though not every float64: judged value by value
    np.save(tmp_path / "x64.npy", x16.astype(np.float64))
    res = call(paths["f32"], "--inputs", "x64.npy", "--cast", "-o", "out64.npy", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["inputs"][0]["source"] == "x64.npy (cast from float64)"
    np.testing.assert_array_equal(np.load(tmp_path / "out64.npy"), np.load(tmp_path / "out.npy"))
    tenth = x16.astype(np.float64)
    tenth[1, 2] = 0.1
    np.save(tmp_path / "tenth.npy", tenth)
    res = call(paths["f32"], "--inputs", "tenth.npy", "--cast")
    assert res.exit_code == 9
    assert res.stderr == ("error[input]: input 'x' has dtype float64, and --cast converts only where every value is "
                          "kept: x[1, 2] = 0.1 would become 0.10000000149011612 as float32. Convert the array yourself "
                          "into a new file if that is what you mean.\n")


def test_cast_of_integers_checks_each_value(call, make_artifact, tmp_path):
    path = make_artifact("def f(ids):\n    return ids * 2\n", "jaxport: 1\nargs:\n  - \"i32[4]\"\n")
    np.save(tmp_path / "ids.npy", np.array([0, 7, 2**31 - 1, -(2**31)], np.int64))  # numpy's default int64
    res = call(path, "--inputs", tmp_path / "ids.npy", "--cast", "-o", tmp_path / "out.npy")
    assert res.exit_code == 0, res.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"),
                                  np.array([0, 7, 2**31 - 1, -(2**31)], np.int32) * np.int32(2))
    res = call(path, "--inputs", tmp_path / "ids.npy")
    assert res.exit_code == 9
    assert res.stderr.endswith("Or let 'jaxport call --cast' convert it on reading: it does when every value is kept "
                               "as int32.\n")
    np.save(tmp_path / "big.npy", np.array([0, 7, 2**31, 1], np.int64))
    res = call(path, "--inputs", tmp_path / "big.npy", "--cast")
    assert res.exit_code == 9
    assert res.stderr == ("error[input]: input 'ids' has dtype int64, and --cast converts only where every value is "
                          "kept: ids[2] = 2147483648 would become -2147483648 as int32. Convert the array yourself "
                          "into a new file if that is what you mean.\n")
    # a uint64 past int32 that wraps to -1 and back to itself: the round trip alone would keep it
    np.save(tmp_path / "wraps.npy", np.array([0, 7, 2**64 - 1, 1], np.uint64))
    res = call(path, "--inputs", tmp_path / "wraps.npy", "--cast")
    assert res.exit_code == 9
    assert "ids[2] = 18446744073709551615 would become -1 as int32." in res.stderr
    np.save(tmp_path / "halves.npy", np.array([0.0, 1.0, 2.5, 3.0]))
    res = call(path, "--inputs", tmp_path / "halves.npy", "--cast")
    assert res.exit_code == 9
    assert "ids[2] = 2.5 would become 2.0 as int32." in res.stderr


def test_safe_cast_rule():
    from jaxport import dtypes

    assert dtypes.safe_cast("float16", "float32") and dtypes.safe_cast("bfloat16", "float32")
    assert dtypes.safe_cast("int8", "int32") and dtypes.safe_cast("uint8", "bfloat16")
    assert dtypes.safe_cast("bool", "float8_e5m2")
    assert not dtypes.safe_cast("float32", "bfloat16") and not dtypes.safe_cast("float64", "float32")
    assert not dtypes.safe_cast("int64", "float64")  # numpy calls it safe; 2**53 + 1 is not kept
    assert not dtypes.safe_cast("int8", "float8_e4m3fn")  # ml_dtypes calls it safe; 127 is not kept
    assert not dtypes.safe_cast("int32", "uint32") and not dtypes.safe_cast("float32", "int32")


# --- reading named arrays --------------------------------------------------------------------------------------


def test_read_named_arrays_formats(tmp_path):
    arrays = {"a/b": np.arange(6, dtype=np.float32).reshape(2, 3), "h": np.array([1.5, -2], ml_dtypes.bfloat16),
              "s": np.array(3, np.int64)}
    with open(tmp_path / "t.safetensors", "wb") as f:
        safetensors_io.write(f, arrays)
    got = npyio.read_named_arrays(tmp_path / "t.safetensors")
    assert list(got) == ["a/b", "h", "s"]
    for name, value in arrays.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape
        np.testing.assert_array_equal(got[name], value)
    outputs.save_outputs(tmp_path / "t.npz", list(arrays.items()))
    got = npyio.read_named_arrays(tmp_path / "t.npz", declared={"h": "bfloat16"})
    np.testing.assert_array_equal(got["h"], arrays["h"])
    np.save(tmp_path / "one.npy", arrays["a/b"])
    assert list(npyio.read_named_arrays(tmp_path / "one.npy", single_name="y")) == ["y"]


@pytest.mark.parametrize("name,data,message", [
    ("x.txt", b"", "x.txt: arrays are read from .npz (keyed by name), .safetensors or a single .npy; 'x.txt' is none "
                   "of these."),
    ("a.npy", None, "a.npy: a .npy file holds one unnamed array; give an .npz or .safetensors file keyed by name."),
    ("s.safetensors", struct.pack("<Q", 1 << 40) + b"{}", "s.safetensors: the header claims 1099511627776 bytes, more "
                                                         "than the file holds"),
    ("s.safetensors", struct.pack("<Q", 2) + b"[]", "s.safetensors: the header must start with '{' (safetensors' "
                                                     "rule); it starts with b'['."),
    ("s.safetensors", struct.pack("<Q", 60) + b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'.ljust(60)
     + b"\0" * 12, "s.safetensors: bytes 8..12 at the end of the data section belong to no tensor: the data "
                  "section must be covered exactly, with no trailing bytes."),
    ("s.safetensors", struct.pack("<Q", 112) + (b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                b'"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}').ljust(112)
     + b"\0" * 8, "s.safetensors: tensor 'b' (bytes 4..8) overlaps tensor 'a', which ends at byte 8: each byte "
                  "of the data section belongs to one tensor."),
    ("s.safetensors", struct.pack("<Q", 56) + b'{"a":{"dtype":"O","shape":[1],"data_offsets":[0,8]}}'.ljust(56)
     + b"\0" * 8, "s.safetensors: tensor 'a': dtype O is not one jaxport reads"),
    ("v.npz", "void", "v.npz: member 'h.npy': the array has the raw void dtype '|V2' (how numpy stores bfloat16), "
                      "and nothing says what 'h' is; write the arrays as .safetensors, which records their dtype."),
])
def test_read_named_arrays_refuses_damage(tmp_path, name, data, message):
    path = tmp_path / name
    if data == "void":
        np.savez(path, h=np.ones(2, ml_dtypes.bfloat16))
    elif data is None:
        np.save(path, np.ones(2))
    else:
        path.write_bytes(data)
    with pytest.raises(InputError) as e:
        npyio.read_named_arrays(path)
    assert str(e.value).startswith(f"{path}: " + message.split(": ", 1)[1])
