"""A wrong input reported by `jaxport call` as a whole process, against importing JAX and against `jaxport inspect`.

    python benchmarks/bench_wrong_input.py [--quick | --repeats N] [--before REV]

Goal (issue 23): `jaxport call` refuses an input of the wrong shape, dtype or bound from the manifest and the `.npy`
header, before JAX is imported: in well under a second (at most 1 s as a whole process on this loaded 2-core machine),
at least twice as fast as `python -c "import jax"` alone (ratio = import jax / call). `python -c "import numpy"` (which
reading a `.npy` header needs) and `jaxport inspect` (which reads the manifest only) are shown as floors. Each refusal
must exit 9 with its `error[input]` line; any other outcome stops the benchmark.

`--before REV` also times the same refusals by the jaxport of git revision REV (its `jaxport/` and `cli/`, taken with
`git archive` into a temporary directory and put first on `PYTHONPATH`), interleaved with this tree's, and prints
their ratio (before / now). Both run through the same launcher, `python -c "...main()"`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL_RATIO = 2.0
GOAL_SECONDS = 1.0
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


#: The command line, started the same way for this tree and for ``--before``'s.
LAUNCHER = "import sys; sys.argv[0] = 'jaxport'; from jaxport_cli.main import main; main()"


def refused(argv: list[str], expected: str, env: dict[str, str] | None = None) -> float:
    """Seconds one refused call took; it must exit 9 with ``expected`` in its error line."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env or common.CHILD_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 9 or expected not in err:
        sys.exit(f"benchmarks: `{' '.join(argv)}` exited with {proc.returncode}, expected 9 and {expected!r}:\n{err}")
    return elapsed


def _before_tree(rev: str, tmp: Path) -> dict[str, str]:
    """The environment that runs revision ``rev``'s jaxport: its packages, from ``git archive``, first on the path."""
    tree, packages = tmp / "before-tree", tmp / "before-packages"
    tree.mkdir()
    packages.mkdir()
    archive = subprocess.run(["git", "-C", str(common.REPO), "archive", rev, "jaxport", "cli"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    (packages / "jaxport").symlink_to(tree / "jaxport")
    (packages / "jaxport_cli").symlink_to(tree / "cli")
    return {**common.CHILD_ENV, "PYTHONPATH": str(packages)}


def main() -> None:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--before", metavar="REV")
    known, rest = pre.parse_known_args()
    sys.argv = [sys.argv[0], *rest]
    args = common.parse_args(__doc__.splitlines()[0])
    jaxport = common.jaxport_command()
    rows, ratios, slowest, versus = [], [], 0.0, []
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as tmp:
        artifact = Path(tmp) / "mlp.jaxport"
        subprocess.run([jaxport, "export", str(common.REPO / "examples/mlp/model.py:predict"), "--shapes",
                        str(common.REPO / "examples/mlp/spec.yaml"), "-o", str(artifact)], check=True,
                       stdout=subprocess.DEVNULL)
        floor = common.Contender("import jax", [sys.executable, "-c", "import jax"])
        inspect = common.Contender("jaxport inspect", [jaxport, "inspect", str(artifact)])
        numpy = common.Contender("import numpy", [sys.executable, "-c", "import numpy"])
        calls = []
        for i, (case, array, expected) in enumerate(CASES):
            path = Path(tmp) / f"bad{i}.npy"
            subprocess.run([sys.executable, "-c", f"import numpy as np; np.save({str(path)!r}, {array})"],
                           check=True)
            argv = [sys.executable, "-c", LAUNCHER, "call", str(artifact), "--inputs", str(path), "--no-cache"]
            calls.append((case, expected, common.Contender(f"call ({case})", argv),
                          common.Contender(f"call ({case}), {known.before}", argv)))
        before_env = _before_tree(known.before, Path(tmp)) if known.before else None
        for c in (floor, inspect, numpy):  # untimed round: file cache, __pycache__
            common.run_once(c.argv)
        for _, expected, now, then in calls:
            refused(now.argv, expected)
            if before_env:
                refused(then.argv, expected, before_env)
        for _ in range(args.repeats):
            floor.times.append(common.run_once(floor.argv))
            inspect.times.append(common.run_once(inspect.argv))
            numpy.times.append(common.run_once(numpy.argv))
            for _, expected, now, then in calls:
                now.times.append(refused(now.argv, expected))
                if before_env:
                    then.times.append(refused(then.argv, expected, before_env))
        for case, _, now, then in calls:
            rows.append(common.comparison_row(f"mlp: {case}", floor, now))
            ratios.append(floor.median / now.median)
            slowest = max(slowest, now.median)
            if before_env:
                versus.append(common.comparison_row(f"mlp: {case}", then, now))
    common.print_machine()
    common.print_legend(args.repeats, RATIO)
    print(common.table(["case", "import jax", "jaxport call (refused)", *common.RATIO_HEADERS], rows))
    if versus:
        print(f"\nThe same refusals by jaxport {known.before} (before) and by this tree (now); ratio before / now:\n")
        print(common.table(["case", f"before ({known.before})", "now", *common.RATIO_HEADERS], versus))
    print(f"\nFloors: `python -c \"import numpy\"` {common.seconds(numpy.median)} (min {numpy.best:.3f}); `jaxport "
          f"inspect` of the same artifact (reads the manifest and no input) {common.seconds(inspect.median)} (min "
          f"{inspect.best:.3f}); slowest refusal / inspect: {slowest / inspect.median:.2f}x.")
    worst = min(ratios)
    print(f"\nGoal: a refusal faster than importing JAX alone, by at least {GOAL_RATIO:g}x. Worst ratio of medians "
          f"{worst:.2f}x: goal {'met' if worst >= GOAL_RATIO else 'NOT met'}.")
    print(f"Goal: at most {GOAL_SECONDS:g} s per refusal. Slowest median {slowest:.3f} s: goal "
          f"{'met' if slowest <= GOAL_SECONDS else 'NOT met'}.")


if __name__ == "__main__":
    main()
