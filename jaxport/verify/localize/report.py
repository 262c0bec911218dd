"""What a localization found: the operation blamed, the errors at it and at its operands, whether it departs alone,
and how the error grows from there to the outputs; as text and as JSON (``verify --localize --json``, key
``localize``). No JAX.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...tolerance import OutputResult
from .locations import Where

#: The kinds of blame (``Blame.kind``).
OPERATION = "operation"  # corresponding operations whose results depart while their operands agree
UNMATCHED = "unmatched"  # an operation of one program that the other lacks, on which the departure depends
CONDITION = "loop condition"  # a loop that runs a different number of iterations
LOOP = "loop"  # a loop whose results depart although no operation of its body does (at any iteration)
BRANCH = "conditional"  # a conditional that runs another branch on each side, or departs though its branch does not


@dataclass
class OpInfo:
    """One operation as a report shows it: the program it is in (a side's label), its index there, its name, the
    JAX primitive and source location, and its types."""

    program: str
    index: int
    operation: str
    where: Where
    operands: list[str]
    results: list[str]
    attributes: str = ""

    @property
    def short(self) -> str:
        return self.operation.split(".", 1)[-1]

    def named(self) -> str:
        """``stablehlo.dot_general (jnp dot_general)``: the operation and, when it differs, the JAX primitive."""
        prim = self.where.primitive
        return f"{self.operation} (JAX {prim})" if prim and prim != self.short else self.operation

    def types(self) -> str:
        """``f32[8, 16] = dot_general(f32[8, 32], f32[32, 16])``."""
        results = ", ".join(self.results) or "()"
        return f"{results} = {self.short}({', '.join(self.operands)})"

    def to_json(self) -> dict[str, Any]:
        return {"program": self.program, "index": self.index, "operation": self.operation,
                "primitive": self.where.primitive, "location": self.where.to_json(), "operands": self.operands,
                "results": self.results, "attributes": self.attributes}


@dataclass
class Measured:
    """How one value of the two sides compares (``result`` None: not compared, ``note`` says why)."""

    what: str  # "result 0", "operand 1", "output 'y'"
    type: str
    result: OutputResult | None = None
    note: str | None = None

    @property
    def departs(self) -> bool:
        return self.result is not None and bool(self.result.mismatched or self.result.problem)

    def error_text(self) -> str:
        r = self.result
        if r is None:
            return self.note or "not compared"
        if r.problem:
            return r.problem
        if not r.mismatched:
            exact = r.max_abs_error == 0
            return ("equal" if exact else f"within tolerance (max abs error {_num(r.max_abs_error)})") + \
                (f"; {self.note}" if self.note else "")
        text = f"{r.mismatched} of {r.size} values differ, max abs error {_num(r.max_abs_error)}"
        if r.max_rel_error is not None:
            text += f", max rel error {_num(r.max_rel_error)}"
        return text + (f"; {self.note}" if self.note else "")

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {"what": self.what, "type": self.type, "departs": self.departs, "note": self.note,
                "compared": r is not None,
                **({"max_abs_error": r.max_abs_error, "max_rel_error": r.max_rel_error, "mismatched": r.mismatched,
                    "size": r.size, "atol": r.atol, "rtol": r.rtol, "scale": r.scale, "worst": r.worst,
                    "problem": r.problem} if r is not None else
                   {"max_abs_error": None, "max_rel_error": None, "mismatched": None, "size": None, "atol": None,
                    "rtol": None, "scale": None, "worst": None, "problem": None})}


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


@dataclass
class Enclosing:
    """An operation around the blamed one: a loop (``while``) and the first iteration (from 0) at which its body
    departs, or a conditional (``case``, ``if``) and the branch (from 0) that ran."""

    op: OpInfo
    iteration: int | None = None
    branch: int | None = None

    def shown(self) -> str:
        """``in the body of the loop at model.py:18 (f) (iteration 3)``, ``in branch 1 of the conditional at ...``."""
        if self.branch is not None:
            return f"in branch {self.branch} of the conditional at {self.op.where.shown()}"
        return f"in the body of the loop at {self.op.where.shown()} (iteration {self.iteration})"

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op.to_json(), "iteration": self.iteration, "branch": self.branch}


@dataclass
class Alone:
    """The blamed operation run alone on both sides with the same recorded inputs (``inputs_from``'s values)."""

    inputs_from: str
    results: list[Measured]
    #: What ran on each side: ``the same operation`` (two runtimes or platforms) or ``each program's version``.
    compared: str

    @property
    def departs(self) -> bool:
        return any(m.departs for m in self.results)

    @property
    def verdict(self) -> str:
        return "departs alone" if self.departs else "amplifies an earlier difference"

    def to_json(self) -> dict[str, Any]:
        return {"inputs_from": self.inputs_from, "compared": self.compared, "departs": self.departs,
                "verdict": self.verdict, "results": [m.to_json() for m in self.results]}


@dataclass
class GrowthRow:
    """One step from the blamed operation to the outputs, with the error there."""

    label: str  # the operation (``add``) or ``output 'y'``
    where: str  # its source location, or ""
    measured: Measured

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "where": self.where, **self.measured.to_json()}


@dataclass
class Blame:
    """The operation a localization blames (see the kinds above). ``actual``/``expected``: the operation in each
    side's program (one is None for an operation only one program has); ``results`` and ``operands``: their errors;
    ``cause``: what makes it depart when that is known (a constant operand, a changed operation or attribute);
    ``inside``: the loops and conditionals around it, outermost first; ``consequence``: for an operation without
    counterpart, the first
    corresponding operation that departs because of it."""

    kind: str
    actual: OpInfo | None
    expected: OpInfo | None
    results: list[Measured] = field(default_factory=list)
    operands: list[Measured] = field(default_factory=list)
    cause: str | None = None
    inside: list[Enclosing] = field(default_factory=list)
    alone: Alone | None = None
    consequence: str | None = None

    def op(self, prefer: str | None = None) -> OpInfo:
        """The operation to name: the one in program ``prefer`` when it has it, else the actual side's, else the
        expected side's."""
        for o in (self.actual, self.expected):
            if o is not None and o.program == prefer:
                return o
        found = self.actual or self.expected
        assert found is not None
        return found

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "actual": self.actual.to_json() if self.actual else None,
                "expected": self.expected.to_json() if self.expected else None,
                "results": [m.to_json() for m in self.results], "operands": [m.to_json() for m in self.operands],
                "cause": self.cause, "inside": [s.to_json() for s in self.inside],
                "alone": self.alone.to_json() if self.alone else None, "consequence": self.consequence}


