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


def range_text(a: model.Input) -> str | None:
    """An input's ``range`` as ``inspect`` and ``verify`` show it: ``[0, 32000)`` as declared, ``[0, nodes)`` with a
    dimension, ``[0.13, 0.97) (example)`` taken from a ``like:`` value's leaf, and ``0.999 (example)`` for an example
    range that holds the example's value alone (a scalar keeps its value); None without one."""
    if a.range is None:
        return None
    lo, hi = a.range
    example = " (example)" if a.range_example else ""
    if a.range_example and _one_value(a.dtype, lo, hi):
        return f"{_number(lo, a.dtype)}{example}"
    return f"[{_number(lo)}, {_number(hi)}){example}"


def _one_value(dtype: str, lo: float | str, hi: float | str) -> bool:
    """Whether the range [lo, hi) holds a single value of ``dtype``, as an example range of a scalar does (export's
    ``like.example_range``): an integer range one wide, or float bounds equal to the type's precision (the bounds lie
    within a unit in the last place of each other; at 0, below the smallest normal number of every float type but
    ``float4_e2m1fn``). No numpy: a test of the bounds alone."""
    if isinstance(lo, str) or isinstance(hi, str):
        return False
    d = dtypes.BY_NAME[dtype]
    if d.kind in ("int", "uint"):
        return hi == lo + 1
    digits = _digits(dtype)
    if digits is None:
        return False
    if lo == 0:
        return 0 < hi <= 2e-3
    return f"{lo:.{digits}g}" == f"{hi:.{digits}g}"


def _digits(dtype: str) -> int | None:
    """The decimal digits a float dtype's precision holds (float32: 6), None for a type without one."""
    precision = dtypes.BY_NAME[dtype].precision
    return None if precision is None else max(1, int((precision - 1) * 0.30103))


def _number(x: float | str, dtype: str | None = None) -> str:
    """A bound as written: an integral float without ``.0``, a dimension expression as it is; with ``dtype``, a
    float to the digits its precision holds (``0.999``, not float32's ``0.99900001``)."""
    if isinstance(x, str) or isinstance(x, int):
        return str(x)
    digits = _digits(dtype) if dtype is not None else None
    if digits is not None:
        x = float(f"{x:.{digits}g}")
    if x == int(x) and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


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


