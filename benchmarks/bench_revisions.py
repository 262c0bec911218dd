"""`jaxport inspect` and a first `jaxport call` of this working tree against another revision of jaxport, side by side.

    python benchmarks/bench_revisions.py --base REV [--quick | --repeats N]

A refactor must not make the commands users start most often slower (issue 34: "inspect and the first call no
slower"). The other revision is checked out with ``git worktree`` into a temporary directory and run by the same
interpreter, its ``jaxport`` and ``jaxport_cli`` packages imported from there (a launcher puts them first on the
import path); both run interleaved (A B A B ...) on the same artifact, exported once by this tree, with the same
warm compilation cache. Ratio = base / this tree (above 1: this tree is faster); goal: at least 0.95 for each.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

GOAL = 0.95
RATIO = "base / this tree"

#: Runs the command line of the jaxport whose source directory is argv[1] (``jaxport/`` and ``cli/`` in it).
LAUNCHER = """
import importlib.util, sys
root = sys.argv.pop(1)
sys.path.insert(0, root)
spec = importlib.util.spec_from_file_location("jaxport_cli", root + "/cli/__init__.py",
                                              submodule_search_locations=[root + "/cli"])
module = importlib.util.module_from_spec(spec)
sys.modules["jaxport_cli"] = module
spec.loader.exec_module(module)
from jaxport_cli.main import main
sys.argv[0] = "jaxport"
sys.exit(main())
"""


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="The revision to compare with (a commit, tag or branch).")
    parser.add_argument("--quick", action="store_true", help="One repetition (a smoke run).")
    parser.add_argument("--repeats", type=int, default=None, help="Interleaved repetitions (default 10).")
    args = parser.parse_args()
    args.repeats = args.repeats or (1 if args.quick else 10)
    return args


def main() -> int:
    args = _args()
    common.print_machine()
    with tempfile.TemporaryDirectory(prefix="jaxport-revisions-") as tmp:
        work = Path(tmp)
        base = work / "base"
        subprocess.run(["git", "-C", str(common.REPO), "worktree", "add", "--detach", "-q", str(base), args.base],
                       check=True)
        try:
            return _compare(args, work, base)
        finally:
            subprocess.run(["git", "-C", str(common.REPO), "worktree", "remove", "--force", str(base)], check=True)


def _compare(args: argparse.Namespace, work: Path, base: Path) -> int:
    artifact, x, cache = work / "mlp.jaxport", common.REPO / "examples" / "mlp" / "x.npy", work / "cache"
    here = [sys.executable, "-c", LAUNCHER, str(common.REPO)]
    there = [sys.executable, "-c", LAUNCHER, str(base)]
    subprocess.run([*here, "export", "examples/mlp/model.py:predict", "--shapes", "examples/mlp/spec.yaml", "-o",
                    str(artifact)], cwd=common.REPO, check=True, stdout=subprocess.DEVNULL)
    commands = {
        "inspect": ["inspect", str(artifact)],
        "inspect --json": ["inspect", "--json", str(artifact)],
        "first call (warm cache)": ["call", str(artifact), "--inputs", str(x), "--cache-dir", str(cache)],
    }
    rows = []
    for name, argv in commands.items():
        pair = [common.Contender("base", [*there, *argv]), common.Contender("this tree", [*here, *argv])]
        common.interleave(pair, args.repeats, cwd=work)
        old, new = pair
        ratio = old.median / new.median
        rows.append([name, f"{old.median:.3f} s (min {old.best:.3f})", f"{new.median:.3f} s (min {new.best:.3f})",
                     f"{ratio:.2f}x", "yes" if ratio >= GOAL else "no"])
    print(f"\nBase {args.base}, {args.repeats} interleaved rounds, medians; ratio = {RATIO}, goal >= {GOAL}.\n")
    print(common.table(["command", "base", "this tree", "ratio", "met"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
