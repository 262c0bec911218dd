"""A tiny flax.linen CNN with batch normalisation, for binding its variables (`params` and `batch_stats`)."""

import flax.linen as nn
import jax
import jax.numpy as jnp


class CNN(nn.Module):
    """8x8 one-channel images -> 10 class log-probabilities."""

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(features=4, kernel_size=(3, 3))(x)
        x = nn.BatchNorm(use_running_average=True)(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape(x.shape[0], -1)
        return nn.log_softmax(nn.Dense(features=10)(x))


MODEL = CNN()


def init_variables(seed: int = 0):
    """The model's variables, ``{"params": ..., "batch_stats": ...}``, with non-trivial batch statistics."""
    variables = MODEL.init(jax.random.key(seed), jnp.zeros((1, 8, 8, 1), jnp.float32))
    stats = variables["batch_stats"]["BatchNorm_0"]
    k1, k2 = jax.random.split(jax.random.key(seed + 1))
    stats = {"mean": 0.1 * jax.random.normal(k1, stats["mean"].shape),
             "var": 1.0 + 0.5 * jax.random.uniform(k2, stats["var"].shape)}
    return {"params": variables["params"], "batch_stats": {"BatchNorm_0": stats}}


VARIABLES = init_variables()


def apply(variables, x):
    """Class log-probabilities for a batch of images (inference: running batch statistics)."""
    return MODEL.apply(variables, x)
