"""``jaxport check``: an artifact against a policy, without importing JAX."""

from __future__ import annotations

import click

from jaxport.frontend import plural

from .. import errors, render
from ..bounds import MAX_NUMBER
from ..options import (
    debug_option,
    dim_option,
    json_option,
    signature_key_option,
    signature_path_option,
    target_option,
)
from ..progress import stages as progress_stages
from ..render import escape, plain


@click.command("check")
@click.argument("artifact", type=click.Path())
@click.option("--policy", "-p", "policy_path", type=click.Path(),
              help="The policy file (YAML, see specs/POLICY.md).")
@click.option("--max-producer-age", "max_producer_age", type=click.IntRange(0, MAX_NUMBER), metavar="DAYS",
              help="Fail when the JAX that wrote the artifact lags more than DAYS behind the newest JAX release "
                   "this jaxport supports (rule max_producer_age_days; overrides the policy's).")
@click.option("--min-days-left", "min_days_left", type=click.IntRange(0, MAX_NUMBER), metavar="DAYS",
              help="Fail when fewer than DAYS remain in JAX's compatibility window for the artifact (6 months from "
                   "its JAX's release; rule min_days_left; overrides the policy's).")
@click.option("--min-reach-days", "min_reach_days", type=click.IntRange(0, MAX_NUMBER), metavar="DAYS",
              help="Fail when fewer than DAYS remain in StableHLO's promise that newer readers load the artifact's "
                   "payloads (5 years; rule min_reach_days; overrides the policy's).")
@click.option("--max-age", "max_age", type=click.IntRange(0, MAX_NUMBER), metavar="DAYS",
              help="Deprecated: the old name of --max-producer-age, which it now sets.")
@signature_key_option("Require a signature (model signing, ARTIFACT.sig) by this trusted public key (PEM; or a CA "
                      "certificate), checked before anything else (rule signature); repeatable: any one of them. "
                      "Overrides the keys of the policy's signature section.")
@signature_path_option("Where the artifact's signature bundle is (default: ARTIFACT.sig beside it).")
@target_option("Fail unless every function compiles for this machine, and fits its memory, at every bucket (rule "
               "compiles_on): compiled here, without the machine (a TPU target needs libtpu: pip install "
               "'jaxport[tpu]'; a GPU target: pip install 'jaxport[cuda]'); nothing is written. Repeatable; adds to "
               "the policy's compiles_on.")
@dim_option("With --target or compiles_on: sizes of a dimension variable to compile at (e.g. batch=1,8,64; every "
            "combination); default: the policy's compiles_on.dims, else the buckets proposed from the spec's bounds.")
@json_option
@debug_option
def command(artifact, policy_path, max_producer_age, min_days_left, min_reach_days, max_age, signature_keys,
            signature_path, targets, dims, as_json, debug):
    """Check an artifact against a policy (platforms, custom calls, ..., the age of its JAX, the machines it compiles
    for).

    Every rule of the policy is checked and every violation listed; exits with 14 when there is one. Reads the
    manifest only (after checking every member's sha256): no JAX, except to compile for the machines of --target
    and of a compiles_on rule. $JAXPORT_TODAY=YYYY-MM-DD sets the date taken as today (for tests).

    \b
    Examples:
      jaxport check mlp.jaxport --policy examples/ci/policy.yaml
      jaxport check mlp.jaxport --signature-key ci-signing.pub
      jaxport check mlp.jaxport --target cpu --dim batch=1,8,64 --json
    """

    def body():
        from pathlib import Path

        from jaxport.artifact.policy import Policy, check, load_policy
        from jaxport.artifact.window.age import DEPRECATED_MAX_AGE, PRODUCER_AGE
        from jaxport.errors import PolicyViolation

        if policy_path is None and max_producer_age is None and min_days_left is None and max_age is None \
                and min_reach_days is None and not signature_keys and not targets:
            raise click.UsageError("give a policy with --policy FILE, or --max-producer-age DAYS / --min-days-left "
                                   "DAYS / --min-reach-days DAYS / --signature-key PUBLIC.pem / --target NAME.")
        if max_age is not None and max_producer_age is not None:
            raise click.UsageError("--max-age is the deprecated name of --max-producer-age; give only "
                                   "--max-producer-age.")
        policy = load_policy(policy_path) if policy_path else Policy("the command-line rules")
        if max_age is not None:
            policy.max_producer_age_days = max_age
            policy.notes.append((PRODUCER_AGE, DEPRECATED_MAX_AGE.format(old="--max-age", new="--max-producer-age",
                                                                         left="--min-days-left")))
        if max_producer_age is not None:
            policy.max_producer_age_days = max_producer_age
        if min_days_left is not None:
            policy.min_days_left = min_days_left
        if min_reach_days is not None:
            policy.min_reach_days = min_reach_days
        if signature_keys:
            from jaxport.artifact.signing.check import Trust

            given = policy.signature.identities if policy.signature is not None else ()
            policy.signature = Trust(tuple(map(Path, signature_keys)), given, source="--signature-key")
        elif signature_path is not None and policy.signature is None:
            raise click.UsageError("--signature names the bundle to check, but nothing is trusted: give "
                                   "--signature-key PUBLIC.pem, or a policy with a signature section.")
        if targets or policy.compiles_on:
            from jaxport.run.compile.aot import check as check_compiling

            with progress_stages(as_json) as stages:
                report = check_compiling(artifact, policy, targets=targets, dims=dims or None,
                                         signature=signature_path, progress=stages)
        else:
            report = check(artifact, policy, signature=signature_path)
        if as_json:
            render.print_json(report.as_dict())
        else:
            _render(report)
        if not report.passed:
            errors.fail_after_result(PolicyViolation(_failure(report, as_json)))

    errors.run(body, debug=debug, as_json=as_json)


def _failure(report, as_json):
    """The error line after the violations were listed (table or JSON): the count and the first, not the list again."""
    text = report.summary()
    if len(report.violations) == 1:
        return text
    count = f": {plural(len(report.violations), 'violation')}: "
    head = text[:text.index(count)]
    first = report.violations[0]
    where = "the JSON document on stdout" if as_json else "the table above"
    return (f"{head}{count}[{first.rule}] {first.message.rstrip('.')}; and {len(report.violations) - 1} more, "
            f"listed in {where}.")


def _render(report):
    from rich.table import Table

    out = render.stdout()
    if report.rules:
        t = Table(show_edge=False)
        for col in ("rule", "result"):
            t.add_column(col)
        for rule in report.rules:
            n = sum(1 for v in report.violations if v.rule == rule)
            t.add_row(escape(rule), f"[red]{plural(n, 'violation')}[/]" if n else "[green]ok[/]")
        out.print(t)
    for v in report.violations:
        where = f" ({v.function})" if v.function else ""
        out.print(f"[red]✗[/] [bold]{escape(v.rule)}[/]{escape(where)}: {escape(v.message)}")
    for rule, note in report.notes:
        out.print(f"[yellow]note:[/] [bold]{escape(rule)}[/]: {escape(note)}")
    n = len(report.violations)
    out.print(plain(report.summary()) if report.passed
              else f"{plain(report.artifact)}: {n} policy violation{'s' if n != 1 else ''}.", markup=False)
