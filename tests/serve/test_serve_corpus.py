"""The ``oip-requests`` class (``tests/serve/oip_corpus.py``) against one real ``jaxport serve`` (REST and gRPC on
127.0.0.1, ephemeral ports): every hostile request refused with a 4xx naming its field, or answered with exactly
``jax.jit``'s outputs; a canary right after every one; no traceback and no 500 in the server's log. Prints the table
of RELIABILITY.md (``python -m tests.serve.oip_corpus`` prints the same). Skips without the extra jaxport[serve] or
tritonclient."""

from __future__ import annotations

import importlib.util
from collections import Counter

import pytest

if importlib.util.find_spec("kserve") is None:
    pytest.skip("jaxport serve needs the extra jaxport[serve] (pip install 'jaxport[serve]')", allow_module_level=True)
pytest.importorskip("tritonclient.grpc", reason="the corpus's gRPC messages: pip install 'tritonclient[all]'")

from tests.serve import oip_corpus  # noqa: E402 - needs tritonclient

pytestmark = pytest.mark.slow


def test_every_hostile_request_is_refused_by_name_or_answered_right(tmp_path, capsys):
    cases = oip_corpus.build()
    groups = Counter(c.group for c in cases)
    assert len(cases) >= 300 and set(groups) >= {"field-type", "values", "binary", "framing", "grpc-bytes"}, groups
    assert {c.expect for c in cases} == {"refused", "missing", "answered", "closed", "405"}
    with oip_corpus.serving_corpus(tmp_path) as server:
        report = oip_corpus.run(cases, server, deadline_s=150)
    log = server.log.read_text(errors="replace")
    with capsys.disabled():
        print(f"\n{report.table()}\n{len(cases)} cases, {2 * len(cases)} runs in {report.seconds:.0f} s")
    assert [(r.case.id, r.detail, r.canary) for r in report.failures] == []
    outcomes = Counter(r.outcome for r in report.results)
    assert outcomes["refused"] > 500 and outcomes["answered"] > 100, outcomes
    assert "Traceback" not in log and not oip_corpus.LOG_FAILURE.search(log), log[-4000:]
