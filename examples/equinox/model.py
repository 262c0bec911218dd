"""A tiny equinox conv net, bound three ways: the module itself (its arrays become tensors, its other fields are
baked into the program), its array half from `eqx.partition`, or a file of arrays keyed by their paths."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp


class ConvNet(eqx.Module):
    """One 8x8 single-channel image -> 10 class log-probabilities."""

    conv: eqx.nn.Conv2d
    head: eqx.nn.Linear
    activation: Callable  # a function: a non-array leaf, baked into the exported program
    num_classes: int = eqx.field(static=True)

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 4, kernel_size=3, padding=1, key=k1)
        self.head = eqx.nn.Linear(4 * 4 * 4, 10, key=k2)
        self.activation = jax.nn.relu
        self.num_classes = 10

    def __call__(self, image):
        x = self.activation(self.conv(image))  # (4, 8, 8)
        x = x.reshape(4, 4, 2, 4, 2).mean(axis=(2, 4))  # 2x2 average pooling -> (4, 4, 4)
        return jax.nn.log_softmax(self.head(x.reshape(-1)))


MODEL = ConvNet(jax.random.key(0))
PARAMS, STATIC = eqx.partition(MODEL, eqx.is_array)


def apply(model, x):
    """Class log-probabilities for a batch of images, shape (batch, 1, 8, 8)."""
    return jax.vmap(model)(x)


def apply_partitioned(params, x):
    """``apply`` on the model rebuilt from its arrays (bound) and the rest of it (this module's ``STATIC``)."""
    return apply(eqx.combine(params, STATIC), x)


def apply_arrays(arrays, x):
    """``apply`` on the model rebuilt from nested dicts of arrays keyed like its fields (``conv/weight``), as bound
    from params.npz or params.safetensors."""

    def take(path, leaf):
        node = arrays
        for key in path:
            node = node[key.name]
        return jnp.asarray(node)

    return apply_partitioned(jax.tree_util.tree_map_with_path(take, PARAMS), x)
