"""On an NVIDIA GPU: the README's workflow natively; artifacts exported on a machine without a GPU for ``[cpu, cuda]``
(and the Pallas GPU kernels for ``cuda``) against that CPU's goldens; ``verify`` on both platforms; executables
compiled there without a GPU loaded here with no compile; the GPU captured as a target (see conftest.py for where the
build comes from). Tolerances, stated per artifact below: float32 matrix products run at JAX's default precision on a
GPU (TF32 on Hopper: about three digits), bf16 programs at bf16's."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.run.cache import compilation_cache
from jaxport.run.executables import read_record
from tests.support import EXAMPLES

TRITON = "__gpu$xla.gpu.triton"
#: The largest relative L2 error allowed against the CPU's outputs, by artifact: TF32 matrix products (mlp, linalg:
#: a aᵀ is one), bf16 throughout (transformer), elementwise kernels in float32 (libdevice's tanh and exp).
TOLERANCE = {"mlp": 1e-2, "mlp-bound": 1e-2, "transformer": 3e-2, "linalg": 1e-2, "triton": 1e-5, "mosaic": 1e-5}
ALLOW = {"triton": [TRITON]}


def _module(relative: str):
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_").removesuffix(".py"), EXAMPLES / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _relative(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def _goldens(build: Path) -> list[tuple[str, str]]:
    return sorted(tuple(p.stem.rsplit("-", 1)) for p in (build / "goldens").glob("*.npz"))


def _golden(build: Path, name: str, key: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    data = np.load(build / "goldens" / f"{name}-{key}.npz")
    return ({k[3:]: data[k] for k in data.files if k.startswith("in/")},
            {k[4:]: data[k] for k in data.files if k.startswith("out/")})


def test_the_readme_workflow_runs_on_the_gpu(run_cli, tmp_path, monkeypatch):
    import jax

    monkeypatch.chdir(tmp_path)
    r = run_cli("export", EXAMPLES / "mlp/model.py:predict", "--shapes", EXAMPLES / "mlp/spec.yaml",
                "-o", "mlp.jaxport")
    assert r.exit_code == 0, r.stderr
    shown = json.loads(run_cli("inspect", "mlp.jaxport", "--json").stdout)
    assert shown["functions"]["predict"]["platforms"] == ["cuda"]
    r = run_cli("call", "mlp.jaxport", "--inputs", EXAMPLES / "mlp/x.npy", "-o", "out.npy", "--no-cache")
    assert r.exit_code == 0, r.stderr
    x = np.load(EXAMPLES / "mlp/x.npy")
    live = np.asarray(jax.jit(_module("mlp/model.py").predict)(x))
    np.testing.assert_allclose(np.load("out.npy"), live, rtol=1e-5, atol=1e-5)  # one GPU, one program
    r = run_cli("verify", "mlp.jaxport", "--root", EXAMPLES / "mlp")
    assert r.exit_code == 0, r.stdout + r.stderr
    r = run_cli("warmup", "mlp.jaxport", "--dim", "batch=1,4,32", "--cache-dir", "xla-cache", "--json")
    assert r.exit_code == 0, r.stderr
    r = run_cli("call", "mlp.jaxport", "--inputs", EXAMPLES / "mlp/x.npy", "--cache-dir", "xla-cache", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["timings"]["executable"] == "cache"


def test_cpu_host_artifacts_match_the_cpu_goldens(build, report):
    errors = {}
    for name, key in _goldens(build):
        inputs, outputs = _golden(build, name, key)
        with compilation_cache(None):  # compiled here
            loaded = jaxport.load(build / f"{name}.jaxport", allow_custom_calls=ALLOW.get(name))
            run = loaded.run(inputs)
        assert loaded.platform == "gpu" or loaded.platform == "cuda", loaded.platform
        got = dict(run.leaves)
        for out, want in outputs.items():
            if name == "linalg" and out == "r":  # QR's signs are the library's choice (LAPACK, cuSOLVER)
                got[out], want = np.abs(got[out]), np.abs(want)
            errors[f"{name}-{key}/{out}"] = _relative(got[out], want)
    report("goldens", {"relative_l2": errors, "tolerance": TOLERANCE})
    over = {k: v for k, v in errors.items() if v > TOLERANCE[k.rsplit("-", 1)[0]]}
    assert over == {}, over


@pytest.mark.parametrize("name,root", [("mlp", "mlp"), ("mlp-bound", "mlp")])
def test_cpu_host_artifacts_verify_on_both_platforms(build, run_cli, name, root):
    r = run_cli("verify", build / f"{name}.jaxport", "--platform", "cpu", "--platform", "cuda", "--json",
                "--root", EXAMPLES / root, "--rtol", "1e-2", "--atol", "1e-2")
    assert r.exit_code == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["passed"] is True and {c["platform"] for c in report["cases"]} == {"cpu", "cuda"}


def _cache(build: Path, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    shutil.copytree(build / "cache", cache)
    cache.chmod(0o700)
    for record in cache.iterdir():
        record.chmod(0o600)
    return cache


def test_executables_built_without_a_gpu_run_here_with_no_compile(build, tmp_path, report):
    """Each executable compiled deviceless for cuda-h200 is loaded (0 compiles) and computes what compiling here
    computes (within the tolerance: autotuning here may pick other GEMM algorithms); where one is not used, the
    fallback's note says why, and the test fails with it."""
    cache = _cache(build, tmp_path)
    found, notes = {}, {}
    for name, key in _goldens(build):
        inputs, _ = _golden(build, name, key)
        with compilation_cache(None):
            expected = dict(jaxport.load(build / f"{name}.jaxport", allow_custom_calls=ALLOW.get(name))
                            .run(inputs).leaves)
        with compilation_cache(cache):
            loaded = jaxport.load(build / f"{name}.jaxport", allow_custom_calls=ALLOW.get(name))
            run = loaded.run(inputs)
        found[f"{name}-{key}"] = {"shipped": run.compilation.shipped, "load_s": run.compilation.seconds,
                                  "difference": max(_relative(v, expected[k]) for k, v in run.leaves)}
        if not run.compilation.shipped:
            notes[f"{name}-{key}"] = loaded.notes
    report("shipped", {"executables": found, "notes": notes})
    assert notes == {}
    assert {k: v["difference"] for k, v in found.items() if v["difference"] > 1e-3} == {}


