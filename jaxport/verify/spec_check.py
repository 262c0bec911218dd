"""Whether a spec describes an artifact's function: :func:`spec_differences` compares a parsed spec with a
manifest entry (arguments, dtypes, shapes, static values, bound weights, dimension bounds and constraints). No JAX.

Dimensions are compared as expressions: equal text, or equal values at sample assignments of their variables, with
the equality constraints applied as JAX applies them to shapes (``d == 64*heads`` makes ``d`` and ``64*heads`` the
same dimension).
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

from .. import dimexpr, dtypes
from ..artifact import calltree, contract
from ..artifact.bounds import Bounds
from ..artifact.model import CallNode, Function
from ..artifact.summary import array_type
from ..spec import ArrayLeaf, StaticLeaf
from ..spec.like import LikeLeaf
from ..spec.tree import leaves


def _equalities(texts: list[str]) -> list[tuple[str, dimexpr.Expr]]:
    out = []
    for t in texts:
        try:
            c = dimexpr.parse_constraint(t)
        except dimexpr.DimExprError:
            continue
        if c.op == "==" and c.lhs.op == "var":
            out.append((str(c.lhs.value), c.rhs))
    return out


def _same_dimension(a: int | str, b: int | str, equalities: list[tuple[str, dimexpr.Expr]]) -> bool:
    """Whether two dimensions are the same expression: equal text, or equal values at sample assignments (with the
    equality constraints applied, as JAX applies them to shapes)."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    ea, eb = dimexpr.parse(a), dimexpr.parse(b)
    if str(ea) == str(eb):
        return True
    names = sorted(dimexpr.variables(ea) | dimexpr.variables(eb) | {v for v, _ in equalities})
    for trial in range(8):
        rng = random.Random(trial)
        env = {v: rng.randint(2, 1000) for v in names}
        for _ in range(3):
            for v, rhs in equalities:
                with contextlib.suppress(dimexpr.DimExprError):
                    env[v] = dimexpr.evaluate(rhs, env)
        try:
            if dimexpr.evaluate(ea, env) != dimexpr.evaluate(eb, env):
                return False
        except dimexpr.DimExprError:
            return False
    return True


def _norm_static(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_norm_static(v) for v in value]
    return value


def _compact(text: str) -> str:
    return "".join(text.split())


def _spec_tree_text(tree: Any) -> str:
    if isinstance(tree, ArrayLeaf):
        return f"an array {dtypes.BY_NAME[tree.dtype].short}[{tree.shape_text()}]"
    if isinstance(tree, StaticLeaf):
        return f"a static value {tree.value!r}"
    if isinstance(tree, dict):
        return f"a dict with keys {sorted(tree)}"
    if isinstance(tree, list):
        return f"a list of {len(tree)}"
    if isinstance(tree, LikeLeaf):
        return f"a value like {tree.source}"
    if hasattr(tree, "source"):
        return f"weights bound to {tree.source}"
    return type(tree).__name__


def _node_text(node: CallNode, f: Function) -> str:
    if node.kind == "input":
        return f"an array {array_type(f.inputs[node.value])}"
    if node.kind == "static":
        return f"a static value {node.value!r}"
    if node.kind == "bound":
        return f"weights bound to {node.value}"
    if node.kind == "dict":
        return f"a dict with keys {sorted(node.value)}"
    if node.kind == "list":
        return f"a list of {len(node.value)}"
    return "an unknown node"


