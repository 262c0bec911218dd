"""`jaxport export` as a whole process vs a minimal script doing `jax.export` + serialize + write.

    python benchmarks/bench_export.py [--quick | --repeats N]

Goals: `jaxport export` takes at most 1.15x the baseline's time (ratio = jaxport / baseline), and (issue 48) the
example MLP's at most 1.0x the baseline's and at most 1.05x the baseline that skips the exit-time garbage collection
(`--freeze`). The baseline is benchmarks/baseline_export.py; it lowers the same function with the same symbolic shapes
and bounds. The transformer's ratios are reported beside the MLP's.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL = 1.15
MLP_GOAL = 1.0
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
    rows, ratios, frozen_ratios = [], {}, {}
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
            ratios[case] = ours.median / baseline.median
            frozen_ratios[case] = ours.median / frozen.median
    common.print_machine()
    common.print_legend(args.repeats, RATIO)
    print(common.table(["case", "jaxport export", "baseline (jax.export + serialize + write)",
                        *common.RATIO_HEADERS], rows))
    worst = max(ratios.values())
    verdict = "met" if worst <= GOAL else "NOT met"
    print(f"\nGoal: at most {GOAL:g}x. Worst ratio of medians {worst:.2f}x: goal {verdict}.")
    plain, frozen_mlp = ratios["mlp"], frozen_ratios["mlp"]
    verdict = "met" if plain <= MLP_GOAL and frozen_mlp <= FROZEN_GOAL else "NOT met"
    print(f"Goal of issue 48 for the example MLP: at most {MLP_GOAL:g}x the baseline ({plain:.2f}x) and at most "
          f"{FROZEN_GOAL:g}x the baseline that freezes the garbage collector as jaxport does ({frozen_mlp:.2f}x): "
          f"goal {verdict}. The transformer: {ratios['transformer']:.2f}x and {frozen_ratios['transformer']:.2f}x.")


if __name__ == "__main__":
    main()
