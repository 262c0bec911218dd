"""Run the hostile corpus through the real command line and classify every outcome.

    python -m tests.hostile.run                  # every case in-process, a sample as subprocesses, the kill points
    python -m tests.hostile.run --sample 300     # a stratified sample (what the test suite runs)
    python -m tests.hostile.run --list           # the classes and their case counts
    python -m tests.hostile.run --json out.json  # also write every failure and the table as JSON
    python -m tests.hostile.run --no-faults      # skip the writer kill points (tests/hostile/faults.py)

Each (case, command) pair ends in one of:

- rejected: a documented exit code for the case's kind and exactly one line on stderr, ``error[KIND]: ...``;
- accepted: success, for a case whose mutation leaves a valid artifact or input (the case says why);
- failure: anything else: exit 1 (an internal error), an undocumented code, a traceback, a message that is not one
  line, a hostile file accepted, a canary created, a file written where none was asked for, a terminal control
  character from the file printed, and, in a subprocess, death by a signal or a peak memory above the bound;
- known: a failure outside the readers, listed with its cause in RELIABILITY.md.

Commands run in-process through click's runner (fast); a sample also runs as real ``jaxport`` processes, to catch
signal deaths and to measure peak memory. The exit status is 1 when any failure was found.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .corpus import CANARY, MODEL, SPEC_BIND_HOSTILE, Base, Case, build

#: Commands per kind: (label, argv with {file}).
COMMANDS: dict[str, list[tuple[str, list[str]]]] = {
    "artifact": [("inspect", ["inspect", "{file}"]), ("mlir", ["inspect", "--mlir", "{file}"]),
                 ("call", ["call", "{file}", "--random", "--no-cache"])],
    "npy": [("call", ["call", "base.jaxport", "--inputs", "{file}", "--no-cache"])],
    "npz": [("call", ["call", "base.jaxport", "--inputs", "{file}", "--no-cache"])],
    "spec": [("export", ["export", "model.py:g", "--shapes", "{file}", "-o", "out.jaxport"])],
    "bind": [("export", ["export", "model.py:f", "--shapes", "spec-bind.yaml", "-o", "out.jaxport"])],
}
#: Files a successful command may create.
OUTPUTS = {"export": {"out.jaxport", "out.jaxport.manifest.json"}}
#: Peak resident memory allowed to a subprocess, by command (bytes): inspect never imports JAX.
MEMORY_BOUND = {"inspect": 256 << 20, "mlir": 2 << 30, "call": 2 << 30, "export": 2 << 30}
ERROR_LINE = re.compile(r"^error\[[a-z][a-z-]*\]: \S.*$")


@dataclass
class Result:
    case: Case
    command: str
    status: str  # rejected, accepted, failure, known (a failure outside the readers, listed in RELIABILITY.md)
    detail: str = ""
    exit_code: int | None = None
    peak_rss: int | None = None
    subprocess: bool = False


@dataclass
class Report:
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.status == "failure"]

    def table(self) -> str:
        rows: dict[str, Counter[str]] = defaultdict(Counter)
        cases: dict[str, set[str]] = defaultdict(set)
        for r in self.results:
            rows[r.case.cls][r.status] += 1
            cases[r.case.cls].add(r.case.name)
        cols = ("rejected", "accepted", "failure", "known")
        head = (f"| {'class':<22} | {'cases':>5} | {'runs':>5} | {'rejected':>8} | {'accepted':>8} | {'failures':>8} "
                f"| {'known':>5} |")
        lines = [head, "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"]
        total: Counter[str] = Counter()
        ncases = 0

        def row(name: str, n: int, c: Counter[str]) -> str:
            return (f"| {name:<22} | {n:>5} | {sum(c.values()):>5} | {c[cols[0]]:>8} | {c[cols[1]]:>8} | "
                    f"{c[cols[2]]:>8} | {c[cols[3]]:>5} |")

        for cls in rows:
            total.update(rows[cls])
            ncases += len(cases[cls])
            lines.append(row(cls, len(cases[cls]), rows[cls]))
        lines.append(row("total", ncases, total))
        return "\n".join(lines)

    @property
    def known(self) -> list[Result]:
        return [r for r in self.results if r.status == "known"]


# --- one run ------------------------------------------------------------------------------------------------------


def _prepare(case: Case, base: Base, d: Path) -> list[str]:
    d.mkdir(parents=True)
    (d / "model.py").write_text(MODEL)
    if case.kind in ("npy", "npz"):
        shutil.copyfile(base.dir / "base.jaxport", d / "base.jaxport")
    if case.kind == "bind":
        (d / "spec-bind.yaml").write_text(SPEC_BIND_HOSTILE.format(file=case.filename))
    (d / case.filename).write_bytes(case.data)
    return []


def _snapshot(d: Path) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        rel = Path(root).relative_to(d)
        out.update(str(rel / f) for f in files)
        out.update(str(rel / x) + "/" for x in dirs)
    return out


def classify(case: Case, command: str, code: int | None, stderr: str, stdout: str, *, crashed: str = "",
             created: Iterable[str] = (), canary: bool = False) -> tuple[str, str]:
    status, detail = _classify(case, command, code, stderr, stdout, crashed=crashed, created=created, canary=canary)
    if case.known:
        if status == "failure":
            return "known", f"{detail} (known: {case.known})"
        return "failure", f"a known failure is fixed ({case.known}): remove 'known' from the case"
    return status, detail


def _classify(case: Case, command: str, code: int | None, stderr: str, stdout: str, *, crashed: str = "",
              created: Iterable[str] = (), canary: bool = False) -> tuple[str, str]:
    if canary:
        return "failure", "canary triggered: something in the file was executed"
    if crashed:
        return "failure", crashed
    if "Traceback (most recent call last)" in stderr + stdout:
        return "failure", "traceback printed"
    unexpected = sorted(set(created) - (OUTPUTS.get(command, set()) if code == 0 else set()))
    if unexpected:
        return "failure", f"wrote {', '.join(unexpected[:3])}"
    if "\x1b" in stdout + stderr or "\x07" in stdout + stderr:
        return "failure", "control characters from the file reached the terminal"
    if code == 0:
        if command in case.accept:
            return "accepted", case.why
        return "failure", "accepted a hostile file"
    lines = stderr.strip().splitlines()
    if code not in case.codes:
        return "failure", f"exit code {code}: {lines[-1][:300] if lines else '(no message)'}"
    if len(lines) != 1 or not ERROR_LINE.match(lines[0]):
        return "failure", f"error message is not one 'error[kind]: ...' line: {stderr.strip()[:300]!r}"
    return "rejected", lines[0]


def run_in_process(case: Case, base: Base, scratch: Path, index: int) -> list[Result]:
    from click.testing import CliRunner
    from jaxport_cli.main import cli

    out = []
    for command, argv in COMMANDS[case.kind]:
        d = scratch / f"{index}-{command}"
        _prepare(case, base, d)
        before, around = _snapshot(d), set(os.listdir(scratch))
        cwd = os.getcwd()
        os.chdir(d)
        try:
            result = CliRunner().invoke(cli, [a.format(file=case.filename) for a in argv], catch_exceptions=True)
        finally:
            os.chdir(cwd)
        crashed = ""
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            crashed = f"uncaught {type(result.exception).__name__}: {str(result.exception)[:200]}"
        created = (_snapshot(d) - before) | {f"../{x}" for x in set(os.listdir(scratch)) - around - {d.name}}
        status, detail = classify(case, command, result.exit_code, result.stderr, result.stdout, crashed=crashed,
                                  created=created, canary=(d / CANARY).exists() or (scratch / CANARY).exists())
        out.append(Result(case, command, status, detail, result.exit_code))
        shutil.rmtree(d, ignore_errors=True)
    return out


def jaxport_command() -> list[str]:
    return [sys.executable, "-c", "from jaxport_cli.main import main; main()"]


#: A small wrapper process that runs the command and reports its exit status and peak memory: measured from a
#: child of this process instead, the peak would include this (large) process, which Linux carries over at fork.
_MEASURE = """
import json, os, resource, subprocess, sys
p = subprocess.run(sys.argv[2:])
json.dump({"returncode": p.returncode, "maxrss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss},
          open(sys.argv[1], "w"))
"""


def run_subprocess(case: Case, base: Base, scratch: Path, index: int, timeout: float = 300) -> list[Result]:
    out = []
    for command, argv in COMMANDS[case.kind]:
        d = scratch / f"{index}-{command}-sub"
        _prepare(case, base, d)
        before, around = _snapshot(d), set(os.listdir(scratch))
        status = scratch / f"{d.name}.status"
        cmd = [sys.executable, "-c", _MEASURE, str(status), *jaxport_command(),
               *[a.format(file=case.filename) for a in argv]]
        crashed, code, peak, stdout, stderr = "", None, None, "", ""
        try:
            p = subprocess.run(cmd, cwd=d, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout,
                               start_new_session=True)
            stdout, stderr = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
            measured = json.loads(status.read_text())
            code, peak = measured["returncode"], measured["maxrss"] * 1024
            if code < 0:
                crashed, code = f"killed by signal {-code}", None
        except subprocess.TimeoutExpired:
            crashed = f"still running after {timeout:.0f} s"
        status.unlink(missing_ok=True)
        if not crashed and peak is not None and peak > MEMORY_BOUND[command]:
            crashed = f"peak memory {peak >> 20} MiB above the {MEMORY_BOUND[command] >> 20} MiB bound"
        created = (_snapshot(d) - before) | {f"../{x}" for x in set(os.listdir(scratch)) - around - {d.name}}
        st, detail = classify(case, command, code, stderr, stdout, crashed=crashed, created=created,
                              canary=(d / CANARY).exists())
        out.append(Result(case, command, st, detail, code, peak, subprocess=True))
        shutil.rmtree(d, ignore_errors=True)
    return out


# --- sampling and the whole run ------------------------------------------------------------------------------------


def sample(cases: list[Case], n: int, seed: int = 0) -> list[Case]:
    """About ``n`` cases, every class represented: round-robin over the classes in a seeded order."""
    if n >= len(cases):
        return list(cases)
    rng = random.Random(seed)
    by_class: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        by_class[c.cls].append(c)
    for group in by_class.values():
        rng.shuffle(group)
    chosen: list[Case] = []
    while len(chosen) < n:
        for group in by_class.values():
            if group and len(chosen) < n:
                chosen.append(group.pop())
    return chosen


def run(base: Base, cases: list[Case], scratch: Path, subprocess_cases: list[Case] = (),
        progress: bool = False) -> Report:
    report = Report()
    start = time.perf_counter()
    for i, case in enumerate(cases):
        report.results += run_in_process(case, base, scratch, i)
        if progress and i % 200 == 0:
            print(f"  {i}/{len(cases)} cases, {len(report.failures)} failures", file=sys.stderr, flush=True)
    for i, case in enumerate(subprocess_cases):
        report.results += run_subprocess(case, base, scratch, i)
        if progress and i % 10 == 0:
            print(f"  subprocess {i}/{len(subprocess_cases)}", file=sys.stderr, flush=True)
    report.seconds = time.perf_counter() - start
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.hostile.run", description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, help="run a stratified sample of this many cases (default: all)")
    ap.add_argument("--subprocess", type=int, default=60, help="cases also run as real processes (default 60)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the samples")
    ap.add_argument("--class", dest="classes", action="append", help="only this class (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the classes and case counts, run nothing")
    ap.add_argument("--json", type=Path, help="write the table and every failure to this file")
    ap.add_argument("--no-faults", action="store_true", help="skip the writer kill points")
    args = ap.parse_args(argv)

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    scratch = Path(tempfile.mkdtemp(prefix="jaxport-hostile-"))
    try:
        t0 = time.perf_counter()
        base, cases = build(scratch / "base")
        print(f"corpus: {len(cases)} cases in {len(set(c.cls for c in cases))} classes, built in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        if args.classes:
            cases = [c for c in cases if c.cls in args.classes]
        if args.list:
            for cls, n in Counter(c.cls for c in cases).items():
                print(f"{cls:<24} {n:>5}")
            return 0
        chosen = sample(cases, args.sample, args.seed) if args.sample else cases
        sub = sample(cases, args.subprocess, args.seed + 1)
        report = run(base, chosen, scratch / "runs", sub, progress=True)
        kills = [] if args.no_faults else run_faults(base, scratch / "faults")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(report.table())
    if kills:
        print()
        print(faults_table(kills))
    n_sub = sum(1 for r in report.results if r.subprocess)
    peaks = {c: max((r.peak_rss or 0 for r in report.results if r.subprocess and r.command == c), default=0)
             for c in MEMORY_BOUND}
    shown = ", ".join(f"{c} {p >> 20} MiB" for c, p in peaks.items() if p)
    print(f"\n{len(report.results)} runs ({n_sub} as subprocesses; peak memory {shown or 'not measured'}) in "
          f"{report.seconds:.0f} s; {len(report.failures)} failures")
    for r in report.failures[:50]:
        print(f"FAIL {r.case.id} [{r.command}{' subprocess' if r.subprocess else ''}]: {r.detail}")
    for r in report.known:
        print(f"KNOWN {r.case.id} [{r.command}{' subprocess' if r.subprocess else ''}]: {r.detail}")
    if args.json:
        args.json.write_text(json.dumps({
            "table": report.table(), "runs": len(report.results), "failures": [
                {"case": r.case.id, "command": r.command, "subprocess": r.subprocess, "detail": r.detail}
                for r in report.failures],
            "accepted": sorted({f"{r.case.id} [{r.command}]: {r.detail}" for r in report.results
                                if r.status == "accepted"}),
            "rejected": sorted({f"{r.case.id} [{r.command}]: {r.detail}" for r in report.results
                                if r.status == "rejected"}),
            "faults": [k.__dict__ for k in kills]}, indent=2))
    return 1 if report.failures or any(k.problems for k in kills) else 0


def run_faults(base: Base, scratch: Path) -> list:
    from . import faults

    print("  kill points of the writers...", file=sys.stderr, flush=True)
    out = []
    for i, job in enumerate((lambda d: faults.kill_artifact_writer(d, base.dir / "base.jaxport", True),
                             lambda d: faults.kill_artifact_writer(d, base.dir / "base.jaxport", False),
                             faults.kill_output_writer)):
        d = scratch / str(i)
        d.mkdir(parents=True)
        out.append(job(d))
    return out


def faults_table(kills: list) -> str:
    head = (f"| {'writer killed at every step':<38} | {'kill points':>11} | {'old kept':>8} | {'absent':>6} | "
            f"{'new, complete':>13} | {'partial':>7} | {'temporaries removed':>19} |")
    lines = [head, "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"]
    for k in kills:
        lines.append(f"| {k.writer:<38} | {k.points:>11} | {k.old:>8} | {k.absent:>6} | {k.new:>13} | "
                     f"{len(k.problems):>7} | {k.temporaries_removed:>19} |")
    for k in kills:
        for p in k.problems:
            lines.append(f"FAIL {k.writer}: {p}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
