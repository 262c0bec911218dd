"""``jaxport check``: an artifact against a policy, without importing JAX."""

from __future__ import annotations

import click

from .. import errors, render
from ..options import debug_option, json_option
from ..render import escape, plain


@click.command("check")
@click.argument("artifact", type=click.Path())
@click.option("--policy", "-p", "policy_path", type=click.Path(),
              help="The policy file (YAML, see specs/POLICY.md).")
@click.option("--max-age", "max_age", type=click.IntRange(min=0), metavar="DAYS",
              help="Fail when the JAX that wrote the artifact was released more than DAYS ago (overrides the "
                   "policy's max_age_days).")
@click.option("--min-days-left", "min_days_left", type=click.IntRange(min=0), metavar="DAYS",
              help="Fail when fewer than DAYS remain in JAX's compatibility window for the artifact.")
@json_option
@debug_option
def command(artifact, policy_path, max_age, min_days_left, as_json, debug):
    """Check an artifact against a policy (platforms, custom calls, ...).

    Every rule of the policy is checked and every violation listed; exits with 14 when there is one. Reads the
    manifest only (after checking every member's sha256): no JAX.
    """

    def body():
        from jaxport.artifact.policy import Policy, check, load_policy
        from jaxport.errors import PolicyViolation

        if policy_path is None and max_age is None and min_days_left is None:
            raise click.UsageError("give a policy with --policy FILE, or --max-age / --min-days-left.")
        policy = load_policy(policy_path) if policy_path else Policy("the command-line rules")
        if max_age is not None:
            policy.max_age_days = max_age
        if min_days_left is not None:
            policy.min_days_left = min_days_left
        report = check(artifact, policy)
        if as_json:
            render.print_json(report.as_dict())
        else:
            _render(report)
        if not report.passed:
            errors.fail_after_result(PolicyViolation(report.summary()))

    errors.run(body, debug=debug, as_json=as_json)


def _render(report):
    from rich.table import Table

    out = render.stdout()
    data = report.as_dict()
    if data["rules"]:
        t = Table(show_edge=False)
        for col in ("rule", "result"):
            t.add_column(col)
        for r in data["rules"]:
            t.add_row(escape(r["rule"]), "[green]ok[/]" if r["passed"] else f"[red]{r['violations']} violation"
                                                                   f"{'s' if r['violations'] != 1 else ''}[/]")
        out.print(t)
    for v in report.violations:
        where = f" ({v.function})" if v.function else ""
        out.print(f"[red]✗[/] [bold]{escape(v.rule)}[/]{escape(where)}: {escape(v.message)}")
    n = len(report.violations)
    out.print(plain(report.summary()) if report.passed
              else f"{plain(report.artifact)}: {n} policy violation{'s' if n != 1 else ''}.", markup=False)
