"""A 12-layer, d=768 pre-norm transformer encoder whose weights are arguments, not constants.

Sized like BERT-base without its embedding table (about 85M parameters), with a polymorphic batch and sequence
length. Because the weights arrive in the `params` pytree, the exported program stays small whatever the weights.
"""

import jax
import jax.numpy as jnp

D_MODEL = 768
N_HEADS = 12
D_FF = 3072
N_LAYERS = 12


def _layer_norm(x, p):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def _attention(x, p):
    batch, seq, _ = x.shape
    qkv = x @ p["qkv"] + p["qkv_bias"]
    q, k, v = jnp.split(qkv.reshape(batch, seq, 3, N_HEADS, D_MODEL // N_HEADS), 3, axis=2)
    q, k, v = (t[:, :, 0].transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(jnp.float32(D_MODEL // N_HEADS))
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(causal, scores, jnp.finfo(jnp.float32).min)
    out = jax.nn.softmax(scores, axis=-1) @ v
    return out.transpose(0, 2, 1, 3).reshape(batch, seq, D_MODEL) @ p["out"] + p["out_bias"]


def _layers(layers):
    """The layers in order: a list, or a dict keyed "0", "1", ... (what an .npz of "/"-separated names nests to)."""
    if isinstance(layers, dict):
        return [layers[k] for k in sorted(layers, key=int)]
    return layers


def encode(x, *, params):
    """Hidden states for a batch of already-embedded token sequences ``x`` of shape (batch, seq, 768)."""
    for layer in _layers(params["layers"]):
        x = x + _attention(_layer_norm(x, layer["ln1"]), layer["attn"])
        h = _layer_norm(x, layer["ln2"])
        x = x + jax.nn.gelu(h @ layer["mlp"]["up"] + layer["mlp"]["up_bias"]) @ layer["mlp"]["down"] \
            + layer["mlp"]["down_bias"]
    return _layer_norm(x, params["ln_f"])


def init_params(seed: int = 0, n_layers: int = N_LAYERS):
    """Random weights with the structure and shapes that transformer.yaml declares (for calling the artifact).

    Deterministic for a given seed; ``n_layers`` below 12 gives a smaller model of the same shape per layer."""
    import numpy as np

    rng = np.random.default_rng(seed)

    def dense(n_in, n_out):
        # Uniform with variance 1/n_in: as good as a normal here and three times faster to draw.
        w = rng.random((n_in, n_out), dtype=np.float32)
        w -= np.float32(0.5)
        w *= np.float32(np.sqrt(12.0 / n_in))
        return w

    def norm():
        return {"scale": np.ones(D_MODEL, np.float32), "bias": np.zeros(D_MODEL, np.float32)}

    layers = [{
        "ln1": norm(),
        "attn": {"qkv": dense(D_MODEL, 3 * D_MODEL), "qkv_bias": np.zeros(3 * D_MODEL, np.float32),
                 "out": dense(D_MODEL, D_MODEL), "out_bias": np.zeros(D_MODEL, np.float32)},
        "ln2": norm(),
        "mlp": {"up": dense(D_MODEL, D_FF), "up_bias": np.zeros(D_FF, np.float32),
                "down": dense(D_FF, D_MODEL), "down_bias": np.zeros(D_MODEL, np.float32)},
    } for _ in range(n_layers)]
    return {"layers": layers, "ln_f": norm()}
