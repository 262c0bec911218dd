"""The point where JAX hands a program to XLA: what an executable is compiled from, and an executable compiled
elsewhere used in its place.

JAX has no public API for either. ``jax.experimental.serialize_executable`` ships an executable as a pickle (its
Python wrapper and tree definitions with it), which a reader of files from elsewhere must never load; and JAX's
persistent compilation cache keys an executable by one hash of everything, so an entry written by a compile for a
TPU on a machine without one is never found on the TPU (the TPU host's ``LIBTPU_INIT_ARGS`` alone changes the hash).
Every JAX jaxport supports (0.9.1 - 0.12.x) compiles each ``jax.jit`` program through one private function,
``jax._src.compiler.compile_or_get_cached(backend, computation, devices, compile_options, host_callbacks,
executable_devices, ...)``: :func:`steered` wraps it, for the calling thread only, so that

- :class:`Facts` of the compilation are read there: the program XLA gets, its compile options, the platform and its
  version, the devices' kinds and topology, the XLA flags and the jaxlib (what JAX's own cache key covers, digest by
  digest, so that a mismatch can be named);
- a caller may answer with an executable deserialized from native bytes (``Client.deserialize_executable``, the call
  JAX's own cache makes), and JAX then builds its usual ``Compiled`` around it: its C++ dispatch, shardings and
  layouts, read from the executable as after a compile.

Outside a :func:`steered` block, and in other threads, compilation is JAX's own. A JAX without the function (a
future release) is reported by :func:`steering_available`, and callers compile as usual.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

#: XLA flags that change nothing an executable computes: where XLA dumps its work, and the TPU runtime's launch
#: barrier, which JAX's start-up on a TPU host adds to ``LIBTPU_INIT_ARGS`` and a host without a TPU never has.
_FLAGS_IGNORED = ("--xla_dump", "--xla_tpu_use_enhanced_launch_barrier", "--xla_force_host_platform_device_count")


@dataclass(frozen=True)
class Facts:
    """What decides whether an executable compiled for a program runs here, as digests and names (JSON-ready)."""

    module: str  # sha256 of the StableHLO module XLA compiles, debug information stripped (bytecode)
    options: str  # sha256 of XLA's compile options, dump settings cleared as JAX's cache key clears them
    platform: str  # "tpu", "cpu", "cuda"
    platform_version: str  # the PJRT plugin's build (libtpu's build date and changelist on a TPU)
    device_kinds: tuple[str, ...]  # "TPU v5 lite", one per device the program runs on
    topology: str  # the PJRT topology's fingerprint ("" where the platform has none)
    flags: str  # the XLA flags of the environment (XLA_FLAGS, LIBTPU_INIT_ARGS) that matter, sorted
    jaxlib: str
    #: For the CPU platform, the host's processor (architecture and a digest of its instruction-set features): XLA
    #: compiles for the features of the CPU it runs on, and code using one the target lacks dies of SIGILL. "" else.
    machine: str
    #: The compile options themselves (base64 of their serialization, as digested in ``options``): not compared,
    #: kept so that a mismatch can name the options that differ (:func:`options_difference`).
    options_proto: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "device_kinds": list(self.device_kinds)}

    @classmethod
    def from_json(cls, data: Any) -> Facts | None:
        """The facts a record holds, or None when ``data`` is not a facts object (a damaged or foreign record)."""
        if not isinstance(data, dict) or set(data) != set(cls.__dataclass_fields__):
            return None
        kinds = data.get("device_kinds")
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            return None
        if not all(isinstance(v, str) for k, v in data.items() if k != "device_kinds"):
            return None
        return cls(**{**data, "device_kinds": tuple(kinds)})

    def differences(self, other: Facts) -> list[str]:
        """The names of the facts that differ (``module``, ``jaxlib``, ...), in the order above."""
        return [name for name, f in self.__dataclass_fields__.items()
                if f.compare and getattr(self, name) != getattr(other, name)]


#: What a :func:`steered` block's callback gets: the compilation's facts and a function that turns native executable
#: bytes into an executable loaded for this compilation's devices and options. It returns that executable to use it,
#: or None to let XLA compile.
Steer = Callable[[Facts, Callable[[bytes], Any]], Any]

_local = threading.local()
_lock = threading.Lock()


def steering_available() -> bool:
    """Whether this JAX compiles through the function :func:`steered` wraps."""
    try:
        from jax._src import compiler  # no public API: see the module docstring
    except ImportError:
        return False
    return callable(getattr(compiler, "compile_or_get_cached", None))


@contextlib.contextmanager
def steered(steer: Steer) -> Iterator[None]:
    """Within the block, every compilation of this thread goes through ``steer`` first (see :data:`Steer`)."""
    _install()
    previous = getattr(_local, "steer", None)
    _local.steer = steer
    try:
        yield
    finally:
        _local.steer = previous


def _install() -> None:
    from jax._src import compiler  # no public API: see the module docstring

    with _lock:
        original = compiler.compile_or_get_cached
        if getattr(original, "_jaxport_steer", False):
            return

        def compile_or_get_cached(backend: Any, computation: Any, devices: Any, compile_options: Any,
                                  host_callbacks: Any, executable_devices: Any, *rest: Any, **kwargs: Any) -> Any:
            steer = getattr(_local, "steer", None)
            if steer is not None and not host_callbacks:
                facts = compilation_facts(backend, computation, devices, compile_options)

                def load(blob: bytes) -> Any:
                    return backend.deserialize_executable(blob, executable_devices, compile_options)

                executable = steer(facts, load)
                if executable is not None:
                    return executable
            return original(backend, computation, devices, compile_options, host_callbacks, executable_devices,
                            *rest, **kwargs)

        compile_or_get_cached._jaxport_steer = True  # type: ignore[attr-defined]
        compiler.compile_or_get_cached = compile_or_get_cached


def compilation_facts(backend: Any, computation: Any, devices: Any, compile_options: Any) -> Facts:
    """The :class:`Facts` of one compilation, from what JAX hands XLA."""
    from jax._src.lib import xla_client

    flat = list(getattr(devices, "flat", devices))
    try:
        topology = str(xla_client.get_topology_for_devices(flat).fingerprint())
    except Exception:  # noqa: BLE001 - a platform without a serializable topology (JAX falls back the same way)
        topology = ""
    options, proto = _options_digest(compile_options)
    return Facts(module=_module_digest(computation), options=options, options_proto=proto,
                 platform=str(backend.platform), platform_version=str(backend.platform_version),
                 device_kinds=tuple(str(d.device_kind) for d in flat), topology=topology, flags=_flags(),
                 jaxlib=_jaxlib_version(), machine=host_processor() if backend.platform == "cpu" else "")


def _module_digest(computation: Any) -> str:
    """sha256 of the module's bytecode with debug information (source locations) stripped, as JAX's cache key reads
    it: the same program lowered from two checkouts has one digest."""
    from jax._src.lib.mlir import passmanager

    with computation.context:
        module = computation.operation.clone()
        passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(module)
        out = io.BytesIO()
        module.write_bytecode(file=out)
    return hashlib.sha256(out.getvalue()).hexdigest()


#: Debug options that name where caches and tools live on the compiling machine, not what is compiled: JAX sets the
#: GPU autotuning cache's directory whenever its persistent cache is on (jax 0.10 hashes it into its own key; later
#: releases clear it), so a build without a cache and a target with one would never agree.
_PLACE_OPTIONS = (("xla_gpu_per_fusion_autotune_cache_dir", ""), ("xla_gpu_kernel_cache_file", ""),
                  ("xla_gpu_experimental_autotune_cache_mode", 0), ("xla_gpu_cuda_data_dir", ""),
                  ("xla_gpu_enable_llvm_module_compilation_parallelism", False))


def _options_digest(compile_options: Any) -> tuple[str, str]:
    """sha256 of the compile options, with the settings that change no executable cleared: where caches live
    (:data:`_PLACE_OPTIONS`), then dumping, by JAX's own cache-key code where this JAX has it; and the cleared
    options' serialization (base64), for :func:`options_difference`."""
    import base64
    import copy

    try:
        compile_options = copy.deepcopy(compile_options)
        debug = compile_options.executable_build_options.debug_options
        for name, cleared in _PLACE_OPTIONS:
            if hasattr(debug, name):
                setattr(debug, name, cleared)
    except (AttributeError, TypeError, ValueError):  # options this jaxlib cannot copy or set: hashed as they are
        pass
    h = hashlib.sha256()
    try:
        from jax._src import cache_key  # no public API: see the module docstring

        cache_key._hash_serialized_compile_options(h, compile_options, strip_device_assignment=False)
    except (ImportError, AttributeError, TypeError):
        h.update(compile_options.SerializeAsString())
    try:
        proto = base64.b64encode(compile_options.SerializeAsString()).decode("ascii")
    except (AttributeError, TypeError, ValueError):
        proto = ""
    return h.hexdigest(), proto


