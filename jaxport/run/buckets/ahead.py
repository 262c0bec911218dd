"""The buckets compiled ahead of a call, by purpose: a warm-up's shape signatures (:func:`plan_warmup`: ``jaxport
warmup --dim``, ``Loaded.warmup``) and the executables compiled for another machine (:func:`plan_target`:
``warmup --target``, ``check --target``). Each value given is checked by the rules of every ``--dim``
(``sizes``); a warm-up guesses none (a server knows the shapes it will serve), a target's plan without values takes
the buckets ``jaxport compile`` proposes from the spec's bounds (``plan.plan``). No JAX.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from ...artifact import contract
from ...artifact.model import Function
from ...errors import UsageError
from . import sizes
from .plan import plan

#: The most shape signatures one warm-up compiles (every combination of the given values counts).
MAX_SIGNATURES = 256

#: What ``Loaded.warmup`` takes: dimension values (one signature, or several values per dimension: every
#: combination), or a list of such mappings.
Shapes = Mapping[str, int | Sequence[int]] | Sequence[Mapping[str, int]] | None


def plan_warmup(fn: Function, shapes: Shapes, where: str) -> list[dict[str, int]]:
    """The dimension values of each signature to compile: ``{"batch": 8}`` gives one, ``{"batch": [1, 8]}`` two,
    ``[{"batch": 1}, {"batch": 8}]`` two, each checked by the rules of every ``--dim`` (``buckets.sizes``). Every
    dimension variable of the function needs a value (a server knows the shapes it will serve; none is guessed)."""
    variables = contract.dimension_variables(fn)
    if shapes is None:
        shapes = {}
    if isinstance(shapes, Mapping):
        count = math.prod(len(v) if isinstance(v, (list, tuple, range)) else 1 for v in shapes.values())
        if count > MAX_SIGNATURES:
            raise UsageError(f"{where}: {count} shape signatures to warm up (every combination of the values "
                             f"given); at most {MAX_SIGNATURES} are allowed. Give fewer values.")
        checked = sizes.given(fn, shapes)
        combos = [dict(zip(checked, chosen)) for chosen in itertools.product(*checked.values())]
    else:
        combos = [dict(c) for c in shapes]
        if len(combos) > MAX_SIGNATURES:
            raise UsageError(f"{where}: {len(combos)} shape signatures to warm up; at most {MAX_SIGNATURES} are "
                             f"allowed.")
        combos = [sizes.one(fn, c) for c in combos]
    for dims in combos:
        missing = [v for v in variables if v not in dims]
        if missing:
            raise UsageError(f"{where}: give a value for every dimension variable to warm up ({', '.join(missing)} "
                             f"missing): --dim NAME=V, or several values --dim NAME=V1,V2 (in Python: "
                             f"warmup({{{missing[0]!r}: 8}})).")
        sizes.resolved(fn, dims)  # the constraints, as every --dim
    return combos


def plan_target(fn: Function, dims: Mapping[str, Sequence[int]] | None, where: str) -> list[dict[str, int]]:
    """The dimension values to compile ``fn`` for on a target: every combination of the values ``dims`` gives (as
    :func:`plan_warmup` reads ``--dim``), or without them, the buckets ``jaxport compile`` proposes from the spec's
    bounds."""
    if dims:
        names = sizes.names_of(fn)
        return plan_warmup(fn, {k: list(v) for k, v in dims.items() if k in names}, where)
    try:
        return plan(fn).buckets
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None
