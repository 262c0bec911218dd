"""jaxport.load: same pytrees and numbers as the function, one compilation per shape signature, the checks made
before compiling (platform, custom calls, payload against manifest), the compilation cache, outputs on disk."""

from __future__ import annotations

import json
import re
import zipfile

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxport
from jaxport.artifact import container
from jaxport.errors import FormatError, InputError, IntegrityError, OutputError, PlatformError, PolicyError, UsageError
from jaxport.run.cache import compilation_cache, default_cache_dir
from jaxport.run.values import inputs, npyio, outputs
from tests.support import EXAMPLES, example

LOCAL = jax.export.default_export_platform()  # "cpu" on a CPU-only machine


@pytest.fixture(scope="module")
def mlp(mlp_path):
    return jaxport.load(mlp_path)


@pytest.fixture(scope="module")
def encode(pytree_path):
    return jaxport.load(pytree_path)


def _encode_args(batch, h, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 2 * h)).astype(np.float32)
    mask = (rng.random((batch, 16)) < 0.7).astype(ml_dtypes.bfloat16)
    params = {"w": rng.standard_normal((h, 10)).astype(np.float32), "b": rng.standard_normal(10).astype(np.float32)}
    return x, mask, params


@pytest.mark.parametrize("batch", [1, 7, 256, 4096])
def test_mlp_matches_the_function(mlp, batch):
    model = example("mlp")
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype(np.float32)
    got = mlp(x)
    assert isinstance(got, jax.Array) and got.shape == (batch, 10) and got.dtype == jnp.float32
    np.testing.assert_allclose(got, jax.jit(model.predict)(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("batch,h", [(1, 2), (16, 2), (5, 3), (64, 8), (4096, 512)])
def test_pytree_matches_the_function(encode, batch, h):
    model = example("pytree")
    x, mask, params = _encode_args(batch, h, seed=batch + h)
    got = encode(x, mask, params=params)
    want = jax.jit(model.encode, static_argnums=2)(x, mask, 3, params=params)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), got, want)


def test_static_arguments_may_be_given_when_equal(encode):
    x, mask, params = _encode_args(4, 2)
    a = encode(x, mask, params=params)
    b = encode(x, mask, 3, params=params)
    c = encode(x=x, mask=mask, scale=3, params=params)
    jax.tree.map(np.testing.assert_array_equal, a, b)
    jax.tree.map(np.testing.assert_array_equal, a, c)


def test_compiles_once_per_shape_signature(mlp_path):
    loaded = jaxport.load(mlp_path)
    assert loaded.compiled_signatures == []
    x4 = np.zeros((4, 784), np.float32)
    loaded(x4)
    loaded(x4 + 1)
    loaded(np.ones((4, 784), np.float32))
    assert loaded.compiled_signatures == [(((4, 784), "float32"),)]
    loaded(np.zeros((9, 784), np.float32))
    loaded(np.zeros((9, 784), np.float32))
    assert loaded.compiled_signatures == [(((4, 784), "float32"),), (((9, 784), "float32"),)]


def test_signature_and_manifest(encode, pytree_path):
    assert str(encode.signature) == (
        "encode(x: f32[batch, 2*h], mask: bf16[batch, 16], scale=3, params: {w: f32[h, 10], b: f32[10]}) -> "
        "{features: f32[batch, 10], norm: f32[]}   where 1 <= batch <= 4096, h >= 2, batch <= 8 * h")
    assert [i["name"] for i in encode.signature.inputs] == ["x", "mask", "params/b", "params/w"]
    assert encode.signature.constraints == ("batch <= 8 * h",)
    with container.open_artifact(pytree_path) as art:
        assert encode.manifest == art.manifest
    assert encode.function == "encode" and encode.platform == LOCAL


