"""A two-layer MLP sharded over a data x model mesh of 8 devices: the example of specs/SPEC.md "Shardings".

The batch is split over `data`; the hidden layer over `model` (w1 by columns, w2 by rows), as in Megatron-style
tensor parallelism. The function itself knows nothing of devices: the spec gives the shardings.
"""

import jax
import jax.numpy as jnp
import numpy as np


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((64, 128)) / 8).astype(np.float32),
        "b1": np.zeros(128, np.float32),
        "w2": (rng.standard_normal((128, 16)) / 11).astype(np.float32),
    }


def predict(x, params):
    """Scores for a batch of 64-feature rows."""
    h = jax.nn.gelu(x @ params["w1"] + params["b1"])
    return h @ params["w2"]


def loss(x, params):
    """A scalar of `predict`, for gradients: jax.grad(loss) against jax.grad of the loaded artifact."""
    return jnp.mean(predict(x, params) ** 2)
