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
