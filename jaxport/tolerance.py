"""The rule of comparing an output with a reference, said once: ``call --expect`` (``run.calls.expect``) and ``verify``
(the live function, stored reference outputs, or the same artifact run by XLA) compare by it. Per-dtype tolerances,
non-finite values and error statistics.

An output passes when ``|actual - expected| <= atol + rtol * |expected|`` everywhere; NaN must match NaN and an
infinity the same infinity, at the same positions (a NaN where the other side has a number, or at another position,
is a mismatch); integers and booleans must be equal. Two compilers (``verify --runtime iree``) are compared with
:data:`COMPILER_TOLERANCES` (of the program's lowest-precision float type, when it computes in one below the
output's) and the magnitude-scaled rule ``|actual - expected| <= atol + rtol * max(|expected|, s)``,
``s`` the largest finite ``|expected|`` of that output: compilers reorder reductions and approximate transcendental
functions differently, so an error is measured against the output's magnitude, not against a value that happens to
lie near zero. An output whose values are all NaN or infinite on both sides proves nothing: it is *inconclusive*
and fails unless ``allow_nonfinite``. :class:`OutputResult` keeps the largest absolute and relative errors, the
number of values that differ and the worst one. Imports numpy only when it compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from . import dtypes

#: Default ``(atol, rtol)`` by float or complex output dtype (``DType.tolerance``): an output passes when
#: ``|actual - expected| <= atol + rtol * |expected|`` everywhere. Integers and booleans must be equal.
TOLERANCES: dict[str, tuple[float, float]] = {d.name: d.tolerance for d in dtypes.TABLE
                                              if d.kind in ("float", "complex")}
#: Default ``(atol, rtol)`` by float or complex output dtype when two compilers are compared (``verify --runtime
#: iree``; ``DType.compiler_tolerance``), with the magnitude-scaled rule.
COMPILER_TOLERANCES: dict[str, tuple[float, float]] = {d.name: d.compiler_tolerance for d in dtypes.TABLE
                                                       if d.kind in ("float", "complex")}

#: Why an output whose values are all NaN or infinite on both sides proves nothing.
NONFINITE = "every value is NaN/Inf on both sides"

#: How a side is named in messages about a structural difference (``shape ... from the artifact``).
_LONG = {"artifact": "the artifact", "live": "the live function", "reference": "the reference", "xla": "XLA",
         "iree": "IREE"}


def tolerance(dtype: str, atol: float | None = None, rtol: float | None = None, *,
              across_compilers: bool = False, computed_in: str | None = None) -> tuple[float, float]:
    """``(atol, rtol)`` for an output dtype; ``atol``/``rtol`` override the dtype's defaults (``DType.tolerance``, or
    ``DType.compiler_tolerance`` with ``across_compilers``). Integers, bools and unknown types must be equal.

    ``computed_in``: with ``across_compilers``, the program's lowest-precision float type (:func:`lowest_float`): a
    float output computed through it (an ``f32`` output of ``bf16`` arithmetic) takes that type's compiler
    tolerances, since two compilers round its intermediates apart (one keeps a ``bf16`` product in ``f32``, the other
    rounds it)."""
    d = dtypes.BY_NAME.get(dtype)
    default_atol, default_rtol = dtypes.EXACT if d is None else \
        d.compiler_tolerance if across_compilers else d.tolerance
    low = dtypes.BY_NAME.get(computed_in) if computed_in is not None else None
    if (across_compilers and d is not None and low is not None and d.kind in ("float", "complex")
            and (low.precision or 0) < (d.precision or 0)):
        default_atol, default_rtol = (max(a, b) for a, b in zip((default_atol, default_rtol), low.compiler_tolerance))
    return (default_atol if atol is None else atol), (default_rtol if rtol is None else rtol)


def lowest_float(element_types: set[str] | list[str]) -> str | None:
    """The float type of least precision among a program's MLIR element types (``bf16``, ``complex<f32>``, ``i4``:
    ``program.module_scan.element_types``), as its canonical name (``bfloat16``); a complex type counts as its parts'.
    None when the program holds no float."""
    found = []
    for t in element_types:
        d = dtypes.BY_MLIR.get(t)
        if d is not None and d.kind in ("float", "complex") and d.precision is not None:
            found.append(dtypes.BY_NAME[d.part] if d.part else d)
    return min(found, key=lambda d: (d.precision, d.width)).name if found else None


@dataclass
class OutputResult:
    """How one output of one case compares: the errors of one side's values (``actual``, e.g. the artifact's)
    against the other's (``expected``, e.g. the live function's)."""

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
    #: With the magnitude-scaled rule: the output's largest finite ``|expected|`` (else None: per value).
    scale: float | None = None
    #: :data:`NONFINITE` (possibly with how to fix it) when every value is NaN/Inf on both sides, else None.
    inconclusive: str | None = None
    allow_nonfinite: bool = False
    #: The names of the two sides: (actual, expected), e.g. ("artifact", "live"), ("iree", "xla").
    sides: tuple[str, str] = ("artifact", "live")

    @property
    def passed(self) -> bool:
        return self.problem is None and self.mismatched == 0 and (self.inconclusive is None or
                                                                    self.allow_nonfinite)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": self.shape, "size": self.size,
                "passed": self.passed, "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
                "atol": self.atol, "rtol": self.rtol, "scale": self.scale, "mismatched": self.mismatched,
                "worst": self.worst, "problem": self.problem, "inconclusive": self.inconclusive,
                "sides": {"actual": self.sides[0], "expected": self.sides[1]}}

    def tolerance_text(self, magnitude: str = "|expected|") -> str:
        """The tolerance rule with its numbers, e.g. ``1e-06 + 1e-05*|expected|``."""
        if self.scale is not None:
            return f"{self.atol:g} + {self.rtol:g}*max({magnitude}, {self.scale:.3g})"
        return f"{self.atol:g} + {self.rtol:g}*{magnitude}"

    def describe(self) -> str:
        if self.problem:
            return f"output {self.name!r}: {self.problem}"
        if self.inconclusive and not self.mismatched:
            return f"output {self.name!r}: inconclusive: {self.inconclusive}"
        text = f"output {self.name!r}: {self.mismatched} of {self.size} values differ"
        if self.max_abs_error:  # over the values finite on both sides
            text += f" (max abs error {self.max_abs_error:.3g}, tolerance {self.tolerance_text()})"
        elif self.max_abs_error is not None:  # every difference is a NaN or an infinity on one side only
            text += " (each as NaN or infinity on one side only)"
        if self.worst:
            text += (f"; worst at index {tuple(self.worst['index'])}: {self.sides[0]} {_show(self.worst['actual'])}, "
                     f"{self.sides[1]} {_show(self.worst['expected'])}")
        return text


def _show(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _scalar(v: Any) -> Any:
    if isinstance(v, complex):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def compare(name: str, expected: Any, actual: Any, atol: float | None = None, rtol: float | None = None, *,
            allow_nonfinite: bool = False, across_compilers: bool = False, computed_in: str | None = None,
            sides: tuple[str, str] = ("artifact", "live")) -> OutputResult:
    """Compare one output: ``actual`` (the artifact's) with ``expected`` (the reference's); see the module docstring.

    ``allow_nonfinite``: an output that is NaN/Inf everywhere on both sides passes (it is still marked
    ``inconclusive``). ``across_compilers``: :data:`COMPILER_TOLERANCES` and the magnitude-scaled rule, of the
    program's lowest-precision float type ``computed_in`` where it is below the output's (:func:`tolerance`).
    ``sides`` names the two sides, ``(actual, expected)``, in messages.
    """
    import numpy as np

    e, a = np.asarray(expected), np.asarray(actual)
    dtype = str(a.dtype)
    at, rt = tolerance(str(e.dtype), atol, rtol, across_compilers=across_compilers, computed_in=computed_in)
    result = OutputResult(name, dtype, [int(d) for d in a.shape], int(a.size), at, rt,
                          allow_nonfinite=allow_nonfinite, sides=sides)
    first, second = (_LONG.get(s, s) for s in sides)
    if e.shape != a.shape:
        result.problem = f"shape {tuple(a.shape)} from {first}, {tuple(e.shape)} from {second}"
        return result
    if str(e.dtype) != dtype:
        result.problem = f"dtype {dtype} from {first}, {e.dtype} from {second}"
        return result
    if a.size == 0:
        result.max_abs_error = result.max_rel_error = 0.0
        return result
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: the non-finite values are compared apart
        _errors(result, e, a, dtype, at, rt, across_compilers)
    return result


def _errors(result: OutputResult, e: Any, a: Any, dtype: str, at: float, rt: float, scaled: bool) -> None:
    import numpy as np

    kind = dtypes.BY_NAME[dtype].kind if dtype in dtypes.BY_NAME else a.dtype.kind
    if kind in ("float", "complex"):
        wide = np.complex128 if kind == "complex" else np.float64
        ew, aw = e.astype(wide), a.astype(wide)
        finite = np.isfinite(ew) & np.isfinite(aw)
        same_special = (np.isnan(ew) & np.isnan(aw)) | (ew == aw)  # NaN at the same place, or the same infinity
        diff = np.where(finite, np.abs(aw - ew), 0.0)
        ref = np.abs(np.where(finite, ew, 0.0))
        if scaled:
            magnitudes = np.abs(ew[np.isfinite(ew)])
            result.scale = float(magnitudes.max()) if magnitudes.size else 0.0
            ref = np.where(finite, np.maximum(ref, result.scale), 0.0)
        bad = np.where(finite, diff > at + rt * ref, ~same_special)
        excess = np.where(finite, diff - (at + rt * ref), np.where(bad, np.inf, -np.inf))
        if not (np.isfinite(ew) | np.isfinite(aw)).any():
            result.inconclusive = NONFINITE  # nothing was compared: no error statistics either
            _worst(result, e, a, bad, excess)
            return
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
    result.max_rel_error = float(np.max(diff[nonzero] / ref[nonzero])) if nonzero.any() else (
        0.0 if result.max_abs_error == 0 else None)
    _worst(result, e, a, bad, excess)


def _worst(result: OutputResult, e: Any, a: Any, bad: Any, excess: Any) -> None:
    import numpy as np

    result.mismatched = int(np.count_nonzero(bad))
    if result.mismatched:
        idx = np.unravel_index(int(np.argmax(excess)), a.shape)
        result.worst = {"index": [int(i) for i in idx], "expected": _scalar(e[idx].item()),
                        "actual": _scalar(a[idx].item())}
