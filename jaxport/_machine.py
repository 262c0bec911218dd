"""Facts about this machine that bound what jaxport reads into memory and lets a child process use."""

from __future__ import annotations

import os


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
