"""The shape buckets a function is served on: the plan (sizes per dimension variable), and which buckets a call's
dimension values may run on. Engine-free and without JAX: ``batching.Batched`` compiles and runs them.

- **The plan.** For each dimension variable, the sizes given (``dims={"batch": [1, 8, 32]}``, ``--dim
  batch=1,8,32``), or else the sizes ``run.buckets.ladder`` takes from the spec's bounds: the powers of two inside
  them with three sizes between each (:data:`STEPS`: 1, 2, 3, ..., 8, 10, 12, 14, 16, 20, ...) and the upper bound,
  for *every* variable of a function with several (a tagger with ``1 <= seq <= 512`` plans 32 sequence lengths).
  The planned buckets are every combination that satisfies the spec's constraints, at most :data:`MAX_PLANNED`
  (past it the unlisted variables take fewer sizes per power of two, down to the powers alone). A plan is a set of
  sizes to pad to, not a list to compile: a server compiles what its warm-up budget allows before it is ready and
  the rest when a call needs it.
- **Where a call runs** (:func:`fitting`). Along a variable that may be padded (the row-wise proof), a call runs on
  a planned size at least its own; past the largest planned size, on the ladder's next size of the spec's bounds
  (a bucket outside the plan). Along a variable whose padding is refused, only its own size gives the right answer:
  a size outside the plan is a bucket of its own, compiled when first needed. ``strict`` keeps a call to the
  planned buckets (nothing outside the plan compiles); then a size no planned bucket fits is refused.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence

from ...artifact import contract
from ...artifact.model import Function
from ...errors import InputError, UsageError
from . import sizes
from .plan import Plan, combined, ladder

#: Sizes per power of two that serving and batch inference pad to by default (``run.buckets.ladder``): 2^k,
#: 1.25 * 2^k, 1.5 * 2^k and 1.75 * 2^k. Padding a call to the next wastes under 25% of its rows (under 9% over
#: request sizes 1..100, where powers of two alone waste 45%).
STEPS = 4

#: The most buckets a plan holds (every combination of its variables' sizes): a server compiles few of them ahead.
MAX_PLANNED = 4096

#: What a plan is given: sizes per dimension variable (one size, or several: every combination).
Dims = Mapping[str, int | Sequence[int]]

#: A bucket as a key: its values in the function's variables' order.
Key = tuple[int, ...]


def bucket_label(bucket: Mapping[str, int]) -> str:
    """``batch=8,seq=128``, or ``static`` for a function without dimension variables (metric labels, messages)."""
    return ",".join(f"{k}={v}" for k, v in bucket.items()) or "static"


def plan_served(f: Function, dims: Dims | None = None) -> Plan:
    """The planned buckets of function ``f`` (its record): ``dims``' sizes for the variables it names, the ladder of
    the spec's bounds for the others (see the module docstring)."""
    variables = contract.dimension_variables(f)
    given = sizes.given(f, dims)
    if not variables:
        return Plan([{}], "static")
    for v in variables:
        if v not in given and f.bounds_of(v).hi is None:
            raise UsageError(f"dimension {v!r} has no upper bound in the spec, so no buckets can be proposed for it; "
                             f"give the sizes to compile with --dim {v}=N1,N2,... (dims={{{v!r}: [...]}} in "
                             f"Python).")
    steps = STEPS
    while True:
        lists = {v: sorted(set(given[v])) if v in given else ladder_of(f, v, steps) for v in variables}
        total = math.prod(len(x) for x in lists.values())
        if total <= MAX_PLANNED or steps == 1:
            break
        steps //= 2
    if total > MAX_PLANNED:
        raise UsageError(f"--dim: {total} combinations of sizes, more than the {MAX_PLANNED} buckets a server plans; "
                         f"give fewer sizes with --dim NAME=N1,N2,... (dims={{...}} in Python).")
    chosen = combined(f, variables, lists, "--dim" if given else "spec bounds", "planned bucket", MAX_PLANNED)
    if steps != STEPS:
        chosen.notes.insert(0, f"{total} planned buckets with {STEPS - 1} sizes between each power of two would be "
                               f"more than {MAX_PLANNED}: {steps - 1 or 'no'} sizes between each")
    return chosen


