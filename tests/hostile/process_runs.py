"""The classes of issue 24 whose outcome is not one command's exit status, run by ``python -m tests.hostile.run``
(``--class interrupt``, ``--class rewrite``, ``--class api-types``, and issue 36's ``position-dependence`` and
``batch-rows`` of ``batch_classes.py``; all of them when no class is named):

- ``interrupt``: every writing command (``export`` over a previous artifact and into a new file, ``extract``,
  ``rebind``, ``call -o``) sent SIGINT or SIGTERM at a seeded random moment of its run, from the moment the
  interpreter runs jaxport's first line to past its end. Each run must end with exit 0 (it finished first), or 130
  (SIGINT) / 143 (SIGTERM) with exactly one ``error[interrupted]: ...`` line; never a traceback, never a death by a
  signal, never a hang; the output is the previous file (or absent) or the complete new one, equal to an
  uninterrupted run's; no temporary file is left.
- ``rewrite``: an artifact's weights rewritten in place (same size: garbage, then the original, over and over) by
  another process while ``call --inputs -o`` runs, and through the API after ``jaxport.load(path,
  defer_verify=True)`` (and without ``defer_verify``) before the first call. The outputs must be those of the
  original weights, or the run refused with ``IntegrityError`` (exit 8); outputs computed from other bytes with
  exit 0 are the failure.
- ``api-types``: every public function of ``jaxport.__all__`` called with a wrong type for each parameter whose
  type it documents (``TypeError`` naming the parameter), and with malformed values of the right type (a dict or
  list that contains itself, an empty mapping, a path that does not exist, text that is not a spec): a
  ``JaxportError``; any other exception is the failure.
- ``api-deep-values`` (issue 46, ``boundary_classes.api_deep_values``): a loaded function given a state that holds
  itself (through a custom pytree node, through its own field) or nests 5000 deep (nodes, dicts, tuples), an input
  leaf numpy cannot read (a list or dict that holds itself, lists 100 000 deep); ``save_inputs`` of trees 5000 deep
  or holding themselves; ``export(bind=...)`` of such values. Each in a fresh process: the one-line error of its
  class, then valid calls in the same process that give the right numbers.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLASSES = ("interrupt", "rewrite", "api-types", "position-dependence", "batch-rows", "api-deep-values")
LINE = re.compile(r"^error\[interrupted\]: \S.*$")
PROGRESS_LINE = re.compile(r"^jaxport: .* \.\.\. (?:failed after )?\d+\.\d s$")
JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]


@dataclass
class Row:
    cls: str
    name: str
    runs: int = 0
    ok: int = 0  # the clean outcome (interrupted cleanly, refused, or the right result)
    finished: int = 0  # interrupt: the command ended before the signal came; rewrite: correct outputs
    problems: list[str] = field(default_factory=list)
    #: interrupt: deaths by the signal while the interpreter was still starting (before jaxport's first line could
    #: run: within three times the longest start-up measured), a documented limit, listed apart, never hidden
    startup: list[str] = field(default_factory=list)


# --- interrupts -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Writer:
    name: str
    argv: list[str]
    output: str  # the file the command writes
    previous: str | None  # a file of the base directory to place at the output first, or None


WRITERS = [
    Writer("export (over a previous artifact)", ["export", "model.py:f", "--shapes", "spec-bound.yaml", "-o",
                                                 "out.jaxport"], "out.jaxport", "plain.jaxport"),
    Writer("export (new file)", ["export", "model.py:f", "--shapes", "spec-bound.yaml", "-o", "out.jaxport"],
           "out.jaxport", None),
    Writer("extract --weights", ["extract", "base.jaxport", "--weights", "out.npz"], "out.npz", "params.npz"),
    Writer("rebind", ["rebind", "base.jaxport", "--bind", "params=params2.npz", "-o", "out.jaxport"], "out.jaxport",
           "plain.jaxport"),
    Writer("call -o", ["call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "out.npz"], "out.npz",
           "params.npz"),
]
INPUTS = ("model.py", "spec-bound.yaml", "params.npz", "x.npy", "base.jaxport", "plain.jaxport")


def _prepare(base: Path, d: Path, writer: Writer) -> None:
    import numpy as np

    d.mkdir(parents=True)
    for name in INPUTS:
        shutil.copyfile(base / name, d / name)
    with np.load(base / "params.npz") as p:
        np.savez(d / "params2.npz", **{k: v + 1 for k, v in p.items()})
    if writer.previous:
        shutil.copyfile(base / writer.previous, d / writer.output)


def _listing(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()}


def _startup_seconds() -> float:
    """How long the interpreter takes to reach jaxport's first line here (the longest of three starts)."""
    worst = 0.0
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import jaxport_cli.main"], check=True)
        worst = max(worst, time.perf_counter() - t)
    return worst


