"""The search for the first operation whose results depart while its operands agree.

Two sides (:class:`Side`: a program, the runtime that runs it, and ``main``'s arguments for the case) are compared
row by row of their correspondence (:mod:`.align`), in program order. Values are compared as ``verify`` compares
outputs (:func:`jaxport.tolerance.compare`: the tolerances by dtype or given, NaN and infinities in place, integers
exactly); a value *departs* when one of its elements is outside the tolerance or its shape differs (a value NaN/Inf
everywhere on both sides does not).

Intermediate values are never all held at once. A run taps at most ``budget`` bytes of values on each side (besides
its results). :meth:`Localizer.first_departure` taps every row of a range when they fit, else a set of rows spread
evenly over it (*checkpoints*), and narrows the search to the rows the first departing checkpoint reads, directly or
not, that come before it (its *cone*), until they fit one run: about ``log(total / budget)`` runs, each one compile
per side. A checkpoint that agrees says nothing of what is computed beside it, so the cone, not an interval of the
program order, is what is left to search.

The first departing row is then examined (:meth:`Localizer.examine`) with its operands tapped too:

- operands that agree: the row is blamed (an operation; or a ``while`` whose body is searched next, one iteration at
  a time, its body and condition as programs of their own, :meth:`Program.loop`; or a conditional, whose branch
  that ran is searched the same way);
- an operand that departs because the programs give it differently (a constant, an argument such as a bound tensor,
  or operands read from other operations: ``a - b`` become ``b - a``): the row is blamed, that named as the cause;
- an operand produced by operations only one program has: the first of those (in program order) whose own operands
  agree is blamed (an inserted cast, a replaced function);
- an operand whose producer corresponds and departs, although the search found it agreeing (a departure that agrees
  again at a checkpoint): the search starts again before it.

Imports JAX only when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import VerificationError
from ...tolerance import OutputResult
from .align import Correspondence, Row, align
from .program import CASE, IF, WHILE, Built, Op, Program, ValueRef
from .report import BRANCH, CONDITION, LOOP, OPERATION, UNMATCHED, Blame, Enclosing, Measured, OpInfo
from .runtimes import Runtime

#: Compares one value: ``(name, expected, actual) -> OutputResult``.
Compare = Callable[[str, Any, Any], OutputResult]

#: A loop is followed for at most this many iterations.
MAX_ITERATIONS = 1_000_000
#: How often the search may start again before a departure it missed (one that agreed again at a checkpoint).
MAX_RESTARTS = 8
#: Corresponding operations, unchanged and in a row, that end a stretch of edits (:meth:`Localizer._stretch`).
EDIT_GAP = 8
#: At most this many operations are tapped in one run, whatever their size: each tapped value is a result more for the
#: compiler, and a program of thousands of results compiles slowly.
MAX_TAPS = 256


@dataclass
class Side:
    """One side of a localization: its label (``artifact``, ``live``, ``other``, ``iree``, ``xla``, ``cpu``), what
    it is, its program, the runtime that runs it, ``main``'s arguments for the case, and the directories its source
    paths are relative to."""

    label: str
    shown: str
    program: Program
    runtime: Runtime
    args: list[Any]
    roots: list[Path] = field(default_factory=list)


@dataclass
class Block:
    """Where the search looks: both programs' ``main`` bodies with their arguments (the case's, or one iteration's
    carried values, a branch's captured ones), how their rows correspond, and the loops and conditionals around them
    (outermost first)."""

    x: Program
    y: Program
    args_x: list[Any]
    args_y: list[Any]
    corr: Correspondence
    inside: list[Enclosing] = field(default_factory=list)
    #: How reports name ``main``'s arguments (bound tensors, then inputs), where they are the case's.
    arg_names: list[str] = field(default_factory=list)


@dataclass
class Suspect:
    """The blamed operation ready to run alone: each side's module of it, and the values its arguments took on each
    side in the search."""

    x: Built
    y: Built
    inputs_x: list[Any]
    inputs_y: list[Any]
    same_program: bool


@dataclass
class _Run:
    """The values one run gave: each side's results (``base``) and tapped values."""

    base_x: list[Any]
    base_y: list[Any]
    x: dict[ValueRef, Any]
    y: dict[ValueRef, Any]


