"""Facts about machines: this one's memory and accelerators (what bounds what jaxport reads into memory and lets a
child process use; a TPU chip or an NVIDIA GPU attached), and NVIDIA GPUs as XLA describes them: what decides whether
an executable compiled for one runs on another, and how well (:class:`GpuFacts`), read from XLA's target config (a
text ``stream_executor.GpuTargetConfigProto``) and from the CUDA libraries this process loads.

An executable XLA compiles for a GPU holds machine code (cubins, written by ``ptxas``) for one compute capability,
and calls the CUDA runtime, cuDNN and the driver of the machine it runs on. It runs elsewhere when that machine has
the same compute capability (``9.0``: an ``sm_90a`` cubin runs on no other), the same XLA (the CUDA plugin's and
jaxlib's release), a driver at least as new as the ``ptxas`` that wrote its cubins, and a CUDA runtime and cuDNN at
least as new as those XLA assumed while compiling (it chooses kernels and fusions by their versions); it runs *as
well* as it can on the device it was tuned for: the same model (its name without memory size, memory type or form
factor) and the same number of streaming multiprocessors, autotuned there. A compile for a GPU on a machine without
one (deviceless: JAX's compile-only client, from a target config) is never autotuned.

The names differ for the same GPU: XLA's spec of the H200 names its compile-only device ``NVIDIA H200 141GB HBM3e``,
and the real one says ``NVIDIA H200``; :func:`device_model` reduces both to ``NVIDIA H200``. This match is designed
from the names XLA's specs and NVIDIA's drivers use; it was not yet seen on a GPU. Importing this module imports no
JAX.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import subprocess
from dataclasses import asdict, dataclass
from typing import Any

from .jaxprivate.xla import cuda_path


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where it cannot be known."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


#: PCI vendor id of Google's TPU chips (``/sys/bus/pci/devices/*/vendor``), as JAX's own start-up scans for them.
_GOOGLE_PCI_VENDOR = "0x1ae0"


def has_tpu_chip() -> bool:
    """Whether a TPU chip is attached to this machine (a Google device on the PCI bus), without starting JAX."""
    import glob

    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(vendor) as f:
                if f.read().strip() == _GOOGLE_PCI_VENDOR:
                    return True
        except OSError:
            continue
    return False


def quiet_libtpu() -> None:
    """On a machine without a TPU where libtpu is installed (``jaxport[tpu]``, to compile for a TPU here), keep
    libtpu's start-up warnings off stderr: JAX tries its TPU backend whenever it starts, and libtpu, finding no TPU,
    prints several lines asking for ``TPU_ACCELERATOR_TYPE`` and ``TPU_WORKER_HOSTNAMES``. Setting them (only where
    neither is set: :data:`QUIET_LIBTPU`) quiets it; the backend still fails to start, silently, and JAX runs on the
    CPU; and several processes may compile for a TPU at once. Call it before JAX starts its backends."""
    if "TPU_ACCELERATOR_TYPE" in os.environ or "TPU_WORKER_HOSTNAMES" in os.environ:
        return
    import importlib.util

    try:
        if importlib.util.find_spec("libtpu") is None:
            return
    except (ImportError, ValueError):
        return
    if has_tpu_chip():
        return
    for name, value in QUIET_LIBTPU.items():
        os.environ.setdefault(name, value)


#: What :func:`quiet_libtpu` sets: a one-chip topology on this host; (as JAX itself sets it without a TPU) no query
#: of a cloud metadata server, which a machine without a TPU cannot answer; and no exclusive lock of libtpu
#: (``/tmp/libtpu_lockfile``, which guards the chip against a second process, and without this would make a second
#: process compiling for a TPU at the same time fail: here there is no chip to guard). libtpu takes these values.
QUIET_LIBTPU = {"TPU_ACCELERATOR_TYPE": "v5litepod-1", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}


#: PCI vendor id of NVIDIA, and the PCI classes of a GPU (a VGA or 3D controller: ``/sys/bus/pci/devices/*/class``).
_NVIDIA_PCI_VENDOR = "0x10de"
_GPU_PCI_CLASSES = ("0x0300", "0x0302")


def has_nvidia_gpu() -> bool:
    """Whether an NVIDIA GPU is attached to this machine (its driver lists one, or one is on the PCI bus), without
    starting JAX."""
    import glob

    if glob.glob("/proc/driver/nvidia/gpus/*"):
        return True
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(vendor) as f:
                if f.read().strip() != _NVIDIA_PCI_VENDOR:
                    continue
            with open(vendor[: -len("vendor")] + "class") as f:
                if f.read().strip().startswith(_GPU_PCI_CLASSES):
                    return True
        except OSError:
            continue
    return False


#: The modules of JAX's CUDA plugins (``jax-cuda13-pjrt``, ``jax-cuda12-pjrt``), newest first.
CUDA_PLUGIN_MODULES = ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12")


def cuda_plugin_module() -> str | None:
    """The module of the CUDA plugin JAX would load here (``jax_plugins.xla_cuda13``), or None when none is
    installed."""
    import importlib.util

    for name in CUDA_PLUGIN_MODULES:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


def quiet_cuda() -> None:
    """On a machine without a GPU or a TPU where JAX's CUDA plugin is installed (``jaxport[cuda]``, to compile for a
    GPU here), have JAX start its CPU backend alone (``JAX_PLATFORMS=cpu``, only where it is unset): the plugin
    otherwise fails to start in every JAX process, printing a traceback on stderr (``Unable to load cuDNN. Is it
    installed?``), and then cannot describe a GPU to compile for (``topology not implemented for cuda``). Call it
    before JAX starts its backends."""
    if "JAX_PLATFORMS" in os.environ or cuda_plugin_module() is None:
        return
    if has_nvidia_gpu() or has_tpu_chip():
        return
    os.environ["JAX_PLATFORMS"] = "cpu"


# --- NVIDIA GPUs as XLA describes them ---------------------------------------------------------------------------
#: The ways a target config spells what :class:`GpuFacts` reads (text format: ``key: value`` anywhere in the
#: document; each key appears once in XLA's specs and in what XLA writes for a device).
_CONFIG_FIELDS = {
    "name": re.compile(r'^\s*device_description_str:\s*"((?:[^"\\]|\\.)*)"', re.M),
    "device_name": re.compile(r'^\s*name:\s*"((?:[^"\\]|\\.)*)"', re.M),
    "cores": re.compile(r"^\s*core_count:\s*(\d+)", re.M),
    "memory": re.compile(r"^\s*device_memory_size:\s*(\d+)", re.M),
    "driver": re.compile(r'^\s*driver_version:\s*"([0-9.]+)"', re.M),
    "runtime": re.compile(r'^\s*runtime_version:\s*"([0-9.]+)"', re.M),
    "cudnn": re.compile(r'^\s*dnn_version:\s*"([0-9.]+)"', re.M),
    "platform": re.compile(r'^\s*platform_name:\s*"([^"]*)"', re.M),
}
_CAPABILITY = re.compile(r"cuda_compute_capability\s*\{([^}]*)\}")
_DNN_INFO = re.compile(r"dnn_version_info\s*\{([^}]*)\}")


@dataclass(frozen=True)
class TargetConfig:
    """What jaxport reads of an XLA GPU target config (the rest goes to XLA as it is)."""

    text: str
    name: str  # the device's name as the config gives it: "NVIDIA H200 141GB HBM3e"
    compute_capability: str  # "9.0a" ("a": the architecture-specific features of sm_90a)
    cores: int | None  # streaming multiprocessors
    memory: int | None  # device memory, bytes
    driver: str  # the CUDA version of the driver, "13.0.0" ("" where the config does not say)
    runtime: str  # the CUDA runtime, "12.8.0"
    cudnn: str  # "9.10.0"
    platform: str  # "CUDA", "ROCM"


def parse_target_config(text: str) -> TargetConfig:
    """The fields of a GPU target config that jaxport reads; ``ValueError`` naming what is missing when the text has
    no device name or compute capability (not a GPU target config, or not an NVIDIA one)."""
    found = {k: (m.group(1) if (m := p.search(text)) else "") for k, p in _CONFIG_FIELDS.items()}
    name = found["name"] or found["device_name"]
    capability = _CAPABILITY.search(text)
    if not name:
        raise ValueError("it names no device (device_description_str, or gpu_device_info's name)")
    if capability is None:
        raise ValueError("it gives no CUDA compute capability (gpu_device_info.cuda_compute_capability): not an "
                         "NVIDIA GPU's target config")
    fields = dict(re.findall(r"(\w+)\s*:\s*(\w+)", capability.group(1)))
    cc = f"{int(fields.get('major', 0))}.{int(fields.get('minor', 0))}"
    if fields.get("feature_extension") == "ACCELERATED_FEATURES":
        cc += "a"
    elif fields.get("feature_extension") == "FAMILY_COMPATIBLE_FEATURES":
        cc += "f"
    cudnn = found["cudnn"]
    if not cudnn and (info := _DNN_INFO.search(text)):
        parts = dict(re.findall(r"(\w+)\s*:\s*(\d+)", info.group(1)))
        cudnn = f"{parts.get('major', 0)}.{parts.get('minor', 0)}.{parts.get('patch', 0)}" if parts else ""
    return TargetConfig(text, name.encode().decode("unicode_escape") if "\\" in name else name, cc,
                        int(found["cores"]) if found["cores"] else None,
                        int(found["memory"]) if found["memory"] else None,
                        found["driver"], found["runtime"], cudnn, found["platform"])


#: Words after a GPU's model in its name: memory size and type, form factor, interconnect.
_DECORATION = re.compile(r"^(\d+GB|HBM\w*|GDDR\w*|SXM\d*|PCIE|NVL\d*|NVLINK)$", re.I)


def device_model(name: str) -> str:
    """A GPU's name without its memory size, memory type or form factor, as XLA's specs and NVIDIA's drivers name
    the same model differently: ``NVIDIA H200 141GB HBM3e`` and ``NVIDIA H200`` are ``NVIDIA H200``;
    ``NVIDIA A100-SXM4-80GB`` is ``NVIDIA A100``. A MIG slice keeps its profile (``NVIDIA H100 MIG 1g.10gb``)."""
    words = name.replace("-", " ").split()
    kept: list[str] = []
    for i, word in enumerate(words):
        if word.upper() == "MIG":
            kept.extend(words[i:i + 2])
            break
        if not _DECORATION.match(word):
            kept.append(word)
    return " ".join(kept)


def version_tuple(text: str) -> tuple[int, ...]:
    """``"13.0.88"`` as ``(13, 0, 88)``; ``()`` for text that is no version."""
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts[:3]) if re.fullmatch(r"\s*\d+(\.\d+)*\s*", text or "x") else ()


@dataclass(frozen=True)
class GpuFacts:
    """What decides whether an executable compiled for an NVIDIA GPU runs on one, and how well (see the module
    docstring): strings, JSON-ready; "" where unknown. For a compile, the versions are those XLA assumed (a
    deviceless one: its target config's); for this machine, those it loads."""

    compute_capability: str  # "9.0a"
    device: str  # the model, :func:`device_model`: "NVIDIA H200"
    cores: str  # streaming multiprocessors: "132"
    plugin: str  # JAX's CUDA plugin, the XLA that compiles and runs: "jax-cuda13-pjrt 0.12.0.1"
    cuda_runtime: str  # "13.0.0"
    cudnn: str  # "9.12.0"
    driver: str  # the CUDA version of the driver: "13.0"
    ptxas: str  # the ptxas that wrote the cubins (a compile), or that XLA uses here: "13.0.88"
    build: str  # "deviceless" (no GPU: never autotuned), "autotuned" (on the GPU), "untuned" (on a GPU, autotuning off)

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> GpuFacts | None:
        if not isinstance(data, dict) or set(data) != set(cls.__dataclass_fields__) or \
                not all(isinstance(v, str) for v in data.values()):
            return None
        return cls(**data)

    def identity(self) -> dict[str, str]:
        """The facts that must be equal for an executable to be used here (the rest are compared as versions, see
        :meth:`differences`): what a record's file name digests."""
        return {"compute_capability": _major_minor(self.compute_capability), "device": self.device,
                "cores": self.cores, "plugin": self.plugin}

    def differences(self, here: GpuFacts) -> list[str]:
        """The facts of this compile that keep its executable from running here (``here``: this machine's), by name:
        another compute capability (major.minor), model, number of multiprocessors or CUDA plugin; a CUDA runtime
        or cuDNN older here than the compile assumed; a driver here older than the ptxas that wrote the cubins, or
        than the driver the compile assumed. A version unknown on either side is not held against it."""
        found = [name for name, value in self.identity().items() if value != here.identity()[name]]
        for name in ("cuda_runtime", "cudnn", "driver"):
            if _newer(getattr(self, name), getattr(here, name), 3 if name == "cudnn" else 2):
                found.append(name)
        if _newer(self.ptxas, here.driver, 2):
            found.append("ptxas")
        return found


def _major_minor(cc: str) -> str:
    return ".".join(re.findall(r"\d+", cc)[:2])


def _newer(built: str, here: str, parts: int) -> bool:
    """Whether version ``built`` is newer than ``here`` in its first ``parts`` numbers (False when either is
    unknown)."""
    a, b = version_tuple(built)[:parts], version_tuple(here)[:parts]
    return bool(a and b) and a > b


def plugin_versions() -> dict[str, str]:
    """The installed distributions of JAX's CUDA plugin, by name (``jax-cuda13-pjrt``: XLA's GPU compiler and
    runtime; ``jax-cuda13-plugin``: JAX's GPU kernels), with their versions; empty where there is none."""
    found = {}
    for cuda in ("13", "12"):
        for part in ("pjrt", "plugin"):
            name = f"jax-cuda{cuda}-{part}"
            try:
                found[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
        if found:
            return found
    return found


def plugin_text() -> str:
    """The CUDA plugin as :attr:`GpuFacts.plugin` names it: ``jax-cuda13-pjrt 0.12.0.1`` (and the kernels'
    distribution where its version differs)."""
    versions = plugin_versions()
    pjrt = next((f"{n} {v}" for n, v in versions.items() if n.endswith("-pjrt")), "")
    kernels = [f"{n} {v}" for n, v in versions.items() if n.endswith("-plugin") and v not in pjrt]
    return ", ".join(filter(None, [pjrt, *kernels]))


def cuda_data_dir() -> str | None:
    """Where XLA finds ``ptxas`` and libdevice in this process: JAX's ``cuda_path`` (``$CUDA_ROOT``, else the
    ``nvidia-cuda-nvcc`` wheel's directory), as JAX hands it to XLA (``xla_gpu_cuda_data_dir``); None when JAX
    found none (XLA then searches the system's CUDA installations)."""
    return cuda_path()


@functools.cache
def ptxas_version(cuda_dir: str | None) -> str:
    """The version of ``cuda_dir``'s ``bin/ptxas`` (``13.0.88``), or "" when there is none or it does not say."""
    if not cuda_dir:
        return ""
    path = os.path.join(cuda_dir, "bin", "ptxas")
    if not os.access(path, os.X_OK):
        return ""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"\bV(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else ""


def _cuda_int(value: int) -> str:
    """CUDA's version integers (13050 is 13.5)."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def _cudnn_int(value: int) -> str:
    """cuDNN's (91200 is 9.12.0; before 9: 8907 is 8.9.7)."""
    if value >= 90000:
        return f"{value // 10000}.{(value % 10000) // 100}.{value % 100}"
    return f"{value // 1000}.{(value % 1000) // 100}.{value % 100}"


def _plugin_readers() -> Any:
    """The CUDA plugin's own readers of the versions of the libraries it loads (``jax_cuda13_plugin._versions``), or
    None without a plugin."""
    try:
        from jax_cuda13_plugin import _versions as cuda13
    except ImportError:
        pass
    else:
        return cuda13
    try:
        from jax_cuda12_plugin import _versions as cuda12
    except ImportError:
        return None
    return cuda12


def loaded_versions() -> dict[str, str]:
    """The CUDA runtime, cuDNN and driver this process loads (through JAX's CUDA plugin), by name; a version the
    plugin cannot read (no GPU, no cuDNN installed) is left out."""
    versions = _plugin_readers()
    if versions is None:
        return {}
    found: dict[str, str] = {}
    for name, read, text in (("cuda_runtime", "cuda_runtime_get_version", _cuda_int),
                             ("cudnn", "cudnn_get_version", _cudnn_int),
                             ("driver", "cuda_driver_get_version", _cuda_int)):
        try:
            found[name] = text(int(getattr(versions, read)()))
        except Exception:  # noqa: BLE001 - the library is missing, or the call fails without a GPU
            continue
    return found


def gpu_facts(config_text: str, device_kind: str, *, deviceless: bool, autotune_level: int | None,
              cores: Any = None) -> GpuFacts:
    """The :class:`GpuFacts` of a compilation for a device ``device_kind`` that XLA describes by ``config_text``
    (its target config: ``xla_client.get_topology_for_devices(devices).target_config``; "" if it gave none):
    for a deviceless compile, the versions its config gives; on a GPU, those this process loads, else the
    config's. ``cores``: the device's multiprocessors where it says (a GPU device's ``core_count``)."""
    try:
        config: TargetConfig | None = parse_target_config(config_text)
    except ValueError:
        config = None
    live = {} if deviceless else loaded_versions()
    name = device_kind or (config.name if config else "")
    if deviceless:
        build = "deviceless"
    else:
        build = "untuned" if autotune_level == 0 else "autotuned"
    return GpuFacts(
        compute_capability=config.compute_capability if config else "",
        device=device_model(name),
        cores=str(config.cores) if config and config.cores else str(cores) if isinstance(cores, int) else "",
        plugin=plugin_text(),
        cuda_runtime=live.get("cuda_runtime") or (config.runtime if config else ""),
        cudnn=live.get("cudnn") or (config.cudnn if config else ""),
        driver=live.get("driver") or (config.driver if config else ""),
        ptxas=ptxas_version(cuda_data_dir()), build=build)
