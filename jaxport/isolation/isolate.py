"""Checking programs in a child process before this process reads them, and remembering the verdicts.

JAX reads a program with native code that trusts its input: its serialization (a flatbuffer with embedded
protos) and the StableHLO inside it (MLIR bytecode). A single flipped bit in a program's bytecode can crash the
reading process with a segmentation fault. An artifact's digests catch accidental damage, but a hostile file
carries digests that match, so digests alone cannot keep those readers safe.

Two defences, both in a fresh child process (``sandbox``: limits on memory, CPU and wall time):

- :func:`check_payload` runs before a program's bytes reach those readers in the caller's process: a child reads the
  same bytes the same way (``jax.export.deserialize``, then the StableHLO module parsed, walked, printed and held to
  the program limits). If the child crashes, runs out of memory or time, the caller gets a :class:`FormatError` and
  never parses the bytes itself. The child is cheap: where it is safe (Linux, JAX imported, its backends not
  started, one thread; see :func:`_can_fork`) it is a fork of this process, which has JAX already; otherwise a fresh
  interpreter that imports JAX and the few jaxport modules the check needs, not jaxport's public API
  (``JAXPORT_CHECK_FORK=0`` always starts one). A program that passed is remembered by its sha256, in this process
  and on disk as a verdict in the user's cache (``usercache``: keyed by the sha256 and the jaxlib, jaxport and
  check versions), so the check costs one child per program and machine, not one per call.
- ``sandbox.run`` runs a whole command in a child (``jaxport call --isolate``, ``jaxport inspect --mlir --isolate``):
  what the program does when compiled and run (XLA, custom calls) is contained too.

Limits are POSIX only; on a system without ``resource`` they are not applied.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import threading
from pathlib import Path

from .. import usercache
from .._text import human_bytes
from ..dtypes import to_numpy
from ..errors import CrashError, FormatError
from ..interrupts import WATCHER_NAME
from ..jaxprivate.exported import read_exported
from ..jaxprivate.mlir import deserialize_portable_artifact, make_ir_context, mlir_ir, stablehlo_dialect
from ..jaxprivate.runtime import backends_initialized, initialize_lapack
from ..program.module_scan import (
    CALL_LEVELS,
    MAX_NESTING,
    MAX_OPERATIONS,
    ProgramLimitError,
    check_operation_count,
    checked_text,
    scan_module,
    stablehlo_version,
)
from .sandbox import (
    CHILD_THREADS,
    ISOLATED_ENV,
    Limits,
    Outcome,
    child_limits,
    command_error,
    command_limits,
    exit_if_out_of_memory,
    fork_run,
    limit_memory_now,
    mib_text,
    payload_limits,
    run,
)

__all__ = ["CHILD_THREADS", "ISOLATED_ENV", "Limits", "Outcome", "check_module_bytes", "check_payload",
           "command_error", "command_limits", "exit_if_out_of_memory", "isolated", "payload_limits", "run",
           "remember", "trust"]

_mib = mib_text  # the name tests and older callers use
_SPAWN = run  # a substituted runner (tests inject crashing children through ``isolate.run``) is always used

#: Exit statuses of a payload check: JAX's deserialize raised (the caller's own deserialize reports it), the
#: StableHLO module could not be read (reported on stdout as JSON), memory ran out.
_EXCEPTION = 3
_MEMORY = 4
_MODULE = 5
_LIMIT = 6  # the program is over a documented limit (module_scan.MAX_NESTING, MAX_OPERATIONS)
_CHECKED: set[str] = set()
#: What the check does, in its verdicts' keys: a verdict of another check (one that did not print the program and
#: apply the program limits, or applied other limits) is not trusted.
_CHECK_VERSION = f"v4n{MAX_NESTING}c{CALL_LEVELS}o{MAX_OPERATIONS}"
_REFUSED: dict[str, str] = {}  # sha256 -> the refusal's message, after "{where}: function {name!r}: "


# --- checking a program before this process reads it -----------------------------------------------------------

def _read_program() -> None:
    """Target of a spawned child: read a payload from stdin as :func:`_read_program_bytes` does."""
    _read_program_bytes(sys.stdin.buffer.read())


def _read_program_bytes(payload: bytes) -> None:
    """In a checking child (spawned or forked): read a payload the way ``load`` does; exit 0, or report the
    exception."""
    stage = _EXCEPTION
    try:
        mlir_ir()  # loaded before the memory limit, as JAX itself

        limit_memory_now()
        exported, _ = read_exported(payload)
        stage = _MODULE
        scan = scan_module(exported.mlir_module_serialized)
        stage = _LIMIT
        check_operation_count(scan.operations)
        stage = _MODULE
        _has_main(exported.mlir_module_serialized)
    except MemoryError:
        os._exit(_MEMORY)
    except ProgramLimitError as e:
        _report_and_exit(_LIMIT, e)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which reads the bytes no further
        _report_and_exit(stage, e)
    os._exit(0)  # skip interpreter teardown: JAX's is slow and irrelevant here


def _report_and_exit(status: int, e: BaseException) -> None:
    """In a checking child: tell the parent what went wrong (JSON on stdout) and exit with ``status``."""
    sys.stdout.write(json.dumps({"type": type(e).__name__, "message": _last_line(str(e))[:300]}))
    sys.stdout.flush()
    os._exit(status)


def _has_main(module: bytes, in_checking_child: bool = True) -> None:
    """Raise unless the module defines the ``main`` function JAX calls; print it (as ``inspect --mlir``,
    ``extract --mlir`` and ``diff`` will) and check the printed text against the program limits
    (``module_scan.check_program_text``: nesting through regions, attributes, types, aliases and calls), which
    bound what JAX's lowering and XLA's compiler recurse on when ``call`` runs it."""
    ir, stablehlo = mlir_ir(), stablehlo_dialect()

    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        parsed = deserialize_portable_artifact(module)
        if "main" not in ir.SymbolTable(parsed.operation):
            raise KeyError("Symbol 'main' not in the symbol table.")  # the words of MLIR's own lookup
        try:
            checked_text(parsed)
        except ProgramLimitError as e:
            if not in_checking_child:  # an isolated command reads it itself: its caller reports it
                raise
            _report_and_exit(_LIMIT, e)


def _last_line(text: str) -> str:
    """The error itself from a message that wraps a Python traceback (MLIR reports a failed callback that way)."""
    if "Traceback (most recent call last)" in text:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else text
    return text


def check_payload(payload: bytes, where: str, fname: str) -> None:
    """Read a function's payload in a child first; raise FormatError if that child does not survive it.

    An error JAX's deserialize raises in the child is left to the caller, which deserializes next and reports it in
    its own words; one reading the StableHLO module is reported here. Done in-process in an isolated child.
    """
    digest = hashlib.sha256(payload).hexdigest()
    if digest in _CHECKED:
        return
    if isolated():  # this child is the sacrifice: the same limits, read here (a crash: exit 15)
        try:
            module = read_exported(payload)[0].mlir_module_serialized
            check_operation_count(scan_module(module).operations)
            _has_main(module, in_checking_child=False)
        except ProgramLimitError as e:
            raise FormatError(f"{where}: function {fname!r}: {_last_line(str(e))[:300]} (specs/FORMAT.md, \"Program "
                              f"limits\"), so it is not read further. Do not load the artifact.") from None
        except Exception:  # noqa: BLE001 - left to the caller, which deserializes next and says why
            return
        _CHECKED.add(digest)
        return
    try:
        if digest not in _REFUSED:
            _check(payload, digest, usercache.active_cache_dir())
    except _Refused as e:
        _REFUSED[digest] = str(e)
    if digest in _REFUSED:
        raise FormatError(f"{where}: function {fname!r}: {_REFUSED[digest]}")


def remember(digest: str, cache_dir: str | Path) -> bool:
    """Record in ``cache_dir`` the verdict of the program of sha256 ``digest``, if it passed the check in this
    process (or this process produced it: :func:`trust`); True if the directory now holds it."""
    if digest not in _CHECKED:
        return False
    key = _verdict_key(digest)
    return usercache.has_verdict(Path(cache_dir), key) or usercache.write_verdict(Path(cache_dir), key)


def has_verdict(digest: str, cache_dir: str | Path) -> bool:
    """Whether ``cache_dir`` holds the passed verdict of the program of sha256 ``digest`` for this jaxlib, jaxport and
    check: a process that loads the program with that cache starts no check (``warmup`` reports it)."""
    return usercache.has_verdict(Path(cache_dir), _verdict_key(digest))


def verdict_file(cache_dir: str | Path, digest: str) -> Path:
    """The file that holds the passed verdict of the program of sha256 ``digest`` in ``cache_dir``, for this jaxlib,
    jaxport and check (what a vouch for the cache names, ``run.vouching``)."""
    return usercache.verdict_path(Path(cache_dir), _verdict_key(digest))


class _Refused(Exception):
    """A payload the child did not survive; the message is completed with the file and function by the caller."""


def _verdict_key(digest: str) -> dict[str, str]:
    return usercache.verdict_key(digest, _CHECK_VERSION)


def _check(payload: bytes, digest: str, directory: Path) -> None:
    """Check ``payload`` unless ``directory`` holds its verdict; record a pass there and in this process."""
    key = _verdict_key(digest)
    if usercache.has_verdict(directory, key):
        _CHECKED.add(digest)
        return
    limits = payload_limits(len(payload))
    if run is _SPAWN and _can_fork():
        outcome = fork_run(functools.partial(_read_program_bytes, payload), limits)
    else:
        outcome = run("jaxport.isolation.isolate:_read_program", [], limits, stdin=payload, light=True)
    failure = _child_failure(outcome, limits)
    if failure is not None:
        raise _Refused(_PROGRAM_REFUSED[failure[0]].format(failure[1]))
    if outcome.returncode == 0:
        _CHECKED.add(digest)
        usercache.write_verdict(directory, key)


#: Set to 0 to check every program in a freshly started interpreter, never in a fork of this process.
FORK_ENV = "JAXPORT_CHECK_FORK"


#: The modules of Python threads a fork may leave behind, since the copy needs nothing they hold: rich's refresh
#: thread (it only draws on the terminal; the copy never draws) and Ray's garbage-collection timer in every Ray
#: worker (it only calls ``gc.collect`` now and then), without which a Ray actor's check would start a fresh
#: interpreter (0.7 s; 1.7 - 1.9 s with two actors starting at once).
_HARMLESS_THREADS = frozenset({"rich.live", "ray._private.gc_collect_manager"})


def _can_fork() -> bool:
    """Whether the check may run in a fork of this process (``sandbox.fork_run``) instead of a fresh interpreter,
    which spends most of its time importing JAX again: on Linux, with JAX imported here, its backends not started
    (they run threads, and JAX warns against forking then), and no other Python thread but harmless ones
    (:data:`_HARMLESS_THREADS`, the signal watcher). The modules the check uses are
    imported here first (this process needs them next, to run the program)."""
    if os.environ.get(FORK_ENV) == "0" or not sys.platform.startswith("linux") or "jax" not in sys.modules:
        return False
    if any(t is not threading.current_thread() and type(t).__module__ not in _HARMLESS_THREADS and
           t.name != WATCHER_NAME for t in threading.enumerate()):  # the signal watcher only waits on a pipe
        return False
    try:
        if backends_initialized():
            return False
        from jax import export  # noqa: F401 - loaded before the fork, as the check reads with them
        mlir_ir()
        stablehlo_dialect()
    except Exception:  # noqa: BLE001 - an unusual JAX: start a fresh interpreter, as always
        return False
    return True


#: How a checking child's failure (:func:`_child_failure`) refuses an artifact's program.
_PROGRAM_REFUSED = {
    "died": "JAX's reader {} on this program in a test process; the artifact is damaged or hostile. Do not load it; "
            "re-export it from its source.",
    "memory": "JAX's reader needs more than {} of memory for this program; the artifact is damaged or hostile. Do not "
              "load it; re-export it from its source.",
    "module": "the payload's StableHLO program cannot be read by this JAX ({}).",
    "limit": "{} (specs/FORMAT.md, \"Program limits\"), so it is not read further. Do not load the artifact; "
             "re-export it from its source.",
    "failed": "JAX's reader failed in a test process ({}). Do not load the artifact; re-export it from its source.",
}
#: How it refuses a foreign module (``import``); a reader's own refusal (``module``) is the caller's to report.
_MODULE_REFUSED = {
    "died": "MLIR's reader {} on this module in a test process; the module is damaged or hostile, and is not read "
            "here.",
    "memory": "MLIR's reader needs more than {} of memory for this module; the module is damaged or hostile, and is "
              "not read here.",
    "failed": "MLIR's reader failed in a test process ({}); the module is not read here.",
}
#: How it says a program did not run (``check_runs``); any other failure in the child's own words.
_RUN_FAILED = {"died": "JAX {} running it in a test process", "memory": "running it needs more than {} of memory"}


def _child_failure(outcome: Outcome, limits: Limits) -> tuple[str, str] | None:
    """What ended a child that read or ran a program under ``limits``, once for every check: ``(kind, words)``, the
    kind ``died`` (a signal or the time limit: how), ``memory`` (the memory limit, in bytes as a reader says them),
    ``module`` (the program cannot be read: the reader's error), ``limit`` (over a program limit: which) or
    ``failed`` (any other exit: its status and the last line it wrote); None when it passed, or when the reader
    raised (``_EXCEPTION``: the caller reads again, or reports the child's error)."""
    death = outcome.death(limits)
    if death is not None:
        return "died", death
    if outcome.returncode == _MEMORY:
        return "memory", human_bytes(limits.memory_bytes or 0, binary=True)
    if outcome.returncode == _MODULE:
        return "module", _child_error(outcome)
    if outcome.returncode == _LIMIT:
        return "limit", _child_error(outcome, with_type=False)
    if outcome.returncode not in (0, _EXCEPTION):
        tail = outcome.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        return "failed", f"exit status {outcome.returncode}: {tail[0][:200]}"
    return None


def _child_error(outcome: Outcome, with_type: bool = True) -> str:
    """The error a checking child reported on stdout, on one line."""
    try:
        report = json.loads(outcome.stdout)
    except ValueError:
        return "no message"
    match report:  # as :func:`_report_and_exit` writes it
        case {"type": kind, "message": message} if with_type:
            return f"{kind}: {' '.join(str(message).split())}"[:300]
        case {"message": message} if not with_type:
            return " ".join(str(message).split())[:300]
    return "no message"


# --- checking a foreign module before this process parses it (``import``) ----------------------------------------


def check_module_bytes(data: bytes) -> None:
    """Read MLIR bytecode (plain or a StableHLO portable artifact) in a child first, as ``import`` reads it next.

    The child reads it with the reader ``import`` uses first and, failing that, the other (the same order), counts
    its operations, prints it and checks the program limits (``module_scan.check_program_text``). Raises
    :class:`ProgramLimitError` for a module over a limit, :class:`CrashError` (without the file's name, which the
    caller adds) when the child does not survive it; an error a reader raises is left to the caller, which reads
    next and reports it in its own words. Skipped inside an isolated child and for bytes already checked.
    """
    if isolated():
        return
    digest = hashlib.sha256(data).hexdigest()
    if digest in _CHECKED:
        return
    limits = payload_limits(len(data))
    outcome = run("jaxport.isolation.isolate:_read_module", [], limits, stdin=data, light=True)
    failure = _child_failure(outcome, limits)
    if failure is not None and failure[0] == "limit":
        raise ProgramLimitError(failure[1])
    if failure is not None and failure[0] in _MODULE_REFUSED:
        raise CrashError(_MODULE_REFUSED[failure[0]].format(failure[1]))
    if outcome.returncode == 0:
        _CHECKED.add(digest)


def _read_module() -> None:
    """Child target of :func:`check_module_bytes`: read bytecode from stdin as ``importer.mlir.read_module`` does."""
    data = sys.stdin.buffer.read()
    try:
        ir = mlir_ir()
        limit_memory_now()
        ctx = make_ir_context()
        with ctx, ir.Location.unknown():
            readers: list = [deserialize_portable_artifact, ir.Module.parse]  # two callables of differing types
            if not stablehlo_version(data):
                readers.reverse()
            module = None
            for reader in readers:
                try:
                    module = reader(data)
                    break
                except Exception:  # noqa: BLE001 - the next reader, as read_module does
                    continue
            if module is None:
                os._exit(_EXCEPTION)
            operations = [0]

            def count(op: object) -> object:
                operations[0] += 1
                return ir.WalkResult.ADVANCE

            module.operation.walk(count)
            check_operation_count(operations[0])
            checked_text(module)
    except MemoryError:
        os._exit(_MEMORY)
    except ProgramLimitError as e:
        _report_and_exit(_LIMIT, e)
    except Exception as e:  # noqa: BLE001 - reported to the parent, whose own reading reports it
        _report_and_exit(_MODULE, e)
    os._exit(0)


def isolated() -> bool:
    """Whether this process is an isolated child: one ``sandbox`` started (or forked) and limited itself, never one
    whose environment merely says so (``JAXPORT_ISOLATED=1`` inherited from outside must not switch the checks
    off)."""
    return child_limits() is not None


def trust(payload: bytes) -> None:
    """Remember a payload this process produced itself (``export`` just serialized it with JAX), so loading it in
    the same process needs no child check."""
    _CHECKED.add(hashlib.sha256(payload).hexdigest())


# --- running a program once, in a child (``import`` of a JAX serialization) --------------------------------------


def check_runs(payload: bytes, inputs: list[tuple[tuple[int, ...], str]]) -> str | None:
    """Compile and run a payload once, on zeros of the given ``(shape, dtype)`` inputs (flat, in the program's
    order), in a fresh child under ``payload_limits``; None when it ran, else why not, on one line. A kernel that
    this jaxlib provides under the same name in another calling form fails, or crashes the child, here rather than
    in the caller's process. Inside an isolated child the program is run in this process, which is the sacrifice."""
    if isolated():
        try:
            _run_program_bytes(payload, inputs)
        except Exception as e:  # noqa: BLE001 - reported to the caller in one line
            return f"{type(e).__name__}: {_last_line(str(e))[:300]}"
        return None
    limits = payload_limits(len(payload))
    outcome = run("jaxport.isolation.isolate:_run_program", [json.dumps([[list(s), d] for s, d in inputs])], limits,
                  stdin=payload, light=True)
    failure = _child_failure(outcome, limits)
    if failure is not None and failure[0] in _RUN_FAILED:
        return _RUN_FAILED[failure[0]].format(failure[1])
    return _child_error(outcome) if outcome.returncode != 0 else None


def _run_program() -> None:
    """Child target of :func:`check_runs`: the payload on stdin, the inputs' shapes and dtypes in ``argv[1]``."""
    payload = sys.stdin.buffer.read()
    try:
        _run_program_bytes(payload, [(tuple(s), d) for s, d in json.loads(sys.argv[1])])
    except MemoryError:
        os._exit(_MEMORY)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        _report_and_exit(_EXCEPTION, e)
    os._exit(0)


def _run_program_bytes(payload: bytes, inputs: list[tuple[tuple[int, ...], str]]) -> None:
    import jax
    import numpy as np
    from jax import tree_util

    exported, _ = read_exported(payload)
    initialize_lapack()  # jax 0.9.x: a LAPACK kernel called before it is initialized is a SIGSEGV (as ``call`` does)
    zeros = [np.zeros(shape, dtype=to_numpy(dtype)) for shape, dtype in inputs]
    args, kwargs = tree_util.tree_unflatten(exported.in_tree, zeros)
    jax.block_until_ready(jax.jit(exported.call)(*args, **kwargs))
