"""Human-readable views of a manifest: signatures, dimension derivations. No JAX, no numpy."""

from __future__ import annotations

from .. import dtypes
from .._text import human_bytes as human_bytes  # sizes in inspect and policy messages
from .bounds import Bounds

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any


def array_type(a: dict[str, Any]) -> str:
    """``f32[batch, 784]`` for a manifest input or output."""
    d = dtypes.BY_NAME.get(a["dtype"])
    short = d.short if d else a["dtype"]
    return f"{short}[{', '.join(str(x) for x in a['shape'])}]"


#: A pytree with more array leaves than this is shown as a count (``{... 147 arrays}``) in a signature.
MAX_SHOWN_LEAVES = 12


def _count(node: Any, key: str) -> int:
    if not isinstance(node, dict):
        return 0
    if key in node:
        return 1
    children = node.get("dict", {}).values() if isinstance(node.get("dict"), dict) else \
        node.get("list") or node.get("tuple") or node.get("children") or []
    return sum(_count(c, key) for c in children) if isinstance(children, (list, type({}.values()))) else 0


def _tree(node: Any, leaves: list[dict[str, Any]], key: str) -> str:
    if not isinstance(node, dict):
        return "?"
    n = _count(node, key)
    if n > MAX_SHOWN_LEAVES:
        open_, close = ("{", "}") if "dict" in node else ("[", "]") if "list" in node else ("(", ")")
        return f"{open_}... {n} arrays{close}"
    if key in node:
        i = node[key]
        return array_type(leaves[i]) if isinstance(i, int) and 0 <= i < len(leaves) else "?"
    if "static" in node:
        return f"{node['static']!r} (static)"
    if "none" in node:
        return "None"
    if "bound" in node:
        return "<bound>"
    if "dict" in node and isinstance(node["dict"], dict):
        return "{" + ", ".join(f"{k}: {_tree(v, leaves, key)}" for k, v in node["dict"].items()
                               if not (isinstance(v, dict) and "bound" in v)) + "}"
    for kind, (open_, close) in (("list", ("[", "]")), ("tuple", ("(", ")"))):
        if kind in node and isinstance(node[kind], list):
            inner = ", ".join(_tree(v, leaves, key) for v in node[kind])
            return open_ + inner + ("," if kind == "tuple" and len(node[kind]) == 1 else "") + close
    if "node" in node:
        children = node.get("children")
        inner = ", ".join(_tree(c, leaves, key) for c in children) if isinstance(children, list) else ""
        return f"{node['node']}({inner})"
    return "?"


def bounds_text(f: dict[str, Any]) -> list[str]:
    """``1 <= batch <= 4096`` per dimension variable, then the spec's constraints."""
    out = [Bounds.of(d).text(name) for name, d in f.get("dims", {}).items()]
    out.extend(f.get("constraints", []))
    return out


def signature(fname: str, f: dict[str, Any]) -> str:
    """The function as a user would write it: ``predict(x: f32[batch, 784]) -> f32[batch, 10]  where ...``."""
    sig = f.get("signature") or {}
    inputs, outputs = f.get("inputs", []), f.get("outputs", [])
    parts = []
    for a in sig.get("args", []):
        if not isinstance(a, dict) or "bound" in a:  # bound arguments leave the call signature
            continue
        name = a.get("name", "?")
        parts.append(f"{name}: {_tree(a, inputs, 'input')}" if "static" not in a else f"{name}={a['static']!r}")
    for k, v in (sig.get("kwargs") or {}).items():
        if not isinstance(v, dict) or "bound" in v:
            continue
        parts.append(f"{k}: {_tree(v, inputs, 'input')}" if "static" not in v else f"{k}={v['static']!r}")
    if not sig:
        parts = [f"{a['name']}: {array_type(a)}" for a in inputs]
    out_tree = f.get("output_tree")
    if isinstance(out_tree, dict) and "output" in out_tree and len(outputs) == 1:
        result = array_type(outputs[0])
    elif out_tree is not None:
        result = _tree(out_tree, outputs, "output")
    else:
        result = "(" + ", ".join(array_type(o) for o in outputs) + ")"
    text = f"{fname}({', '.join(parts)}) -> {result}"
    where = bounds_text(f)
    return text + ("   where " + ", ".join(where) if where else "")


def derivation_text(var: str, d: dict[str, Any]) -> str:
    """``x.shape[1] == 2*h`` or ``batch = x.shape[0]``."""
    src = d.get("derived_from")
    if not src:
        return "not derivable from the inputs"
    if src.get("expression") == var:
        return f"{var} = {src['input']}.shape[{src['axis']}]"
    return f"solved from {src['input']}.shape[{src['axis']}] == {src['expression']}"


