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
  is on, as an empty file ``jaxport-checked-<jaxlib>-<sha256>`` in the cache directory, so the check costs one child
  per program, not one per call.
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

from .errors import FormatError
from .module_scan import scan_module

#: Set in an isolated child: the whole process is the sacrifice, so payload checks inside it are skipped.
ISOLATED_ENV = "JAXPORT_ISOLATED"
#: Exit statuses of a payload check: JAX's deserialize raised (the caller's own deserialize reports it), the
#: StableHLO module could not be read (reported on stdout as JSON), memory ran out.
_EXCEPTION = 3
_MEMORY = 4
_MODULE = 5
_CHECKED: set[str] = set()
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
    every core over that wall time."""
    return Limits(memory_bytes or physical_memory(), int(wall_seconds * (os.cpu_count() or 1)) + 10, wall_seconds,
                  "data" if accelerator_plugin_installed() else "address-space")


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
    cmd = [sys.executable, "-c", "from jaxport.isolate import _child; _child()",
           json.dumps(asdict(limits)), target, *args]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env,
                         cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(stdin, timeout=limits.wall_seconds)
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


def _apply(limits: Limits) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.memory_bytes and not limits.memory_after_imports:
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

    getattr(importlib.import_module(module_name), function)()


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
        scan_module(exported.mlir_module_serialized)
        _has_main(exported.mlir_module_serialized)
    except MemoryError:
        os._exit(_MEMORY)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which reads the bytes no further
        sys.stdout.write(json.dumps({"type": type(e).__name__, "message": _last_line(str(e))[:300]}))
        sys.stdout.flush()
        os._exit(stage)
    os._exit(0)  # skip interpreter teardown: JAX's is slow and irrelevant here


def _has_main(module: bytes) -> None:
    """Raise unless the module defines the ``main`` function JAX calls."""
    from jax.extend import mlir as jmlir
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import stablehlo

    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    with ctx:
        parsed = jmlir.deserialize_portable_artifact(module)
        ir.SymbolTable(parsed.operation)["main"]


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
        return Path(directory) / f"jaxport-checked-{jaxlib.__version__}-{digest}"
    except (ImportError, AttributeError):
        return None


def check_payload(payload: bytes, where: str, fname: str) -> None:
    """Read a function's payload in a child first; raise FormatError if that child does not survive it.

    An error JAX's deserialize raises in the child is left to the caller, which deserializes next and reports it in
    its own words; one reading the StableHLO module is reported here. Skipped inside an isolated child
    (``ISOLATED_ENV``) and for a payload already checked (the verdict is kept by sha256).
    """
    if os.environ.get(ISOLATED_ENV):
        return
    digest = hashlib.sha256(payload).hexdigest()
    if digest in _CHECKED:
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
        try:
            error = json.loads(outcome.stdout)
            what = f"{error['type']}: {' '.join(str(error['message']).split())}"
        except (ValueError, KeyError, TypeError):
            what = "no message"
        raise _Refused(f"the payload's StableHLO program cannot be read by this JAX ({what[:300]}).")
    if outcome.returncode not in (0, _EXCEPTION):
        tail = outcome.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise _Refused(f"JAX's reader failed in a test process (exit status {outcome.returncode}: {tail[0][:200]}). "
                       f"Do not load the artifact; re-export it from its source.")
    if outcome.returncode == 0:
        _CHECKED.add(digest)
        if verdict is not None:
            try:
                verdict.touch()
            except OSError:
                pass


def isolated() -> bool:
    """Whether this process is an isolated child."""
    return bool(os.environ.get(ISOLATED_ENV))


def trust(payload: bytes) -> None:
    """Remember a payload this process produced itself (``export`` just serialized it with JAX), so loading it in
    the same process needs no child check."""
    _CHECKED.add(hashlib.sha256(payload).hexdigest())
