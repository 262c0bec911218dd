"""The first `jaxport call` of a new artifact against a native script, and the second call against the first.

    python benchmarks/bench_first_call.py [--quick | --repeats N]

Goals (issue 16), on the transformer of models/transformer.py (12 layers, 340 MB of weights bound from an .npz),
and also shown on the MLP of examples/mlp:
(a) a first `jaxport call ARTIFACT --inputs x.npy --cache-dir DIR -o y.npy` on an empty DIR (no compiled program, no
    check verdict) takes at most 1.2x `native_first_call.py` (import the model, load its weights, `jax.jit`, run,
    save the output) with an empty JAX compilation cache of its own (ratio = jaxport / native);
(b) a second call on the same DIR, which fetches the compiled program and the check's verdict, is faster than the
    first (ratio = first / second).
Also shown: the first call with the program's check in a freshly started interpreter (`JAXPORT_CHECK_FORK=0`: what
a process whose JAX backends already run gets) instead of a fork of the caller, and a call after `jaxport warmup`.

Each round runs the contenders back to back in fresh cache directories, alternating their order; medians, and the
median of the per-round ratios. The outputs of jaxport and of the native script are compared.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import fixtures  # noqa: E402

GOAL_FIRST = 1.2
X = (1, 16)

def measure(jaxport: str, tmp: Path, case: str, artifact: Path, x: Path, native: list[str], warm_dims: list[str],
            repeats: int) -> dict[str, list[float]]:
    """Seconds of each contender per round (round 0, untimed, warms the page cache and ``__pycache__``)."""
    import numpy as np

    times: dict[str, list[float]] = {k: [] for k in ("first", "second", "native", "spawned", "warmed")}
    for i in range(repeats + 1):
        d = tmp / f"{case}-{i}"
        d.mkdir()
        runs = {
            "first": [jaxport, "call", str(artifact), "--inputs", str(x), "--cache-dir", str(d / "a"), "-o",
                      str(d / "a.npy")],
            "native": [*native[:2], str(d / "n"), native[2], str(x), str(d / "n.npy"), *native[3:]],
            "spawned": [jaxport, "call", str(artifact), "--inputs", str(x), "--cache-dir", str(d / "s"), "-o",
                        str(d / "s.npy")],
        }
        for key in (list(runs) if i % 2 else list(reversed(runs))):
            if key == "spawned":
                common.CHILD_ENV["JAXPORT_CHECK_FORK"] = "0"
            try:
                seconds = common.run_once(runs[key], cwd=tmp)
            finally:
                common.CHILD_ENV.pop("JAXPORT_CHECK_FORK", None)
            if i:
                times[key].append(seconds)
        second = common.run_once(runs["first"], cwd=tmp)  # the same cache again: everything fetched
        common.run_once([jaxport, "warmup", str(artifact), *warm_dims, "--cache-dir", str(d / "w")], cwd=tmp)
        warmed = common.run_once([jaxport, "call", str(artifact), "--inputs", str(x), "--cache-dir", str(d / "w"),
                                  "-o", str(d / "w.npy")], cwd=tmp)
        if i:
            times["second"].append(second)
            times["warmed"].append(warmed)
        np.testing.assert_allclose(np.load(d / "a.npy"), np.load(d / "n.npy"), rtol=2e-4, atol=2e-4)
    return times


def report(label: str, times: dict[str, list[float]]) -> float:
    med = {k: statistics.median(v) for k, v in times.items()}

    def paired(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    rows = [
        ["native: import the model, its weights, jax.jit, run (empty JAX cache)", "native", "1.00x"],
        ["`jaxport call` first (empty cache: compiles; the check in a fork)", "first",
         f"{med['first'] / med['native']:.2f}x (paired {paired('first', 'native'):.2f}x)"],
        ["`jaxport call` first, the check in a fresh interpreter (`JAXPORT_CHECK_FORK=0`)", "spawned",
         f"{med['spawned'] / med['native']:.2f}x (paired {paired('spawned', 'native'):.2f}x)"],
        ["`jaxport call` second (same cache)", "second",
         f"{med['second'] / med['native']:.2f}x; first / second {med['first'] / med['second']:.2f}x "
         f"(paired {paired('first', 'second'):.2f}x)"],
        ["`jaxport call` after `jaxport warmup`", "warmed", f"{med['warmed'] / med['native']:.2f}x"],
    ]
    print(f"{label}\n")
    cells = [[text, f"{common.seconds(med[k])} (min {min(times[k]):.3f})", ratio] for text, k, ratio in rows]
    print(common.table(["process", "time", "ratio to native"], cells))
    first = med["first"] / med["native"]
    print(f"\n(a) first call / native: {first:.2f}x (goal at most {GOAL_FIRST:g}x): "
          f"{'met' if first <= GOAL_FIRST else 'NOT met'}. (b) first / second: {med['first'] / med['second']:.2f}x.\n")
    return first


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0], full=5, quick=1)
    jaxport = common.jaxport_command()
    native = [sys.executable, str(common.BENCH_DIR / "native_first_call.py")]
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as name:
        tmp = Path(name)
        model = fixtures.write_transformer(tmp, layers=2 if args.quick else 12)
        artifact = fixtures.export_bound(jaxport, model, tmp / "transformer.jaxport")
        x = tmp / "x.npy"
        np.save(x, fixtures.make_x(*X))
        big = measure(jaxport, tmp, "transformer", artifact, x, [*native, "transformer", str(model.npz)],
                      ["--dim", f"batch={X[0]}", "--dim", f"seq={X[1]}"], args.repeats)
        mlp = tmp / "mlp.jaxport"
        common.run_once([jaxport, "export", str(common.REPO / "examples/mlp/model.py:predict"), "--shapes",
                         str(common.REPO / "examples/mlp/spec.yaml"), "-o", str(mlp), "--no-manifest"])
        small = measure(jaxport, tmp, "mlp", mlp, common.REPO / "examples/mlp/x.npy", [*native, "mlp"],
                        ["--dim", "batch=4"], args.repeats)
    common.print_machine()
    print(f"{args.repeats} round(s) after an untimed one; times are medians (min).\n")
    report(f"Transformer: {model.layers} layers, {common.megabytes(model.weight_bytes)} of f32 weights bound from an "
           f".npz, input x {X[0]}x{X[1]}x768.", big)
    report("MLP of examples/mlp (106 kB of weights closed over), input examples/mlp/x.npy (4x784).", small)


if __name__ == "__main__":
    main()
