"""Bound weights on a 12-layer, d=768 transformer: export time, artifact size, opening, and memory at call.

    python benchmarks/bench_weights.py [--quick | --repeats N]

Goals (issue 4), on models/transformer.py with polymorphic batch and sequence and deterministic weights written at
run time to a temporary directory:
(a) whole-process `jaxport export` with the weights bound (`bind:` an .npz, or a Python attribute) at least 10x
    faster than a minimal `jax.export` script that closes over the same weights (ratio = baseline / jaxport);
(b) artifact size at most 1.01 x the raw weight bytes + 1 MB;
(c) opening the artifact and mapping every weight (`jaxport.open_artifact` +
    `jaxport.artifact.extract.weight_arrays`, with and without the sha256 check) at least 10x faster than `np.load`
    of the .npz reading every array;
(d) peak RSS of `jaxport call`: the weights are not held twice (ratio = peak / (weights + input + output bytes)).

`--repeats` counts the interleaved rounds of (a) and (d); (c) runs 5x as many. `--quick` uses a 2-layer model.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import fixtures  # noqa: E402

GOAL_EXPORT = 10.0
GOAL_OPEN = 10.0
RSS_X = (2, 64)  # batch, seq of the input whose call (d) measures

# The least work any exporter of these weights does: import JAX, read every array of the .npz, write the bytes.
IO_FLOOR = """
import sys
import jax, numpy as np
with np.load(sys.argv[1]) as z, open(sys.argv[2], "wb") as f:
    for k in z.files:
        f.write(z[k].tobytes())
