"""``jaxport call``: outputs equal the function's for every way of giving inputs, each bad input gets its own
message and exit code, outputs on disk, JSON, benchmark and the compilation cache."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import jax
import ml_dtypes
import numpy as np
import pytest

import jaxport
from jaxport.run.values import inputs
from tests.support import EXAMPLES, example, load_module, npz_arrays

LOCAL = jax.export.default_export_platform()  # "cpu" on a CPU-only machine


@pytest.fixture(scope="module")
def tpu_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("tpu") / "mlp-tpu.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", platforms=["tpu"],
                          output=out).path


def _mlp_ref(x):
    return np.asarray(jax.jit(example("mlp").predict)(x))


def _encode_ref(arrays):
    model = example("pytree")
    params = {"w": arrays["params/w"], "b": arrays["params/b"]}
    out = jax.jit(model.encode, static_argnums=2)(arrays["x"], arrays["mask"], 3, params=params)
    return {k: np.asarray(v) for k, v in out.items()}


def _encode_arrays(batch, h, seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 2 * h)).astype(np.float32),
            "mask": (rng.random((batch, 16)) < 0.5).astype(ml_dtypes.bfloat16),
            "params/b": rng.standard_normal(10).astype(np.float32),
            "params/w": rng.standard_normal((h, 10)).astype(np.float32)}


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# --- outputs equal the function's ------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["positional", "named", "npz"])
@pytest.mark.parametrize("batch", [1, 13, 4096])
def test_mlp_inputs_in_each_form(call, mlp_path, form, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype(np.float32)
    np.save("x.npy", x)
    np.savez("in.npz", x=x)
    given = {"positional": ["-i", "x.npy"], "named": ["--inputs", "x=x.npy"], "npz": ["--inputs", "in.npz"]}[form]
    res = call(mlp_path, *given, "-o", "out.npz")
    assert res.exit_code == 0, res.stderr
    _close(npz_arrays("out.npz")["output"], _mlp_ref(x))


@pytest.mark.parametrize("batch", [1, 5, 4096])
def test_mlp_random(call, mlp_path, batch):
    res = call(mlp_path, "--random", "--dim", f"batch={batch}", "--seed", "11", "-o", "out.npy")
    assert res.exit_code == 0, res.stderr
    f = jaxport.open_artifact(mlp_path).model.functions["predict"]
    x = inputs.random_inputs(f, {"batch": batch}, seed=11)["x"]
    _close(np.load("out.npy"), _mlp_ref(x))


@pytest.mark.parametrize("form", ["positional", "named", "npz"])
@pytest.mark.parametrize("batch,h", [(1, 2), (16, 2), (7, 5), (4096, 512)])
def test_pytree_inputs_in_each_form(call, pytree_path, form, batch, h):
    arrays = _encode_arrays(batch, h, seed=batch * 7 + h)
    files = {name: f"{name.replace('/', '_')}.npy" for name in arrays}
    for name, file in files.items():
        np.save(file, arrays[name])
    np.savez("in.npz", **arrays)
    if form == "positional":  # the order 'inspect' lists: x, mask, params/b, params/w
        given = [a for name in ["x", "mask", "params/b", "params/w"] for a in ("-i", files[name])]
    elif form == "named":
        given = [a for name in ["params/w", "x", "params/b", "mask"] for a in ("--inputs", f"{name}={files[name]}")]
    else:
        given = ["--inputs", "in.npz"]
    res = call(pytree_path, *given, "-o", "out.npz")
    assert res.exit_code == 0, res.stderr
    got, want = npz_arrays("out.npz"), _encode_ref(arrays)
    assert sorted(got) == ["features", "norm"]
    for k in want:
        _close(got[k], want[k])


@pytest.mark.parametrize("dims,expected", [
    ([], {"batch": 1, "h": 2}),
    (["--dim", "batch=100"], {"batch": 100, "h": 13}),
    (["--dim", "h=3", "--dim", "batch=24"], {"batch": 24, "h": 3}),
    (["--dim", "batch=4096"], {"batch": 4096, "h": 512}),
])
def test_pytree_random(call, pytree_path, dims, expected):
    res = call(pytree_path, "--random", *dims, "--seed", "5", "-o", "out.npz", "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["dims"] == expected
    f = jaxport.open_artifact(pytree_path).model.functions["encode"]
    arrays = inputs.random_inputs(f, expected, seed=5)
    got, want = npz_arrays("out.npz"), _encode_ref(arrays)
    for k in want:
        _close(got[k], want[k])


def test_bundled_demo_input(call, mlp_path):
    module = load_module(EXAMPLES / "mlp" / "make_inputs.py", "make_inputs")
    x = np.load(EXAMPLES / "mlp" / "x.npy", allow_pickle=False)
    np.testing.assert_array_equal(x, module.make_x())
    assert x.shape == (4, 784) and x.dtype == np.float32
    res = call(mlp_path, "--inputs", EXAMPLES / "mlp" / "x.npy", "-o", "out.npy")
    assert res.exit_code == 0, res.stderr
    _close(np.load("out.npy"), _mlp_ref(x))


# --- what a user sees ------------------------------------------------------------------------------------------


def test_summary_table(call, pytree_path):
    res = call(pytree_path, "--random", "--dim", "batch=3")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"encode on {LOCAL}  batch=3, h=2  load ")
    assert re.search(r"name\s+┃ shape\s+┃ dtype\s+┃\s+min ┃\s+max ┃\s+mean ┃ NaN ┃ Inf", res.stdout)
    assert re.search(r"features │ \(3, 10\) │ float32 │ .* │\s+0 │\s+0", res.stdout)
    assert re.search(r"norm\s+│ \(\)\s+│ float32 │", res.stdout)


def test_json_report(call, mlp_path):
    res = call(mlp_path, "--random", "--dim", "batch=2", "--json", "--print")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["function"] == "predict" and report["platform"] == LOCAL and report["dims"] == {"batch": 2}
    assert report["inputs"] == [{"name": "x", "shape": [2, 784], "dtype": "float32", "source": "random (seed 0)"}]
    (out,) = report["outputs"]
    assert (out["name"], out["shape"], out["dtype"], out["nan"], out["inf"]) == ("output", [2, 10], "float32", 0, 0)
    f = jaxport.open_artifact(mlp_path).model.functions["predict"]
    want = _mlp_ref(inputs.random_inputs(f, {"batch": 2}, seed=0)["x"])
    _close(np.array(out["values"]), want)
    assert out["min"] == pytest.approx(float(want.min()), abs=1e-5)
    assert set(report["timings"]) == {"load_s", "lower_s", "compile_s", "compile_cache_hit", "run_s", "executable",
                                      "executable_vouched_by"}
    assert report["timings"]["executable"] == "compiled"  # --no-cache: nothing fetched, nothing shipped
    assert report["timings"]["executable_vouched_by"] is None  # no signature required
    assert report["compilation_cache"] is None and report["benchmark"] is None and report["output_file"] is None
    assert report["warnings"] == []


def test_print_values(call, mlp_path):
    np.save("x.npy", np.zeros((1, 784), np.float32))
    res = call(mlp_path, "-i", "x.npy", "--print")
    assert res.exit_code == 0, res.stderr
    want = _mlp_ref(np.zeros((1, 784), np.float32))
    assert "output =\n[[" in res.stdout
    assert f"{want[0, 0]:.4f}"[:6] in res.stdout
    big = call(mlp_path, "--random", "--dim", "batch=200", "--print")
    assert "output: 2000 values, more than --print shows (1000); write them with -o." in big.stdout


def test_benchmark(call, mlp_path):
    res = call(mlp_path, "--random", "--benchmark", "7")
    assert res.exit_code == 0, res.stderr
    assert "benchmark (7 calls after 1 warm-up)" in res.stdout
    assert re.search(r"load ┃\s+lower ┃\s+compile ┃\s+p50 ┃\s+p90 ┃\s+p99 ┃\s+min ┃\s+max", res.stdout)
    res = call(mlp_path, "--random", "--benchmark", "3", "--json")
    bench = json.loads(res.stdout)["benchmark"]
    assert bench["n"] == 3 and 0 < bench["min_s"] <= bench["p50_s"] <= bench["p90_s"] <= bench["p99_s"]
    assert bench["p99_s"] <= bench["max_s"] and bench["min_s"] <= bench["mean_s"] <= bench["max_s"]
    assert bench["load_s"] > 0 and bench["lower_s"] > 0 and bench["compile_s"] > 0
    one = call(mlp_path, "--random", "--benchmark", "1")
    assert "benchmark (1 call after 1 warm-up)" in one.stdout
    assert bench["pipelined_s"] > 0 and bench["executable"] == "compiled"
    assert bench["host_p50_s"] is None and bench["host_p99_s"] is None


def test_benchmark_host_latency(call, mlp_path):
    res = call(mlp_path, "--random", "--benchmark", "5", "--host-latency", "--json")
    assert res.exit_code == 0, res.stderr
    bench = json.loads(res.stdout)["benchmark"]
    assert 0 < bench["host_p50_s"] <= bench["host_p99_s"]
    res = call(mlp_path, "--random", "--benchmark", "5", "--host-latency")
    assert re.search(r"^host to host \(inputs from host memory, outputs copied back\): p50 \S+ \S+, p99 \S+ \S+$",
                     res.stdout, re.M)
    res = call(mlp_path, "--random", "--host-latency")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: --host-latency times the calls of --benchmark from host memory to host "
                          "memory; add --benchmark N. See 'jaxport call --help'.\n")


def test_benchmark_percentiles_are_those_of_the_timed_calls():
    from jaxport.run.backend import Compilation
    from jaxport.run.latency import Benchmark

    bench = Benchmark(0.5, Compilation(0.1, 0.2, None), 1, [float(i) for i in range(1, 101)])
    d = bench.as_dict()
    assert (d["p50_s"], d["p90_s"], d["p99_s"], d["min_s"], d["max_s"], d["mean_s"]) == (
        float(np.percentile(bench.calls, 50)), float(np.percentile(bench.calls, 90)),
        float(np.percentile(bench.calls, 99)), 1.0, 100.0, 50.5)


def test_second_call_is_served_by_the_compilation_cache(run_cli, mlp_path, tmp_path):
    cache = tmp_path / "cache"
    first = json.loads(run_cli("call", mlp_path, "--random", "--cache-dir", cache, "--json").stdout)
    assert first["timings"]["compile_cache_hit"] is False and first["compilation_cache"] == str(cache)
    second = run_cli("call", mlp_path, "--random", "--cache-dir", cache)
    assert "(from the compilation cache)" in second.stdout.splitlines()[0]


def test_unusable_cache_dir_is_a_warning(run_cli, mlp_path, tmp_path):
    (tmp_path / "file").write_text("")
    res = run_cli("call", mlp_path, "--random", "--cache-dir", tmp_path / "file" / "cache")
    assert res.exit_code == 0, res.stderr
    assert res.stderr.startswith(f"warning: cannot use the compilation cache {tmp_path / 'file' / 'cache'}: ")
    assert res.stderr.rstrip().endswith("running without it")


def test_cache_dir_from_the_environment(run_cli, mlp_path, tmp_path, monkeypatch):
    monkeypatch.setenv("JAXPORT_CACHE_DIR", str(tmp_path / "env-cache"))
    report = json.loads(run_cli("call", mlp_path, "--random", "--json").stdout)
    assert report["compilation_cache"] == str(tmp_path / "env-cache")
    assert any((tmp_path / "env-cache").iterdir())


@pytest.mark.slow
def test_second_process_skips_compilation(mlp_path, tmp_path):
    cmd = [sys.executable, "-c", "from jaxport_cli.main import main; main()", "call", str(mlp_path), "--random",
           "--json", "--cache-dir", str(tmp_path / "cache")]
    runs = [json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout) for _ in range(2)]
    assert [r["timings"]["compile_cache_hit"] for r in runs] == [False, True]


# --- bad inputs: one message and exit code each ---------------------------------------------------------------


@pytest.fixture
def mlp_files(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((4, 784), np.float32))
    np.save(tmp_path / "rank1.npy", np.zeros(784, np.float32))
    np.save(tmp_path / "x64.npy", np.zeros((4, 784), np.float64))
    np.save(tmp_path / "wide.npy", np.zeros((4, 785), np.float32))
    np.save(tmp_path / "big.npy", np.zeros((4097, 784), np.float32))
    return tmp_path


def test_unknown_function_is_a_usage_error(call, mlp_path):
    res = call(mlp_path, "--random", "--function", "predicts")
    assert res.exit_code == 2
    assert res.stderr == "error[usage]: the artifact has no function 'predicts'. Did you mean 'predict'? " \
                         "Functions: predict.\n"


@pytest.mark.parametrize("args,message", [
    (["-i", "rank1.npy"], "input 'x' has rank 1 (shape (784,)), but the artifact expects rank 2: f32[batch, 784]."),
    (["-i", "x64.npy"], "input 'x' has dtype float64, but the artifact expects float32. Convert it into a new file "
                        "with: python -c \"import numpy as np; np.save('x64.float32.npy', np.load('x64.npy')"
                        ".astype(np.float32))\" and give x64.float32.npy. Or let 'jaxport call --cast' convert it "
                        "on reading: it does when every value is kept as float32."),
    (["-i", "wide.npy"], "input 'x': shape[1] = 785, but the artifact expects 784 (f32[batch, 784])."),
    (["-i", "big.npy"], "input 'x': shape[0] = 4097, but dimension 'batch' must satisfy 1 <= batch <= 4096 "
                        "(spec bound)."),
    ([], "missing input 'x' (f32[batch, 784]): give it with --inputs x=FILE.npy, or use --random."),
    (["-i", "y=x.npy"], "unknown input name 'y' (in --inputs y=x.npy); the inputs are: x."),
    (["-i", "x.npy", "-i", "x.npy"], "too many inputs: 2 files given, but the function takes 1 input (x); 'x.npy' "
                                     "has no input to go to."),
    (["-i", "nothing.npy"], "nothing.npy: file not found."),
])  # a --dim mistake is a usage error, the same in every command: tests/cli/test_dim_sizes.py
def test_bad_mlp_inputs(call, mlp_path, mlp_files, args, message):
    res = call(mlp_path, *args)
    assert res.exit_code == 9, res.stderr
    assert res.stderr.startswith("error[input]: ")
    assert message in res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize("batch,h,over,message", [
    (40, 4, {}, "input 'x': shape[0] = 40, but dimension 'batch' must satisfy batch <= 8 * h (spec constraint); "
                "h = 4 from input 'x' (shape[1] = 2*h)."),
    (4, 3, {"params/w": np.zeros((5, 10), np.float32)},
     "dimension 'h' is 3 from input 'x' (shape[1] = 2*h) but 5 from input 'params/w' (shape[0])."),
    (4, 3, {"mask": np.zeros((5, 16), ml_dtypes.bfloat16)},
     "dimension 'batch' is 4 from input 'x' (shape[0]) but 5 from input 'mask' (shape[0])."),
    (4, 1, {}, "input 'x': shape[1] = 2, but dimension 'h' must satisfy h >= 2 (spec bound); shape[1] is 2*h, so "
               "h = 1."),
    (4, 3, {"mask": np.zeros((4, 16), np.float32)},
     "input 'mask' has dtype float32, but the artifact expects bfloat16. Convert it into a new file with: python -c "
     "\"import numpy as np; import ml_dtypes; np.save('mask.bfloat16.npy', np.load('mask.npy').astype("
     "ml_dtypes.bfloat16))\" and give mask.bfloat16.npy. Or let 'jaxport call --cast' convert it on reading: it "
     "does when every value is kept as bfloat16."),
])
def test_bad_pytree_inputs(call, pytree_path, tmp_path, batch, h, over, message):
    arrays = {**_encode_arrays(batch, h, seed=0), **over}
    given = []
    for name, value in arrays.items():
        np.save(tmp_path / f"{name.replace('/', '_')}.npy", value)
        given += ["-i", f"{name}={name.replace('/', '_')}.npy"]
    res = call(pytree_path, *given)
    assert res.exit_code == 9, res.stderr
    assert res.stderr == f"error[input]: {message}\n"


def test_missing_inputs_of_a_pytree(call, pytree_path, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((4, 8), np.float32))
    res = call(pytree_path, "-i", "x.npy")
    assert res.exit_code == 9
    assert res.stderr == ("error[input]: missing inputs 'mask' (bf16[batch, 16]), 'params/b' (f32[10]), "
                          "'params/w' (f32[h, 10]): give each with --inputs NAME=FILE.npy (or all in one .npz); a "
                          "pytree argument at once with --inputs params=FILE.npz (keyed by the leaf paths below "
                          "'params', as jaxport.save_inputs writes it), or use --random.\n")
    np.savez(tmp_path / "in.npz", x=np.zeros((4, 8), np.float32), extra=np.zeros(3, np.float32))
    res = call(pytree_path, "-i", "in.npz")
    assert res.exit_code == 9
    assert res.stderr == ("error[input]: unknown input name 'extra' (a key of in.npz); the inputs are: x, mask, "
                          "params/b, params/w.\n")


def test_pickled_npy_is_refused_and_the_canary_never_written(call, mlp_path, tmp_path):
    canary = tmp_path / "canary"

    class Payload:
        def __reduce__(self):
            return (open, (str(canary), "w"))

    arr = np.empty(1, dtype=object)
    arr[0] = Payload()
    np.save(tmp_path / "evil.npy", arr, allow_pickle=True)
    for given in (["-i", "evil.npy"], ["-i", "x=evil.npy"]):
        res = call(mlp_path, *given)
        assert res.exit_code == 9
        assert res.stderr == ("error[input]: evil.npy: the array holds Python objects (dtype '|O'), which could only "
                              "be read by unpickling; jaxport refuses them. Save a numeric array instead.\n")
    assert not canary.exists()


def test_truncated_and_huge_npy(call, mlp_path, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((4, 784), np.float32))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "x.npy").read_bytes()[:500])
    res = call(mlp_path, "-i", "cut.npy")
    assert (res.exit_code, res.stderr) == (9, "error[input]: cut.npy: truncated .npy file: the header declares shape "
                                              "(4, 784) of float32 = 12544 bytes, but only 372 bytes follow it.\n")
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 784), }"
    header += b" " * (117 - len(header)) + b"\n"
    (tmp_path / "huge.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    res = call(mlp_path, "-i", "huge.npy")
    assert (res.exit_code, res.stderr) == (9, "error[input]: huge.npy: truncated .npy file: the header declares shape "
                                              "(1000000000000, 784) of float32 = 3136000000000000 bytes, but only 0 "
                                              "bytes follow it.\n")


def test_wrong_platform(call, tpu_path):
    res = call(tpu_path, "--random")
    assert res.exit_code == 10
    assert res.stderr == (f"error[platform]: {tpu_path}: function 'predict' was exported for tpu, but JAX here runs "
                          f"on {LOCAL}. Run it where tpu is available, or re-export it with --platform {LOCAL} (repeat "
                          f"--platform to cover several); --allow-platform-mismatch tries anyway.\n")
    res = call(tpu_path, "--random", "--allow-platform-mismatch", "-o", "out.npy")
    assert res.exit_code == 0, res.stderr
    f = jaxport.open_artifact(tpu_path).model.functions["predict"]
    _close(np.load("out.npy"), _mlp_ref(inputs.random_inputs(f, {"batch": 1}, seed=0)["x"]))


def test_json_error(call, mlp_path):
    res = call(mlp_path, "--json")
    assert res.exit_code == 9
    assert json.loads(res.stdout) == {"error": {"kind": "input", "exit_code": 9, "message": (
        "missing input 'x' (f32[batch, 784]): give it with --inputs x=FILE.npy, or use --random.")}}


# --- artifacts, outputs and usage ------------------------------------------------------------------------------


def test_damaged_artifacts(call, mlp_path, tmp_path):
    (tmp_path / "junk.jaxport").write_bytes(b"junk" * 10)
    res = call(tmp_path / "junk.jaxport", "--random")
    assert res.exit_code == 7 and res.stderr.startswith(f"error[format]: {tmp_path / 'junk.jaxport'}: not a jaxport")
    data = bytearray(mlp_path.read_bytes())
    data[-2000] ^= 0xFF  # inside the payload, the last member
    (tmp_path / "flipped.jaxport").write_bytes(bytes(data))
    res = call(tmp_path / "flipped.jaxport", "--random")
    assert res.exit_code == 8
    assert res.stderr.startswith(f"error[integrity]: {tmp_path / 'flipped.jaxport'}: member "
                                 f"'functions/predict.jaxexport' is damaged")


def test_output_errors(call, pytree_path, tmp_path):
    res = call(pytree_path, "--random", "-o", "out.npy")
    assert (res.exit_code, res.stderr) == (11, "error[output]: out.npy: a .npy file holds one array, but the function "
                                               "has 2 outputs (features, norm); write an .npz instead.\n")
    res = call(pytree_path, "--random", "-o", "no/such/dir/out.npz")
    assert (res.exit_code, res.stderr) == (11, "error[output]: no/such/dir/out.npz: directory no/such/dir does not "
                                               "exist. Create it first.\n")
    res = call(pytree_path, "--random", "-o", "out.csv")
    assert res.exit_code == 11
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args,message", [
    (["--random", "-i", "x.npy"], "give inputs with --inputs or generate them with --random, not both."),
    (["--dim", "batch=3"], "--dim, --seed and --range choose what --random generates; add --random."),
    (["--random", "--dim", "batch"], "'batch' is not NAME=VALUE (e.g. --dim batch=8)."),
    (["--random", "--dim", "batch=x"], "'batch=x': 'x' is not an integer."),
    (["--random", "--benchmark", "0"], "0 is not in the range 1<=x<=1000000."),
])
def test_usage_errors(run_cli, mlp_path, args, message):
    res = run_cli("call", mlp_path, *args)
    assert res.exit_code == 2
    assert message in res.stderr


def test_help_lists_the_options(run_cli):
    res = run_cli("call", "--help")
    assert res.exit_code == 0
    for option in ("--inputs", "--random", "--dim", "--seed", "--function", "--output", "--print", "--json",
                   "--benchmark", "--allow-platform-mismatch", "--cache-dir", "--no-cache"):
        assert option in res.stdout
    assert "Run an artifact on real inputs, checking them first." in res.stdout
