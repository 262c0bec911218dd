"""The trust corpus's signature class (tests/hostile/signature_classes.py): every hostile bundle beside a valid
artifact is refused by the signature check with one line and exit 14, by call and check; inspect shows it unverified
without printing its control characters."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("model_signing", reason="the signature class needs the extra jaxport[sign] (pip install "
                                            "'jaxport[sign]'; make test installs it)")

from tests.hostile import corpus, run, signature_classes  # noqa: E402


@pytest.mark.slow
def test_every_hostile_bundle_is_refused_in_process(tmp_path):
    cwd = os.getcwd()
    try:
        base = corpus.build_base(tmp_path / "base")
    finally:
        os.chdir(cwd)
    cases = list(signature_classes.cases(base))
    assert len(cases) >= 20
    report = run.run(base, cases, tmp_path / "runs")
    failures = "\n".join(f"{r.case.id} [{r.command}]: {r.detail}" for r in report.failures)
    assert failures == ""
    assert {r.status for r in report.results if r.command != "inspect"} == {"rejected"}


@pytest.mark.slow
def test_the_swap_class_runs_signed_or_refuses_in_real_processes(tmp_path):
    """A sample of the class ``signature-swap`` through the corpus's runner: each plan of the attacker at the
    artifact's opening and after its parse, on ``call`` (the whole class: ``python -m tests.hostile.run --class
    signature-swap``, RELIABILITY.md)."""
    cwd = os.getcwd()
    try:
        base = corpus.build_base(tmp_path / "base")
    finally:
        os.chdir(cwd)
    cases = [c for c in signature_classes.swap_cases(base)
             if c.name.startswith("call-") and c.name.endswith(("-at-open", "-at-after-read"))]
    assert len(cases) == 8
    report = run.run(base, cases, tmp_path / "runs")
    assert "\n".join(f"{r.case.id}: {r.detail}" for r in report.failures) == ""
    assert {r.case.name: r.status for r in report.results} == {
        **{f"call-{plan}-at-open": "rejected" for plan in ("renamed", "renamed-and-back", "linked", "rewritten")},
        **{f"call-{plan}-at-after-read": "accepted" for plan in ("renamed", "renamed-and-back", "linked")},
        "call-rewritten-at-after-read": "rejected"}
