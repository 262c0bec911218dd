"""GPU targets and records without JAX's CUDA plugin (``make test``): the targets' names and files, what a GPU record
is keyed by and how a mismatch reads, the capture command where there is no GPU, the custom calls of GPU kernels,
and the start-up settings a TPU or GPU compile refuses, each named. The compiles themselves: tests/cuda."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import jaxport
from jaxport import _machine
from jaxport._machine import GpuFacts, device_model, parse_target_config
from jaxport.errors import PolicyError, UsageError
from jaxport.jaxprivate.facts import Facts
from jaxport.run import executables
from jaxport.run.compile import targets
from tests.support import EXAMPLES, REPO

JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]
SPECS = Path(targets.__file__).parent / "gpu"
TRITON = "__gpu$xla.gpu.triton"
#: The running JAX's version, as numbers.
JAX = tuple(int(p) for p in __import__("jax").__version__.split(".")[:3] if p.isdigit())
#: The Pallas GPU examples lower for a named GPU without one (``AbstractDevice(platform=...)``, ``plgpu.kernel``):
#: jax 0.11 and later; an older supported JAX cannot import them.
PALLAS_GPU_EXAMPLES = pytest.mark.skipif(JAX < (0, 11), reason="the Pallas GPU examples need jax 0.11 or later "
                                                                "(AbstractDevice(platform=...), plgpu.kernel)")


def triton_deprecated():
    """JAX 0.12 deprecates the Pallas Triton backend (a DeprecationWarning when a kernel lowers); before, nothing."""
    import contextlib

    return pytest.warns(DeprecationWarning) if JAX >= (0, 12) else contextlib.nullcontext()


def _run(*args, env=None, cwd=None):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTPU", "TPU_"))}
    return subprocess.run([*JAXPORT, *map(str, args)], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**environ, "PYTHONPATH": str(REPO), **(env or {})})


@pytest.mark.parametrize("name,model", [
    ("NVIDIA H200 141GB HBM3e", "NVIDIA H200"),  # XLA's spec
    ("NVIDIA H200", "NVIDIA H200"),  # the real device (PyTorch and the driver say so: ../shared/GPU.md)
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100"),
    ("NVIDIA H100 PCIe", "NVIDIA H100"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100"),
    ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "NVIDIA H100 MIG 1g.10gb"),
    ("NVIDIA B200", "NVIDIA B200"),
    ("Tesla V100-SXM2-16GB", "Tesla V100"),
])
def test_device_names_reduce_to_the_model(name, model):
    assert device_model(name) == model


@pytest.mark.parametrize("file,name,cc,cores,memory,cudnn", [
    ("h200.txtpb", "NVIDIA H200 141GB HBM3e", "9.0a", 132, 151397597184, "9.10.0"),
    ("h100.txtpb", "NVIDIA H100 80GB HBM3", "9.0a", 132, 84942979072, "9.23.0"),
    ("a100.txtpb", "NVIDIA A100-SXM4-80GB", "8.0", 108, 85100068864, "8.9.4"),
])
def test_the_shipped_specs_read_as_xla_wrote_them(file, name, cc, cores, memory, cudnn):
    config = parse_target_config((SPECS / file).read_text())
    assert (config.name, config.compute_capability, config.cores, config.memory, config.cudnn, config.platform) == \
        (name, cc, cores, memory, cudnn, "CUDA")
    assert (SPECS / file).read_text().startswith(f"# XLA's spec of the {name} (xla/backends/gpu/target_config/specs/)")


def test_a_text_without_a_device_or_compute_capability_is_no_gpu_config():
    with pytest.raises(ValueError, match="names no device"):
        parse_target_config("gpu_device_info { core_count: 4 }")
    with pytest.raises(ValueError, match="gives no CUDA compute capability"):
        parse_target_config('device_description_str: "MI300X"\ngpu_device_info { core_count: 304 }')


def _gf(**changes) -> GpuFacts:
    base = dict(compute_capability="9.0a", device="NVIDIA H200", cores="132", plugin="jax-cuda13-pjrt 0.11.2",
                cuda_runtime="12.8.0", cudnn="9.10.0", driver="13.0.0", ptxas="13.0.88", build="deviceless")
    return GpuFacts(**{**base, **changes})


def test_a_gpu_build_runs_where_the_model_plugin_and_versions_allow():
    built = _gf()
    here = _gf(compute_capability="9.0", cuda_runtime="13.0", cudnn="9.12.0", driver="13.0", ptxas="",
                build="autotuned")
    assert built.differences(here) == []  # sm_90a runs on a 9.0 device; versions older at build; ptxas 13.0 <= 13.0
    assert built.differences(_gf(cudnn="9.8.0")) == ["cudnn"]
    assert built.differences(_gf(cuda_runtime="12.4.1")) == ["cuda_runtime"]
    assert built.differences(_gf(driver="12.9", ptxas="")) == ["driver", "ptxas"]
    assert _gf(driver="").differences(_gf(driver="12.9")) == ["ptxas"]  # the cubins need a CUDA 13.0 driver
    assert built.differences(_gf(device="NVIDIA H100")) == ["device"]
    assert built.differences(_gf(cores="114")) == ["cores"]
    assert built.differences(_gf(compute_capability="8.0")) == ["compute_capability"]
    assert built.differences(_gf(plugin="jax-cuda13-pjrt 0.12.0.1")) == ["plugin"]
    assert _gf(cudnn="").differences(_gf(cudnn="9.1.0")) == []  # unknown on one side: not held against it


def _facts(gpu: GpuFacts | None, **changes) -> Facts:
    base = dict(module="m" * 64, options="o" * 64, platform="gpu" if gpu else "tpu",
                platform_version="NVIDIA H200 141GB HBM3e", device_kinds=("NVIDIA H200 141GB HBM3e",), topology="1",
                flags="", jaxlib="0.11.2", machine="", options_proto="", gpu=gpu)
    return Facts(**{**base, **changes})


def test_gpu_facts_travel_in_the_record_and_other_records_read_as_before():
    built = _facts(_gf())
    data = built.to_json()
    assert data["gpu"] == _gf().to_json() and Facts.from_json(json.loads(json.dumps(data))) == built
    tpu = _facts(None)
    assert "gpu" not in tpu.to_json() and Facts.from_json(tpu.to_json()) == tpu  # a TPU record's header as before
    assert Facts.from_json({**data, "gpu": {"device": "x"}}) is None  # a damaged GPU block: a damaged record
    assert Facts.from_json({**data, "gpu": "NVIDIA H200"}) is None


def test_a_gpu_compile_and_the_gpu_name_one_record_and_a_mismatch_names_both_versions():
    built = _facts(_gf())
    here = _facts(_gf(cuda_runtime="13.0", cudnn="9.12.0", driver="13.0", ptxas="", build="autotuned"),
                  platform_version="PJRT C API\ncuda 13000", device_kinds=("NVIDIA H200",), topology="7")
    assert executables.machine_digest(built) == executables.machine_digest(here)
    assert built.matches(here) and not built.differences(here)
    older = _facts(_gf(cudnn="9.8.0", cuda_runtime="12.4.0", driver="12.9"), device_kinds=("NVIDIA H200",))
    assert executables.difference_text(built, older) == (
        "CUDA runtime 12.8.0 assumed by the build (here: 12.4.0); cuDNN 9.10.0 assumed by the build (here: 9.8.0); "
        "CUDA driver 13.0.0 assumed by the build (here: 12.9); cubins written by ptxas 13.0.88, newer than the "
        "driver here (CUDA 12.9)")
    other = _facts(_gf(device="NVIDIA H100"), jaxlib="0.12.0.1", device_kinds=("NVIDIA H100", "NVIDIA H100"))
    assert executables.machine_digest(built) != executables.machine_digest(other)
    assert executables.difference_text(built, other) == "jaxlib 0.11.2 (here: 0.12.0.1); devices 1 (here: 2); GPU " \
                                                        "NVIDIA H200 (here: NVIDIA H100)"


def test_gpu_targets_are_named_and_read_from_xlas_specs():
    h200 = targets.target("cuda-h200")
    assert (h200.platform, h200.topology, h200.memory_per_device, h200.source) == (
        "cuda", "1x1x1", int(151397597184 * 0.75), "XLA's spec (h200.txtpb)")
    assert h200.description == "one NVIDIA H200 (141 GB) on one host (sm_90a, 132 SMs; XLA's spec (h200.txtpb))"
    eight = targets.target("cuda-a100-8")
    assert (eight.topology, eight.description) == ("1x1x8", "8 NVIDIA A100 SXM (80 GB)s on one host (sm_80, 108 SMs; "
                                                            "XLA's spec (a100.txtpb))")
    assert targets.target_names()[-6:] == ["cuda-h200", "cuda-h200-8", "cuda-h100", "cuda-h100-8", "cuda-a100",
                                           "cuda-a100-8"]
    with pytest.raises(UsageError, match=re.escape("--target cuda-h300: unknown target. Did you mean 'cuda-h200'?")):
        targets.target("cuda-h300")


def _capture(path: Path, **changes) -> Path:
    config = (SPECS / "h200.txtpb").read_text().replace('"NVIDIA H200 141GB HBM3e"', '"NVIDIA H200"')
    targets.write_capture(path, {"format": targets.CAPTURE_FORMAT, "device": "NVIDIA H200", "model": "NVIDIA H200",
                                 "compute_capability": "9.0a", "devices": 2, "memory_limit": 140 << 30,
                                 "target_config": config, "versions": {}, "python": "3.12.3", **changes})
    return path


def test_a_captured_gpu_is_a_target_by_its_file(tmp_path, monkeypatch):
    path = _capture(tmp_path / "h200.json")
    t = targets.target(f"cuda-{path}")
    assert (t.name, t.topology, t.memory_per_device, t.source) == (f"cuda-{path}", "1x1x2", 140 << 30, str(path))
    assert t.description == f"2 NVIDIA H200s on one host (sm_90a, 132 SMs; {path})"
    monkeypatch.chdir(tmp_path)
    assert targets.target("cuda-h200.json").target_config == t.target_config  # relative to the working directory
    (tmp_path / "raw.txtpb").write_text((SPECS / "a100.txtpb").read_text())
    assert targets.target("cuda-raw.txtpb").description.startswith("one NVIDIA A100-SXM4-80GB on one host (sm_80")


@pytest.mark.parametrize("content,said", [
    (None, "--target missing.json: GPU target config not found."),
    ("{", "not a capture of 'jaxport target' (not JSON: "),
    ('{"format": "other"}', "not a capture of 'jaxport target' (no format 'jaxport-gpu-target/1' with a "
                            "target_config); write one with 'jaxport target -o FILE' on the GPU."),
    ('{"format": "jaxport-gpu-target/1", "target_config": "x: 1", "devices": 0}', "its devices (0) or memory_limit "
                                                                                  "(None) is not a count"),
    ('{"format": "jaxport-gpu-target/1", "target_config": "gpu_device_info {}"}', "is no NVIDIA GPU's target config: "
                                                                                 "it names no device"),
])
def test_a_file_that_is_no_gpu_target_is_a_usage_error_naming_it(tmp_path, content, said):
    path = tmp_path / "missing.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError) as e:
        targets.gpu_target_file(path)
    assert said in str(e.value).replace(str(tmp_path) + "/", "")


def test_without_the_cuda_plugin_a_gpu_target_says_what_to_install(mlp_path, run_cli, tmp_path):
    if _machine.cuda_plugin_module() is not None:
        pytest.skip("JAX's CUDA plugin is installed here (tests/cuda compiles for GPUs)")
    path = jaxport.export(str(EXAMPLES / "mlp/model.py:predict"), str(EXAMPLES / "mlp/spec.yaml"),
                          output=tmp_path / "mlp.jaxport", platforms=["cpu", "cuda"]).path
    r = run_cli("warmup", path, "--target", "cuda-h200", "--dim", "batch=8", "--cache-dir", tmp_path / "c")
    assert (r.exit_code, r.stderr) == (10, "error[platform]: --target cuda-h200: compiling for an NVIDIA GPU needs "
                                           "JAX's CUDA plugin of this jaxlib's release, with ptxas and libdevice, "
                                           "which are not installed; install them with pip install 'jaxport[cuda]'.\n")
    r = run_cli("check", mlp_path, "--target", "cuda-h200", "--dim", "batch=8")
    assert (r.exit_code, r.stderr) == (10, f"error[platform]: {mlp_path}: function 'predict' was exported for cpu, "
                                           f"not cuda: it cannot be compiled for cuda-h200. Re-export it with "
                                           f"--platform cuda (repeat --platform to keep the others).\n")


def test_a_policy_names_gpu_targets_and_captured_files_beside_it(tmp_path):
    from jaxport.artifact.policy import load_policy

    _capture(tmp_path / "h200.json")
    policy = tmp_path / "policy.yaml"
    policy.write_text("jaxport_policy: 1\ncompiles_on: [cuda-h200, cuda-h200.json]\n")
    assert load_policy(policy).compiles_on == ["cuda-h200", f"cuda-{tmp_path / 'h200.json'}"]
    policy.write_text("jaxport_policy: 1\ncompiles_on:\n  - cuda-h200\n  - cuda-gone.json\n")
    with pytest.raises(jaxport.errors.PolicyFileError, match=re.escape(
            f"{policy}:4: compiles_on: 'cuda-gone.json': no such file '{tmp_path / 'gone.json'}'; give a GPU's "
            f"target config (written by 'jaxport target -o FILE' on the GPU), relative to the policy's directory.")):
        load_policy(policy)


def test_the_capture_command_says_no_gpu_here(tmp_path, run_cli):
    if _machine.has_nvidia_gpu():
        pytest.skip("a GPU is here: tests/gpu captures it")
    r = run_cli("target", "-o", tmp_path / "h.json")
    assert (r.exit_code, r.stdout, r.stderr) == (10, "", (
        "error[platform]: no GPU here: JAX sees no NVIDIA GPU on this machine (jax.devices('gpu') is empty), so "
        "there is no target to capture; run 'jaxport target' on the GPU machine, with JAX's CUDA plugin (pip install "
        "'jax[cuda13]').\n"))
    assert not (tmp_path / "h.json").exists()
    r = run_cli("target", "-o", tmp_path / "h.txt")
    assert (r.exit_code, r.stderr) == (2, f"error[usage]: -o {tmp_path / 'h.txt'}: a capture is JSON; give a file "
                                          f"name ending in .json (--target cuda-FILE.json reads it by its suffix). "
                                          f"See 'jaxport target --help'.\n")


def test_the_capture_document_of_a_gpu(tmp_path, monkeypatch):
    """What 'jaxport target' writes, from a device as JAX gives one on a GPU (its target config faked from XLA's spec
    with the real name): read back as the same target."""
    from jax._src.lib import xla_client

    class Device:
        device_kind = "NVIDIA H200"

        def memory_stats(self):
            return {"bytes_limit": 150_000_000_000}

    class Topology:
        target_config = (SPECS / "h200.txtpb").read_text().replace('"NVIDIA H200 141GB HBM3e"', '"NVIDIA H200"')

    monkeypatch.setattr(xla_client, "get_topology_for_devices", lambda devices: Topology)
    document = targets.capture_gpu([Device(), Device()])
    assert {k: document[k] for k in ("format", "device", "model", "compute_capability", "devices", "memory_limit")} \
        == {"format": "jaxport-gpu-target/1", "device": "NVIDIA H200", "model": "NVIDIA H200",
            "compute_capability": "9.0a", "devices": 2, "memory_limit": 150_000_000_000}
    path = tmp_path / "h200.json"
    targets.write_capture(path, document)
    t = targets.target(f"cuda-{path}")
    assert (t.memory_per_device, t.topology, parse_target_config(t.target_config).name) == (
        150_000_000_000, "1x1x2", "NVIDIA H200")


def test_quiet_cuda_starts_the_cpu_alone_only_without_a_gpu(monkeypatch):
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    for plugin, gpu, tpu, expected in ((None, False, False, None), ("jax_plugins.xla_cuda13", True, False, None),
                                       ("jax_plugins.xla_cuda13", False, True, None),
                                       ("jax_plugins.xla_cuda13", False, False, "cpu")):
        monkeypatch.setattr(_machine, "cuda_plugin_module", lambda plugin=plugin: plugin)
        monkeypatch.setattr(_machine, "has_nvidia_gpu", lambda gpu=gpu: gpu)
        monkeypatch.setattr(_machine, "has_tpu_chip", lambda tpu=tpu: tpu)
        _machine.quiet_cuda()
        assert os.environ.get("JAX_PLATFORMS") == expected
        monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    _machine.quiet_cuda()
    assert os.environ["JAX_PLATFORMS"] == "cuda"  # the user's choice stands


def test_the_target_names_complete():
    env = dict(os.environ, _JAXPORT_COMPLETE="bash_complete", COMP_WORDS="jaxport warmup a.jaxport --target cuda-h1",
               COMP_CWORD="4")
    res = subprocess.run([str(Path(sys.executable).parent / "jaxport")], env=env, capture_output=True, text=True)
    assert [line.split(",", 1)[1] for line in res.stdout.splitlines()] == ["cuda-h100", "cuda-h100-8"]


# --- GPU kernels' custom calls ------------------------------------------------------------------------------------


@PALLAS_GPU_EXAMPLES
def test_a_triton_kernel_without_its_allowance_is_refused_at_export_in_one_line(tmp_path, run_cli):
    spec = tmp_path / "spec.yaml"
    spec.write_text((EXAMPLES / "pallas_gpu/triton.yaml").read_text().replace(
        'allow_custom_calls: ["__gpu$xla.gpu.triton"]\n', ""))
    with triton_deprecated():
        r = run_cli("export", EXAMPLES / "pallas_gpu/triton.py:scaled_add", "--shapes", spec, "-o",
                    tmp_path / "t.jaxport")
    assert r.exit_code == 6
    assert r.stderr.splitlines()[-1] == (
        f"error[policy]: triton.py:scaled_add: the program calls a Pallas Triton kernel ({TRITON} at "
        f"triton.py:28:15), which JAX does not guarantee stable: Triton promises no compatibility of its IR across "
        f"releases (JAX's own back-compatibility test of it is skipped), so the artifact runs only with the jaxlib "
        f"that exported it. If you ship the artifact with what runs it, allow it with 'allow_custom_calls: "
        f"[{TRITON}]' in the spec or --allow-custom-call '{TRITON}'.")


@PALLAS_GPU_EXAMPLES
def test_gpu_kernels_exported_on_a_cpu_host_hold_their_custom_calls(tmp_path):
    import warnings

    from jaxport.run.load import runnable_program

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        triton = jaxport.export(str(EXAMPLES / "pallas_gpu/triton.py:scaled_add"),
                                str(EXAMPLES / "pallas_gpu/triton.yaml"), output=tmp_path / "t.jaxport").path
    mosaic = jaxport.export(str(EXAMPLES / "pallas_gpu/mosaic.py:scaled_add"),
                            str(EXAMPLES / "pallas_gpu/mosaic.yaml"), output=tmp_path / "m.jaxport").path
    with jaxport.open_artifact(mosaic) as art:
        assert tuple(art.model.functions["scaled_add"].platforms) == ("cuda",)
        runnable_program(art, "scaled_add")  # mosaic_gpu_v2 is on JAX's stable list: nothing to allow
    with jaxport.open_artifact(triton) as art, pytest.raises(PolicyError) as e:
        runnable_program(art, "scaled_add")
    assert str(e.value).startswith(f"{triton}: function 'scaled_add': the program calls a Pallas Triton kernel "
                                   f"({TRITON} at triton.py:28:15)")
    assert "\n" not in str(e.value)


def test_cudnn_attention_traced_without_cudnn_says_to_use_xlas(tmp_path, run_cli):
    (tmp_path / "att.py").write_text("import jax\n\ndef attend(q, k, v):\n    return jax.nn.dot_product_attention("
                                     "q, k, v, implementation='cudnn')\n")
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs: ["bf16[1, 128, 4, 64]", "bf16[1, 128, 4, 64]", '
                                        '"bf16[1, 128, 4, 64]"]\nplatforms: [cuda]\n')
    r = run_cli("export", tmp_path / "att.py:attend", "--shapes", tmp_path / "spec.yaml", "-o", tmp_path / "a.jaxport")
    assert r.exit_code == 5
    assert ('What to do: implementation="cudnn" needs cuDNN wherever the program is traced and run, and its custom '
            'call is not one JAX keeps stable; export with implementation="xla" (portable, on every platform), or on '
            'a machine with cuDNN with allow_custom_calls naming its __cudnn$fmha target.') in r.stderr


def test_cudnn_attention_in_a_program_is_refused_naming_xlas():
    from jaxport.program.checks import GPU_KERNELS, gpu_kernel

    assert gpu_kernel("__cudnn$fmhaSoftmaxDropout") == GPU_KERNELS["__cudnn$fmha*"]
    assert 'implementation="xla"' in GPU_KERNELS["__cudnn$fmha*"][1]
    assert gpu_kernel("mosaic_gpu_v2") is None and gpu_kernel("cusolver_potrf_ffi") is None


def test_a_pallas_gpu_kernel_lowered_without_a_gpu_says_how(tmp_path, run_cli):
    (tmp_path / "k.py").write_text(
        "import jax\nfrom jax.experimental import pallas as pl\nfrom jax.experimental.pallas import triton as plt\n\n"
        "def _k(x_ref, o_ref):\n    o_ref[...] = x_ref[...] * 2\n\n"
        "def f(x):\n    return pl.pallas_call(_k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), "
        "compiler_params=plt.CompilerParams())(x)\n")
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs: ["f32[16, 128]"]\nplatforms: [cuda]\n')
    with triton_deprecated():
        r = run_cli("export", tmp_path / "k.py:f", "--shapes", tmp_path / "spec.yaml", "-o", tmp_path / "k.jaxport")
    if JAX < (0, 11):  # an older JAX lowers the kernel without a GPU: the allowlist refuses its Triton call instead
        assert r.exit_code == 6 and r.stderr.startswith("error[policy]: k.py:f: the program calls a Pallas Triton "
                                                        "kernel")
        return
    assert r.exit_code == 5
    assert "What to do: on a machine without a GPU, lower the kernel for a named one: call it under " \
           "jax.sharding.use_abstract_mesh(" in r.stderr and "examples/pallas_gpu/gpu.py" in r.stderr


# --- start-up settings a compile for a target refuses, each named ---------------------------------------------------

@pytest.mark.libtpu
@pytest.mark.parametrize("env,said", [
    ({"LIBTPU_INIT_ARGS": "--bogus_flag=1"},
     "libtpu refuses its settings (LIBTPU_INIT_ARGS is '--bogus_flag=1'): Unknown command line flag 'bogus_flag', "
     "and would end the process; correct it or unset LIBTPU_INIT_ARGS."),
    ({"TPU_PROCESS_BOUNDS": "1,x,1"},
     "libtpu refuses its settings (TPU_PROCESS_BOUNDS is '1,x,1'): Illegal value '1,x,1' specified for flag "
     "'deepsea_host_bounds'"),
])
def test_libtpu_settings_it_refuses_end_a_tpu_target_naming_the_variable_whatever_jax_platforms_says(
        mlp_path, tmp_path, env, said):
    art = tmp_path / "mlp.jaxport"
    jaxport.export(str(EXAMPLES / "mlp/model.py:predict"), str(EXAMPLES / "mlp/spec.yaml"), output=art,
                   platforms=["cpu", "tpu"])
    r = _run("warmup", art, "--target", "tpu-v5e", "--dim", "batch=1", "--cache-dir", tmp_path / "c",
             env={"JAX_PLATFORMS": "cpu", **env})
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"error[usage]: --target tpu-v5e: {said}")


@pytest.mark.libtpu
def test_an_undecodable_value_is_named_by_its_variable(tmp_path):
    art = tmp_path / "mlp.jaxport"
    jaxport.export(str(EXAMPLES / "mlp/model.py:predict"), str(EXAMPLES / "mlp/spec.yaml"), output=art,
                   platforms=["cpu", "tpu"])
    environ = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO),
               "LIBTPU_INIT_ARGS": "--xla_tpu_enable_latency_hiding_scheduler=true"}
    environ = {k: v for k, v in environ.items() if k != "TPU_PROCESS_BOUNDS"}
    env_bytes = {os.fsencode(k): os.fsencode(v) for k, v in environ.items()}
    env_bytes[b"TPU_PROCESS_BOUNDS"] = b"\xff"
    r = subprocess.run([*JAXPORT, "warmup", str(art), "--target", "tpu-v5e", "--dim", "batch=1", "--cache-dir",
                        str(tmp_path / "c")], capture_output=True, text=True, timeout=600, env=env_bytes)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error[usage]: --target tpu-v5e: libtpu refuses its settings (TPU_PROCESS_BOUNDS is "
                               "'\\udcff'): Illegal value")
    assert r.stderr.rstrip().endswith("correct it or unset TPU_PROCESS_BOUNDS.")


def test_gpu_facts_read_versions_from_the_plugin_only_on_a_gpu(monkeypatch):
    monkeypatch.setattr(_machine, "loaded_versions", lambda: {"cuda_runtime": "13.0", "cudnn": "9.12.0",
                                                          "driver": "13.0"})
    monkeypatch.setattr(_machine, "plugin_text", lambda: "jax-cuda13-pjrt 0.11.2")
    config = (SPECS / "h200.txtpb").read_text()
    deviceless = _machine.gpu_facts(config, "NVIDIA H200 141GB HBM3e", deviceless=True, autotune_level=4)
    assert (deviceless.device, deviceless.cudnn, deviceless.build) == ("NVIDIA H200", "9.10.0", "deviceless")
    on_gpu = _machine.gpu_facts(config.replace("9.10.0", "9.9.0"), "NVIDIA H200", deviceless=False, autotune_level=4)
    assert (on_gpu.cudnn, on_gpu.cuda_runtime, on_gpu.build) == ("9.12.0", "13.0", "autotuned")
    assert _machine.gpu_facts("", "NVIDIA H200", deviceless=False, autotune_level=0, cores=132).build == "untuned"


# --- retune: executables compiled without the GPU, compiled again where they run ------------------------------------


def _cpu_shipped(mlp_path, tmp_path):
    cache = tmp_path / "cache"
    r = _run("warmup", mlp_path, "--target", "cpu", "--dim", "batch=8", "--cache-dir", cache)
    assert r.returncode == 0, r.stderr
    return cache


def test_retune_finds_the_signatures_run_from_deviceless_gpu_records(mlp_path, tmp_path):
    import numpy as np

    from jaxport.run.cache import compilation_cache
    from jaxport.run.compile.retune import deviceless_signatures

    cache = _cpu_shipped(mlp_path, tmp_path)
    (record,) = cache.glob("jaxport-executable-*.bin")  # beside it, the program check's verdict
    with compilation_cache(cache):
        loaded = jaxport.load(mlp_path)
        loaded.run({"x": np.ones((8, 784), np.float32)})
    assert loaded.compilations[0].shipped and deviceless_signatures(loaded, cache) == []  # a CPU record: as it is
    data = record.read_bytes()
    start = len(executables.MAGIC) + 8
    length = int.from_bytes(data[len(executables.MAGIC):start], "little")
    header = json.loads(data[start:start + length])
    header["facts"]["gpu"] = _gf().to_json()  # as a deviceless build for a GPU records it
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    (cache / "gpu.bin").write_bytes(data[:len(executables.MAGIC)] + len(raw).to_bytes(8, "little") + raw +
                                    data[start + length:])
    (cache / "gpu.bin").rename(cache / record.name.replace(record.name[-20:-4], "0" * 16))
    assert deviceless_signatures(loaded, cache) == [(((8, 784), "float32"),)]


def test_retune_swaps_a_recompiled_executable_into_the_live_function(mlp_path, tmp_path, monkeypatch):
    import numpy as np

    from jaxport.run.cache import compilation_cache
    from jaxport.run.compile import retune as retune_mod

    cache = _cpu_shipped(mlp_path, tmp_path)
    records = sorted(p.name for p in cache.iterdir())
    x = np.random.default_rng(0).standard_normal((8, 784)).astype(np.float32)
    with compilation_cache(cache):
        loaded = jaxport.load(mlp_path)
        before = np.asarray(loaded(x))
    key = loaded.compiled_signatures[0]
    shipped = loaded.backend.direct(key).func  # the shipped executable's call
    monkeypatch.setattr(retune_mod, "deviceless_signatures", lambda loaded, directory: [key])
    swapped = []
    done = retune_mod.retune(loaded, cache, background=True, on_swap=swapped.append)
    assert done.wait(120) and done.notes == [] and swapped == [key]
    (r,) = done.retuned
    assert (r.key, r.build, r.record) == (key, "unknown", None)  # not a GPU: nothing autotuned, no record written
    assert loaded.backend.direct(key).func is not shipped  # the live function runs the new one
    np.testing.assert_array_equal(np.asarray(loaded(x)), before)
    assert sorted(p.name for p in cache.iterdir()) == records


def test_warmup_retune_says_when_nothing_ran_from_a_deviceless_executable(mlp_path, tmp_path):
    cache = _cpu_shipped(mlp_path, tmp_path)
    r = _run("warmup", mlp_path, "--dim", "batch=8", "--cache-dir", cache, "--retune", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["retuned"] == []
    r = _run("warmup", mlp_path, "--dim", "batch=8", "--cache-dir", cache, "--retune")
    assert "retune: no shape ran from an executable compiled without the GPU; nothing compiled again" in r.stdout
    r = _run("warmup", mlp_path, "--target", "cpu", "--retune", "--dim", "batch=8")
    assert (r.returncode, r.stderr.splitlines()[-1]) == (2, (
        "error[usage]: --retune compiles again on this machine what was shipped for it; leave out --target (or run "
        "--retune where the executables run). See 'jaxport warmup --help'."))


def test_the_capture_commands_json_follows_its_schema(tmp_path, run_cli, monkeypatch):
    import jsonschema

    def fake_capture():
        return {"format": targets.CAPTURE_FORMAT, "device": "NVIDIA H200", "model": "NVIDIA H200",
                "compute_capability": "9.0a", "devices": 1, "memory_limit": 150_000_000_000,
                "target_config": (SPECS / "h200.txtpb").read_text(), "python": "3.12.3",
                "versions": {"jax": "0.11.2", "cudnn": "9.12.0", "ptxas": ""}}

    monkeypatch.setattr(targets, "capture_gpu", fake_capture)
    out = tmp_path / "h200.json"
    r = run_cli("target", "-o", out, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    schema = json.loads((REPO / "specs/schemas/cli/target.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(summary)
    assert summary["target"] == f"cuda-{out}" and json.loads(out.read_text())["device"] == "NVIDIA H200"
    r = run_cli("target", "-o", out)
    assert r.stdout.startswith(f"Captured NVIDIA H200 (compute capability 9.0a, 1 on this host) in {out}: compile "
                               f"for it elsewhere with --target cuda-{out}")


def test_serve_retune_swaps_each_model_once_listening_and_says_so(monkeypatch, tmp_path):
    import threading
    from types import SimpleNamespace

    from jaxport.run.compile.retune import Retuned, Retuning
    from jaxport.serve.transport import models

    refreshed, said = [], []
    key = (((8, 784), "float32"),)

    def fake_retune(loaded, directory, *, on_swap):
        assert directory == tmp_path
        on_swap(key)
        done = Retuning([key], [Retuned(key, 1.25, "autotuned", "jaxport-executable-x.bin")])
        done.done.set()
        return done

    monkeypatch.setattr(models, "retune", fake_retune)
    compiled = SimpleNamespace(refresh=refreshed.append)
    model = SimpleNamespace(spec=SimpleNamespace(name="mlp", version="1"),
                            batched=SimpleNamespace(loaded=object(), compiled=compiled))
    listening = threading.Event()
    models._retune_when_listening([model], listening, tmp_path, said.append)
    assert refreshed == [] and said == []  # nothing before the server listens
    listening.set()
    for _ in range(200):
        if said:
            break
        threading.Event().wait(0.01)
    assert refreshed == [key]
    assert said == ["mlp version 1: 1 executable compiled without the GPU replaced, autotuned here in 1.2 s, while "
                    "serving"]


@pytest.mark.parametrize("spec", ["gpu/linalg.yaml", "gpu/transformer.yaml", "pallas_gpu/triton.yaml",
                                  "pallas_gpu/mosaic.yaml"])
def test_the_gpu_tiers_specs_follow_the_schema(spec):
    """The GPU tier's fixtures are not among the pinned examples (spec*.yaml: they need JAX 0.11.2 or later); their
    specs still follow the spec schema and parse."""
    import jsonschema
    import yaml

    from jaxport.spec import load_spec

    schema = json.loads((REPO / "specs/schemas/spec.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load((EXAMPLES / spec).read_text()))
    assert load_spec(EXAMPLES / spec).platforms
