"""XLA's side, reached through jaxlib where JAX has no public API: the client imported and its flags parsed as a
process's first compilation would (the start-up probe, ``isolation.startup``), libtpu started without opening a device,
where JAX found CUDA for XLA, and the PJRT topology of devices (what XLA compiles for: ``jaxport target``, a
compilation's facts).

Nothing is imported at import: ``isolation.startup`` and ``_machine`` import this module on every command's path.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's constant, without importing typing on every command's path
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def import_client() -> None:
    """Import jaxlib's XLA client, as JAX's start does first. jaxlib's own module, not JAX's: the start-up probe
    checks settings JAX may refuse when it is imported."""
    from jaxlib import xla_client  # noqa: F401 - no public API: see the module docstring


def parse_flags() -> None:
    """Have XLA parse ``XLA_FLAGS`` as a process's first compilation does (``CompileOptions()``, once per process):
    a flag XLA refuses ends the process here."""
    from jaxlib import xla_client  # no public API: see the module docstring

    xla_client.CompileOptions()


def start_tpu_plugin(library: str) -> None:
    """Load libtpu at ``library`` as the ``tpu`` PJRT plugin and initialize it (libtpu parses its flags here), without
    opening a device."""
    from jaxlib import xla_client  # no public API: see the module docstring

    xla_client.load_pjrt_plugin_dynamically("tpu", library)
    xla_client.initialize_pjrt_plugin("tpu")


def cuda_path() -> str | None:
    """Where XLA finds ``ptxas`` and libdevice in this process: JAX's ``cuda_path`` (``$CUDA_ROOT``, else the
    ``nvidia-cuda-nvcc`` wheel's directory), as JAX hands it to XLA (``xla_gpu_cuda_data_dir``); None when JAX found
    none (XLA then searches the system's CUDA installations)."""
    try:
        from jax._src import lib  # no public API: JAX's own choice of the directory
    except ImportError:
        return None
    path = getattr(lib, "cuda_path", None)
    return str(path) if path else None


def topology(devices: Sequence[Any]) -> Any:
    """The PJRT topology of ``devices``: its ``fingerprint()``, and its ``target_config`` (for a GPU, XLA's
    description of the device: name, multiprocessors, CUDA and cuDNN versions). Raises what jaxlib raises for a
    platform that has none."""
    from jax._src.lib import xla_client  # no public API: see the module docstring

    return xla_client.get_topology_for_devices(list(devices))
