"""Child processes with memory and time limits, for work on bytes that may be hostile (see ``isolate``).

:func:`run` runs ``module:function`` in a fresh Python child: the child sets ``RLIMIT_AS`` (address space) or
``RLIMIT_DATA`` and ``RLIMIT_CPU`` on itself before it reads anything, and no core dump; the parent enforces a
wall-clock limit and reports how the child ended (:class:`Outcome`). A *light* child (``run(..., light=True)``, the
checks of ``isolate``) imports only the jaxport modules its target needs, not the package's public API. Limits are
POSIX only; on a system without ``resource`` they are not applied.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from .. import interrupts
from .._machine import physical_memory
from .._text import human_bytes
from ..errors import CrashError, UsageError

#: Set in an isolated child's environment, for information only: whether a process is an isolated child is what
#: ``child_limits()`` says (set by ``_child`` and ``fork_run`` themselves), never an inheritable variable.
ISOLATED_ENV = "JAXPORT_ISOLATED"
#: How a child starts: the limits first (``_child``). A light child registers the ``jaxport`` package without running
#: its ``__init__`` (the public API, the artifact reader, the spec parser), so that it imports only what its target
#: imports.
_BOOT = "from jaxport.isolation.sandbox import _child; _child()"
_LIGHT_BOOT = ("import sys, types; p = types.ModuleType('jaxport'); p.__path__ = [sys.argv.pop(1)]; "
               "sys.modules['jaxport'] = p; " + _BOOT)
#: The ``jaxport`` package's directory (this module's is ``jaxport/isolation``), the path a light child gives it.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
            parts.append(f"{human_bytes(self.memory_bytes, binary=True)} of memory")
        if self.wall_seconds:
            parts.append(f"{self.wall_seconds:g} s")
        return " and ".join(parts) or "no limits"


def payload_limits(size: int) -> Limits:
    """Limits for reading one program: a few copies of the program and 2 GiB above JAX itself, two minutes of CPU."""
    memory = 8 * size + (2 << 30)
    total = physical_memory()
    if total:
        memory = min(memory, max(total, 2 << 30))
    return Limits(memory, 120, 180.0, memory_after_imports=True)


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
#: XLA's thread pools (measured on 2 cores: a first small call failed at 256M, with a floor of 208M; and again,
#: once the commands' imports got lighter, with 95M after the imports and so a floor of 256M: the margin is 160M).
_START_MARGIN = 160 << 20
_START_PER_CORE = 16 << 20
#: Exit statuses of an isolated command's child: its memory limit is below the floor (stdout: the floor, in bytes);
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
                    f"{human_bytes(limits.memory_bytes, binary=True)}{above})")
        return f"was killed by {name}"


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"




def run(target: str, args: list[str], limits: Limits, *, stdin: bytes = b"", env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None, light: bool = False) -> Outcome:
    """Run ``module:function`` in a fresh Python child with ``sys.argv[1:] = args``, under ``limits``.

    The child applies the limits to itself first, then imports ``module`` and calls ``function()``; the parent kills
    its whole process group at the wall-clock limit. Its output is captured and returned. ``light``: the child does
    not run ``jaxport/__init__.py`` (for targets that need a few foundation modules, not the public API).
    """
    child_env = dict(os.environ if env is None else env)
    child_env[ISOLATED_ENV] = "1"
    child_env.setdefault("MALLOC_ARENA_MAX", "2")  # glibc reserves address space per thread arena otherwise
    for name in CHILD_THREADS:  # set before the child imports anything
        child_env.setdefault(name, "1")
    boot = [_LIGHT_BOOT, _PACKAGE_DIR] if light else [_BOOT]
    # The child imports from where this process imports, and from nowhere else: ``python -c`` would put the working
    # directory first on its path, so that a ``jax/`` or ``jaxlib/`` folder where jaxport runs was imported in place
    # of the library and ran as code. -P leaves it out; PYTHONPATH gives the child this process's own path.
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    cmd = [sys.executable, "-P", "-c", *boot, json.dumps(asdict(limits)), target, *args]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env,
                         cwd=cwd, start_new_session=True)
    interrupts.track_child(p.pid)
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
    finally:
        interrupts.untrack_child(p.pid)


def fork_run(target: Callable[[], None], limits: Limits) -> Outcome:
    """Run ``target()`` in a forked copy of this process under ``limits``: what a child of :func:`run` does, without
    starting an interpreter and importing the target's libraries again (the copy has them). For the caller to use
    only where forking is safe: one thread, and no library that forbids it (JAX once its backends run).

    The child starts a session of its own, applies the limits, writes through new streams on file descriptors 1 and
    2 (captured, never this process's buffers) and ends with ``os._exit`` (status 0 when ``target`` returns, 1 if it
    raises), never running this process's exit handlers; the parent kills its process group at the wall-clock
    limit. Returns how it ended, as :func:`run` does.
    """
    import warnings

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns of native threads (a BLAS pool), which the child never uses
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        status = 1
        try:
            os.setsid()
            for fd, target_fd in ((out_w, 1), (err_w, 2)):
                os.dup2(fd, target_fd)
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - closed by os._exit
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            os.environ[ISOLATED_ENV] = "1"
            global _LIMITS
            _LIMITS = limits
            _apply(limits)
            target()
            status = 0
        except BaseException as e:  # noqa: BLE001 - reported on stderr, and the status says it failed
            try:
                sys.stderr.write(f"{type(e).__name__}: {e}\n")
            except BaseException:  # noqa: BLE001, S110 - nothing more can be said
                pass
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:  # noqa: BLE001, S110
                    pass
            os._exit(status)
    interrupts.track_child(pid)
    os.close(out_w)
    os.close(err_w)
    deadline = None if limits.wall_seconds is None else time.monotonic() + limits.wall_seconds
    try:
        captured = _read_until(pid, {out_r: [], err_r: []}, deadline)
        waited = _wait_until(pid, deadline)
    except BaseException:  # KeyboardInterrupt: take the child down with us
        _kill_pid_group(pid)
        os.waitpid(pid, 0)
        raise
    finally:
        interrupts.untrack_child(pid)
        os.close(out_r)
        os.close(err_r)
    out, err = b"".join(captured[out_r]), b"".join(captured[err_r])
    if waited is None:
        return Outcome(None, out, err, timed_out=True)
    return Outcome(os.waitstatus_to_exitcode(waited), out, err)


def _read_until(pid: int, chunks: dict[int, list[bytes]], deadline: float | None) -> dict[int, list[bytes]]:
    """Everything the child writes on the pipes ``chunks`` is keyed by, until both close or ``deadline``."""
    import selectors

    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            for key, _ in sel.select(left):
                data = os.read(key.fd, 1 << 16)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
    return chunks


def _wait_until(pid: int, deadline: float | None) -> int | None:
    """The child's wait status, or None if it was still running at ``deadline`` (it is then killed)."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if deadline is not None and time.monotonic() >= deadline:
            _kill_pid_group(pid)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.002)


