"""Dead operations dropped from a specialized program before the padding proof (``rowwise``) walks two
specializations in lockstep.

Specializing a shape-polymorphic program leaves constants computed from the dimension variables that nothing uses
any more (the operands of JAX's shape assertions, which ``refine_polymorphic_shapes`` removes: ``16 - batch`` for a
bound of 16). MLIR keeps one constant per value, so at ``batch=13`` the dead ``3`` is the loop bound ``3`` a
``fori_loop(0, 3, ...)`` uses, and at ``batch=11`` a constant ``5`` of its own: the two programs then differ by an
operation and the proof refused a row-wise program for a coincidence of the spec's bound. An operation whose
results nothing uses cannot change an output, so dropping it first (until none is left) changes no verdict but
those.
"""

from __future__ import annotations

from typing import Any

#: Operations without effects besides their results (dropped when no result is used). Anything else (a custom
#: call, a loop, a collective, an operation with regions) is kept.
PURE = frozenset(f"stablehlo.{n}" for n in (
    "constant broadcast_in_dim reshape convert compare select add subtract multiply divide remainder maximum minimum "
    "and or not xor negate abs iota slice concatenate transpose get_dimension_size").split())


def drop_dead(module: Any) -> Any:
    """``module`` (parsed MLIR) with every pure operation whose results are unused erased, repeatedly, in place."""
    from jax.extend.mlir import ir

    dead: list[Any] = []

    def visit(op: Any) -> Any:
        if op.name in PURE and not op.regions and all(not list(r.uses) for r in op.results):
            dead.append(op)
        return ir.WalkResult.ADVANCE

    while True:
        dead.clear()
        module.operation.walk(visit)
        if not dead:
            return module
        for op in dead:
            op.erase()
