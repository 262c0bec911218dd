"""Whether calls may pad each dimension variable of a function: the program specialized twice per variable
(``specialize``), at sizes chosen to be unlike its other dimensions, and compared (``rowwise``). ``jaxport compile``
records the padding verdicts in its modules; serving and the batch engines pad, split and merge by them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ... import dtypes
from ...artifact import contract
from ...artifact.model import Function
from ...errors import JaxportError
from . import dimvalues, rowwise
from .specialize import specialize

if TYPE_CHECKING:  # a type only: the buckets sit below the run core, which hands them its JAX backend
    from ..jax_backend import JaxBackend

#: Sizes tried first when a variable is specialized twice to find the axes it sizes: small, odd, and unlikely to
#: equal another dimension of the program.
_PROBE_SIZES = (13, 11, 7, 5, 3, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)


def structs(f: Function, env: Mapping[str, int]) -> list[Any]:
    import jax

    return [jax.ShapeDtypeStruct(contract.concrete_shape(i, env), dtypes.to_numpy(i.dtype)) for i in f.inputs]


def specializer(backend: JaxBackend, f: Function, *, fast: bool = False) -> Callable[[Mapping[str, int]], Any]:
    """``specialize`` for an assignment of the variables, each assignment specialized once: MLIR text, or with
    ``fast`` bytecode (what the padding proof alone reads: ``specialize.static_module``)."""
    cache: dict[tuple[tuple[str, int], ...], str | bytes] = {}

    def specialized(env: Mapping[str, int]) -> str | bytes:
        key = tuple(sorted(env.items()))
        if key not in cache:
            cache[key] = specialize(backend, structs(f, env), fast=fast)
        return cache[key]

    return specialized


def padding_verdicts(f: Function, n_weights: int, specialized: Callable[[Mapping[str, int]], str | bytes],
                     polymorphic: str | bytes) -> dict[str, rowwise.Verdict]:
    """Whether calls may pad each dimension variable (``rowwise``), from two specializations per variable at sizes
    chosen to be unlike the program's other dimensions, and from the polymorphic program itself (its MLIR text, or
    its serialized portable artifact: ``dimvalues.used_values``):
    a variable whose value the program computes with (``dimvalues``) is never padded, split or merged."""
    variables = contract.dimension_variables(f)
    used = dimvalues.used_values(polymorphic, f)
    env, others = _probe_sizes(f, variables)
    verdicts = {}
    for v in variables:
        if env is None or others.get(v) is None:
            verdicts[v] = rowwise.Verdict(v, False, f"{v} has no two valid sizes to compare the program at")
            continue
        try:
            verdicts[v] = rowwise.analyze(f, v, n_weights, env, others[v], specialized)
        except JaxportError as e:
            verdicts[v] = rowwise.Verdict(v, False, f"the program could not be specialized to check it ({e})")
        output = used.get(v, used.get(dimvalues.ANY))
        if verdicts[v].allowed and output is not None:  # a value the two sizes compared happened to agree on
            verdicts[v] = rowwise.Verdict(v, False, f"the program computes with the value of {v} (it reaches output "
                                                    f"{output!r}: a size used as a number, as in min(n, 8), n // 16, "
                                                    f"n % 2 or a loop of n steps), which padding, splitting and "
                                                    f"merging change")
    return verdicts


def _valid(f: Function, env: Mapping[str, int]) -> bool:
    try:
        contract.resolve_dims(f, env)
    except JaxportError:
        return False
    return True


def _probe_sizes(f: Function, variables: list[str]) -> tuple[dict[str, int] | None, dict[str, int]]:
    """One valid assignment of every variable to distinct, odd-looking sizes, and for each variable a second size
    valid with the others unchanged (None where there is none)."""
    env: dict[str, int] = {}
    candidates: dict[str, list[int]] = {}
    for v in variables:
        b = f.bounds_of(v)
        near = range(max(b.lo, 2), max(b.lo, 2) + 64)
        candidates[v] = [c for c in [*_PROBE_SIZES, *near, b.lo] if b.holds(c)]
        pick = next((c for c in candidates[v] if c not in env.values() and _valid(f, {**env, v: c})), None)
        if pick is None:
            return None, {}
        env[v] = pick
    if not _valid(f, env):
        return None, {}
    others = {}
    for v in variables:
        taken = set(env.values())  # a size equal to another variable's could let MLIR fold the two together
        others[v] = next((c for c in candidates[v] if c not in taken and _valid(f, {**env, v: c})), None)
    return env, {v: c for v, c in others.items() if c is not None}
