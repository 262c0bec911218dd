"""``jaxport check``: each policy rule triggers on a violating artifact and passes on a compliant one; policy files
are read safely with file:line errors; checking never imports JAX."""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import jaxport
from jaxport.artifact import policy
from jaxport.artifact.manifest import validate
from jaxport.artifact.summary import human_bytes
from jaxport.artifact.window import compat
from jaxport.errors import PolicyFileError
from tests.support import EXAMPLES, REPO

JAX = jax.__version__

#: examples/ci/policy.yaml's max_producer_age_days (60) passes a fresh export only with a JAX at most 60 days behind the
#: newest this jaxport supports: the oldest (make test-compat runs the tests with it) fails it, as the rule means.
FRESH_EXPORT_PASSES_THE_EXAMPLE_POLICY = pytest.mark.skipif(
    (compat.dating(JAX).producer_age() or 0) > 60,
    reason=f"jax {JAX} is more than 60 days behind jax {compat.CURRENT.version}: a fresh export fails the example "
           f"policy's max_producer_age_days")

FFI_MODEL = '''
import jax


def f(x):
    return jax.ffi.ffi_call("my_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x) + 1
'''
FFI_SPEC = 'jaxport: 1\ndims: [b]\nargs: ["f32[b, 4]"]\nallow_custom_calls: [my_target]\nmetadata: {name: ffi}\n'


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("check")
    (d / "model.py").write_text(FFI_MODEL)
    (d / "spec.yaml").write_text(FFI_SPEC)
    out = {}
    with contextlib.chdir(EXAMPLES / "mlp"):
        out["mlp"] = jaxport.export("model.py:predict", "spec.yaml", output=d / "mlp.jaxport").path
        out["multi"] = jaxport.export("model.py:predict", "spec-multiplatform.yaml", output=d / "multi.jaxport").path
    with contextlib.chdir(d):
        out["ffi"] = d / jaxport.export("model.py:f", "spec.yaml", output="ffi.jaxport").path
    return out


def _check(path: Path, text: str) -> policy.CheckReport:
    return policy.check(path, policy.parse_policy("jaxport_policy: 1\n" + text, "policy.yaml"))


def _messages(report: policy.CheckReport) -> list[tuple[str, str | None, str]]:
    return [(v.rule, v.function, v.message) for v in report.violations]


# (policy text, violating artifact, expected violations, compliant artifact)
RULES = {
    "platforms.allowed": (
        "platforms: {allowed: [cpu]}\n", "multi",
        [("platforms.allowed", "predict", "function 'predict' is exported for cuda, tpu, which the policy does not "
                                          "allow (allowed: cpu).")], "mlp"),
    "platforms.required": (
        "platforms: {required: [cpu, cuda]}\n", "mlp",
        [("platforms.required", "predict", "function 'predict' is not exported for cuda, which the policy requires; "
                                           "re-export with --platform cuda (and its other platforms).")], "multi"),
    "custom_calls.allowed": (
        "custom_calls: {allowed: []}\n", "ffi",
        [("custom_calls.allowed", "f", "function 'f' calls custom-call target my_target (1x, not guaranteed stable "
                                       "by JAX), which the policy does not allow (allowed: none, and every target "
                                       "JAX guarantees stable).")], "mlp"),
    "custom_calls.allow_guaranteed": (
        "custom_calls: {allowed: [my_target], allow_guaranteed: false}\n", "mlp",
        [("custom_calls.allowed", "predict", "function 'predict' calls custom-call target shape_assertion (2x, "
                                             "guaranteed stable by JAX), which the policy does not allow (allowed: "
                                             "my_target).")], None),
    "max_artifact_size": (
        "max_artifact_size: 50 kB\n", "mlp",
        [("max_artifact_size", None, "the artifact is {size} ({bytes} bytes); the policy allows at most 50.0 kB "
                                     "(50000 bytes).")], "ffi"),
    "format_version": (
        'format_version: {min: "1.1"}\n', "mlp",
        [("format_version", None, "the artifact's format version 1.0 is outside the policy's range >= 1.1.")], None),
    "calling_convention": (
        "calling_convention: {max: 9}\n", "mlp",
        [("calling_convention", "predict", "function 'predict' uses calling convention 10; the policy requires "
                                           "<= 9.")], None),
    "min_consumer_jax": (
        'min_consumer_jax: "0.4.14"\n', "mlp",
        [("min_consumer_jax", None, f"the artifact was exported with JAX {jax.__version__}, newer than the oldest "
                                    f"JAX its consumers run (0.4.14); JAX guarantees that an artifact loads in the JAX "
                                    f"that exported it and later releases, not in earlier ones. Export it for that "
                                    f"JAX ('jaxport export --for-jax 0.4.14', or 'jaxport upgrade --for-jax 0.4.14'; "
                                    f"jaxport writes payloads for JAX 0.9.1 and later), or raise "
                                    f"min_consumer_jax.")], None),
    "required_metadata": (
        "required_metadata: [name, version, labels.team]\n", "ffi",
        [("required_metadata", None, "metadata.version is missing; the policy requires it (set metadata.version in "
                                     "the spec or pass --version)."),
         ("required_metadata", None, "metadata.labels['team'] is missing; the policy requires it (add it under "
                                     "metadata.labels in the spec (team: ...)).")], None),
    "forbid_disabled_safety_checks": (
        "forbid_disabled_safety_checks: true\n", "ffi",
        [("forbid_disabled_safety_checks", "f", "function 'f' was exported with JAX safety checks disabled "
                                                "(custom_call:my_target); the policy forbids it.")], "mlp"),
    "max_embedded_constant_size": (
        "max_embedded_constant_size: 64 KiB\n", "mlp",
        [("max_embedded_constant_size", "predict", "function 'predict' embeds a constant of 100.4 kB "
                                                   "(tensor<784x32xf32>); the policy allows at most 65.5 kB per "
                                                   "constant. Pass it as an argument (or bind it as weights) instead "
                                                   "of closing over it.")], "ffi"),
}


