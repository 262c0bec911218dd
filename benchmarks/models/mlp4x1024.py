"""A 4x1024 MLP (four dense layers of width 1024, ReLU between them): the compute-bound model of
benchmarks/bench_serve.py. Weights from seed 0, closed over (constants of the exported program)."""

import jax
import jax.numpy as jnp
import numpy as np

WIDTH = 1024
LAYERS = 4


def init_params(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32), np.zeros(WIDTH, np.float32))
            for _ in range(LAYERS)]


PARAMS = init_params()


def apply(params, x):
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:
            x = jax.nn.relu(x)
    return x


def predict(x):
    """``apply`` with the parameters closed over; f32[batch, 1024] -> f32[batch, 1024]."""
    return apply(PARAMS, jnp.asarray(x))
