"""CHLO operations that older StableHLO wrote as custom calls, recomposed when a JAX serialization is imported.

StableHLO writes a CHLO operation its portable format cannot hold at the target version as a custom call to
``mhlo.<op>`` (``stablehlo.custom_call @mhlo.erf(%x) {mhlo.attributes = {...}, mhlo.version = 1}``): serializations
of jax 0.4.30 - 0.8.x hold ``mhlo.erf`` and ``mhlo.topk``, and from jax 0.8 ``mhlo.sinh``, ``mhlo.cosh``,
``mhlo.asinh``, ``mhlo.acosh``, ``mhlo.atanh``, ``mhlo.asin`` and ``mhlo.acos``. The JAX that wrote them never saw
a custom call (it lowered ``chlo.erf``); the running JAX writes the operation itself. So each such call is replaced by
the CHLO operation it encodes, with the same operands, results and (for ``top_k``) ``k``: what remains are the
program's own custom calls, checked against the allowlist as any export's. A call whose attributes the operation
cannot hold (``top_k`` with ``largest = false``, an unknown ``mhlo.version``) is left as it is, and refused by the
allowlist like any other unknown target.
"""

from __future__ import annotations

from typing import Any

#: ``mhlo.<op>`` custom-call target -> the CHLO operation it encodes (one operand, results as the call's).
UNARY = {f"mhlo.{op}": f"chlo.{op}" for op in ("erf", "sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos",
                                               "tan")}
TOP_K = "mhlo.topk"


def _attributes(op: Any) -> dict[str, Any] | None:
    """The ``mhlo.attributes`` of a custom call as a dict of MLIR attributes, None when its version is unknown."""
    attrs = op.attributes
    if "mhlo.version" in attrs and str(attrs["mhlo.version"]).split(":")[0].strip() != "1":
        return None
    if "mhlo.attributes" not in attrs:
        return {}
    from jax.extend.mlir import ir

    d = ir.DictAttr(attrs["mhlo.attributes"])
    return {d[i].name: d[i].attr for i in range(len(d))}


def recompose(module: Any) -> list[str]:
    """Replace, in ``module`` (an ``ir.Module`` of the current context), each ``mhlo.<op>`` custom call by the CHLO
    operation it encodes; returns the targets replaced (one entry per call)."""
    from jax.extend.mlir import ir

    replaced: list[str] = []
    found: list[Any] = []

    def visit(op: Any) -> Any:
        if op.name == "stablehlo.custom_call":
            target = ir.StringAttr(op.attributes["call_target_name"]).value
            if target in UNARY or target == TOP_K:
                found.append((op, target))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op, target in found:
        attrs = _attributes(op)
        if attrs is None:
            continue
        if target in UNARY:
            if len(op.operands) != 1 or len(op.results) != 1 or attrs:
                continue
            new_name, new_attrs = UNARY[target], {}
        else:
            k = attrs.get("k")
            largest = attrs.get("largest")
            if len(op.operands) != 1 or len(op.results) != 2 or k is None or set(attrs) - {"k", "largest"} \
                    or (largest is not None and not ir.BoolAttr(largest).value):
                continue
            new_name, new_attrs = "chlo.top_k", {"k": k}
        with ir.InsertionPoint(op), op.location:
            new = ir.Operation.create(new_name, results=[r.type for r in op.results], operands=list(op.operands),
                                      attributes=new_attrs)
        for old, result in zip(op.results, new.results):
            old.replace_all_uses_with(result)
        op.erase()
        replaced.append(target)
    return replaced
