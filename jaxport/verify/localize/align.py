"""Which operation of one program corresponds to which of the other.

Two runtimes or two platforms run the same program: each operation corresponds to itself. Two programs (an artifact
against its live function, or against another artifact) are aligned as a diff aligns two texts
(``difflib.SequenceMatcher``, in program order) on each operation's signature: its name, the types of its results and
the JAX primitive it comes from, never its line (a line inserted above moves every later one). Constants, and what
is computed from constants alone (a broadcast constant, an ``iota``), are left out: they are operands, compared where
an operation reads them. Operations the diff replaces one for one with
results of the same types correspond too (``jnp.sin`` where the other has ``jnp.cos``: the operation changed); what
is left has no counterpart (an operation inserted or removed, a cast to ``bfloat16`` added, a different lowering).

A :class:`Correspondence` is the list of rows in program order, each an operation of the actual program, of the
expected one, or of both. No JAX.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .program import Program


@dataclass(frozen=True)
class Row:
    """One step of the merged program order: the actual program's operation ``x``, the expected one's ``y``, or
    both when they correspond (``changed``: with different operations)."""

    x: int | None
    y: int | None
    changed: bool = False

    @property
    def paired(self) -> bool:
        return self.x is not None and self.y is not None


@dataclass
class Correspondence:
    """The rows of two programs (see the module docstring), and how they were found."""

    rows: list[Row]
    same_program: bool
    x_count: int
    y_count: int
    by_x: dict[int, int] = field(default_factory=dict)
    by_y: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for k, row in enumerate(self.rows):
            if row.x is not None:
                self.by_x[row.x] = k
            if row.y is not None:
                self.by_y[row.y] = k

    @property
    def paired(self) -> int:
        return sum(1 for r in self.rows if r.paired)

    def describe(self) -> str:
        if self.same_program:
            return "the same program on both sides"
        n = self.paired
        return (f"{n} of {self.x_count} operations correspond to one of the other program's {self.y_count} "
                f"(aligned by operation, result types and JAX primitive)")

    def to_json(self) -> dict[str, object]:
        return {"same_program": self.same_program, "operations": self.x_count, "other_operations": self.y_count,
                "corresponding": self.paired, "text": self.describe()}


def align(x: Program, y: Program) -> Correspondence:
    """The rows of ``x`` (actual) and ``y`` (expected): one for one when they are the same program, else aligned."""
    xs = [op.index for op in x.ops if not op.constant_like]
    if x is y:
        return Correspondence([Row(i, i) for i in xs], True, len(xs), len(xs))
    ys = [op.index for op in y.ops if not op.constant_like]
    matcher = difflib.SequenceMatcher(None, [x.ops[i].signature for i in xs], [y.ops[j].signature for j in ys],
                                      autojunk=False)
    rows: list[Row] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [Row(xs[i], ys[j]) for i, j in zip(range(i1, i2), range(j1, j2))]
        elif tag == "replace" and i2 - i1 == j2 - j1 and all(
                x.ops[xs[i]].results == y.ops[ys[j]].results for i, j in zip(range(i1, i2), range(j1, j2))):
            rows += [Row(xs[i], ys[j], changed=True) for i, j in zip(range(i1, i2), range(j1, j2))]
        else:
            rows += [Row(xs[i], None) for i in range(i1, i2)]
            rows += [Row(None, ys[j]) for j in range(j1, j2)]
    return Correspondence(rows, False, len(xs), len(ys))
