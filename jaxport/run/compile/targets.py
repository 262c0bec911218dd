"""Compile targets: the machines ``warmup --target`` and ``check --target`` compile for, which need not be this one.

A target names a kind of machine: ``cpu`` (this host's CPU), or a TPU slice that libtpu describes (``tpu-v5e``, one
v5e chip; ``tpu-v5e-4``, four on one host; ...: :data:`TPU_TARGETS`). A TPU target is compiled for *deviceless*:
libtpu (the extra ``jaxport[tpu]``, the version the installed JAX pins) builds the TPU's compiler and a description
of the slice's devices without a TPU, ``jax.experimental.topologies``, so a CPU-only CI machine compiles exactly what
the TPU will run, and learns what does not fit it (a kernel over the scoped VMEM, a program over the HBM) before
deployment. Importing this module imports no JAX.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import re
from dataclasses import dataclass
from typing import Any

from ..._machine import has_tpu_chip, quiet_libtpu
from ...errors import PlatformError, UsageError

__all__ = ["TPU_TARGETS", "Target", "has_tpu_chip", "libtpu_note", "quiet_libtpu", "target", "target_names"]

GiB = 1 << 30


@dataclass(frozen=True)
class Target:
    """A kind of machine to compile for."""

    name: str  # as --target spells it
    platform: str  # JAX's platform name: "cpu", "tpu"
    topology: str | None  # libtpu's topology name ("v5e:2x2"); None for the host
    chips_per_host: tuple[int, int, int] | None
    #: The device memory of one device (HBM), in bytes, as the chip's specification gives it; None for the host.
    memory_per_device: int | None
    description: str

    @property
    def deviceless(self) -> bool:
        """Whether it is compiled for without its devices (a TPU target, through libtpu)."""
        return self.topology is not None

    def devices(self) -> list[Any]:
        """JAX devices to compile for: the host's CPU devices, or the slice's compile-only devices (deviceless)."""
        import jax

        if self.topology is None:
            return list(jax.devices("cpu"))
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

CPU = Target("cpu", "cpu", None, None, None, "this host's CPU")


def target_names() -> list[str]:
    return ["cpu", *TPU_TARGETS]


def target(name: str, where: str = "--target") -> Target:
    """The target ``name`` names; ``UsageError`` (with the closest name) for one there is not."""
    if name == "cpu":
        return CPU
    found = TPU_TARGETS.get(name)
    if found is not None:
        return found
    names = target_names()
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UsageError(f"{where} {name}: unknown target.{hint} Targets: {', '.join(names)}.")


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