"""


def export_times(jaxport: str, model: fixtures.BoundTransformer, tmp: Path, repeats: int):
    """(a): the contenders of each weight source, interleaved; no warm-up round (the fixture just wrote the .npz,
    so it is in the page cache, and every contender runs the same Python code the same number of times)."""
    base = [sys.executable, str(common.BENCH_DIR / "baseline_export_constants.py")]
    ours = [jaxport, "export", fixtures.ENTRYPOINT, "--shapes"]
    npz_ours = common.Contender("jaxport export, bind: weights.npz",
                                [*ours, str(model.spec_npz), "-o", str(tmp / "a-npz.jaxport")])
    npz_base = common.Contender("jax.export, closed over np.load(weights.npz)",
                                [*base, str(model.npz), str(tmp / "a-npz.bin")])
    attr_ours = common.Contender("jaxport export, bind: weights_source.py:PARAMS",
                                 [*ours, str(model.spec_attr), "-o", str(tmp / "a-attr.jaxport")])
    attr_base = common.Contender("jax.export, closed over init_params()",
                                 [*base, f"python:{model.layers}", str(tmp / "a-attr.bin")])
    floor = common.Contender("I/O floor: import jax, np.load, write the bytes",
                             [sys.executable, "-c", IO_FLOOR, str(model.npz), str(tmp / "a-floor.bin")])
    contenders = [npz_ours, npz_base, attr_ours, attr_base, floor]
    common.interleave(contenders, repeats, cwd=tmp, warmup=False)
    rows = [common.comparison_row("bind: weights.npz", npz_base, npz_ours),
            common.comparison_row("bind: weights_source.py:PARAMS", attr_base, attr_ours)]
    ratios = [npz_base.median / npz_ours.median, attr_base.median / attr_ours.median]
    sizes = {"jaxport": (tmp / "a-npz.jaxport").stat().st_size, "baseline": (tmp / "a-npz.bin").stat().st_size}
    return rows, ratios, floor, npz_ours, sizes


def open_times(artifact: Path, npz: Path, rounds: int):
    """(c), in this process, interleaved; the page cache holds both files (a just-written or just-read file)."""
    import numpy as np

    import jaxport
    from jaxport.artifact.extract import weight_arrays

    def mapped(verify: bool, touch: bool = False):
        def run() -> int:
            with jaxport.open_artifact(artifact) as art:
                arrays = weight_arrays(art, verify=verify)
                if touch:  # read one byte per page, as a first use of every weight would
                    for a in arrays.values():
                        a.reshape(-1).view(np.uint8)[::4096].sum()
                n = len(arrays)
                del arrays
            return n
        return run

    def loaded() -> int:
        with np.load(npz) as z:
            arrays = {k: z[k] for k in z.files}
        return len(arrays)

    cases = {"np.load(weights.npz), every array": loaded,
             "open_artifact + weight_arrays(verify=False)": mapped(False),
             "open_artifact + weight_arrays(verify=True)": mapped(True),
             "verify=False, then one byte of every page read": mapped(False, touch=True)}
    counts = {name: fn() for name, fn in cases.items()}  # warm-up, and all four see the same tensors
    if len(set(counts.values())) != 1:
        sys.exit(f"benchmarks: the artifact and the .npz hold different numbers of arrays: {counts}")
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def memory(jaxport: str, model: fixtures.BoundTransformer, artifact: Path, tmp: Path, repeats: int):
    """(d): peak RSS of each process, the largest of ``repeats`` runs; and what one probe run of each holds."""
    import numpy as np

    x = tmp / "rss-x.npy"
    np.save(x, fixtures.make_x(*RSS_X))
    probe = [sys.executable, str(common.BENCH_DIR / "rss_probe.py")]
    cache = tmp / "rss-cache"
    cases = {
        "JAX runtime alone (import jax, one tiny jit)": ([*probe, "jax"], False),
        "`jaxport call --inputs x.npy -o y.npy`, compilation cached": (
            [jaxport, "call", str(artifact), "--inputs", str(x), "-o", str(tmp / "y-cli.npy"),
             "--cache-dir", str(cache)], False),
        "`jaxport call --no-verify`, compilation cached": (
            [jaxport, "call", str(artifact), "--inputs", str(x), "-o", str(tmp / "y-cli-nv.npy"),
             "--cache-dir", str(cache), "--no-verify"], False),
        "`jaxport call`, empty compilation cache (XLA compiles)": (
            [jaxport, "call", str(artifact), "--inputs", str(x), "-o", str(tmp / "y-cold.npy"),
             "--cache-dir", "{fresh}"], False),
        "`jaxport.load(verify=True)` + call, cached": (
            [*probe, "load", str(artifact), str(x), str(tmp / "y-v.npy"), "verify", str(cache)], True),
        "`jaxport.load(verify=False)` + call, cached": (
            [*probe, "load", str(artifact), str(x), str(tmp / "y-nv.npy"), "no-verify", str(cache)], True),
        "native: np.load(weights.npz) + jax.jit(encode)": (
            [*probe, "native", str(model.npz), str(x), str(tmp / "y-native.npy")], True),
    }
    # Fill the compilation cache and the page cache first (untimed).
    common.run_once(cases["`jaxport call --inputs x.npy -o y.npy`, compilation cached"][0])
    peaks: dict[str, list[int]] = {name: [] for name in cases}
    steps: dict[str, dict] = {}
    for r in range(repeats):
        for name, (argv, probed) in cases.items():
            argv = [str(tmp / f"fresh-cache-{r}") if a == "{fresh}" else a for a in argv]
            peak, out = common.peak_rss(argv)
            peaks[name].append(peak)
            if probed or name.startswith("JAX"):
                steps[name] = json.loads(out)
    outputs = [np.load(tmp / f) for f in ("y-cli.npy", "y-cli-nv.npy", "y-v.npy", "y-nv.npy", "y-native.npy")]
    for y in outputs[1:]:
        np.testing.assert_allclose(y, outputs[0], rtol=1e-4, atol=1e-4)
    io_bytes = 2 * int(np.prod(RSS_X)) * fixtures.D_MODEL * 4  # the input and the output, f32
    return {name: max(v) for name, v in peaks.items()}, steps, io_bytes


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0], full=3, quick=1)
    jaxport = common.jaxport_command()
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as name:
        tmp = Path(name)
        model = fixtures.write_transformer(tmp, layers=2 if args.quick else 12)
        export_rows, export_ratios, floor, npz_ours, sizes = export_times(jaxport, model, tmp, args.repeats)
        artifact = tmp / "a-npz.jaxport"
        with __import__("jaxport").open_artifact(artifact) as art:
            members = {n: m.size for n, m in art.members.items()}
        opened = open_times(artifact, model.npz, 5 * args.repeats)
        peaks, steps, io_bytes = memory(jaxport, model, artifact, tmp, args.repeats)

    w = model.weight_bytes
    common.print_machine()
    print(f"Transformer: {model.layers} layers, d=768, {model.n_params:,} f32 parameters in 146 arrays: "
          f"{w:,} bytes of weights ({common.megabytes(w)}).\n")

    print(f"(a) Whole-process export, {args.repeats} interleaved round(s) of five processes (no warm-up round). "
          f"Times: median (min); ratio = baseline / jaxport.\n")
    print(common.table(["weights from", "baseline: jax.export, weights closed over", "jaxport export, bind:",
                        *common.RATIO_HEADERS], export_rows))
    print(f"\nI/O floor (import jax, np.load every array, write the bytes; no export): {common.seconds(floor.median)} "
          f"(min {floor.best:.3f}); jaxport export from the .npz takes {npz_ours.median / floor.median:.2f}x it.")
    worst = min(export_ratios)
    print(f"Goal: at least {GOAL_EXPORT:g}x faster. Worst ratio of medians {worst:.2f}x: goal "
          f"{'met' if worst >= GOAL_EXPORT else 'NOT met'}.\n")

    size = sizes["jaxport"]
    limit = 1.01 * w + 1e6
    print("(b) Artifact size (bind: weights.npz).\n")
    print(common.table(["what", "bytes", "/ weight bytes"], [
        ["raw weight bytes", f"{w:,}", "1.0000"],
        ["artifact", f"{size:,}", f"{size / w:.4f}"],
        *[[f"  member {n}", f"{s:,}", f"{s / w:.4f}"] for n, s in members.items()],
        ["  zip headers, padding, directory", f"{size - sum(members.values()):,}", ""],
        ["baseline: jax.export with the weights as constants", f"{sizes['baseline']:,}",
         f"{sizes['baseline'] / w:.4f}"],
    ]))
    print(f"\nOverhead {size - w:,} bytes. Goal: at most 1.01 x weights + 1 MB = {limit:,.0f} bytes: "
          f"{'met' if size <= limit else 'NOT met'}.\n")

    rounds = len(next(iter(opened.values())))
    base = statistics.median(opened["np.load(weights.npz), every array"])
    rows = []
    for case, times in opened.items():
        m = statistics.median(times)
        rows.append([case, f"{common.seconds(m)} (min {min(times):.3f})", f"{base / m:.1f}x"])
    print(f"(c) Opening the weights, in one process, {rounds} interleaved rounds, files in the page cache. "
          f"Ratio = np.load / case (medians).\n")
    print(common.table(["case", "time", "ratio"], rows))
    verdict = {k: base / statistics.median(v) for k, v in opened.items() if k.startswith("open_artifact")}
    print("\nGoal: at least 10x faster than np.load: "
          + "; ".join(f"{k.split('(')[1].rstrip(')')}: {r:.1f}x, {'met' if r >= GOAL_OPEN else 'NOT met'}"
                      for k, r in verdict.items()) + ".\n")

    need = w + io_bytes
    jax_peak = peaks["JAX runtime alone (import jax, one tiny jit)"]
    print(f"(d) Peak RSS ({common.rss_method()}), the largest of {args.repeats} run(s); input x and output "
          f"{RSS_X[0]}x{RSS_X[1]}x768 f32; weights + input + output = {common.megabytes(need)}. 'Above JAX' "
          f"subtracts the peak of a process that only starts the JAX runtime.\n")
    rows = []
    for case, peak in peaks.items():
        rows.append([case, common.megabytes(peak), f"{peak / need:.2f}x", common.megabytes(peak - jax_peak),
                     f"{(peak - jax_peak) / need:.2f}x"])
    print(common.table(["process", "peak RSS", "/ (w + in + out)", "above JAX", "above JAX / (w + in + out)"],
                       rows))
    print("\nWhat the resident set holds after each step (from /proc/self/status; RssFile counts the artifact's "
          "mapped pages, RssAnon the heap: numpy arrays, device buffers, XLA's own memory):\n")
    rows = []
    for case, s in steps.items():
        for step, v in s.items():
            rows.append([case if step == "jax" else "", step, common.megabytes(v["VmRSS"]),
                         common.megabytes(v["RssAnon"]), common.megabytes(v["RssFile"]),
                         common.megabytes(v["VmHWM"])])
    print(common.table(["process", "after", "RSS", "anon", "file", "peak so far"], rows))
    cli = peaks["`jaxport call --inputs x.npy -o y.npy`, compilation cached"]
    twice = cli - jax_peak >= 2 * w
    print(f"\n`jaxport call` (cached) peak above the JAX runtime: {(cli - jax_peak) / w:.2f}x the weight bytes. "
          f"Goal (weights not held twice): {'NOT met' if twice else 'met'}.")


if __name__ == "__main__":
    main()
