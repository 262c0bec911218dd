"""warmup and check --target cuda-*: compiled here, a CPU-only machine, for NVIDIA GPUs (JAX's CUDA plugin, ptxas and
libdevice from PyPI), the examples and Pallas GPU kernels included; records keyed so that a GPU of the model uses them;
what does not fit the GPU refused with the sizes; the plugin and toolchain refused when they are not the right ones."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import jaxport
from jaxport._machine import GpuFacts
from jaxport.errors import PlatformError
from jaxport.run import executables
from jaxport.run.compile import targets
from jaxport.run.compile.aot import compile_targets
from tests.support import EXAMPLES, REPO

JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]
#: What JAX may use on one H200 as XLA's spec gives it: 3/4 of its 141 GiB (JAX preallocates that share).
H200_LIMIT = int(151397597184 * 0.75)
TRITON = "__gpu$xla.gpu.triton"


def _run(*args, env=None):
    return subprocess.run([*JAXPORT, *map(str, args)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The examples the GPU tier runs, exported here: the MLP with bound weights, the bf16 transformer and the linear
    algebra for [cpu, cuda]; the Pallas Triton and Mosaic GPU kernels for cuda."""
    import warnings

    out = tmp_path_factory.mktemp("cuda")
    made = {}
    warnings.filterwarnings("ignore", "The Pallas Triton backend is deprecated", DeprecationWarning)  # JAX 0.12's
    for name, entry, spec, platforms in (
            ("mlp", "mlp/model.py:apply", "mlp/spec-bound.yaml", ["cpu", "cuda"]),
            ("transformer", "gpu/transformer.py:apply", "gpu/transformer.yaml", None),
            ("linalg", "gpu/linalg.py:solve", "gpu/linalg.yaml", None),
            ("triton", "pallas_gpu/triton.py:scaled_add", "pallas_gpu/triton.yaml", None),
            ("mosaic", "pallas_gpu/mosaic.py:scaled_add", "pallas_gpu/mosaic.yaml", None)):
        made[name] = jaxport.export(str(EXAMPLES / entry), str(EXAMPLES / spec), output=out / f"{name}.jaxport",
                                    **({"platforms": platforms} if platforms else {})).path
    return made


def _records(cache: Path) -> list[Path]:
    return sorted(cache.glob("jaxport-executable-*.bin"))


@pytest.mark.parametrize("name,dims,allow", [
    ("mlp", ["--dim", "batch=1,64"], []),
    ("transformer", ["--dim", "batch=1,8"], []),
    ("linalg", ["--dim", "batch=1,16"], []),
    ("triton", [], ["--allow-custom-call", TRITON]),
    ("mosaic", [], []),
])
def test_the_examples_and_pallas_gpu_kernels_compile_for_an_h200_here(built, run_cli, tmp_path, name, dims, allow):
    cache = tmp_path / "cache"
    r = run_cli("warmup", built[name], "--target", "cuda-h200", *dims, *allow, "--cache-dir", cache, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)["targets"][0]
    assert report["target"] == {"name": "cuda-h200", "platform": "cuda", "topology": "1x1x1",
                                "description": "one NVIDIA H200 (141 GB) on one host (sm_90a, 132 SMs; XLA's spec "
                                               "(h200.txtpb))", "memory_per_device": H200_LIMIT,
                                "source": "XLA's spec (h200.txtpb)"}
    # the compile-only client's build: the device of XLA's spec (JAX 0.12.0), the spec's CUDA runtime (JAX 0.12.1 on)
    assert report["platform_version"] in ("NVIDIA H200 141GB HBM3e", "cuda 12080")
    assert report["notes"][-1].startswith("cubins written by ptxas 13.0.")
    for b in report["buckets"]:
        assert b["ok"] and b["fits"] is True and b["memory_limit"] == H200_LIMIT and b["executable"], b
    assert len(_records(cache)) == len(report["buckets"])
    for path in _records(cache):
        facts = executables.read_record(path)[0].facts
        assert facts.platform == "gpu" and facts.device_kinds == ("NVIDIA H200 141GB HBM3e",)
        gpu = facts.gpu
        assert (gpu.compute_capability, gpu.device, gpu.cores, gpu.build) == ("9.0a", "NVIDIA H200", "132",
                                                                               "deviceless")
        assert (gpu.cuda_runtime, gpu.cudnn, gpu.driver) == ("12.8.0", "9.10.0", "13.0.0")  # XLA's spec says so
        assert gpu.plugin.startswith("jax-cuda13-pjrt ") and gpu.ptxas.startswith("13.0.")


