"""`jaxport inspect` as a whole process vs a Python process that imports JAX and deserializes the same payload.

    python benchmarks/bench_inspect.py [--quick | --repeats N]

Goals: `jaxport inspect` at least 10x faster than the baseline (ratio = baseline / jaxport; issue 16, was 5x in
issue 2) and at most 0.25 s as a whole process; `inspect --json` faster still.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL = 10.0
GOAL_SECONDS = 0.25
RATIO = "baseline / jaxport"

# (case, entry point, spec, function name inside the artifact)
CASES = [
    ("mlp", "examples/mlp/model.py:predict", "examples/mlp/spec.yaml", "predict"),
    ("transformer", "benchmarks/models/transformer.py:encode", "benchmarks/models/transformer.yaml", "encode"),
]

# The least a user does to look inside a jax.export serialization without jaxport: open the zip, read the
# member, deserialize it and print its signature.
BASELINE = """
import sys, zipfile
import jax
from jax import export
with zipfile.ZipFile(sys.argv[1]) as z:
    exported = export.deserialize(bytearray(z.read(sys.argv[2])))
print(exported.fun_name, exported.in_avals, exported.out_avals, exported.platforms)
"""


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0])
    jaxport = common.jaxport_command()
    rows, ratios, worst_seconds, json_faster = [], [], 0.0, True
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as tmp:
        for case, entrypoint, spec, fname in CASES:
            artifact = Path(tmp) / f"{case}.jaxport"
            subprocess.run([jaxport, "export", str(common.REPO / entrypoint), "--shapes", str(common.REPO / spec),
                            "-o", str(artifact)], check=True, stdout=subprocess.DEVNULL)
            baseline = common.Contender("import jax + deserialize",
                                        [sys.executable, "-c", BASELINE, str(artifact), f"functions/{fname}.jaxexport"])
            human = common.Contender("jaxport inspect", [jaxport, "inspect", str(artifact)])
            as_json = common.Contender("jaxport inspect --json", [jaxport, "inspect", "--json", str(artifact)])
            common.interleave([baseline, human, as_json], args.repeats)
            rows.append(common.comparison_row(f"{case}: `inspect`", baseline, human))
            rows.append(common.comparison_row(f"{case}: `inspect --json`", baseline, as_json))
            ratios += [baseline.median / human.median, baseline.median / as_json.median]
            worst_seconds = max(worst_seconds, human.median, as_json.median)
            json_faster = json_faster and as_json.median < human.median
    common.print_machine()
    common.print_legend(args.repeats, RATIO)
    print(common.table(["case", "baseline (import jax + deserialize)", "jaxport", *common.RATIO_HEADERS], rows))
    worst = min(ratios)
    verdict = "met" if worst >= GOAL else "NOT met"
    print(f"\nGoal: at least {GOAL:g}x faster. Worst ratio of medians {worst:.2f}x: goal {verdict}.")
    print(f"Goal: at most {GOAL_SECONDS:g} s per process. Slowest median {worst_seconds:.3f} s: goal "
          f"{'met' if worst_seconds <= GOAL_SECONDS else 'NOT met'}. `--json` faster than the table in every case: "
          f"{'yes' if json_faster else 'no'}.")


if __name__ == "__main__":
    main()
