"""Helpers shared by the benchmarks: interleaved whole-process timing, the machine, markdown tables.

Absolute times on a shared machine drift with whatever else runs on it, so the contenders of one comparison
run interleaved (A B A B ...) in the same loop and only the ratio of their medians is read as the result.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent

FULL_REPEATS = 10
QUICK_REPEATS = 1

#: The environment of every timed process: this one's, except that Python may cache bytecode, as it does by default
#: (with PYTHONDONTWRITEBYTECODE set, every process would compile jaxport's modules from source again).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def jaxport_command() -> str:
    """The ``jaxport`` console script installed next to the running interpreter (the venv's bin)."""
    beside = Path(sys.executable).parent / "jaxport"
    if beside.exists():
        return str(beside)
    found = shutil.which("jaxport")
    if found is None:
        sys.exit("benchmarks: no `jaxport` console script beside this Python or on PATH; run `pip install -e .`.")
    return found


def parse_args(description: str, full: int = FULL_REPEATS, quick: int = QUICK_REPEATS) -> argparse.Namespace:
    """``--quick`` (a smoke run for CI: ``quick`` repetitions, smaller cases) or ``--repeats N``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help=f"{quick} repetition(s) instead of {full}, and smaller cases where a benchmark has "
                             f"them (a smoke run for CI; the ratios are not meant to be read).")
    parser.add_argument("--repeats", type=int, help="Interleaved repetitions per contender (overrides the default).")
    args = parser.parse_args()
    if args.repeats is None:
        args.repeats = quick if args.quick else full
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


@dataclass
class Contender:
    """One command line, timed as a whole process."""

    label: str
    argv: list[str]
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def best(self) -> float:
        return min(self.times)


def run_once(argv: list[str], cwd: Path | None = None) -> float:
    """Seconds from start to exit of one process; its output is discarded and a failure stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=CHILD_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"benchmarks: `{' '.join(argv)}` exited with {proc.returncode}:\n"
                 f"{proc.stderr.decode(errors='replace')}")
    return elapsed


def run_capture(argv: list[str], cwd: Path | None = None) -> tuple[float, str]:
    """Like :func:`run_once`, but returns the process's stdout too (for commands that report with ``--json``)."""
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=CHILD_ENV, capture_output=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"benchmarks: `{' '.join(argv)}` exited with {proc.returncode}:\n"
                 f"{proc.stderr.decode(errors='replace')}")
    return elapsed, proc.stdout.decode()


TIME_V = "/usr/bin/time"

# A fresh parent per measurement: RUSAGE_CHILDREN's ru_maxrss is the largest child the caller ever waited for.
_MAXRSS_PARENT = """
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)
sys.stdout.write(out.stdout.decode())
print("\\n", out.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_rss(argv: list[str], cwd: Path | None = None) -> tuple[int, str]:
    """Peak resident set size of one process in bytes, and its stdout: GNU ``time -v`` when installed, else
    ``ru_maxrss`` read by a fresh Python parent (both report the kernel's high-water mark of the child's RSS)."""
    if os.access(TIME_V, os.X_OK):
        proc = subprocess.run([TIME_V, "-v", *argv], cwd=cwd, env=CHILD_ENV, capture_output=True)
        err = proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            sys.exit(f"benchmarks: `{' '.join(argv)}` exited with {proc.returncode}:\n{err}")
        for line in err.splitlines():
            if "Maximum resident set size" in line:
                return int(line.rsplit(":", 1)[1]) * 1024, proc.stdout.decode()
        sys.exit(f"benchmarks: {TIME_V} -v printed no maximum resident set size:\n{err}")
    out = subprocess.run([sys.executable, "-c", _MAXRSS_PARENT, *argv], cwd=cwd, env=CHILD_ENV, check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    text, _, last = out.rstrip().rpartition("\n")
    rc, kilobytes = last.split()
    if rc != "0":
        sys.exit(f"benchmarks: `{' '.join(argv)}` exited with {rc}")
    return int(kilobytes) * 1024, text  # ru_maxrss is in kilobytes on Linux


def rss_method() -> str:
    return f"GNU `{TIME_V} -v`" if os.access(TIME_V, os.X_OK) else "`getrusage(RUSAGE_CHILDREN).ru_maxrss`"


def interleave(contenders: list[Contender], repeats: int, cwd: Path | None = None, warmup: bool = True) -> None:
    """Run each contender ``repeats`` times in the order A B A B ..., appending to ``Contender.times``.

    One untimed round first fills the OS file cache and ``__pycache__`` so that no contender pays for it alone.
    """
    if warmup:
        for c in contenders:
            run_once(c.argv, cwd)
    for _ in range(repeats):
        for c in contenders:
            c.times.append(run_once(c.argv, cwd))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, str]:
    """What the numbers were measured on (read without importing JAX)."""
    return {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "ram": _ram(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "jax": _package_version("jax"),
        "jaxlib": _package_version("jaxlib"),
        "jaxport": _package_version("jaxport"),
    }


def print_machine() -> None:
    m = machine()
    print(f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram']} RAM, {m['os']}; "
          f"Python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, jaxport {m['jaxport']}.")


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table, columns padded so that it also reads as plain text."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def seconds(t: float) -> str:
    return f"{t:.3f} s"


def megabytes(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def comparison_row(case: str, numerator: Contender, denominator: Contender) -> list[str]:
    """A row: both medians (and minima), the ratio of the medians ``numerator / denominator``, and the median of
    the ratios of the interleaved pairs (each pair ran back to back, so drift in the machine's load cancels)."""
    pairs = statistics.median(n / d for n, d in zip(numerator.times, denominator.times))
    return [
        case,
        f"{seconds(numerator.median)} (min {numerator.best:.3f})",
        f"{seconds(denominator.median)} (min {denominator.best:.3f})",
        f"{numerator.median / denominator.median:.2f}x",
        f"{pairs:.2f}x",
    ]


RATIO_HEADERS = ["ratio (medians)", "ratio (paired)"]


def print_legend(repeats: int, ratio: str) -> None:
    print(f"Interleaved repetitions: {repeats}. Times: median (min). Ratio: {ratio}, as the ratio of the medians "
          f"and as the median of the ratios of back-to-back pairs.\n")
