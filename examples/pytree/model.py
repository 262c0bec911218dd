"""Pytree arguments, keyword arguments, a static argument, a `2*h` dimension and a constraint."""

import jax.numpy as jnp


def encode(x, mask, scale, *, params):
    """Project the first half of each row of `x`, gated by `mask`, scaled by the static `scale`."""
    half = x.shape[1] // 2
    h = jnp.tanh(x[:, :half] @ params["w"] + params["b"])
    gate = jnp.mean(mask.astype(jnp.float32), axis=1, keepdims=True)
    return {"features": h * gate * scale, "norm": jnp.sqrt(jnp.sum(h * h))}
