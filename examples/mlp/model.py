"""A small MLP classifier with a polymorphic batch: the example `make demo` exports, inspects and calls."""

import jax
import jax.numpy as jnp
import numpy as np


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((784, 32)) / 28).astype(np.float32),
        "b1": np.zeros(32, np.float32),
        "w2": (rng.standard_normal((32, 10)) / 6).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }


PARAMS = init_params()


def apply(params, x):
    """Class log-probabilities for a batch of flattened 28x28 images."""
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jax.nn.log_softmax(h @ params["w2"] + params["b2"])


def predict(x):
    """`apply` with the parameters closed over: the simplest export (they become constants of the program)."""
    return apply(PARAMS, x)
