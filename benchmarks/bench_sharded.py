"""Calling a sharded artifact on 8 simulated CPU devices vs native `jax.jit` with the same shardings.

    python benchmarks/bench_sharded.py [--quick | --repeats N]

Goal (issue 7): steady state, a call of `jaxport.load(ARTIFACT)` of a program sharded over a data x model mesh of
8 devices takes at most 1.05x a call of `jax.jit(f, in_shardings=..., out_shardings=...)` over the same mesh, on the
same inputs (ratio = jaxport / native). Two sizes of the MLP of examples/sharded (batch over `data`, hidden layer
over `model`): the example itself (a call of a few hundred microseconds, where dispatch overhead shows) and a wider
one (d=512, hidden 2048, batch 512). Inputs are given as numpy arrays (placed by each call) and as arrays already
laid out on the mesh. The process simulates its 8 devices (`--host-devices 8`) before JAX starts.
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL = 1.05
DEVICES = 8
WARMUP_CALLS = 20
#: (label, features, hidden, outputs, rows, calls in a full run)
CASES = [("examples/sharded MLP, d=64, hidden 128, batch 32", 64, 128, 16, 32, 2000),
         ("wider MLP, d=512, hidden 2048, batch 512", 512, 2048, 128, 512, 200)]
SPEC = """jaxport: 1
mesh: {data: 4, model: 2}
dims:
  b: {max: 65536}
args:
  - {shape: "4*b, %d", dtype: f32, sharding: [data, null]}
  - bind: params.npz
    sharding: {w1: [null, model], b1: [model], w2: [model, null]}
outputs_sharding: [[data, null]]
"""


def _interleaved(a, b, n: int) -> tuple[list[float], list[float]]:
    import jax

    for _ in range(WARMUP_CALLS):
        jax.block_until_ready(a())
        jax.block_until_ready(b())
    ta, tb = [], []
    for i in range(n):
        order = ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta))
        for fn, times in order:
            start = time.perf_counter()
            jax.block_until_ready(fn())
            times.append(time.perf_counter() - start)
    return ta, tb


def _us(t: float) -> str:
    return f"{t * 1e6:,.0f} µs" if t < 0.01 else f"{t * 1e3:,.2f} ms"


def run_case(tmp: Path, label: str, d: int, hidden: int, out: int, rows: int, calls: int) -> list[list[str]]:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import jaxport

    sys.path.insert(0, str(common.REPO / "examples" / "sharded"))
    from model import predict

    case = tmp / f"d{d}"
    case.mkdir()
    rng = np.random.default_rng(0)
    params = {"w1": (rng.standard_normal((d, hidden)) / np.sqrt(d)).astype(np.float32),
              "b1": np.zeros(hidden, np.float32),
              "w2": (rng.standard_normal((hidden, out)) / np.sqrt(hidden)).astype(np.float32)}
    np.savez(case / "params.npz", **params)
    (case / "spec.yaml").write_text(SPEC % d)
    cwd = os.getcwd()
    os.chdir(case)
    try:
        path = jaxport.export(str(common.REPO / "examples" / "sharded" / "model.py") + ":predict", "spec.yaml",
                              output="predict.jaxport", write_manifest=False).path
        loaded = jaxport.load(path)
    finally:
        os.chdir(cwd)

    mesh = Mesh(np.array(jax.devices()[:DEVICES]).reshape(4, 2), ("data", "model"))

    def sh(*spec):
        return NamedSharding(mesh, P(*spec))

    p_shardings = {"w1": sh(None, "model"), "b1": sh("model"), "w2": sh("model", None)}
    native = jax.jit(predict, in_shardings=(sh("data", None), p_shardings), out_shardings=sh("data", None))
    placed_params = {k: jax.device_put(v, p_shardings[k]) for k, v in params.items()}
    x = rng.standard_normal((rows, d)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(native(x, placed_params)), rtol=1e-4, atol=1e-4)
    out_rows = []
    for where, value in (("numpy", x), ("on the mesh", jax.device_put(x, sh("data", None)))):
        ours, theirs = _interleaved(functools.partial(loaded, value), functools.partial(native, value, placed_params),
                                    calls)
        mo, mt = statistics.median(ours), statistics.median(theirs)
        paired = statistics.median(o / t for o, t in zip(ours, theirs))
        out_rows.append([f"{label}, {where} input", str(calls), _us(mo), _us(mt), f"{(mo - mt) * 1e6:+,.0f} µs",
                         f"{mo / mt:.3f}x", f"{paired:.3f}x"])
    return out_rows


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0], full=1, quick=1)
    from jaxport.run import distributed

    distributed.host_devices(DEVICES)  # before JAX starts
    rows = []
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as name:
        for label, d, hidden, out, batch, calls in CASES:
            n = max(20, calls // 10) if args.quick else calls * args.repeats
            rows += run_case(Path(name), label, d, hidden, out, batch, n)
    common.print_machine()
    print(f"Steady state on {DEVICES} simulated CPU devices (a data=4 x model=2 mesh), in one process: calls of "
          f"`jaxport.load(ARTIFACT)` and of `jax.jit(predict, in_shardings=..., out_shardings=...)` with the same "
          f"shardings, interleaved (alternating which goes first), each waited for with `jax.block_until_ready`; "
          f"times are medians per call; ratio = jaxport / native.\n")
    print(common.table(["case", "calls", "jaxport.load", "jax.jit", "difference", "ratio (medians)",
                        "ratio (paired)"], rows))
    ratios = [float(r[5].rstrip("x")) for r in rows]
    print(f"\nGoal: at most {GOAL:g}x. Worst ratio of medians {max(ratios):.3f}x: goal "
          f"{'met' if max(ratios) <= GOAL else 'NOT met'}.")


if __name__ == "__main__":
    main()
