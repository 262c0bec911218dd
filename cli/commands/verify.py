"""``jaxport verify``: the artifact against the live function it was exported from, stored reference outputs, or
the other runtime."""

from __future__ import annotations

import click

from jaxport.frontend import plural

from .. import errors, render
from ..bounds import size_bytes
from ..devices import apply, device_options
from ..files import NamesFiles
from ..options import (
    INPUT_FILES,
    bind_root_options,
    complete_platforms,
    debug_option,
    dim_option,
    expect_option,
    inputs_option,
    json_option,
    load_options,
    platform_option,
    range_option,
    seed_option,
    shapes_option,
    tolerance_options,
)
from ..progress import Stages
from ..progress import enabled as progress_lines
from ..render import escape, plain


@click.command("verify")
@click.argument("artifact", type=click.Path())
@click.option("--against", type=NamesFiles(), metavar="FILE.py:NAME",
              help="The live function (default: the entry point the artifact records, a file under --root).")
@shapes_option("A spec that must describe the artifact's signature (default: the spec the artifact records, when it "
               "is found under --root).")
@bind_root_options(
    bind_help="Load bound argument NAME of the live function from SOURCE (.npz, .safetensors, .npy or model.py:ATTR) "
              "instead of the source the artifact records; repeatable.",
    root_help="The directory the entry point, spec and bound sources the artifact records are relative to (default: "
              "the current directory). Recorded paths outside it are refused.")
@inputs_option(f"Verify on these inputs (one case) instead of random ones, as 'call' takes them: {INPUT_FILES} "
               f"(e.g. from 'call --save-inputs'). Repeatable.")
@expect_option("Compare the outputs for --inputs with reference outputs: an .npz or .safetensors keyed by output "
               "name, as 'call -o' writes them (or an .npy for a single output). No live function is needed; with "
               "--against, both are compared.")
@dim_option("Values of a dimension variable to verify at (e.g. batch=1,7,128); repeatable. Several "
            "variables: every combination.")
@range_option
@platform_option
@tolerance_options()
@seed_option(0, "Seed of the random inputs.")
@load_options(omit=("allow_platform_mismatch", "verify_weights", "cache_dir", "cache"), help={
    "runtime": "iree: compare the artifact run by IREE with the same artifact run by JAX (XLA), with the tolerances "
               "for two compilers (no live function)."})
@click.option("--against-artifact", type=click.Path(), metavar="OTHER.jaxport",
              help="Compare with another artifact of the same signature (an older version, or the original of an "
                   "upgraded one), as side 'other', instead of the live function.")
@click.option("--against-platform", metavar="NAME", shell_complete=complete_platforms,
              help="Compare with the same artifact run on platform NAME (e.g. cpu), with the tolerances for two "
                   "compilers.")
@click.option("--localize", is_flag=True,
              help="On the first case whose outputs differ, find the first operation whose results depart while its "
                   "operands agree: its StableHLO operation, JAX primitive and source line.")
@click.option("--localize-out", type=click.Path(), metavar="DIR",
              help="With --localize: write that operation alone into DIR, as an artifact with its recorded inputs and "
                   "both sides' outputs (for a bug report).")
@click.option("--localize-budget", metavar="SIZE", callback=lambda ctx, param, value: _size(ctx, param, value),
              help="With --localize: at most SIZE of intermediate values per run on each side (default 64M).")
