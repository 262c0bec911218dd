"""Human-readable views of a manifest: signatures, dimension derivations. No JAX, no numpy."""

from __future__ import annotations

from .. import dtypes
from .._text import human_bytes as human_bytes  # sizes in inspect and policy messages
from . import model

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence


def type_text(dtype: str, shape: Iterable[int | str]) -> str:
    """``f32[batch, 784]``: a dtype's short name and a shape."""
    d = dtypes.BY_NAME.get(dtype)
    return f"{d.short if d else dtype}[{', '.join(str(x) for x in shape)}]"


def array_type(a: model.Input | model.Output | model.StoredTensor) -> str:
    """``f32[batch, 784]`` for a manifest input, output or stored tensor; ``key<fry>[batch]`` for an output of key
    data; ``weak i32[]`` for a weakly typed input (a Python number at export, which takes any integer or float)."""
    key = getattr(a, "key", None)
    if key is not None:
        return type_text(key, a.shape[:len(a.shape) - len(dtypes.KEYS[key].data_shape)])
    return ("weak " if getattr(a, "weak", False) else "") + type_text(a.dtype, a.shape)


#: A pytree with more array leaves than this is shown as a count (``{... 147 arrays}``) in a signature.
MAX_SHOWN_LEAVES = 12
_BRACKETS = {"dict": ("{", "}"), "list": ("[", "]"), "tuple": ("(", ")"), "node": ("(", ")")}


def _count(node: model.CallNode | model.OutputNode) -> int:
    """How many array leaves (input or output nodes) a subtree holds."""
    if node.kind in ("input", "output"):
        return 1
    if node.kind == "dict":
        return sum(_count(c) for c in node.value.values())
    if node.kind in ("list", "tuple", "node"):
        return sum(_count(c) for c in node.value)
    return 0


def _tree(node: model.CallNode | model.OutputNode, leaves: Sequence[model.Input | model.Output]) -> str:
    n = _count(node)
    if n > MAX_SHOWN_LEAVES:
        open_, close = _BRACKETS.get(node.kind, ("(", ")"))
        return f"{open_}... {n} arrays{close}"
    kind, value = node.kind, node.value
    if kind in ("input", "output"):
        return array_type(leaves[value]) if 0 <= value < len(leaves) else "?"
    if kind == "static":
        return f"{value!r} (static)"
    if kind == "none":
        return "None"
    if kind == "bound":
        return "<bound>"
    if kind == "dict":
        return "{" + ", ".join(f"{k}: {_tree(v, leaves)}" for k, v in value.items() if v.kind != "bound") + "}"
    inner = ", ".join(_tree(v, leaves) for v in value)
    if kind == "node":
        return f"{node.type_name if isinstance(node, model.OutputNode) else '?'}({inner})"
    open_, close = _BRACKETS[kind]
    return open_ + inner + ("," if kind == "tuple" and len(value) == 1 else "") + close


def bounds_text(f: model.Function) -> list[str]:
    """``1 <= batch <= 4096`` per dimension variable, then the spec's constraints."""
    return [*(d.bounds.text(name) for name, d in f.dims.items()), *f.constraints]


def signature(fname: str, f: model.Function) -> str:
    """The function as a user would write it: ``predict(x: f32[batch, 784]) -> f32[batch, 10]  where ...``."""
    parts = []
    for a in f.signature.args:
        if a.kind == "bound":  # bound arguments leave the call signature
            continue
        parts.append(f"{a.name}: {_tree(a, f.inputs)}" if a.kind != "static" else f"{a.name}={a.value!r}")
    for k, v in f.signature.kwargs.items():
        if v.kind == "bound":
            continue
        parts.append(f"{k}: {_tree(v, f.inputs)}" if v.kind != "static" else f"{k}={v.value!r}")
    out_tree = f.output_tree
    if out_tree is not None and out_tree.kind == "output" and len(f.outputs) == 1:
        result = array_type(f.outputs[0])
    elif out_tree is not None:
        result = _tree(out_tree, f.outputs)
    else:
        result = "(" + ", ".join(array_type(o) for o in f.outputs) + ")"
    text = f"{fname}({', '.join(parts)}) -> {result}"
    where = bounds_text(f)
    return text + ("   where " + ", ".join(where) if where else "")


def derivation_text(var: str, d: model.DimVar) -> str:
    """``x.shape[1] == 2*h`` or ``batch = x.shape[0]``."""
    src = d.derived_from
    if src is None:
        return "not derivable from the inputs"
    if src.expression == var:
        return f"{var} = {src.input}.shape[{src.axis}]"
    return f"solved from {src.input}.shape[{src.axis}] == {src.expression}"


