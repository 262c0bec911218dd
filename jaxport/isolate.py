"""Child processes with memory and time limits, for work on bytes that may be hostile.

JAX reads a program with native code that trusts its input: its serialization (a flatbuffer with embedded
protos) and the StableHLO inside it (MLIR bytecode). A single flipped bit in a program's bytecode can crash the
reading process with a segmentation fault. An artifact's digests catch accidental damage, but a hostile file
carries digests that match, so digests alone cannot keep those readers safe.

Two defences, both in a fresh child process:

- :func:`check_payload` runs before a program's bytes reach those readers in the caller's process: a child reads the
  same bytes the same way (``jax.export.deserialize``, then the StableHLO module parsed and walked). If the child
  crashes, runs out of memory or time, the caller gets a :class:`FormatError` and never parses the bytes itself.
  A program that passed is remembered by its sha256, in this process and, when JAX's persistent compilation cache
  is on, as an empty file ``jaxport-checked-<check>-<jaxlib>-<sha256>`` in the cache directory, so the check costs
  one child per program, not one per call.
- :func:`run` runs a whole command in a child (``jaxport call --isolate``, ``jaxport inspect --mlir --isolate``):
  what the program does when compiled and run (XLA, custom calls) is contained too. The child sets
  ``RLIMIT_AS`` (address space) and ``RLIMIT_CPU`` on itself before it reads anything, and no core dump; the parent
  enforces a wall-clock limit and reports a death by signal, a limit hit or a timeout as a :class:`CrashError`.

Limits are POSIX only; on a system without ``resource`` they are not applied.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from ._fsio import create_marker
from ._jax_internals import make_ir_context
from .errors import CrashError, FormatError, UsageError
from .module_scan import (
    CALL_LEVELS,
    MAX_NESTING,
    MAX_OPERATIONS,
    ProgramLimitError,
    check_operation_count,
    checked_text,
    scan_module,
    stablehlo_version,
)

#: Set in an isolated child: the whole process is the sacrifice, so payload checks inside it are skipped.
ISOLATED_ENV = "JAXPORT_ISOLATED"
#: Exit statuses of a payload check: JAX's deserialize raised (the caller's own deserialize reports it), the
#: StableHLO module could not be read (reported on stdout as JSON), memory ran out.
_EXCEPTION = 3
_MEMORY = 4
_MODULE = 5
_LIMIT = 6  # the program is over a documented limit (module_scan.MAX_NESTING, MAX_OPERATIONS)
_CHECKED: set[str] = set()
#: What the check does, in its verdict files' names: a verdict of an older check (one that did not print the
#: program and apply the program limits) is not trusted.
_CHECK_VERSION = f"v2n{MAX_NESTING}c{CALL_LEVELS}o{MAX_OPERATIONS}"
_REFUSED: dict[str, str] = {}  # sha256 -> the refusal's message, after "{where}: function {name!r}: "


@dataclass(frozen=True)
class Limits:
    """What an isolated child may use. None: no limit."""

    memory_bytes: int | None = None  # RLIMIT_AS (address space), or RLIMIT_DATA: see memory_kind
    cpu_seconds: int | None = None  # RLIMIT_CPU: CPU time over all threads
    wall_seconds: float | None = None  # enforced by the parent
    #: "address-space" (RLIMIT_AS) or "data" (RLIMIT_DATA: private writable memory). CUDA reserves address space
    #: far beyond physical memory when it starts, so with an accelerator plugin installed the limit is on data.
    memory_kind: str = "address-space"
    #: Apply the memory limit after the target's imports, above what they mapped (the payload check: the limit
    #: bounds what the program makes the reader allocate, not JAX's own libraries).
    memory_after_imports: bool = False
    #: A whole command (``--isolate``): the child imports Python's and JAX's libraries first, measures what they
    #: take (the floor), and refuses a memory limit below it before applying it (see :func:`_start_command`).
    command: bool = False

    def describe(self) -> str:
        parts = []
        if self.memory_bytes:
            parts.append(f"{_gib(self.memory_bytes)} of memory")
        if self.wall_seconds:
            parts.append(f"{self.wall_seconds:g} s")
        return " and ".join(parts) or "no limits"


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def payload_limits(size: int) -> Limits:
    """Limits for reading one program: a few copies of the program and 2 GiB above JAX itself, two minutes of CPU."""
    memory = 8 * size + (2 << 30)
    total = physical_memory()
    if total:
        memory = min(memory, max(total, 2 << 30))
    return Limits(memory, 120, 180.0, memory_after_imports=True)


def accelerator_plugin_installed() -> bool:
    """Whether a JAX GPU or TPU plugin is installed (found without importing JAX)."""
    import importlib.metadata
    import importlib.util

    try:
        if importlib.metadata.entry_points(group="jax_plugins"):
            return True
    except Exception:  # noqa: BLE001 - broken metadata: look for the modules instead
        pass
    return any(importlib.util.find_spec(m) is not None for m in
               ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin", "libtpu"))


def command_limits(memory_bytes: int | None, wall_seconds: float) -> Limits:
    """Limits for a whole command (``--isolate``): memory (default: physical memory), wall time, and CPU time for
    every core over that wall time.

    The memory limit is on data memory (``RLIMIT_DATA``: the heap and every private writable mapping, thread stacks
    included), not on address space: JAX's libraries and an accelerator plugin reserve address space far beyond
    what they use, so that a realistic limit (``--memory-limit 300M``) would stop the child before it starts."""
    return Limits(memory_bytes or physical_memory(), int(wall_seconds * (os.cpu_count() or 1)) + 10, wall_seconds,
                  "data", command=True)


#: Thread pools of the numeric libraries an isolated child may load, each sized to one thread: every thread
#: reserves a stack and an allocator arena, and OpenBLAS spins at start-up when a memory limit refuses them.
CHILD_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                 "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS")
#: What a command needs beyond its imports to start JAX's CPU backend: a margin, and a thread stack per core for
#: XLA's thread pools (measured on 2 cores: a first small call failed at 256M, with a floor of 208M).
_START_MARGIN = 128 << 20
_START_PER_CORE = 16 << 20
#: Exit statuses of an isolated command's child: its memory limit is below the floor (stdout: the floor as JSON);
#: it ran out of memory under its limit.
FLOOR_STATUS = 86
OUT_OF_MEMORY_STATUS = 87


@dataclass
class Outcome:
    """How a child ended: its exit status or the signal that killed it, what it printed, and why it was stopped."""

    returncode: int | None  # None when the parent killed it at the time limit
    stdout: bytes
    stderr: bytes
    timed_out: bool = False

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None

    def death(self, limits: Limits) -> str | None:
        """Why the child did not end normally, in words; None if it exited."""
        if self.timed_out:
            return f"ran longer than {limits.wall_seconds:g} s and was stopped"
        if self.signal is None:
            return None
        name = _signal_name(self.signal)
        if self.signal == signal.SIGXCPU or (self.signal == signal.SIGKILL and limits.cpu_seconds):
            return f"was killed by {name} (its CPU limit is {limits.cpu_seconds} s, or it was killed from outside)"
        if self.signal in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS) and limits.memory_bytes:
            above = " above what JAX itself uses" if limits.memory_after_imports else ""
            return (f"crashed with {name} (in native code, or on reaching its memory limit of "
                    f"{_gib(limits.memory_bytes)}{above})")
        return f"was killed by {name}"


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB"


def run(target: str, args: list[str], limits: Limits, *, stdin: bytes = b"", env: dict[str, str] | None = None,
        cwd: str | Path | None = None) -> Outcome:
    """Run ``module:function`` in a fresh Python child with ``sys.argv[1:] = args``, under ``limits``.

    The child applies the limits to itself first, then imports ``module`` and calls ``function()``; the parent kills
    its whole process group at the wall-clock limit. Its output is captured and returned.
    """
    child_env = dict(os.environ if env is None else env)
    child_env[ISOLATED_ENV] = "1"
    child_env.setdefault("MALLOC_ARENA_MAX", "2")  # glibc reserves address space per thread arena otherwise
    for name in CHILD_THREADS:  # set before the child imports anything
        child_env.setdefault(name, "1")
    cmd = [sys.executable, "-c", "from jaxport.isolate import _child; _child()",
           json.dumps(asdict(limits)), target, *args]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env,
                         cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(stdin, timeout=limits.wall_seconds)
        if limits.command and p.returncode == FLOOR_STATUS:
            _refuse_below_floor(out, limits)
        return Outcome(p.returncode, out, err)
    except subprocess.TimeoutExpired:
        _kill_group(p)
        out, err = p.communicate()
        return Outcome(None, out, err, timed_out=True)
    except BaseException:  # KeyboardInterrupt: take the child down with us
        _kill_group(p)
        p.wait()
        raise


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        p.kill()


def _refuse_below_floor(stdout: bytes, limits: Limits) -> None:
    """Raise the usage error of a memory limit below what the child measured it needs to start."""
    try:
        floor = int(json.loads(stdout)["floor"])
    except (ValueError, KeyError, TypeError):
        floor = 0
    raise UsageError(f"--memory-limit {_mib(limits.memory_bytes or 0)} is below what the isolated process needs to "
                     f"start Python and JAX here ({_mib(floor)}, measured); give --memory-limit {_mib(floor)} or "
                     f"more.")


def _mib(n: int) -> str:
    """A size as --memory-limit takes it, rounded up to a MiB: ``300M``, ``2G``."""
    mib = -(-n // (1 << 20))
    return f"{mib // 1024}G" if mib % 1024 == 0 and mib else f"{mib}M"


def _apply(limits: Limits) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.memory_bytes and not limits.memory_after_imports and not limits.command:
        _apply_memory(limits, 0)
    if limits.cpu_seconds:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))


def _apply_memory(limits: Limits, base: int) -> None:
    """Limit this process's memory to ``base`` (what it already uses) plus ``limits.memory_bytes``."""
    import resource

    which = resource.RLIMIT_DATA if limits.memory_kind == "data" else resource.RLIMIT_AS
    value = base + (limits.memory_bytes or 0)
    resource.setrlimit(which, (value, value))


