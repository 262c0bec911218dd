"""Comparing an artifact's output with the live function's: per-dtype tolerances and error statistics.

An output passes when ``|artifact - live| <= atol + rtol * |live|`` everywhere (NaN matching NaN, infinities
matching in sign); integers and booleans must be equal. :class:`OutputResult` keeps the largest absolute and
relative errors, the number of values that differ and the worst one. Imports numpy only when it compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .. import dtypes

#: Default ``(atol, rtol)`` by output dtype: an output passes when ``|artifact - live| <= atol + rtol * |live|``
#: everywhere (NaN matching NaN, infinities matching in sign). Integers and booleans must be equal.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-12, 1e-9),
    "complex128": (1e-12, 1e-9),
    "float32": (1e-6, 1e-5),
    "complex64": (1e-6, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
}


def tolerance(dtype: str, atol: float | None = None, rtol: float | None = None) -> tuple[float, float]:
    """``(atol, rtol)`` for an output dtype; ``atol``/``rtol`` override the defaults of :data:`TOLERANCES`."""
    default_atol, default_rtol = TOLERANCES.get(dtype, (0.0, 0.0))
    return (default_atol if atol is None else atol), (default_rtol if rtol is None else rtol)


@dataclass
class OutputResult:
    """How one output of one case compares: errors of the artifact's values against the live function's."""

    name: str
    dtype: str
    shape: list[int]
    size: int
    atol: float
    rtol: float
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatched: int = 0
    worst: dict[str, Any] | None = None  # {"index": [...], "expected": x, "actual": y}
    problem: str | None = None  # a structural mismatch: shape or dtype

    @property
    def passed(self) -> bool:
        return self.problem is None and self.mismatched == 0

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": self.shape, "size": self.size,
                "passed": self.passed, "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
                "atol": self.atol, "rtol": self.rtol, "mismatched": self.mismatched, "worst": self.worst,
                "problem": self.problem}

    def describe(self) -> str:
        if self.problem:
            return f"output {self.name!r}: {self.problem}"
        text = f"output {self.name!r}: {self.mismatched} of {self.size} values differ"
        if self.max_abs_error is not None:
            text += f" (max abs error {self.max_abs_error:.3g}, tolerance {self.atol:g} + {self.rtol:g}*|expected|)"
        if self.worst:
            text += (f"; worst at index {tuple(self.worst['index'])}: artifact {_show(self.worst['actual'])}, live "
                     f"{_show(self.worst['expected'])}")
        return text


def _show(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _scalar(v: Any) -> Any:
    if isinstance(v, complex):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def compare(name: str, expected: Any, actual: Any, atol: float | None = None,
            rtol: float | None = None) -> OutputResult:
    """Compare an artifact output (``actual``) with the live function's (``expected``)."""
    import numpy as np

    e, a = np.asarray(expected), np.asarray(actual)
    dtype = str(a.dtype)
    at, rt = tolerance(str(e.dtype), atol, rtol)
    result = OutputResult(name, dtype, [int(d) for d in a.shape], int(a.size), at, rt)
    if e.shape != a.shape:
        result.problem = f"shape {tuple(a.shape)} from the artifact, {tuple(e.shape)} from the live function"
        return result
    if str(e.dtype) != dtype:
        result.problem = f"dtype {dtype} from the artifact, {e.dtype} from the live function"
        return result
    if a.size == 0:
        result.max_abs_error = result.max_rel_error = 0.0
        return result
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: the non-finite values are compared apart
        _errors(result, e, a, dtype, at, rt)
    return result


def _errors(result: OutputResult, e: Any, a: Any, dtype: str, at: float, rt: float) -> None:
    import numpy as np

    kind = dtypes.BY_NAME[dtype].kind if dtype in dtypes.BY_NAME else a.dtype.kind
    if kind in ("float", "complex"):
        wide = np.complex128 if kind == "complex" else np.float64
        ew, aw = e.astype(wide), a.astype(wide)
        finite = np.isfinite(ew) & np.isfinite(aw)
        same_special = (np.isnan(ew) & np.isnan(aw)) | (ew == aw)
        diff = np.where(finite, np.abs(aw - ew), 0.0)
        ref = np.abs(np.where(finite, ew, 0.0))
        bad = np.where(finite, diff > at + rt * ref, ~same_special)
        excess = np.where(finite, diff - (at + rt * ref), np.where(bad, np.inf, -np.inf))
    elif kind == "bool":
        ew, aw = e.astype(np.int64), a.astype(np.int64)
        diff = np.abs(aw - ew).astype(np.float64)
        ref = np.abs(ew).astype(np.float64)
        bad = diff > at + rt * ref
        excess = diff - (at + rt * ref)
    else:
        exact = a != e
        ew, aw = e.astype(np.float64), a.astype(np.float64)
        diff = np.where(exact, np.maximum(np.abs(aw - ew), 1.0), 0.0)  # at least 1 where the integers differ
        ref = np.abs(ew)
        bad = exact & (diff > at + rt * ref)
        excess = np.where(exact, diff - (at + rt * ref), -np.inf)
    result.max_abs_error = float(diff.max())
    nonzero = ref > 0
    result.max_rel_error = float((diff[nonzero] / ref[nonzero]).max()) if nonzero.any() else (
        0.0 if result.max_abs_error == 0 else None)
    result.mismatched = int(np.count_nonzero(bad))
    if result.mismatched:
        idx = np.unravel_index(int(np.argmax(excess)), a.shape)
        result.worst = {"index": [int(i) for i in idx], "expected": _scalar(e[idx].item()),
                        "actual": _scalar(a[idx].item())}
