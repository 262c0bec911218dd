"""Derivatives of a loaded function: cotangents computed through the VJPs an artifact stores.

An artifact exported with ``vjp_order: N`` carries N orders of VJP programs (``export.lowering.gradients``); JAX's
``Exported.call`` is differentiable through them, so ``jax.grad(jaxport.load(...))`` works up to order N.

Bound weights are constants of a loaded function: ``jax.grad`` and ``call --vjp`` give cotangents for the free
inputs only (the stored VJP computes the weights' cotangents too; :func:`vjp` returns them on request). Export the
weights as inputs instead of binding them to differentiate with respect to them in ``jax.grad``.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import dtypes, usercache
from ..artifact.model import Function
from ..errors import InputError, UsageError
from ..jaxprivate.compiler import private_compiles
from ..jaxprivate.exported import vjp_getter, with_vjp_getter
from ..sharding import gather
from .values.npyio import read_npy, read_npz

if TYPE_CHECKING:
    from .loaded import Loaded


def explain_missing(exported: Any, where: str, fname: str, level: int = 1) -> Any:
    """``exported``, whose differentiation beyond the stored orders raises a UsageError saying how to re-export,
    instead of JAX's "No VJP is available"."""
    get = vjp_getter(exported)
    if get is None:
        have = level - 1

        def missing(_: Any) -> Any:
            stored = f"derivatives up to order {have}" if have else "no derivatives"
            raise UsageError(f"{where}: function {fname!r} carries {stored}, and differentiating it {level} "
                             f"time{'s' if level > 1 else ''} needs order {level}. Re-export it with "
                             f"--vjp-order {level} (or 'vjp_order: {level}' in the spec).")

        return with_vjp_getter(exported, missing)

    def wrapped(primal: Any) -> Any:
        return explain_missing(get(primal), where, fname, level + 1)

    return with_vjp_getter(exported, wrapped)


def differentiable(dtype: str) -> bool:
    """Whether an array of this dtype has a cotangent (floating and complex types)."""
    d = dtypes.BY_NAME.get(dtype)
    return d is not None and d.kind in ("float", "complex")


@dataclass
class VjpResult:
    """Outputs of the primal call, and the cotangent of each differentiable free input (and of the bound weights
    when asked for), named."""

    outputs: list[tuple[str, Any]]
    cotangents: list[tuple[str, Any]]
    weight_cotangents: list[tuple[str, Any]]
    #: Inputs that have no cotangent (integers, booleans).
    skipped: list[str]


def vjp(loaded: Loaded, arrays: Mapping[str, Any], cotangents: Mapping[str, Any] | None = None, *,
        weights: bool = False) -> VjpResult:
    """Run a loaded function forward and backward: the outputs and the input cotangents for output cotangents
    ``cotangents`` (by output name; default: ones, which gives the gradient of the sum of the outputs).

    Needs an artifact exported with ``vjp_order >= 1``. With ``weights``, the bound tensors' cotangents are
    returned too.
    """
    import jax
    import numpy as np

    f = loaded.function_record
    where = f"{loaded.path}: function {loaded.function!r}"
    if f.vjp_order < 1:
        raise UsageError(f"{where} carries no derivatives (exported with vjp_order 0). Re-export it with "
                         f"--vjp-order 1 (or 'vjp_order: 1' in the spec).")
    outputs = f.outputs
    flat = loaded.prepare(arrays).flat
    names = [o.name for o in outputs]
    for n in cotangents or {}:
        if n not in names:
            close = difflib.get_close_matches(n, names, n=1)
            raise InputError(f"cotangent {n!r} names no output of {loaded.function!r}; cotangents are named after "
                             f"the outputs: {', '.join(names)}.{f' Did you mean {close[0]!r}?' if close else ''}")
    backend = loaded.backend
    member = loaded.model.members.get(f.payload)
    signed = usercache.vouching_required(member.sha256 if member is not None else None)
    # under a required signature the derivative's programs are compiled here too, never fetched from JAX's cache
    with backend.x64(), private_compiles() if signed else contextlib.nullcontext():
        placed = backend.place(flat)
        n_free = len(placed)

        def forward(*xs: Any) -> Any:
            return backend.trace(list(xs[:n_free]), list(xs[n_free:]))

        primals = (*placed, *backend.weights) if weights else tuple(placed)
        if weights:
            out, pullback = jax.vjp(forward, *primals)
        else:
            out, pullback = jax.vjp(lambda *xs: forward(*xs, *backend.weights), *primals)
        leaves, tree = jax.tree_util.tree_flatten(out)
        cts: list[Any] = []
        for o, value in zip(outputs, leaves):
            given = (cotangents or {}).get(o.name)
            if not differentiable(o.dtype):  # an integer output's cotangent is JAX's float0 (no values)
                cts.append(np.zeros(value.shape, dtype=jax.dtypes.float0))
                continue
            if given is None:
                cts.append(jax.numpy.ones_like(value))
                continue
            g = np.asarray(given)
            if tuple(g.shape) != tuple(value.shape):
                raise InputError(f"cotangent {o.name!r}: shape {tuple(g.shape)}, but the output is "
                                 f"{tuple(value.shape)}; a cotangent has its output's shape.")
            cts.append(jax.numpy.asarray(g, dtype=value.dtype))
        grads = pullback(jax.tree_util.tree_unflatten(tree, cts))
    result = VjpResult([(n, gather(v)) for n, v in zip(names, leaves)], [], [], [])
    for inp, g in zip(f.inputs, grads[:n_free]):
        if differentiable(inp.dtype):
            result.cotangents.append((inp.name, gather(g)))
        else:
            result.skipped.append(inp.name)
    if weights:
        result.weight_cotangents = [(n, gather(g)) for n, g in zip(f.weights, grads[n_free:])]
    return result


def read_cotangents(f: Function, path: str | Path) -> dict[str, Any]:
    """Output cotangents from a file: an ``.npz`` keyed by output name, or an ``.npy`` for a single output."""
    declared = {o.name: o.dtype for o in f.outputs}
    if str(path).lower().endswith(".npz"):
        return read_npz(path, declared)
    if len(declared) == 1:
        (name, dtype), = declared.items()
        return {name: read_npy(path, dtype, name)}
    raise InputError(f"{path}: the function has {len(declared)} outputs ({', '.join(declared)}); give their "
                     f"cotangents in one .npz keyed by output name.")
