"""``jaxport.call(CallRequest(...))``, the library form of ``jaxport call``: the request refuses what the command
refuses (same messages, ``UsageError``, exit 2), the report holds the function's outputs, every failure is the
``JaxportError`` subclass of the command's exit code, and a wrong input file is refused before JAX is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from jaxport_cli.errors import exit_code

import jaxport
from jaxport import CallRequest, InputError, ReferenceMismatch, UsageError, VerificationError
from tests.support import REPO, example

PAIR = "def f(x, y):\n    return x.sum(axis=1) + y.sum(axis=1)\n"
PAIR_SPEC = ("jaxport: 1\ndims:\n  b: {min: 1, max: 8}\n  h: {min: 1, max: 64}\nconstraints: [\"h <= 4*b\"]\n"
             "args:\n  - \"f32[b, h]\"\n  - \"f32[b, 2]\"\n")


@pytest.fixture(scope="module")
def mlp(mlp_path):
    return mlp_path


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    (d / "model.py").write_text(PAIR)
    (d / "spec.yaml").write_text(PAIR_SPEC)
    return jaxport.export(f"{d}/model.py:f", d / "spec.yaml", output=d / "pair.jaxport").path


# --- the request ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("options,message", [
    ({"inputs": ["x.npy"], "random": True}, "give inputs with --inputs or generate them with --random, not both."),
    ({"dims": {"batch": 2}}, "--dim, --seed and --range choose what --random generates; add --random."),
    ({"seed": 1}, "--dim, --seed and --range choose what --random generates; add --random."),
    ({"random": True, "rtol": 0.1}, "--atol, --rtol and --allow-nonfinite set how --expect compares; add --expect."),
    ({"random": True, "cast": True}, "--cast converts input files; --random generates every input with its own "
                                     "dtype."),
    ({"random": True, "vjp": True, "expect": "r.npz"}, "--expect applies to a plain call's outputs; leave out --vjp."),
    ({"random": True, "vjp": True, "output_dtype": "f32"}, "--output-dtype applies to a plain call's outputs; leave "
                                                           "out --vjp."),
    ({"random": True, "batch_size": 2, "save_inputs": "in.npz"}, "--save-inputs cannot be combined with "
                                                                 "--batch-size."),
    ({"random": True, "save_inputs": "in.npy"}, "--save-inputs in.npy: inputs are saved as an .npz keyed by input "
                                                "name; give a name ending in .npz."),
    ({"random": True, "save_inputs": "a.npz", "output": "./a.npz"}, "--save-inputs and -o name the same file; give "
                                                                    "two files."),
    ({"random": True, "cache": False, "cache_dir": "c"}, "--cache-dir and --no-cache contradict each other."),
    ({"random": True, "cotangents": "ct.npz"}, "--cotangents gives the output cotangents of --vjp; add --vjp."),
    ({"random": True, "vjp": True, "benchmark": 3}, "--vjp and --benchmark cannot be combined."),
    ({"random": True, "batch_size": 2, "runtime": "iree"}, "--batch-size runs with JAX; leave out --runtime iree."),
    ({"random": True, "vjp": True, "runtime": "iree"}, "--vjp runs with JAX; leave out --runtime iree."),
    ({"random": True, "vjp": True, "batch_size": 2}, "--vjp and --batch-size cannot be combined."),
    ({"random": True, "benchmark": 0}, "benchmark must be an integer of at least 1, not 0."),
    ({"random": True, "benchmark": 2_000_000}, "benchmark 2000000 is more than 1000000, the most it takes."),
    ({"random": True, "runtime": "tpu"}, "unknown runtime 'tpu': use 'jax' or 'iree'."),
    ({"random": True, "expect": "r.npz", "atol": float("nan")}, "atol must be a finite number of at least 0, not "
                                                                "nan."),
    ({"random": True, "output_dtype": "f16"}, "output_dtype 'f16': the one output dtype is 'f32' (float32)."),
])
def test_request_refuses_what_the_command_refuses(options, message):
    with pytest.raises(UsageError) as e:
        CallRequest("mlp.jaxport", **options)
    assert str(e.value) == message
    assert exit_code(e.value) == 2


def test_request_holds_how_to_load_as_one_record():
    from jaxport.run.options import LoadOptions

    r = CallRequest("mlp.jaxport", random=True, function="predict", runtime="iree", cache=False)
    assert r.load == LoadOptions(function="predict", runtime="iree", cache=False)
    assert (r.load.function, r.load.runtime, r.load.cache) == ("predict", "iree", False)
    assert not hasattr(r, "runtime")  # the record is read whole
    given = CallRequest("mlp.jaxport", random=True, load=LoadOptions(verify_weights=False), cache=False)
    assert given.load == LoadOptions(verify_weights=False, cache=False)  # keywords replace the given record's


@pytest.mark.parametrize("options,flag", [
    ({"expect": "r.npz"}, "--expect"), ({"function": "f"}, "--function"), ({"cache": False}, "--no-cache"),
    ({"verify_weights": False}, "--no-verify"), ({"allow_custom_calls": ["k"]}, "--allow-custom-call"),
    ({"output_dtype": "f32"}, "--output-dtype"), ({"vjp": True}, "--vjp"), ({"batch_size": 2}, "--batch-size"),
])
def test_a_compiled_module_refuses_what_it_does_not_take(options, flag, tmp_path):
    for name in ("m.run.json", "m.vmfb"):
        request = CallRequest(tmp_path / name, random=True, **options)
        assert request.compiled
        with pytest.raises(UsageError) as e:
            jaxport.call(request)
        assert str(e.value) == f"{flag} applies to artifacts; {tmp_path / name} is a module jaxport compile built."
    plain = CallRequest("m.run.json", random=True, runtime="iree", benchmark=2, values=True, output="y.npz")
    assert plain.module_problem() is None
    assert plain.module_problem(["--isolate"]) == ("--isolate applies to artifacts; m.run.json is a module jaxport "
                                                  "compile built.")


def test_request_is_frozen_and_takes_one_file_as_inputs():
    r = CallRequest("mlp.jaxport", inputs="x.npy", allow_custom_calls="my_kernel")
    assert r.inputs == ("x.npy",) and r.load.allow_custom_calls == ("my_kernel",)
    with pytest.raises(AttributeError):
        r.seed = 3  # type: ignore[misc]
    given = {"batch": 2}
    made = CallRequest("mlp.jaxport", random=True, dims=given)
    given["batch"] = 3  # the request keeps its own copy, which cannot be changed either
    assert made.dims == {"batch": 2}
    with pytest.raises(TypeError):
        made.dims["batch"] = 4  # type: ignore[index]


# --- running it -----------------------------------------------------------------------------------------------------


def test_call_returns_the_functions_outputs(mlp, tmp_path):
    import jsonschema

    x = np.random.default_rng(0).standard_normal((3, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    report = jaxport.call(CallRequest(mlp, inputs=[tmp_path / "x.npy"], output=tmp_path / "out.npz", benchmark=4,
                                      cache=False))
    want = np.asarray(jax.jit(example("mlp").predict)(x))
    ((name, got),) = report.leaves
    assert name == "output"
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_array_equal(z["output"], got)
    doc = report.as_dict()
    jsonschema.validate(doc, json.loads((REPO / "specs/schemas/cli/call.schema.json").read_text()))
    assert doc["dims"] == {"batch": 3} and doc["inputs"][0]["source"] == str(tmp_path / "x.npy")
    assert doc["benchmark"]["n"] == 4 and doc["benchmark"]["p99_s"] <= doc["benchmark"]["max_s"]


def test_random_inputs_save_and_expect(mlp, tmp_path):
    made = jaxport.call(CallRequest(mlp, random=True, dims={"batch": 2}, seed=5, save_inputs=tmp_path / "in.npz",
                                    output=tmp_path / "ref.npz", cache=False))
    assert made.sections["saved_inputs"] == {"file": str(tmp_path / "in.npz")}
    again = jaxport.call(CallRequest(mlp, inputs=[tmp_path / "in.npz"], expect=tmp_path / "ref.npz", cache=False))
    assert again.sections["expect"]["passed"] is True
    np.testing.assert_array_equal(again.leaves[0][1], made.leaves[0][1])
    with np.load(tmp_path / "ref.npz") as z:
        np.savez(tmp_path / "bad.npz", output=z["output"] + 1)
    with pytest.raises(ReferenceMismatch) as e:
        jaxport.call(CallRequest(mlp, inputs=[tmp_path / "in.npz"], expect=tmp_path / "bad.npz",
                                 output=tmp_path / "out.npz", cache=False))
    assert isinstance(e.value, VerificationError) and exit_code(e.value) == 12
    assert str(e.value).startswith(f"--expect {tmp_path / 'bad.npz'}: 1 of 1 output differs from the reference: "
                                   f"output 'output': 20 of 20 values differ")
    assert e.value.report.sections["expect"]["passed"] is False  # the finished report travels with the error
    assert (tmp_path / "out.npz").exists()  # the outputs were written before the comparison failed
    relaxed = jaxport.call(CallRequest(mlp, inputs=[tmp_path / "in.npz"], expect=tmp_path / "bad.npz", atol=1.5,
                                       cache=False))
    assert relaxed.sections["expect"]["passed"] is True


def test_the_run_layer_compares_with_the_references_itself(mlp, tmp_path):
    from jaxport.run.calls.calling import call

    assert call is jaxport.call.__wrapped__ and jaxport.call.__module__ == "jaxport.run.calls.calling"
    call(CallRequest(mlp, random=True, output=tmp_path / "ref.npz", cache=False))
    again = call(CallRequest(mlp, random=True, expect=tmp_path / "ref.npz", cache=False))
    assert again.sections["expect"]["reference"] == str(tmp_path / "ref.npz")
    assert again.sections["expect"]["passed"] is True


def test_jaxport_run_call_is_the_run_layers_call(mlp, tmp_path):
    import jaxport.run
    from jaxport.run.calls import calling

    assert jaxport.run.call is calling.call and jaxport.run.CallRequest is CallRequest
    assert jaxport.run.CallReport is jaxport.CallReport
    report = jaxport.run.call(jaxport.run.CallRequest(mlp, random=True, dims={"batch": 2}, seed=1, cache=False,
                                                      save_inputs=tmp_path / "in.npz"))
    assert isinstance(report, jaxport.run.CallReport)
    with np.load(tmp_path / "in.npz") as z:
        x = z["x"]
    want = np.asarray(jax.jit(example("mlp").predict)(x))
    np.testing.assert_allclose(report.leaves[0][1], want, rtol=1e-6, atol=1e-6)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        jaxport.run.nothing  # noqa: B018


def test_progress_names_each_stage(mlp):
    said = []
    jaxport.call(CallRequest(mlp, random=True, cache=False), progress=said.append)
    assert said == [f"Loading {mlp}...", "Generating inputs...", "Compiling and running predict on cpu..."]


def test_errors_carry_the_commands_exit_codes(mlp, tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((2, 783), np.float32))
    with pytest.raises(InputError) as e:
        jaxport.call(CallRequest(mlp, inputs=[tmp_path / "bad.npy"], cache=False))
    assert str(e.value) == "input 'x': shape[1] = 783, but the artifact expects 784 (f32[batch, 784])."
    assert exit_code(e.value) == 9
    with pytest.raises(jaxport.FormatError) as f:
        jaxport.call(CallRequest(tmp_path / "bad.npy", random=True, cache=False))
    assert exit_code(f.value) == 7
    with pytest.raises(UsageError) as u:
        jaxport.call(CallRequest(mlp, random=True, function="nope", cache=False))
    assert exit_code(u.value) == 2
    with pytest.raises(jaxport.OutputError) as o:
        jaxport.call(CallRequest(mlp, random=True, output=tmp_path / "out.txt", cache=False))
    assert exit_code(o.value) == 11


# --- checked before JAX is imported ---------------------------------------------------------------------------------

#: A fresh interpreter that runs one request and prints the error, and whether JAX was imported when it was raised.
PROBE = textwrap.dedent("""
    import json, sys
    import jaxport
    from jaxport_cli.errors import exit_code
    options = json.loads(sys.argv[2])
    try:
        jaxport.call(jaxport.CallRequest(sys.argv[1], cache=False, **options))
    except jaxport.JaxportError as e:
        print(json.dumps({"kind": e.kind, "message": str(e), "exit_code": exit_code(e),
                          "jax": "jax" in sys.modules}))
    else:
        print(json.dumps({"jax": "jax" in sys.modules}))
