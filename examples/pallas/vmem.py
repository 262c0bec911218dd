"""A Pallas TPU kernel that does not fit the chip: its single block, 32 MiB in and 32 MiB out, needs 64 MiB of scoped
VMEM, where a TPU v5e allows 16 MiB. It exports on any machine; `jaxport warmup --target tpu-v5e` (or `check
--target tpu-v5e`) refuses it on a machine without a TPU, with XLA's sizes, before it reaches one."""

import jax
from jax.experimental import pallas as pl


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def double(x):
    """x * 2, as one block (4096 x 2048 float32 in spec-vmem.yaml)."""
    block = pl.BlockSpec(x.shape, lambda i: (0, 0))
    return pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(1,), in_specs=[block],
                          out_specs=block)(x)