def options_difference(built: str, here: str) -> list[str]:
    """The compile options that differ between two :attr:`Facts.options_proto` (``debug_options.xla_foo``,
    ``num_partitions``), as far as this jaxlib reads them; empty when it cannot tell."""
    import base64

    from jax._src.lib import xla_client

    try:
        a = xla_client.CompileOptions.ParseFromString(base64.b64decode(built))  # a static method: a new object
        b = xla_client.CompileOptions.ParseFromString(base64.b64decode(here))
    except Exception:  # noqa: BLE001 - a record from another jaxlib, or an unreadable one
        return []
    found = []
    for path, x, y in (("", a, b), ("executable_build_options.", a.executable_build_options,
                                    b.executable_build_options),
                       ("debug_options.", a.executable_build_options.debug_options,
                        b.executable_build_options.debug_options)):
        for name in dir(x):
            if name.startswith("_") or name in ("executable_build_options", "debug_options"):
                continue
            try:
                u, v = getattr(x, name), getattr(y, name)
            except Exception:  # noqa: BLE001 - attributes a pybind object cannot give
                continue
            if callable(u):
                continue
            if str(u) != str(v):
                found.append(f"{path}{name}")
    return found


def _flags() -> str:
    tokens = (os.environ.get("XLA_FLAGS", "") + " " + os.environ.get("LIBTPU_INIT_ARGS", "")).split()
    return " ".join(sorted(t for t in tokens if not t.startswith(_FLAGS_IGNORED)))


