"""Export with weights bound from a Python attribute, against the import floor.

    python benchmarks/export_bound.py [--quick | --repeats N] [--layers N]

Goal (issues 16 and 48): a whole `jaxport export` process of the 12-layer transformer (models/transformer.py, 340 MB
of f32 weights) whose `params` are bound from a Python attribute (`weights_source.py:PARAMS`, built by `init_params`)
takes at most 1.2x the *import floor*: a process that only imports JAX and that module (which builds the weights). Its
peak RSS above the floor process's is at most 1.3x the weight bytes. Other contenders do the work no export can skip
by hand (`WORK_FLOOR`: with and without an `fsync`, and `jax.export` alone, writing nothing), so the table also says
how much of the gap is jaxport's own and how much is the work itself. Ratio = jaxport / floor, medians of interleaved
rounds (and the median of back-to-back pairs); peak RSS from `wait4`'s `ru_maxrss` of each process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import fixtures  # noqa: E402

GOAL_TIME = 1.2
GOAL_RSS = 1.3

#: The work an export cannot skip, done by hand as well as a script can: the floor's imports, `jax.export` of the
#: same function with the weights as arguments, one sha256 of the weights (in a thread, overlapping the trace on the
#: other core), one write of the program and the weights, and one fsync (jaxport's artifact is durable when it
#: returns). No checks, no manifest, no per-tensor digests, no CRC-32: what jaxport adds to this is its own cost.
WORK_FLOOR = """
import gc, hashlib, os, sys, threading
gc.freeze()
import jax, numpy as np
from jax import export
import weights_source
from transformer import encode

leaves, tree = jax.tree_util.tree_flatten(weights_source.PARAMS)
views = [memoryview(np.ascontiguousarray(leaf)).cast("B") for leaf in leaves]
digest = hashlib.sha256()
hashing = threading.Thread(target=lambda: [digest.update(v) for v in views])
hashing.start()
b, s = export.symbolic_shape("b, s")
shapes = jax.tree_util.tree_unflatten(tree, [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in leaves])
exported = export.export(jax.jit(lambda x, p: encode(x, params=p)))(jax.ShapeDtypeStruct((b, s, 768), np.float32),
                                                                     shapes)
program = exported.serialize()
hashing.join()
if sys.argv[2] == "traced":  # jax.export alone: no byte leaves the process
    sys.exit(0)
with open(sys.argv[1], "wb") as f:
    f.write(program)
    for v in views:
        f.write(v)
    if sys.argv[2] == "durable":
        f.flush()
        os.fsync(f.fileno())
