"""What the running process's JAX does where no public API reaches: the frames it skips when it names an
operation's source line, whether its backends started, jaxlib's CPU LAPACK kernels (which ones, initializing them,
and keeping JAX from initializing them for a program that calls none), and the runtime library of a Pallas Mosaic
GPU kernel.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


def register_frame_exclusion(prefix: str) -> None:
    """Make JAX skip the frames of files under ``prefix`` when it picks the user frame of an op's source location.

    The public name is ``jax.extend.source_info_util.register_exclusion``, whose import brings ``jax.extend`` (Pallas,
    checkify: 25 modules) into every export; this is the function it re-exports."""
    from jax._src import source_info_util  # jax.extend re-exports it: see the docstring

    source_info_util.register_exclusion(prefix)


def backends_initialized() -> bool:
    """Whether JAX has started its backends in this process (after which the device count is fixed).

    No public API tells without starting them.
    """
    from jax._src import xla_bridge  # no public API

    return bool(xla_bridge.backends_are_initialized())


def lapack_targets() -> frozenset[str]:
    """The custom-call targets of jaxlib's CPU LAPACK kernels: the kernels that need LAPACK initialized.

    No public API lists them; they are jaxlib's registrations for the CPU platform.
    """
    try:
        from jax._src.lib import lapack  # no public API
    except ImportError:
        return frozenset()
    return frozenset(name for name, *_ in lapack.registrations().get("cpu", []))


def initialize_lapack() -> None:
    """Make jaxlib's CPU LAPACK kernels callable (idempotent; it imports ``scipy.linalg``).

    jax 0.10 does it itself when it lowers a call of an exported program for CPU; jax 0.9.x does not, and a process
    that runs an exported program calling a LAPACK kernel before anything else initialized them dies of SIGSEGV
    (measured with jax 0.9.1: ``jnp.linalg.solve`` exported, then called in a fresh process). No public API does it.
    """
    try:
        from jax._src.lib import lapack  # no public API: see the docstring

        start = lapack._lapack.initialize
    except (ImportError, AttributeError):
        return
    start()


#: Per thread: how many :func:`lapack_left_alone` blocks are open.
_lapack_skips = threading.local()


@contextlib.contextmanager
def lapack_left_alone() -> Iterator[None]:
    """Within the block, lowering ``Exported.call`` in this thread does not initialize the CPU LAPACK kernels.

    JAX's lowering of a call to an exported program initializes them for every program exported for CPU (jax 0.10:
    ``_export._ensure_backends_initialized``), which imports ``scipy.linalg``: 0.09 s of every process's first call
    (BENCHMARKS.md, issue 16), whether the program calls LAPACK or not. The caller opens this block only for a
    program whose custom calls, as the allowlist check read them, include none of :func:`lapack_targets`; a program
    that does call one initializes LAPACK as JAX does. Lowering outside the block (another thread, a user's own
    ``jax.jit`` around a loaded function) is unchanged. No public API controls this; a JAX without the hook (jax 0.9)
    is left as it is.
    """
    try:
        from jax._src.lax import linalg  # no public API
    except ImportError:
        yield
        return
    original = getattr(linalg, "initialize_lapack", None)
    if original is None:
        yield
        return
    if not getattr(original, "_jaxport_gate", False):
        def gate() -> None:
            if not getattr(_lapack_skips, "depth", 0):
                original()

        gate._jaxport_gate = True  # type: ignore[attr-defined]
        linalg.initialize_lapack = gate
    _lapack_skips.depth = getattr(_lapack_skips, "depth", 0) + 1
    try:
        yield
    finally:
        _lapack_skips.depth -= 1


#: The custom call of a Pallas Mosaic GPU kernel (``plgpu.kernel``).
MOSAIC_GPU_TARGET = "mosaic_gpu_v2"


def mosaic_gpu_runtime() -> None:
    """Have XLA find Mosaic GPU's runtime library when it compiles a program holding a Pallas Mosaic GPU kernel
    (:data:`MOSAIC_GPU_TARGET`): XLA builds the kernel's host code against it, at the path
    ``MOSAIC_GPU_RUNTIME_LIB_PATH`` names, which JAX sets only when its Mosaic GPU module is imported (by the code
    that writes such a kernel), never in a process that loads the program from an artifact; XLA's compile then
    fails with ``Failed to lookup host symbol``. Sets it as JAX does, where it is unset and the CUDA plugin has the
    library."""
    import os
    from pathlib import Path

    if "MOSAIC_GPU_RUNTIME_LIB_PATH" in os.environ:
        return
    try:
        from jax._src.lib import mosaic_gpu  # no public API: the plugin's Mosaic GPU extension, as JAX finds it
    except ImportError:
        return
    extension = getattr(getattr(mosaic_gpu, "_mosaic_gpu_ext", None), "__file__", None)
    if not extension:
        return
    path = Path(extension).parent / "libmosaic_gpu_runtime.so"
    if path.is_file():
        os.environ["MOSAIC_GPU_RUNTIME_LIB_PATH"] = str(path)
