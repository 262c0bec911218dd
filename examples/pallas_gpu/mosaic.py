"""A Pallas Mosaic GPU kernel (`plgpu.kernel`), exported for `cuda` from any machine (examples/pallas_gpu/gpu.py).

It lowers to the custom call `mosaic_gpu_v2`, which JAX guarantees stable: no allowance is needed. Each block of the
grid reads its rows from global memory, computes and writes them back. JAX cannot export it for `[cpu, cuda]`
(Mosaic GPU has no multi-platform lowering): `reference` is what it computes, for the CPU. (A kernel that copies
with the TMA, `plgpu.copy_gmem_to_smem`, does not compile without a GPU: XLA builds its host code against the CUDA
driver, "Failed to lookup host symbol".)
"""

import jax
import jax.numpy as jnp
from gpu import on_gpu
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

#: Rows of one block.
ROWS = 64


def _body(x_gmem, y_gmem, o_gmem):
    rows = pl.ds(jax.lax.axis_index("rows") * ROWS, ROWS)
    o_gmem[rows] = x_gmem[rows] * 2.0 + jnp.exp(y_gmem[rows])


def scaled_add(x, y):
    """``2 x + exp(y)``, a block of rows per block of the grid."""
    with on_gpu():
        return plgpu.kernel(_body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // ROWS,),
                            grid_names=("rows",))(x, y)


def reference(x, y):
    return x * 2.0 + jnp.exp(y)
