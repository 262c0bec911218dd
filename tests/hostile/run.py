"""Run the hostile corpus through the real command line and classify every outcome.

    python -m tests.hostile.run                  # every case in-process, a sample as subprocesses, the kill points
    python -m tests.hostile.run --sample 300     # a stratified sample (what the test suite runs)
    python -m tests.hostile.run --list           # the classes and their case counts
    python -m tests.hostile.run --json out.json  # also write every failure and the table as JSON
    python -m tests.hostile.run --no-faults      # skip the writer kill points (tests/hostile/faults.py)
    python -m tests.hostile.run --class interrupt --trials 60   # a class of process_runs, 60 interrupts a writer

Each (case, command) pair ends in one of:

- rejected: a documented exit code for the case's kind and exactly one line on stderr, ``error[KIND]: ...``;
- accepted: success, for a case whose mutation leaves a valid artifact or input (the case says why);
- failure: anything else: exit 1 (an internal error), an undocumented code, a traceback, a message that is not one
  line, a hostile file accepted, a canary created, a file written where none was asked for, a terminal control
  character from the file printed, and, in a subprocess, death by a signal or a peak memory above the bound;
- known: a failure outside the readers, listed with its cause in RELIABILITY.md.

Failures also include, for every case: a file changed, replaced or removed that was there before (an input), any
change outside the work directory (a sentinel beside it), a canary anywhere, C1 controls and bidi overrides printed,
rich markup interpreted, a rejection whose message does not name what the case says it must. A case that may hang or
kill its process (``Case.timeout``) runs only as a real process, stopped after its time limit or above
MEMORY_GUARD; it never runs in this process, which could not interrupt it.

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
from .runtime_classes import HOOKS as RUNTIME_HOOKS
from .signature_classes import HOOKS as SIGNATURE_HOOKS

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
#: The bound of the other commands (the per-case command lines of the trust-boundary classes).
DEFAULT_MEMORY_BOUND = 3 << 30
ERROR_LINE = re.compile(r"^error\[[a-z][a-z-]*\]: \S.*$")
PROGRESS_LINE = re.compile(r"^jaxport: .* \.\.\. (?:failed after )?\d+\.\d s$")


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
#
# Each (case, command) runs in its own directory R: R/work is the working directory (the case's files, the model,
# copies of the base artifact) and R/outside holds a sentinel file no command may touch; symlinks planted by the
# write cases point there. Every entry of R is recorded (type, content hash, link target) before and after: a file
# created, changed, replaced or removed anywhere but the outputs a successful command may write is a failure.

SENTINEL = b"a file outside the work directory: no command may change it\n"


def _make_chardev(path: Path, which: str) -> None:
    """A character device like /dev/null or /dev/zero, made inside the work directory: a command that replaces its
    output device by a regular file replaces this copy, never the system's."""
    import stat

    minor = {"null": 3, "zero": 5, "urandom": 9}[which]
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except OSError:  # not root, or no CAP_MKNOD: a symlink to the real device (read-only uses only)
        os.symlink(f"/dev/{which}", path)


def _setup_step(step: tuple, base: Base, work: Path) -> None:
    """One setup step of a case (``Case.setup``), paths relative to the work directory."""
    op, name = step[0], work / step[1]
    name.parent.mkdir(parents=True, exist_ok=True)
    if op == "copy":  # ("copy", dst, file of the base directory)
        shutil.copyfile(base.dir / step[2], name)
    elif op == "write":  # ("write", dst, bytes)
        name.write_bytes(step[2])
    elif op == "fifo":
        os.mkfifo(name)
    elif op == "dir":
        name.mkdir(exist_ok=True)
    elif op == "symlink":  # ("symlink", dst, target): the target as written ({outside} substituted)
        os.symlink(str(step[2]).replace("{outside}", str(work.parent / "outside")), name)
    elif op == "hardlink":  # ("hardlink", dst, file of the work directory): one more name of that file
        os.link(work / step[2], name)
    elif op == "chardev":  # ("chardev", dst, "null" | "zero" | "urandom")
        _make_chardev(name, step[2])
    elif op == "rm":  # ("rm", dst): a file an earlier step made, removed
        name.unlink()
    elif op == "sparse":  # ("sparse", dst, bytes that claim a size): written, then extended to the claim with a hole
        name.write_bytes(step[2])
        with open(name, "r+b") as f:
            n = int.from_bytes(step[2][21:29], "little")
            f.truncate(len(step[2]) + json.loads(step[2][29:29 + n])["size"])
    else:
        raise ValueError(f"unknown setup step {op!r}")