def host_processor() -> str:
    """This host's architecture and a digest of its CPU's instruction-set features (``/proc/cpuinfo``'s flags, or
    the processor's name where there is no such file)."""
    import platform

    features = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() in ("flags", "Features"):
                    features = " ".join(sorted(line.split(":", 1)[1].split()))
                    break
    except OSError:
        features = platform.processor()
    return f"{platform.machine()} {hashlib.sha256(features.encode()).hexdigest()[:16]}"


def _jaxlib_version() -> str:
    from jaxlib.version import __version__

    return str(__version__)


def serialized_executable(compiled: Any) -> bytes:
    """The native bytes of a ``jax.stages.Compiled``'s executable (what ``Client.deserialize_executable`` reads).

    Raises ``ValueError`` for a compilation that has none (one with host callbacks, or a pmap)."""
    executable = getattr(getattr(compiled, "_executable", None), "xla_executable", None)
    if executable is None:
        raise ValueError("this compilation has no serializable executable")
    if hasattr(executable, "serialize"):  # an executable compiled for devices this process does not have
        return bytes(executable.serialize())
    return bytes(executable.client.serialize_executable(executable))


def memory_analysis(compiled: Any) -> dict[str, int] | None:
    """Bytes of device memory the executable needs, by kind (``arguments``, ``outputs``, ``aliased``,
    ``temporaries``, ``code``), from XLA's analysis; None where the platform gives none."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - platforms without the analysis raise their own errors
        return None
    if stats is None:
        return None
    fields = {"arguments": "argument_size_in_bytes", "outputs": "output_size_in_bytes",
              "aliased": "alias_size_in_bytes", "temporaries": "temp_size_in_bytes",
              "code": "generated_code_size_in_bytes"}
    return {name: int(getattr(stats, attr, 0) or 0) for name, attr in fields.items()}


def cpp_call(compiled: Any) -> Callable[..., Any]:
    """A ``jax.stages.Compiled``'s call as JAX's C++ dispatch runs it, without the Python frame of
    ``Compiled.__call__`` in front (one microsecond a call on a CPU, more on a TPU host): the callable it creates on
    its first call and keeps (``_call``; JAX's own fallback where it has no C++ path). The compiled object itself
    before its first call, or where this JAX keeps no such callable."""
    call = getattr(compiled, "_call", None)
    return call if callable(call) else compiled