@pytest.mark.parametrize("call,message", [
    (lambda f, x, m, p: f(x, m, 4, params=p),
     "argument 'scale' was fixed to 3 when the artifact was exported; got 4. Leave it out (or pass None), or "
     "re-export with the new value."),
    (lambda f, x, m, p: f(x, params=p), "encode() is missing argument 'mask'."),
    (lambda f, x, m, p: f(x, m), "encode() is missing argument 'params'."),
    (lambda f, x, m, p: f(x, m, params=p, extra=1), "encode() got an unexpected argument 'extra'; its arguments are "
                                                    "x, mask, scale, params."),
    (lambda f, x, m, p: f(x, m, x, x, params=p), "encode() takes 2 positional array arguments (x, mask), but 4 were "
                                                 "given."),
    (lambda f, x, m, p: f(x, m, params={"w": p["w"]}),
     "argument 'params': expected a dict with keys ['b', 'w'], got keys ['w']."),
    (lambda f, x, m, p: f(x, m, params=[p["w"], p["b"]]), "argument 'params': expected a dict with keys ['b', 'w'], "
                                                          "got list."),
    (lambda f, x, m, p: f(x, x=x, mask=m, params=p), "encode() got two values for argument 'x'."),
    (lambda f, x, m, p: f(x.astype(np.float64), m, params=p),
     "input 'x' has dtype float64, but the artifact expects float32. Convert it with x.astype(np.float32) (import "
     "numpy as np)."),
    (lambda f, x, m, p: f(np.zeros((40, 8), np.float32), np.zeros((40, 16), ml_dtypes.bfloat16), params=p),
     "input 'x': shape[0] = 40, but dimension 'batch' must satisfy batch <= 8 * h (spec constraint); h = 4 from "
     "input 'x' (shape[1] = 2*h)."),
])
def test_call_errors(encode, call, message):
    x, mask, params = _encode_args(4, 4)
    with pytest.raises(InputError, match=re.escape(message)):
        call(encode, x, mask, params)


def test_python_scalars_take_the_declared_dtype(make_artifact):
    path = make_artifact("def f(x, s):\n    return x * s\n", "jaxport: 1\nargs: ['f32[3]', 'f32[]']\n")
    f = jaxport.load(path)
    np.testing.assert_array_equal(f(np.arange(3, dtype=np.float32), 2.0), [0.0, 2.0, 4.0])


def test_x64_artifact_runs_in_64_bits(make_artifact):
    path = make_artifact("def f(x, n):\n    return x * 2, n + 1\n", "jaxport: 1\nargs: ['f64[b]', 'i64[b]']\n")
    f = jaxport.load(path)
    assert f.function_record.x64 is True
    x = np.array([1e300, 1.5], np.float64)
    n = np.array([2**40, 3], np.int64)
    y, m = f(x, n)
    assert y.dtype == np.float64 and m.dtype == np.int64
    np.testing.assert_array_equal(y, x * 2)
    np.testing.assert_array_equal(m, n + 1)


def test_function_selection(make_artifact, tmp_path):
    src = "def enc(x):\n    return x + 1\n\ndef dec(x):\n    return x * 2\n"
    spec = ("jaxport: 1\nfunctions:\n  enc: {entrypoint: model.py:enc, args: ['f32[n]']}\n"
            "  dec: {entrypoint: model.py:dec, args: ['f32[n]']}\n")
    path = make_artifact(src, spec, entry=None)
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(jaxport.load(path, function="dec")(x), x * 2)
    np.testing.assert_array_equal(jaxport.load(path, "enc")(x), x + 1)
    with pytest.raises(UsageError, match=re.escape(
            f"{path}: the artifact holds 2 functions (enc, dec); choose one with --function NAME (function=NAME in "
            f"Python).")):
        jaxport.load(path)
    with pytest.raises(UsageError, match=re.escape(
            "the artifact has no function 'decc'. Did you mean 'dec'? Functions: enc, dec.")):
        jaxport.load(path, function="decc")


def test_wrong_platform(tmp_path):
    path = jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", platforms=["tpu"],
                          output=tmp_path / "tpu.jaxport").path
    with pytest.raises(PlatformError, match=re.escape(
            f"{path}: function 'predict' was exported for tpu, but JAX here runs on {LOCAL}. Run it where tpu is "
            f"available, or re-export it with --platform {LOCAL} (repeat --platform to cover several); "
            f"--allow-platform-mismatch tries anyway.")):
        jaxport.load(path)
    # This program has nothing TPU-specific, so with the check disabled it runs.
    loaded = jaxport.load(path, allow_platform_mismatch=True)
    x = np.ones((2, 784), np.float32)
    np.testing.assert_allclose(loaded(x), jax.jit(example("mlp").predict)(x), rtol=1e-6, atol=1e-6)


def test_platform_mismatch_that_cannot_compile_is_a_platform_error(tmp_path):
    path = jaxport.export(f"{EXAMPLES}/pallas/model.py:add", EXAMPLES / "pallas" / "spec.yaml",
                          output=tmp_path / "pallas.jaxport").path
    loaded = jaxport.load(path, allow_platform_mismatch=True)
    x = np.ones((8, 128), np.float32)
    with pytest.raises(PlatformError, match=re.escape(
            f"{path}: function 'add' was exported for tpu and cannot run on {LOCAL} (XLA on {LOCAL} could not "
            f"compile the program: ")):
        loaded(x, x)