def ladder_of(f: Function, variable: str, steps: int = STEPS) -> list[int]:
    """The ladder of ``variable``'s spec bounds (``run.buckets.ladder``); it needs an upper bound."""
    b = f.bounds_of(variable)
    assert b.hi is not None
    return ladder(b.lo, b.hi, steps)


def elements(f: Function, bucket: Mapping[str, int]) -> int:
    """The input elements of a call on ``bucket``: what padding costs, and the order buckets are chosen in."""
    return sum(math.prod(contract.concrete_shape(i, bucket)) for i in f.inputs)


def fitting(f: Function, sizes: Mapping[str, Sequence[int]], padded: Callable[[str], bool],
            dims: Mapping[str, int], *, strict: bool) -> list[dict[str, int]]:
    """The buckets a call with the solved dimension values ``dims`` may run on, fewest input elements first (see
    the module docstring); empty when none may. ``sizes``: the planned sizes per variable; ``padded(v)``: whether
    calls may be padded along ``v``."""
    variables = contract.dimension_variables(f)
    options: list[list[int]] = []
    for v in variables:
        planned = sizes[v]
        if v not in dims:
            options.append(list(planned))
            continue
        x = dims[v]
        if padded(v):
            up = [s for s in planned if s >= x]
            if not up and not strict and f.bounds_of(v).hi is not None:
                up = [s for s in ladder_of(f, v) if s >= x][:1]
        else:
            up = [x] if x in planned or not strict else []
        if not up:
            return []
        options.append(up)
    found = []
    for values in itertools.product(*options):
        bucket = dict(zip(variables, values))
        if f.constraints:
            try:
                contract.resolve_dims(f, bucket)
            except InputError:
                continue
        found.append(bucket)
    return sorted(found, key=lambda b: (elements(f, b), tuple(b.values())))


def unfit_reason(f: Function, sizes: Mapping[str, Sequence[int]], padded: Callable[[str], bool],
                 reasons: Mapping[str, str], dims: Mapping[str, int]) -> str:
    """Why no planned bucket fits ``dims`` (a strict plan's refusal): per variable, a size above the largest, or one
    that must equal a planned size because padding it is refused (``reasons``: the proof's, per variable)."""
    why = []
    for v in contract.dimension_variables(f):
        if v not in dims:
            continue
        planned = sorted(sizes[v])
        if padded(v):
            if dims[v] > planned[-1]:
                why.append(f"{v}={dims[v]} is above the largest bucket's {planned[-1]}")
        elif dims[v] not in planned:
            why.append(f"{v} must equal a bucket's value ({', '.join(map(str, planned))}) because padding it is "
                       f"not proven safe: {reasons[v]}")
    return "; ".join(why)


def warmup_order(f: Function, buckets: Sequence[Mapping[str, int]], listed: Mapping[str, Sequence[int]],
                 strict: bool) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    """What a server compiles before it is ready: the buckets it must (every planned one when ``strict``, else the
    smallest and those of the sizes the user listed, ``listed``: every combination of them, the variables not
    listed at their smallest planned size), and the rest of the plan, smallest first, for its warm-up budget."""
    ordered = sorted((dict(b) for b in buckets), key=lambda b: (elements(f, b), tuple(b.values())))
    if strict or not ordered:
        return ordered, []
    smallest = {v: min(b[v] for b in ordered) for v in ordered[0]}
    must = [b for b in ordered if b is ordered[0] or (listed and all(
        b[v] in listed[v] if v in listed else b[v] == smallest[v] for v in b))]
    return must, [b for b in ordered if b not in must]
