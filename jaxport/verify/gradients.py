"""``verify``'s check of a stored derivative against the live function's."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from .. import dtypes
from ..artifact.contract import concrete_shape
from ..run.gradients import differentiable, vjp
from ..tolerance import OutputResult, compare
from .live import LiveFunction


def compare_with_live(loaded: Any, live: LiveFunction, arrays: Mapping[str, Any], seed: int, atol: float | None,
                      rtol: float | None) -> list[OutputResult]:
    """``verify``'s check of the stored derivative: the input cotangents of the artifact and of the live function
    (``jax.vjp``) for the same seeded random output cotangents, compared like outputs (named ``vjp(INPUT)``)."""
    import jax
    import numpy as np

    f = loaded.function_record
    env = loaded.check(arrays)
    rng = np.random.default_rng(seed + 7919)
    cts = {o.name: rng.standard_normal(concrete_shape(o, env)).astype(dtypes.to_numpy(o.dtype))
           for o in f.outputs if differentiable(o.dtype)}
    got = vjp(loaded, arrays, cts)
    flat = [arrays[n] for n in f.input_names]
    x64 = jax.enable_x64(True) if f.x64 else contextlib.nullcontext()
    with x64:
        out, pullback = jax.vjp(lambda *xs: live.program(list(xs)), *flat)
        leaves, tree = jax.tree_util.tree_flatten(out)
        ct_leaves = [np.asarray(cts[o.name]) if differentiable(o.dtype) else
                     np.zeros(np.shape(v), dtype=jax.dtypes.float0) for o, v in zip(f.outputs, leaves)]
        expected = pullback(jax.tree_util.tree_unflatten(tree, ct_leaves))
    wanted = dict(got.cotangents)
    results = []
    for name, e in zip(f.input_names, expected):
        if name in wanted:
            results.append(compare(f"vjp({name})", np.asarray(e), wanted[name], atol, rtol))
    return results