@dataclass
class LocalizeReport:
    """Where the two sides' numbers part (see :mod:`jaxport.verify.localize`)."""

    actual: str  # the side label: artifact, iree, tpu
    expected: str  # live, other, xla, cpu
    actual_shown: str  # what it is: "artifact.jaxport (xla on cpu)"
    expected_shown: str
    function: str
    platform: str
    case: str
    dims: dict[str, int]
    outputs_agree: bool
    #: The side whose source lines name the blamed operation first (the live function's when it is a side).
    source_side: str | None = None
    correspondence: dict[str, Any] | None = None
    blame: Blame | None = None
    growth: list[GrowthRow] = field(default_factory=list)
    outputs: list[Measured] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: int = 0
    seconds: float = 0.0
    tap_budget_bytes: int = 0
    largest_tap_bytes: int = 0
    written: dict[str, Any] | None = None
    #: The verification's report (``verify.report.VerifyReport``), set by ``jaxport.localize``.
    verify: Any = None

    def op(self) -> OpInfo | None:
        return self.blame.op(self.source_side) if self.blame else None

    def summary(self) -> str:
        """One sentence: what departs where, or that the outputs agree."""
        if self.outputs_agree:
            return (f"the outputs of {self.actual} and {self.expected} agree within the tolerances: nothing to "
                    f"localize, nothing blamed.")
        b = self.blame
        if b is None:
            return "no operation could be blamed" + (f" ({self.notes[-1]})" if self.notes else "") + "."
        op = b.op(self.source_side)
        inside = "".join(f" {s.shown()}" for s in b.inside)
        if b.kind == UNMATCHED:
            other = self.expected if op.program == self.actual else self.actual
            text = (f"{op.named()} at {op.where.shown()}{inside} is where the numbers part: it has no counterpart in "
                    f"{other}'s program (an operation added, removed or changed there)")
            instead = b.expected if op is b.actual else b.actual
            if instead is not None:
                text += f", whose program has {instead.named()} at {instead.where.shown()} instead"
        elif b.kind == CONDITION:
            text = f"the loop at {op.where.shown()}{inside} runs a different number of iterations"
        elif b.kind == LOOP:
            text = f"the loop {op.named()} at {op.where.shown()}{inside} departs, though no operation of its body does"
        elif b.kind == BRANCH:
            text = f"the conditional {op.named()} at {op.where.shown()}{inside} departs: {b.cause}"
        else:
            text = f"{op.named()} at {op.where.shown()}{inside} is the first operation that departs"
            worst = max((m.result.max_abs_error or 0.0 for m in b.results if m.result is not None), default=0.0)
            if worst:
                text += f" (max abs error {worst:.3g})"
            if b.cause:
                text += f": {b.cause}"
        if b.alone is not None:
            text += f"; alone, on the same inputs, it {b.alone.verdict}"
        return text + "."

    def to_json(self) -> dict[str, Any]:
        op = self.op()
        return {"sides": {"actual": self.actual, "expected": self.expected},
                "actual": self.actual_shown, "expected": self.expected_shown,
                "function": self.function, "platform": self.platform, "case": self.case, "dims": self.dims,
                "outputs_agree": self.outputs_agree, "blamed": op.to_json() if op else None,
                "source_side": self.source_side, "summary": self.summary(),
                "correspondence": self.correspondence, "blame": self.blame.to_json() if self.blame else None,
                "growth": [g.to_json() for g in self.growth], "outputs": [m.to_json() for m in self.outputs],
                "notes": self.notes, "runs": self.runs, "seconds": self.seconds,
                "tap_budget_bytes": self.tap_budget_bytes, "largest_tap_bytes": self.largest_tap_bytes,
                "written": self.written}