def interrupts(base: Path, scratch: Path, trials: int, seed: int = 0) -> list[Row]:
    rng = random.Random(seed)
    startup = _startup_seconds()
    rows = []
    for w, writer in enumerate(WRITERS):
        row = Row("interrupt", writer.name)
        ref = scratch / f"ref-{w}"
        _prepare(base, ref, writer)
        before = _listing(ref)
        t = time.perf_counter()
        p = subprocess.run([*JAXPORT, *writer.argv], cwd=ref, capture_output=True, timeout=300)
        duration = time.perf_counter() - t
        if p.returncode != 0:
            row.problems.append(f"the uninterrupted run failed: {p.stderr.decode()[-300:]}")
            rows.append(row)
            continue
        new = (ref / writer.output).read_bytes()
        new_files = _listing(ref) - before
        for i in range(trials):
            sig = signal.SIGINT if i % 2 == 0 else signal.SIGTERM
            offset = rng.uniform(startup, duration * 1.1)
            d = scratch / f"{w}-{i}"
            _prepare(base, d, writer)
            old = (d / writer.output).read_bytes() if writer.previous else None
            listed = _listing(d)
            proc = subprocess.Popen([*JAXPORT, *writer.argv], cwd=d, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, start_new_session=True)
            time.sleep(offset)
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                row.runs += 1
                row.problems.append(f"{sig.name} at {offset:.2f} s: still running 60 s later (a hang)")
                continue
            row.runs += 1
            problem = _judge(proc.returncode, err.decode("utf-8", "replace"), sig, d, writer, old, new,
                             listed | new_files)
            if problem and proc.returncode == -sig and offset < 3 * startup and _judge(
                    0, "", sig, d, writer, old, old, listed | new_files) == "":
                row.startup.append(f"{sig.name} at {offset:.2f} s (start-up measured at most {startup:.2f} s)")
            elif problem:
                row.problems.append(f"{sig.name} at {offset:.2f} s: {problem}")
            elif proc.returncode == 0:
                row.finished += 1
                row.ok += 1
            else:
                row.ok += 1
            shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(ref, ignore_errors=True)
        rows.append(row)
    return rows


def _judge(code: int, err: str, sig: signal.Signals, d: Path, writer: Writer, old: bytes | None, new: bytes,
           allowed: set[str]) -> str:
    if code < 0:
        return f"killed by signal {-code}"
    if "Traceback" in err:
        return "traceback printed"
    lines = [line for line in err.strip().splitlines() if not PROGRESS_LINE.match(line)]  # a long command's log
    if code != 0:
        if code != 128 + sig:
            return f"exit {code}: {lines[-1][:200] if lines else '(no message)'}"
        if len(lines) != 1 or not LINE.match(lines[0]):
            return f"not one 'error[interrupted]: ...' line: {err.strip()[:300]!r}"
    out = d / writer.output
    now = out.read_bytes() if out.exists() else None
    if code == 0 and now != new:
        return "finished, but the output differs from an uninterrupted run's"
    if now not in (old, new):
        return f"the output is neither the previous file nor the new one ({len(now or b'')} bytes)"
    stray = sorted(_listing(d) - allowed)
    if stray:
        return f"left {', '.join(stray[:3])}"
    return ""


# --- in-place rewrites ----------------------------------------------------------------------------------------------

def _weights_span(path: Path) -> tuple[int, int]:
    """(offset, size) of the weights member's data in the artifact file."""
    import struct
    import zipfile

    with zipfile.ZipFile(path) as z:
        info = z.getinfo("weights.bin")
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len, info.file_size


