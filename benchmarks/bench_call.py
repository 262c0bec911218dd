"""Calling an artifact: `jaxport.load(...)` per call vs native `jax.jit`, and a second `jaxport call` vs the first.

    python benchmarks/bench_call.py [--quick | --repeats N]

Goals (issue 3):
(a) steady state: a call of `jaxport.load(ARTIFACT)` takes at most 1.05x a call of `jax.jit(f)` on the same
    inputs (ratio = jaxport / native), for a small model (examples/mlp `predict`) and a medium one (the transformer
    of models/transformer.py, 12 layers, d=768, weights bound from an .npz);
(b) the persistent compilation cache: a second `jaxport call` process on the medium model is at least 2x faster
    than the first (ratio = first / second), each pair in a fresh temporary `--cache-dir`.

`--repeats` counts the first/second pairs of (b); (a) always makes many calls. `--quick` uses a 2-layer
transformer and fewer calls.
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import fixtures  # noqa: E402

GOAL_STEADY = 1.05
GOAL_CACHE = 2.0
MLP = ("examples/mlp/model.py:predict", "examples/mlp/spec.yaml")
MEDIUM_X = (1, 16)  # batch, seq of the transformer's input
CALLS = {"full": {"mlp": 3000, "transformer": 30}, "quick": {"mlp": 300, "transformer": 10}}
WARMUP_CALLS = 20


def _interleaved_calls(a, b, n: int) -> tuple[list[float], list[float]]:
    """Seconds per call of ``a()`` and ``b()``, alternating which goes first, each call waited for."""
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


def steady_state(mlp_artifact: Path, medium_artifact: Path, model: fixtures.BoundTransformer,
                 calls: dict[str, int]) -> tuple[list[list[str]], list[float]]:
    """Rows of (a): each model with numpy inputs (copied to the device by each call) and with device arrays."""
    import jax
    import numpy as np

    import jaxport

    sys.path.insert(0, str(fixtures.MODELS))
    from transformer import encode

    sys.path.insert(0, str(common.REPO / "examples" / "mlp"))
    from model import predict

    x_small = np.load(common.REPO / "examples" / "mlp" / "x.npy")
    with np.load(model.npz) as z:
        params = jax.device_put(fixtures.nest({k: z[k] for k in z.files}))
    x_medium = fixtures.make_x(*MEDIUM_X)

    # (label, artifact loaded, native function, input, native's other arguments, calls, also a device input?)
    # A device-resident input changes nothing measurable for the transformer, whose call is ~1000x longer.
    cases = [
        ("mlp `predict`", jaxport.load(mlp_artifact), jax.jit(predict), x_small, {}, calls["mlp"], True),
        (f"transformer, {model.layers} layers, weights bound", jaxport.load(medium_artifact), jax.jit(encode),
         x_medium, {"params": params}, calls["transformer"], False),
    ]
    rows, ratios = [], []
    for label, loaded, native, x, kwargs, n, on_device in cases:
        np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(native(x, **kwargs)), rtol=1e-4, atol=1e-4)
        for where, value in [("numpy", x)] + ([("device", jax.device_put(x))] if on_device else []):
            ours, theirs = _interleaved_calls(functools.partial(loaded, value),
                                              functools.partial(native, value, **kwargs), n)
            mo, mt = statistics.median(ours), statistics.median(theirs)
            paired = statistics.median(o / t for o, t in zip(ours, theirs))
            rows.append([f"{label}, {where} input", str(n), _us(mo), _us(mt), f"{(mo - mt) * 1e6:+,.0f} µs",
                         f"{mo / mt:.3f}x", f"{paired:.3f}x"])
            ratios.append(mo / mt)
    return rows, ratios


def first_and_second(jaxport: str, artifact: Path, x: Path, tmp: Path, repeats: int):
    """Rows of (b): whole `jaxport call` processes, first (empty cache) then second, in a fresh cache each time."""
    firsts, seconds_, reports = [], [], {"first": [], "second": []}
    for i in range(repeats):
        cache = tmp / f"cache-{i}"
        argv = [jaxport, "call", str(artifact), "--inputs", str(x), "--cache-dir", str(cache), "--json"]
        for times, kind in ((firsts, "first"), (seconds_, "second")):
            wall, out = common.run_capture(argv)
            timings = json.loads(out)["timings"]
            times.append(wall)
            reports[kind].append({"wall": wall, **timings})
    hits = [r["compile_cache_hit"] for r in reports["second"]]
    if not all(hits):
        sys.exit(f"benchmarks: a second `jaxport call` missed the compilation cache ({hits}).")

    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in reports[kind])

    rows = []
    for kind in ("first", "second"):
        wall = med(kind, "wall")
        parts = {k: med(kind, f"{k}_s") for k in ("load", "lower", "compile", "run")}
        rest = statistics.median(r["wall"] - sum(r[f"{k}_s"] for k in parts) for r in reports[kind])
        rows.append([kind, common.seconds(wall), common.seconds(rest),
                     *(common.seconds(parts[k]) for k in ("load", "lower", "compile", "run")),
                     f"{parts['lower'] / wall:.0%}"])
    ratio = statistics.median(firsts) / statistics.median(seconds_)
    paired = statistics.median(f / s for f, s in zip(firsts, seconds_))
    # What the second call saves besides XLA's compilation: `load` of a first call also runs jaxport's one-time
    # check of the program in a child process (its verdict is kept in the cache directory).
    same_load = statistics.median(
        (f["wall"] - f["load_s"] + s["load_s"]) / s["wall"] for f, s in zip(reports["first"], reports["second"]))
    return rows, ratio, paired, same_load


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0], full=5, quick=1)
    mode = "quick" if args.quick else "full"
    jaxport = common.jaxport_command()
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as name:
        tmp = Path(name)
        model = fixtures.write_transformer(tmp, layers=2 if args.quick else 12)
        medium = fixtures.export_bound(jaxport, model, tmp / "transformer.jaxport")
        mlp = tmp / "mlp.jaxport"
        common.run_once([jaxport, "export", str(common.REPO / MLP[0]), "--shapes", str(common.REPO / MLP[1]),
                         "-o", str(mlp), "--no-manifest"])
        x = tmp / "x.npy"
        import numpy as np

        np.save(x, fixtures.make_x(*MEDIUM_X))
        # (b) first, in processes of their own, before this process imports JAX and holds the weights.
        cache_rows, cache_ratio, cache_paired, same_load = first_and_second(jaxport, medium, x, tmp, args.repeats)
        steady_rows, steady_ratios = steady_state(mlp, medium, model, CALLS[mode])

    common.print_machine()
    print(f"Transformer: {model.layers} layers, d=768, {model.n_params:,} parameters "
          f"({common.megabytes(model.weight_bytes)} of f32 weights), input x {MEDIUM_X[0]}x{MEDIUM_X[1]}x768.\n")
    print("(a) Steady state, in one process: calls of `jaxport.load(ARTIFACT)` and of `jax.jit(f)` interleaved "
          "(alternating which goes first), each waited for with `jax.block_until_ready`; times are medians per call; "
          "ratio = jaxport / native.\n")
    print(common.table(["case", "calls", "jaxport.load", "jax.jit", "difference", "ratio (medians)",
                        "ratio (paired)"], steady_rows))
    worst = max(steady_ratios)
    print(f"\nGoal: at most {GOAL_STEADY:g}x. Worst ratio of medians {worst:.3f}x: goal "
          f"{'met' if worst <= GOAL_STEADY else 'NOT met'}.\n")
    print(f"(b) Whole `jaxport call ARTIFACT --inputs x.npy --cache-dir DIR --json` processes on the transformer, "
          f"first (empty cache) then second, {args.repeats} pair(s), each in a fresh cache directory. Medians; "
          f"'start + rest' is the wall time not in jaxport's own load/lower/compile/run timings (interpreter, "
          f"imports, reading inputs, output statistics, exit).\n")
    print(common.table(["call", "wall", "start + rest", "load", "lower", "compile", "run", "lower / wall"],
                       cache_rows))
    print(f"\nRatio first / second: {cache_ratio:.2f}x (medians), {cache_paired:.2f}x (paired). Goal: at least "
          f"{GOAL_CACHE:g}x: {'met' if cache_ratio >= GOAL_CACHE else 'NOT met'}.")
    print(f"With the first call's `load` replaced by the second's (what the compilation cache alone saves; a first "
          f"`load` also checks the program once in a child process): {same_load:.2f}x (paired).")


if __name__ == "__main__":
    main()