@pytest.mark.parametrize("rule", RULES)
def test_rule_triggers_and_passes(rule, artifacts):
    text, bad, expected, good = RULES[rule]
    report = _check(artifacts[bad], text)
    size = artifacts[bad].stat().st_size
    expected = [(r, f, m.format(size=human_bytes(size), bytes=size)) for r, f, m in expected]
    assert _messages(report) == expected
    assert not report.passed
    if good is not None:
        assert _check(artifacts[good], text).passed
    assert {r["rule"] for r in report.as_dict()["rules"] if not r["passed"]} == {r for r, _, _ in expected}


@pytest.mark.parametrize("text", [
    'format_version: {min: "1.0", max: "1.9"}\n', "calling_convention: {min: 9, max: 10}\n",
    f'min_consumer_jax: "{jax.__version__}"\n', "required_metadata: [name, version, description]\n",
    "max_artifact_size: 1 MiB\n"])
def test_compliant_rules_pass(text, artifacts):
    assert _check(artifacts["mlp"], text).violations == []


def test_min_reach_days_counts_stablehlos_five_years_from_the_writing_jax(artifacts):
    released = compat.window(jax.__version__).dating.released
    if released is None:
        pytest.skip(f"jax {jax.__version__} is not in the release table")
    rules = policy.parse_policy("jaxport_policy: 1\nmin_reach_days: 30\n", "policy.yaml")
    end = compat.add_months(released, 60)
    f = jaxport.open_artifact(artifacts["mlp"]).model.functions["predict"]
    late = policy.check(artifacts["mlp"], rules, today=end - datetime.timedelta(days=10))
    assert _messages(late) == [("min_reach_days", None, f"StableHLO promises that newer readers load its payloads "
                                f"(StableHLO {f.stablehlo_version}) until {end.isoformat()}, 10 days from today, "
                                f"fewer than 30; a newer StableHLO moves that end later: 'jaxport upgrade' "
                                f"re-serializes the artifact with the running JAX, once it is newer than the JAX "
                                f"that wrote it, or lower min_reach_days.")]
    assert policy.check(artifacts["mlp"], rules, today=released).passed


def test_min_reach_days_on_the_command_line(artifacts, run_cli, monkeypatch):
    released = compat.window(jax.__version__).dating.released
    if released is None:
        pytest.skip(f"jax {jax.__version__} is not in the release table")
    monkeypatch.setenv("JAXPORT_TODAY", (compat.add_months(released, 60) - datetime.timedelta(days=3)).isoformat())
    res = run_cli("check", str(artifacts["mlp"]), "--min-reach-days", "5", "--json")
    assert res.exit_code == 14
    assert [r["rule"] for r in json.loads(res.stdout)["violations"]] == ["min_reach_days"]
    assert run_cli("check", str(artifacts["mlp"]), "--min-reach-days", "2").exit_code == 0


