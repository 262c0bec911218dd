"""Run every benchmark in turn: `python benchmarks/run_all.py [--quick | --repeats N]` (what `make bench` runs).

Timings never fail the run (a shared machine is too noisy for that); a benchmark that cannot run does. `--quick`
is a smoke run for CI (about three minutes on 2 cores); without it, about ten minutes. `--repeats N` is passed to
every script, and each reads it as its own number of rounds.
"""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["bench_inspect.py", "bench_export.py", "bench_call.py", "bench_weights.py", "bench_sharded.py",
           "bench_first_call.py", "export_bound.py", "bench_wrong_input.py"]


def main() -> None:
    failed = []
    for script in SCRIPTS:
        print(f"## {script}\n", flush=True)
        if subprocess.run([sys.executable, str(HERE / script), *sys.argv[1:]]).returncode != 0:
            failed.append(script)
        print(flush=True)
    if failed:
        sys.exit(f"benchmarks that did not run: {', '.join(failed)}")


if __name__ == "__main__":
    main()