class Rewriter:
    """Rewrites ``path``'s bytes at ``span`` in place, garbage then the original, until stopped (``flips`` counts)."""

    def __init__(self, path: Path, span: tuple[int, int], seed: int):
        self.path, self.span, self.rng = path, span, random.Random(seed)
        self.stop = threading.Event()
        self.flips = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        offset, size = self.span
        fd = os.open(self.path, os.O_RDWR)
        try:
            original = os.pread(fd, size, offset)
            while not self.stop.is_set():
                os.pwrite(fd, self.rng.randbytes(size), offset)
                self.flips += 1
                time.sleep(self.rng.uniform(0, 0.002))
                os.pwrite(fd, original, offset)
                time.sleep(self.rng.uniform(0, 0.002))
            os.pwrite(fd, original, offset)
        finally:
            os.close(fd)

    def __enter__(self) -> Rewriter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


#: Through the API: load (deferred or not), rewrite the weights with garbage (or keep rewriting), then call.
_API = """
import json, os, sys, threading, numpy as np, jaxport
path, offset, size, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
x = np.load("x.npy")
garbage = np.random.default_rng(1).bytes(size)
stop = threading.Event()
def churn():
    fd = os.open(path, os.O_RDWR); orig = os.pread(fd, size, offset)
    while not stop.is_set():
        os.pwrite(fd, garbage, offset); os.pwrite(fd, orig, offset)
    os.pwrite(fd, orig, offset); os.close(fd)
t = threading.Thread(target=churn)
if mode == "during-load":
    t.start()
try:
    f = jaxport.load(path, defer_verify=mode != "eager")
    if mode != "during-load":
        fd = os.open(path, os.O_RDWR); os.pwrite(fd, garbage, offset); os.close(fd)
    out = f(x)
    result = {"outcome": "ran", "out": np.asarray(out).tolist()}
except jaxport.IntegrityError as e:
    result = {"outcome": "refused", "error": str(e)}
finally:
    stop.set()
    if t.is_alive():
        t.join()
print(json.dumps(result))
"""


