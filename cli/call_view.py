"""How ``jaxport call`` shows a ``CallReport`` (``jaxport.run.calls.report.CallReport``) as text: the timing line, the
output statistics, printed values, the benchmark, what was written, and the ``--expect`` comparison, each read from
the report (what ``--json`` prints); and the spinner and progress bar shown while a call runs on a terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import render
from .render import escape, plain

if TYPE_CHECKING:
    from jaxport.run.backend import Placement
    from jaxport.run.calls.expect import Expectation
    from jaxport.run.values.outputs import Stats

#: Outputs with at most this many values are printed by --print.
PRINT_LIMIT = 1000


def seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} µs"


def _number(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.6g}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def show(report: Any, print_values: bool) -> None:
    """Print ``report`` as ``call`` does without ``--json``: warnings on stderr, the rest on stdout."""
    for w in report.all_warnings:
        render.stderr().print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
    if report.vjp is not None:
        _derivative(report)
    elif report.streaming is not None:
        _streamed(report)
    else:
        _document(report, print_values).print()
    if report.saved_inputs:
        render.stdout().print(f"[green]Wrote[/] {escape(report.saved_inputs)} ({_count(len(report.inputs), 'input')})")
    if report.expect is not None:
        expectation(report.expect)


def _timing_line(report: Any) -> list[Any]:
    """The first line of a call's report, as spans: ``NAME on PLATFORM[ with IREE]  DIMS  load ..., run ...``; a
    compiled module's call (compiled ahead of time: no lowering or compilation) says what it padded instead."""
    dims = ", ".join(f"{k}={v}" for k, v in report.dims.items())
    t = report.timings
    hit = t.compile_cache_hit
    cached = " (a shipped executable)" if t.executable == "shipped" else " (from the compilation cache)" if hit \
        else " (now cached)" if hit is False else ""
    via = " with IREE" if report.runtime == "iree" else ""
    spans: list[Any] = [(report.function, "bold cyan"), f" on {report.platform}{via}"]
    if dims:
        spans += ["  ", (dims, "dim")]
    if report.padded:
        spans.append("  (" + "; ".join(f"{v} padded from {n} to {bucket}" for v, (n, bucket) in report.padded.items())
                     + ")")
    compiled = f", lower {seconds(t.lower_s)}, compile {seconds(t.compile_s)}{cached}" \
        if t.lower_s or t.compile_s or hit is not None else ""
    spans.append(f"  load {seconds(t.load_s)}{compiled}, run {seconds(t.run_s)}")
    return spans


#: The benchmark table's columns (the report's ``benchmark``: ``load_s``, ``lower_s``, ...).
BENCHMARK_COLUMNS = ("load", "lower", "compile", "p50", "p90", "p99", "min", "max", "pipelined")
#: What the benchmark's figures time, printed under its table.
BENCHMARK_SAYS = ("p50 ... max: each call alone, inputs already on the device, outputs left there, waited for; "
                  "pipelined: per call, the same calls dispatched back to back with one wait at the end; "
                  "executable: {source}.")


def _document(report: Any, print_values: bool) -> render.Document:
    """A call's report as a ``render.Document``: plain text where that is what rich would print (the common case:
    rich is not imported), else drawn by rich (a row in red for NaN or Inf, a table wider than the terminal)."""
    doc = render.Document()
    doc.line(*_timing_line(report))
    if report.devices:
        doc.line(_devices_text(report.devices))
    output_stats = report.output_stats()
    doc.table(_stats("outputs", output_stats))
    if print_values:
        import numpy as np

        for s, (name, value) in zip(output_stats, report.leaves):
            if s.size <= PRINT_LIMIT:
                doc.line(f"{name} =")
                doc.line(np.array2string(np.asarray(value), threshold=PRINT_LIMIT, max_line_width=120))
            else:
                doc.line(f"{name}: {s.size} values, more than --print shows ({PRINT_LIMIT}); write them with -o.")
    if report.benchmark:
        b = report.benchmark
        table = render.Table(f"benchmark ({_count(b.n, 'call')} after {b.warmup} warm-up)", BENCHMARK_COLUMNS,
                             right=BENCHMARK_COLUMNS)
        table.add_row(*(seconds(v) if v is not None else "-"  # a compiled module's calls: each returns its result
                        for v in (b.load_s, b.lower_s, b.compile_s, b.p50_s, b.p90_s, b.p99_s, b.min_s, b.max_s,
                                  b.pipelined_s)))
        doc.table(table)
        doc.line(BENCHMARK_SAYS.format(source=b.executable))
        if b.host_p50_s is not None:
            doc.line(f"host to host (inputs from host memory, outputs copied back): p50 {seconds(b.host_p50_s)}, "
                     f"p99 {seconds(b.host_p99_s)}")
    if report.output_file:
        doc.line(("Wrote", "green"), f" {report.output_file} ({_count(len(report.outputs), 'array')})")
    return doc