def test_an_artifact_written_for_an_older_jax_passes_that_consumer(artifacts, tmp_path):
    with contextlib.chdir(EXAMPLES / "mlp"):
        older = jaxport.export("model.py:predict", "spec.yaml", output=tmp_path / "o.jaxport", for_jax="0.9.1").path
    assert _check(older, 'min_consumer_jax: "0.9.1"\n').passed
    assert not _check(artifacts["mlp"], 'min_consumer_jax: "0.9.1"\n').passed or jax.__version__ == "0.9.1"


def test_calling_convention_newer_than_the_oldest_consumer(artifacts):
    with jaxport.open_artifact(artifacts["mlp"]) as art:
        manifest = json.loads(art.manifest_bytes)
    manifest["functions"]["predict"]["calling_convention_version"] = 9
    manifest["producer"]["jax"] = "0.4.10"
    rules = policy.parse_policy('jaxport_policy: 1\nmin_consumer_jax: "0.4.14"\n', "p.yaml")
    assert [(v.function, v.message) for v in policy.evaluate(rules, validate(manifest), 1)] == [
        ("predict", "function 'predict' uses calling convention 9, which JAX runs from 0.4.20 on, newer than "
                    "min_consumer_jax 0.4.14.")]
    manifest["producer"]["jax"] = "unknown"
    assert [v.message for v in policy.evaluate(rules, validate(manifest), 1)][0] == (
        "the artifact does not say which JAX exported it (producer.jax is 'unknown'), so it cannot be shown to load "
        "in JAX 0.4.14.")