def rewrites(base: Path, scratch: Path, trials: int, seed: int = 0) -> list[Row]:
    import numpy as np

    span = _weights_span(base / "base.jaxport")
    ref = scratch / "ref"
    ref.mkdir(parents=True)
    for name in INPUTS:
        shutil.copyfile(base / name, ref / name)
    subprocess.run([*JAXPORT, "call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "ref.npz"], cwd=ref,
                   check=True, capture_output=True)
    with np.load(ref / "ref.npz") as z:
        expected = {k: z[k] for k in z.files}
    rows = []
    row = Row("rewrite", "call -o, weights rewritten while it runs")
    for i in range(trials):
        d = scratch / f"cli-{i}"
        shutil.copytree(ref, d)
        (d / "ref.npz").unlink()
        with Rewriter(d / "base.jaxport", span, seed + i):
            p = subprocess.run([*JAXPORT, "call", "base.jaxport", "--inputs", "x.npy", "--no-cache", "-o", "out.npz"],
                               cwd=d, capture_output=True, timeout=300)
        row.runs += 1
        err = p.stderr.decode("utf-8", "replace").strip()
        if p.returncode == 0:
            with np.load(d / "out.npz") as z:
                got = {k: z[k] for k in z.files}
            if got.keys() == expected.keys() and all(np.array_equal(got[k], expected[k]) for k in got):
                row.ok += 1
                row.finished += 1
            else:
                row.problems.append("exit 0 with outputs computed from bytes that do not match the manifest")
        elif p.returncode == 8 and len(err.splitlines()) == 1 and err.startswith("error[integrity]: "):
            row.ok += 1
        else:
            row.problems.append(f"exit {p.returncode}: {err[-300:]!r}")
        shutil.rmtree(d, ignore_errors=True)
    rows.append(row)
    ref_out = np.asarray(next(iter(expected.values())))
    for mode in ("deferred", "eager", "during-load"):
        row = Row("rewrite", {"deferred": "load(defer_verify=True), garbage written, call",
                              "eager": "load(), garbage written, call",
                              "during-load": "load(defer_verify=True) while rewritten, call"}[mode])
        for i in range(max(1, trials // 3)):
            d = scratch / f"api-{mode}-{i}"
            shutil.copytree(ref, d)
            p = subprocess.run([sys.executable, "-c", _API, "base.jaxport", str(span[0]), str(span[1]), mode],
                               cwd=d, capture_output=True, timeout=300)
            row.runs += 1
            try:
                result = json.loads(p.stdout.decode().strip().splitlines()[-1])
            except (ValueError, IndexError):
                row.problems.append(f"exit {p.returncode}: {p.stderr.decode()[-300:]!r}")
                continue
            if result["outcome"] == "refused":
                row.ok += 1
            elif np.array_equal(np.asarray(result["out"], dtype=ref_out.dtype), ref_out):
                row.ok += 1
                row.finished += 1
            else:
                row.problems.append("ran on bytes that do not match the manifest")
            shutil.rmtree(d, ignore_errors=True)
        rows.append(row)
    return rows


# --- the Python API's types -----------------------------------------------------------------------------------------

#: Wrong-typed values tried for every parameter (each where the parameter's type rejects it).
WRONG = [b"bytes", 3, 2.5, True, object(), ["a", "list"], {"a": "dict"}, ("a", "tuple"), lambda: None, None]


def _valid(annotation: str) -> Any:
    """A value of the first type ``annotation`` accepts (``_api_types``' reading), for the other parameters."""
    from jaxport._api_types import _alternatives

    for name in _alternatives(annotation):
        if name == "str":
            return "absent.jaxport"
        if name == "Path":
            return Path("absent.jaxport")
        if name in ("Mapping", "dict"):
            return {}
        if name in ("Sequence", "list", "tuple", "Iterable"):
            return []
        if name == "Callable":
            return lambda *a: None
        if name == "bool":
            return False
        if name == "int":
            return 0
        if name == "float":
            return 0.0
        if name == "None":
            return None
        if name == "CallRequest":
            from jaxport import CallRequest

            return CallRequest("absent.jaxport")
    return None


def _self_containing(kind: str) -> Any:
    if kind == "list":
        v: list[Any] = []
        v.append(v)
        return v
    d: dict[str, Any] = {"jaxport": 1, "args": []}
    d["args"].append(d)
    return d


def api_types(scratch: Path) -> list[Row]:
    import inspect

    import jaxport
    from jaxport._api_types import _checker

    scratch.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(scratch)
    rows = []
    classes = jaxport._classes()
    try:
        for name in jaxport.__all__:
            fn = getattr(jaxport, name)
            if not inspect.isfunction(fn):
                continue
            row = Row("api-types", name)
            sig = inspect.signature(fn)  # every option a parameter of its own (the facade lists them)
            base: dict[str, Any] = {}
            for p in sig.parameters.values():
                if p.default is inspect.Parameter.empty:
                    base[p.name] = _valid(str(p.annotation))
            if name == "export":
                base["fn"] = lambda x: x
            for p in sig.parameters.values():
                check = _checker(p.annotation, classes)
                if check is None:
                    continue
                for value in WRONG:
                    if check[0](value):
                        continue
                    row.runs += 1
                    problem = _expect(fn, {**base, p.name: value}, TypeError, p.name)
                    row.ok += not problem
                    if problem:
                        row.problems.append(f"{p.name}={value!r}: {problem}")
                for kind in ("dict", "list"):
                    value = _self_containing(kind)
                    if not check[0](value):
                        continue
                    row.runs += 1
                    problem = _expect(fn, {**base, p.name: value}, jaxport.JaxportError, p.name)
                    row.ok += not problem
                    if problem:
                        row.problems.append(f"{p.name}=<a {kind} that contains itself>: {problem}")
            row.runs += 1  # the other parameters' valid values, as they are: absent paths, empty mappings
            if name in _BUILDERS:  # a builder reads nothing: what it built is refused where it is used
                problem = _expect(lambda b=base, n=name, f=fn: _BUILDERS[n](jaxport, f(**b)), {}, jaxport.JaxportError,
                                  "")
            else:
                problem = _expect(fn, base, jaxport.JaxportError, "")
            row.ok += not problem
            if problem:
                row.problems.append(f"{base}: {problem}")
            rows.append(row)
        for label, call in _MALFORMED.items():
            row = Row("api-types", label, runs=1)
            problem = _expect(lambda c=call: c(jaxport), {}, jaxport.JaxportError, "")
            row.ok += not problem
            if problem:
                row.problems.append(problem)
            rows.append(row)
    finally:
        os.chdir(cwd)
    return rows


#: Malformed values of the right type, beyond the walk.
#: Public functions that only build a value (``jaxport.like``) -> how that value is used, where a malformed one is
#: refused.
_BUILDERS: dict[str, Callable[[Any, Any], Any]] = {
    "like": lambda jaxport, value: jaxport.export(lambda x: x, jaxport.Spec(args=[value])),
}

_MALFORMED = {
    "parse_spec: not YAML": lambda j: j.parse_spec("[[[[{{{"),
    "parse_spec: 100 000 nested lists": lambda j: j.parse_spec("[" * 100000),
    "parse_spec: a list, not a mapping": lambda j: j.parse_spec("- 1\n- 2\n"),
    "export: a spec dict nested 100 000 deep": lambda j: j.export(lambda x: x, _deep_dict(100000)),
    "export: bind holding itself": lambda j: j.export(lambda x: x, {"jaxport": 1, "args": ["f32[2]"]},
                                                      bind={"p": _self_containing("dict")}),
    "compare_manifests: empty manifests": lambda j: j.compare_manifests({}, {}),
    "compare_manifests: wrong shapes": lambda j: j.compare_manifests({"functions": 3}, {"functions": []}),
    "load_policy: a directory": lambda j: j.load_policy("."),
    "load: allow_custom_calls of numbers": lambda j: j.load("absent.jaxport", allow_custom_calls=[1, 2]),
}


def _deep_dict(n: int) -> dict[str, Any]:
    d: dict[str, Any] = {}
    top = d
    for _ in range(n):
        d["args"] = {}
        d = d["args"]
    return top


def _expect(fn: Any, kwargs: dict[str, Any], exc: type[BaseException], names: str) -> str:
    try:
        fn(**kwargs)
    except exc as e:
        if names and names not in str(e):
            return f"{type(e).__name__} does not name {names!r}: {e}"
        return ""
    except BaseException as e:  # noqa: BLE001 - the failure being looked for
        return f"{type(e).__name__}: {str(e)[:200]}"
    return "accepted"


# --- the whole run --------------------------------------------------------------------------------------------------

def run(base: Path, scratch: Path, classes: list[str] | None, trials: int = 40, seed: int = 0) -> list[Row]:
    wanted = [c for c in CLASSES if not classes or c in classes]
    rows: list[Row] = []
    scratch.mkdir(parents=True, exist_ok=True)
    if "api-types" in wanted:
        rows += api_types(scratch / "api")
    if "api-deep-values" in wanted:  # issue 46 (boundary_classes): each case in a fresh process
        from .boundary_classes import api_deep_values

        for case, problem in api_deep_values(scratch / "deep"):
            rows.append(Row("api-deep-values", case, runs=1, ok=int(not problem), problems=[problem] * bool(problem)))
    if "rewrite" in wanted:
        rows += rewrites(base, scratch / "rewrite", max(3, trials // 2), seed)
    if "interrupt" in wanted:
        rows += interrupts(base, scratch / "interrupt", trials, seed)
    if {"position-dependence", "batch-rows"} & set(wanted):  # issue 36's batching classes (batch_classes.py)
        from . import batch_classes

        rows += batch_classes.run(scratch / "batches", wanted, seed)
    return rows


def table(rows: list[Row]) -> str:
    head = (f"| {'class':<19} | {'what':<48} | {'runs':>5} | {'clean':>5} | {'finished/right':>14} | "
            f"{'in start-up':>11} | {'failures':>8} |")
    lines = [head, "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"]
    for r in rows:
        lines.append(f"| {r.cls:<19} | {r.name[:48]:<48} | {r.runs:>5} | {r.ok:>5} | {r.finished:>14} | "
                     f"{len(r.startup):>11} | {len(r.problems):>8} |")
    for r in rows:
        for p in r.problems[:10]:
            lines.append(f"FAIL {r.cls}/{r.name}: {p}")
        for p in r.startup:
            lines.append(f"START-UP {r.cls}/{r.name}: {p}: the output untouched, no file left")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.hostile.process_runs [--class C] [--trials N]``: these classes alone."""
    import argparse

    from .corpus import build_base

    ap = argparse.ArgumentParser()
    ap.add_argument("--class", dest="classes", action="append", choices=CLASSES)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    scratch = Path(tempfile.mkdtemp(prefix="jaxport-runs-"))
    try:
        build_base(scratch / "base")
        t = time.perf_counter()
        rows = run(scratch / "base", scratch / "runs", args.classes, args.trials, args.seed)
        print(table(rows))
        print(f"\n{sum(r.runs for r in rows)} runs in {time.perf_counter() - t:.0f} s; "
              f"{sum(len(r.problems) for r in rows)} failures")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if any(r.problems for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
