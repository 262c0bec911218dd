"""``jaxport verify``: the artifact against the live function it was exported from."""

from __future__ import annotations

import click

from .. import errors, render
from ..options import (
    allow_custom_call_option,
    debug_option,
    dim_values_option,
    finite_float,
    function_option,
    json_option,
    platform_option,
    seed_option,
)
from ..render import escape, plain


@click.command("verify")
@click.argument("artifact", type=click.Path())
@click.option("--against", metavar="FILE.py:NAME",
              help="The live function (default: the entry point the artifact records, a file under --root).")
@click.option("--shapes", "-s", "spec_path", type=click.Path(),
              help="A spec that must describe the artifact's signature (default: the spec the artifact records, "
                   "when it is found under --root).")
@click.option("--root", type=click.Path(file_okay=False), metavar="DIR",
              help="The directory the entry point, spec and bound sources the artifact records are relative to "
                   "(default: the current directory). Recorded paths outside it are refused.")
@click.option("--bind", "binds", multiple=True, metavar="NAME=SOURCE",
              help="Load bound argument NAME of the live function from SOURCE (.npz, .safetensors, .npy or "
                   "model.py:ATTR) instead of the source the artifact records; repeatable.")
@function_option
@dim_values_option
@platform_option
@click.option("--atol", type=click.FloatRange(min=0), callback=finite_float,
              help="Absolute tolerance for every output (default: by dtype).")
@click.option("--rtol", type=click.FloatRange(min=0), callback=finite_float,
              help="Relative tolerance for every output (default: by dtype).")
@seed_option(0, "Seed of the random inputs.")
@click.option("--runtime", "runtime_name", type=click.Choice(["jax", "iree"]), default="jax", show_default=True,
              help="iree: compare the artifact run by IREE with the same artifact run by JAX (no live function).")
@allow_custom_call_option
@json_option
@debug_option
def command(artifact, against, spec_path, root, binds, function, dims, platforms, atol, rtol, seed, runtime_name,
            allow_custom_calls, as_json, debug):
    """Run an artifact and the live function on the same inputs; compare.

    The cases are assignments of the dimension variables chosen from the bounds and constraints (smallest valid
    values, a value that is not a power of two, the upper bound or a large value), each kept under 64 MB of inputs
    and outputs; --dim chooses them instead. Exits with 12 when an output differs beyond its tolerance or the spec
    does not describe the artifact.
    """

    bound = {}
    for item in binds:
        key, sep, source = item.partition("=")
        if not sep or not key or not source:
            raise click.BadParameter(f"{item!r}: expected NAME=SOURCE, e.g. params=weights.npz.", param_hint="--bind")
        bound[key] = source

    def body():
        from jaxport.errors import VerificationError
        from jaxport.verify import runner as verify

        run = lambda progress: verify.verify(  # noqa: E731
            artifact, against, spec_path, function=function, dims=dims or None,
            platforms=[p.lower() for p in platforms] or None, atol=atol, rtol=rtol, seed=seed, progress=progress,
            runtime=runtime_name, cache_dir=_iree_cache() if runtime_name == "iree" else None, root=root,
            binds=bound, allow_custom_calls=allow_custom_calls)
        if as_json:
            report = run(None)
            render.print_json(report.as_dict())
        else:
            report = _with_progress(run)
            _render(report)
        if not report.passed:
            errors.fail_after_result(VerificationError(report.summary()))

    errors.run(body, debug=debug, as_json=as_json)


def _iree_cache():
    from jaxport.run.cache import default_cache_dir
    from jaxport.run.iree import iree_cache_dir

    return iree_cache_dir(default_cache_dir())


def _with_progress(run):
    """Run with a progress bar over the cases on stderr, when stderr is a terminal (CI logs stay clean)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = render.stderr()
    if not console.is_terminal:
        return run(None)
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
    for plan in report.functions:
        out.print(f"[bold cyan]{escape(plan.name)}[/] against {escape(plan.against)} on "
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
                tol = f"{o.atol:g} + {o.rtol:g}·|x|"
                if o.passed:
                    result = "[green]ok[/]"
                elif o.problem:
                    result = f"[red]FAIL[/] {escape(o.problem)}"
                else:
                    result = f"[red]FAIL[/] {o.mismatched}/{o.size} values"
                t.add_row(escape(c.platform), label, escape(dims), escape(o.name), _number(o.max_abs_error),
                          _number(o.max_rel_error), tol, result)
        out.print(t)
    failed = report.failures()
    if report.passed:
        out.print(f"[green]OK[/]: {len(report.cases)} case{'s' if len(report.cases) != 1 else ''} match.")
    elif failed:
        out.print(f"[red]FAILED[/]: {len(failed)} of {len(report.cases)} cases differ.")
