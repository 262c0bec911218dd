"""Running a sharded artifact on more devices than one process has: simulated CPU devices and ``jax.distributed``.

``host_devices(N)`` makes JAX's CPU backend expose N devices (``--host-devices N``), which must happen before JAX
creates its backend: the CLI calls it before importing JAX. ``initialize(...)`` joins a ``jax.distributed`` job
(``--coordinator HOST:PORT --num-processes P --process-id I``): after it, ``jax.devices()`` lists every process's
devices, a sharded artifact's mesh spans them all, each process places only the shards its own devices hold
and every process gets the whole result (gathered across processes).
On CPU the processes exchange data with gloo over TCP.
"""

from __future__ import annotations

import os
import re
import sys

from ..errors import UsageError
from ..jaxprivate.runtime import backends_initialized

_FLAG = "--xla_force_host_platform_device_count"


def host_devices(n: int) -> None:
    """Make the CPU backend expose ``n`` devices. Before JAX starts its backend, this sets ``XLA_FLAGS`` (for this
    process and its children) and ``jax_num_cpu_devices``; afterwards it only checks that the count already is
    ``n``."""
    if n < 1:
        raise UsageError(f"--host-devices {n}: the number of devices must be at least 1.")
    flags = re.sub(rf"{_FLAG}=\S*\s*", "", os.environ.get("XLA_FLAGS", "")).strip()
    jax = sys.modules.get("jax")
    if jax is not None and _backend_started():
        have = len(jax.devices("cpu")) if _has_cpu(jax) else 0
        if have == n or jax.process_count() > 1 and jax.local_device_count() == n:
            return
        raise UsageError(f"--host-devices {n}: JAX already started in this process with {have} CPU device"
                         f"{'s' if have != 1 else ''}; the device count can only be chosen before JAX starts. Run "
                         f"jaxport in a new process (or set XLA_FLAGS={_FLAG}={n} before starting Python).")
    os.environ["XLA_FLAGS"] = f"{flags} {_FLAG}={n}".strip()
    if jax is not None:
        jax.config.update("jax_num_cpu_devices", n)


def _backend_started() -> bool:
    return backends_initialized()


def _has_cpu(jax: object) -> bool:
    try:
        jax.devices("cpu")  # type: ignore[attr-defined]
        return True
    except RuntimeError:
        return False


def initialize(coordinator: str, num_processes: int, process_id: int, timeout: int = 300) -> None:
    """Join a ``jax.distributed`` job before JAX starts its backend; the coordinator is process 0's
    ``HOST:PORT``."""
    if num_processes < 1 or not 0 <= process_id < num_processes:
        raise UsageError(f"--process-id {process_id} must be between 0 and --num-processes - 1 "
                         f"({num_processes - 1}).")
    if not re.fullmatch(r"[^\s:]+:[0-9]{1,5}", coordinator):
        raise UsageError(f"--coordinator {coordinator!r} is not HOST:PORT (e.g. 127.0.0.1:12345).")
    import jax

    if _backend_started():
        raise UsageError("--coordinator: JAX already started in this process; a distributed run must join its job "
                         "before JAX starts. Run jaxport in a new process.")
    try:
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id, initialization_timeout=timeout)
    except Exception as e:  # noqa: BLE001 - JAX reports connection problems as RuntimeError or XlaRuntimeError
        text = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        raise UsageError(f"--coordinator {coordinator}: cannot join the distributed job as process {process_id} of "
                         f"{num_processes}: {text}. Start every process with the same --coordinator and "
                         f"--num-processes, each with its own --process-id.") from None


def native_output_to_stderr() -> None:
    """Send what native libraries print on file descriptor 1 (gloo reports each connection there) to stderr, and
    keep Python's ``sys.stdout`` on the real standard output, so that ``--json`` output stays one JSON document."""
    sys.stdout.flush()
    real = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(real, "w", buffering=1, encoding=getattr(sys.stdout, "encoding", None) or "utf-8",
                           errors="replace")
