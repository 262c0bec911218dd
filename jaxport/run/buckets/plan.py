"""Shape buckets: the concrete shapes ``jaxport compile`` builds one IREE function for each.

A *bucket* assigns every dimension variable of a function a value. ``compile`` takes them in one of four ways:

- ``--dim NAME=N`` only, one size per variable (``fixed``): one bucket, the variables not named taking their
  smallest valid values (the single-shape form);
- ``--dim NAME=N1,N2,...`` with several sizes (``grid``, repeatable): the grid of every combination, a variable
  given one size being fixed; every variable must be given;
- ``--bucket NAME=N,NAME=N`` (``explicit``, repeatable): exactly these assignments (``--dim`` fills in the variables
  a bucket leaves out);
- none of them (``proposed``): for each variable the powers of two inside its spec bounds, plus the upper bound
  itself when it is not one, thinned (keeping the largest) so that at most :data:`MAX_PROPOSED` functions are built.
  A variable without an upper bound cannot be proposed for: the user gives ``--dim``.

The sizes given are checked by the rules of every ``--dim`` (``sizes``: names, bounds, one wording); every bucket
against the bounds and constraints (``artifact.contract``): a grid point or proposal that breaks a constraint is left
out with a note, a single bucket that does is a usage error. No JAX here.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...artifact import contract
from ...artifact.model import Function
from ...errors import InputError, UsageError
from . import sizes

#: Most functions proposed from the spec's bounds when no buckets are given.
MAX_PROPOSED = 8
#: Most functions one module may hold (a grid or list beyond it is refused: compile time grows with each).
MAX_BUCKETS = 64
#: What a module's only function is called; with several, ``main_<var><value>_...``.
SINGLE_NAME = "main"

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Plan:
    """The buckets to build, in order, and how they were chosen."""

    buckets: list[dict[str, int]]
    source: str  # "static", "--dim", "--dims" (a grid: --dim with several sizes), "--bucket" or "spec bounds"
    notes: list[str] = field(default_factory=list)


def _satisfies(fn: Function, bucket: Mapping[str, int]) -> bool:
    try:
        contract.resolve_dims(fn, bucket)
    except InputError:
        return False
    return True


def plan(fn: Function, *, fixed: Mapping[str, int] | None = None,
         grid: Mapping[str, Sequence[int]] | None = None,
         explicit: Sequence[Mapping[str, int]] | None = None) -> Plan:
    """The buckets of a manifest function (see the module docstring); raises UsageError for a bad request."""
    variables = contract.dimension_variables(fn)
    if grid and explicit:
        raise UsageError("--dim with several sizes builds a grid and --bucket lists buckets one by one; give one of "
                         "them.")
    fixed = {k: v[0] for k, v in sizes.given(fn, fixed).items()}
    grid = sizes.given(fn, grid)
    explicit = list(explicit or [])
    for b in explicit:
        sizes.check_names(b, [fn], "--bucket")
    both = [v for v in grid if v in fixed]
    if both:
        raise UsageError(f"{both[0]!r} is both fixed ({both[0]}={fixed[both[0]]}) and given a grid of sizes; give it "
                         f"once.")
    if not variables:
        return Plan([{}], "static")
    if explicit:
        buckets = []
        for b in explicit:
            missing = [v for v in variables if v not in b and v not in fixed]
            if missing:
                raise UsageError(f"--bucket {sizes.shown(b)}: give every dimension variable ({', '.join(missing)} "
                                 f"missing), or fix {'them' if len(missing) > 1 else 'it'} with --dim "
                                 f"{missing[0]}=N.")
            buckets.append(sizes.resolved(fn, {**fixed, **b}, flag="--bucket"))
        return Plan(_ordered(buckets, variables), "--bucket")
    if grid:
        missing = [v for v in variables if v not in grid and v not in fixed]
        if missing:
            raise UsageError(f"--dim: give every dimension variable its sizes ({', '.join(missing)} has none), or "
                             f"fix {'them' if len(missing) > 1 else 'it'} with --dim {missing[0]}=N.")
        lists = {v: sorted(set(grid[v])) if v in grid else [fixed[v]] for v in variables}
        return combined(fn, variables, lists, "--dims", "grid point")
    if fixed:
        return Plan([sizes.resolved(fn, fixed)], "--dim")
    return propose(fn)


def ladder(lo: int, hi: int, steps: int = 1) -> list[int]:
    """The sizes inside ``lo..hi`` that buckets take: every power of two, with ``steps - 1`` sizes evenly spaced
    between each and the next (``steps=4``: 8, 10, 12, 14, 16, 20, ...), and ``hi`` itself."""
    values = sorted({(1 << k) * (steps + j) // steps for k in range(max(hi, 1).bit_length()) for j in range(steps)})
    values = [v for v in values if lo <= v <= hi]
    if not values or values[-1] != hi:
        values.append(hi)
    return values


def propose(fn: Function, steps: int = 1, most: int = MAX_PROPOSED) -> Plan:
    """Buckets from the spec's bounds (see the module docstring): each variable's :func:`ladder` of ``steps`` sizes
    per power of two (fewer, down to 1, where the combinations would pass ``most``), thinned (keeping the largest)
    to at most ``most`` combinations."""
    variables = contract.dimension_variables(fn)
    for v in variables:
        if fn.bounds_of(v).hi is None:
            raise UsageError(f"dimension {v!r} has no upper bound in the spec, so no buckets can be proposed for it; "
                             f"give the sizes to build with --dim {v}=N1,N2,... (or one with --dim {v}=N).")
    per = steps
    while True:
        lists = {v: ladder(fn.bounds_of(v).lo, fn.bounds_of(v).hi or 1, per) for v in variables}
        if per == 1 or math.prod(len(x) for x in lists.values()) <= most:
            break
        per = max(1, per // 2)
    keep = max(1, math.floor(most ** (1 / len(variables)) + 1e-9))
    for v in variables:
        values = lists[v]
        if len(values) > keep:
            step = math.ceil(len(values) / keep)
            lists[v] = sorted(values[::-1][::step])
    result = combined(fn, variables, lists, "spec bounds", "proposed bucket")
    shown = "; ".join(f"{v} in {', '.join(map(str, lists[v]))}" for v in variables)
    between = "" if per == 1 else f" and {per - 1} sizes between each power of two"
    result.notes.insert(0, f"no --dim or --bucket given: buckets proposed from the spec's bounds (powers of two "
                           f"inside them{between} and the upper bound, at most {most} functions): {shown}")
    return result


def combined(fn: Function, variables: list[str], lists: Mapping[str, list[int]], source: str, what: str,
             most: int = MAX_BUCKETS) -> Plan:
    """Every combination of the sizes ``lists`` gives each variable that satisfies the spec's constraints (a note
    counts those left out), ordered; at most ``most`` combinations (a module's functions: ``MAX_BUCKETS``), else a
    usage error."""
    total = math.prod(len(lists[v]) for v in variables)
    if total > most:
        raise UsageError(f"--dim: {total} combinations, more than the {most} functions one module may hold; "
                         f"give fewer sizes, or list the buckets you need with --bucket.")
    buckets: list[dict[str, int]] = []
    dropped: list[dict[str, int]] = []
    for values in itertools.product(*(lists[v] for v in variables)):
        bucket = dict(zip(variables, values))
        (buckets if _satisfies(fn, bucket) else dropped).append(bucket)
    if not buckets:
        raise UsageError(f"{source}: no {what} satisfies the spec's constraints "
                         f"({'; '.join(fn.constraints) or 'bounds'}); give buckets that do with "
                         f"--bucket.")
    notes = []
    if dropped:
        notes.append(f"{len(dropped)} {what}{'s' if len(dropped) > 1 else ''} left out for breaking the spec's "
                     f"constraints: {'; '.join(map(sizes.shown, dropped[:6]))}{' ...' if len(dropped) > 6 else ''}")
    return Plan(_ordered(buckets, variables), source, notes)


def _ordered(buckets: list[dict[str, int]], variables: list[str]) -> list[dict[str, int]]:
    """Without duplicates, ordered by the values in the variables' order."""
    seen: dict[tuple[int, ...], dict[str, int]] = {}
    for b in buckets:
        seen.setdefault(tuple(b[v] for v in variables), {v: b[v] for v in variables})
    return [seen[k] for k in sorted(seen)]


def function_names(buckets: list[dict[str, int]]) -> list[str]:
    """The module's function for each bucket: ``main`` when there is one, else ``main_<var><value>_...``
    (``main_0``, ``main_1``, ... when a variable's name is not a plain ASCII identifier or names would clash)."""
    if len(buckets) == 1:
        return [SINGLE_NAME]
    names = [f"{SINGLE_NAME}_" + "_".join(f"{k}{v}" for k, v in b.items()) for b in buckets]
    if len(set(names)) != len(names) or not all(_SYMBOL.fullmatch(n) for n in names):
        names = [f"{SINGLE_NAME}_{i}" for i in range(len(buckets))]
    return names
