"""Localizing one case of ``verify``: both sides made programs, searched, and the blamed operation checked alone.

:func:`localize_case` takes what ``verify`` compared on one case: the artifact as it ran (a ``Loaded``), the side it
was compared with (the live function, another artifact, the same artifact run by JAX, or on another platform), the
inputs, and the tolerances. Each side becomes a :class:`~.program.Program` at the case's concrete shapes:

- an artifact: its program specialized to the inputs' shapes as ``--runtime iree`` specializes it
  (``buckets.specialize.static_module``, locations kept), its bound weights as arguments;
- the live function: lowered by ``jax.jit`` at the same shapes (``LiveFunction.lowered``), its weights as arguments;

then :class:`~.search.Localizer` finds the operation to blame, :func:`.isolate.alone` runs it alone on both sides,
the error is followed from there to the outputs (the shortest chain of consumers, a few steps of it measured), and
``out`` gets the operation as a small artifact (:func:`.isolate.write`). Imports JAX only when it runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...artifact.model import Function
from ...errors import UsageError, VerificationError
from ...run.buckets.specialize import static_module
from ...run.jax_backend import JaxBackend
from ...tolerance import compare
from ..live import LiveFunction
from . import DEFAULT_TAP_BYTES, isolate
from .align import align
from .program import Program, Session, ValueRef
from .report import GrowthRow, LocalizeReport
from .runtimes import IreeRuntime, Runtime, XlaRuntime
from .search import Block, Localizer, Side

#: Steps of the chain from the blamed operation to the outputs that the report measures.
GROWTH_STEPS = 6


@dataclass(frozen=True)
class SideSource:
    """One side as ``verify`` ran it: its label, what it is, what its program comes from (a ``Loaded`` run by JAX,
    or a ``LiveFunction``), the runtime (``xla`` or ``iree``) and platform it runs on, and the directories its
    source paths are relative to."""

    label: str
    shown: str
    source: Any
    runtime: str
    platform: str
    roots: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class Options:
    """How to compare and how far to look: the tolerances (None: by dtype), whether two compilers are compared
    (their magnitude-scaled rule), the bytes a run taps on each side, where to write the blamed operation, and a
    progress callback."""

    atol: float | None = None
    rtol: float | None = None
    two_compilers: bool = False
    budget: int = DEFAULT_TAP_BYTES
    #: With two compilers: the program's lowest-precision float type, whose tolerances wider values take
    #: (``tolerance.tolerance``).
    computed_in: str | None = None
    out: str | Path | None = None
    progress: Callable[[str], None] | None = None


def localize_case(actual: SideSource, expected: SideSource, function: str, f: Function, arrays: Mapping[str, Any],
                  *, case: str, dims: Mapping[str, int], options: Options,
                  expected_function: Function | None = None) -> LocalizeReport:
    """Where ``actual`` and ``expected`` part on the inputs ``arrays`` (named by the inputs of ``f``, the manifest
    entry of ``function``; see the module docstring). ``expected_function``: the manifest entry of another artifact's
    function (its inputs are taken by name)."""
    start = time.perf_counter()
    session = Session()
    report = LocalizeReport(actual.label, expected.label, actual.shown, expected.shown, function, actual.platform,
                            case, dict(dims), outputs_agree=False, tap_budget_bytes=options.budget)
    report.source_side = next((s.label for s in (expected, actual) if isinstance(s.source, LiveFunction)),
                              actual.label)
    made: dict[int, tuple[Program, list[Any]]] = {}
    # The live function's weights are those the artifact stores (``live.same_weights`` checked it): the artifact's,
    # already on the device, serve both sides, rather than a second copy.
    backend = getattr(actual.source, "backend", None)
    stored = dict(zip(f.weights, backend.weights)) if isinstance(backend, JaxBackend) else {}

    def side(s: SideSource, fn: Function) -> Side:
        if id(s.source) not in made:
            made[id(s.source)] = _program(session, s, fn, arrays, stored)
        program, args = made[id(s.source)]
        runtime: Runtime = IreeRuntime(session) if s.runtime == "iree" else XlaRuntime(session, s.platform)
        return Side(s.label, s.shown, program, runtime, args, s.roots)

    if options.progress:
        options.progress("localizing: lowering both sides")
    x = side(actual, f)
    y = side(expected, expected_function or f)
    if len(x.program.returns) != len(y.program.returns):
        raise VerificationError(f"cannot localize: {x.label}'s program returns {len(x.program.returns)} values and "
                                f"{y.label}'s {len(y.program.returns)}.")

    def compared(name: str, e: Any, a: Any) -> Any:
        return compare(name, e, a, options.atol, options.rtol, allow_nonfinite=True,
                       across_compilers=options.two_compilers, computed_in=options.computed_in,
                       sides=(x.label, y.label))

    loc = Localizer(x, y, compared, options.budget, options.progress, report.source_side)
    corr = align(x.program, y.program)
    report.correspondence = corr.to_json()
    main = Block(x.program, y.program, x.args, y.args, corr,
                 arg_names=[f"bound tensor {n!r}" for n in f.weights] + [f"input {n!r}" for n in f.input_names])
    outputs = loc.run(main, [], [], "the outputs")
    names = f.output_names if len(f.output_names) == len(outputs.base_x) else \
        [str(k) for k in range(len(outputs.base_x))]
    report.outputs = [loc.measure(f"output {n!r}", _type(x.program, r), e, a)
                      for n, r, e, a in zip(names, x.program.returns, outputs.base_y, outputs.base_x)]
    del outputs
    if not any(m.departs for m in report.outputs):
        report.outputs_agree = True
        report.notes.append("the outputs agree within the tolerances when both sides run the localizer's programs")
    else:
        report.blame = loc.localize(main)
        if report.blame is not None:
            report.growth = _growth(loc, main, report)
            if loc.suspect is not None:
                found, inputs, out_y, out_x = isolate.alone(loc, loc.suspect)
                report.blame.alone = found
                if options.out is not None:
                    platforms = [y.runtime.platform, x.runtime.platform]
                    isolate.write(options.out, report, loc.suspect, loc, inputs, out_y, out_x, platforms)
            elif options.out is not None:
                report.notes.append("--localize-out: nothing was written: the blamed operation cannot run alone "
                                    "on both sides with the same inputs (it has no counterpart, or what it reads "
                                    "differs by construction)")
    report.notes += loc.notes
    report.runs = loc.runs
    report.largest_tap_bytes = loc.largest
    report.seconds = round(time.perf_counter() - start, 3)
    return report


def _type(program: Program, ref: ValueRef) -> str:
    t = program.value_type(ref)
    return t.text() if t is not None else "?"


def _program(session: Session, s: SideSource, f: Function, arrays: Mapping[str, Any],
             stored: Mapping[str, Any]) -> tuple[Program, list[Any]]:
    """A side's program at the inputs' shapes, and ``main``'s arguments (weights, then the inputs in ``f``'s
    order); a live function's weights are taken from ``stored`` (the artifact's, by name) where it has them."""
    import jax
    import numpy as np

    missing = [n for n in f.input_names if n not in arrays]
    if missing:
        raise VerificationError(f"cannot localize against {s.shown}: it takes input(s) {', '.join(missing)}, which "
                                f"the artifact does not.")
    inputs = [arrays[n] for n in f.input_names]
    structs = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in inputs]
    if isinstance(s.source, LiveFunction):
        data, names, weights = s.source.lowered(structs)
        weights = [stored.get(n, w) for n, w in zip(names, weights)]
        return session.program(data, s.label), [*weights, *inputs]
    backend = getattr(s.source, "backend", None)
    if not isinstance(backend, JaxBackend):
        raise UsageError(f"cannot localize against {s.shown}: it has no program to look inside.")
    data = static_module(backend, structs, fast=True)
    return session.program(data, s.label, refine=False), [*backend.weights, *inputs]


def _growth(loc: Localizer, block: Block, report: LocalizeReport) -> list[GrowthRow]:
    """The error along the shortest chain of consumers from the blamed operation (the loop around it, in ``main``)
    to an output: a few steps of it, measured in one run."""
    b = report.blame
    assert b is not None
    top = b.inside[0].op if b.inside else b.op(report.source_side)
    on_x = top.program == loc.actual.label
    program = block.x if on_x else block.y
    path = _path(program, top.index)
    if not path:
        return []
    steps = _sample(path, GROWTH_STEPS)
    by = block.corr.by_x if on_x else block.corr.by_y
    pairs = []
    for i in steps:
        k = by.get(i)
        row = block.corr.rows[k] if k is not None else None
        if row is None or not row.paired:
            continue
        assert row.x is not None and row.y is not None
        ox, oy = block.x.ops[row.x], block.y.ops[row.y]
        common = [j for j in ox.tensor_results() if j in oy.tensor_results()]
        if common:
            pairs.append((ox, oy, common))
    while len(pairs) > 2 and sum(max(ox.nbytes, oy.nbytes) for ox, oy, _ in pairs) > loc.budget:
        pairs.pop(len(pairs) // 2)
    run = loc.run(block, [ValueRef(ox.index, j) for ox, _, js in pairs for j in js],
                  [ValueRef(oy.index, j) for _, oy, js in pairs for j in js], "the error's growth")
    rows = []
    for ox, oy, js in pairs:  # a step with several results shows the one that departs most
        measured = [loc.measure(ox.short, ox.results[j].text(), run.y[ValueRef(oy.index, j)],  # type: ignore[union-attr]
                                run.x[ValueRef(ox.index, j)]) for j in js]
        m = max(measured, key=lambda m: (m.result.mismatched if m.result else 0,
                                         (m.result.max_abs_error or 0.0) if m.result else 0.0))
        where = ox.where.relative(loc.actual.roots) if on_x else oy.where.relative(loc.expected.roots)
        rows.append(GrowthRow(ox.where.primitive or ox.short, where.shown(), m))
    for m in report.outputs:
        rows.append(GrowthRow(m.what, "", m))
    return rows


def _path(program: Program, start: int) -> list[int]:
    """The shortest chain of operations from ``start`` through their consumers to one whose result ``main``
    returns (breadth first, in program order); empty when none leads there."""
    returned = {r.op for r in program.returns if r.op is not None}
    consumers = program.consumers()
    parent: dict[int, int | None] = {start: None}
    queue = [start]
    for i in queue:
        if i in returned:
            chain = [i]
            while parent[chain[-1]] is not None:
                chain.append(parent[chain[-1]])  # type: ignore[arg-type]
            return chain[::-1]
        for c in consumers.get(i, []):
            if c not in parent:
                parent[c] = i
                queue.append(c)
    return []


def _sample(path: list[int], n: int) -> list[int]:
    """At most ``n`` steps of ``path``, evenly spread, its first and last kept."""
    if len(path) <= n:
        return path
    picks = {path[0], path[-1]} | {path[round(k * (len(path) - 1) / (n - 1))] for k in range(n)}
    return [i for i in path if i in picks]



def agreeing(actual: str, expected: str, function: str, platform: str, why: str) -> LocalizeReport:
    """The report of a localization with nothing to localize: no case's outputs differ (``why`` says so)."""
    return LocalizeReport(actual, expected, actual, expected, function, platform, "", {}, outputs_agree=True,
                          notes=[f"{why}: nothing was localized"])