def _prepare(case: Case, base: Base, d: Path) -> Path:
    """Make the run directory ``d`` (work/ and outside/); returns the work directory."""
    work, outside = d / "work", d / "outside"
    work.mkdir(parents=True)
    outside.mkdir()
    (outside / "sentinel.txt").write_bytes(SENTINEL)
    (work / "model.py").write_text(MODEL)
    if case.kind in ("npy", "npz") or case.commands:
        shutil.copyfile(base.dir / "base.jaxport", work / "base.jaxport")
    if case.kind == "bind":
        (work / "spec-bind.yaml").write_text(SPEC_BIND_HOSTILE.format(file=case.filename))
    if case.data is not None:
        (work / case.filename).write_bytes(case.data)
    for step in case.setup:
        _setup_step(step, base, work)
    return work


def _argv(case: Case, argv: Iterable[str], work: Path) -> list[str]:
    outside = str(work.parent / "outside")
    return [a.replace("{file}", case.filename).replace("{outside}", outside) for a in argv]


def commands(case: Case) -> list[tuple[str, list[str]]]:
    if case.commands:
        return [(label, list(argv)) for label, argv in case.commands]
    return COMMANDS[case.kind]


def _state(d: Path) -> dict[str, tuple]:
    """Every entry under ``d``: (kind, what identifies its content), without following symlinks or opening
    anything that is not a regular file."""
    import hashlib
    import stat

    out: dict[str, tuple] = {}
    for root, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        rel = Path(root).relative_to(d)
        for name in dirs + files:
            p = Path(root) / name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                entry: tuple = ("symlink", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    entry = ("file", hashlib.sha256(f.read()).hexdigest())
            elif stat.S_ISDIR(st.st_mode):
                entry = ("directory",)
            elif stat.S_ISFIFO(st.st_mode):
                entry = ("fifo",)
            elif stat.S_ISCHR(st.st_mode):
                entry = ("device", st.st_rdev)
            else:
                entry = ("other", st.st_mode)
            out[str(rel / name)] = entry
    return out


def _changes(before: dict[str, tuple], after: dict[str, tuple], allowed: set[str]) -> tuple[list[str], list[str]]:
    """(entries created, entries changed or removed), leaving out the outputs in ``allowed`` (work-relative)."""
    created, changed = [], []
    for name, entry in after.items():
        rel = name.removeprefix("work/") if name.startswith("work/") else f"../{name}"
        if rel in allowed or any(a.endswith("/") and rel.startswith(a) for a in allowed):  # "C/": what C holds
            continue
        if name not in before:
            created.append(rel + ("/" if entry[0] == "directory" else ""))
        elif before[name] != entry:
            what = "changed" if before[name][0] == entry[0] else f"replaced ({before[name][0]} -> {entry[0]})"
            changed.append(f"{rel} {what}")
    for name in before:
        if name not in after:
            rel = name.removeprefix("work/") if name.startswith("work/") else f"../{name}"
            if rel not in allowed and not any(a.endswith("/") and rel.startswith(a) for a in allowed):
                changed.append(f"{rel} removed")
    return created, changed


def _canary(d: Path) -> bool:
    return any(CANARY in dirs + files for _, dirs, files in os.walk(d))


def _observe(case: Case, command: str, d: Path, before: dict[str, tuple], code: int | None
             ) -> tuple[list[str], list[str]]:
    allowed = (OUTPUTS.get(command, set()) | set(case.outputs)) if code == 0 else set()
    if case.hook == "truncate-after-open" or case.hook.startswith("swap-"):  # the hook itself changed the input
        allowed.add(case.filename)
    return _changes(before, _state(d), allowed)


#: Characters that must never reach a terminal from a file: C0 controls but tab, newline and carriage return, DEL,
#: C1 controls (a lone 0x9b is CSI on some terminals) and the bidirectional overrides and isolates, which reorder
#: what is shown (a name that reads as another).
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: A marker wrapped in rich markup by the terminal-injection cases: shown without its tags, rich interpreted it.
MARKUP = re.compile(r"(?<!\[bold\])JXMARK")


def classify(case: Case, command: str, code: int | None, stderr: str, stdout: str, *, crashed: str = "",
             created: Iterable[str] = (), canary: bool = False, changed: Iterable[str] = ()) -> tuple[str, str]:
    status, detail = _classify(case, command, code, stderr, stdout, crashed=crashed, created=created, canary=canary,
                               changed=changed)
    if case.known:
        if status == "failure":
            return "known", f"{detail} (known: {case.known})"
        return "failure", f"a known failure is fixed ({case.known}): remove 'known' from the case"
    return status, detail


def _classify(case: Case, command: str, code: int | None, stderr: str, stdout: str, *, crashed: str = "",
              created: Iterable[str] = (), canary: bool = False, changed: Iterable[str] = ()) -> tuple[str, str]:
    if canary:
        return "failure", "canary triggered: something in the file was executed"
    if crashed:
        return "failure", crashed
    if "Traceback (most recent call last)" in stderr + stdout:
        return "failure", "traceback printed"
    changed = sorted(changed)
    if changed:
        return "failure", f"changed a file it must not: {', '.join(changed[:3])}"
    unexpected = sorted(set(created) - (OUTPUTS.get(command, set()) | set(case.outputs) if code == 0 else set()))
    if unexpected:
        return "failure", f"wrote {', '.join(unexpected[:3])}"
    bad = CONTROL.search(stdout + stderr)
    if bad:
        return "failure", f"control character {bad.group()!r} from the file reached the terminal"
    if MARKUP.search(stdout + stderr):
        return "failure", "rich markup from the file was interpreted (its tags vanished from the output)"
    if code == 0:
        if command in case.accept:
            return "accepted", case.why
        return "failure", "accepted a hostile file"
    # a long command's progress lines (cli/progress.py, on a stderr that is a pipe) are its log, not its message
    lines = [line for line in stderr.strip().splitlines() if not PROGRESS_LINE.match(line)]
    if code not in case.codes:
        return "failure", f"exit code {code}: {lines[-1][:300] if lines else '(no message)'}"
    if len(lines) != 1 or not ERROR_LINE.match(lines[0]):
        return "failure", f"error message is not one 'error[kind]: ...' line: {chr(10).join(lines)[:300]!r}"
    if case.mention and case.mention not in lines[0]:
        return "failure", f"the message does not name {case.mention!r}: {lines[0][:300]}"
    return "rejected", lines[0]


def run_in_process(case: Case, base: Base, scratch: Path, index: int) -> list[Result]:
    from click.testing import CliRunner
    from jaxport_cli.main import cli

    out = []
    for command, argv in commands(case):
        d = scratch / f"{index}-{command}"
        work = _prepare(case, base, d)
        before, around = _state(d), set(os.listdir(scratch))
        cwd = os.getcwd()
        os.chdir(work)
        try:
            result = CliRunner().invoke(cli, _argv(case, argv, work), catch_exceptions=True)
        finally:
            os.chdir(cwd)
        crashed = ""
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            crashed = f"uncaught {type(result.exception).__name__}: {str(result.exception)[:200]}"
        created, changed = _observe(case, command, d, before, result.exit_code)
        created += [f"../../{x}" for x in set(os.listdir(scratch)) - around - {d.name}]
        status, detail = classify(case, command, result.exit_code, result.stderr, result.stdout, crashed=crashed,
                                  created=created, changed=changed,
                                  canary=_canary(d) or (scratch / CANARY).exists())
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

#: Faults injected into the jaxport process (``Case.hook``): Python run before the CLI, in the same process.
HOOKS = {
    # The artifact is cut to half its size right after it was mapped or opened, as a download that is truncated
    # (or a file rewritten in place) while inspect hashes it: no signal (SIGBUS), an integrity or format error.
    "truncate-after-open": """
import builtins, io, mmap, os, zipfile
_target = os.path.abspath(os.environ["JXHOSTILE_FILE"])
_done = []
def _cut():
    if not _done:
        _done.append(1)
        os.truncate(_target, os.path.getsize(_target) // 2)
_mmap = mmap.mmap
class _Map(_mmap):
    def __new__(cls, fileno, *a, **k):
        m = _mmap.__new__(cls, fileno, *a, **k)
        try:
            same = os.path.samefile(f"/proc/self/fd/{fileno}", _target)
        except OSError:
            same = False
        if same:
            _cut()
        return m
mmap.mmap = _Map
_open = builtins.open
def _opening(file, *a, **k):
    f = _open(file, *a, **k)
    if isinstance(file, (str, bytes, os.PathLike)) and os.path.exists(file) and os.path.samefile(file, _target):
        _cut()
    return f
builtins.open = _opening
io.open = _opening
_os_open = os.open
def _os_opening(path, *a, **k):
    fd = _os_open(path, *a, **k)
    try:
        if os.path.samefile(f"/proc/self/fd/{fd}", _target):
            _cut()
    except OSError:
        pass
    return fd
os.open = _os_opening
""",
    # An attacker who can predict a temporary name plants a symlink there to a file outside the work directory,
    # before the writer creates it: every name pattern a writer used is planted for this process's pid.
    "plant-temp-symlinks": """
import atexit, os
_sentinel = os.path.abspath("../outside/sentinel.txt")
_planted = []
for _out in ("out.npz", "out.npy", "out.jaxport", "out.mlir", "out.jaxexport", "w.npz", "w.safetensors"):
    for _n in (f".{_out}.{os.getpid()}-output.npy.tmp", f".{_out}.{os.getpid()}-result.npy.tmp",
               f".{_out}.{os.getpid()}.tmp", f".{_out}.tmp", f"{_out}.tmp", f"{_out}.part", f".{_out}.part"):
        try:
            os.symlink(_sentinel, _n)
            _planted.append(_n)
        except OSError:
            pass
@atexit.register
def _unplant():
    for _n in _planted:
        if os.path.islink(_n) and os.readlink(_n) == _sentinel:
            os.unlink(_n)
""",
    # The disk fills up mid-write (a file-size limit, EFBIG instead of ENOSPC, deterministic): an output error,
    # the previous file intact, no temporary file left behind.
    "file-size-limit": """
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))
""",
}

HOOKS.update(RUNTIME_HOOKS)  # environments, shared caches and markers (issue 24)
HOOKS.update(SIGNATURE_HOOKS)  # an artifact swapped at each event of a command that requires its signature (issue 46)

#: The jaxport process as run for a case with a hook: the hook, then the CLI.
_HOOKED = "import os, sys; exec(os.environ['JXHOSTILE_HOOK']); from jaxport_cli.main import main; main()"

#: Memory above which a subprocess run is stopped (the sum over its process group): a reader that grows without
#: bound is a failure, not a machine out of memory.
MEMORY_GUARD = 4 << 30


def _group_rss(pgid: int) -> int:
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    return total


def _run_guarded(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str]) -> tuple[str, bytes, bytes]:
    """Run ``cmd`` in its own process group; stop the whole group on a timeout or above MEMORY_GUARD. Returns
    (why it was stopped, or "", stdout, stderr)."""
    import signal

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        deadline, stopped = time.monotonic() + timeout, ""
        while p.poll() is None:
            if time.monotonic() > deadline:
                stopped = f"still running after {timeout:.0f} s (a hang)"
            elif _group_rss(p.pid) > MEMORY_GUARD:
                stopped = f"grew above {MEMORY_GUARD >> 30} GiB of memory and was stopped"
            if stopped:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
                break
            time.sleep(0.1)
        try:  # whatever the command left running in its group (a child it did not wait for)
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        out.seek(0)
        err.seek(0)
        return stopped, out.read(), err.read()


