"""Sharded artifacts: mesh and shardings in the spec, export on one device, the manifest and inspect, and calls on
eight simulated devices (in a subprocess: a process chooses its device count before JAX starts)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import jaxport
from jaxport.artifact.container import open_artifact
from tests.support import EXAMPLES, REPO


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    """examples/sharded exported on this one-device process."""
    d = tmp_path_factory.mktemp("sharded")
    for name in ("model.py", "spec.yaml", "params.npz", "x.npy"):
        shutil.copy(EXAMPLES / "sharded" / name, d / name)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        jaxport.export("model.py:predict", "spec.yaml", output="predict.jaxport")
    finally:
        os.chdir(cwd)
    return d


def _model(d: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("sharded_model", d / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(d: Path) -> np.ndarray:
    params = dict(np.load(d / "params.npz"))
    return np.asarray(_model(d).predict(np.load(d / "x.npy"), params))


# --- the spec ---------------------------------------------------------------------------------------------------


def _spec_error(text: str) -> str:
    with pytest.raises(jaxport.SpecError) as e:
        jaxport.parse_spec(text, "s.yaml")
    return str(e.value)


def test_spec_reads_mesh_shardings_and_outputs_sharding():
    spec = jaxport.parse_spec("jaxport: 1\nmesh: {data: 4, model: 2}\nargs:\n"
                              "  - {shape: '4*b, 8', dtype: f32, sharding: [data, null]}\n"
                              "  - {shape: [8, 8], dtype: f32, sharding: [[data, model]]}\n"
                              "  - {bind: w.npz, sharding: {dense/kernel: [null, model]}}\n"
                              "outputs_sharding: [[data, model], null]\n")
    assert spec.mesh == {"data": 4, "model": 2}
    fn = spec.functions[None]
    assert fn.args[0].sharding == ("data", None)
    assert fn.args[1].sharding == (("data", "model"),)
    assert fn.args[2].sharding == (("dense/kernel", (None, "model")),)
    assert fn.outputs_sharding == [("data", "model"), None]


@pytest.mark.parametrize("text, message", [
    ("jaxport: 1\nargs:\n  - {shape: [4], dtype: f32, sharding: [data]}\n",
     "s.yaml:3: args[0].sharding: 'sharding' needs a device mesh: add 'mesh: {AXIS: SIZE, ...}' at the top of the "
     "spec."),
    ("jaxport: 1\nmesh: {data: 4}\nargs:\n  - {shape: [4], dtype: f32, sharding: [model]}\n",
     "s.yaml:4: args[0].sharding: 'model' in the sharding [model] is not an axis of the mesh (data)."),
    ("jaxport: 1\nmesh: {data: 4}\nargs:\n  - {shape: [4], dtype: f32, sharding: [data, null]}\n",
     "s.yaml:4: args[0].sharding: the sharding [data, null] has 2 entries, but the array has 1 axis."),
    ("jaxport: 1\nmesh: {a: 2, b: 2}\nargs:\n  - {shape: [4, 4], dtype: f32, sharding: [a, [b, a]]}\n",
     "s.yaml:4: args[0].sharding: mesh axis 'a' appears twice in the sharding [a, [b, a]]; an axis partitions at "
     "most one array axis."),
    ("jaxport: 1\nmesh: {data: 0}\nargs: ['f32[4]']\n",
     "s.yaml:2: mesh['data']: the size must be an integer >= 1, found 0."),
    ("jaxport: 1\nvjp_order: -1\nargs: ['f32[4]']\n",
     "s.yaml:2: 'vjp_order' must be an integer from 0 to 4 (the highest derivative order to store), found -1."),
])
def test_spec_errors_name_the_place_and_the_fix(text, message):
    assert _spec_error(text) == message


def test_binding_sharding_names_a_missing_tensor(make_artifact, tmp_path):
    np.savez(tmp_path / "w.npz", w1=np.ones((4, 4), np.float32))
    with pytest.raises(jaxport.SpecError, match="^" + re.escape(
            "spec.yaml:5: the sharding of 'p' names 'w11', which is not a tensor of ../w.npz (did you mean 'w1'?); "
            "its keys: w1.") + "$"):
        make_artifact("def f(x, p):\n    return x @ p['w1']\n",
                      "jaxport: 1\nmesh: {m: 2}\nargs:\n  - 'f32[2, 4]'\n  - {bind: ../w.npz, sharding: {w11: [m]}}\n")


def test_outputs_sharding_must_give_one_per_output(make_artifact):
    with pytest.raises(jaxport.SpecError, match="^" + re.escape(
            "spec.yaml:1: 'outputs_sharding' gives 1 sharding, but the function returns 2 arrays; give one per "
            "output, in the order 'inspect' lists them (null for unspecified).") + "$"):
        make_artifact("def f(x):\n    return x, x\n",
                      "jaxport: 1\nmesh: {m: 2}\nargs: ['f32[2, 4]']\noutputs_sharding: [[m]]\n")


# --- export on one device: the manifest and inspect ----------------------------------------------------------------


def test_export_records_mesh_devices_and_partitioning(sharded):
    with open_artifact(sharded / "predict.jaxport") as art:
        m = art.manifest
    f = m["functions"]["predict"]
    assert f["nr_devices"] == 8
    assert f["mesh"] == {"axis_names": ["data", "model"], "axis_sizes": [4, 2]}
    assert [(a["name"], a["partition_spec"], a["sharding"]) for a in f["inputs"]] == [
        ("x", ["data", None], "{devices=[4,1,2]<=[8] last_tile_dim_replicate}")]
    assert [(a["name"], a["partition_spec"]) for a in f["outputs"]] == [("output", ["data", None])]
    assert f["weights_partition_specs"] == {"params/b1": ["model"], "params/w1": [None, "model"],
                                            "params/w2": ["model", None]}
    schema = json.loads((REPO / "specs" / "schemas" / "manifest.schema.json").read_text())
    assert [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(m)] == []


def test_inspect_shows_devices_mesh_and_partitioning(sharded, run_cli):
    res = run_cli("inspect", sharded / "predict.jaxport")
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "devices 8\n" in out
    assert "  mesh data=4 x model=2 (8 devices); run it where JAX has that many devices (call --host-devices 8 on a " \
           "CPU)\n" in out
    assert "  sharded weights: params/b1 P('model'), params/w1 P(None, 'model'), params/w2 P('model', None)\n" in out
    assert re.search(r"^ x +│ f32\[4\*b, 64\] +│ P\('data', None\)  \{devices=\[4,1,2\]<=\[8\] "
                     r"last_tile_dim_replicate\} *$", out, re.M)
    assert re.search(r"^ output +│ f32\[4\*b, 16\] +│ P\('data', None\)  \{devices=", out, re.M)


def test_a_manifest_whose_mesh_disagrees_with_nr_devices_is_refused(sharded):
    from jaxport.artifact.manifest import validate

    raw = open_artifact(sharded / "predict.jaxport").manifest
    f = raw["functions"]["predict"]
    assert f["nr_devices"] == 8 and f["mesh"]["axis_sizes"] == [4, 2]
    f["nr_devices"] = 4
    with pytest.raises(jaxport.FormatError, match="^" + re.escape(
            "manifest.json: functions['predict'].mesh: the axes multiply to 8 devices, but nr_devices is 4") + "$"):
        validate(raw)
    f["nr_devices"] = 8
    f["inputs"][0]["partition_spec"] = ["tensor", None]
    with pytest.raises(jaxport.FormatError, match=re.escape(
            "functions['predict'].inputs[0].partition_spec[0]: 'tensor' is not an axis of the function's mesh")):
        validate(raw)


# --- calling -----------------------------------------------------------------------------------------------------


def test_too_few_devices_is_a_platform_error_naming_the_options(sharded, run_cli):
    import jax

    assert jax.device_count() == 1
    res = run_cli("call", sharded / "predict.jaxport", "--inputs", sharded / "x.npy", "--no-cache")
    assert res.exit_code == 10
    assert res.stderr == (
        f"error[platform]: {sharded / 'predict.jaxport'}: function 'predict' is sharded across 8 devices over the "
        f"mesh data=4 x model=2, but JAX here has 1 cpu device. On a CPU-only machine, simulate them with "
        f"--host-devices 8 (call and verify; or set XLA_FLAGS=--xla_force_host_platform_device_count=8 before JAX "
        f"starts); or run it with 'jaxport call' in several processes with --coordinator, --num-processes and "
        f"--process-id so that they hold 8 devices together.\n")


def test_host_devices_after_jax_started_is_a_usage_error(sharded, run_cli):
    import jax

    jax.devices()  # the test process has started JAX with one device
    res = run_cli("call", sharded / "predict.jaxport", "--inputs", sharded / "x.npy", "--host-devices", "8")
    assert res.exit_code == 2
    assert res.stderr == (
        "error[usage]: --host-devices 8: JAX already started in this process with 1 CPU device; the device count can "
        "only be chosen before JAX starts. Run jaxport in a new process (or set "
        "XLA_FLAGS=--xla_force_host_platform_device_count=8 before starting Python).\n")


def _jaxport(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-c", "from jaxport_cli.main import main; main()", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


def _readme_block(heading: str) -> list[str]:
    section = (REPO / "README.md").read_text().split(heading, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


@pytest.mark.slow
def test_readme_commands_export_inspect_and_call_on_eight_simulated_devices(tmp_path):
    """The README's commands: export on this one-device machine, inspect, call on 8 simulated devices (outputs equal
    the unsharded function's) and call --vjp (input cotangents equal jax.grad of the source)."""
    import shlex

    import jax

    shutil.copytree(EXAMPLES / "sharded", tmp_path / "examples" / "sharded")
    lines = _readme_block("## Beyond one device: shards, gradients, large inputs")
    assert len(lines) == 4
    outputs = []
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "jaxport"
        res = _jaxport(*argv[1:], "--json", *(["--no-cache"] if argv[1] == "call" else []), cwd=tmp_path)
        assert res.returncode == 0, f"{line}\n{res.stderr}"
        outputs.append(json.loads(res.stdout))
    assert outputs[1]["functions"]["predict"]["mesh"] == {"axis_names": ["data", "model"], "axis_sizes": [4, 2]}
    assert outputs[2]["devices"] == {"devices": 8, "mesh": "data=4 x model=2", "process_index": 0,
                                     "process_count": 1}
    d = tmp_path / "examples" / "sharded"
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), _reference(d), rtol=1e-5, atol=1e-5)
    module = _model(d)
    x, params = np.load(d / "x.npy"), dict(np.load(d / "params.npz"))
    want = jax.grad(lambda x: jax.numpy.sum(module.predict(x, params)))(x)  # output cotangents: ones
    with np.load(tmp_path / "grads.npz") as grads:
        assert grads.files == ["x"]
        np.testing.assert_allclose(grads["x"], want, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_load_places_inputs_and_weights_with_the_recorded_shardings_and_differentiates(sharded):
    """jaxport.load on 8 devices: outputs laid out as recorded, and jax.grad through the sharded artifact."""
    script = """
import jax, jax.numpy as jnp, numpy as np, jaxport
from jaxport.run import distributed
distributed.host_devices(8)
import model
f = jaxport.load("predict.jaxport")
x = np.load("x.npy"); params = dict(np.load("params.npz"))
out = f(x)
g = jax.grad(lambda x: jnp.mean(f(x) ** 2))(x)
want = jax.grad(model.loss)(x, params)
np.savez("result.npz", out=np.asarray(out), grad=np.asarray(g), want=np.asarray(want))
print(jax.device_count(), out.sharding.spec, [str(w.sharding.spec) for w in f.backend.weights])
"""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    res = subprocess.run([sys.executable, "-c", script], cwd=sharded, env=env, capture_output=True, text=True,
                         timeout=180)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "8 P('data',) [\"P('model',)\", \"P(None, 'model')\", \"P('model', None)\"]"
    r = np.load(sharded / "result.npz")
    np.testing.assert_allclose(r["out"], _reference(sharded), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r["grad"], r["want"], rtol=1e-4, atol=1e-6)


def test_strip_locations_keeps_the_sharding_annotations(sharded, monkeypatch):
    """Re-serializing a stripped module must keep Shardy's ops (not turn them into unguaranteed custom calls)."""
    monkeypatch.chdir(sharded)
    result = jaxport.export("model.py:predict", "spec.yaml", output="stripped.jaxport", strip_locations=True)
    f = result.manifest["functions"]["predict"]
    assert [c["target"] for c in f["custom_calls"]] == ["shape_assertion"]
    assert f["inputs"][0]["partition_spec"] == ["data", None]


def test_a_command_line_bind_keeps_the_shardings_of_the_bind_it_replaces(sharded, tmp_path, run_cli):
    """`export --bind params=OTHER.npz` over the spec's `bind: params.npz` binds other values laid out as the spec's
    `sharding:` says: same partition specs, same program."""
    shutil.copy(sharded / "params.npz", tmp_path / "other.npz")
    res = run_cli("export", sharded / "model.py:predict", "--shapes", sharded / "spec.yaml", "--bind",
                  f"params={tmp_path / 'other.npz'}", "-o", tmp_path / "b.jaxport")
    assert res.exit_code == 0, res.stderr
    with jaxport.open_artifact(sharded / "predict.jaxport") as a, jaxport.open_artifact(tmp_path / "b.jaxport") as b:
        fa, fb = a.manifest["functions"]["predict"], b.manifest["functions"]["predict"]
        assert fb["weights_partition_specs"] == fa["weights_partition_specs"] == {
            "params/b1": ["model"], "params/w1": [None, "model"], "params/w2": ["model", None]}
        assert b.read(fb["payload"]) == a.read(fa["payload"])


@pytest.mark.parametrize(("spec", "message"), [
    ("  - bind: m.py:PARAMS\n    sharding: {kernel: [null, model]}\n  - {shape: \"4*b, 48\", dtype: f32}\n",
     "spec.yaml:4: the sharding of 'params/kernel': axis 1 has size 5, which 2 does not divide, but it is split over "
     "model (2). Replicate it (null), or change the mesh."),
    ("  - bind: m.py:PARAMS\n  - {shape: \"b, 48\", dtype: f32, sharding: [data, null]}\n",
     "spec.yaml:5: args[1].sharding: axis 0 has size b, which is not always a multiple of 4 (with b=1 it is 1), but "
     "it is split over data (4). Write the size as a multiple of 4 (e.g. 4*b), shard the axis over another mesh "
     "axis, or replicate it (null)."),
    ("  - bind: m.py:PARAMS\n  - {shape: \"4*b, 6\", dtype: f32, sharding: [null, data]}\n",
     "spec.yaml:5: args[1].sharding: axis 1 has size 6, which 4 does not divide, but it is split over data (4). Shard "
     "it over model (2), replicate it (null), or change the mesh."),
])
def test_a_sharding_that_does_not_divide_its_axis_is_a_spec_error_at_its_line(tmp_path, run_cli, monkeypatch, spec,
                                                                               message):
    (tmp_path / "m.py").write_text("import numpy as np\nPARAMS = {'kernel': np.ones((48, 5), np.float32)}\n"
                                   "def f(params, x):\n    return x @ params['kernel']\n")
    (tmp_path / "spec.yaml").write_text("jaxport: 1\nmesh: {data: 4, model: 2}\nargs:\n" + spec)
    monkeypatch.chdir(tmp_path)
    res = run_cli("export", "m.py:f", "--shapes", "spec.yaml", "-o", "out.jaxport")
    assert (res.exit_code, res.stderr) == (3, f"error[spec]: {message}\n")
    assert not (tmp_path / "out.jaxport").exists()