def _address_space() -> int:
    """This process's current address-space size in bytes (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _data_memory() -> int:
    """This process's data memory (``VmData``: what ``RLIMIT_DATA`` counts) in bytes, 0 where /proc is not
    available."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _start_command(limits: Limits) -> None:
    """In an isolated command's child, before it reads anything: import the libraries every command loads (numpy,
    JAX, its MLIR bindings), measure the memory they take, and either exit with ``FLOOR_STATUS`` (the limit is below
    that plus what starting JAX's backend takes) or apply the limit. A library that cannot load under a limit is
    thus never mistaken for a hostile artifact or a bug."""
    import jax  # noqa: F401
    import numpy  # noqa: F401
    from jax.extend import mlir  # noqa: F401

    used = _data_memory() if limits.memory_kind == "data" else _address_space()
    floor = used + _START_MARGIN + _START_PER_CORE * (os.cpu_count() or 1)
    floor = -(-floor // (16 << 20)) * (16 << 20)
    if limits.memory_bytes and used and limits.memory_bytes < floor:
        sys.stdout.write(json.dumps({"floor": floor}))
        sys.stdout.flush()
        os._exit(FLOOR_STATUS)
    if limits.memory_bytes:
        _apply_memory(limits, 0)


#: What the errors of an allocation refused by the limit say (dlopen, glibc, XLA, jaxport's own input checks).
_OUT_OF_MEMORY_WORDS = ("out of memory", "not enough memory", "cannot allocate memory", "failed to map segment",
                        "resource_exhausted", "bad_alloc", "memoryerror")


def exit_if_out_of_memory(e: BaseException) -> None:
    """In an isolated command's child whose memory limit refused an allocation: exit with
    ``OUT_OF_MEMORY_STATUS``, so that the parent reports the limit (naming ``--memory-limit``), not a bug or a
    damaged artifact. Called by the command line's error handler; returns for any other error or process."""
    if _LIMITS is None or not _LIMITS.command or not _LIMITS.memory_bytes:
        return
    text = f"{type(e).__name__}: {e}".lower()
    if isinstance(e, MemoryError) or any(word in text for word in _OUT_OF_MEMORY_WORDS):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(OUT_OF_MEMORY_STATUS)


def command_error(what: str, outcome: Outcome, limits: Limits) -> CrashError | None:
    """The error of an isolated command's child that ran out of memory under its limit; None otherwise (see
    ``Outcome.death`` for deaths by signal and timeouts)."""
    if not limits.memory_bytes:
        return None
    stderr = outcome.stderr.decode("utf-8", "replace")
    # C++ code that cannot allocate throws std::bad_alloc, which ends the process in std::terminate (SIGABRT).
    aborted = outcome.signal == signal.SIGABRT and ("bad_alloc" in stderr or "terminate called" in stderr)
    if outcome.returncode != OUT_OF_MEMORY_STATUS and not aborted:
        return None
    given = _mib(limits.memory_bytes)
    return CrashError(f"{what}: the isolated process ran out of memory under its limit of {given} (--memory-limit): "
                      f"the command needs more. Raise --memory-limit (to {_mib(2 * limits.memory_bytes)}, say); "
                      f"without it the limit is the machine's physical memory.")


_LIMITS: Limits | None = None  # the limits this child runs under, for a target that applies them late


def _child() -> None:
    """Entry point of a child: limits first, then the target."""
    global _LIMITS
    limits = Limits(**json.loads(sys.argv[1]))
    _LIMITS = limits
    _apply(limits)
    module_name, _, function = sys.argv[2].partition(":")
    sys.argv = [sys.argv[2], *sys.argv[3:]]
    import importlib

    try:
        if limits.command:
            _start_command(limits)
        target = getattr(importlib.import_module(module_name), function)
    except (MemoryError, ImportError, OSError) as e:  # a library that cannot load under the limit
        exit_if_out_of_memory(e)
        raise
    target()


# --- checking a program before this process reads it -----------------------------------------------------------

def _read_program() -> None:
    """Child target: read a payload from stdin the way ``runtime.load`` does; exit 0, or report the exception."""
    payload = sys.stdin.buffer.read()
    stage = _EXCEPTION
    try:
        from jax import export
        from jax.extend import mlir  # noqa: F401 - loaded before the memory limit, as JAX itself

        if _LIMITS is not None and _LIMITS.memory_bytes and _LIMITS.memory_after_imports:
            _apply_memory(_LIMITS, _address_space())
        exported = export.deserialize(bytearray(payload))
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


def _has_main(module: bytes) -> None:
    """Raise unless the module defines the ``main`` function JAX calls; print it (as ``inspect --mlir``,
    ``extract --mlir`` and ``diff`` will) and check the printed text against the program limits
    (``module_scan.check_program_text``: nesting through regions, attributes, types, aliases and calls), which
    bound what JAX's lowering and XLA's compiler recurse on when ``call`` runs it."""
    from jax.extend import mlir as jmlir
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo

    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        parsed = jmlir.deserialize_portable_artifact(module)
        ir.SymbolTable(parsed.operation)["main"]
        try:
            checked_text(parsed)
        except ProgramLimitError as e:
            _report_and_exit(_LIMIT, e)


def _last_line(text: str) -> str:
    """The error itself from a message that wraps a Python traceback (MLIR reports a failed callback that way)."""
    if "Traceback (most recent call last)" in text:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else text
    return text


def _verdict_file(digest: str) -> Path | None:
    """Where a passed check is remembered on disk: JAX's compilation cache directory, when the cache is on."""
    try:
        import jax
        import jaxlib

        directory = getattr(jax.config, "jax_compilation_cache_dir", None)
        if not getattr(jax.config, "jax_enable_compilation_cache", False) or not directory:
            return None
        return Path(directory) / f"jaxport-checked-{_CHECK_VERSION}-{jaxlib.__version__}-{digest}"
    except (ImportError, AttributeError):
        return None


def check_payload(payload: bytes, where: str, fname: str) -> None:
    """Read a function's payload in a child first; raise FormatError if that child does not survive it.

    An error JAX's deserialize raises in the child is left to the caller, which deserializes next and reports it in
    its own words; one reading the StableHLO module is reported here. Done in-process in an isolated child.
    """
    digest = hashlib.sha256(payload).hexdigest()
    if digest in _CHECKED:
        return
    if os.environ.get(ISOLATED_ENV):  # this child is the sacrifice: the same limits, read here (a crash: exit 15)
        try:
            from jax import export

            module = export.deserialize(bytearray(payload)).mlir_module_serialized
            check_operation_count(scan_module(module).operations)
            _has_main(module)
        except ProgramLimitError as e:
            raise FormatError(f"{where}: function {fname!r}: {_last_line(str(e))[:300]} (specs/FORMAT.md, \"Program "
                              f"limits\"), so it is not read further. Do not load the artifact.") from None
        except Exception:  # noqa: BLE001 - left to the caller, which deserializes next and says why
            return
        _CHECKED.add(digest)
        return
    if digest in _REFUSED:
        raise FormatError(f"{where}: function {fname!r}: {_REFUSED[digest]}")
    try:
        _check(payload, digest)
    except _Refused as e:
        _REFUSED[digest] = str(e)
        raise FormatError(f"{where}: function {fname!r}: {e}") from None


class _Refused(Exception):
    """A payload the child did not survive; the message is completed with the file and function by the caller."""


def _check(payload: bytes, digest: str) -> None:
    verdict = _verdict_file(digest)
    if verdict is not None and verdict.is_file():
        _CHECKED.add(digest)
        return
    limits = payload_limits(len(payload))
    outcome = run("jaxport.isolate:_read_program", [], limits, stdin=payload)
    death = outcome.death(limits)
    if death is not None:
        raise _Refused(f"JAX's reader {death} on this program in a test process; the artifact is damaged or "
                       f"hostile. Do not load it; re-export it from its source.")
    if outcome.returncode == _MEMORY:
        raise _Refused(f"JAX's reader needs more than {_gib(limits.memory_bytes or 0)} of memory for this program; "
                       f"the artifact is damaged or hostile. Do not load it; re-export it from its source.")
    if outcome.returncode == _MODULE:
        raise _Refused(f"the payload's StableHLO program cannot be read by this JAX ({_child_error(outcome)}).")
    if outcome.returncode == _LIMIT:
        raise _Refused(f"{_child_error(outcome, with_type=False)} (specs/FORMAT.md, \"Program limits\"), so it is "
                       f"not read further. Do not load the artifact; re-export it from its source.")
    if outcome.returncode not in (0, _EXCEPTION):
        tail = outcome.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise _Refused(f"JAX's reader failed in a test process (exit status {outcome.returncode}: {tail[0][:200]}). "
                       f"Do not load the artifact; re-export it from its source.")
    if outcome.returncode == 0:
        _CHECKED.add(digest)
        if verdict is not None:
            create_marker(verdict)  # never through a link planted in the cache


def _child_error(outcome: Outcome, with_type: bool = True) -> str:
    """The error a checking child reported on stdout, on one line."""
    try:
        error = json.loads(outcome.stdout)
        message = " ".join(str(error["message"]).split())
        return (f"{error['type']}: {message}" if with_type else message)[:300]
    except (ValueError, KeyError, TypeError):
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
    if os.environ.get(ISOLATED_ENV):
        return
    digest = hashlib.sha256(data).hexdigest()
    if digest in _CHECKED:
        return
    limits = payload_limits(len(data))
    outcome = run("jaxport.isolate:_read_module", [], limits, stdin=data)
    death = outcome.death(limits)
    if death is not None:
        raise CrashError(f"MLIR's reader {death} on this module in a test process; the module is damaged or hostile, "
                         f"and is not read here.")
    if outcome.returncode == _MEMORY:
        raise CrashError(f"MLIR's reader needs more than {_gib(limits.memory_bytes or 0)} of memory for this module; "
                         f"the module is damaged or hostile, and is not read here.")
    if outcome.returncode == _LIMIT:
        raise ProgramLimitError(_child_error(outcome, with_type=False))
    if outcome.returncode not in (0, _EXCEPTION, _MODULE):
        tail = outcome.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise CrashError(f"MLIR's reader failed in a test process (exit status {outcome.returncode}: "
                         f"{tail[0][:200]}); the module is not read here.")
    if outcome.returncode == 0:
        _CHECKED.add(digest)


def _read_module() -> None:
    """Child target of :func:`check_module_bytes`: read bytecode from stdin as ``importer.mlir.read_module`` does."""
    data = sys.stdin.buffer.read()
    try:
        from jax.extend import mlir as jmlir
        from jax.extend.mlir import ir

        if _LIMITS is not None and _LIMITS.memory_bytes and _LIMITS.memory_after_imports:
            _apply_memory(_LIMITS, _address_space())
        ctx = make_ir_context()
        with ctx, ir.Location.unknown():
            readers = [jmlir.deserialize_portable_artifact, ir.Module.parse]
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
    """Whether this process is an isolated child."""
    return bool(os.environ.get(ISOLATED_ENV))


def trust(payload: bytes) -> None:
    """Remember a payload this process produced itself (``export`` just serialized it with JAX), so loading it in
    the same process needs no child check."""
    _CHECKED.add(hashlib.sha256(payload).hexdigest())
