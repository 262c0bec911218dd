"""What ``verify`` found: each case's results, the plan per function, and the verdict, as text and as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._text import plural
from .compare import OutputResult
from .plan import Case


def differing(failed: int, total: int) -> str:
    """``1 of 1 case differs``, ``2 of 5 cases differ``: the count of failed cases, in agreement."""
    return f"{failed} of {plural(total, 'case')} differ{'s' if total == 1 else ''}"

@dataclass
class CaseResult:
    """One case on one platform: its outputs compared, or the error that stopped it."""

    function: str
    platform: str
    label: str
    dims: dict[str, int]
    note: str | None = None
    error: str | None = None
    outputs: list[OutputResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.error is None and all(o.passed for o in self.outputs)

    @property
    def where(self) -> str:
        dims = ", ".join(f"{k}={v}" for k, v in self.dims.items()) or "fixed shapes"
        return f"{self.function} on {self.platform} at {dims}"

    def as_dict(self) -> dict[str, Any]:
        return {"function": self.function, "platform": self.platform, "label": self.label, "dims": self.dims,
                "note": self.note, "passed": self.passed, "error": self.error,
                "outputs": [o.as_dict() for o in self.outputs]}


@dataclass
class FunctionPlan:
    """What one function is verified against, on which platforms, at which cases."""

    name: str
    against: str  # what its outputs are compared with: "model.py:f", "golden/out.npz", "the JAX runtime"
    platforms: list[str]
    cases: list[Case]
    actual: str = "artifact"  # how its side is named: "artifact", or "iree" (compared with "xla")
    sides: list[str] = field(default_factory=lambda: ["live"])  # the sides compared with: live, reference, xla


@dataclass
class VerifyReport:
    """What ``verify`` did and found; ``passed`` is the verdict."""

    artifact: str
    seed: int
    budget_bytes: int
    spec: str | None
    spec_differences: list[str]
    functions: list[FunctionPlan]
    cases: list[CaseResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.spec_differences and all(c.passed for c in self.cases)

    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed]

    def summary(self) -> str:
        """One paragraph naming every failure: the spec differences, and each failed case with its outputs."""
        parts = []
        if self.spec_differences:
            parts.append(f"the spec {self.spec} does not describe the artifact: " + "; ".join(self.spec_differences))
        failed = self.failures()
        if failed:
            lines = []
            for c in failed[:5]:
                what = c.error or "; ".join(o.describe() for o in c.outputs if not o.passed)
                lines.append(f"{c.where} ({c.label}): {what}")
            more = f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
            parts.append(f"{differing(len(failed), len(self.cases))}: " + "; ".join(lines) + more)
        if not parts:
            n = len(self.cases)
            return f"{self.artifact}: " + ("the 1 case matches." if n == 1 else f"all {n} cases match.")
        return f"{self.artifact}: verification failed: " + ". ".join(parts) + "."

    def as_dict(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "passed": self.passed, "seed": self.seed,
                "budget_bytes": self.budget_bytes,
                "spec": {"path": self.spec, "checked": self.spec is not None,
                         "differences": self.spec_differences},
                "functions": [{"name": p.name, "against": p.against, "actual": p.actual, "sides": p.sides,
                               "platforms": p.platforms, "cases": len(p.cases)} for p in self.functions],
                "cases": [c.as_dict() for c in self.cases],
                "notes": self.notes}