def _stats(title: str, stats: list[Stats]) -> render.Table:
    """The statistics of arrays (outputs, cotangents) as a table; a row with NaN or Inf is red."""
    right = ("min", "max", "mean", "NaN", "Inf")
    table = render.Table(title, ("name", "shape", "dtype", *right), right=right)
    for s in stats:
        table.add_row(s.name, str(tuple(s.shape)), s.dtype, _number(s.min), _number(s.max), _number(s.mean),
                      str(s.nan), str(s.inf), style="red" if s.nan or s.inf else "")
    return table


def _stats_table(out: Any, title: str, stats: list[Stats]) -> None:
    doc = render.Document()
    doc.table(_stats(title, stats))
    doc.render_rich(console=out)


def _devices_text(placement: Placement) -> str:
    return (f"sharded over {placement.devices} devices ({plain(placement.mesh)})"
            + (f", process {placement.process_index} of {placement.process_count}"
               if placement.process_count > 1 else ""))


def _derivative(report: Any) -> None:
    """``call --vjp``: the outputs and the input cotangents."""
    section = report.vjp
    out = render.stdout()
    out.print(f"[bold cyan]{escape(report.function)}[/] on {escape(report.platform)} with its derivative "
              f"(output cotangents: {escape(section.cotangents_of_outputs)}), {seconds(report.timings.run_s)}")
    _stats_table(out, "outputs", report.output_stats())
    _stats_table(out, "input cotangents", section.cotangents)
    if section.not_differentiable:
        out.print(f"no cotangent for {plain(', '.join(section.not_differentiable))} (not floating point)",
                  markup=False)
    if report.output_file:
        out.print(f"[green]Wrote[/] {escape(report.output_file)} ({_count(len(section.cotangents), 'cotangent')})")


def _streamed(report: Any) -> None:
    """``call --batch-size``: rows, chunks, compilations and throughput."""
    s = report.streaming
    out = render.stdout()
    out.print(f"[bold cyan]{escape(report.function)}[/] on {escape(report.platform)}: {s.rows} rows in "
              f"{_count(s.chunks, 'chunk')} of {s.batch_size} ({_count(s.compilations, 'compilation')}), "
              f"{seconds(s.seconds)}, {s.rows_per_second:,.0f} rows/s")
    _stats_table(out, "outputs", report.output_stats())
    if report.output_file:
        out.print(f"[green]Wrote[/] {escape(report.output_file)} ({_count(len(report.outputs), 'array')})")


def expectation(expect: Expectation) -> None:
    """The ``--expect`` comparison (the report's ``expect`` section) as a table, like ``verify``'s: one row per
    output, then the verdict."""
    from rich.table import Table

    out = render.stdout()
    t = Table(title=f"expected: {escape(expect.reference)}", title_justify="left", show_edge=False)
    for col in ("output", "max abs err", "max rel err", "tolerance", "result"):
        t.add_column(col, justify="right" if col.startswith("max") else "left")
    for o in expect.outputs:
        if o.problem:
            result = f"[red]FAIL[/] {escape(o.problem)}"
        elif o.mismatched:
            result = f"[red]FAIL[/] {o.mismatched}/{o.size} values"
        elif o.inconclusive:
            result = ("[yellow]inconclusive[/] (allowed)" if o.passed else "[red]FAIL[/] inconclusive") + \
                f": {escape(o.inconclusive)}"
        else:
            result = "[green]ok[/]"
        t.add_row(escape(o.name), _short(o.max_abs_error), _short(o.max_rel_error), escape(o.tolerance_text("|x|")),
                  result)
    out.print(t)
    word = "[green]OK[/]" if expect.passed else "[red]FAILED[/]"
    out.print(f"{word}: {escape(expect.verdict())}.")


def _short(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}"


class Busy:
    """The spinner of a call on a terminal: its text follows the stages ``jaxport.run.calls.calling.call`` reports
    (rich is imported only where a spinner shows); :meth:`rows` shows a streamed call's progress bar instead."""

    def __init__(self, shown: bool, batch_size: int | None = None):
        self.shown = shown
        self.batch_size = batch_size
        self._status: Any = None
        self._bar: Any = None
        self._task: Any = None
        self._start = 0.0

    def stage(self, text: str) -> None:
        if not self.shown or self._bar is not None:
            return
        if self._status is None:
            self._status = render.stderr().status(escape(text), spinner="dots")
            self._status.start()
        else:
            self._status.update(escape(text))

    def rows(self, done: int, total: int | None) -> None:
        if not self.shown:
            return
        import time

        if self._bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._stop_status()
            columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("rows, {task.fields[rate]}"), TimeRemainingColumn()]
            self._bar = Progress(*columns, console=render.stderr(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(f"in chunks of {self.batch_size}", total=None, rate="-")
            self._start = time.perf_counter()
        elapsed = time.perf_counter() - self._start
        self._bar.update(self._task, completed=done, total=total,
                         rate=f"{done / elapsed:,.0f} rows/s" if elapsed > 0 else "-")

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __enter__(self) -> Busy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop_status()
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