def test_a_triton_kernel_without_the_callers_allowance_is_refused_in_one_line(built, run_cli, tmp_path):
    r = run_cli("warmup", built["triton"], "--target", "cuda-h200", "--cache-dir", tmp_path / "cache")
    assert r.exit_code == 6
    assert r.stderr == (
        f"error[policy]: {built['triton']}: function 'scaled_add': the program calls a Pallas Triton kernel "
        f"({TRITON} at triton.py:28:15), which JAX does not guarantee stable: Triton promises no compatibility of its "
        f"IR across releases (JAX's own back-compatibility test of it is skipped), so the artifact runs only with "
        f"the jaxlib that exported it. The artifact's own list of allowed targets grants nothing: if you trust it "
        f"and this process provides the kernel, allow it with --allow-custom-call '{TRITON}' "
        f"(allow_custom_calls=['{TRITON}'] in Python).\n")


def test_a_program_over_the_gpus_memory_is_refused_with_the_sizes(tmp_path, run_cli):
    (tmp_path / "model.py").write_text("def f(x):\n    return x * 2\n")
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs:\n  - "f32[131072, 131072]"\nplatforms: [cuda]\n')
    path = jaxport.export(str(tmp_path / "model.py:f"), str(tmp_path / "spec.yaml"),
                          output=tmp_path / "big.jaxport").path
    why = ("needs 128.00 GiB of device memory per device (arguments 64.00 GiB, outputs 64.00 GiB), more than the "
           "105.75 GiB the target has")
    r = run_cli("check", path, "--target", "cuda-h200", "--json")
    assert r.exit_code == 14
    report = json.loads(r.stdout)
    assert report["violations"] == [{"rule": "compiles_on", "function": "f", "message":
                                     f"function 'f' at its static shapes does not fit for cuda-h200: {why}"}]
    bucket = report["targets"][0]["buckets"][0]
    assert (bucket["compiled"], bucket["fits"], bucket["memory_needed"]) == (True, False, 128 << 30)
    r = run_cli("warmup", path, "--target", "cuda-h200", "--cache-dir", tmp_path / "cache")
    assert r.exit_code == 10
    assert r.stderr.endswith(f"error[platform]: {path} for cuda-h200: 0 of 1 bucket compiled; function 'f' at "
                             f"static shapes: {why}\n")
    assert _records(tmp_path / "cache") == []


def test_a_policy_gates_compiles_on_a_gpu(built, tmp_path, run_cli):
    policy = tmp_path / "policy.yaml"
    policy.write_text("jaxport_policy: 1\ncompiles_on:\n  targets: [cuda-h200, cpu]\n  dims: {batch: [2, 32]}\n")
    r = run_cli("check", built["mlp"], "--policy", policy, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert [t["target"]["name"] for t in report["targets"]] == ["cuda-h200", "cpu"]
    assert [b["dims"] for b in report["targets"][0]["buckets"]] == [{"batch": 2}, {"batch": 32}]


def _captured(tmp_path: Path, **versions) -> Path:
    """A capture as 'jaxport target' writes it on an H200: XLA's spec with the name the real device gives."""
    spec = (targets.__file__.rsplit("/", 1)[0] + "/gpu/h200.txtpb")
    config = Path(spec).read_text().replace('"NVIDIA H200 141GB HBM3e"', '"NVIDIA H200"')
    path = tmp_path / "h200.json"
    targets.write_capture(path, {"format": targets.CAPTURE_FORMAT, "device": "NVIDIA H200", "model": "NVIDIA H200",
                                 "compute_capability": "9.0a", "devices": 1, "memory_limit": 140 << 30,
                                 "target_config": config, "versions": versions, "python": "3.12.3"})
    return path


def test_a_captured_gpu_and_xlas_spec_name_the_same_records(built, tmp_path, run_cli):
    """The designed match (not yet seen on a GPU): a record built from XLA's spec ("NVIDIA H200 141GB HBM3e") and one
    built from the real device's config ("NVIDIA H200") have one name, the model's, so a GPU of it finds either."""
    capture = _captured(tmp_path)
    spec_cache, captured_cache = tmp_path / "spec", tmp_path / "captured"
    for target, cache in (("cuda-h200", spec_cache), (f"cuda-{capture}", captured_cache)):
        r = run_cli("warmup", built["mlp"], "--target", target, "--dim", "batch=8", "--cache-dir", cache, "--json")
        assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)["targets"][0]
    assert report["target"]["memory_per_device"] == 140 << 30 and report["target"]["source"] == str(capture)
    assert [p.name for p in _records(spec_cache)] == [p.name for p in _records(captured_cache)]
    built_facts = executables.read_record(_records(captured_cache)[0])[0].facts
    assert built_facts.device_kinds == ("NVIDIA H200",) and built_facts.gpu.device == "NVIDIA H200"