"""


def run(argv: list[str], cwd: Path) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of one process; a failure stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=common.CHILD_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"benchmarks: `{' '.join(argv)}` exited with {proc.returncode}:\n{err.decode(errors='replace')}")
    return elapsed, usage.ru_maxrss * 1024


def write_model(directory: Path, layers: int) -> Path:
    """The module that builds the weights, and the spec that binds `params` to its `PARAMS`; returns the spec."""
    (directory / "weights_source.py").write_text(fixtures.SOURCE_MODULE.format(models=str(fixtures.MODELS),
                                                                               layers=layers))
    spec = directory / "bound-attr.yaml"
    spec.write_text(fixtures.SPEC.format(source="weights_source.py:PARAMS"))
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 round, a 2-layer model (a smoke run).")
    parser.add_argument("--repeats", type=int, help="Interleaved rounds (default 7).")
    parser.add_argument("--layers", type=int, help="Transformer layers (default 12: 340 MB of weights).")
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 7)
    layers = args.layers or (2 if args.quick else 12)
    jaxport = common.jaxport_command()
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as name:
        tmp = Path(name)
        spec = write_model(tmp, layers)
        out = tmp / "transformer.jaxport"
        floor = [sys.executable, "-c", "import jax, weights_source"]
        by_hand = tmp / "by-hand.bin"
        work = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(fixtures.MODELS)!r})\n{WORK_FLOOR}",
                str(by_hand)]
        export = [jaxport, "export", fixtures.ENTRYPOINT, "--shapes", str(spec), "-o", str(out), "--root", str(tmp)]
        contenders = {"floor": floor, "traced": [*work, "traced"], "work": [*work, "durable"],
                      "cached": [*work, "cached"], "export": export}
        times: dict[str, list[float]] = {k: [] for k in contenders}
        rss: dict[str, list[int]] = {k: [] for k in contenders}
        for argv in contenders.values():  # warm-up round: page cache, __pycache__
            run(argv, tmp)
        for i in range(repeats):
            order = list(contenders.items())
            order = order[i % len(order):] + order[:i % len(order)]  # each goes first, ..., last in turn
            for label, argv in order:
                out.unlink(missing_ok=True)  # each export writes a new file (not timed)
                by_hand.unlink(missing_ok=True)
                seconds, peak = run(argv, tmp)
                times[label].append(seconds)
                rss[label].append(peak)
                if label == "export":
                    artifact = out.stat().st_size
        weight_bytes = _weight_bytes(layers)
    med = {k: statistics.median(v) for k, v in times.items()}
    paired = statistics.median(e / f for e, f in zip(times["export"], times["floor"]))
    peak = {k: statistics.median(v) for k, v in rss.items()}
    common.print_machine()
    print(f"Transformer: {layers} layers, d=768, {weight_bytes / 1e6:,.1f} MB of f32 weights built by "
          f"`init_params` in `weights_source.py`; artifact {artifact / 1e6:,.1f} MB. {repeats} interleaved "
          f"round(s) (each contender first in turn) after one warm-up round.\n")
    rows = [["import floor: `python -c \"import jax, weights_source\"`", common.seconds(med["floor"]),
             f"{min(times['floor']):.3f}", common.megabytes(peak["floor"]), "1.00x"],
            ["the floor + `jax.export` and one sha256 of the weights, nothing written", common.seconds(med["traced"]),
             f"{min(times['traced']):.3f}", common.megabytes(peak["traced"]), f"{med['traced'] / med['floor']:.2f}x"],
            ["the work by hand: floor + `jax.export` + one sha256 + one durable write", common.seconds(med["work"]),
             f"{min(times['work']):.3f}", common.megabytes(peak["work"]), f"{med['work'] / med['floor']:.2f}x"],
            ["... the same, the write left in the page cache (not durable)", common.seconds(med["cached"]),
             f"{min(times['cached']):.3f}", common.megabytes(peak["cached"]), f"{med['cached'] / med['floor']:.2f}x"],
            ["`jaxport export transformer.py:encode --shapes bound-attr.yaml -o OUT`", common.seconds(med["export"]),
             f"{min(times['export']):.3f}", common.megabytes(peak["export"]),
             f"{med['export'] / med['floor']:.2f}x (paired {paired:.2f}x)"]]
    print(common.table(["process", "median", "min", "peak RSS", "ratio to the floor"], rows))
    above = (peak["export"] - peak["floor"]) / weight_bytes
    print(f"\nTime: {med['export'] / med['floor']:.2f}x the floor (goal at most {GOAL_TIME:g}x): "
          f"{'met' if med['export'] / med['floor'] <= GOAL_TIME else 'NOT met'}; "
          f"{med['export'] / med['work']:.2f}x the same work done by hand ({med['export'] / med['cached']:.2f}x "
          f"it without the durable write).")
    print(f"Peak RSS above the floor: {common.megabytes(peak['export'] - peak['floor'])}, {above:.2f}x the weight "
          f"bytes (goal at most {GOAL_RSS:g}x): {'met' if above <= GOAL_RSS else 'NOT met'}.")


def _weight_bytes(layers: int) -> int:
    d, ff = fixtures.D_MODEL, 3072
    per_layer = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d)
    return 4 * (layers * per_layer + 2 * d)


if __name__ == "__main__":
    main()