""")


def _probe(artifact, **options):
    out = subprocess.run([sys.executable, "-c", PROBE, str(artifact), json.dumps(options)], capture_output=True,
                         text=True, check=True, cwd=REPO)
    return json.loads(out.stdout)


def test_wrong_inputs_are_refused_without_importing_jax(mlp, pair, tmp_path):
    np.save(tmp_path / "wide.npy", np.zeros((2, 783), np.float32))
    np.save(tmp_path / "f64.npy", np.zeros((2, 784), np.float64))
    np.save(tmp_path / "many.npy", np.zeros((4097, 784), np.float32))
    np.savez(tmp_path / "pair.npz", x=np.zeros((2, 16), np.float32), y=np.zeros((3, 2), np.float32))
    np.savez(tmp_path / "tall.npz", x=np.zeros((2, 9), np.float32), y=np.zeros((2, 2), np.float32))
    np.save(tmp_path / "whole.npy", np.zeros((3, 784), np.float32))
    whole = (tmp_path / "whole.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(whole[:-4])
    (tmp_path / "long.npy").write_bytes(whole + b"tail")
    cases = [
        (mlp, {"inputs": [str(tmp_path / "cut.npy")]},
         f"{tmp_path / 'cut.npy'}: truncated .npy file: the header declares shape (3, 784) of float32 = 9408 bytes, "
         f"but only 9404 bytes follow it."),
        (mlp, {"inputs": [str(tmp_path / "long.npy")]},
         f"{tmp_path / 'long.npy'}: damaged .npy file: 4 bytes follow the array data (shape (3, 784) of float32 = "
         f"9408 bytes)."),
        (mlp, {"inputs": [str(tmp_path / "wide.npy")]},
         "input 'x': shape[1] = 783, but the artifact expects 784 (f32[batch, 784])."),
        (mlp, {"inputs": [str(tmp_path / "f64.npy")]},
         f"input 'x' has dtype float64, but the artifact expects float32. Convert it into a new file with: python -c "
         f"\"import numpy as np; np.save('{tmp_path / 'f64.float32.npy'}', np.load('{tmp_path / 'f64.npy'}')"
         f".astype(np.float32))\" and give {tmp_path / 'f64.float32.npy'}. Or let 'jaxport call --cast' convert it "
         f"on reading: it does when every value is kept as float32."),
        (mlp, {"inputs": [str(tmp_path / "many.npy")]},
         "input 'x': shape[0] = 4097, but dimension 'batch' must satisfy 1 <= batch <= 4096 (spec bound)."),
        (pair, {"inputs": [str(tmp_path / "pair.npz")]},
         "dimension 'b' is 2 from input 'x' (shape[0]) but 3 from input 'y' (shape[0])."),
        (pair, {"inputs": [str(tmp_path / "tall.npz")]},
         "input 'x': shape[1] = 9, but dimension 'h' must satisfy h <= 4*b (spec constraint); b = 2 from input 'x' "
         "(shape[0])."),
    ]
    for artifact, options, message in cases:
        got = _probe(artifact, **options)
        assert (got["kind"], got["exit_code"], got["message"]) == ("input", 9, message)
        assert got["jax"] is False, message
    got = _probe(mlp, random=True, dims={"batch": 5000})  # a --dim mistake: usage, as in every command
    assert (got["kind"], got["exit_code"], got["message"]) == (
        "usage", 2, "--dim batch=5000: 5000 is outside the spec bound 1 <= batch <= 4096.")
    assert got["jax"] is False
    assert _probe(mlp, random=True)["jax"] is True  # the probe does see JAX once a call runs


def test_the_command_refuses_a_wrong_shape_before_importing_jax(mlp, tmp_path):
    np.save(tmp_path / "wide.npy", np.zeros((2, 783), np.float32))
    record = tmp_path / "jax-imported"
    code = ("import atexit, sys\n"
            "record = sys.argv[1]\n"
            "atexit.register(lambda: open(record, 'w').write(str('jax' in sys.modules)))\n"
            "from jaxport_cli.main import main\n"
            "sys.argv = ['jaxport', *sys.argv[2:]]\n"
            "main()\n")
    res = subprocess.run([sys.executable, "-c", code, str(record), "call", str(mlp), "--inputs",
                          str(tmp_path / "wide.npy"), "--no-cache"], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 9
    assert res.stderr == "error[input]: input 'x': shape[1] = 783, but the artifact expects 784 (f32[batch, 784]).\n"
    assert res.stdout == ""
    assert record.read_text() == "False"


@pytest.mark.parametrize("at", ["checked", "loading"])
def test_a_call_runs_the_artifact_it_opened_whatever_replaces_its_path(tmp_path, run_cli, monkeypatch, at):
    """Issue 54, item 5 (a regression of round 5): ``a.jaxport`` renamed over by another artifact after the call
    opened it (once its manifest checks passed, or as it starts loading) still runs what was opened."""
    from jaxport.run import load as run_load
    from jaxport.run.calls import calling

    (tmp_path / "model.py").write_text("def good(x):\n    return x * 2\n\n\ndef evil(x):\n    return x * 3\n")
    (tmp_path / "spec.yaml").write_text('jaxport: 1\ndims: {n: {min: 1, max: 8}}\nargs:\n  - "f32[n]"\n')
    for name in ("good", "evil"):
        jaxport.export(f"{tmp_path}/model.py:{name}", tmp_path / "spec.yaml", output=tmp_path / f"{name}.jaxport",
                       name="f")
    np.save(tmp_path / "x.npy", np.arange(1, 4, dtype=np.float32))
    swapped = []

    def swap(original):
        def wrapper(*args, **kwargs):
            if not swapped:
                (tmp_path / "evil.jaxport").replace(tmp_path / "good.jaxport")
                swapped.append(True)
            return original(*args, **kwargs)
        return wrapper

    if at == "checked":
        monkeypatch.setattr(calling, "_checks", swap(calling._checks))
    else:
        monkeypatch.setattr(run_load, "runnable_program", swap(run_load.runnable_program))
    res = run_cli("call", tmp_path / "good.jaxport", "--inputs", tmp_path / "x.npy", "-o", tmp_path / "y.npy",
                  "--no-cache")
    assert res.exit_code == 0, res.stderr
    assert swapped
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.arange(1, 4, dtype=np.float32) * 2)