def _on_the_gpu(facts, **gpu) -> object:
    """The facts a process on an H200 has for the same compilation (as designed; not yet seen on one): its own device
    name, platform build and topology, the CUDA it loads."""
    here = GpuFacts(**{**facts.gpu.to_json(), "cuda_runtime": "13.0", "cudnn": "9.12.0", "driver": "13.0",
                       "ptxas": "", "build": "autotuned", **gpu})
    return dataclasses.replace(facts, platform_version="PJRT C API\ncuda 13000", device_kinds=("NVIDIA H200",),
                               topology="123", gpu=here)


def test_a_deviceless_record_is_used_on_a_gpu_of_its_model_and_refused_naming_the_versions(built, tmp_path, run_cli):
    cache = tmp_path / "cache"
    assert run_cli("warmup", built["mlp"], "--target", "cuda-h200", "--dim", "batch=8", "--cache-dir",
                   cache).exit_code == 0
    (path,) = _records(cache)
    record = executables.read_record(path)[0]
    here = _on_the_gpu(record.facts)
    program, key = record.header["program"], (((8, 784), "float32"),)
    offer = executables.shipped(cache, program, key)
    assert offer(here, lambda blob: ("loaded", len(blob))) == ("loaded", len(record.blob))
    assert offer.used == path and offer.notes == []
    for change, said in (
            ({"cudnn": "9.8.0"}, "cuDNN 9.10.0 assumed by the build (here: 9.8.0)"),
            ({"cuda_runtime": "12.4"}, "CUDA runtime 12.8.0 assumed by the build (here: 12.4)"),
            ({"driver": "12.9"}, "CUDA driver 13.0.0 assumed by the build (here: 12.9); cubins written by ptxas "
                                 f"{record.facts.gpu.ptxas}, newer than the driver here (CUDA 12.9)")):
        offer = executables.shipped(cache, program, key)
        assert offer(_on_the_gpu(record.facts, **change), lambda blob: "loaded") is None
        assert offer.notes == [f"the cache holds an executable of this program and shape built for another machine "
                               f"or software ({said}); compiling here instead (jaxport warmup --target builds one "
                               f"for this machine)."]
    other = dataclasses.replace(_on_the_gpu(record.facts), device_kinds=("NVIDIA H100 80GB HBM3",))
    other = dataclasses.replace(other, gpu=dataclasses.replace(other.gpu, device="NVIDIA H100"))
    offer = executables.shipped(cache, program, key)
    assert offer(other, lambda blob: "loaded") is None
    assert offer.notes == ["the cache holds an executable of this program and shape built for another machine or "
                           "software (GPU NVIDIA H200 (here: NVIDIA H100)); compiling here instead (jaxport warmup "
                           "--target builds one for this machine)."]


def test_the_plugin_of_another_release_is_refused_naming_both(built, monkeypatch):
    jaxlib = targets.importlib.metadata.version("jaxlib")
    monkeypatch.setattr(targets, "plugin_versions", lambda: {"jax-cuda13-pjrt": "0.99.0",
                                                              "jax-cuda13-plugin": jaxlib})
    with pytest.raises(PlatformError, match=re.escape(
            f"--target cuda-h200: the CUDA plugin (jax-cuda13-pjrt 0.99.0) is not of this jaxlib's release ({jaxlib}): "
            f"XLA's GPU compiler and jaxlib are built together; install the matching one with pip install "
            f"'jax-cuda13-pjrt=={jaxlib}' 'jax-cuda13-plugin=={jaxlib}' (or pip install 'jaxport[cuda]').")):
        compile_targets(built["mlp"], ["cuda-h200"], dims={"batch": [8]})