def test_multi_platform_artifact_runs_on_cpu(tmp_path):
    path = jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec-multiplatform.yaml",
                          output=tmp_path / "multi.jaxport").path
    x = np.random.default_rng(0).standard_normal((3, 784)).astype(np.float32)
    np.testing.assert_allclose(jaxport.load(path)(x), jax.jit(example("mlp").predict)(x), rtol=1e-6, atol=1e-6)


def _rewrite(src, dst, edit):
    """Copy an artifact, editing its manifest (the payload bytes stay as they are)."""
    with container.open_artifact(src) as art:
        manifest = json.loads(art.manifest_bytes)
        members = {n: art.read(n) for n in art.members if n != container.MANIFEST_NAME}
    edit(manifest)
    container.write_artifact(dst, manifest, members)
    return dst


FFI_MODEL = """import jax

def f(x):
    return jax.ffi.ffi_call("my_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x) + 1
"""


def test_custom_calls_are_checked_again_before_compiling(make_artifact, tmp_path):
    path = make_artifact(FFI_MODEL, "jaxport: 1\nargs: ['f32[4]']\nallow_custom_calls: [my_target]\n")
    edited = _rewrite(path, tmp_path / "edited.jaxport",
                      lambda m: m["functions"]["f"].update(allowed_custom_calls=[]))
    with pytest.raises(PolicyError, match=re.escape(
            f"{edited}: function 'f': the program uses custom-call targets that JAX does not guarantee to keep "
            f"stable:\n  my_target (used 1x, first at model.py:4:11)")):
        jaxport.load(edited)
    # The artifact's own allowance grants nothing: the caller allows it. Then it loads; this process has no kernel
    # for it, which is said plainly.
    with pytest.raises(PolicyError, match=re.escape("allow them with --allow-custom-call my_target")):
        jaxport.load(path)
    loaded = jaxport.load(path, allow_custom_calls=["my_target"])
    with pytest.raises(PlatformError, match=re.escape(
            "could not compile the program: NOT_FOUND: No FFI handler registered for my_target")):
        loaded(np.zeros(4, np.float32))


def test_payload_must_agree_with_the_manifest(mlp_path, tmp_path):
    def edit(m):
        m["functions"]["predict"]["inputs"][0]["shape"] = ["batch", 785]

    edited = _rewrite(mlp_path, tmp_path / "edited.jaxport", edit)
    with pytest.raises(FormatError, match=re.escape(
            f"{edited}: function 'predict': the payload disagrees with the manifest (input 'x' is f32[batch, 784] in "
            f"the program, f32[batch, 785] in the manifest); the artifact was edited or written by a faulty producer. "
            f"Re-export it.")):
        jaxport.load(edited)


def test_malformed_signature_tree_is_a_format_error(pytree_path, tmp_path):
    def edit(m):
        m["functions"]["encode"]["signature"]["kwargs"]["params"]["dict"]["w"] = {"input": 7}

    edited = _rewrite(pytree_path, tmp_path / "edited.jaxport", edit)
    with pytest.raises(FormatError, match=re.escape(
            f"{edited}: manifest.json: functions['encode'].signature.kwargs['params'].dict['w'].input: 7 is out of "
            f"range [0, 3]")):
        jaxport.load(edited)


def test_damaged_payload_is_an_integrity_error(mlp_path, tmp_path):
    data = bytearray(mlp_path.read_bytes())
    with zipfile.ZipFile(mlp_path) as zf:
        info = zf.getinfo("functions/predict.jaxexport")
    data[info.header_offset + 30 + len(info.filename) + len(info.extra) + 100] ^= 0xFF
    damaged = tmp_path / "damaged.jaxport"
    damaged.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=re.escape(f"{damaged}: member 'functions/predict.jaxexport' is "
                                                       f"damaged")):
        jaxport.load(damaged)


def test_random_inputs_match_the_command_line_generator(encode):
    arrays = encode.random_inputs({"batch": 9}, seed=4)
    want = inputs.random_inputs(encode.function_record, {"batch": 9, "h": 2}, seed=4)
    assert list(arrays) == list(want) == ["x", "mask", "params/b", "params/w"]
    for name in want:
        np.testing.assert_array_equal(arrays[name], want[name])
    assert encode.check(arrays) == {"batch": 9, "h": 2}
    out = encode.call_named(arrays)
    assert out["features"].shape == (9, 10)


def test_run_reports_dims_leaves_and_times(encode):
    x, mask, params = _encode_args(6, 3)
    run = encode.run(encode.bind(x, mask, params=params))
    assert run.dims == {"batch": 6, "h": 3}
    assert [n for n, _ in run.leaves] == ["features", "norm"]
    assert isinstance(run.leaves[0][1], np.ndarray) and run.leaves[0][1].shape == (6, 10)
    assert run.compilation.lower_seconds > 0 and run.compilation.seconds > 0 and run.run_seconds > 0


