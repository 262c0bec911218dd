"""The main messages rendered at 1 and at 2 (issue 17): numbers and words agree (one helper, ``_text.plural``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxport._text import plural
from jaxport.artifact.policy import CheckReport, Violation
from jaxport.artifact.window.compat import n_days
from jaxport.verify.report import differing

GOLDEN = Path(__file__).parents[1] / "golden" / "1.0" / "mlp.jaxport"

MODEL = """\
import jax.numpy as jnp


def f(x, y):
    return x + y


def h(x):
    return jnp.tanh(x) * 2.0
"""


@pytest.mark.parametrize(("n", "word", "form", "text"), [
    (0, "case", None, "0 cases"), (1, "case", None, "1 case"), (2, "case", None, "2 cases"),
    (-1, "day", None, "-1 day"), (-2, "day", None, "-2 days"), (1, "entry", "entries", "1 entry"),
    (3, "entry", "entries", "3 entries"), (1, "axis", "axes", "1 axis"), (2, "axis", "axes", "2 axes"),
])
def test_plural(n, word, form, text):
    assert plural(n, word, form) == text


def test_days_and_cases():
    assert (n_days(1), n_days(2), n_days(0)) == ("1 day", "2 days", "0 days")
    assert (differing(1, 1), differing(1, 2), differing(2, 5)) == (
        "1 of 1 case differs", "1 of 2 cases differ", "2 of 5 cases differ")


def test_policy_summary_at_one_and_two():
    one = Violation("platforms", None, "cuda is not allowed.")
    two = Violation("max_artifact_size", None, "the artifact is 2 MB.")
    assert CheckReport("a.jaxport", "p.yaml", ["platforms"], []).summary() == (
        "a.jaxport follows the policy p.yaml (1 rule).")
    assert CheckReport("a.jaxport", "the command-line rules", ["platforms", "max_artifact_size"], []).summary() == (
        "a.jaxport follows the command-line rules (2 rules).")
    assert CheckReport("a.jaxport", "p.yaml", ["platforms"], [one]).summary() == (
        "a.jaxport breaks the policy p.yaml: 1 violation: [platforms] cuda is not allowed.")
    assert CheckReport("a.jaxport", "the command-line rules", ["platforms"], [one, two]).summary() == (
        "a.jaxport breaks the command-line rules: 2 violations: [platforms] cuda is not allowed; "
        "[max_artifact_size] the artifact is 2 MB.")


def test_check_lines_from_the_command_line(run_cli, monkeypatch):
    monkeypatch.setenv("JAXPORT_TODAY", "2026-12-01")
    res = run_cli("check", GOLDEN, "--max-producer-age", "100000")
    assert res.exit_code == 0, res.stderr
    assert f"{GOLDEN} follows the command-line rules (1 rule)." in res.stdout
    assert "the policy the" not in res.stdout
    res = run_cli("check", GOLDEN, "--max-producer-age", "100000", "--min-days-left", "0")
    assert res.exit_code == 0, res.stderr
    assert f"{GOLDEN} follows the command-line rules (2 rules)." in res.stdout


@pytest.fixture
def model_dir(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("args", "text"), [
    ("['f32[3]']", "the spec gives 1 positional argument, which does not fit f(x, y): missing a required argument: "
                   "'y'."),
    ("['f32[3]', 'f32[3]', 'f32[3]']", "the spec gives 3 positional arguments, which do not fit f(x, y): too many "
                                       "positional arguments."),
])
def test_positional_argument_spec_error(model_dir, run_cli, args, text):
    (model_dir / "spec.yaml").write_text(f"jaxport: 1\nargs: {args}\n")
    res = run_cli("export", "model.py:f", "--shapes", "spec.yaml")
    assert res.exit_code == 3
    assert res.stderr == (f"error[spec]: spec.yaml:1: {text} Make 'args' and 'kwargs' match the function's "
                          f"parameters.\n")
    assert res.stdout == "" and not list(model_dir.glob("*.jaxport"))


def test_verify_ok_line_at_one_and_two_cases(model_dir, run_cli):
    (model_dir / "spec.yaml").write_text("jaxport: 1\ndims:\n  b: {min: 1, max: 64}\nargs: ['f32[b, 4]']\n")
    res = run_cli("export", "model.py:h", "--shapes", "spec.yaml", "-o", "h.jaxport")
    assert res.exit_code == 0, res.stderr
    res = run_cli("verify", "h.jaxport", "--dim", "b=3")
    assert res.exit_code == 0, res.stderr
    assert "OK: 1 case matches." in res.stdout
    res = run_cli("verify", "h.jaxport", "--dim", "b=3,5")
    assert res.exit_code == 0, res.stderr
    assert "OK: 2 cases match." in res.stdout