@device_options
@json_option
@debug_option
def command(artifact, spec_path, items, platforms, devices, as_json, debug, **options):
    """Compare an artifact with its live function, golden outputs or XLA.

    The cases are assignments of the dimension variables chosen from the bounds and constraints (smallest valid
    values, a value that is not a power of two, the upper bound or a large value), each kept under 64 MB of inputs
    and outputs; --dim chooses them instead, --inputs gives the inputs of one case. --expect compares with stored
    reference outputs, --against-artifact another artifact, --against-platform another platform. --localize
    names the first operation where the first differing case's sides part, and its source line. Exits with 12 when
    an output differs beyond its tolerance, is NaN/Inf everywhere on both sides (unless --allow-nonfinite), or the
    spec does not describe the artifact.

    \b
    Examples:
      jaxport verify mlp.jaxport
      jaxport verify mlp.jaxport --dim batch=1,7,4096 --localize --json
      jaxport verify mlp.jaxport --inputs in.npz --expect out.npz
    """
    from jaxport.errors import UsageError
    from jaxport.verify.request import VerifyRequest

    if options.get("localize_budget") is None:
        options.pop("localize_budget", None)
    with errors.usage_errors():
        request = VerifyRequest(artifact, spec=spec_path, inputs=list(items) or None,
                                platforms=[p.lower() for p in platforms] or None,
                                module_dir=_module_dir(options["load"]), **options)
        if devices.distributed:
            raise UsageError("verify runs in one process: --coordinator, --num-processes and --process-id are for "
                             "'call'. Simulate the devices of a sharded artifact with --host-devices N.")

    def body():
        apply(devices)  # before JAX starts
        from jaxport.errors import VerificationError
        from jaxport.verify.runner import verify_by

        run = lambda progress: verify_by(request, progress=progress)  # noqa: E731
        if as_json:
            report = run(None)
            render.print_json(report.as_dict())
        else:
            report = _with_progress(run)
            _render(report)
        if not report.passed:
            errors.fail_after_result(VerificationError(report.summary()))

    errors.run(body, debug=debug, as_json=as_json)


def _module_dir(load):
    """Where a runtime that compiles on its own (IREE) keeps its modules: --module-dir, else beside JAX's
    compilation cache."""
    from jaxport.run.cache import default_cache_dir

    return load.module_directory(default_cache_dir())