def test_benchmark(mlp):
    bench = mlp.benchmark({"x": np.zeros((2, 784), np.float32)}, 5)
    d = bench.as_dict()
    assert d["n"] == 5 and len(bench.calls) == 5 and d["warmup"] == 1
    assert 0 < d["min_s"] <= d["p50_s"] <= d["p90_s"]
    assert d["load_s"] == mlp.load_seconds > 0 and d["compile_s"] > 0


def test_persistent_cache_serves_a_second_load(mlp_path, tmp_path):
    before = jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache
    x = np.zeros((3, 784), np.float32)
    with compilation_cache(tmp_path / "cache") as cache:
        assert cache.directory == tmp_path / "cache"
        first = jaxport.load(mlp_path).run({"x": x})
        assert first.compilation.cache_hit is False
        assert any((tmp_path / "cache").iterdir())
        second = jaxport.load(mlp_path).run({"x": x})
        assert second.compilation.cache_hit is True
    assert (jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache) == before
    with compilation_cache(None) as cache:
        assert cache.directory is None
        assert jaxport.load(mlp_path).run({"x": x}).compilation.cache_hit is None


def test_cache_dir_is_the_compilation_cache_the_function_compiles_with(mlp_path, tmp_path):
    before = jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache
    x = np.zeros((5, 784), np.float32)
    first = jaxport.load(mlp_path, cache_dir=tmp_path / "cache")
    assert first.cache_dir == tmp_path / "cache"
    assert (jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache) == before  # no leak
    assert first.run({"x": x}).compilation.cache_hit is False
    assert any(p.name.startswith("jaxport-verdict-") for p in (tmp_path / "cache").iterdir())  # jaxport's records
    assert jaxport.load(mlp_path, cache_dir=tmp_path / "cache").run({"x": x}).compilation.cache_hit is True
    assert [w.compilation.cache_hit for w in first.warmup({"batch": 6})] == [False]  # warms up there by default
    assert jaxport.load(mlp_path, cache=False).run({"x": x}).compilation.cache_hit is None
    assert (jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache) == before
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match=re.escape(f"{mlp_path}: cannot use the compilation cache "
                                                    f"{tmp_path / 'file' / 'cache'}: Not a directory; give a "
                                                    f"directory this user can write (cache_dir=DIR).")):
        jaxport.load(mlp_path, cache_dir=tmp_path / "file" / "cache")


def test_load_takes_the_load_options_fields_and_refuses_others(mlp_path):
    assert jaxport.load(mlp_path, verify_weights=False, check_ranges=True).check_ranges
    with pytest.raises(TypeError, match="unexpected keyword argument 'cache_directory'"):
        jaxport.load(mlp_path, cache_directory="x")
    with pytest.raises(TypeError, match="module_dir"):
        jaxport.load(mlp_path, module_dir=3)


def test_a_module_directory_needs_the_runtime_that_compiles_modules(mlp_path, tmp_path, run_cli):
    message = ("module_dir names where IREE keeps the modules it compiles, but the runtime is jax, which compiles "
               "none: give --runtime iree (runtime='iree' in Python), or leave out --module-dir.")
    with pytest.raises(UsageError, match=re.escape(message)):
        jaxport.load(mlp_path, module_dir=tmp_path / "modules")
    for command in (["call", mlp_path, "--random", "--no-cache"], ["verify", mlp_path]):
        res = run_cli(*command, "--module-dir", tmp_path / "modules")
        assert (res.exit_code, res.stderr) == (2, f"error[usage]: {message} See 'jaxport {command[0]} --help'.\n")
    assert not (tmp_path / "modules").exists()


