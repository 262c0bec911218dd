"""A small bf16 transformer encoder (pre-norm attention and MLP blocks), for the GPU tier: exported on a CPU host for
`[cpu, cuda]` with its weights bound (`PARAMS`, from a fixed seed: transformer.yaml), called on the GPU.

Attention is XLA's (`jax.nn.dot_product_attention(implementation="xla")`): portable, on every platform. cuDNN's
(`implementation="cudnn"`) needs cuDNN where it is traced and a custom call JAX does not keep stable.
"""

import jax
import jax.numpy as jnp
import numpy as np

LAYERS, WIDTH, HEADS, HIDDEN = 2, 256, 4, 1024


def init(seed: int = 0) -> dict[str, np.ndarray]:
    """The weights, bf16, as numpy arrays by name (``layer0/qkv``, ...)."""
    rng = np.random.default_rng(seed)
    params = {}
    for i in range(LAYERS):
        for name, shape in (("qkv", (WIDTH, 3 * WIDTH)), ("out", (WIDTH, WIDTH)), ("up", (WIDTH, HIDDEN)),
                            ("down", (HIDDEN, WIDTH))):
            params[f"layer{i}/{name}"] = (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(jnp.bfloat16)
        for name in ("norm1", "norm2"):
            params[f"layer{i}/{name}"] = np.ones((WIDTH,), jnp.bfloat16)
    return params


def _norm(x, scale):
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (x32 * scale.astype(jnp.float32)).astype(x.dtype)


def apply(params, x):
    """``x``: bf16[batch, seq, WIDTH] -> bf16[batch, seq, WIDTH]."""
    batch, seq, _ = x.shape
    for i in range(LAYERS):
        p = {k.split("/", 1)[1]: v for k, v in params.items() if k.startswith(f"layer{i}/")}
        q, k, v = jnp.split(_norm(x, p["norm1"]) @ p["qkv"], 3, axis=-1)
        heads = [t.reshape(batch, seq, HEADS, WIDTH // HEADS) for t in (q, k, v)]
        attended = jax.nn.dot_product_attention(*heads, is_causal=True, implementation="xla")
        x = x + attended.reshape(batch, seq, WIDTH) @ p["out"]
        x = x + jax.nn.gelu(_norm(x, p["norm2"]) @ p["up"]) @ p["down"]
    return x


#: The weights the spec binds (2.4 M parameters, 4.7 MB).
PARAMS = init()
