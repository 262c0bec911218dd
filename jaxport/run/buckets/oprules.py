"""Each StableHLO operation's rule for the row-wise proof (``rowwise``): whether an operation whose operands are
row-wise in the variable keeps rows apart, given the axes of its operands and results that the variable sizes, read
from the operation's attributes in both specializations of the program. An operation without a rule is assumed to mix
rows (padding refused, never wrongly allowed). The readers of an operation (its attributes, each read as the kind of
MLIR attribute it is, and its values' shapes) are here too: the walk in ``rowwise`` reads them as well. MLIR's Python
bindings (``jax.extend.mlir``) are imported inside the functions that use them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")

#: The operations that act on each element alone: they keep rows apart whatever their axes.
ELEMENTWISE = frozenset(f"stablehlo.{n}" for n in (
    "abs add and atan2 cbrt ceil clamp compare complex convert cosine count_leading_zeros divide exponential "
    "exponential_minus_one floor imag is_finite log log_plus_one logistic maximum minimum multiply negate not or "
    "popcnt power real reduce_precision remainder round_nearest_afz round_nearest_even rsqrt select shift_left "
    "shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh xor map optimization_barrier "
    "copy").split()) | frozenset(f"chlo.{n}" for n in (
        "acos acosh asin asinh atan atanh bessel_i1e conj cosh sinh digamma erf erf_inv erfc is_inf is_neg_inf "
        "is_pos_inf lgamma next_after polygamma tan zeta square").split())


def attr(op: Any, name: str, kind: Callable[[Any], _T]) -> _T:
    """Attribute ``name`` of ``op`` read as ``kind``: an MLIR attribute class (``stablehlo.DotDimensionNumbers``;
    it raises ValueError on an attribute of another kind), or ``str`` for the attribute's text."""
    return kind(op.attributes[name])


def ints(attr: Any) -> list[int]:
    """An integer array attribute (``array<i64: ...>`` or ``dense<...>``) as a flat list."""
    from jax.extend.mlir import ir

    for cls in (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr):
        try:
            return [int(x) for x in cls(attr)]
        except (ValueError, TypeError):
            continue
    elements: Any = ir.DenseIntElementsAttr(attr)
    return [int(x) for x in elements]


def ints_attr(op: Any, name: str, default: list[int] | None = None) -> list[int]:
    """Integer array attribute ``name`` of ``op`` as a flat list (:func:`ints`); ``default`` when the operation
    has none (None: it must have one)."""
    if default is not None and name not in op.attributes:
        return default
    return attr(op, name, ints)


def int_attr(op: Any, name: str) -> int:
    """Integer attribute ``name`` of ``op``."""
    from jax.extend.mlir import ir

    return int(attr(op, name, ir.IntegerAttr).value)


def attributes(op: Any) -> dict[str, Any]:  # compared as MLIR compares them (no 16 MB constant printed in hex)
    return {op.attributes[i].name: op.attributes[i].attr for i in range(len(op.attributes))}


def shape(value: Any) -> list[int] | None:
    from jax.extend.mlir import ir

    try:
        return list(ir.RankedTensorType(value.type).shape)
    except ValueError:
        return None


