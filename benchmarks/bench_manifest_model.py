"""`jaxport inspect` and `manifest.validate` before and after the manifest became records (`artifact/model.py`).

    python benchmarks/bench_manifest_model.py [--quick | --repeats N] [--before REV] [--after REV]

Each side is a source tree: ``--before`` a git revision (default: the parent of the first ``artifact/model.py:``
commit, where ``validate`` returned the parsed JSON), ``--after`` a revision or, by default, the working tree. Both
run with this interpreter and its packages, the tree's own ``jaxport`` and ``jaxport_cli`` first on the path.
Timed: ``jaxport inspect`` and ``inspect --json`` as whole processes on the golden artifacts (interleaved), and,
in one process per side, ``validate`` of a manifest of 200 functions (the golden encoder's, repeated). Goal: the
read path keeps its speed: ``after / before`` at most 1.10 for the whole process.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL = 1.10
RATIO = "after / before"
ARTIFACTS = ["encoder", "mlp-bound"]

# Drops the editable install's finder (which would map ``jaxport`` to this checkout), so that the tree first on
# ``sys.path`` is the one imported; the processes run in a scratch directory, so that ``python -c`` does not put
# the checkout itself first.
OWN_TREE = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
            "if not type(f).__module__.startswith('__editable__')]\n")
# Runs the command-line ``main`` of that tree.
CLI = OWN_TREE + "from jaxport_cli.main import main; sys.argv[0] = 'jaxport'; main()"

# Times ``validate`` on a manifest of many functions: the golden encoder's function, 200 times over.
VALIDATE = OWN_TREE + """
import json, sys, time, zipfile
from jaxport.artifact import manifest
raw = json.loads(zipfile.ZipFile(sys.argv[1]).read("manifest.json"))
(f,) = raw["functions"].values()
raw["functions"] = {f"f{i}": f for i in range(200)}
text = json.dumps(raw)
best = []
for _ in range(int(sys.argv[2])):
    m = json.loads(text)
    start = time.perf_counter()
    manifest.validate(m)
    best.append(time.perf_counter() - start)
best.sort()
print(best[len(best) // 2])
"""


def _tree(rev: str | None, tmp: Path, label: str) -> Path:
    """A directory whose ``jaxport`` and ``jaxport_cli`` are those of ``rev`` (None: the working tree)."""
    root = tmp / label
    root.mkdir()
    if rev is None:
        source = common.REPO
    else:
        source = tmp / f"{label}-src"
        source.mkdir()
        archive = subprocess.run(["git", "-C", str(common.REPO), "archive", rev, "jaxport", "cli"], check=True,
                                 capture_output=True).stdout
        archive_path = tmp / f"{label}.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(source, filter="data")
    (root / "jaxport").symlink_to(source / "jaxport")
    (root / "jaxport_cli").symlink_to(source / "cli")
    return root


def _default_before() -> str:
    first = subprocess.run(["git", "-C", str(common.REPO), "log", "--reverse", "--format=%H", "--grep",
                            "^artifact/model.py:"], check=True, capture_output=True, text=True).stdout.split()
    if not first:
        sys.exit("benchmarks: no 'artifact/model.py:' commit in this repository's history; give --before REV.")
    return f"{first[0]}^"


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repetition (a smoke run)")
    parser.add_argument("--repeats", type=int, default=common.FULL_REPEATS)
    parser.add_argument("--before", default=None, help="git revision of the 'before' side")
    parser.add_argument("--after", default=None, help="git revision of the 'after' side (default: working tree)")
    args = parser.parse_args()
    repeats = common.QUICK_REPEATS if args.quick else args.repeats
    before_rev = args.before or _default_before()
    rows, ratios, validate_rows = [], [], []
    with tempfile.TemporaryDirectory(prefix="jaxport-bench-") as name:
        tmp = Path(name)
        trees = {"before": _tree(before_rev, tmp, "before"), "after": _tree(args.after, tmp, "after")}
        env = {label: {**common.CHILD_ENV, "PYTHONPATH": str(tree)} for label, tree in trees.items()}
        for art in ARTIFACTS:
            path = common.REPO / "tests" / "golden" / "1.0" / f"{art}.jaxport"
            for extra in ([], ["--json"]):
                sides = [common.Contender(label, [sys.executable, "-c", CLI, "inspect", *extra, str(path)])
                         for label in trees]
                for _ in range(1 + repeats):  # one untimed round first, as common.interleave does
                    for side in sides:
                        start = time.perf_counter()
                        subprocess.run(side.argv, env=env[side.label], cwd=tmp, check=True,
                                       stdout=subprocess.DEVNULL)
                        side.times.append(time.perf_counter() - start)
                for side in sides:
                    del side.times[0]
                before, after = sides
                rows.append(common.comparison_row(f"{art}: `inspect{' ' + extra[0] if extra else ''}`", after, before))
                ratios.append(after.median / before.median)
        golden = common.REPO / "tests" / "golden" / "1.0" / "encoder.jaxport"
        for label in trees:
            out = subprocess.run([sys.executable, "-c", VALIDATE, str(golden), str(max(5, repeats * 5))],
                                 env=env[label], cwd=tmp, check=True, capture_output=True, text=True).stdout
            validate_rows.append(float(out))
    common.print_machine()
    print(f"before: {before_rev}; after: {args.after or 'the working tree'}\n")
    common.print_legend(repeats, RATIO)
    print(common.table(["case", "after", "before", *common.RATIO_HEADERS], rows))
    before_v, after_v = validate_rows
    print(f"\n`validate`, 200 functions (median of {max(5, repeats * 5)}): before {before_v * 1e3:.2f} ms, after "
          f"{after_v * 1e3:.2f} ms ({after_v / before_v:.2f}x; after builds the records too).")
    worst = max(ratios)
    print(f"\nGoal: `inspect` at most {GOAL:.2f}x the time it took before. Worst ratio of medians {worst:.2f}x: goal "
          f"{'met' if worst <= GOAL else 'NOT met'}.")


if __name__ == "__main__":
    main()
