"""Compile targets: the machines ``warmup --target`` and ``check --target`` compile for, which need not be this one.

A target names a kind of machine: ``cpu`` (this host's CPU); a TPU slice that libtpu describes (``tpu-v5e``, one
v5e chip; ``tpu-v5e-4``, four on one host; ...: :data:`TPU_TARGETS`); or NVIDIA GPUs on one host that XLA describes
by a target config (``cuda-h200``, one H200; ``cuda-h200-8``, eight: :data:`GPU_TARGETS`; or ``cuda-FILE``, the
config in FILE, such as ``jaxport target`` captures on a GPU). TPU and GPU targets are compiled for *deviceless*:
libtpu (the extra ``jaxport[tpu]``), or JAX's CUDA plugin of the installed jaxlib's release with ptxas and
libdevice from PyPI (the extra ``jaxport[cuda]``), build the accelerator's compiler and a description of its devices
without them (``jax.experimental.topologies``), so a CPU-only CI machine compiles what the accelerator will run, and
learns what does not fit it (a kernel over the scoped VMEM, a program over the device memory) before deployment.

A built-in GPU target is XLA's own spec of that GPU (``xla/backends/gpu/target_config/specs/``, in ``gpu/``) until a
config captured on the GPU replaces it: the spec names its device ``NVIDIA H200 141GB HBM3e`` where the GPU says
``NVIDIA H200`` (``_machine.device_model`` reads both as one model), and gives XLA's CUDA and cuDNN versions, not the
machine's. Importing this module imports no JAX.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import importlib.resources
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._fsio import atomic_write, read_file
from ..._machine import (
    TargetConfig,
    cuda_data_dir,
    cuda_plugin_module,
    device_model,
    has_nvidia_gpu,
    has_tpu_chip,
    loaded_versions,
    parse_target_config,
    plugin_text,
    plugin_versions,
    ptxas_version,
    quiet_cuda,
    quiet_libtpu,
)
from ..._version import __version__
from ...errors import JaxportError, PlatformError, UsageError
from ...jaxprivate.xla import topology

__all__ = ["GPU_TARGETS", "TPU_TARGETS", "Target", "cuda_note", "has_nvidia_gpu", "has_tpu_chip", "libtpu_note",
           "quiet_cuda", "quiet_libtpu", "target", "target_names"]

GiB = 1 << 30


@dataclass(frozen=True)
class Target:
    """A kind of machine to compile for."""

    name: str  # as --target spells it
    platform: str  # JAX's platform name: "cpu", "tpu", "cuda"
    topology: str | None  # libtpu's topology name ("v5e:2x2"), XLA's GPU one ("1x1x8"); None for the host
    chips_per_host: tuple[int, int, int] | None
    #: The device memory of one device, in bytes: what JAX may use there (see the tables below); None for the host.
    memory_per_device: int | None
    description: str
    #: A GPU target's XLA target config (a text ``stream_executor.GpuTargetConfigProto``); None for others.
    target_config: str | None = None
    #: Where a GPU target's config comes from: ``XLA's spec (h200.txtpb)``, or the file given; None for others.
    source: str | None = None

    @property
    def deviceless(self) -> bool:
        """Whether it is compiled for without its devices (a TPU target through libtpu, a GPU one through XLA)."""
        return self.topology is not None

    def devices(self) -> list[Any]:
        """JAX devices to compile for: the host's CPU devices, or the target's compile-only devices (deviceless)."""
        import jax

        if self.topology is None:
            return list(jax.devices("cpu"))
        if self.platform == "cuda":
            return _gpu_devices(self)
        quiet_libtpu()
        from jax.experimental import topologies

        try:
            return list(topologies.get_topology_desc(self.topology, "tpu",
                                                     chips_per_host_bounds=self.chips_per_host).devices)
        except RuntimeError as e:
            if "not installed" in str(e) or "TPU support" in str(e):
                raise PlatformError(f"--target {self.name}: compiling for a TPU on a machine without one needs "
                                    f"libtpu, which is not installed; install it with pip install 'jaxport[tpu]' "
                                    f"(the libtpu version this JAX pins).") from None
            raise PlatformError(f"--target {self.name}: libtpu cannot describe the slice {self.topology}: "
                                f"{str(e).strip()}") from None
        except Exception as e:  # noqa: BLE001 - libtpu's own errors (JaxRuntimeError)
            raise PlatformError(f"--target {self.name}: libtpu cannot describe the slice {self.topology}: "
                                f"{type(e).__name__}: {str(e).strip()}") from None

    def to_json(self) -> dict[str, Any]:
        data = {"name": self.name, "platform": self.platform, "topology": self.topology,
                "description": self.description, "memory_per_device": self.memory_per_device}
        if self.source is not None:
            data["source"] = self.source
        return data


def _tpu(name: str, topology: str, bounds: tuple[int, int, int], memory: int, what: str) -> Target:
    return Target(name, "tpu", topology, bounds, memory, what)


#: The device memory JAX may use on one TPU v5e chip: ``memory_stats()["bytes_limit"]`` read on one (15.75 GiB of
#: its 16 GiB of HBM).
V5E_BYTES_LIMIT = 16909336064

#: The TPU slices jaxport compiles for, on one host each; the memory is that of one JAX device: what JAX may use on a
#: v5e (measured), the HBM the chip's specification gives for the others.
TPU_TARGETS: dict[str, Target] = {t.name: t for t in (
    _tpu("tpu-v5e", "v5e:1x1", (1, 1, 1), V5E_BYTES_LIMIT, "one TPU v5e chip (v5litepod-1)"),
    _tpu("tpu-v5e-4", "v5e:2x2", (2, 2, 1), V5E_BYTES_LIMIT, "four TPU v5e chips on one host (v5litepod-4)"),
    _tpu("tpu-v5e-8", "v5e:2x4", (2, 4, 1), V5E_BYTES_LIMIT, "eight TPU v5e chips on one host (v5litepod-8)"),
    _tpu("tpu-v6e", "v6e:1x1", (1, 1, 1), 32 * GiB, "one TPU v6e (Trillium) chip (v6e-1)"),
    _tpu("tpu-v6e-4", "v6e:2x2", (2, 2, 1), 32 * GiB, "four TPU v6e chips on one host (v6e-4)"),
    _tpu("tpu-v6e-8", "v6e:2x4", (2, 4, 1), 32 * GiB, "eight TPU v6e chips on one host (v6e-8)"),
    _tpu("tpu-v5p-8", "v5p:2x2x1", (2, 2, 1), 95 * GiB, "four TPU v5p chips on one host (v5p-8)"),
    _tpu("tpu-v4-8", "v4:2x2x1", (2, 2, 1), 16 * GiB, "four TPU v4 chips on one host, two devices each (v4-8)"),
)}

#: The share of a GPU's memory JAX takes for its programs by default (it preallocates it:
#: ``XLA_PYTHON_CLIENT_MEM_FRACTION``, 0.75): a program needing more fails there unless that setting is raised.
JAX_GPU_MEMORY_FRACTION = 0.75

#: The built-in GPU models: --target name -> (the config's file in ``gpu/`` without its suffix, what it is). A
#: captured config (``gpu/NAME.json``, written by ``jaxport target`` on that GPU) is read before XLA's spec
#: (``gpu/NAME.txtpb``).
GPU_MODELS = {"cuda-h200": ("h200", "NVIDIA H200 (141 GB)"), "cuda-h100": ("h100", "NVIDIA H100 SXM (80 GB)"),
              "cuda-a100": ("a100", "NVIDIA A100 SXM (80 GB)")}
#: The GPU counts on one host a built-in model is offered with (``cuda-h200`` is one, ``cuda-h200-8`` eight).
GPU_COUNTS = (1, 8)
#: Every built-in GPU target's name (its config is read when it is used: :func:`target`).
GPU_TARGETS: tuple[str, ...] = tuple(name if n == 1 else f"{name}-{n}" for name in GPU_MODELS for n in GPU_COUNTS)
#: What a ``jaxport target`` capture file is (JSON): its ``format``.
CAPTURE_FORMAT = "jaxport-gpu-target/1"
#: The suffixes of a GPU target's file (``--target cuda-FILE``): a capture, or a target config in XLA's text format.
CONFIG_SUFFIXES = (".json", ".txtpb", ".pbtxt", ".textproto")
#: The largest target config file read.
MAX_CONFIG_BYTES = 1 << 20

CPU = Target("cpu", "cpu", None, None, None, "this host's CPU")


def target_names() -> list[str]:
    return ["cpu", *TPU_TARGETS, *GPU_TARGETS]


def target(name: str, where: str = "--target", base: Path | None = None) -> Target:
    """The target ``name`` names (a ``cuda-FILE`` relative to ``base``, default the working directory);
    ``UsageError`` (with the closest name) for one there is not, or a file that is no GPU target."""
    if name == "cpu":
        return CPU
    found = TPU_TARGETS.get(name)
    if found is not None:
        return found
    if name in GPU_TARGETS:
        return _builtin_gpu(name)
    if name.startswith("cuda-") and name.endswith(CONFIG_SUFFIXES):
        path = Path(name[len("cuda-"):]).expanduser()
        return gpu_target_file(base / path if base is not None and not path.is_absolute() else path, where, name)
    names = target_names()
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UsageError(f"{where} {name}: unknown target.{hint} Targets: {', '.join(names)}; or cuda-FILE, a GPU's "
                     f"target config ({', '.join(CONFIG_SUFFIXES)}).")


def _builtin_gpu(name: str) -> Target:
    model, count = (name[:-2], 8) if name.endswith("-8") else (name, 1)
    stem, what = GPU_MODELS[model]
    files = importlib.resources.files(__package__) / "gpu"
    captured = files / f"{stem}.json"
    if captured.is_file():
        return _gpu_target(name, _read_capture(captured.read_text(), f"{stem}.json", "--target"),
                           f"captured on the GPU ({stem}.json)", count, what)
    return _gpu_target(name, {"target_config": (files / f"{stem}.txtpb").read_text()}, f"XLA's spec ({stem}.txtpb)",
                       count, what)


def gpu_target_file(path: Path, where: str = "--target", name: str | None = None) -> Target:
    """The GPU target a file describes: a capture (``jaxport target -o FILE.json``) or an XLA target config in text
    (``.txtpb``, as XLA's specs); ``UsageError`` naming the file for one that is neither."""
    shown = name or f"cuda-{path}"
    raw = read_file(path, lambda message: UsageError(f"{where} {message}"), MAX_CONFIG_BYTES,
                    lambda size: f"{path}: {size} bytes, more than a GPU's target config holds ({MAX_CONFIG_BYTES}); "
                                 f"give the file 'jaxport target -o FILE' writes on the GPU.",
                    missing="GPU target config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{where} {path}: not a GPU's target config (not UTF-8 text); give the file 'jaxport target "
                         f"-o FILE' writes on the GPU, or one of XLA's specs (.txtpb).") from None
    if path.suffix == ".json":
        data = _read_capture(text, str(path), where)
    else:
        data = {"target_config": text}
    return _gpu_target(shown, data, str(path), int(data.get("devices", 1)) if path.suffix == ".json" else 1)


def _read_capture(text: str, path: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{where} {path}: not a capture of 'jaxport target' (not JSON: {e}).") from None
    if not isinstance(data, dict) or data.get("format") != CAPTURE_FORMAT or \
            not isinstance(data.get("target_config"), str):
        raise UsageError(f"{where} {path}: not a capture of 'jaxport target' (no format {CAPTURE_FORMAT!r} with a "
                         f"target_config); write one with 'jaxport target -o FILE' on the GPU.")
    devices = data.get("devices", 1)
    limit = data.get("memory_limit")
    if type(devices) is not int or not 1 <= devices <= 1024 or (limit is not None and type(limit) is not int):
        raise UsageError(f"{where} {path}: its devices ({devices!r}) or memory_limit ({limit!r}) is not a count "
                         f"of bytes; write the file again with 'jaxport target -o FILE' on the GPU.")
    return data


def _gpu_target(name: str, data: dict[str, Any], source: str, count: int, what: str | None = None) -> Target:
    text = data["target_config"]
    try:
        config = parse_target_config(text)
    except ValueError as e:
        raise UsageError(f"--target {name}: {source} is no NVIDIA GPU's target config: {e}.") from None
    limit = data.get("memory_limit")
    if limit is None and config.memory is not None:
        limit = int(config.memory * JAX_GPU_MEMORY_FRACTION)
    gpus = "one" if count == 1 else str(count)
    model = what or config.name
    cc = f"sm_{config.compute_capability.replace('.', '')}"
    description = (f"{gpus} {model}{'' if count == 1 else 's'} on one host ({cc}, {config.cores or '?'} SMs; "
                   f"{source})")
    return Target(name, "cuda", f"1x1x{count}", None, limit, description, text, source)


def _gpu_devices(t: Target) -> list[Any]:
    """The compile-only devices of a GPU target, from its config, through JAX's CUDA plugin (see
    :func:`cuda_problem` for what is refused before)."""
    problem = cuda_problem(t.name)
    if problem is not None:
        raise problem
    from jax.experimental import topologies

    try:
        return list(topologies.get_topology_desc(topology=t.topology, platform="cuda",
                                                 target_config=t.target_config).devices)
    except NotImplementedError:
        platforms = os.environ.get("JAX_PLATFORMS", "")
        if platforms and not has_nvidia_gpu():
            raise UsageError(f"--target {t.name}: JAX_PLATFORMS is {platforms!r}, which has JAX's CUDA plugin "
                             f"start for a GPU this machine does not have (it then describes none to compile "
                             f"for); set JAX_PLATFORMS=cpu, or unset it.") from None
        raise PlatformError(f"--target {t.name}: JAX's CUDA plugin did not start in this process, so it cannot "
                            f"describe the GPU (topology not implemented for cuda); on a machine without a GPU, "
                            f"set JAX_PLATFORMS=cpu before JAX starts.") from None
    except Exception as e:  # noqa: BLE001 - XLA's refusal of the config (JaxRuntimeError)
        text = " ".join(str(e).split())
        raise PlatformError(f"--target {t.name}: XLA cannot describe the GPU of {t.source}: {text}") from None


def cuda_problem(name: str) -> JaxportError | None:
    """Why a GPU target cannot be compiled for in this process, or None: no CUDA plugin; a plugin of another release
    than jaxlib (XLA's GPU compiler and jaxlib are built together); no ptxas and libdevice from PyPI (the
    ``nvidia-cuda-nvcc`` and ``nvidia-nvvm`` wheels: a CUDA toolkit that happens to be installed is not used, so
    that what is built does not depend on it; ``CUDA_ROOT`` names one to use instead, as JAX reads it)."""
    if cuda_plugin_module() is None:
        return PlatformError(f"--target {name}: compiling for an NVIDIA GPU needs JAX's CUDA plugin of this "
                             f"jaxlib's release, with ptxas and libdevice, which are not installed; install them "
                             f"with pip install 'jaxport[cuda]'.")
    jaxlib = importlib.metadata.version("jaxlib")
    versions = plugin_versions()
    wrong = {n: v for n, v in versions.items() if v != jaxlib}
    if wrong:
        have = ", ".join(f"{n} {v}" for n, v in sorted(wrong.items()))
        pins = " ".join(f"'{n}=={jaxlib}'" for n in sorted(versions))
        return PlatformError(f"--target {name}: the CUDA plugin ({have}) is not of this jaxlib's release "
                             f"({jaxlib}): XLA's GPU compiler and jaxlib are built together; install the matching "
                             f"one with pip install {pins} (or pip install 'jaxport[cuda]').")
    if "CUDA_ROOT" in os.environ:
        return None
    directory = cuda_data_dir()
    ptxas = directory is not None and os.access(os.path.join(directory, "bin", "ptxas"), os.X_OK)
    libdevice = directory is not None and os.path.isfile(
        os.path.join(directory, "nvvm", "libdevice", "libdevice.10.bc"))
    missing = [what for what, ok in (("ptxas (nvidia-cuda-nvcc)", ptxas), ("libdevice (nvidia-nvvm)", libdevice))
               if not ok]
    if missing:
        return PlatformError(f"--target {name}: compiling for an NVIDIA GPU needs ptxas and libdevice from PyPI, "
                             f"and {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed; "
                             f"install them with pip install 'jaxport[cuda]' (a CUDA toolkit elsewhere is used only "
                             f"where CUDA_ROOT names it).")
    return None


def cuda_note() -> str | None:
    """A line about the CUDA a GPU build writes for: the ptxas that writes its cubins needs a driver at least as
    new on the GPU. None where it cannot be read."""
    version = ptxas_version(cuda_data_dir())
    if not version:
        return None
    major_minor = ".".join(version.split(".")[:2])
    return (f"cubins written by ptxas {version} (nvidia-cuda-nvcc): the GPU's driver must support CUDA "
            f"{major_minor} or newer for these executables to be used there.")


def libtpu_note() -> str | None:
    """A line when the installed libtpu is not the one the installed JAX pins (``jax[tpu]``): executables it builds
    then need that same libtpu on the TPU host. None when they agree, or when either is unknown."""
    try:
        have = importlib.metadata.version("libtpu")
        required = importlib.metadata.requires("jax") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for line in required:
        m = re.match(r"\s*libtpu\s*==\s*([0-9.*]+)\s*;.*extra\s*==\s*['\"]tpu['\"]", line)
        if m is None:
            continue
        pin = m.group(1)
        prefix = pin[:-2] if pin.endswith(".*") else pin
        if have == pin or (pin.endswith(".*") and (have == prefix or have.startswith(prefix + "."))):
            return None
        return (f"libtpu {have} is installed, and the installed JAX pins libtpu {pin}: the TPU host must run "
                f"libtpu {have} for these executables to be used there (pip install 'jaxport[tpu]' installs the "
                f"pinned one).")
    return None


def read_config(target_: Target) -> TargetConfig | None:
    """What jaxport reads of a GPU target's config (None for other targets)."""
    return parse_target_config(target_.target_config) if target_.target_config else None


def capture_gpu(devices: list[Any] | None = None) -> dict[str, Any]:
    """This machine's GPUs as a compile target (``jaxport target``): a capture document (:data:`CAPTURE_FORMAT`)
    holding XLA's target config of its devices as XLA reads them here (its real name, multiprocessors, L2 cache,
    CUDA and cuDNN versions), how many there are, the memory JAX may use on one (``memory_stats``'s
    ``bytes_limit``), and the versions this process loads. ``--target cuda-FILE`` compiles for it on any machine,
    and records built so match this one. ``devices``: the GPUs to describe (default: JAX's); ``PlatformError``
    when there are none ("no GPU here")."""
    import platform as platform_module

    import jax

    if devices is None:
        try:
            devices = list(jax.devices("gpu"))
        except RuntimeError:
            devices = []
    if not devices:
        raise PlatformError("no GPU here: JAX sees no NVIDIA GPU on this machine (jax.devices('gpu') is empty), so "
                            "there is no target to capture; run 'jaxport target' on the GPU machine, with JAX's "
                            "CUDA plugin (pip install 'jax[cuda13]').")
    config = str(topology(devices[:1]).target_config)  # the target config of the devices JAX runs on
    try:
        parsed = parse_target_config(config)
    except ValueError as e:
        raise PlatformError(f"the GPU {devices[0].device_kind!r} gives no target config jaxport can read ({e}); "
                            f"this JAX ({jax.__version__}) may be too old to describe it.") from None
    try:
        limit = int(devices[0].memory_stats()["bytes_limit"])
    except (KeyError, TypeError, RuntimeError, ValueError):
        limit = None
    return {"format": CAPTURE_FORMAT, "device": str(devices[0].device_kind),
            "model": device_model(str(devices[0].device_kind)), "compute_capability": parsed.compute_capability,
            "devices": len(devices), "memory_limit": limit, "target_config": config,
            "versions": {"jaxport": __version__, "jax": jax.__version__,
                         "jaxlib": importlib.metadata.version("jaxlib"), "plugin": plugin_text(),
                         "ptxas": ptxas_version(cuda_data_dir()), **loaded_versions()},
            "python": platform_module.python_version()}


def write_capture(path: str | Path, document: dict[str, Any]) -> None:
    """Write a capture document (:func:`capture_gpu`) to ``path``, atomically; ``OutputError`` when it cannot."""
    data = (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()
    atomic_write(path, lambda f: f.write(data))
