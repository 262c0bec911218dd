"""What ``verify`` found: each case's results, the plan per function, and the verdict, as text and as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._text import plural
from ..tolerance import OutputResult
from .plan import Case


def differing(failed: int, total: int) -> str:
    """``1 of 1 case differs``, ``2 of 5 cases differ``: the count of failed cases, in agreement."""
    return f"{failed} of {plural(total, 'case')} differ{'s' if total == 1 else ''}"


def _unsure(o: OutputResult) -> bool:
    """Whether an output failed only by being NaN/Inf everywhere on both sides (inconclusive, not different)."""
    return not o.passed and bool(o.inconclusive) and not o.problem and not o.mismatched


def failing(cases: list[CaseResult], total: int) -> str:
    """``2 of 5 cases differ``, ``3 of 3 cases are inconclusive``, ``1 of 3 cases differ and 2 are inconclusive``:
    the failed cases counted by what they did (a case is inconclusive when every output it failed is)."""
    unsure = sum(1 for c in cases if c.error is None and all(o.passed or _unsure(o) for o in c.outputs))
    differ = len(cases) - unsure
    if not differ:
        return f"{unsure} of {plural(total, 'case')} {'is' if total == 1 else 'are'} inconclusive"
    return differing(differ, total) + (f" and {unsure} {'is' if unsure == 1 else 'are'} inconclusive"
                                       if unsure else "")

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
    #: With ``localize``: where the first differing case's sides part (``localize.report.LocalizeReport``).
    localized: Any = None

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
        advice: list[str] = []  # how to settle inconclusive outputs: said once, however many there are
        if failed:
            lines = []
            for c in failed[:5]:
                described = []
                for o in c.outputs:
                    if _unsure(o):
                        what_, _, fix = (o.inconclusive or "").partition("; ")
                        described.append(f"output {o.name!r}: inconclusive: {what_}")
                        if fix and fix not in advice:
                            advice.append(fix)
                    elif not o.passed:
                        described.append(o.describe())
                lines.append(f"{c.where} ({c.label}): {c.error or '; '.join(described)}")
            more = f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
            parts.append(f"{failing(failed, len(self.cases))}: " + "; ".join(lines) + more)
        if not parts:
            n = len(self.cases)
            return f"{self.artifact}: " + ("the 1 case matches." if n == 1 else f"all {n} cases match.")
        said = "".join(f". {a[:1].upper()}{a[1:]}" for a in advice)
        return f"{self.artifact}: verification failed: " + ". ".join(parts) + said + "."

    def as_dict(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "passed": self.passed, "seed": self.seed,
                "budget_bytes": self.budget_bytes,
                "spec": {"path": self.spec, "checked": self.spec is not None,
                         "differences": self.spec_differences},
                "functions": [{"name": p.name, "against": p.against, "actual": p.actual, "sides": p.sides,
                               "platforms": p.platforms, "cases": len(p.cases)} for p in self.functions],
                "cases": [c.as_dict() for c in self.cases],
                "notes": self.notes,
                **({"localize": self.localized.to_json()} if self.localized is not None else {})}
