"""Options that choose the devices a command runs on: simulated CPU devices and a ``jax.distributed`` job.

They act before JAX starts its backend, so a command applies them (:func:`apply`) before anything imports JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

F = Callable[..., Any]


#: The most devices --host-devices simulates on the CPU; XLA aborts far above it.
MAX_HOST_DEVICES = 4096
#: The most processes of a distributed job (--num-processes): far more hosts than any TPU or GPU cluster has.
MAX_PROCESSES = 1 << 20


@dataclass(frozen=True)
class Devices:
    host_devices: int | None = None
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None

    @property
    def distributed(self) -> bool:
        return self.coordinator is not None


def device_options(f: F) -> F:
    """``--host-devices``, ``--coordinator``, ``--num-processes``, ``--process-id``, passed as ``devices``."""

    @functools.wraps(f)  # keeps the options declared below this decorator (click stores them on the function)
    def wrapper(*args: Any, host_devices: int | None, coordinator: str | None, num_processes: int | None,
                process_id: int | None, **kwargs: Any) -> Any:
        return f(*args, devices=Devices(host_devices, coordinator, num_processes, process_id), **kwargs)

    wrapper = click.option("--process-id", type=click.IntRange(0, MAX_PROCESSES - 1), metavar="I",
                           help="With --coordinator: this process's index, 0 to --num-processes - 1.")(wrapper)
    wrapper = click.option("--num-processes", type=click.IntRange(1, MAX_PROCESSES), metavar="P",
                           help="With --coordinator: how many processes take part.")(wrapper)
    wrapper = click.option("--coordinator", metavar="HOST:PORT",
                           help="Run as one process of a jax.distributed job whose process 0 listens at HOST:PORT; "
                                "the sharded program spans every process's devices.")(wrapper)
    return click.option("--host-devices", type=click.IntRange(min=1, max=MAX_HOST_DEVICES), metavar="N",
                        help="Simulate N devices on the CPU (XLA_FLAGS=--xla_force_host_platform_device_count=N), "
                             "to run a sharded artifact on a machine without N accelerators.")(wrapper)


def apply(devices: Devices) -> None:
    """Set the device count and join the distributed job, before JAX starts."""
    given = [devices.coordinator is not None, devices.num_processes is not None, devices.process_id is not None]
    if any(given) and not all(given):
        raise click.UsageError("--coordinator, --num-processes and --process-id go together: give all three.")
    if devices.distributed and devices.process_id is not None and devices.num_processes is not None and \
            devices.process_id >= devices.num_processes:
        raise click.UsageError(f"--process-id {devices.process_id}: the processes of a job of --num-processes "
                               f"{devices.num_processes} are numbered 0 to {devices.num_processes - 1}.")
    from jaxport.run import distributed

    if devices.host_devices is not None:
        distributed.host_devices(devices.host_devices)
    if devices.distributed:
        assert devices.coordinator is not None and devices.num_processes is not None
        assert devices.process_id is not None
        distributed.native_output_to_stderr()
        distributed.initialize(devices.coordinator, devices.num_processes, devices.process_id)