def spec_differences(spec: Any, fname: str, f: Function, n_functions: int = 1) -> list[str]:
    """How a parsed spec's description of function ``fname`` differs from its manifest entry (empty: it
    describes it). Platforms and metadata are not compared: the export command line may override them."""
    if fname in spec.functions:
        fspec = spec.functions[fname]
    elif None in spec.functions and n_functions == 1:
        fspec = spec.functions[None]
    else:
        named = [n for n in spec.functions if n is not None]
        described = f"describes {', '.join(named)}" if named else "describes a single function"
        return [f"the spec has no function {fname!r} (it {described})"]

    constraints = list(f.constraints) + [c.text for c in spec.constraints]
    eqs = _equalities(constraints)
    out: list[str] = []

    def walk(node: CallNode, tree: Any, path: str) -> None:
        kind, value = node.kind, node.value
        if kind == "input" and isinstance(tree, ArrayLeaf):
            inp = f.inputs[value]
            if inp.dtype != tree.dtype:
                out.append(f"{path}: dtype {inp.dtype} in the artifact, {tree.dtype} in the spec")
            declared = list(inp.shape)
            if len(declared) != len(tree.shape) or not all(
                    _same_dimension(a, b, eqs) for a, b in zip(declared, tree.shape)):
                out.append(f"{path}: shape [{', '.join(map(str, declared))}] in the artifact, "
                           f"[{tree.shape_text()}] in the spec")
        elif kind == "static" and isinstance(tree, StaticLeaf):
            if _norm_static(value) != _norm_static(tree.value):
                out.append(f"{path}: static value {value!r} in the artifact, "
                           f"{_norm_static(tree.value)!r} in the spec")
        elif isinstance(tree, LikeLeaf) and kind in ("dict", "list", "input"):
            pass  # the value's structure is the user's Python value: the live function's run checks it
        elif kind == "bound" and hasattr(tree, "source") and not isinstance(tree, (ArrayLeaf, StaticLeaf)):
            if value != calltree.recorded_source(tree.source):
                out.append(f"{path}: weights bound to {value} in the artifact, to {tree.source} in the spec")
        elif kind == "dict" and isinstance(tree, dict):
            keys, spec_keys = list(value), list(tree)
            if set(keys) != set(spec_keys):
                out.append(f"{path}: dict keys {sorted(keys)} in the artifact, {sorted(spec_keys)} in the spec")
            for k in keys:
                if k in tree:
                    walk(value[k], tree[k], f"{path}[{k!r}]")
        elif kind == "list" and isinstance(tree, list):
            if len(value) != len(tree):
                out.append(f"{path}: a list of {len(value)} in the artifact, of {len(tree)} in the spec")
            for i, (sub, t) in enumerate(zip(value, tree)):
                walk(sub, t, f"{path}[{i}]")
        else:
            out.append(f"{path}: {_node_text(node, f)} in the artifact, {_spec_tree_text(tree)} in the spec")

    args = f.signature.args
    if len(args) != len(fspec.args):
        out.append(f"args: {len(args)} positional argument{'s' if len(args) != 1 else ''} in the artifact, "
                   f"{len(fspec.args)} in the spec")
    for i, (node, tree) in enumerate(zip(args, fspec.args)):
        walk(node, tree, f"args[{i}]")
    kwargs = f.signature.kwargs
    for k in kwargs:
        if k not in fspec.kwargs:
            out.append(f"kwargs[{k!r}]: in the artifact, not in the spec")
    for k in fspec.kwargs:
        if k not in kwargs:
            out.append(f"kwargs[{k!r}]: in the spec, not in the artifact")
        else:
            walk(kwargs[k], fspec.kwargs[k], f"kwargs[{k!r}]")

    used = set(contract.dimension_variables(f))
    for v in list(f.dims) + sorted(used - set(f.dims)):
        in_artifact, in_spec = f.bounds_of(v), Bounds.of(spec.dims.get(v))
        if in_artifact != in_spec:
            out.append(f"dims[{v!r}]: {in_artifact.text(v)} in the artifact, {in_spec.text(v)} in the spec")
    spec_used = used | _tree_variables(fspec)
    artifact_constraints = {_compact(c): c for c in f.constraints}
    spec_constraints = {_compact(c.text): c.text for c in spec.constraints
                        if dimexpr.parse_constraint(c.text).variables() <= spec_used}
    for k, text in artifact_constraints.items():
        if k not in spec_constraints:
            out.append(f"constraints: {text!r} in the artifact, not in the spec")
    for k, text in spec_constraints.items():
        if k not in artifact_constraints:
            out.append(f"constraints: {text!r} in the spec, not in the artifact")
    return out


def _tree_variables(fspec: Any) -> set[str]:
    """The dimension variables that the shapes of ``fspec``'s array arguments name."""
    return {v for _, leaf in leaves([fspec.args, fspec.kwargs]) if isinstance(leaf, ArrayLeaf)
            for d in leaf.shape if isinstance(d, str) for v in dimexpr.variables(dimexpr.parse(d))}
