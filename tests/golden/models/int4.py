"""The golden case of format 1.3: an int4 weight-only quantised layer (int4 weights with float32 scales per output
column, bound), a bound float4_e2m1fn tensor of an odd element count, a uint4 input, and int4 and float4_e2m1fn
outputs."""

import jax.numpy as jnp
import ml_dtypes
import numpy as np

_W = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
_SCALE = (np.abs(_W).max(axis=0) / 7).astype(np.float32)
PARAMS = {"w4": np.clip(np.round(_W / _SCALE), -8, 7).astype(ml_dtypes.int4), "scale": _SCALE,
          "f4": np.array([0.5, -6, 1.5], np.float32).astype(ml_dtypes.float4_e2m1fn)}


def apply(params, x, levels):
    y = x @ (params["w4"].astype(jnp.float32) * params["scale"])
    shifted = (params["w4"].astype(jnp.int8) + levels.astype(jnp.int8)[:, None]).clip(-8, 7).astype(jnp.int4)
    return y, shifted, (params["f4"].astype(jnp.float32) * 2).astype(jnp.float4_e2m1fn)
