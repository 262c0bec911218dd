"""``jaxport compile`` for deployment: one IREE module with a function per shape bucket, the bound tensors in a
parameter archive, a run description; run by ``iree-run-module`` with only the free inputs, by the JAX-free loader
and by ``jaxport call MODEL.run.json``, with the numbers XLA gives, at shapes in and between buckets."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.run.compile import iree_loader
from jaxport.run.compile.deploy import compile_artifact
from tests.support import EXAMPLES, example

pytest.importorskip("iree.compiler")
pytest.importorskip("iree.runtime")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: A small pre-norm transformer encoder with bound weights and a polymorphic batch and sequence length.
TRANSFORMER = '''
import jax
import jax.numpy as jnp
import numpy as np

D, HEADS, FF = 32, 4, 64


def init_params(seed=0, layers=2):
    rng = np.random.default_rng(seed)

    def dense(n_in, n_out):
        return (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)

    def norm():
        return {"scale": np.ones(D, np.float32), "bias": np.zeros(D, np.float32)}

    return {"layers": [{"ln1": norm(), "qkv": dense(D, 3 * D), "out": dense(D, D), "ln2": norm(),
                        "up": dense(D, FF), "down": dense(FF, D)} for _ in range(layers)], "ln_f": norm()}


PARAMS = init_params()


def _norm(x, p):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def encode(params, x):
    b, t, _ = x.shape
    causal = jnp.tril(jnp.ones((t, t), bool))
    for layer in params["layers"]:
        h = _norm(x, layer["ln1"])
        q, k, v = jnp.split((h @ layer["qkv"]).reshape(b, t, 3, HEADS, D // HEADS), 3, axis=2)
        q, k, v = (a[:, :, 0].transpose(0, 2, 1, 3) for a in (q, k, v))
        s = jnp.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // HEADS), -1e9)
        a = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, D)
        x = x + a @ layer["out"]
        x = x + jax.nn.gelu(_norm(x, layer["ln2"]) @ layer["up"]) @ layer["down"]
    return _norm(x, params["ln_f"])
'''

TRANSFORMER_SPEC = '''jaxport: 1
dims:
  batch: {min: 1, max: 16}
  seq: {min: 1, max: 32}
args:
  - bind: model.py:PARAMS
  - "f32[batch, seq, 32]"
'''


def iree_run_module() -> str:
    tool = Path(sys.executable).parent / "iree-run-module"
    found = str(tool) if tool.exists() else shutil.which("iree-run-module")
    if found is None:
        pytest.skip("iree-run-module is not installed")
    return found


def run_with_tool(run_json: Path, function: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a function of a compiled module with ``iree-run-module``, on the command line its run description gives,
    in the description's directory: inputs written to the NAME.npy files it names, outputs read back."""
    description = json.loads(run_json.read_text())
    fn = next(f for f in description["functions"] if f["name"] == function)
    argv = [iree_run_module(), *fn["argv"][1:]]
    work = run_json.parent
    files = [a.split("@", 1)[1] for a in argv if a.startswith("--input=")]
    for spec, file in zip(fn["inputs"], files):
        np.save(work / file, arrays[spec["name"]])
    proc = subprocess.run(argv, cwd=work, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    outs = [a.split("@", 1)[1] for a in argv if a.startswith("--output=")]
    return {o["name"]: np.load(work / file) for o, file in zip(fn["outputs"], outs)}


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # two compilers (COMPILER_TOLERANCES, float32)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """The demo MLP with its weights bound (examples/mlp/spec-bound.yaml), compiled for batch 1, 8, 32 and 128."""
    d = tmp_path_factory.mktemp("mlp")
    shutil.copytree(EXAMPLES / "mlp", d / "src")
    with contextlib.chdir(d / "src"):
        art = jaxport.export("model.py:apply", "spec-bound.yaml", output=d / "mlp.jaxport").path
    (d / "out").mkdir()
    compiled = compile_artifact(art, d / "out" / "mlp.vmfb", grid={"batch": [1, 8, 32, 128]})
    return art, compiled


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    """The small transformer compiled for batch in 1, 4 and seq in 8, 16."""
    d = tmp_path_factory.mktemp("transformer")
    (d / "model.py").write_text(TRANSFORMER)
    (d / "spec.yaml").write_text(TRANSFORMER_SPEC)
    with contextlib.chdir(d):
        art = jaxport.export("model.py:encode", "spec.yaml", output=d / "tr.jaxport").path
    (d / "out").mkdir()
    compiled = compile_artifact(art, d / "out" / "tr.vmfb", grid={"batch": [1, 4], "seq": [8, 16]})
    return art, compiled


# --- what compile writes ----------------------------------------------------------------------------------------


def test_mlp_module_has_a_function_per_bucket_and_a_run_description(mlp):
    art, compiled = mlp
    d = json.loads(compiled.run.read_text())
    assert [f["name"] for f in d["functions"]] == ["main_batch1", "main_batch8", "main_batch32", "main_batch128"]
    assert [f["inputs"] for f in d["functions"]][1] == [{"name": "x", "shape": [8, 784], "dtype": "float32"}]
    assert d["functions"][1]["outputs"] == [{"name": "output", "shape": [8, 10], "dtype": "float32"}]
    assert d["functions"][1]["command"] == ("iree-run-module --device=local-task --module=mlp.vmfb "
                                            "--parameters=model=mlp.irpa --function=main_batch8 --input=@x.npy "
                                            "--output=@output.npy")
    assert d["module"] == "mlp.vmfb" and d["format"] == "jaxport-iree-run/1"
    assert d["parameters"] == {"file": "mlp.irpa", "scope": "model",
                               "tensors": ["params/b1", "params/b2", "params/w1", "params/w2"]}
    assert d["buckets"]["source"] == "--dims" and "smallest bucket that fits" in d["buckets"]["rule"]
    assert d["padding"]["variables"] == {"batch": {"allowed": True, "fill": "edge", "inputs": {"x": [0]},
                                                   "outputs": {"output": [0]}}}
    assert d["signature"]["dims"] == {"batch": {"min": 1, "max": 4096}}
    assert compiled.notes == ["calls may pad batch up to a bucket (the program works row by row along it)"]


def test_the_parameter_archive_holds_the_bound_tensors_by_name(mlp):

    import iree.runtime as rt

    art, compiled = mlp
    index = rt.ParameterIndex()
    index.load(str(compiled.parameters))
    entries = dict(index.items())
    assert list(entries) == ["params/b1", "params/b2", "params/w1", "params/w2"]
    model = example("mlp")
    for name, entry in entries.items():
        stored = rt.parameter_index_entry_as_numpy_flat_ndarray(entry).view(np.float32)
        np.testing.assert_array_equal(stored, model.PARAMS[name.split("/")[1]].reshape(-1))
    assert compiled.sizes["parameters"] == compiled.parameters.stat().st_size


# --- running it -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("function,batch", [("main_batch8", 8), ("main_batch32", 32)])
def test_mlp_runs_with_iree_run_module_and_only_its_inputs(mlp, function, batch):
    art, compiled = mlp
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype(np.float32)
    got = run_with_tool(compiled.run, function, {"x": x})
    assert_close(got["output"], np.asarray(jaxport.load(art)(x)))


@pytest.mark.parametrize("batch,function,padded", [(1, "main_batch1", {}), (5, "main_batch8", {"batch": 3}),
                                                   (8, "main_batch8", {}), (20, "main_batch32", {"batch": 12}),
                                                   (128, "main_batch128", {})])
def test_loader_pads_to_the_smallest_bucket_and_equals_xla(mlp, batch, function, padded):
    art, compiled = mlp
    module = iree_loader.load(compiled.run)
    x = np.random.default_rng(batch).standard_normal((batch, 784)).astype(np.float32)
    choice = module.choose({"x": x.shape})
    assert (choice.function, choice.padded) == (function, padded)
    assert_close(module(x)["output"], np.asarray(jaxport.load(art)(x)))


def test_loader_refusals_name_the_input_and_the_buckets(mlp):
    module = iree_loader.load(mlp[1].run)
    with pytest.raises(iree_loader.CallError) as e:
        module(np.zeros((129, 784), np.float32))
    assert str(e.value) == ("no function of mlp.vmfb fits inputs x (129, 784): its buckets are batch=1; batch=8; "
                            "batch=32; batch=128 (batch may be padded up to a bucket); compile one that fits with "
                            "jaxport compile --dim or --bucket.")
    with pytest.raises(iree_loader.CallError) as e:
        module(np.zeros((4, 784), np.float64))
    assert str(e.value) == ("input 'x' is float64, but the module takes float32 (convert it first; nothing is "
                            "converted here).")
    with pytest.raises(iree_loader.CallError) as e:
        module(y=np.zeros((4, 784), np.float32))
    assert str(e.value) == "the module takes inputs x; missing x."


def test_loader_runs_without_jax_or_jaxport(mlp, tmp_path):
    """Copied next to the module, the loader needs numpy and iree.runtime only."""
    art, compiled = mlp
    for f in (compiled.module, compiled.run, compiled.parameters):
        shutil.copy(f, tmp_path / f.name)
    shutil.copy(Path(iree_loader.__file__), tmp_path / "iree_loader.py")
    x = np.random.default_rng(0).standard_normal((3, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = ("import sys, numpy as np, iree_loader\n"
              "out = iree_loader.load('mlp.run.json')(np.load('x.npy'))['output']\n"
              "np.save('out.npy', out)\n"
              "assert not any(m == 'jax' or m.startswith(('jax.', 'jaxport')) for m in sys.modules), 'imported jax'\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert_close(np.load(tmp_path / "out.npy"), np.asarray(jaxport.load(art)(x)))


def test_transformer_pads_batch_but_not_seq(transformer):
    art, compiled = transformer
    d = compiled.description
    assert [f["name"] for f in d["functions"]] == ["main_batch1_seq8", "main_batch1_seq16", "main_batch4_seq8",
                                                   "main_batch4_seq16"]
    assert len(d["parameters"]["tensors"]) == 18
    padding = d["padding"]["variables"]
    assert padding["batch"] == {"allowed": True, "fill": "edge", "inputs": {"x": [0]}, "outputs": {"output": [0]}}
    assert padding["seq"] == {"allowed": False, "reason": "output 'output' depends on a reduction over seq "
                                                          "(stablehlo.reduce)"}
    assert "padding not allowed for seq: output 'output' depends on a reduction over seq (stablehlo.reduce); a " \
           "call's seq must equal a bucket's" in compiled.notes
    module, by_xla = iree_loader.load(compiled.run), jaxport.load(art)
    rng = np.random.default_rng(0)
    for shape, function in [((1, 8, 32), "main_batch1_seq8"), ((3, 8, 32), "main_batch4_seq8"),
                            ((2, 16, 32), "main_batch4_seq16"), ((4, 16, 32), "main_batch4_seq16")]:
        x = rng.standard_normal(shape).astype(np.float32)
        assert module.choose({"x": shape}).function == function
        assert_close(module(x)["output"], np.asarray(by_xla(x)))
    x = rng.standard_normal((4, 16, 32)).astype(np.float32)
    assert_close(run_with_tool(compiled.run, "main_batch4_seq16", {"x": x})["output"], np.asarray(by_xla(x)))
    with pytest.raises(iree_loader.CallError) as e:
        module(rng.standard_normal((2, 12, 32)).astype(np.float32))
    assert str(e.value) == ("no function of tr.vmfb fits inputs x (2, 12, 32): its buckets are batch=1,seq=8; "
                            "batch=1,seq=16; batch=4,seq=8; batch=4,seq=16 (batch may be padded up to a bucket; seq "
                            "must equal a bucket's value); compile one that fits with jaxport compile --dim or "
                            "--bucket.")


# --- the command line -------------------------------------------------------------------------------------------


def test_compile_and_call_the_module_from_the_command_line(mlp, run_cli, tmp_path):
    art, _ = mlp
    out = tmp_path / "m.vmfb"
    res = run_cli("compile", art, "-o", out, "--dim", "batch=2,16")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.splitlines()[:4] == [
        f"Compiled {out} (iree-llvm-cpu, cpu=generic): 2 functions (--dims)",
        "  main_batch2: x (2, 784) -> output (2, 10)",
        "  main_batch16: x (16, 784) -> output (16, 10)",
        f"  parameters: {tmp_path / 'm.irpa'} (4 bound tensors, {(tmp_path / 'm.irpa').stat().st_size:,} bytes)"]
    x = np.random.default_rng(0).standard_normal((5, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for target in ("m.run.json", "m.vmfb"):
        res = run_cli("call", tmp_path / target, "--inputs", tmp_path / "x.npy", "-o", tmp_path / "y.npy", "--json")
        assert res.exit_code == 0, res.stderr
        report = json.loads(res.stdout)
        assert (report["function"], report["runtime"], report["dims"]) == ("main_batch16", "iree", {"batch": 5})
        assert (report["artifact"], report["devices"], report["compilation_cache"]) == (str(tmp_path / target), None,
                                                                                        None)
        assert_close(np.load(tmp_path / "y.npy"), np.asarray(jaxport.load(art)(x)))
    res = run_cli("call", tmp_path / "m.run.json", "--inputs", tmp_path / "x.npy", "-o", tmp_path / "z.npy",
                  "--benchmark", "2")
    assert res.exit_code == 0, res.stderr
    first = res.stdout.splitlines()[0]  # the view of every call: no lowering or compiling, the padding instead
    assert first.startswith("main_batch16 on cpu with IREE  batch=5  (batch padded from 5 to 16)  load ")
    assert ", run " in first and "compile" not in first
    assert f"Wrote {tmp_path / 'z.npy'} (1 array)" in res.stdout and "benchmark (2 calls after 1 warm-up)" in res.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "z.npy"), np.load(tmp_path / "y.npy"))
    report = jaxport.call(jaxport.CallRequest(tmp_path / "m.vmfb", inputs=[tmp_path / "x.npy"], values=True))
    assert (report.function, report.padded, report.leaves[0][0]) == ("main_batch16", {"batch": (5, 16)}, "output")
    np.testing.assert_array_equal(report.leaves[0][1], np.load(tmp_path / "y.npy"))
    assert report.as_dict()["outputs"][0]["values"] == report.leaves[0][1].tolist()
    res = run_cli("call", tmp_path / "m.run.json", "--random", "--dim", "batch=17")
    assert res.exit_code == 9
    assert res.stderr == (f"error[input]: {tmp_path / 'm.run.json'}: no function of m.vmfb fits inputs x (17, 784): "
                          f"its buckets are batch=2; batch=16 (batch may be padded up to a bucket); compile one that "
                          f"fits with jaxport compile --dim or --bucket.\n")
    res = run_cli("call", tmp_path / "m.run.json", "--random", "--dim", "batch=5000")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: --dim batch=5000: 5000 is outside the spec bound 1 <= "
                                              "batch <= 4096.\n")
    for option in (["--vjp"], ["--no-cache"], ["--isolate"], ["--host-devices", "2"]):
        res = run_cli("call", tmp_path / "m.run.json", "--inputs", tmp_path / "x.npy", *option)
        assert (res.exit_code, res.stderr) == (2, f"error[usage]: {option[0]} applies to artifacts; "
                                                  f"{tmp_path / 'm.run.json'} is a module jaxport compile built.\n")
    res = run_cli("call", tmp_path / "m.run.json", "--inputs", tmp_path / "x.npy", "--runtime", "jax", "--json")
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"]["message"] == (f"{tmp_path / 'm.run.json'} is an IREE module; it runs "
                                                           f"with --runtime iree (leave out --runtime jax).")


def test_print_command_prints_each_function_s_command_line(mlp, run_cli, tmp_path):
    res = run_cli("compile", mlp[0], "-o", tmp_path / "m.vmfb", "--bucket", "batch=4", "--bucket", "batch=64",
                  "--print-command")
    assert res.exit_code == 0, res.stderr
    assert res.stdout == "".join(
        f"iree-run-module --device=local-task --module=m.vmfb --parameters=model=m.irpa --function=main_batch{b} "
        f"--input=@x.npy --output=@output.npy\n" for b in (4, 64))


def test_single_shape_form_builds_main(mlp, run_cli, tmp_path):
    art, _ = mlp
    res = run_cli("compile", art, "-o", tmp_path / "m.vmfb", "--dim", "batch=3", "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert [(f["name"], f["dims"]) for f in report["functions"]] == [("main", {"batch": 3})]
    assert report["buckets"] == "--dim" and report["parameters"] == str(tmp_path / "m.irpa")
    x = np.random.default_rng(3).standard_normal((3, 784)).astype(np.float32)
    assert_close(run_with_tool(tmp_path / "m.run.json", "main", {"x": x})["output"], np.asarray(jaxport.load(art)(x)))


def test_without_dims_buckets_are_proposed_from_the_bounds(mlp, run_cli, tmp_path):
    res = run_cli("compile", mlp[0], "-o", tmp_path / "m.vmfb", "--json")
    assert res.exit_code == 0, res.stderr
    report = json.loads(res.stdout)
    assert [f["dims"]["batch"] for f in report["functions"]] == [1, 4, 16, 64, 256, 1024, 4096]
    assert report["buckets"] == "spec bounds"
    assert report["notes"][0] == ("no --dim or --bucket given: buckets proposed from the spec's bounds (powers of two "
                                  "inside them and the upper bound, at most 8 functions): batch in 1, 4, 16, 64, 256, "
                                  "1024, 4096")


@pytest.mark.parametrize("args,message", [
    (["--dim", "seq=1,2"], "--dim seq: the function has no dimension variable 'seq'; it has batch."),
    (["--dim", "batch=1,5000"], "--dim batch=1,5000: 5000 is outside the spec bound 1 <= batch <= 4096."),
    (["--dim", "batch=1,2", "--bucket", "batch=2"], "--dim with several sizes builds a grid and --bucket lists "
                                                    "buckets one by one; give one of them."),
    (["--bucket", "batch=1,2"], "--bucket batch=1,2: a bucket gives one value per variable (batch has 2); repeat "
                                "--bucket for several buckets, or build a grid with --dim batch=N1,N2,..."),
    (["--dim", "batch=x"], "Invalid value for '--dim': 'batch=x': 'x' is not an integer. See 'jaxport compile "
                           "--help'."),
    (["--bucket", "batch=0"], "--bucket batch=0: 0 is outside the spec bound 1 <= batch <= 4096."),
])
def test_bucket_options_are_checked_before_compiling(mlp, run_cli, tmp_path, args, message):
    res = run_cli("compile", mlp[0], "-o", tmp_path / "m.vmfb", *args)
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {message}\n")
    assert list(tmp_path.iterdir()) == []


def test_dims_is_a_deprecated_alias_of_dim(mlp, run_cli, tmp_path):
    """The old --dims takes --dim's values, with a note on stderr: the same buckets, the same files."""
    new = run_cli("compile", mlp[0], "-o", tmp_path / "new.vmfb", "--dim", "batch=2,4", "--json")
    old = run_cli("compile", mlp[0], "-o", tmp_path / "old.vmfb", "--dims", "batch=2", "--dims", "batch=4", "--json")
    assert (new.exit_code, new.stderr, old.exit_code) == (0, "", 0)
    assert old.stderr == "note: --dims is deprecated; it is now --dim NAME=V[,V...], which takes the same values.\n"
    assert [f["dims"] for f in json.loads(old.stdout)["functions"]] == [{"batch": 2}, {"batch": 4}]
    assert (tmp_path / "old.vmfb").read_bytes() == (tmp_path / "new.vmfb").read_bytes()


def test_outputs_are_reproducible_and_name_no_absolute_path(mlp, tmp_path):
    art, _ = mlp
    written = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        c = compile_artifact(art, tmp_path / name / "m.vmfb", grid={"batch": [2, 4]})
        written.append([p.read_bytes() for p in (c.module, c.run, c.parameters)])
    assert written[0] == written[1]
    assert str(tmp_path).encode() not in written[0][1] and b'"/' not in written[0][1]


def test_json_reports_and_the_run_description_follow_their_schemas(mlp, run_cli, tmp_path):
    import jsonschema
    from referencing import Registry, Resource

    schemas = Path(__file__).resolve().parents[2] / "specs" / "schemas"
    registry = Registry().with_resources(
        (s["$id"], Resource.from_contents(s)) for s in
        (json.loads(p.read_text()) for p in [schemas / "manifest.schema.json", *schemas.glob("cli/*.schema.json")]))

    def check(schema: str, instance: object) -> None:
        jsonschema.Draft202012Validator(json.loads((schemas / schema).read_text()), registry=registry).validate(
            instance)

    res = run_cli("compile", mlp[0], "-o", tmp_path / "m.vmfb", "--dim", "batch=2,4", "--json")
    assert res.exit_code == 0, res.stderr
    check("cli/compile.schema.json", json.loads(res.stdout))
    check("iree-run.schema.json", json.loads((tmp_path / "m.run.json").read_text()))
    check("iree-run.schema.json", mlp[1].description)
    res = run_cli("call", tmp_path / "m.run.json", "--random", "--dim", "batch=3", "--json", "--benchmark", "3")
    assert res.exit_code == 0, res.stderr
    check("cli/call.schema.json", json.loads(res.stdout))
