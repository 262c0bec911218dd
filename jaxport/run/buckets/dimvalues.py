"""Which dimension variables' values a program computes with: a data-flow walk of the polymorphic program.

Padding a call from ``n`` rows to a bucket of ``B``, or splitting and merging batches, changes the value of the
variable ``v`` that sizes the batch. A program whose outputs depend on that value (``x * min(n, 8)``, ``n // 16``, a
loop that runs ``n % 2`` times, a key folded with ``n``) gives other answers when padded, however row-wise its
operations are. ``rowwise`` compares two specializations of the program, which sees such a value only when it
differs at the two sizes compared; this walk sees it wherever it reaches an output.

JAX passes each dimension variable's value to the functions of an exported program as an argument marked
``jax.global_constant = "NAME"`` (and reads it with ``stablehlo.get_dimension_size`` in ``main``). The walk marks
each value computed from one (its *taint*: the variables it depends on), through every operation, call, loop and
branch, except an operand that only gives a result's shape (``stablehlo.dynamic_broadcast_in_dim``'s output
dimensions, ``stablehlo.dynamic_iota``'s shape, ...): an array shaped by ``n`` holds values that do not depend on
``n`` (what depends on rows' positions is ``rowwise``'s to judge). A variable whose value taints an output of
``main`` is used. Unknown operations taint their results with every operand's taint (conservative: padding is
refused, never wrongly allowed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...artifact.model import Function
from ...jaxprivate.mlir import make_ir_context

#: A value computed from the size of an axis whose variable the walk cannot name: any variable.
ANY = "*"

#: The operands that give only a result's shape, by operation.
SHAPE_OPERANDS: Mapping[str, frozenset[int]] = {
    "stablehlo.dynamic_broadcast_in_dim": frozenset({1}),
    "stablehlo.dynamic_iota": frozenset({0}),
    "stablehlo.dynamic_reshape": frozenset({1}),
    "stablehlo.dynamic_pad": frozenset({2, 3, 4}),
    "stablehlo.real_dynamic_slice": frozenset({1, 2, 3}),
    "stablehlo.dynamic_gather": frozenset({2}),
    "stablehlo.dynamic_conv": frozenset({2}),
}

#: Passes over the module at most: calls and loops carry taints around until nothing changes.
_MAX_PASSES = 64

Taint = frozenset[str]
_NONE: Taint = frozenset()


def used_values(module_text: str | bytes, fn: Function) -> dict[str, str]:
    """The dimension variables whose values reach an output of the program ``module_text`` (the artifact's
    polymorphic StableHLO for manifest function ``fn``: MLIR text, or the payload's serialized portable artifact,
    read without printing it as text, 0.2 s for 16 MB of constants), each with the first output it reaches; ``ANY``
    stands for a size the walk cannot name."""
    with make_ir_context() as context:
        from jax.extend.mlir import ir
        from jax.extend.mlir.dialects import stablehlo

        module = ir.Module.parse(module_text) if isinstance(module_text, str) else \
            stablehlo.deserialize_portable_artifact(context, module_text)
        walk = _Walk(module)
        outputs = walk.run()
    found: dict[str, str] = {}
    for i, taint in enumerate(outputs):
        name = fn.outputs[i].name if i < len(fn.outputs) else f"#{i}"
        for v in sorted(taint):
            found.setdefault(v, name)
    return found


class _Walk:
    def __init__(self, module: Any):
        from jax.extend.mlir import ir

        self.ir = ir
        self.funcs: dict[str, Any] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[ir.SymbolTable.get_symbol_name(op.operation).value] = op.operation
        self.taint: dict[Any, Taint] = {}
        self.params: dict[str, list[Taint]] = {}
        self.fixed: dict[str, set[int]] = {}  # the arguments that hold a variable's value, whatever a call passes
        self.returns: dict[str, list[Taint]] = {}
        self.changed = False

    def run(self) -> list[Taint]:
        for name, func in self.funcs.items():
            block = func.regions[0].blocks[0]
            self.params[name] = [self._constant(func, i) for i in range(len(block.arguments))]
            self.fixed[name] = {i for i, t in enumerate(self.params[name]) if t}
            self.returns[name] = []
        for _ in range(_MAX_PASSES):
            self.changed = False
            for name, func in self.funcs.items():
                block = func.regions[0].blocks[0]
                for arg, taint in zip(block.arguments, self.params[name]):
                    self._mark(arg, taint)
                returned = self._block(block)
                if returned != self.returns[name]:
                    self.returns[name], self.changed = returned, True
            if not self.changed:
                break
        else:  # no fixed point: every output may depend on every variable
            return [frozenset({ANY})] * len(self.returns.get("main", []))
        return self.returns.get("main", [])

    def _constant(self, func: Any, i: int) -> Taint:
        """The variable a function's argument ``i`` holds the value of (``jax.global_constant``), if any."""
        ir = self.ir
        if "arg_attrs" not in func.attributes:
            return _NONE
        attrs = ir.ArrayAttr(func.attributes["arg_attrs"])
        if i >= len(attrs):
            return _NONE
        entry = ir.DictAttr(attrs[i])
        if "jax.global_constant" not in entry:
            return _NONE
        return frozenset({ir.StringAttr(entry["jax.global_constant"]).value})

    def _mark(self, value: Any, taint: Taint) -> None:
        old = self.taint.get(value, _NONE)
        if not taint <= old:
            self.taint[value] = old | taint
            self.changed = True

    def _of(self, values: Sequence[Any]) -> Taint:
        out: Taint = _NONE
        for v in values:
            out = out | self.taint.get(v, _NONE)
        return out

    def _block(self, block: Any) -> list[Taint]:
        """Walk a block's operations; the taints of what it returns."""
        returned: list[Taint] = []
        for op in block.operations:
            op = op.operation
            if op.name in ("func.return", "stablehlo.return"):
                returned = [self.taint.get(v, _NONE) for v in op.operands]
                continue
            for r, taint in zip(op.results, self._operation(op)):
                self._mark(r, taint)
        return returned

    def _operation(self, op: Any) -> list[Taint]:
        name, operands = op.name, list(op.operands)
        if name == "func.call":
            callee = self.ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee not in self.funcs:
                return [frozenset({ANY})] * len(op.results)
            params, fixed = self.params[callee], self.fixed[callee]
            for i, v in enumerate(operands[:len(params)]):
                taint = self.taint.get(v, _NONE)
                if i not in fixed and not taint <= params[i]:
                    params[i], self.changed = params[i] | taint, True
            returned = self.returns[callee]  # none yet before the callee's first walk: the passes repeat
            return [returned[i] if i < len(returned) else _NONE for i in range(len(op.results))]
        if name == "stablehlo.get_dimension_size":
            # some axis's size, whose variable the walk does not name: ``main`` reads the variables this way and
            # passes each on as the argument marked with its name, which keeps its own variable (``fixed``)
            return [frozenset({ANY})]
        shape_only = SHAPE_OPERANDS.get(name, frozenset())
        taint = self._of([v for i, v in enumerate(operands) if i not in shape_only])
        if op.regions:
            taint = taint | self._regions(op, taint)
        return [taint] * len(op.results)

    def _regions(self, op: Any, outer: Taint) -> Taint:
        """Walk an operation's regions (loop bodies and conditions, branches, reduction bodies): their arguments take
        the operands' taints and what they return; the taint of everything they return (a loop's condition too)."""
        found: Taint = outer
        for _ in range(_MAX_PASSES):
            before = found
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        self._mark(arg, found)
                    for taint in self._block(block):
                        found = found | taint
            if found == before:
                break
        return found
