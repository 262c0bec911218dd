"""The GPU figures of BENCHMARKS.md ("GPU (deviceless)", "GPU"): compile time per bucket for an H200 on a CPU-only
machine; on the GPU, steady calls against jax.jit, start to first result with executables shipped from a machine
without a GPU, with autotuned ones and compiling, deviceless against autotuned speed, and serving.

Three commands, on two machines:

    python benchmarks/bench_gpu.py deviceless [--json PATH]   # a CPU-only machine with jaxport[cuda]: the examples
    python benchmarks/bench_gpu.py build DIR                  # a CPU-only machine, with the GPU host's JAX and plugin
    python benchmarks/bench_gpu.py run DIR                    # the GPU machine; DIR also holds `make gpu-build`'s
                                                              # output (tier/)

``deviceless`` exports the examples the GPU tier runs (scripts/gpu_build.py's list) and compiles each bucket for
``cuda-h200`` (``warmup --target``), timing each; nothing runs. ``build`` exports 4 layers of the transformer of
benchmarks/models (d=768, f32, batch and sequence symbolic, weights as arguments) for ``cuda`` and compiles its four
buckets deviceless into DIR/shipped. ``run`` times, in one process, ``jax.jit`` of the example MLP (batch 1 and 64)
against ``jaxport.load`` of the tier's artifacts (device arrays, pipelined calls, one wait per round, interleaved),
with shipped deviceless executables and with executables compiled (autotuned) here; then start to first result of
the transformer in fresh processes with the shipped executables, with JAX's persistent cache filled by a warm-up
here (autotuned) and compiling; then, where kserve is installed, bench_serve.py's serving comparison (p50/p99 and
throughput at 1, 8 and 32 clients against a bare KServe model). Results go to DIR/run.json (``--json``: PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODEL = HERE / "models" / "transformer.py"
SPEC = HERE / "models" / "transformer4.yaml"
DIMS = ["--dim", "batch=1,4", "--dim", "seq=128,256"]
ROUNDS = 7
CALLS = 1000
TRITON = "__gpu$xla.gpu.triton"


def _jaxport() -> str:
    beside = Path(sys.executable).with_name("jaxport")
    return str(beside) if beside.exists() else "jaxport"


def _examples():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import gpu_build
    finally:
        sys.path.pop(0)
    return gpu_build


def deviceless(path: Path | None) -> None:
    """Compile time of every example bucket for cuda-h200 here (no GPU)."""
    import platform

    build = _examples()
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, entry, spec, extra, dims, _ in build.ARTIFACTS:
            artifact = Path(tmp) / f"{name}.jaxport"
            subprocess.run([_jaxport(), "export", str(REPO / "examples" / entry), "--shapes",
                            str(REPO / "examples" / spec), "-o", str(artifact), *extra], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            allow = ["--allow-custom-call", TRITON] if name == "triton" else []
            start = time.perf_counter()
            done = subprocess.run([_jaxport(), "warmup", str(artifact), "--target", "cuda-h200", "--cache-dir",
                                   str(Path(tmp) / "cache"), "--json", *allow, *(["--dim", dims] if dims else [])],
                                  check=True, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - start
            for b in json.loads(done.stdout)["targets"][0]["buckets"]:
                rows.append({"artifact": name, "dims": b["dims"], "compile_s": b["compile_s"],
                             "memory_needed": b["memory_needed"], "ok": b["ok"]})
            rows[-1]["command_wall_s"] = wall
    import jax

    result = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
              "jax": jax.__version__, "buckets": rows}
    for r in rows:
        shown = ", ".join(f"{k}={v}" for k, v in r["dims"].items()) or "static"
        print(f"{r['artifact']:12} {shown:10} {r['compile_s']:6.2f} s  {r['memory_needed'] / 2**20:8.1f} MiB"
              f"{'' if r['ok'] else '  FAILED'}")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    artifact = out / "transformer.jaxport"
    subprocess.run([_jaxport(), "export", f"{MODEL}:encode", "--shapes", str(SPEC), "-o", str(artifact),
                    "--platform", "cuda"], check=True, env=env)
    shipped = out / "shipped"
    shutil.rmtree(shipped, ignore_errors=True)
    start = time.perf_counter()
    done = subprocess.run([_jaxport(), "warmup", str(artifact), "--target", "cuda-h200", *DIMS, "--cache-dir",
                           str(shipped), "--json"], check=True, env=env, stdout=subprocess.PIPE)
    report = json.loads(done.stdout)
    report["wall_s"] = time.perf_counter() - start
    (out / "build.json").write_text(json.dumps(report, indent=1))
    per = ", ".join(f"{b['compile_s']:.2f}" for b in report["targets"][0]["buckets"])
    print(f"deviceless build: 4 buckets in {report['wall_s']:.1f} s; compile per bucket {per} s")


def _timed(contenders: dict, rounds: int = ROUNDS, calls: int = CALLS) -> dict[str, float]:
    """Median seconds per pipelined call of each contender, rounds interleaved."""
    import jax

    times: dict[str, list[float]] = {name: [] for name in contenders}
    for fn, args in contenders.values():
        for _ in range(50):
            out = fn(*args)
        jax.block_until_ready(out)
    for _ in range(rounds):
        for name, (fn, args) in contenders.items():
            start = time.perf_counter()
            for _ in range(calls):
                out = fn(*args)
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(t) for name, t in times.items()}


def _steady(tier: Path) -> dict[str, object]:
    """jaxport.load against jax.jit of the example MLP at batch 1 and 64, and the bf16 transformer's deviceless
    executable against its autotuned one."""
    import importlib.util

    import jax
    import numpy as np

    import jaxport
    from jaxport.run.cache import compilation_cache

    spec = importlib.util.spec_from_file_location("mlp_model", REPO / "examples/mlp/model.py")
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    params = jax.device_put(model.PARAMS)
    cache = Path(tempfile.mkdtemp()) / "cache"
    shutil.copytree(tier / "cache", cache)
    cache.chmod(0o700)
    result: dict[str, object] = {}
    for batch in (1, 64):
        x = jax.device_put(np.random.default_rng(0).standard_normal((batch, 784), np.float32))
        with compilation_cache(cache):
            shipped = jaxport.load(tier / "mlp-bound.jaxport")
            shipped(x)
        with compilation_cache(None):
            compiled = jaxport.load(tier / "mlp-bound.jaxport")
        med = _timed({"jax.jit": (jax.jit(model.apply), (params, x)), "load (shipped)": (shipped, (x,)),
                      "load (compiled here)": (compiled, (x,))})
        result[f"mlp batch {batch}"] = {**{f"{k} us": v * 1e6 for k, v in med.items()},
                                        "ratio shipped": med["load (shipped)"] / med["jax.jit"],
                                        "ratio compiled": med["load (compiled here)"] / med["jax.jit"],
                                        "shipped": bool(shipped.compilations and shipped.compilations[0].shipped)}
    x = jax.device_put(np.ones((8, 128, 256), jax.numpy.bfloat16))
    with compilation_cache(cache):
        deviceless = jaxport.load(tier / "transformer.jaxport")
        deviceless(x)
    with compilation_cache(None):
        autotuned = jaxport.load(tier / "transformer.jaxport")
    med = _timed({"deviceless": (deviceless, (x,)), "autotuned": (autotuned, (x,))}, calls=200)
    result["transformer batch 8"] = {"deviceless us": med["deviceless"] * 1e6, "autotuned us": med["autotuned"] * 1e6,
                                     "ratio deviceless/autotuned": med["deviceless"] / med["autotuned"],
                                     "shipped": bool(deviceless.compilations[0].shipped)}
    return result


def _start(out: Path, cache: Path) -> dict[str, object]:
    """Start to first result of the 4-layer transformer in a fresh process: warm-up of its four buckets, then a
    call."""
    start = time.perf_counter()
    done = subprocess.run([_jaxport(), "warmup", str(out / "transformer.jaxport"), *DIMS, "--cache-dir", str(cache),
                           "--json"], stdout=subprocess.PIPE, check=True)
    warm = time.perf_counter() - start
    signatures = json.loads(done.stdout)["signatures"]
    start = time.perf_counter()
    subprocess.run([_jaxport(), "call", str(out / "transformer.jaxport"), "--random", "--dim", "batch=4", "--dim",
                    "seq=128", "--cache-dir", str(cache)], stdout=subprocess.DEVNULL, check=True)
    return {"warmup_s": warm, "call_s": time.perf_counter() - start,
            "compile_s": [s["compile_s"] for s in signatures], "executables": [s["executable"] for s in signatures]}


def run(out: Path, path: Path | None) -> None:
    import importlib.util

    results: dict[str, object] = {}
    target = path or out / "run.json"

    def keep(name: str, value: object) -> None:  # written after each figure: a time limit keeps what was measured
        results[name] = value
        target.write_text(json.dumps(results, indent=1, default=str))

    keep("steady", _steady(out / "tier"))
    with tempfile.TemporaryDirectory() as tmp:
        shipped = Path(tmp) / "shipped"
        shutil.copytree(out / "shipped", shipped)
        shipped.chmod(0o700)
        keep("start: shipped deviceless", _start(out, shipped))
        keep("start: compiling", _start(out, Path(tmp) / "autotuned"))  # fills JAX's cache, autotuned here
        keep("start: autotuned (JAX's cache)", _start(out, Path(tmp) / "autotuned"))
    if importlib.util.find_spec("kserve") is not None and importlib.util.find_spec("tritonclient") is not None:
        # three servers share the GPU at once: none may take 3/4 of its memory ahead (JAX's default)
        env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        serve = subprocess.run([sys.executable, str(HERE / "bench_serve.py"), "--only", "serve", "--quick",
                                "--json", str(out / "serve.json")], capture_output=True, text=True, env=env)
        keep("serve", json.loads((out / "serve.json").read_text()) if serve.returncode == 0 else
             {"failed": serve.returncode, "stderr": serve.stderr[-2000:]})
    else:
        keep("serve", "not run: kserve and tritonclient are not installed here (scripts/gpu_wheels.sh --serve)")
    print(json.dumps(results, indent=1, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["deviceless", "build", "run"])
    parser.add_argument("directory", nargs="?", type=Path)
    parser.add_argument("--json", type=Path, help="Where to write the results (deviceless: none by default).")
    args = parser.parse_args()
    if args.command == "deviceless":
        deviceless(args.json)
        return
    if args.directory is None:
        parser.error(f"{args.command} needs a directory")
    (build(args.directory.resolve()) if args.command == "build" else run(args.directory.resolve(), args.json))


if __name__ == "__main__":
    main()
