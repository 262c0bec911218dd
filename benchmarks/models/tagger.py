"""A sequence tagger (bench_serve.py's sequence model): token ids -> an embedding, two encoder layers of
bidirectional self-attention (4 heads, d=64) and a feed-forward block, and a score per tag for every token. Weights
from seed 0, closed over (constants of the exported program).

Attention runs over the whole sequence, so a padded token would change every other token's scores: the row-wise
proof refuses padding along ``seq`` (each request's sequence length is its own program), and allows it along
``batch`` (sequences never mix)."""

import jax
import jax.numpy as jnp
import numpy as np

VOCAB = 1000
D_MODEL = 64
HEADS = 4
LAYERS = 2
TAGS = 17


def init_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)

    def dense(n_in: int, n_out: int) -> np.ndarray:
        return (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)

    return {"embed": dense(VOCAB, D_MODEL) * np.float32(np.sqrt(VOCAB / D_MODEL)),
            "layers": [{"qkv": dense(D_MODEL, 3 * D_MODEL), "out": dense(D_MODEL, D_MODEL),
                        "up": dense(D_MODEL, 4 * D_MODEL), "down": dense(4 * D_MODEL, D_MODEL)}
                       for _ in range(LAYERS)],
            "tags": dense(D_MODEL, TAGS)}


PARAMS = init_params()


def _norm(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True) + 1e-5)


def _attention(x, p):
    batch, seq, _ = x.shape
    q, k, v = jnp.split((x @ p["qkv"]).reshape(batch, seq, 3, HEADS, D_MODEL // HEADS), 3, axis=2)
    q, k, v = (t[:, :, 0].transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(D_MODEL // HEADS))
    out = jax.nn.softmax(scores, axis=-1) @ v
    return out.transpose(0, 2, 1, 3).reshape(batch, seq, D_MODEL) @ p["out"]


def apply(params, ids):
    x = jnp.take(params["embed"], ids, axis=0)
    for layer in params["layers"]:
        x = x + _attention(_norm(x), layer)
        x = x + jax.nn.gelu(_norm(x) @ layer["up"]) @ layer["down"]
    return _norm(x) @ params["tags"]


def predict(ids):
    """``apply`` with the parameters closed over; i32[batch, seq] -> f32[batch, seq, 17]."""
    return apply(PARAMS, ids)