def rule(o1: Any, o2: Any, ins: list[frozenset[int]], outs: list[frozenset[int]], s1: int, s2: int) -> str:
    """Why an operation whose operands are row-wise mixes rows, or "" when it keeps them apart."""
    name = o1.name
    if name in ELEMENTWISE or name in ("stablehlo.iota", "stablehlo.get_tuple_element", "stablehlo.tuple"):
        if name in ("stablehlo.tuple", "stablehlo.get_tuple_element") and any(ins + outs):
            return "a tuple of {v}-sized values"
        return ""
    if name == "stablehlo.constant":
        return _constant(o1, o2, outs[0])
    if name == "stablehlo.broadcast_in_dim":
        dims = ints_attr(o1, "broadcast_dimensions")
        return "" if all(dims[a] in outs[0] for a in ins[0]) else "a broadcast along {v}"
    if name == "stablehlo.reshape":
        return _reshape(o1, o2, ins[0], outs[0], s1, s2)
    if name == "stablehlo.transpose":
        perm = ints_attr(o1, "permutation")
        return "" if {j for j, p in enumerate(perm) if p in ins[0]} == outs[0] else "a transpose that moves {v}"
    if name == "stablehlo.bitcast_convert":
        rank = min(len(shape(o1.operands[0]) or []), len(shape(o1.results[0]) or []))
        return "" if all(a < rank for a in ins[0] | outs[0]) else "a bitcast across {v}"
    if name == "stablehlo.dot_general":
        from jax.extend.mlir.dialects import stablehlo

        d = attr(o1, "dot_dimension_numbers", stablehlo.DotDimensionNumbers)
        if set(d.lhs_contracting_dimensions) & ins[0] or set(d.rhs_contracting_dimensions) & ins[1]:
            return "a contraction over {v}"
        return ""
    if name == "stablehlo.reduce":
        reduced = set(ints_attr(o1, "dimensions"))
        return "a reduction over {v}" if any(reduced & s for s in ins[:len(ins) // 2]) else ""
    if name == "stablehlo.reduce_window":
        return _window(o1, ins[:len(ins) // 2])
    if name == "stablehlo.concatenate":
        return "a concatenation along {v}" if any(int_attr(o1, "dimension") in s for s in ins) else ""
    if name in ("stablehlo.sort", "stablehlo.reverse"):
        along = set(ints_attr(o1, "dimensions")) if name == "stablehlo.reverse" else {int_attr(o1, "dimension")}
        return f"a {name.split('.')[1]} along {{v}}" if any(along & s for s in ins) else ""
    if name == "stablehlo.slice":
        start, limit, stride = (ints_attr(o1, k) for k in ("start_indices", "limit_indices", "strides"))
        limit2 = ints_attr(o2, "limit_indices")
        for a in ins[0]:
            if start[a] != 0 or stride[a] != 1 or limit[a] != s1 or limit2[a] != s2:
                return "a slice of {v}"
        return _same_elsewhere(o1, o2, ("start_indices", "limit_indices", "strides"), ins[0])
    if name == "stablehlo.dynamic_slice":
        sizes, sizes2 = ints_attr(o1, "slice_sizes"), ints_attr(o2, "slice_sizes")
        if any(sizes[a] != s1 or sizes2[a] != s2 for a in ins[0]) or any(ins[1:]):
            return "a slice of {v}"
        return _same_elsewhere(o1, o2, ("slice_sizes",), ins[0])
    if name == "stablehlo.dynamic_update_slice":
        return "" if ins[0] == ins[1] == outs[0] and not any(ins[2:]) else "an update of part of {v}"
    if name == "stablehlo.pad":
        lows, highs, interior = (ints_attr(o1, k) for k in ("edge_padding_low", "edge_padding_high",
                                                               "interior_padding"))
        return "a pad of {v}" if any(lows[a] or highs[a] or interior[a] for a in ins[0]) else ""
    if name == "stablehlo.gather":
        return _gather(o1, o2, ins, outs, s1, s2)
    if name == "stablehlo.convolution":
        return _convolution(o1, ins, outs)
    if name == "chlo.top_k":
        rank = len(shape(o1.operands[0]) or [])
        return "a top-k over {v}" if rank - 1 in ins[0] else ""
    if name in ("stablehlo.cholesky", "stablehlo.triangular_solve"):
        return "" if all(a < len(shape(x) or []) - 2 for x, s in zip(o1.operands, ins) for a in s) else \
            "a matrix factorization over {v}"
    if name == "stablehlo.fft":
        rank, n = len(shape(o1.operands[0]) or []), len(ints_attr(o1, "fft_length"))
        return "an FFT over {v}" if any(a >= rank - n for a in ins[0]) else ""
    if name in ("stablehlo.rng_bit_generator", "stablehlo.rng"):
        return "random numbers drawn for a shape that grows with {v}" if any(outs) else ""
    return "an operation not known to keep rows of {v} apart" if any(ins) or any(outs) else ""


def _constant(o1: Any, o2: Any, axes: frozenset[int]) -> str:
    from jax.extend.mlir import ir

    if not axes:
        return "" if o1.attributes["value"] == o2.attributes["value"] else \
            "a constant computed from {v}'s value (x.shape[0], x[-1], a mean...)"
    try:
        d1, d2 = attr(o1, "value", ir.DenseElementsAttr), attr(o2, "value", ir.DenseElementsAttr)
    except ValueError:
        return "a constant that grows with {v}"
    if d1.is_splat and d2.is_splat and str(d1.get_splat_value()) == str(d2.get_splat_value()):
        return ""
    return "a constant that grows with {v}"


def _reshape(o1: Any, o2: Any, ins: frozenset[int], outs: frozenset[int], s1: int, s2: int) -> str:
    """A reshape keeps rows apart when each padded axis stays one axis, at the same place in the row-major order."""
    import math

    t1, r1 = shape(o1.operands[0]) or [], shape(o1.results[0]) or []
    t2, r2 = shape(o2.operands[0]) or [], shape(o2.results[0]) or []
    mapped = set()
    for a in ins:
        p1, p2 = math.prod(t1[:a]), math.prod(t2[:a])
        found = [j for j in range(len(r1)) if math.prod(r1[:j]) == p1 and math.prod(r2[:j]) == p2
                 and r1[j] == s1 and r2[j] == s2]
        if not found:
            return "a reshape that merges or splits {v}"
        mapped.add(found[0])
    return "" if mapped == outs else "a reshape that merges or splits {v}"


def _window(o1: Any, ins: list[frozenset[int]]) -> str:
    rank = len(shape(o1.operands[0]) or [])
    window, strides = ints_attr(o1, "window_dimensions", [1] * rank), ints_attr(o1, "window_strides", [1] * rank)
    base, dilation = ints_attr(o1, "base_dilations", [1] * rank), ints_attr(o1, "window_dilations", [1] * rank)
    padding = ints_attr(o1, "padding", [0] * (2 * rank))
    for s in ins:
        for a in s:
            if (window[a], strides[a], base[a], dilation[a], padding[2 * a], padding[2 * a + 1]) != (1, 1, 1, 1, 0, 0):
                return "a window across {v} (a cumulative sum, pooling)"
    return ""


def _same_elsewhere(o1: Any, o2: Any, keys: tuple[str, ...], axes: frozenset[int]) -> str:
    for key in keys:
        x1, x2 = ints_attr(o1, key), ints_attr(o2, key)
        if any(x1[i] != x2[i] for i in range(len(x1)) if i not in axes):
            return "a slice whose bounds depend on {v}"
    return ""


def _gather(o1: Any, o2: Any, ins: list[frozenset[int]], outs: list[frozenset[int]], s1: int, s2: int) -> str:
    """A gather keeps rows apart when it indexes per row (the indices' padded axes become the result's) and takes
    whole padded axes of its operand, without indexing along them (``a[:, :, 0]``)."""
    from jax.extend.mlir.dialects import stablehlo

    d = attr(o1, "dimension_numbers", stablehlo.GatherDimensionNumbers)
    sizes, sizes2 = ints_attr(o1, "slice_sizes"), ints_attr(o2, "slice_sizes")
    rank_op = len(sizes)
    rank_idx, rank_out = len(shape(o1.operands[1]) or []), len(shape(o1.results[0]) or [])
    collapsed, batching = set(d.collapsed_slice_dims), set(d.operand_batching_dims)
    indexed = set(d.start_index_map)
    offsets = list(d.offset_dims)
    kept = [a for a in range(rank_op) if a not in collapsed and a not in batching]
    expected = set()
    for a in range(rank_op):
        if a in ins[0]:
            if a in collapsed or a in batching or a in indexed or sizes[a] != s1 or sizes2[a] != s2:
                return "a gather from rows of {v}"
            expected.add(offsets[kept.index(a)])
        elif sizes[a] != sizes2[a]:
            return "a gather whose slices depend on {v}"
    vector = d.index_vector_dim
    if vector in ins[1]:
        return "a gather indexed along {v}"
    batch_in = [i for i in range(rank_idx) if i != vector]
    batch_out = [i for i in range(rank_out) if i not in set(offsets)]
    if len(batch_in) != len(batch_out) or (ins[1] and batching):
        return "a gather across {v}"
    expected |= {batch_out[k] for k, i in enumerate(batch_in) if i in ins[1]}
    return "" if expected == outs[0] else "a gather across {v}"


def _convolution(o1: Any, ins: list[frozenset[int]], outs: list[frozenset[int]]) -> str:
    from jax.extend.mlir.dialects import stablehlo

    d = attr(o1, "dimension_numbers", stablehlo.ConvDimensionNumbers)
    groups = [int_attr(o1, k) for k in ("feature_group_count", "batch_group_count") if k in o1.attributes]
    if ins[1] or not ins[0] <= {d.input_batch_dimension} or any(g != 1 for g in groups):
        return "a convolution across {v}"
    return "" if outs[0] == ({d.output_batch_dimension} if ins[0] else set()) else "a convolution across {v}"