def _with_progress(run):
    """Run with a progress bar over the cases on stderr when stderr is a terminal; on a pipe or a file (a CI log),
    one line per stage instead (``progress``): the preparation, then each case as it ends."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = render.stderr()
    if not console.is_terminal:
        if not progress_lines(False):
            return run(None)
        with Stages(True) as stages:
            stages("preparing the cases")
            starting = [True]  # the runner reports each case as it starts, then as it ends

            def line(done, total, description):
                if description.startswith("localizing"):  # the localization's stages, within a case
                    stages(description)
                    return
                if starting[0]:
                    stages(f"case {done + 1}/{total}: {description}")
                starting[0] = not starting[0]

            return run(line)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("Loading...", total=None)

        def update(done, total, description):
            progress.update(task, completed=done, total=total, description=escape(description))

        return run(update)


def _number(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def _render(report):
    from rich.table import Table

    from jaxport.tolerance import NONFINITE
    from jaxport.verify.report import failing
    from jaxport.verify.request import JAX_SIDE

    out = render.stdout()
    for note in report.notes:
        out.print(f"[yellow]note:[/] {escape(note)}")
    if report.spec:
        if report.spec_differences:
            out.print(f"[red]spec {escape(report.spec)} does not describe the artifact:[/]")
            for d in report.spec_differences:
                out.print(f"  - {plain(d)}", markup=False)
        else:
            out.print(f"spec {escape(report.spec)}: describes the artifact's signature")
    fixes = []
    for plan in report.functions:
        who = f" ({escape(plan.actual)})" if plan.actual != "artifact" else ""
        against = f"{plan.sides[0]} ({plan.against})" if plan.sides == [JAX_SIDE] else plan.against
        out.print(f"[bold cyan]{escape(plan.name)}[/]{who} against {escape(against)} on "
                  f"{escape(', '.join(plan.platforms))}")
        t = Table(show_edge=False)
        for col in ("platform", "case", "dims", "output", "max abs err", "max rel err", "tolerance", "result"):
            t.add_column(col, justify="right" if col.startswith("max") else "left")
        for c in [c for c in report.cases if c.function == plan.name]:
            dims = ", ".join(f"{k}={v}" for k, v in c.dims.items()) or "-"
            label = escape(c.label) + (f" [dim]({escape(c.note)})[/]" if c.note else "")
            if c.error:
                t.add_row(escape(c.platform), label, escape(dims), "-", "-", "-", "-",
                          f"[red]FAIL[/] {escape(c.error)}")
                continue
            for o in c.outputs:
                magnitude = f"max(|x|, {o.scale:.3g})" if o.scale is not None else "|x|"
                tol = f"{o.atol:g} + {o.rtol:g}·{magnitude}"
                if o.problem:
                    result = f"[red]FAIL[/] {escape(o.problem)}"
                elif o.mismatched:
                    result = f"[red]FAIL[/] {o.mismatched}/{o.size} values"
                elif o.inconclusive and not o.passed:
                    result = f"[red]INCONCLUSIVE[/] {NONFINITE}"
                    fixes.append(o.inconclusive)
                elif o.inconclusive:
                    result = "[yellow]ok[/] (all NaN/Inf, allowed)"
                else:
                    result = "[green]ok[/]"
                name = escape(o.name) + (f" [dim]vs {escape(o.sides[1])}[/]" if len(plan.sides) > 1 else "")
                t.add_row(escape(c.platform), label, escape(dims), name, _number(o.max_abs_error),
                          _number(o.max_rel_error), tol, result)
        out.print(t)
    if fixes:
        out.print(f"[yellow]inconclusive:[/] {escape(fixes[0])}.")
    if report.localized is not None:
        _render_localized(out, report.localized)
    failed = report.failures()
    if report.passed:
        n = len(report.cases)
        out.print(f"[green]OK[/]: {plural(n, 'case')} match{'es' if n == 1 else ''}.")
    elif failed:
        out.print(f"[red]FAILED[/]: {failing(failed, len(report.cases))}.")


def _size(ctx, param, value):
    """``--localize-budget``: a size such as 64M, 1G or 1048576 (bytes), at least one byte."""
    if value is None:
        return None
    size = size_bytes(value)
    if not 1 <= size <= 1 << 50:  # NaN too
        raise click.BadParameter(f"{value!r} is not a size such as 64M, 1G or 1048576.", ctx, param)
    return int(size)


def _render_localized(out, loc):
    """The localization: the operation blamed, its errors, whether it departs alone, and the error's growth."""
    from rich.table import Table

    out.print()
    case = ", ".join(f"{k}={v}" for k, v in loc.dims.items()) or "fixed shapes"
    if loc.case:
        out.print(f"[bold]localize[/]: {escape(loc.actual)} ({escape(loc.actual_shown)}) against "
                  f"{escape(loc.expected)} ({escape(loc.expected_shown)}), {escape(loc.function)} on "
                  f"{escape(loc.platform)} at {escape(case)} ({escape(loc.case)})")
    else:
        out.print("[bold]localize[/]:")
    if loc.correspondence:
        out.print(f"  operations: {escape(loc.correspondence['text'])}")
    b = loc.blame
    if b is not None:
        op = loc.op()
        out.print(f"  [red]blamed[/]: {escape(op.named())} at [bold]{escape(op.where.shown())}[/]")
        out.print(f"          {escape(op.types())}" + (f"  [dim]({escape(op.program)}'s program)[/]"
                                                       if not loc.correspondence or
                                                       not loc.correspondence["same_program"] else ""))
        other = b.expected if op is b.actual else b.actual
        if other is not None:
            out.print(f"          in {escape(other.program)}'s program: {escape(other.named())} at "
                      f"{escape(other.where.shown())}")
        for step in b.inside:
            out.print(f"  inside: {escape(step.shown())}")
        if b.cause:
            out.print(f"  why:    {escape(b.cause)}")
        for m in b.results:
            out.print(f"  error:  {escape(m.what)} {escape(m.type)}: {escape(m.error_text())}")
        for m in b.operands:
            out.print(f"          {escape(m.what)} {escape(m.type)}: {escape(m.error_text())}")
        if b.consequence:
            out.print(f"  then:   {escape(b.consequence)}")
        if b.alone is not None:
            worst = "; ".join(m.error_text() for m in b.alone.results if m.result is not None)
            out.print(f"  alone:  [bold]{escape(b.alone.verdict)}[/] ({escape(b.alone.compared)} on "
                      f"{escape(b.alone.inputs_from)}'s recorded inputs: {escape(worst)})")
        if loc.growth:
            t = Table(show_edge=False, title="the error from there to the outputs", title_justify="left")
            for col in ("step", "where", "max abs err", "max rel err", "values outside"):
                t.add_column(col, justify="right" if col.startswith(("max", "values")) else "left")
            for g in loc.growth:
                r = g.measured.result
                t.add_row(escape(g.label), escape(g.where), _number(r.max_abs_error if r else None),
                          _number(r.max_rel_error if r else None), f"{r.mismatched}/{r.size}" if r else "-")
            out.print(t)
    if loc.written:
        out.print(f"  written: {escape(loc.written['directory'])} ({escape(', '.join(loc.written['files']))})")
    for note in loc.notes:
        out.print(f"  [yellow]note:[/] {escape(note)}")
    out.print(f"  {escape(loc.summary())}")
