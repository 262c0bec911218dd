"""Typed PRNG key inputs (``jax.random.key`` arrays) of ``call``, ``verify`` and ``Loaded.random_inputs``: keys made
from a seed, and keys to and from their *key data*, the ``uint32`` array that files hold (``--inputs``,
``--save-inputs``).

A seed ``N`` makes ``jax.random.key(N, impl=IMPL)`` for a scalar key input and
``jax.random.split(jax.random.key(N, impl=IMPL), SHAPE)`` for an array of keys; seeds are taken modulo 2**32, as
JAX takes them without 64-bit types. A key input's key data has the input's shape followed by the implementation's
data shape (``(2,)`` for threefry2x32, ``(4,)`` for rbg and unsafe_rbg): ``jax.random.key_data`` of the keys.
Imports JAX, when it makes or wraps a key.
"""

from __future__ import annotations

import re
from typing import Any

from ... import dtypes
from ...artifact.model import Input, replace
from ...errors import InputError

#: ``--inputs NAME=seed:N``: the key input NAME made from the seed N.
SEED = re.compile(r"^seed:([0-9]{1,20})$")


def is_key_input(inp: Input) -> bool:
    """Whether a manifest input is a typed PRNG key array."""
    return dtypes.is_key(inp.dtype)


def data_input(inp: Input) -> Input:
    """The key input ``inp`` as its key data: ``uint32``, the data axes appended to its shape (what a file holding
    the keys must match)."""
    return replace(inp, dtype="uint32", shape=(*inp.shape, *dtypes.KEYS[inp.dtype].data_shape))


def seed_of(text: str) -> int | None:
    """The seed ``N`` of a ``seed:N`` value, else None."""
    m = SEED.match(text.strip())
    return int(m.group(1)) if m else None


def from_seed(inp: Input, shape: tuple[int, ...], seed: int) -> Any:
    """The keys of a key input of ``shape`` made from ``seed`` (see the module docstring)."""
    import jax

    impl = dtypes.KEYS[inp.dtype].impl
    key = jax.random.key(seed % (1 << 32), impl=impl)
    return key if shape == () else jax.random.split(key, shape)


def wrap(data: Any, inp: Input, where: str) -> Any:
    """The keys whose key data ``data`` (a numpy array read from ``where``) holds, for the key input ``inp``; an
    InputError for data that cannot be keys of its implementation."""
    import jax

    key = dtypes.KEYS[inp.dtype]
    axes = len(key.data_shape)
    if str(data.dtype) != "uint32" or tuple(data.shape[len(data.shape) - axes:]) != key.data_shape \
            or data.ndim < axes:
        raise InputError(f"{where}: input {inp.name!r} is a PRNG key array ({inp.dtype}), whose file holds its "
                         f"key data: uint32 with a last axis of {key.data_shape[0]} (jax.random.key_data(keys)), but "
                         f"the array is {data.dtype}{list(data.shape)}. Save jax.random.key_data(keys), or give "
                         f"{inp.name}=seed:N to make the keys from a seed.")
    return jax.random.wrap_key_data(data, impl=key.impl)


def key_data(value: Any) -> Any:
    """A typed key array's key data as a numpy ``uint32`` array; any other array as numpy."""
    import numpy as np

    if dtypes.is_key(str(getattr(value, "dtype", ""))):
        import jax

        return np.asarray(jax.random.key_data(value))
    return np.asarray(value)
