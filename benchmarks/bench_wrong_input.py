"""A wrong input reported by `jaxport call` as a whole process, against importing JAX and against `jaxport inspect`.

    python benchmarks/bench_wrong_input.py [--quick | --repeats N]

Goal (issue 23): `jaxport call` refuses an input of the wrong shape or dtype from the manifest and the `.npy`
header, before JAX is imported: in well under a second (at most 0.5 s here), and faster than `python -c "import
jax"` alone (ratio = import jax / call, at least 1.5). Each refusal must exit 9 with its `error[input]` line; any
other outcome stops the benchmark.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL_RATIO = 1.5
GOAL_SECONDS = 0.5
RATIO = "import jax / jaxport call"

#: (case, the array written to the input file, what its error line must contain)
CASES = [
    ("wrong shape", "np.zeros((2, 783), np.float32)",
     "error[input]: input 'x': shape[1] = 783, but the artifact expects 784"),
    ("wrong dtype", "np.zeros((2, 784), np.float64)",
     "error[input]: input 'x' has dtype float64, but the artifact expects float32."),
    ("batch above its bound", "np.zeros((4097, 784), np.float32)",
     "error[input]: input 'x': shape[0] = 4097, but dimension 'batch' must satisfy 1 <= batch <= 4096"),
]


def refused(argv: list[str], expected: str) -> float:
    """Seconds one refused call took; it must exit 9 with ``expected`` in its error line."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=common.CHILD_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 9 or expected not in err:
        sys.exit(f"benchmarks: `{' '.join(argv)}` exited with {proc.returncode}, expected 9 and {expected!r}:\n{err}")
    return elapsed


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0])
    jaxport = common.jaxport_command()
    rows, ratios, slowest = [], [], 0.0
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as tmp:
        artifact = Path(tmp) / "mlp.jaxport"
        subprocess.run([jaxport, "export", str(common.REPO / "examples/mlp/model.py:predict"), "--shapes",
                        str(common.REPO / "examples/mlp/spec.yaml"), "-o", str(artifact)], check=True,
                       stdout=subprocess.DEVNULL)
        floor = common.Contender("import jax", [sys.executable, "-c", "import jax"])
        inspect = common.Contender("jaxport inspect", [jaxport, "inspect", str(artifact)])
        calls = []
        for i, (case, array, expected) in enumerate(CASES):
            path = Path(tmp) / f"bad{i}.npy"
            subprocess.run([sys.executable, "-c", f"import numpy as np; np.save({str(path)!r}, {array})"],
                           check=True)
            calls.append((case, expected, common.Contender(f"call ({case})", [jaxport, "call", str(artifact),
                                                                              "--inputs", str(path), "--no-cache"])))
        for c in (floor, inspect):  # untimed round: file cache, __pycache__
            common.run_once(c.argv)
        for _, expected, c in calls:
            refused(c.argv, expected)
        for _ in range(args.repeats):
            floor.times.append(common.run_once(floor.argv))
            inspect.times.append(common.run_once(inspect.argv))
            for _, expected, c in calls:
                c.times.append(refused(c.argv, expected))
        for case, _, c in calls:
            rows.append(common.comparison_row(f"mlp: {case}", floor, c))
            ratios.append(floor.median / c.median)
            slowest = max(slowest, c.median)
    common.print_machine()
    common.print_legend(args.repeats, RATIO)
    print(common.table(["case", "import jax", "jaxport call (refused)", *common.RATIO_HEADERS], rows))
    print(f"\n`jaxport inspect` of the same artifact (a process that reads the manifest and no input): "
          f"{common.seconds(inspect.median)} (min {inspect.best:.3f}); slowest refusal / inspect: "
          f"{slowest / inspect.median:.2f}x.")
    worst = min(ratios)
    print(f"\nGoal: a refusal faster than importing JAX alone, by at least {GOAL_RATIO:g}x. Worst ratio of medians "
          f"{worst:.2f}x: goal {'met' if worst >= GOAL_RATIO else 'NOT met'}.")
    print(f"Goal: at most {GOAL_SECONDS:g} s per refusal. Slowest median {slowest:.3f} s: goal "
          f"{'met' if slowest <= GOAL_SECONDS else 'NOT met'}.")


if __name__ == "__main__":
    main()