@FRESH_EXPORT_PASSES_THE_EXAMPLE_POLICY
def test_example_policy_passes_and_lists_every_rule(artifacts, run_cli):
    res = run_cli("check", artifacts["mlp"], "--policy", REPO / "examples" / "ci" / "policy.yaml", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["passed"] is True and out["violations"] == []
    assert [r["rule"] for r in out["rules"]] == [
        "platforms.allowed", "platforms.required", "custom_calls.allowed", "max_artifact_size", "format_version",
        "calling_convention", "required_metadata", "forbid_disabled_safety_checks", "max_embedded_constant_size",
        "max_producer_age_days"]
    assert out["notes"] == []  # a fresh export is dated exactly: 0 days behind the newest JAX this jaxport supports


def test_every_violation_is_listed_and_exit_code_is_14(artifacts, run_cli, tmp_path):
    p = tmp_path / "strict.yaml"
    p.write_text("jaxport_policy: 1\nplatforms: {required: [tpu]}\nforbid_disabled_safety_checks: true\n"
                 "max_artifact_size: 100\n")
    res = run_cli("check", artifacts["ffi"], "--policy", p)
    assert res.exit_code == 14
    assert res.stdout.count("✗") == 3
    assert res.stderr.startswith(f"error[violation]: {artifacts['ffi']} breaks the policy {p}: 3 violations: "
                                 f"[platforms.required] function 'f' is not exported for tpu")
    # the table lists every violation; the error line after it names the first and counts the others
    assert res.stderr.count("[") == 2 and res.stderr.endswith("; and 2 more, listed in the table above.\n")
    assert "Traceback" not in res.stderr
    res = run_cli("check", artifacts["ffi"], "--policy", p, "--json")
    assert res.exit_code == 14
    out = json.loads(res.stdout)
    assert [v["rule"] for v in out["violations"]] == ["platforms.required", "max_artifact_size",
                                                      "forbid_disabled_safety_checks"]
    assert "error" not in out
    assert res.stderr.endswith("; and 2 more, listed in the JSON document on stdout.\n")


def test_compliant_artifact_exits_0(artifacts, run_cli, tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text("jaxport_policy: 1\nplatforms: {allowed: [cpu]}\n")
    res = run_cli("check", artifacts["mlp"], "--policy", p)
    assert res.exit_code == 0 and res.stderr == ""
    assert f"{artifacts['mlp']} follows the policy {p} (1 rule)." in res.stdout


BAD_POLICIES = {
    "unknown key": ("jaxport_policy: 1\nplatfroms: {allowed: [cpu]}\n",
                    "policy.yaml:2: unknown key 'platfroms' in the policy. Did you mean 'platforms'? Allowed keys: "
                    "jaxport_policy, platforms, custom_calls, max_artifact_size, format_version, calling_convention, "
                    "min_consumer_jax, required_metadata, forbid_disabled_safety_checks, max_embedded_constant_size, "
                    "max_producer_age_days, min_days_left, min_reach_days, max_age_days, signature, compiles_on."),
    "unknown nested key": ("jaxport_policy: 1\nplatforms:\n  alowed: [cpu]\n",
                           "policy.yaml:3: unknown key 'alowed' in 'platforms'. Did you mean 'allowed'? Allowed keys: "
                           "allowed, required."),
    "missing version": ("platforms: {allowed: [cpu]}\n",
                        "policy.yaml:1: missing 'jaxport_policy: 1' (the policy language version) at the top."),
    "wrong version": ("jaxport_policy: 2\n",
                      "policy.yaml:1: policy language version 2 is not one this jaxport reads (supported: 1)."),
    "unknown platform": ("jaxport_policy: 1\nplatforms:\n  allowed: [cpu, gpu]\n",
                         "policy.yaml:3: platforms.allowed: unknown platform 'gpu'. Did you mean 'cuda'? Use some "
                         "of: cpu, cuda, rocm, tpu."),
    "required outside allowed": ("jaxport_policy: 1\nplatforms: {allowed: [cpu], required: [tpu]}\n",
                                 "policy.yaml:2: platforms.required names tpu, which platforms.allowed does not "
                                 "allow."),
    "bad size": ("jaxport_policy: 1\nmax_artifact_size: 12 parsecs\n",
                 "policy.yaml:2: max_artifact_size must be a number of bytes or a size such as '100 MB' or '1 GiB' "
                 "(units: B, kB, MB, GB, KiB, MiB, GiB), found '12 parsecs'."),
    "unquoted version": ("jaxport_policy: 1\nformat_version: {min: 1.10}\n",
                         "policy.yaml:2: format_version.min must be a quoted string \"MAJOR.MINOR\" such as \"1.0\" "
                         "(YAML reads an unquoted 1.10 as the number 1.1), found 1.1."),
    "empty range": ("jaxport_policy: 1\ncalling_convention: {}\n",
                    "policy.yaml:2: calling_convention needs 'min', 'max' or both."),
    "inverted range": ("jaxport_policy: 1\ncalling_convention: {min: 10, max: 9}\n",
                       "policy.yaml:2: calling_convention: min is greater than max."),
    "not a boolean": ("jaxport_policy: 1\nforbid_disabled_safety_checks: sometimes\n",
                      "policy.yaml:2: forbid_disabled_safety_checks must be true or false, found 'sometimes'."),
    # A list or mapping where a scalar belongs is shown as written (never as the parser's own objects).
    "a list for a boolean": ("jaxport_policy: 1\nforbid_disabled_safety_checks: [a, {b: 1}]\n",
                             "policy.yaml:2: forbid_disabled_safety_checks must be true or false, found "
                             "['a', {'b': 1}]."),
    "a mapping for a size": ("jaxport_policy: 1\nmax_artifact_size: {n: 1}\n",
                             "policy.yaml:2: max_artifact_size must be a number of bytes or a size such as '100 MB' "
                             "or '1 GiB' (units: B, kB, MB, GB, KiB, MiB, GiB), found {'n': 1}."),
    "a list for a version": ("jaxport_policy: 1\nformat_version: {min: [1, 0]}\n",
                             "policy.yaml:2: format_version.min must be a quoted string \"MAJOR.MINOR\" such as "
                             "\"1.0\" (YAML reads an unquoted 1.10 as the number 1.1), found [1, 0]."),
    "unknown metadata field": ("jaxport_policy: 1\nrequired_metadata: [versoin]\n",
                               "policy.yaml:2: required_metadata: unknown field 'versoin'. Did you mean 'version'? "
                               "Use name, version, description or labels.KEY."),
    "duplicate key": ("jaxport_policy: 1\nmax_artifact_size: 1\nmax_artifact_size: 2\n",
                      "policy.yaml:3: duplicate key 'max_artifact_size'."),
    "python tag": ("jaxport_policy: 1\nmax_artifact_size: !!python/object/apply:os.system ['true']\n",
                   "policy.yaml:2: YAML tag '!!python/object/apply:os.system' is not allowed in a policy: only plain "
                   "strings, numbers, booleans, null, lists and mappings are. Remove the tag."),
    "not a mapping": ("- jaxport_policy\n",
                      "policy.yaml:1: a policy must be a YAML mapping starting with 'jaxport_policy: 1'."),
    "empty": ("", "policy.yaml: the policy is empty. Start it with 'jaxport_policy: 1'."),
    "bad yaml": ("jaxport_policy: 1\nplatforms: [cpu\n",
                 "policy.yaml:3: invalid YAML: while parsing a flow sequence, expected ',' or ']', but got '<stream "
                 "end>'. Fix the YAML syntax at that line."),
    "control character": ("jaxport_policy: 1\nmax_age_days: 3\x00\n",
                          "policy.yaml:2: invalid YAML: the character #x0000 is not allowed in YAML text. Remove it."),
    "huge number": ("jaxport_policy: 1\nmax_age_days: " + "9" * 5000 + "\n",
                    "policy.yaml:2: the number 99999999999999999999... has 5000 digits; a policy's numbers are at "
                    "most 2**62. Shorten it."),
    "integer key": ("jaxport_policy: 1\n7: 1\n", "policy.yaml:2: mapping keys must be strings, found 7."),
}


@pytest.mark.parametrize("name", BAD_POLICIES)
def test_bad_policy_is_refused_with_file_and_line(name):
    text, message = BAD_POLICIES[name]
    with pytest.raises(PolicyFileError, match=f"^{re.escape(message)}$"):
        policy.parse_policy(text, "policy.yaml")


def test_bad_policy_on_the_command_line(artifacts, run_cli, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("jaxport_policy: 1\nmax_artifact_size: -3\n")
    res = run_cli("check", artifacts["mlp"], "--policy", p)
    assert res.exit_code == 2
    assert res.stderr == (f"error[policy-file]: {p}:2: max_artifact_size must be a number of bytes or a size such as "
                          f"'100 MB' or '1 GiB' (units: B, kB, MB, GB, KiB, MiB, GiB), found -3.\n")
    res = run_cli("check", artifacts["mlp"], "--policy", tmp_path / "missing.yaml", "--json")
    assert res.exit_code == 2
    assert json.loads(res.stdout) == {"error": {"kind": "policy-file", "exit_code": 2,
                                                "message": f"{tmp_path / 'missing.yaml'}: policy file not found."}}


def test_policy_size_and_alias_caps():
    with pytest.raises(PolicyFileError, match=re.escape("policies are capped at 1048576 bytes")):
        policy.parse_policy("jaxport_policy: 1\n#" + "x" * (1 << 20), "big.yaml")
    bomb = "jaxport_policy: 1\na: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcde", "bcdef"))
    with pytest.raises(PolicyFileError, match=re.escape("the policy expands to more than 10000 YAML nodes")):
        policy.parse_policy(bomb, "bomb.yaml")


def test_sizes_and_units():
    parsed = policy.parse_policy("jaxport_policy: 1\nmax_artifact_size: 1.5 GiB\nmax_embedded_constant_size: 2 kB\n",
                                 "p.yaml")
    assert (parsed.max_artifact_size, parsed.max_embedded_constant_size) == (3 << 29, 2000)
    assert policy.parse_policy("jaxport_policy: 1\n", "p.yaml").rules == []


def test_damaged_artifact_is_refused(artifacts, run_cli, tmp_path):
    data = bytearray(artifacts["mlp"].read_bytes())
    with jaxport.open_artifact(artifacts["mlp"]) as art:
        m = art.members["functions/predict.jaxexport"]
        data[m.offset + 10] ^= 0xFF
    bad = tmp_path / "bad.jaxport"
    bad.write_bytes(bytes(data))
    p = tmp_path / "p.yaml"
    p.write_text("jaxport_policy: 1\n")
    res = run_cli("check", bad, "--policy", p)
    assert res.exit_code == 8
    assert res.stderr.startswith(f"error[integrity]: {bad}: member 'functions/predict.jaxexport'")


@FRESH_EXPORT_PASSES_THE_EXAMPLE_POLICY
def test_check_does_not_import_jax(artifacts, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text((REPO / "examples" / "ci" / "policy.yaml").read_text())
    code = ("import sys\nfrom jaxport_cli.main import cli\n"
            "try:\n    cli(['check', sys.argv[1], '--policy', sys.argv[2]])\nexcept SystemExit as e:\n"
            "    print('exit', e.code, 'jax' in sys.modules, file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code, str(artifacts["mlp"]), str(p)], capture_output=True, text=True)
    assert res.stderr.strip().splitlines()[-1] == "exit 0 False"


@pytest.mark.skipif(JAX != compat.CURRENT.version, reason=f"jax {JAX} is not jax {compat.CURRENT.version}, the "
                    f"newest this jaxport supports: a fresh export is behind it")
def test_a_fresh_export_passes_the_producer_age(run_cli, artifacts, monkeypatch):
    """An artifact exported here, with the JAX this jaxport supports, is 0 days behind the newest JAX release it
    supports, on any day: --max-producer-age 30 and the deprecated --max-age 30 pass (exit 0)."""
    from jaxport.artifact.container import open_artifact
    from jaxport.artifact.window.compat import CURRENT, supported

    with open_artifact(artifacts["mlp"]) as art:
        assert art.manifest["producer"]["jax"] == jax.__version__
    assert supported(jax.__version__) and jax.__version__ == CURRENT.version
    for today in ("2026-12-01", "2027-12-01"):
        monkeypatch.setenv("JAXPORT_TODAY", today)
        res = run_cli("check", artifacts["mlp"], "--max-producer-age", "30", "--json")
        assert res.exit_code == 0, res.stdout + res.stderr
        assert json.loads(res.stdout)["violations"] == [] and json.loads(res.stdout)["notes"] == []
        res = run_cli("check", artifacts["mlp"], "--max-age", "30")
        assert res.exit_code == 0 and res.stderr == "", res.stdout + res.stderr
        assert "note: max_producer_age_days: --max-age is deprecated" in res.stdout


def test_producer_age_and_window_from_the_command_line(run_cli, tmp_path, monkeypatch):
    """An artifact whose recorded JAX is old fails --max-producer-age and --min-days-left; the same artifact recorded
    with the newest JAX this jaxport supports passes (more cases: tests/artifact/test_policy_age.py)."""
    from jaxport.artifact.container import open_artifact, write_artifact
    from jaxport.artifact.window.compat import CURRENT

    monkeypatch.setenv("JAXPORT_TODAY", "2026-11-01")
    golden = Path(__file__).parents[1] / "golden" / "1.0" / "mlp.jaxport"
    with open_artifact(golden) as art:
        manifest, members = art.manifest, {n: art.read(n) for n in art.members if n != "manifest.json"}
    manifest["producer"]["jax"] = manifest["producer"]["jaxlib"] = CURRENT.version
    fresh = tmp_path / "fresh.jaxport"
    write_artifact(fresh, manifest, members)
    res = run_cli("check", fresh, "--max-producer-age", "30", "--min-days-left", "30", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["passed"] is True
    monkeypatch.setenv("JAXPORT_TODAY", "2026-12-01")

    manifest["producer"]["jax"] = manifest["producer"]["jaxlib"] = "0.4.30"
    old = tmp_path / "old.jaxport"
    write_artifact(old, manifest, members)
    res = run_cli("check", old, "--max-producer-age", "180")
    assert res.exit_code == 14
    assert (f"max_producer_age_days: the artifact was exported with jax 0.4.30 (released 2024-06-18), 883 days "
            f"behind jax 0.12.1 (released 2026-11-18), the newest JAX release jaxport {jaxport.__version__} "
            f"supports; the policy allows at most 180 days. Re-export it with jax>=0.10.2,<0.13 (jax 0.10.2 needs "
            f"Python >= 3.11). JAX's guarantee that later releases load it ended on 2024-12-18 (713 days before today, "
            f"2026-12-01).") in " ".join(res.stdout.split())
    res = run_cli("check", old, "--min-days-left", "30")
    assert res.exit_code == 14
    assert ("min_days_left: JAX's guarantee that JAX releases load artifacts exported with jax 0.4.30 (released "
            "2024-06-18) ended on 2024-12-18, 713 days before today (2026-12-01)") in " ".join(res.stdout.split())


def test_check_needs_a_policy_or_an_age_rule(run_cli):
    golden = Path(__file__).parents[1] / "golden" / "1.0" / "mlp.jaxport"
    res = run_cli("check", golden)
    assert res.exit_code == 2
    assert "give a policy with --policy FILE, or --max-producer-age DAYS / --min-days-left DAYS / --min-reach-days " \
           "DAYS / --signature-key PUBLIC.pem / --target NAME." in res.stderr
