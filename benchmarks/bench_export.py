"""`jaxport export` as a whole process vs a minimal script doing `jax.export` + serialize + write.

    python benchmarks/bench_export.py [--quick | --repeats N]

Goal: `jaxport export` takes at most 1.15x the baseline's time (ratio = jaxport / baseline). The baseline is
benchmarks/baseline_export.py; it lowers the same function with the same symbolic shapes and bounds.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL = 1.15
FROZEN_GOAL = 1.05
RATIO = "jaxport / baseline"

# (case, entry point, spec)
CASES = [
    ("mlp", "examples/mlp/model.py:predict", "examples/mlp/spec.yaml"),
    ("transformer", "benchmarks/models/transformer.py:encode", "benchmarks/models/transformer.yaml"),
]


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0])
    jaxport = common.jaxport_command()
    rows, ratios, frozen_ratios = [], [], []
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as tmp:
        for case, entrypoint, spec in CASES:
            baseline = common.Contender("baseline", [sys.executable, str(common.BENCH_DIR / "baseline_export.py"),
                                                     case, str(Path(tmp) / f"{case}.bin")])
            frozen = common.Contender("baseline, gc frozen", [*baseline.argv, "--freeze"])
            ours = common.Contender("jaxport export", [jaxport, "export", str(common.REPO / entrypoint),
                                                       "--shapes", str(common.REPO / spec),
                                                       "-o", str(Path(tmp) / f"{case}.jaxport")])
            common.interleave([baseline, frozen, ours], args.repeats)
            rows.append(common.comparison_row(case, ours, baseline))
            rows.append(common.comparison_row(f"{case} (gc frozen)", ours, frozen))
            ratios.append(ours.median / baseline.median)
            frozen_ratios.append(ours.median / frozen.median)
    common.print_machine()
    common.print_legend(args.repeats, RATIO)
    print(common.table(["case", "jaxport export", "baseline (jax.export + serialize + write)",
                        *common.RATIO_HEADERS], rows))
    worst = max(ratios)
    verdict = "met" if worst <= GOAL else "NOT met"
    print(f"\nGoal: at most {GOAL:g}x. Worst ratio of medians {worst:.2f}x: goal {verdict}.")
    worst = max(frozen_ratios)
    verdict = "met" if worst <= FROZEN_GOAL else "NOT met"
    print(f"Goal against the baseline that freezes the garbage collector as jaxport does (issue 48): at most "
          f"{FROZEN_GOAL:g}x. Worst ratio of medians {worst:.2f}x: goal {verdict}.")


if __name__ == "__main__":
    main()
