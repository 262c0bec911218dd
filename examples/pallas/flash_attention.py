"""JAX's own Pallas TPU flash-attention kernel, forward and backward: exported for `tpu` from any machine with
`vjp_order: 1` (spec-flash-attention.yaml), so `jax.grad` of the loaded artifact runs the kernel's backward passes."""

from jax.experimental.pallas.ops.tpu.flash_attention import flash_attention


def attention(q, k, v):
    """Causal attention over [batch, heads, seq, head_dim] queries, keys and values."""
    return flash_attention(q, k, v, causal=True, sm_scale=q.shape[-1] ** -0.5)