def test_cache_directory_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with compilation_cache(blocker / "cache") as cache:
        assert cache.directory is None
        assert cache.problem.startswith(f"cannot use the compilation cache {blocker / 'cache'}: ")


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("JAXPORT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "jaxport" / "xla"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "jaxport" / "xla"
    monkeypatch.setenv("JAXPORT_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"


def test_stats():
    s = outputs.stats("a", np.array([1.0, np.nan, np.inf, -np.inf, 3.0], np.float32))
    assert s == {"name": "a", "shape": [5], "dtype": "float32", "size": 5, "min": 1.0, "max": 3.0, "mean": 2.0,
                 "nan": 1, "inf": 2}
    s = outputs.stats("b", np.array([[2, -4]], np.int32))
    assert (s["min"], s["max"], s["mean"], s["nan"], s["inf"]) == (-4, 2, -1.0, 0, 0)
    assert outputs.stats("c", np.array([True, False, True]))["mean"] == pytest.approx(2 / 3)
    assert outputs.stats("d", np.array([1.5], ml_dtypes.bfloat16))["max"] == 1.5
    assert outputs.stats("e", np.zeros((0, 3), np.float32))["min"] is None
    z = outputs.stats("z", np.array([1 + 1j, np.nan], np.complex64))
    assert (z["min"], z["nan"]) == (None, 1)
    assert outputs.jsonable(np.array([1.0, np.nan, -np.inf], np.float32)) == [1.0, "nan", "-inf"]
    assert outputs.jsonable(np.array([1 + 2j], np.complex64)) == [[1.0, 2.0]]


def test_save_outputs(tmp_path):
    leaves = [("features", np.arange(6, dtype=np.float32).reshape(2, 3)), ("norm", np.float32(2.5).reshape(())),
              ("half", np.array([1.5], ml_dtypes.bfloat16))]
    out = tmp_path / "out.npz"
    outputs.save_outputs(out, leaves)
    with np.load(out, allow_pickle=False) as z:
        assert sorted(z.files) == ["features", "half", "norm"]
        np.testing.assert_array_equal(z["features"], leaves[0][1])
    back = npyio.read_npz(out, {"features": "float32", "norm": "float32", "half": "bfloat16"})
    assert back["half"].dtype == ml_dtypes.bfloat16 and float(back["norm"]) == 2.5
    single = tmp_path / "one.npy"
    outputs.save_outputs(single, leaves[:1])
    np.testing.assert_array_equal(np.load(single, allow_pickle=False), leaves[0][1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.npy", "out.npz"]  # no temporary files left


@pytest.mark.parametrize("name,message", [
    ("out.npy", "{p}: a .npy file holds one array, but the function has 2 outputs (a, b); write an .npz instead."),
    ("out.txt", "{p}: the output file must end in .npz (all outputs, keyed by name), .safetensors (all outputs, keyed "
                "by name, with native bfloat16 and float8) or .npy (a single output)."),
    ("missing/out.npz", "{p}: directory {d} does not exist. Create it first."),
])
def test_save_outputs_errors(tmp_path, name, message):
    path = tmp_path / name
    leaves = [("a", np.zeros(2, np.float32)), ("b", np.zeros(2, np.float32))]
    with pytest.raises(OutputError, match=re.escape(message.format(p=path, d=path.parent))):
        outputs.save_outputs(path, leaves)


# --- the backend seam ------------------------------------------------------------------------------------------


class _Recording:
    """A backend (``run.backend.Backend``) that forwards to another and records what Loaded asks of it."""

    name = "recording"

    def __init__(self, inner):
        self.inner, self.mesh, self.weights, self.calls = inner, inner.mesh, inner.weights, []

    def x64(self):
        return self.inner.x64()

    def compile(self, key):
        self.calls.append(("compile", key))
        return self.inner.compile(key)

    def place(self, flat, *, resident=False):
        self.calls.append(("place", resident))
        return self.inner.place(flat, resident=resident)

    def execute(self, key, flat):
        self.calls.append(("execute", key))
        return self.inner.execute(key, flat)

    def trace(self, flat, weights=None):
        self.calls.append(("trace",))
        return self.inner.trace(flat, weights)

    def placement(self):
        return self.inner.placement()


def test_loaded_runs_only_through_its_backend(mlp):
    """Loaded compiles once per shape signature, places and executes through the backend protocol, and traces
    through it inside a JAX transformation."""
    import jax

    from jaxport.run.loaded import Loaded

    rec = _Recording(mlp.backend)
    f = Loaded(mlp.path, mlp.function, mlp.model, rec, mlp.platform, 0.0)
    x = np.random.default_rng(0).standard_normal((3, 784)).astype(np.float32)
    np.testing.assert_array_equal(f(x), mlp(x))
    f(x)
    key = (((3, 784), "float32"),)
    assert rec.calls == [("compile", key), ("place", False), ("execute", key), ("place", False), ("execute", key)]
    assert (f.runtime, f.compiled_signatures, f.placement()) == ("recording", [key], None)
    np.testing.assert_allclose(jax.jit(f)(x), mlp(x), rtol=1e-6)
    assert rec.calls[-1] == ("trace",)
    bench = f.benchmark({"x": x}, 2, warmup=0)
    # two calls waited for one by one, then two pipelined
    assert len(bench.calls) == 2 and rec.calls[-5:] == [("place", True), *[("execute", key)] * 4]
    assert bench.pipelined is not None and bench.pipelined > 0
