"""``jaxport diff``: what changed between two artifacts, and whether callers of the old one may break."""

from __future__ import annotations

import click

from .. import errors, render
from ..options import debug_option, json_option
from ..render import escape, plain


@click.command("diff")
@click.argument("old", type=click.Path())
@click.argument("new", type=click.Path())
@click.option("--fail-on", type=click.Choice(["breaking", "any", "never"]), default="never", show_default=True,
              help="Exit with 13 when a breaking change (breaking) or any difference (any) is found.")
@click.option("--no-programs", is_flag=True,
              help="Do not compare the programs' StableHLO (no JAX); differing payloads are reported as such.")
@json_option
@debug_option
def command(old, new, fail_on, no_programs, as_json, debug):
    """Compare two artifacts; classify each difference as breaking or not.

    Breaking: callers of OLD may fail with NEW (an input removed, renamed or added, a dtype, rank or constant
    dimension changed, fewer shapes accepted, an output, platform or function removed, a new custom call JAX does
    not guarantee stable). Compatible: everything else (more shapes accepted, additions, metadata, weights with the
    same shapes, the program changed behind the same signature).
    """

    def body():
        from jaxport.artifact.diff import diff
        from jaxport.errors import DiffError

        report = diff(old, new, programs=not no_programs)
        if as_json:
            render.print_json(report.as_dict(fail_on))
        else:
            _render(report)
        if report.fails(fail_on):
            what = "breaking changes" if fail_on == "breaking" else "differences"
            errors.fail_after_result(DiffError(f"{report.summary()} Failing on {what} (--fail-on {fail_on})."))

    errors.run(body, debug=debug, as_json=as_json)


def _render(report):
    from rich.table import Table

    out = render.stdout()
    if report.changes:
        t = Table(show_edge=False)
        for col in ("severity", "function", "kind", "change"):
            t.add_column(col)
        for c in sorted(report.changes, key=lambda c: c.severity != "breaking"):
            style = "red" if c.severity == "breaking" else "green"
            t.add_row(f"[{style}]{escape(c.severity)}[/]", escape(c.function or "-"), escape(c.kind), escape(c.message))
        out.print(t)
    for fname, p in report.programs.items():
        out.print(f"program {plain(fname)}: {plain(p.status)}", markup=False)
    out.print(plain(report.summary()), markup=False)
