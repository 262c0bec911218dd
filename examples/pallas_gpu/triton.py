"""A Pallas Triton kernel, exported for `cuda` from any machine (examples/pallas_gpu/gpu.py: the GPU it is for).

It lowers to the custom call `__gpu$xla.gpu.triton`, which JAX does not guarantee stable (Triton promises no
compatibility of its IR across releases): the spec allows it (`allow_custom_calls`), and the artifact runs with the
jaxlib that exported it. JAX cannot export a `pallas_call` for `[cpu, cuda]` (its CPU lowering takes interpret mode
only), so the kernel is exported for `cuda`, and `reference` is what it computes, for the CPU. JAX 0.12 deprecates
Pallas's Triton backend (a DeprecationWarning when it lowers): Mosaic GPU (mosaic.py) is its successor.
"""

import jax
import jax.numpy as jnp
from gpu import on_gpu
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

#: Rows and columns of one block: Triton's blocks are powers of two.
BLOCK = (16, 128)


def _scaled_add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + jnp.tanh(y_ref[...])


def scaled_add(x, y):
    """``2 x + tanh(y)``, a block of rows per program instance."""
    spec = pl.BlockSpec(BLOCK, lambda i: (i, 0))
    with on_gpu():
        return pl.pallas_call(_scaled_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid=(x.shape[0] // BLOCK[0],), in_specs=[spec, spec], out_specs=spec,
                              compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=1))(x, y)


def reference(x, y):
    return x * 2.0 + jnp.tanh(y)