def test_without_ptxas_and_libdevice_from_pypi_it_says_what_to_install(built, monkeypatch):
    monkeypatch.delenv("CUDA_ROOT", raising=False)
    monkeypatch.setattr(targets, "cuda_data_dir", lambda: None)
    with pytest.raises(PlatformError, match=re.escape(
            "--target cuda-h200: compiling for an NVIDIA GPU needs ptxas and libdevice from PyPI, and ptxas "
            "(nvidia-cuda-nvcc) and libdevice (nvidia-nvvm) are not installed; install them with pip install "
            "'jaxport[cuda]' (a CUDA toolkit elsewhere is used only where CUDA_ROOT names it).")):
        compile_targets(built["mlp"], ["cuda-h200"], dims={"batch": [8]})


def test_jax_platforms_naming_cuda_on_a_cpu_host_is_named(built, tmp_path):
    r = _run("warmup", built["mlp"], "--target", "cuda-h200", "--dim", "batch=8", "--cache-dir", tmp_path / "c",
             env={"JAX_PLATFORMS": "cuda,cpu"})
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[-1] == (
        "error[usage]: --target cuda-h200: JAX_PLATFORMS is 'cuda,cpu', which has JAX's CUDA plugin start for a GPU "
        "this machine does not have (it then describes none to compile for); set JAX_PLATFORMS=cpu, or unset it.")


def test_a_sharded_artifact_compiles_for_eight_gpus_and_not_for_one(tmp_path, run_cli):
    path = jaxport.export(str(EXAMPLES / "sharded/model.py:predict"), str(EXAMPLES / "sharded/spec.yaml"),
                          output=tmp_path / "sharded.jaxport", platforms=["cpu", "cuda"]).path
    r = run_cli("check", path, "--target", "cuda-h200-8", "--dim", "b=2", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["targets"][0]["target"]["topology"] == "1x1x8"
    r = run_cli("check", path, "--target", "cuda-h200", "--dim", "b=2")
    assert r.exit_code == 10
    assert r.stderr == (f"error[platform]: {path}: function 'predict' is sharded across 8 devices (mesh data=4 x "
                        f"model=2), and cuda-h200 has 1; choose a target with at least 8.\n")


def test_the_shipped_specs_are_xlas_as_the_installed_plugin_embeds_them():
    """jaxport/run/compile/gpu/*.txtpb are what scripts/gpu_specs.py extracts from this plugin (rerun it when a JAX
    release changes XLA's specs)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gpu_specs
    finally:
        sys.path.pop(0)
    import importlib.util

    spec = importlib.util.find_spec("jax_plugins.xla_cuda13")
    library = Path(list(spec.submodule_search_locations)[0]) / "xla_cuda_plugin.so"
    embedded = gpu_specs.embedded_specs(library)
    for file, device in gpu_specs.SPECS.items():
        shipped = (Path(targets.__file__).parent / "gpu" / file).read_text()
        assert shipped.split("\n", 2)[2] == embedded[device].decode()


def test_compiling_for_a_gpu_you_do_not_have_runs_as_written(tmp_path):
    """The README section's export, check and warmup lines as written, in a copy of the examples (its serve line
    runs on a GPU host: tests/gpu covers what it relies on)."""
    import shlex
    import shutil

    readme = (REPO / "README.md").read_text().split("## Compiling for a GPU you do not have", 1)[1]
    block = re.search(r"```sh\n(.*?)```", readme, re.S).group(1)
    lines = [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    assert [shlex.split(line)[1] for line in lines] == ["export", "check", "warmup", "serve"]
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    for line in lines[:3]:
        res = subprocess.run([str(Path(sys.executable).with_name("jaxport")), *shlex.split(line)[1:]], cwd=tmp_path,
                             capture_output=True, text=True)
        assert res.returncode == 0, f"{line}\n{res.stdout}\n{res.stderr}"
    assert len(list((tmp_path / "gpu-cache").glob("jaxport-executable-*.bin"))) == 3