def _kill_pid_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        p.kill()


def _refuse_below_floor(stdout: bytes, limits: Limits) -> None:
    """Raise the usage error of a memory limit below what the child measured it needs to start."""
    try:
        floor = int(stdout)
    except ValueError:
        floor = 0
    raise UsageError(f"--memory-limit {mib_text(limits.memory_bytes or 0)} is below what the isolated process needs "
                     f"to start Python and JAX here ({mib_text(floor)}, measured); give --memory-limit "
                     f"{mib_text(floor)} or more.")


def mib_text(n: int) -> str:
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
        _set_limit(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 5)


def _set_limit(which: int, soft: int, hard: int) -> None:
    """Lower a resource limit to ``soft``/``hard``, never above the hard limit the process inherited (a cluster's
    ``ulimit -d`` or ``ulimit -t``: raising it is not allowed); that limit then applies, being the tighter."""
    import resource

    _, inherited = resource.getrlimit(which)
    if inherited != resource.RLIM_INFINITY:
        soft, hard = min(soft, inherited), min(hard, inherited)
    resource.setrlimit(which, (min(soft, hard), hard))


def _apply_memory(limits: Limits, base: int) -> None:
    """Limit this process's memory to ``base`` (what it already uses) plus ``limits.memory_bytes``."""
    import resource

    which = resource.RLIMIT_DATA if limits.memory_kind == "data" else resource.RLIMIT_AS
    value = base + (limits.memory_bytes or 0)
    _set_limit(which, value, value)


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
        sys.stdout.write(str(floor))
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
    given = mib_text(limits.memory_bytes)
    return CrashError(f"{what}: the isolated process ran out of memory under its limit of {given} (--memory-limit): "
                      f"the command needs more. Raise --memory-limit (to {mib_text(2 * limits.memory_bytes)}, say); "
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


def child_limits() -> Limits | None:
    """The limits this process runs under, when it is a child started by :func:`run`; else None."""
    return _LIMITS


def limit_memory_now() -> None:
    """In a child whose memory limit applies after its target's imports (``Limits.memory_after_imports``): apply it
    now, above the address space already mapped (JAX's own libraries), before the target reads its input."""
    if _LIMITS is not None and _LIMITS.memory_bytes and _LIMITS.memory_after_imports:
        _apply_memory(_LIMITS, _address_space())
