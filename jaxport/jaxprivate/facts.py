"""What an executable is compiled from, read where JAX hands a program to XLA (``compiler.steered``): the
:class:`Facts` of a compilation, which decide whether an executable compiled elsewhere runs here (``run.executables``),
and the compile options that differ between two of them.

JAX's persistent compilation cache keys an executable by one hash of everything; these are the same inputs, digest by
digest, so that a mismatch can be named. JAX's own cache-key code clears what changes no executable
(``jax._src.cache_key``), and the options are read back with jaxlib's ``CompileOptions``: neither has a public API.
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from .._machine import GpuFacts, gpu_facts
from .xla import topology

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
    #: For an NVIDIA GPU, what decides whether the executable runs on one and how well (``_machine.GpuFacts``); None
    #: elsewhere (and then absent from the JSON: records of other platforms read as before).
    gpu: GpuFacts | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        data = {**asdict(self), "device_kinds": list(self.device_kinds)}
        if self.gpu is None:
            del data["gpu"]
        else:
            data["gpu"] = self.gpu.to_json()
        return data

    @classmethod
    def from_json(cls, data: Any) -> Facts | None:
        """The facts a record holds, or None when ``data`` is not a facts object (a damaged or foreign record)."""
        names = set(cls.__dataclass_fields__)
        if not isinstance(data, dict) or set(data) not in (names, names - {"gpu"}):
            return None
        kinds = data.get("device_kinds")
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            return None
        if not all(isinstance(v, str) for k, v in data.items() if k not in ("device_kinds", "gpu")):
            return None
        gpu = GpuFacts.from_json(data["gpu"]) if "gpu" in data else None
        if "gpu" in data and gpu is None:
            return None
        return cls(**{**data, "device_kinds": tuple(kinds), "gpu": gpu})

    def differences(self, other: Facts) -> list[str]:
        """The names of the facts that differ (``module``, ``jaxlib``, ...), in the order above. Between two GPU
        compilations (a record's and this machine's), the device's identity and versions are compared as
        ``GpuFacts.differences`` says (named ``gpu.cudnn``, ...), not its platform build, name or topology, which a
        compile without the GPU gives otherwise (XLA's spec of the H200 names it ``NVIDIA H200 141GB HBM3e``)."""
        if self.gpu is not None and other.gpu is not None:
            same = [name for name in ("module", "options", "flags", "jaxlib")
                    if getattr(self, name) != getattr(other, name)]
            if len(self.device_kinds) != len(other.device_kinds):
                same.append("device_kinds")
            return same + [f"gpu.{name}" for name in self.gpu.differences(other.gpu)]
        return [name for name, f in self.__dataclass_fields__.items()
                if (f.compare or name == "gpu") and getattr(self, name) != getattr(other, name)]

    def matches(self, here: Facts) -> bool:
        """Whether an executable compiled with these facts runs with ``here``'s (no :meth:`differences`)."""
        return not self.differences(here)


def compilation_facts(backend: Any, computation: Any, devices: Any, compile_options: Any) -> Facts:
    """The :class:`Facts` of one compilation, from what JAX hands XLA."""
    flat = list(getattr(devices, "flat", devices))
    try:
        fingerprint = str(topology(flat).fingerprint())
    except Exception:  # noqa: BLE001 - a platform without a serializable topology (JAX falls back the same way)
        fingerprint = ""
    options, proto = _options_digest(compile_options)
    platform = str(backend.platform)
    return Facts(module=_module_digest(computation), options=options, options_proto=proto,
                 platform=platform, platform_version=str(backend.platform_version),
                 device_kinds=tuple(str(d.device_kind) for d in flat), topology=fingerprint, flags=_flags(),
                 jaxlib=_jaxlib_version(), machine=host_processor() if platform == "cpu" else "",
                 gpu=_gpu_of(backend, flat, compile_options) if platform in ("gpu", "cuda") else None)


def _gpu_of(backend: Any, devices: list[Any], compile_options: Any) -> GpuFacts | None:
    """The :class:`GpuFacts` of a compilation for NVIDIA GPUs: the device's target config as XLA gives it (for a
    deviceless compile, the one it was made from), and whether XLA autotunes it (a GPU client whose
    ``xla_gpu_autotune_level`` is not 0); None for another GPU vendor's."""
    try:
        config = str(topology(devices).target_config)
    except Exception:  # noqa: BLE001 - a jaxlib or plugin without the attribute: the versions loaded here decide
        config = ""
    if "cuda_compute_capability" not in config and "rocm" in config.lower():
        return None
    try:
        level: int | None = int(compile_options.executable_build_options.debug_options.xla_gpu_autotune_level)
    except (AttributeError, TypeError, ValueError):
        level = None
    deviceless = str(getattr(backend, "runtime_type", "")) == "compile_only_runtime"
    return gpu_facts(config, str(devices[0].device_kind) if devices else "", deviceless=deviceless,
                     autotune_level=level, cores=getattr(devices[0], "core_count", None) if devices else None)


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
