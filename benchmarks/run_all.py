"""Run every benchmark in turn: `python benchmarks/run_all.py [--quick | --repeats N]` (what `make bench` runs)."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["bench_inspect.py", "bench_export.py"]


def main() -> None:
    for script in SCRIPTS:
        print(f"## {script}\n", flush=True)
        subprocess.run([sys.executable, str(HERE / script), *sys.argv[1:]], check=True)
        print(flush=True)


if __name__ == "__main__":
    main()
