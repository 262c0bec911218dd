"""``jaxport diff``: what changed between two artifacts, and whether callers of the old one may break."""

from __future__ import annotations

import click

from .. import errors, render
from ..options import debug_option, json_option
from ..render import escape, plain


@click.command("diff")
@click.argument("old", type=click.Path())
@click.argument("new", type=click.Path())
@click.option("--fail-on", type=click.Choice(["breaking", "rebind", "any", "never"]), default="never",
              show_default=True,
              help="Exit with 13 when a change may break the artifact's callers (breaking: a breaking or undecided "
                   "change), its callers or those who rebind its weights (rebind: a bound tensor's layout too), or "
                   "anything differs (any).")
@click.option("--no-programs", is_flag=True,
              help="Do not compare the programs' StableHLO (no JAX); differing payloads are reported as such.")
@click.option("--rename", "renames", multiple=True, metavar="OLD=NEW",
              help="Compare function OLD of the first artifact with function NEW of the second, instead of "
                   "reporting one removed and one added; repeatable.")
@json_option
@debug_option
def command(old, new, fail_on, no_programs, renames, as_json, debug):
    """Compare two artifacts; classify each difference as breaking, undecided or compatible.

    Breaking: callers of OLD may fail with NEW (an input removed, renamed or added, a dtype, rank, weak type or
    constant dimension changed, fewer shapes or values accepted, an output, platform or function removed, a new
    custom call JAX does not guarantee stable). Compatible: everything else (more shapes accepted, additions,
    metadata, new weights, the program changed behind the same signature); a bound tensor added, removed or
    reshaped is compatible for callers and breaks rebinding (--fail-on rebind fails on it). Undecided: a bound or
    constraint change jaxport could not prove either way; --fail-on breaking counts it as breaking (exit 13), and
    says that it is undecided, not proven breaking.

    \b
    Examples:
      jaxport diff mlp.jaxport mlp-bound.jaxport --rename predict=apply
      jaxport diff mlp.jaxport mlp-bound.jaxport --rename predict=apply --fail-on rebind --json
    """
    pairs = _renames(renames)

    def body():
        from jaxport.artifact.diff import diff
        from jaxport.errors import DiffError

        report = diff(old, new, programs=not no_programs, renames=pairs)
        if as_json:
            render.print_json(report.as_dict(fail_on))
        else:
            _render(report)
        if report.fails(fail_on):
            what = {"breaking": "breaking changes", "rebind": "changes that break callers or rebinding"}.get(
                fail_on, "differences")
            note = ""
            if fail_on in ("breaking", "rebind") and report.undecided:
                n = len(report.undecided)
                note = (f"; {'the' if n == 1 else 'its'} {n} undecided change{'s count' if n != 1 else ' counts'} as "
                        f"breaking: not proven breaking, only not proven compatible")
            errors.fail_after_result(DiffError(f"{report.summary()} Failing on {what} (--fail-on {fail_on}){note}."))

    errors.run(body, debug=debug, as_json=as_json)


def _renames(values):
    """``{OLD: NEW}`` from the ``--rename OLD=NEW`` options."""
    out = {}
    for value in values:
        o, eq, n = value.partition("=")
        if not eq or not o or not n:
            raise click.UsageError(f"--rename expects OLD=NEW (two function names), got {value!r}.")
        if o in out:
            raise click.UsageError(f"--rename {o}=...: function {o!r} is renamed twice; give it once.")
        out[o] = n
    return out


def _render(report):
    from rich.table import Table

    out = render.stdout()
    if report.changes:
        t = Table(show_edge=False)
        for col in ("severity", "breaks", "function", "kind", "change"):
            t.add_column(col)
        order = {"breaking": 0, "undecided": 1}
        for c in sorted(report.changes, key=lambda c: (order.get(c.severity, 2), c.breaks is None)):
            style = {"breaking": "red", "undecided": "yellow"}.get(c.severity, "green")
            t.add_row(f"[{style}]{escape(c.severity)}[/]", escape(c.breaks or "-"), escape(c.function or "-"),
                      escape(c.kind), escape(c.message))
        out.print(t)
    for fname, p in report.programs.items():
        out.print(f"program {plain(fname)}: {plain(p.status)}", markup=False)
    out.print(plain(report.summary()), markup=False)