def test_warmup_and_call_say_the_executables_were_shipped(build, run_cli, tmp_path):
    cache = _cache(build, tmp_path)
    r = run_cli("warmup", build / "mlp.jaxport", "--dim", "batch=1,8,64", "--cache-dir", cache, "--json")
    assert r.exit_code == 0, r.stderr
    assert [s["executable"] for s in json.loads(r.stdout)["signatures"]] == ["shipped"] * 3
    r = run_cli("call", build / "mlp.jaxport", "--random", "--dim", "batch=8", "--cache-dir", cache, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["timings"]["executable"] == "shipped"


def test_a_record_assuming_a_newer_cudnn_falls_back_naming_both_versions(build, tmp_path):
    cache = _cache(build, tmp_path)
    with jaxport.open_artifact(build / "mlp.jaxport") as art:
        program = art.model.members[art.model.functions["predict"].payload].sha256
    for record in list(cache.iterdir()):
        found, _ = read_record(record)
        if found is None or found.header["program"] != program:
            record.unlink()
            continue
        header = dict(found.header)
        header["facts"] = {**header["facts"], "gpu": {**header["facts"]["gpu"], "cudnn": "99.0.0"}}
        raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        data = record.read_bytes()
        start = len(b"JAXPORT-EXECUTABLE/1\n") + 8
        length = int.from_bytes(data[start - 8:start], "little")
        record.write_bytes(data[:start - 8] + len(raw).to_bytes(8, "little") + raw + data[start + length:])
    with compilation_cache(cache):
        loaded = jaxport.load(build / "mlp.jaxport")
        run = loaded.run(loaded.random_inputs({"batch": 8}))
    assert not run.compilation.shipped
    assert len(loaded.notes) == 1 and "cuDNN 99.0.0 assumed by the build (here: " in loaded.notes[0]


def test_the_gpu_captured_as_a_target_is_the_model_of_xlas_spec(run_cli, tmp_path, report):
    from jaxport._machine import device_model, parse_target_config
    from jaxport.run.compile.targets import target

    r = run_cli("target", "-o", tmp_path / "gpu.json", "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    captured = json.loads((tmp_path / "gpu.json").read_text())
    report("capture", captured)
    here = parse_target_config(captured["target_config"])
    if summary["model"] == "NVIDIA H200":
        spec = parse_target_config(target("cuda-h200").target_config)
        assert (device_model(here.name), here.compute_capability.rstrip("a"), here.cores) == \
            (device_model(spec.name), spec.compute_capability.rstrip("a"), spec.cores)
    assert target(f"cuda-{tmp_path / 'gpu.json'}").memory_per_device == captured["memory_limit"]


def test_this_gpus_facts_against_a_record_built_without_it(build, report):
    """What a compilation here is keyed by, beside what the CPU host's build recorded: they must match."""
    import jax

    from jaxport.jaxprivate.compiler import steered
    from jaxport.jaxprivate.facts import Facts

    seen: list[Facts] = []
    with steered(lambda facts, load: seen.append(facts), persistent=True):
        jax.jit(lambda x: x * 2).lower(np.ones(4, np.float32)).compile()
    record = read_record(next((build / "cache").iterdir()), blob=False)[0]
    report("facts", {"here": seen[0].to_json(), "built": record.facts.to_json()})
    assert seen[0].gpu is not None and seen[0].gpu.build == "autotuned"
    assert record.facts.gpu.differences(seen[0].gpu) == []


def test_a_program_over_the_gpus_memory_was_refused_where_it_was_built(build):
    built = json.loads((build / "over-memory.json").read_text())
    assert built["passed"] is False
    assert "more than the 105.75 GiB the target has" in built["violations"][0]["message"]
