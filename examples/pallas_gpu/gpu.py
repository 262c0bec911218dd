"""What a Pallas GPU kernel needs to lower on a machine without a GPU: the GPU it is for, as an abstract device.

Pallas reads the GPU's model (its compute capability) while it lowers a kernel: on a GPU, from the device JAX runs
on; elsewhere (a CPU-only CI machine exporting for ``cuda``), from the abstract mesh in force, whose abstract device
names it. ``on_gpu()`` puts one in force around a kernel's call; on a machine whose JAX runs on that GPU it changes
nothing.
"""

import jax
from jax.sharding import AbstractDevice, AbstractMesh

#: The GPU the kernels are lowered for: an H200 (compute capability 9.0, 132 multiprocessors).
H200 = AbstractDevice(device_kind="NVIDIA H200", num_cores=132, platform="gpu")


def on_gpu(device: AbstractDevice = H200):
    """A context in which Pallas lowers GPU kernels for ``device``."""
    return jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("gpu",), abstract_device=device))
