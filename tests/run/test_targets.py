"""warmup --target and check --target: compiled for a machine that need not be this one (a TPU, through libtpu, from
a CPU-only machine), executables shipped in the cache as jaxport's records and used with no compile where they
match, refused with the reason where they do not."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxport
from jaxport.errors import PlatformError, UsageError
from jaxport.run import executables
from jaxport.run.cache import compilation_cache
from tests.support import EXAMPLES, REPO

JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]


def _run(*args, cwd=None):
    return subprocess.run([*JAXPORT, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """The example MLP exported for cpu and tpu, with bound weights."""
    path = tmp_path_factory.mktemp("targets") / "mlp.jaxport"
    jaxport.export(str(EXAMPLES / "mlp/model.py:apply"), str(EXAMPLES / "mlp/spec-bound.yaml"), output=path,
                   platforms=["cpu", "tpu"])
    return path


def _refuse_compiling(monkeypatch):
    """From now on, any XLA compilation in this process fails the test."""
    from jax._src import compiler

    def refuse(*args, **kwargs):
        raise AssertionError("XLA compiled a program")

    monkeypatch.setattr(compiler, "backend_compile_and_load", refuse)


def test_cpu_executables_built_in_another_process_run_with_no_compile(mlp, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    done = _run("warmup", mlp, "--target", "cpu", "--dim", "batch=3,8", "--cache-dir", cache, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["targets"][0]
    assert [b["dims"] for b in report["buckets"]] == [{"batch": 3}, {"batch": 8}]
    assert all(b["ok"] and b["executable"].startswith("jaxport-executable-") for b in report["buckets"])
    # the executables, and the program check's verdict beside them (what a vouch for the cache covers too)
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith("jaxport-verdict-")) == \
        sorted(b["executable"] for b in report["buckets"])
    assert len(list(cache.glob("jaxport-verdict-*.json"))) == 1
    x = np.random.default_rng(0).standard_normal((8, 784)).astype(np.float32)
    model = _module("mlp/model.py")
    expected = np.asarray(jax.jit(model.apply)(model.PARAMS, x))
    _refuse_compiling(monkeypatch)
    with compilation_cache(cache):
        loaded = jaxport.load(mlp)
        run = loaded.run({"x": x})
    assert run.compilation.shipped and run.compilation.source == "shipped" and loaded.notes == []
    np.testing.assert_allclose(run.leaves[0][1], expected, rtol=1e-6, atol=1e-6)


def _module(relative: str):
    spec = importlib.util.spec_from_file_location("targets_" + relative.replace("/", "_")[:-3], EXAMPLES / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_call_and_warmup_say_the_executable_was_shipped(mlp, tmp_path, run_cli):
    cache = tmp_path / "cache"
    assert run_cli("warmup", mlp, "--target", "cpu", "--dim", "batch=8", "--cache-dir", cache).exit_code == 0
    r = run_cli("call", mlp, "--random", "--dim", "batch=8", "--cache-dir", cache, "--json", "--benchmark", "3")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["timings"]["executable"] == "shipped"
    assert report["benchmark"]["executable"] == "shipped" and report["benchmark"]["pipelined_s"] > 0
    r = run_cli("warmup", mlp, "--dim", "batch=8", "--cache-dir", cache, "--json")
    assert [s["executable"] for s in json.loads(r.stdout)["signatures"]] == ["shipped"]
    r = run_cli("call", mlp, "--random", "--dim", "batch=8", "--cache-dir", cache, "--benchmark", "3")
    assert "(a shipped executable)" in r.stdout
    assert ("p50 ... max: each call alone, inputs already on the device, outputs left there, waited for; "
            "pipelined: per call, the same calls dispatched back to back with one wait at the end; "
            "executable: shipped.") in r.stdout


def _records(cache: Path) -> list[Path]:
    return sorted(cache.glob("jaxport-executable-*.bin"))


def _rewrite_header(path: Path, change) -> None:
    """Give a record another header (``change(header)``), as a record built elsewhere would have."""
    data = path.read_bytes()
    start = len(executables.MAGIC) + 8
    length = int.from_bytes(data[len(executables.MAGIC):start], "little")
    header = json.loads(data[start:start + length])
    change(header)
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    path.write_bytes(data[:len(executables.MAGIC)] + len(raw).to_bytes(8, "little") + raw + data[start + length:])


def _built(mlp, cache):
    with compilation_cache(None):
        done = jaxport.load(mlp).warmup({"batch": 8})
    assert done
    r = subprocess.run([*JAXPORT, "warmup", str(mlp), "--target", "cpu", "--dim", "batch=8", "--cache-dir",
                        str(cache)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    return _records(cache)[0]


def _load_and_run(mlp, cache):
    with compilation_cache(cache):
        loaded = jaxport.load(mlp)
        run = loaded.run({"x": np.ones((8, 784), np.float32)})
    return loaded, run


def test_a_record_for_another_jaxlib_falls_back_to_compiling_with_one_note(mlp, tmp_path):
    cache = tmp_path / "cache"
    record = _built(mlp, cache)

    def other_jaxlib(header):
        header["facts"]["jaxlib"] = "0.0.1"

    _rewrite_header(record, other_jaxlib)
    found, _ = executables.read_record(record)
    os.rename(record, executables.record_path(cache, found.header["program"], (((8, 784), "float32"),), found.facts))
    loaded, run = _load_and_run(mlp, cache)
    assert not run.compilation.shipped
    here = jax.lib.__version__ if hasattr(jax.lib, "__version__") else None
    del here
    from jaxlib.version import __version__ as jaxlib_version

    assert loaded.notes == [f"the cache holds an executable of this program and shape built for another machine or "
                            f"software (jaxlib 0.0.1 (here: {jaxlib_version})); compiling here instead (jaxport "
                            f"warmup --target builds one for this machine)."]


def test_a_record_with_other_compile_options_names_them(mlp, tmp_path):
    import base64

    from jax._src.lib import xla_client

    cache = tmp_path / "cache"
    record = _built(mlp, cache)

    def other_options(header):
        options = xla_client.CompileOptions.ParseFromString(base64.b64decode(header["facts"]["options_proto"]))
        options.executable_build_options.debug_options.xla_backend_optimization_level = 1
        header["facts"]["options"] = "0" * 64
        header["facts"]["options_proto"] = base64.b64encode(options.SerializeAsString()).decode()

    _rewrite_header(record, other_options)
    loaded, run = _load_and_run(mlp, cache)
    assert not run.compilation.shipped
    assert loaded.notes == ["the cache holds an executable of this program and shape built for another machine or "
                            "software (XLA's compile options differ (debug_options.xla_backend_optimization_level)); "
                            "compiling here instead (jaxport warmup --target builds one for this machine)."]


@pytest.mark.parametrize("damage,why", [
    ("flip", "its executable's sha256 does not match its header (damaged)"),
    ("truncate", "its size does not match its header (truncated or damaged)"),
    ("magic", "it is not a jaxport executable record"),
    ("header", "its header is damaged"),
    ("writable", "others can write it (mode 666)"),
    ("huge header", "its header is damaged"),
    ("fifo", "it is not a regular file"),
])
def test_a_damaged_or_foreign_record_is_ignored_and_said(mlp, tmp_path, damage, why):
    cache = tmp_path / "cache"
    record = _built(mlp, cache)
    data = bytearray(record.read_bytes())
    if damage == "flip":
        data[-100] ^= 0x10
    elif damage == "truncate":
        data = data[:-10]
    elif damage == "magic":
        data[:4] = b"ELF\x7f"
    elif damage == "header":
        start = len(executables.MAGIC) + 8
        data[start:start + 8] = b"{{{{{{{{"
    elif damage == "huge header":
        data[len(executables.MAGIC):len(executables.MAGIC) + 8] = (1 << 62).to_bytes(8, "little")
    if damage == "fifo":
        record.unlink()
        os.mkfifo(record, 0o644)
    else:
        record.write_bytes(bytes(data))
        record.chmod(0o666 if damage == "writable" else 0o644)
    loaded, run = _load_and_run(mlp, cache)
    assert not run.compilation.shipped
    assert loaded.notes == [f"ignored the executable {record.name} in the cache: {why}; compiling instead."]
    np.testing.assert_allclose(run.leaves[0][1], _load_and_run(mlp, None)[1].leaves[0][1], rtol=0, atol=0)


def test_sharded_executables_built_for_the_host_devices_run_with_no_compile(tmp_path):
    art = tmp_path / "sharded.jaxport"
    done = _run("export", "model.py:predict", "--shapes", "spec.yaml", "-o", art, cwd=EXAMPLES / "sharded")
    assert done.returncode == 0, done.stderr
    cache = tmp_path / "cache"
    done = _run("warmup", art, "--target", "cpu", "--host-devices", "8", "--dim", "b=2", "--cache-dir", cache)
    assert done.returncode == 0, done.stderr
    done = _run("call", art, "--random", "--dim", "b=2", "--host-devices", "8", "--cache-dir", cache, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["timings"]["executable"] == "shipped"


def test_records_in_a_directory_others_can_write_are_not_read(mlp, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    _built(mlp, cache)
    cache.chmod(0o777)
    calls = []
    monkeypatch.setattr(executables, "read_record", lambda *a, **k: calls.append(a) or (None, "read"))
    loaded, run = _load_and_run(mlp, cache)
    assert not run.compilation.shipped and calls == []


def test_a_symbolic_link_is_no_record(mlp, tmp_path):
    cache = tmp_path / "cache"
    record = _built(mlp, cache)
    elsewhere = tmp_path / "elsewhere.bin"
    record.rename(elsewhere)
    record.symlink_to(elsewhere)
    loaded, run = _load_and_run(mlp, cache)
    assert not run.compilation.shipped
    assert loaded.notes[0].startswith(f"ignored the executable {record.name} in the cache: it cannot be opened (")


def test_unknown_target_is_a_usage_error_naming_the_closest(mlp, run_cli):
    r = run_cli("warmup", mlp, "--target", "tpu-v5", "--dim", "batch=8")
    assert r.exit_code == 2
    assert r.stderr == ("error[usage]: --target tpu-v5: unknown target. Did you mean 'tpu-v5e'? Targets: cpu, tpu-v5e, "
                        "tpu-v5e-4, tpu-v5e-8, tpu-v6e, tpu-v6e-4, tpu-v6e-8, tpu-v5p-8, tpu-v4-8, cuda-h200, "
                        "cuda-h200-8, cuda-h100, cuda-h100-8, cuda-a100, cuda-a100-8; or cuda-FILE, a GPU's target "
                        "config (.json, .txtpb, .pbtxt, .textproto).\n")


def test_the_policy_language_and_the_targets_agree():
    from jaxport.artifact.policy.language import COMPILE_TARGETS
    from jaxport.run.compile.targets import target_names

    assert list(COMPILE_TARGETS) == target_names()


def test_a_platform_the_artifact_was_not_exported_for_is_refused(tmp_path, run_cli):
    path = tmp_path / "cpu.jaxport"
    jaxport.export(str(EXAMPLES / "mlp/model.py:predict"), str(EXAMPLES / "mlp/spec.yaml"), output=path)
    r = run_cli("warmup", path, "--target", "tpu-v5e", "--dim", "batch=8", "--cache-dir", tmp_path / "c")
    assert r.exit_code == 10
    assert r.stderr == (f"error[platform]: {path}: function 'predict' was exported for cpu, not tpu: it cannot be "
                        f"compiled for tpu-v5e. Re-export it with --platform tpu (repeat --platform to keep the "
                        f"others).\n")


def test_without_libtpu_a_tpu_target_says_what_to_install(mlp, monkeypatch):
    from jax.experimental import topologies

    from jaxport.run.compile.aot import compile_targets

    def missing(*args, **kwargs):
        raise RuntimeError("JAX TPU support not installed; cannot generate TPU topology. See https://...")

    monkeypatch.setattr(topologies, "get_topology_desc", missing)
    with pytest.raises(PlatformError, match=re.escape(
            "--target tpu-v5e: compiling for a TPU on a machine without one needs libtpu, which is not installed; "
            "install it with pip install 'jaxport[tpu]' (the libtpu version this JAX pins).")):
        compile_targets(mlp, ["tpu-v5e"], dims={"batch": [8]})


def test_without_dims_the_buckets_are_the_proposed_ones(mlp, tmp_path, run_cli):
    r = run_cli("check", mlp, "--target", "cpu", "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    sizes = [b["dims"]["batch"] for b in report["targets"][0]["buckets"]]
    assert sizes == [1, 4, 16, 64, 256, 1024, 4096]  # what `jaxport compile` proposes from 1 <= batch <= 4096
    assert list(tmp_path.iterdir()) == []  # check writes nothing


def test_check_gates_compiles_on_from_a_policy(mlp, tmp_path, run_cli):
    policy = tmp_path / "policy.yaml"
    policy.write_text("jaxport_policy: 1\ncompiles_on:\n  targets: [cpu]\n  dims: {batch: [2, 5]}\n")
    r = run_cli("check", mlp, "--policy", policy, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["rules"] == [{"rule": "compiles_on", "passed": True, "violations": 0}]
    assert [b["dims"] for b in report["targets"][0]["buckets"]] == [{"batch": 2}, {"batch": 5}]
    policy.write_text("jaxport_policy: 1\ncompiles_on: [tpu-v9]\n")
    r = run_cli("check", mlp, "--policy", policy)
    assert r.exit_code == 2
    assert r.stderr == (f"error[policy-file]: {policy}:2: compiles_on: unknown target 'tpu-v9'. Did you mean "
                        f"'tpu-v6e'? Targets: cpu, tpu-v5e, tpu-v5e-4, tpu-v5e-8, tpu-v6e, tpu-v6e-4, tpu-v6e-8, "
                        f"tpu-v5p-8, tpu-v4-8, cuda-h200, cuda-h200-8, cuda-h100, cuda-h100-8, cuda-a100, "
                        f"cuda-a100-8; or cuda-FILE, a GPU's target config (.json, .txtpb, .pbtxt, .textproto).\n")


def test_xla_messages_are_kept_whole_on_one_line():
    from jaxport.run.jax_backend import xla_message

    e = RuntimeError("RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:\nRan out of memory in memory space vmem "
                     "while allocating.   Scoped allocation with size 64.00M and limit 16.00M exceeded scoped vmem "
                     "limit by 48.00M.\n\n=== Source Location Trace: ===\nlearning/x.cc:370\n")
    assert xla_message(e) == ("RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: Ran out of memory in memory "
                              "space vmem while allocating. Scoped allocation with size 64.00M and limit 16.00M "
                              "exceeded scoped vmem limit by 48.00M.")


# --- for a TPU, on this CPU-only machine (libtpu) -------------------------------------------------------------------


@pytest.mark.libtpu
def test_examples_and_pallas_kernels_compile_for_a_tpu_here(mlp, tmp_path, run_cli):
    cache = tmp_path / "cache"
    shutil.copy(EXAMPLES / "pallas/model.py", tmp_path / "model.py")
    fa = tmp_path / "fa.jaxport"
    jaxport.export(str(EXAMPLES / "pallas/flash_attention.py:attention"),
                   str(EXAMPLES / "pallas/spec-flash-attention.yaml"), output=fa)
    add = tmp_path / "add.jaxport"
    jaxport.export(str(EXAMPLES / "pallas/model.py:add"), str(EXAMPLES / "pallas/spec.yaml"), output=add)
    for path, dims in ((mlp, ["--dim", "batch=1,8"]), (fa, []), (add, [])):
        r = run_cli("warmup", path, "--target", "tpu-v5e", *dims, "--cache-dir", cache, "--json")
        assert r.exit_code == 0, r.stderr
        report = json.loads(r.stdout)["targets"][0]
        assert report["target"]["name"] == "tpu-v5e" and report["platform_version"].startswith("TFRT TPU v5 lite")
        for b in report["buckets"]:
            assert b["ok"] and b["fits"] is True and b["memory_limit"] == 16909336064
            assert b["memory_needed"] == sum(v for k, v in b["memory"].items() if k != "aliased") - \
                b["memory"]["aliased"]
    assert len(_records(cache)) == 4
    headers = [executables.read_record(p, blob=False)[0].header for p in _records(cache)]
    assert {h["facts"]["device_kinds"][0] for h in headers} == {"TPU v5 lite"}
    assert {h["target"] for h in headers} == {"tpu-v5e"}


@pytest.mark.libtpu
def test_a_kernel_over_the_scoped_vmem_is_refused_with_the_sizes_and_gated(tmp_path, run_cli):
    vmem = tmp_path / "vmem.jaxport"
    jaxport.export(str(EXAMPLES / "pallas/vmem.py:double"), str(EXAMPLES / "pallas/spec-vmem.yaml"), output=vmem)
    sizes = "Scoped allocation with size 64.00M and limit 16.00M exceeded scoped vmem limit by 48.00M."
    r = run_cli("warmup", vmem, "--target", "tpu-v5e", "--cache-dir", tmp_path / "cache")
    assert r.exit_code == 10
    assert r.stderr.startswith(f"error[platform]: {vmem} for tpu-v5e: 0 of 1 bucket compiled; function 'double' at "
                               f"static shapes: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: Ran out of "
                               f"memory in memory space vmem")
    assert sizes in r.stderr and r.stderr.count("\n") == 1
    assert "✗ double at static shapes: RESOURCE_EXHAUSTED" in r.stdout
    assert not (tmp_path / "cache").exists() or _records(tmp_path / "cache") == []
    r = run_cli("check", vmem, "--target", "tpu-v5e", "--json")
    assert r.exit_code == 14
    report = json.loads(r.stdout)
    assert report["passed"] is False and report["violations"][0]["rule"] == "compiles_on"
    assert sizes in report["violations"][0]["message"]
    policy = tmp_path / "policy.yaml"
    policy.write_text("jaxport_policy: 1\ncompiles_on: [tpu-v5e]\n")
    assert run_cli("check", vmem, "--policy", policy).exit_code == 14


@pytest.mark.libtpu
def test_a_program_over_the_chips_memory_is_refused_with_xlas_sizes(tmp_path, run_cli):
    (tmp_path / "model.py").write_text("def f(x):\n    return x * 2\n")
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs:\n  - "f32[65536, 32768]"\nplatforms: [tpu]\n')
    path = tmp_path / "big.jaxport"
    jaxport.export(str(tmp_path / "model.py:f"), str(tmp_path / "spec.yaml"), output=path)
    r = run_cli("check", path, "--target", "tpu-v5e", "--json")
    assert r.exit_code == 14
    bucket = json.loads(r.stdout)["targets"][0]["buckets"][0]
    assert bucket["compiled"] is False and bucket["fits"] is None
    assert ("RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total memory required for "
            "HLO temporaries (16.00G) exceeds available HBM (15.75G).") in bucket["error"]


def test_an_executable_over_the_targets_memory_does_not_fit():
    from jaxport.run.compile.aot import Bucket

    gib = 1 << 30
    bucket = Bucket("f", {"b": 8}, (((8, 4), "float32"),), ("x",), True, None, 0.1,
                    {"arguments": 8 * gib, "outputs": 8 * gib, "aliased": 2 * gib, "temporaries": gib, "code": 0},
                    16 * gib)
    assert (bucket.needs, bucket.fits, bucket.ok) == (15 * gib, True, True)
    bucket = Bucket("f", {"b": 8}, (((8, 4), "float32"),), ("x",), True, None, 0.1,
                    {"arguments": 8 * gib, "outputs": 8 * gib, "aliased": 0, "temporaries": gib, "code": 0},
                    16 * gib)
    assert (bucket.fits, bucket.ok) == (False, False)
    assert bucket.reason() == ("needs 17.00 GiB of device memory per device (arguments 8.00 GiB, outputs 8.00 GiB, "
                               "temporaries 1.00 GiB), more than the 16.00 GiB the target has")


def test_the_positional_fast_path_takes_bound_artifacts_and_still_refuses_numpy_float64(mlp):
    loaded = jaxport.load(mlp)
    x = jax.device_put(np.ones((4, 784), np.float32))
    first = loaded(x)
    loaded(x)
    assert loaded._fast is not None  # JAX arrays of a checked signature go straight to JAX's C++ dispatch
    np.testing.assert_array_equal(np.asarray(loaded(x)), np.asarray(first))
    with pytest.raises(jaxport.InputError, match="float64"):
        loaded(np.ones((4, 784), np.float64))
    with pytest.raises(jaxport.InputError, match=re.escape("dimension 'batch' must satisfy")):
        loaded(jax.device_put(np.ones((4097, 784), np.float32)))


def test_targets_are_named_as_documented():
    from jaxport.run.compile.targets import target

    with pytest.raises(UsageError):
        target("gpu")
    assert target("tpu-v5e").topology == "v5e:1x1" and target("cpu").topology is None