def run_subprocess(case: Case, base: Base, scratch: Path, index: int, timeout: float = 300) -> list[Result]:
    out = []
    timeout = case.timeout or timeout
    for command, argv in commands(case):
        d = scratch / f"{index}-{command}-sub"
        work = _prepare(case, base, d)
        before, around = _state(d), set(os.listdir(scratch))
        status = scratch / f"{d.name}.status"
        env = dict(os.environ)
        jaxport = jaxport_command()
        if case.hook:
            env.update(JXHOSTILE_HOOK=HOOKS[case.hook], JXHOSTILE_FILE=str(work / case.filename))
            jaxport = [sys.executable, "-c", _HOOKED]
        cmd = [sys.executable, "-c", _MEASURE, str(status), *jaxport, *_argv(case, argv, work)]
        crashed, code, peak = "", None, None
        stopped, raw_out, raw_err = _run_guarded(cmd, work, timeout, env)
        stdout, stderr = raw_out.decode("utf-8", "replace"), raw_err.decode("utf-8", "replace")
        if stopped:
            crashed = stopped
        else:
            try:
                measured = json.loads(status.read_text())
                code, peak = measured["returncode"], measured["maxrss"] * 1024
            except (OSError, ValueError):
                crashed = "the measuring wrapper died"
            if code is not None and code < 0:
                crashed, code = f"killed by signal {-code}", None
        status.unlink(missing_ok=True)
        bound = MEMORY_BOUND.get(command, DEFAULT_MEMORY_BOUND)
        if not crashed and peak is not None and peak > bound:
            crashed = f"peak memory {peak >> 20} MiB above the {bound >> 20} MiB bound"
        created, changed = _observe(case, command, d, before, code)
        created += [f"../../{x}" for x in set(os.listdir(scratch)) - around - {d.name}]
        st, detail = classify(case, command, code, stderr, stdout, crashed=crashed, created=created,
                              changed=changed, canary=_canary(d))
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
    scratch.mkdir(parents=True, exist_ok=True)
    in_process = [c for c in cases if not c.timeout]
    # a case that may hang or kill its process never runs in this one (it could not be stopped)
    real = [c for c in cases if c.timeout] + [c for c in subprocess_cases if not c.timeout]
    for i, case in enumerate(in_process):
        report.results += run_in_process(case, base, scratch, i)
        if progress and i % 200 == 0:
            print(f"  {i}/{len(in_process)} cases, {len(report.failures)} failures", file=sys.stderr, flush=True)
    for i, case in enumerate(real):
        results = run_subprocess(case, base, scratch, i)
        report.results += results
        for r in results:
            if progress and r.status == "failure":
                print(f"  FAIL {r.case.id} [{r.command}]: {r.detail[:200]}", file=sys.stderr, flush=True)
        if progress and i % 10 == 0:
            print(f"  subprocess {i}/{len(real)}, {len(report.failures)} failures", file=sys.stderr, flush=True)
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
    ap.add_argument("--trials", type=int, default=40, help="interrupts per writing command (process_runs; default 40)")
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
        sub = sample([c for c in cases if not c.timeout], args.subprocess, args.seed + 1)
        report = run(base, chosen, scratch / "runs", sub, progress=True)
        kills = [] if args.no_faults else run_faults(base, scratch / "faults")
        extra = _process_runs(base, scratch / "runs", args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(report.table())
    if kills:
        print()
        print(faults_table(kills))
    if extra:
        from .process_runs import table

        print()
        print(table(extra))
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
            "faults": [k.__dict__ for k in kills], "process_runs": [r.__dict__ for r in extra]}, indent=2))
    return 1 if report.failures or any(k.problems for k in kills) or any(r.problems for r in extra) else 0


def _process_runs(base: Base, scratch: Path, args: argparse.Namespace) -> list:
    """The classes of ``process_runs`` (interrupts, rewrites, API types): all when no class is named, else those
    named."""
    from . import process_runs

    if args.classes and not set(args.classes) & set(process_runs.CLASSES):
        return []
    print("  interrupts, rewrites and the API's types...", file=sys.stderr, flush=True)
    return process_runs.run(base.dir, scratch, args.classes, args.trials, args.seed)


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
