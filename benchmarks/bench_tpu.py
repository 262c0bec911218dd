"""The TPU figures of BENCHMARKS.md ("TPU"): steady calls against jax.jit on the chip, start to first result with and
without executables shipped from a machine without a TPU, and compile time per bucket there and on the chip.

Two halves, on two machines:

    python benchmarks/bench_tpu.py build DIR    # a CPU-only machine, with the TPU host's JAX and libtpu
    python benchmarks/bench_tpu.py run DIR      # the TPU machine; DIR also holds `make tpu-build`'s output (tier/)

``build`` exports 4 layers of the transformer of benchmarks/models (d=768, batch and sequence symbolic, weights as
arguments; transformer4.yaml) for the TPU and compiles its four buckets there deviceless (``warmup --target
tpu-v5e``), timing each. ``run`` times, interleaved in one process, ``jax.jit`` of the example MLP against
``jaxport.load`` of the artifacts built on the CPU host (device arrays: pipelined calls, one wait per round), then
start to first result of the transformer in fresh processes, with the shipped executables and compiling, and prints
the figures. Results go to DIR/*.json.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE / "models" / "transformer.py"
SPEC = HERE / "models" / "transformer4.yaml"
DIMS = ["--dim", "batch=1,4", "--dim", "seq=128,256"]
ROUNDS = 7
CALLS = 2000


def _jaxport() -> str:
    beside = Path(sys.executable).with_name("jaxport")
    return str(beside) if beside.exists() else "jaxport"


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    artifact = out / "transformer.jaxport"
    subprocess.run([_jaxport(), "export", f"{MODEL}:encode", "--shapes", str(SPEC), "-o",
                    str(artifact), "--platform", "tpu"], check=True, env=env)
    shipped = out / "shipped"
    shutil.rmtree(shipped, ignore_errors=True)
    start = time.perf_counter()
    done = subprocess.run([_jaxport(), "warmup", str(artifact), "--target", "tpu-v5e", *DIMS, "--cache-dir",
                           str(shipped), "--json"], check=True, env=env, stdout=subprocess.PIPE)
    report = json.loads(done.stdout)
    report["wall_s"] = time.perf_counter() - start
    (out / "build.json").write_text(json.dumps(report, indent=1))
    buckets = report["targets"][0]["buckets"]
    per = ", ".join(f"{b['compile_s']:.2f}" for b in buckets)
    print(f"deviceless build: {len(buckets)} buckets in {report['wall_s']:.1f} s; compile per bucket {per} s")


def _steady(tier: Path) -> dict[str, float]:
    """Median ratio of loaded to jax.jit over interleaved rounds of pipelined calls with device arrays."""
    import importlib.util

    import jax
    import numpy as np

    import jaxport

    spec = importlib.util.spec_from_file_location("mlp_model", HERE.parent / "examples/mlp/model.py")
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    x = jax.device_put(np.random.default_rng(0).standard_normal((8, 784), np.float32))
    params = jax.device_put(model.PARAMS)
    contenders = {
        "jax.jit(predict)": (jax.jit(model.predict), (x,)),
        "jaxport.load(mlp)": (jaxport.load(tier / "mlp.jaxport"), (x,)),
        "jax.jit(apply)": (jax.jit(model.apply), (params, x)),
        "jaxport.load(mlp-bound)": (jaxport.load(tier / "mlp-bound.jaxport"), (x,)),
        "jaxport.load(mlp) numpy": (jaxport.load(tier / "mlp.jaxport"), (np.asarray(x),)),
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for fn, args in contenders.values():
        for _ in range(100):
            out = fn(*args)
        jax.block_until_ready(out)
    for _ in range(ROUNDS):
        for name, (fn, args) in contenders.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                out = fn(*args)
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - start) / CALLS)
    med = {name: statistics.median(t) for name, t in times.items()}
    return {**{f"{n} us": v * 1e6 for n, v in med.items()},
            "ratio mlp": med["jaxport.load(mlp)"] / med["jax.jit(predict)"],
            "ratio mlp-bound": med["jaxport.load(mlp-bound)"] / med["jax.jit(apply)"],
            "ratio mlp numpy": med["jaxport.load(mlp) numpy"] / med["jax.jit(predict)"]}


def _start(out: Path, cache: Path) -> dict[str, object]:
    """Start to first result of the transformer in a fresh process (warm-up of its four buckets, then one call)."""
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


def run(out: Path) -> None:
    import tempfile

    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        shipped = Path(tmp) / "shipped"
        shutil.copytree(out / "shipped", shipped)
        shipped.chmod(0o700)
        results["shipped"] = _start(out, shipped)
        results["compiling"] = _start(out, Path(tmp) / "empty")
    results["steady"] = _steady(out / "tier")
    (out / "run.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "run"):
        sys.exit(__doc__)
    (build if sys.argv[1] == "build" else run)(Path(sys.argv[2]).resolve())


if __name__ == "__main__":
    main()