class Localizer:
    """Finds and examines the first departing operation of two sides (see the module docstring)."""

    def __init__(self, actual: Side, expected: Side, compare: Compare, budget: int,
                 progress: Callable[[str], None] | None = None, prefer: str | None = None):
        """``prefer``: the label of the side whose source lines name a loop (the live function's)."""
        self.actual = actual
        self.expected = expected
        self.prefer = prefer
        self.compare = compare
        self.budget = max(int(budget), 1)
        self.progress = progress
        self.runs = 0
        self.largest = 0
        self.notes: list[str] = []
        #: The operation last blamed by :meth:`examine`, ready to run alone (None when it cannot be).
        self.suspect: Suspect | None = None

    # --- running ----------------------------------------------------------------------------------------------------

    def run(self, block: Block, taps_x: Sequence[ValueRef], taps_y: Sequence[ValueRef], what: str = "") -> _Run:
        """Run both sides of ``block`` with these values tapped."""
        taps_x, taps_y = list(dict.fromkeys(taps_x)), list(dict.fromkeys(taps_y))
        if self.progress:
            self.progress(f"localizing: run {self.runs + 1}{f' ({what})' if what else ''}")
        bx = block.x.tapped(taps_x)
        by = bx if block.y is block.x and taps_y == taps_x else block.y.tapped(taps_y)
        out_x = self.actual.runtime.compile(bx)(block.args_x)
        out_y = self.expected.runtime.compile(by)(block.args_y)
        self.runs += 1
        nx, ny = len(block.x.returns), len(block.y.returns)
        size = max(sum(_nbytes(v) for v in out_x[nx:]), sum(_nbytes(v) for v in out_y[ny:]))
        self.largest = max(self.largest, size)
        return _Run(out_x[:nx], out_y[:ny], dict(zip(taps_x, out_x[nx:])), dict(zip(taps_y, out_y[ny:])))

    def measure(self, what: str, type_text: str, expected: Any, actual: Any) -> Measured:
        return Measured(what, type_text, self.compare(what, expected, actual))

    # --- the rows ---------------------------------------------------------------------------------------------------

    @staticmethod
    def _tappable(block: Block, row: Row) -> bool:
        if not row.paired:
            return False
        assert row.x is not None and row.y is not None
        ox, oy = block.x.ops[row.x], block.y.ops[row.y]
        return bool(ox.tensor_results()) and bool(oy.tensor_results())

    @staticmethod
    def _refs(op: Op) -> list[ValueRef]:
        return [ValueRef(op.index, k) for k in op.tensor_results()]

    def _row_bytes(self, block: Block, row: Row) -> int:
        assert row.x is not None and row.y is not None
        return max(block.x.ops[row.x].nbytes, block.y.ops[row.y].nbytes)

    def _departs(self, block: Block, row: Row, run: _Run) -> bool:
        assert row.x is not None and row.y is not None
        ox, oy = block.x.ops[row.x], block.y.ops[row.y]
        for k in ox.tensor_results():
            if k >= len(oy.results) or oy.results[k] is None:
                return True
            result = self.compare(f"%{ox.index}#{k}", run.y[ValueRef(oy.index, k)], run.x[ValueRef(ox.index, k)])
            if result.mismatched or result.problem:
                return True
        return False

    def first_departure(self, block: Block, lo: int, hi: int, last: list[_Run] | None = None) -> int | None:
        """A row of ``[lo, hi)`` whose values depart while those of the rows it reads agree (see the module
        docstring), or None when none departs. ``last`` gets the runs made (their ``base`` values: a loop body's
        next carried values)."""
        rows = block.corr.rows
        return self._search(block, [k for k in range(lo, hi) if self._tappable(block, rows[k])], last)

    def _search(self, block: Block, cands: list[int], last: list[_Run] | None) -> int | None:
        """The first of the rows ``cands`` (in program order) whose values depart, searched in the cone of the first
        checkpoint that departs: the rows it reads, directly or not. A program is a graph, not a line: a
        checkpoint that agrees vouches for nothing computed beside it, so the search narrows to what the departing
        checkpoint depends on, never to an interval of the program order."""
        if not cands:
            return None
        rows = block.corr.rows
        sizes = {k: self._row_bytes(block, rows[k]) for k in cands}
        if (sum(sizes.values()) <= self.budget and len(cands) <= MAX_TAPS) or len(cands) == 1:
            run = self._tap_rows(block, cands, f"{len(cands)} operations")
            if last is not None:
                last.append(run)
            return next((k for k in cands if self._departs(block, rows[k], run)), None)
        picks = _checkpoints(cands, sizes, self.budget)
        run = self._tap_rows(block, picks, f"{len(picks)} checkpoints over {len(cands)} operations")
        if last is not None:
            last.append(run)
        first = next((k for k in picks if self._departs(block, rows[k], run)), None)
        del run
        if first is None:  # the outputs' own operations come last: what follows the last checkpoint first
            picked = set(picks)
            found = self._search(block, [k for k in cands if k > picks[-1]], last)
            if found is not None:
                return found
            return self._search(block, [k for k in cands if k < picks[-1] and k not in picked], last)
        agreed = {k for k in picks if k < first}
        cone = self._cone(block, first)
        found = self._search(block, [k for k in cands if k < first and k in cone and k not in agreed], last)
        return first if found is None else found

    def _cone(self, block: Block, k: int) -> set[int]:
        """The rows whose values row ``k`` reads, directly or through other operations (of either program)."""
        found: set[int] = set()
        for program, by, start in ((block.x, block.corr.by_x, block.corr.rows[k].x),
                                   (block.y, block.corr.by_y, block.corr.rows[k].y)):
            if start is None:
                continue
            seen = {start}
            stack = [start]
            while stack:
                for ref in program.ops[stack.pop()].operands:
                    if ref.op is not None and ref.index >= 0 and ref.op not in seen:
                        seen.add(ref.op)
                        stack.append(ref.op)
            found |= {by[i] for i in seen if i in by}
        return found

    def _tap_rows(self, block: Block, ks: list[int], what: str) -> _Run:
        rows = block.corr.rows
        taps_x = [r for k in ks for r in self._refs(block.x.ops[rows[k].x])]  # type: ignore[index]
        taps_y = [r for k in ks for r in self._refs(block.y.ops[rows[k].y])]  # type: ignore[index]
        return self.run(block, taps_x, taps_y, what)

    # --- examining a row --------------------------------------------------------------------------------------------

    def info(self, side: Side, program: Program, op: Op) -> OpInfo:
        operands = []
        for ref in op.operands:
            t = program.value_type(ref) if ref.index >= 0 else None
            operands.append(t.text() if t is not None else "?")
        return OpInfo(side.label, op.index, op.name, op.where.relative(side.roots), operands,
                      [t.text() if t is not None else "?" for t in op.results], op.attributes)

    def localize(self, block: Block) -> Blame | None:
        """The blame for two sides whose outputs differ (None: no operation departs, which the notes explain)."""
        lo, hi = 0, len(block.corr.rows)
        for _ in range(MAX_RESTARTS):
            k = self.first_departure(block, lo, hi)
            if k is None:
                return self._from_outputs(block)
            found = self.examine(block, k)
            if isinstance(found, Blame):
                return found
            lo, hi = 0, found  # a departure before row ``found`` agreed again at a checkpoint: search before it
        self.notes.append("the search kept finding departures that agreed again later; it stopped")
        return None

    def examine(self, block: Block, k: int) -> Blame | int:
        """The blame at row ``k``, the first that departs (see the module docstring), or the row to search before."""
        row = block.corr.rows[k]
        assert row.x is not None and row.y is not None
        ox, oy = block.x.ops[row.x], block.y.ops[row.y]
        opnd_x = [r for r in ox.operands if r.index >= 0 and block.x.value_type(r) is not None]
        opnd_y = [r for r in oy.operands if r.index >= 0 and block.y.value_type(r) is not None]
        self.suspect = None
        iso: tuple[Built, Built, list[ValueRef], list[ValueRef]] | None = None
        if ox.name not in (WHILE, CASE, IF):
            try:
                bx, refs_x = block.x.isolated(ox.index)
                by, refs_y = (bx, refs_x) if block.x is block.y else block.y.isolated(oy.index)
                iso = bx, by, refs_x, refs_y
            except VerificationError as e:
                self.notes.append(f"the operation cannot be run alone: {e}")
        run = self.run(block, self._refs(ox) + opnd_x + (iso[2] if iso else []),
                       self._refs(oy) + opnd_y + (iso[3] if iso else []), f"operation {ox.short}")
        if iso is not None:
            suspect = Suspect(iso[0], iso[1], [run.x[r] for r in iso[2]], [run.y[r] for r in iso[3]],
                              block.x is block.y)
        results = [self.measure(f"result {j}", _text(ox.results[j]), run.y.get(ValueRef(oy.index, j)),
                                run.x[ValueRef(ox.index, j)]) if j < len(oy.results) and oy.results[j] is not None
                   else Measured(f"result {j}", _text(ox.results[j]), note="the other program's operation has no "
                                 "such result") for j in ox.tensor_results()]
        operands: list[Measured] = []
        departing: list[int] = []
        for p, rx in enumerate(ox.operands):
            tx = block.x.value_type(rx) if rx.index >= 0 else None
            ry = oy.operands[p] if p < len(oy.operands) else None
            ty = block.y.value_type(ry) if ry is not None and ry.index >= 0 else None
            note = self._operand_note(block, rx, ry)
            if tx is None or ty is None or rx not in run.x or ry not in run.y:
                operands.append(Measured(f"operand {p}", _text(tx), note=note or "not compared"))
                continue
            m = self.measure(f"operand {p}", tx.text(), run.y[ry], run.x[rx])
            m.note = note
            operands.append(m)
            if m.departs:
                departing.append(p)
        del run
        if not departing:
            if ox.name == WHILE and oy.name == WHILE:
                return self.descend(block, row, results, operands)
            if ox.name in (CASE, IF) and oy.name == ox.name:
                return self.branch(block, row, results, operands)
            self.suspect = suspect if iso is not None else None
            return Blame(OPERATION, self.info(self.actual, block.x, ox), self.info(self.expected, block.y, oy),
                         results, operands, self._cause(ox, oy, row), list(block.inside))
        constants: list[int] = []
        rewired: list[int] = []  # read from corresponding operations, but not the counterparts of each other
        frontier: set[int] = set()
        for p in departing:
            rx, ry = ox.operands[p], oy.operands[p]
            px = block.x.ops[rx.op] if rx.op is not None else None
            py = block.y.ops[ry.op] if ry.op is not None else None
            if px is not None and py is not None and px.constant_like and py.constant_like:
                constants.append(p)
                continue
            kx = block.corr.by_x.get(rx.op) if rx.op is not None else None
            ky = block.corr.by_y.get(ry.op) if ry.op is not None else None
            if kx is not None and kx == ky:
                return kx + 1  # it departs, yet the search passed it: it agreed again at a checkpoint
            if kx is not None and ky is not None and block.corr.rows[kx].paired and block.corr.rows[ky].paired:
                rewired.append(p)
            frontier |= self._walk_back(block, "x", rx, {}) | self._walk_back(block, "y", ry, {})
        if frontier:
            return self._unmatched(block, frontier, consequence=(
                f"the first corresponding operation that departs is {ox.name} at "
                f"{ox.where.relative(self.actual.roots).shown()} "
                f"({'; '.join(m.error_text() for m in results if m.departs) or 'its results depart'})"))
        where = "between the programs" if block.x is not block.y else "between the two sides (folded differently)"
        cause = (f"a constant operand differs {where} (operand {', '.join(str(p) for p in constants)})"
                 if constants else None)
        if rewired and cause is None:
            cause = (f"it reads other values than the other program's operation does (operand "
                     f"{', '.join(str(p) for p in rewired)}: operands swapped or taken from elsewhere)")
        arguments = [p for p in departing if ox.operands[p].op is None and ox.operands[p].index >= 0]
        if arguments and cause is None:
            names = [block.arg_names[ox.operands[p].index] if ox.operands[p].index < len(block.arg_names) else
                     f"argument {ox.operands[p].index}" for p in arguments]
            cause = f"an argument differs between the sides: {', '.join(names)}"
        # run alone on one side's values, an operation that reads a differing argument or other values compares
        # with itself: nothing to learn
        self.suspect = suspect if iso is not None and not arguments and not rewired else None
        return Blame(OPERATION, self.info(self.actual, block.x, ox), self.info(self.expected, block.y, oy),
                     results, operands, cause or self._cause(ox, oy, row), list(block.inside))

    def _operand_note(self, block: Block, rx: ValueRef, ry: ValueRef | None) -> str | None:
        px = block.x.ops[rx.op] if rx.op is not None and rx.index >= 0 else None
        if px is not None and px.constant_like:
            return "a constant" if px.constant is not None else "computed from constants"
        if rx.op is None:
            return "an argument" if not block.inside else "a value from outside"
        return None

    def _cause(self, ox: Op, oy: Op, row: Row) -> str | None:
        """What differs in the operation itself between two programs: the operation, or its attributes."""
        x, y = self.actual.label, self.expected.label
        if ox.name != oy.name or (row.changed and ox.where.primitive != oy.where.primitive):
            return (f"the operation differs: {ox.where.primitive or ox.short} in {x}'s program, "
                    f"{oy.where.primitive or oy.short} in {y}'s")
        if ox.attributes != oy.attributes:
            return (f"its attributes differ: {ox.attributes or '(none)'} in {x}'s program, "
                    f"{oy.attributes or '(none)'} in {y}'s")
        return None

    def _walk_back(self, block: Block, side: str, ref: ValueRef | None, seen: dict[int, set[int]]) -> set[int]:
        """The rows of the operations without counterpart that ``ref`` depends on through such operations only and
        whose own operands do not (the first ones an inserted or replaced computation runs)."""
        if ref is None or ref.op is None or ref.index < 0:
            return set()
        program = block.x if side == "x" else block.y
        by = block.corr.by_x if side == "x" else block.corr.by_y
        op = program.ops[ref.op]
        if op.constant_like:
            return set()
        k = by.get(ref.op)
        if k is None or block.corr.rows[k].paired:
            return set()
        if k in seen:
            return seen[k]
        seen[k] = set()
        parents: set[int] = set()
        for r in op.operands:
            parents |= self._walk_back(block, side, r, seen)
        seen[k] = parents or {k}
        return seen[k]

    def _from_outputs(self, block: Block) -> Blame | None:
        """No corresponding operation departs: an output that departs is computed by operations only one program
        has (or passes an argument through)."""
        run = self.run(block, [], [], "outputs")
        frontier: set[int] = set()
        for j, (rx, ry) in enumerate(zip(block.x.returns, block.y.returns)):
            tx = block.x.value_type(rx)
            if tx is None:
                continue
            if self.compare(f"output {j}", run.base_y[j], run.base_x[j]).mismatched:
                frontier |= self._walk_back(block, "x", rx, {}) | self._walk_back(block, "y", ry, {})
        if not frontier:
            self.notes.append("no operation's results depart, although the outputs differ")
            return None
        return self._unmatched(block, frontier, "the outputs it computes depart")

    def _unmatched(self, block: Block, frontier: set[int], consequence: str) -> Blame:
        """The blame for operations without counterpart (rows ``frontier``): the first on the preferred side (the
        live function's), with the first on the other side, when there is one, as what it stands in for."""
        rows = block.corr.rows
        xs = sorted(k for k in frontier if rows[k].x is not None)
        ys = sorted(k for k in frontier if rows[k].y is not None)
        # One side's departure alone found: the other side's first operation of the same replaced stretch of the
        # program stands in its place (``erf`` where the other has the ``tanh`` approximation's first multiply).
        if ys and not xs:
            xs = self._stretch(block, "x", ys[0])
        elif xs and not ys:
            ys = self._stretch(block, "y", xs[0])
        ux = self.info(self.actual, block.x, block.x.ops[rows[xs[0]].x]) if xs else None  # type: ignore[index]
        uy = self.info(self.expected, block.y, block.y.ops[rows[ys[0]].y]) if ys else None  # type: ignore[index]
        return Blame(UNMATCHED, ux, uy, [], [], None, list(block.inside), consequence=consequence)

    def _stretch(self, block: Block, side: str, start: int) -> list[int]:
        """The rows of ``side``'s operations that stand in the other side's at row ``start``: those without
        counterpart (else changed ones) in the stretch of edits that begins there, which ends where
        :data:`EDIT_GAP` corresponding operations follow one another unchanged."""
        rows = block.corr.rows
        unpaired: list[int] = []
        changed: list[int] = []
        gap = 0
        for k in range(start, len(rows)):
            row = rows[k]
            if row.paired and not row.changed:
                gap += 1
                if gap >= EDIT_GAP:
                    break
                continue
            gap = 0
            if (row.x if side == "x" else row.y) is None:
                continue
            (changed if row.paired else unpaired).append(k)
        return unpaired or changed

    # --- loops and conditionals -------------------------------------------------------------------------------------

    def branch(self, block: Block, row: Row, results: list[Measured], operands: list[Measured]) -> Blame:
        """A conditional whose results depart while its operands agree: the branch it ran, searched as a program of
        its own (from the values of ``main`` it captures)."""
        assert row.x is not None and row.y is not None
        ox, oy = block.x.ops[row.x], block.y.ops[row.y]
        import numpy as np

        run = self.run(block, [ox.operands[0]], [oy.operands[0]], "the conditional's choice")
        chosen = []
        for op, value in ((ox, run.x[ox.operands[0]]), (oy, run.y[oy.operands[0]])):
            v = int(np.asarray(value))  # a case takes its last branch for an index out of range
            chosen.append((0 if v else 1) if op.name == IF else (v if 0 <= v < op.regions else op.regions - 1))
        del run
        here = self.info(self.expected, block.y, oy) if self.prefer == self.expected.label else \
            self.info(self.actual, block.x, ox)
        if chosen[0] != chosen[1]:
            return Blame(BRANCH, self.info(self.actual, block.x, ox), self.info(self.expected, block.y, oy), results,
                         operands, f"it runs branch {chosen[0]} for {self.actual.label} and branch {chosen[1]} for "
                         f"{self.expected.label}", list(block.inside))
        k = chosen[0]
        px, cap_x = block.x.region(row.x, k, f"branch {k}")
        py, cap_y = (px, cap_x) if block.y is block.x else block.y.region(row.y, k, f"branch {k}")
        run = self.run(block, cap_x, cap_y, "the values the branch reads")
        inner = Block(px, py, [run.x[r] for r in cap_x], [run.y[r] for r in cap_y], align(px, py),
                      [*block.inside, Enclosing(here, branch=k)])
        del run
        found = self.first_departure(inner, 0, len(inner.corr.rows))
        if found is not None:
            blamed = self.examine(inner, found)
            if isinstance(blamed, Blame):
                return blamed
        return Blame(BRANCH, self.info(self.actual, block.x, ox), self.info(self.expected, block.y, oy), results,
                     operands, f"no operation of its branch {k} departs", list(block.inside))


    def descend(self, block: Block, row: Row, results: list[Measured], operands: list[Measured]) -> Blame:
        """A ``while`` whose results depart while its operands agree: its body, one iteration at a time."""
        assert row.x is not None and row.y is not None
        ox, oy = block.x.ops[row.x], block.y.ops[row.y]
        lx = block.x.loop(row.x)
        ly = lx if block.y is block.x else block.y.loop(row.y)
        corr = align(lx.body, ly.body)
        init_x = list(ox.operands)
        init_y = list(oy.operands)
        taps_x = init_x + lx.body_captured + lx.cond_captured
        taps_y = init_y + ly.body_captured + ly.cond_captured
        run = self.run(block, taps_x, taps_y, f"the loop at {ox.where.relative(self.actual.roots).shown()}")
        carry_x = [run.x[r] for r in init_x]
        carry_y = [run.y[r] for r in init_y]
        cap_bx, cap_cx = [run.x[r] for r in lx.body_captured], [run.x[r] for r in lx.cond_captured]
        cap_by, cap_cy = [run.y[r] for r in ly.body_captured], [run.y[r] for r in ly.cond_captured]
        del run
        step = Enclosing(self.info(self.expected, block.y, oy) if self.prefer == self.expected.label else
                        self.info(self.actual, block.x, ox), 0)
        cond_x = self.actual.runtime.compile(lx.cond.tapped([]))
        cond_y = self.expected.runtime.compile(ly.cond.tapped([]))
        for t in range(MAX_ITERATIONS):
            step = Enclosing(step.op, t)
            if self.progress and t and t % 50 == 0:
                self.progress(f"localizing: loop iteration {t}")
            go_x, go_y = bool(cond_x(carry_x + cap_cx)[0]), bool(cond_y(carry_y + cap_cy)[0])
            if go_x != go_y:
                c = lx.cond.ops[lx.cond.returns[0].op] if lx.cond.returns[0].op is not None else None
                info = self.info(self.actual, lx.cond, c) if c is not None else step.op
                return Blame(CONDITION, info, None, [], [], (f"the condition is {go_x} for {self.actual.label} and "
                             f"{go_y} for {self.expected.label} at iteration {t}"), [*block.inside, step])
            if not go_x:
                break
            inner = Block(lx.body, ly.body, carry_x + cap_bx, carry_y + cap_by, corr, [*block.inside, step])
            made: list[_Run] = []
            k = self.first_departure(inner, 0, len(corr.rows), made)
            if k is not None:
                found = self.examine(inner, k)
                if isinstance(found, Blame):
                    return found
                self.notes.append(f"in the loop's body at iteration {t}, a departure agreed again later")
            if not made:
                made.append(self.run(inner, [], [], "a loop iteration"))
            carry_x, carry_y = made[-1].base_x, made[-1].base_y
        return Blame(LOOP, self.info(self.actual, block.x, ox), self.info(self.expected, block.y, oy), results,
                     operands, "no operation of its body departs at any iteration", list(block.inside))


def _text(t: Any) -> str:
    return t.text() if t is not None else "?"


def _nbytes(v: Any) -> int:
    return int(getattr(v, "nbytes", 0))


def _checkpoints(cands: list[int], sizes: dict[int, int], budget: int) -> list[int]:
    """Rows spread evenly over ``cands``, the last one left out (the range after the last checkpoint is searched when
    none departs), whose values fit ``budget`` together: one row, the middle one, bisects."""
    n = len(cands)
    average = max(1, sum(sizes.values()) // n)
    count = max(1, min(n - 1, MAX_TAPS, budget // average))
    while True:
        picks = sorted({cands[(j + 1) * n // (count + 1) - 1] for j in range(count)})
        if sum(sizes[k] for k in picks) <= budget or count == 1:
            return picks
        count = max(1, count * 3 // 4)
