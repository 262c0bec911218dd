"""The long fuzzing run of RELIABILITY.md: tests/test_fuzz.py with fresh random examples and many more of them.

    python scripts/fuzz_long.py                 # 20000 examples per property, random seeds
    python scripts/fuzz_long.py --examples 2000 # a shorter run

Prints the number of examples each property ran and the time taken. A failure is shrunk by hypothesis and printed
with its minimal example; add that example to tests/test_fuzz.py (``@example(...)``) or as a case of
tests/test_hostile.py, fix the reader, and rerun.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=20000, help="examples per property (default 20000)")
    ap.add_argument("-k", help="only the properties matching this pytest expression")
    args = ap.parse_args()
    env = {**os.environ, "JAXPORT_FUZZ_EXAMPLES": str(args.examples), "JAXPORT_FUZZ_RANDOM": "1"}
    cmd = [sys.executable, "-m", "pytest", "tests/test_fuzz.py", "-q", "-p", "no:cacheprovider",
           "--hypothesis-show-statistics"]
    if args.k:
        cmd += ["-k", args.k]
    start = time.perf_counter()
    code = subprocess.call(cmd, cwd=REPO, env=env)
    print(f"\nfuzzing: {args.examples} examples per property, {time.perf_counter() - start:.0f} s, "
          f"{'no failures' if code == 0 else 'FAILURES (see above)'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
