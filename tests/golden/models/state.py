"""A golden case of format 1.2: a function that returns a namedtuple (recorded by path) and a PRNG key (its key
data)."""

import collections

import jax
import jax.numpy as jnp

Step = collections.namedtuple("Step", ["position", "energy"])


def sample(x, key):
    k1, k2 = jax.random.split(key)
    position = x + jax.random.normal(k1, x.shape)
    return Step(position=position, energy=jnp.sum(position ** 2, axis=-1)), k2
