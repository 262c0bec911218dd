"""The policy rules on the producer's JAX: ``max_producer_age_days`` (how far it lags behind the newest JAX release
this jaxport supports, jax 0.12.1 for ``jax>=0.9.1,<0.13``) and ``min_days_left`` (of JAX's 6-month
backward-compatibility window), with every kind of ``producer.jax``: a listed release, a nightly build, one newer
than the table or missing from it, one older than it, a pre-release, none. Today is fixed with ``$JAXPORT_TODAY``."""

from __future__ import annotations

import datetime
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest

from jaxport import _version
from jaxport.artifact import policy
from jaxport.artifact.container import open_artifact, write_artifact
from jaxport.artifact.window import age, compat
from jaxport.artifact.window.releases import RELEASES, REVIEWED, SUPPORTED_JAX
from jaxport.errors import PolicyFileError, UsageError
from tests.support import REPO

GOLDEN = Path(__file__).parents[1] / "golden" / "1.0" / "mlp.jaxport"
TODAY = "2026-12-01"
J = _version.__version__


@pytest.fixture(autouse=True)
def _today(monkeypatch):
    monkeypatch.setenv("JAXPORT_TODAY", TODAY)


def _with_producer(tmp_path: Path, jax_version: str) -> Path:
    """A copy of the golden MLP artifact whose manifest records ``jax_version`` as its producer's jax and jaxlib,
    resealed (members keep their bytes; the manifest's digests are written anew)."""
    out = tmp_path / f"jax-{jax_version}.jaxport"
    with open_artifact(GOLDEN) as art:
        manifest = art.manifest
        members = {n: art.read(n) for n in art.members if n != "manifest.json"}
    manifest["producer"]["jax"] = manifest["producer"]["jaxlib"] = jax_version  # one install, as export records
    write_artifact(out, manifest, members)
    return out


def _json(res) -> dict:
    return json.loads(res.stdout)


# --- the table ------------------------------------------------------------------------------------------------------


def test_release_table_rows_are_well_formed():
    assert len(RELEASES) == len(compat.KNOWN) >= 35
    for version, row in RELEASES.items():
        assert re.fullmatch(r"\d+(\.\d+){2,3}", version), version
        assert datetime.date.fromisoformat(row.date) <= datetime.date.fromisoformat(REVIEWED), version
        assert re.fullmatch(r"3\.\d+", row.python), version
    assert [k.version for k in compat.KNOWN][:2] == ["0.4.30", "0.4.31"]
    assert (compat.NEWEST.version, compat.NEWEST.released) == ("0.12.1", datetime.date(2026, 11, 18))
    assert compat.HIGHEST is compat.NEWEST and compat.OLDEST.version == "0.4.30"
    # PyPI upload dates: a patch release of an older line may come after a newer line's release
    assert RELEASES["0.8.3"].date == "2026-01-29" > RELEASES["0.9.0"].date == "2026-01-20"
    assert RELEASES["0.10.2"] == ("2026-06-17", "3.11", False) and RELEASES["0.4.32"].yanked


def test_supported_range_is_the_jax_pin_of_pyproject():
    """releases.SUPPORTED_JAX is pyproject.toml's jax requirement: ages count from the newest release inside it, and
    advice names only releases inside it."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d.replace(" ", "") for d in deps if re.match(r"jax(?![A-Za-z0-9_.-])", d)]
    assert pins == [f"jax{SUPPORTED_JAX}"], "update releases.SUPPORTED_JAX together with pyproject.toml's jax pin"
    assert (compat.SUPPORTED_FROM, compat.SUPPORTED_BELOW) == tuple(SUPPORTED_JAX[2:].split(",<"))
    # the newest table row below the first unsupported version, and one this jaxport supports
    below = [k for k in compat.KNOWN if compat.version_key(k.version) < compat.version_key(compat.SUPPORTED_BELOW)]
    assert compat.CURRENT == max(below, key=lambda k: k.released) and compat.supported(compat.CURRENT.version)
    assert compat.ADVISABLE and all(compat.supported(k.version) and not k.yanked for k in compat.ADVISABLE)
    # with this pin: jax 0.9.1 to 0.12.x (not 0.9.0 nor 0.8.x: README, "Supported JAX"); 0.11.0 and later need
    # Python >= 3.12
    assert SUPPORTED_JAX == ">=0.9.1,<0.13"
    assert (compat.CURRENT.version, compat.CURRENT.released) == ("0.12.1", datetime.date(2026, 11, 18))
    assert [k.version for k in compat.ADVISABLE] == ["0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0",
                                                     "0.11.1", "0.11.2", "0.12.0", "0.12.0.1", "0.12.1"]
    assert [k.version for k in compat.KNOWN if not compat.supported(k.version) and k.released > compat.CURRENT.released
            ] == []
    assert not compat.supported("0.13.0rc1") and compat.supported("0.10.2+cuda12") and compat.supported("0.9.1")
    assert not compat.supported("0.9.0.1") and not compat.supported("0.8.3")


def test_window_is_six_calendar_months():
    assert compat.window_end(datetime.date(2026, 6, 17)) == datetime.date(2026, 12, 17)
    assert compat.add_months(datetime.date(2026, 8, 31), 6) == datetime.date(2027, 2, 28)
    assert compat.add_months(datetime.date(2027, 8, 31), 6) == datetime.date(2028, 2, 29)
    w = compat.window("0.10.2")
    assert (w.loadable_from, w.loadable_until) == (datetime.date(2026, 5, 27), datetime.date(2026, 12, 17))
    assert (w.oldest_jax, w.newest_jax) == ("0.10.2", "0.12.1")
    assert w.days_left(datetime.date(2026, 12, 1)) == 16


@pytest.mark.parametrize("version, kind, released, after, before", [
    ("0.10.2", "release", "2026-06-17", None, None),
    ("0.10.2+cuda12", "release", "2026-06-17", None, None),
    ("0.9.0.1", "release", "2026-02-05", None, None),
    ("0.10.3.dev20261130", "nightly", "2026-11-30", None, None),
    ("0.13.0", "newer", None, REVIEWED, None),
    ("0.13.0rc1", "newer", None, "2026-11-18", None),
    ("0.8.4", "unlisted", None, REVIEWED, None),
    ("0.10.3.dev0", "unreleased", None, "2026-06-17", None),
    ("0.4.26", "older", None, None, "2024-06-18"),
    ("0.11.0rc1", "prerelease", None, None, "2026-07-16"),
    ("banana", "unreadable", None, None, None),
    ("0.10.2\x1b[31m", "unreadable", None, None, None),
])
def test_every_version_is_dated_explicitly(version, kind, released, after, before):
    d = compat.dating(version)
    day = datetime.date.fromisoformat
    assert (d.kind, d.released, d.after, d.before) == (
        kind, released and day(released), after and day(after), before and day(before))


# --- the rules through `jaxport check` ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.12.1", "0.12.1+cuda12"])
def test_fresh_export_passes_max_producer_age_30(run_cli, tmp_path, monkeypatch, version):
    """jax 0.12.1, the newest JAX this jaxport supports, is 0 days behind (a local label is the same release)."""
    art = _with_producer(tmp_path, version)
    assert compat.dating(version).producer_age() == 0
    for today in ("2026-11-18", TODAY, "2027-03-01"):  # the producer's age does not grow with the calendar
        monkeypatch.setenv("JAXPORT_TODAY", today)
        res = run_cli("check", art, "--max-producer-age", "30", "--json")
        assert res.exit_code == 0, res.stdout + res.stderr
        assert _json(res) == {"artifact": str(art), "policy": "the command-line rules", "passed": True,
                              "rules": [{"rule": "max_producer_age_days", "passed": True, "violations": 0}],
                              "violations": [], "notes": []}
    res = run_cli("check", art, "--max-producer-age", "0")
    assert res.exit_code == 0 and res.stderr == ""
    assert f"{art} follows the command-line rules (1 rule)." in res.stdout


def test_old_producer_fails_with_the_exact_messages(run_cli, tmp_path):
    old = _with_producer(tmp_path, "0.9.0")
    res = run_cli("check", old, "--max-producer-age", "30", "--min-days-left", "30", "--json")
    assert res.exit_code == 14
    out = _json(res)
    assert out["violations"] == [
        {"rule": "max_producer_age_days", "function": None, "message":
            f"the artifact was exported with jax 0.9.0 (released 2026-01-20), 302 days behind jax 0.12.1 (released "
            f"2026-11-18), the newest JAX release jaxport {J} supports; the policy allows at most 30 days. Re-export "
            f"it with jax>=0.12.0,<0.13 (jax 0.12.0 needs Python >= 3.12). JAX's guarantee that later releases load "
            f"it ended on 2026-07-20 (134 days before today, 2026-12-01)."},
        {"rule": "min_days_left", "function": None, "message":
            "JAX's guarantee that JAX releases load artifacts exported with jax 0.9.0 (released 2026-01-20) ended on "
            "2026-07-20, 134 days before today (2026-12-01); the policy requires at least 30 days left. Re-export it "
            "with jax>=0.11.0,<0.13 (jax 0.11.0 needs Python >= 3.12), whose window ends on 2027-01-16 or later."}]
    assert res.stderr.startswith(f"error[violation]: {old} breaks the command-line rules: 2 violations: "
                                 f"[max_producer_age_days] the artifact was exported with jax 0.9.0 ")
    assert res.stderr.count("\n") == 1


def test_producer_age_is_the_lag_behind_the_newest_supported_release(run_cli, tmp_path):
    """jax 0.10.0 lags 216 days behind jax 0.12.1, the newest release of jax>=0.9.1,<0.13: the rule counts that,
    from the table, whatever today is; the advice names the oldest release within the limit (jax 0.10.1, 182 days)."""
    art = _with_producer(tmp_path, "0.10.0")
    lag = (compat.CURRENT.released - datetime.date.fromisoformat(RELEASES["0.10.0"].date)).days
    assert lag == 216 == compat.dating("0.10.0").producer_age()
    assert run_cli("check", art, "--max-producer-age", str(lag)).exit_code == 0
    res = run_cli("check", art, "--max-producer-age", str(lag - 1), "--json")
    assert res.exit_code == 14
    assert _json(res)["violations"] == [{"rule": "max_producer_age_days", "function": None, "message": (
        f"the artifact was exported with jax 0.10.0 (released 2026-04-16), 216 days behind jax 0.12.1 (released "
        f"2026-11-18), the newest JAX release jaxport {J} supports; the policy allows at most 215 days. Re-export it "
        f"with jax>=0.10.1,<0.13. JAX's guarantee that later releases load it ended on 2026-10-16 (46 days before "
        f"today, 2026-12-01).")}]


#: What min_days_left advises when the producer is jax 0.10.2 and its window is too short: a supported release whose
#: window leaves enough (jax 0.11.0 and later need Python 3.12).
NEWER_RELEASE = ("Re-export it with jax>=0.11.0,<0.13 (jax 0.11.0 needs Python >= 3.12), whose window ends on "
                 "2027-01-16 or later.")


@pytest.mark.parametrize("today, minimum, message", [
    ("2026-11-17", 30, None),
    ("2026-11-18", 30, f"JAX guarantees that artifacts exported with jax 0.10.2 (released 2026-06-17) load in JAX "
                       f"releases up to 2026-12-17: 29 days from today (2026-11-18); the policy requires at least 30 "
                       f"days left. {NEWER_RELEASE}"),
    ("2026-12-16", 1, None),
    ("2026-12-17", 0, None),
    ("2026-12-17", 1, f"JAX guarantees that artifacts exported with jax 0.10.2 (released 2026-06-17) load in JAX "
                      f"releases up to 2026-12-17: 0 days from today (2026-12-17); the policy requires at least 1 day "
                      f"left. {NEWER_RELEASE}"),
    ("2026-12-18", 0, f"JAX's guarantee that JAX releases load artifacts exported with jax 0.10.2 (released "
                      f"2026-06-17) ended on 2026-12-17, 1 day before today (2026-12-18); the policy requires at "
                      f"least 0 days left. {NEWER_RELEASE}"),
])
def test_days_left_near_the_end_of_the_window(run_cli, tmp_path, monkeypatch, today, minimum, message):
    art = _with_producer(tmp_path, "0.10.2")
    monkeypatch.setenv("JAXPORT_TODAY", today)
    res = run_cli("check", art, "--min-days-left", str(minimum), "--json")
    out = _json(res)
    if message is None:
        assert res.exit_code == 0 and out["passed"] is True, res.stdout
    else:
        assert res.exit_code == 14
        assert out["violations"] == [{"rule": "min_days_left", "function": None, "message": message}]


def test_no_supported_release_leaves_enough_days(tmp_path):
    report = policy.check(_with_producer(tmp_path, "0.12.1"), policy.Policy("p", min_days_left=200),
                          today=datetime.date(2026, 12, 1))
    assert [v.message for v in report.violations] == [
        f"JAX guarantees that artifacts exported with jax 0.12.1 (released 2026-11-18) load in JAX releases up to "
        f"2027-05-18: 168 days from today (2026-12-01); the policy requires at least 200 days left. No JAX release "
        f"jaxport {J} supports leaves more days: the newest it supports is jax 0.12.1. Upgrade jaxport and "
        f"re-export with a newer JAX once one is out, or lower min_days_left."]
    # an older producer: the oldest supported release whose window leaves enough
    report = policy.check(_with_producer(tmp_path, "0.10.1"), policy.Policy("p", min_days_left=80),
                          today=datetime.date(2026, 11, 1))
    assert [v.message for v in report.violations] == [
        "JAX guarantees that artifacts exported with jax 0.10.1 (released 2026-05-20) load in JAX releases up to "
        "2026-11-20: 19 days from today (2026-11-01); the policy requires at least 80 days left. Re-export it with "
        "jax>=0.11.1,<0.13 (jax 0.11.1 needs Python >= 3.12), whose window ends on 2027-02-17 or later."]
    # once older supported releases' windows have closed, a newer supported one
    report = policy.check(_with_producer(tmp_path, "0.9.2"), policy.Policy("p", min_days_left=0),
                          today=datetime.date(2026, 12, 20))
    assert [v.message for v in report.violations] == [
        f"JAX's guarantee that JAX releases load artifacts exported with jax 0.9.2 (released 2026-03-18) ended on "
        f"2026-09-18, 93 days before today (2026-12-20); the policy requires at least 0 days left. {NEWER_RELEASE}"]
    # while one does, the advice is a supported release, inside the pin
    report = policy.check(_with_producer(tmp_path, "0.9.2"), policy.Policy("p", min_days_left=10),
                          today=datetime.date(2026, 12, 1))
    assert [v.message for v in report.violations][0].endswith(
        "Re-export it with jax>=0.10.2,<0.13, whose window ends on 2026-12-17 or later.")


NEWER = (f"the artifact was exported with jax 0.13.0, newer than every release jaxport {J} knows (the newest: jax "
         f"0.12.1, released 2026-11-18; its table lists every release up to {REVIEWED})")


def test_a_jax_newer_than_the_table_is_current_and_its_window_has_a_lower_bound(run_cli, tmp_path):
    art = _with_producer(tmp_path, "0.13.0")
    res = run_cli("check", art, "--max-producer-age", "0", "--min-days-left", "30", "--json")
    assert res.exit_code == 0, res.stdout
    out = _json(res)
    assert out["passed"] is True and out["violations"] == []
    assert out["notes"] == [
        {"rule": "max_producer_age_days", "message": f"{NEWER}: taken as current, 0 days behind jax 0.12.1 "
                                                     f"(released 2026-11-18), the newest JAX release jaxport {J} "
                                                     f"supports. Upgrade jaxport to date it."},
        {"rule": "min_days_left", "message": f"{NEWER}; the end of JAX's compatibility window for it cannot be "
                                             f"computed exactly: published after 2026-12-07, it ends on 2027-06-07 "
                                             f"or later (188 days from today, 2026-12-01), which leaves the policy's "
                                             f"30 days either way."}]
    res = run_cli("check", art, "--min-days-left", "30")
    assert res.exit_code == 0 and res.stderr == ""
    assert "note: min_days_left: the artifact was exported with jax 0.13.0, newer than every release" in res.stdout
    res = run_cli("check", art, "--min-days-left", "189", "--json")
    assert res.exit_code == 14
    assert _json(res)["violations"] == [
        {"rule": "min_days_left", "function": None, "message":
            f"{NEWER}; the end of JAX's compatibility window for it cannot be computed exactly: published after "
            f"2026-12-07, it ends on 2027-06-07 or later (188 days from today, 2026-12-01); the policy requires at "
            f"least 189 days left, which that does not show. Upgrade jaxport (pip install -U jaxport) to date it."}]


def test_a_release_missing_from_the_table_is_taken_as_published_since(tmp_path):
    report = policy.check(_with_producer(tmp_path, "0.8.4"),
                          policy.Policy("p", max_producer_age_days=0, min_days_left=30))
    assert report.passed and [r for r, _ in report.notes] == ["max_producer_age_days", "min_days_left"]
    assert report.notes[0][1].startswith(
        f"the artifact was exported with jax 0.8.4, which jaxport {J}'s table of JAX releases (every release from "
        f"jax 0.4.30 to jax 0.12.1, up to {REVIEWED}) does not list, so a release published since or a local "
        f"build: taken as current")


def test_nightly_builds_are_dated_by_their_build_date(run_cli, tmp_path):
    art = _with_producer(tmp_path, "0.12.2.dev20261130")
    res = run_cli("check", art, "--max-producer-age", "0", "--min-days-left", "179", "--json")
    assert res.exit_code == 0 and _json(res)["notes"] == []
    res = run_cli("check", art, "--min-days-left", "181", "--json")
    assert _json(res)["violations"][0]["message"] == (
        "JAX guarantees that artifacts exported with jax 0.12.2.dev20261130 (a nightly build of 2026-11-30) load in "
        "JAX releases up to 2027-05-30: 180 days from today (2026-12-01); the policy requires at least 181 days left. "
        f"No JAX release jaxport {J} supports leaves more days: the newest it supports is jax 0.12.1. Upgrade "
        f"jaxport and re-export with a newer JAX once one is out, or lower min_days_left.")
    # a nightly built after the newest supported release is not behind it
    assert policy.check(_with_producer(tmp_path, "0.12.2.dev20261120"), policy.Policy("p", max_producer_age_days=0),
                        today=datetime.date(2026, 12, 1)).passed
    old = _with_producer(tmp_path, "0.10.2.dev20260501")
    report = policy.check(old, policy.Policy("p", max_producer_age_days=30))
    assert [v.message for v in report.violations] == [
        f"the artifact was exported with jax 0.10.2.dev20260501 (a nightly build of 2026-05-01), 201 days behind jax "
        f"0.12.1 (released 2026-11-18), the newest JAX release jaxport {J} supports; the policy allows at most 30 "
        f"days. Re-export it with jax>=0.12.0,<0.13 (jax 0.12.0 needs Python >= 3.12). JAX's guarantee that later "
        f"releases load it ended on 2026-11-01 (30 days before today, 2026-12-01)."]


def test_undated_development_builds_and_pre_releases(tmp_path):
    dev = _with_producer(tmp_path, "0.9.3.dev0")
    report = policy.check(dev, policy.Policy("p", max_producer_age_days=30))
    assert [v.message for v in report.violations] == [
        f"the artifact was exported with jax 0.9.3.dev0, a pre-release of jax 0.9.3, which jaxport {J}'s table of JAX "
        f"releases does not list; jaxport cannot date it: built after 2026-03-18, it is at most 245 days behind jax "
        f"0.12.1 (released 2026-11-18), the newest JAX release jaxport {J} supports, perhaps more than the 30 days "
        f"the policy allows. Re-export it with a release jaxport can date, jax>=0.12.0,<0.13 (jax 0.12.0 needs Python "
        f">= 3.12)."]
    report = policy.check(dev, policy.Policy("p", max_producer_age_days=245))
    assert report.passed and report.notes == [("max_producer_age_days", (
        f"the artifact was exported with jax 0.9.3.dev0, a pre-release of jax 0.9.3, which jaxport {J}'s table of JAX "
        f"releases does not list: built after 2026-03-18, it is at most 245 days behind jax 0.12.1 (released "
        f"2026-11-18), the newest JAX release jaxport {J} supports, within the policy's 245 days."))]
    # a development build of the next patch release is built after the newest supported release: not behind it
    report = policy.check(_with_producer(tmp_path, "0.12.2.dev0"), policy.Policy("p", max_producer_age_days=0))
    assert report.passed and report.notes[0][1].endswith(
        f"built after 2026-11-18, it is at most 0 days behind jax 0.12.1 (released 2026-11-18), the newest JAX "
        f"release jaxport {J} supports, within the policy's 0 days.")
    rc = _with_producer(tmp_path, "0.11.0rc1")
    report = policy.check(rc, policy.Policy("p", max_producer_age_days=30, min_days_left=30))
    assert [v.message for v in report.violations] == [
        f"the artifact was exported with jax 0.11.0rc1, a pre-release of jax 0.11.0 (released 2026-07-16): "
        f"built before 2026-07-16, it is at least 125 days behind jax 0.12.1 (released 2026-11-18), the newest JAX "
        f"release jaxport {J} supports; the policy allows at most 30 days. Re-export it with jax>=0.12.0,<0.13.",
        "the artifact was exported with jax 0.11.0rc1, a pre-release of jax 0.11.0 (released 2026-07-16); jaxport "
        "cannot date it: built before 2026-07-16, JAX's guarantee that later releases load it ends by 2027-01-16, at "
        "most 46 days from today (2026-12-01), perhaps with fewer than the 30 days the policy requires. Re-export it "
        "with jax>=0.11.0,<0.13, whose window ends on 2027-01-16 or later."]


def test_older_than_the_table_and_unreadable_versions_fail(tmp_path):
    old = _with_producer(tmp_path, "0.4.26")
    report = policy.check(old, policy.Policy("p", max_producer_age_days=30, min_days_left=0))
    assert [v.message for v in report.violations] == [
        f"the artifact was exported with jax 0.4.26, older than every release jaxport {J} knows (the oldest: jax "
        f"0.4.30, released 2024-06-18): built before 2024-06-18, it is at least 883 days behind jax 0.12.1 "
        f"(released 2026-11-18), the newest JAX release jaxport {J} supports; the policy allows at most 30 days. "
        f"Re-export it with jax>=0.12.0,<0.13 (jax 0.12.0 needs Python >= 3.12).",
        f"the artifact was exported with jax 0.4.26, older than every release jaxport {J} knows (the oldest: jax "
        f"0.4.30, released 2024-06-18): built before 2024-06-18, JAX's guarantee that later releases load it ended "
        f"by 2024-12-18, at least 713 days before today (2026-12-01); the policy requires at least 0 days left. "
        f"Re-export it with jax>=0.10.2,<0.13 (jax 0.10.2 needs Python >= 3.11), whose window ends on 2026-12-17 or "
        f"later."]
    report = policy.check(_with_producer(tmp_path, "a local build"), policy.Policy("p", max_producer_age_days=30))
    assert [v.message for v in report.violations] == [
        "the artifact does not say which JAX exported it (producer.jax 'a local build' is not a JAX version), so how "
        "far that JAX lags behind the newest release jaxport supports cannot be checked. Re-export it with "
        "jax>=0.12.0,<0.13 (jax 0.12.0 needs Python >= 3.12)."]
    # the manifest reader refuses an artifact without producer.jax; the rule itself says so too
    assert age.evaluate(None, None, 10, datetime.date(2026, 12, 1))[0] == [("min_days_left", (
        "the artifact does not say which JAX exported it (producer.jax is missing), so the end of JAX's compatibility "
        "window for it cannot be computed; the policy requires at least 10 days left. Re-export it with "
        "jax>=0.10.2,<0.13 (jax 0.10.2 needs Python >= 3.11), whose window ends on 2026-12-17 or later."))]


# --- the deprecated spelling, today, and policy files ---------------------------------------------------------------


DEPRECATED = ("--max-age is deprecated: it now sets --max-producer-age (how many days the producer's JAX lags behind "
              "the newest JAX release jaxport supports); it used to count days since that JAX's release, which grows "
              "for a fresh export too. Use --max-producer-age, and --min-days-left for the days left in JAX's "
              "compatibility window.")


def test_deprecated_max_age_sets_max_producer_age(run_cli, tmp_path):
    art = _with_producer(tmp_path, "0.9.0")
    new = _json(run_cli("check", art, "--max-producer-age", "30", "--json"))
    res = run_cli("check", art, "--max-age", "30", "--json")
    assert res.exit_code == 14
    old = _json(res)
    assert old["violations"] == new["violations"] and old["rules"] == new["rules"]
    assert len(old["violations"]) == 1 and old["notes"] == [{"rule": "max_producer_age_days", "message": DEPRECATED}]
    fresh = _with_producer(tmp_path, "0.12.1")  # a fresh export passes the old spelling too
    res = run_cli("check", fresh, "--max-age", "30", "--json")
    assert res.exit_code == 0 and _json(res)["passed"] is True and res.stderr == ""
    res = run_cli("check", art, "--max-age", "302")
    assert res.exit_code == 0 and res.stderr == ""
    assert f"note: max_producer_age_days: {DEPRECATED}" in " ".join(res.stdout.split())
    res = run_cli("check", art, "--max-age", "30", "--max-producer-age", "30")
    assert res.exit_code == 2
    assert "--max-age is the deprecated name of --max-producer-age; give only --max-producer-age." in res.stderr


def test_deprecated_policy_key(tmp_path):
    p = policy.parse_policy("jaxport_policy: 1\nmax_age_days: 30\n", "policy.yaml")
    assert (p.max_producer_age_days, p.rules) == (30, ["max_producer_age_days"])
    assert p.notes == [("max_producer_age_days", "policy.yaml:2: max_age_days is deprecated: it now sets "
                                                 "max_producer_age_days (how many days the producer's JAX lags behind "
                                                 "the newest JAX release jaxport supports); it used to count days "
                                                 "since that JAX's release, which grows for a fresh export too. Use "
                                                 "max_producer_age_days, and min_days_left for the days left in JAX's "
                                                 "compatibility window.")]
    report = policy.check(_with_producer(tmp_path, "0.9.0"), p)
    assert [v.rule for v in report.violations] == ["max_producer_age_days"] and report.notes == p.notes
    with pytest.raises(PolicyFileError, match=re.escape(
            "policy.yaml:3: max_age_days is the deprecated name of max_producer_age_days; give only "
            "max_producer_age_days.")):
        policy.parse_policy("jaxport_policy: 1\nmax_producer_age_days: 3\nmax_age_days: 3\n", "policy.yaml")
    p = policy.parse_policy("jaxport_policy: 1\nmax_producer_age_days: 45\nmin_days_left: 14\n", "policy.yaml")
    assert (p.max_producer_age_days, p.min_days_left, p.notes) == (45, 14, [])
    p = policy.Policy("library")  # the library's old attribute sets the new rule, with the note
    p.max_age_days = 5
    assert (p.max_producer_age_days, p.max_age_days, p.rules) == (5, 5, ["max_producer_age_days"])
    assert [r for r, _ in p.notes] == ["max_producer_age_days"]


def test_today_comes_from_jaxport_today(run_cli, tmp_path, monkeypatch):
    assert compat.today() == datetime.date(2026, 12, 1)
    monkeypatch.setenv("JAXPORT_TODAY", "2026-13-01")
    with pytest.raises(UsageError, match=re.escape("JAXPORT_TODAY='2026-13-01': not a date; set it to YYYY-MM-DD (the "
                                                   "date jaxport takes as today, for tests) or unset it.")):
        compat.today()
    res = run_cli("check", _with_producer(tmp_path, "0.10.2"), "--min-days-left", "1")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: JAXPORT_TODAY='2026-13-01': not a date; set it to YYYY-MM-DD (the date "
                          "jaxport takes as today, for tests) or unset it.\n")
    monkeypatch.delenv("JAXPORT_TODAY")
    assert compat.today() == datetime.datetime.now(datetime.UTC).date()


def test_rules_are_evaluated_without_the_artifact():
    violations, notes = age.evaluate("0.12.0", 30, 30, datetime.date(2026, 12, 1))
    assert (violations, notes) == ([], [])
    assert age.evaluate("0.12.0", None, None) == ([], [])
    assert age.evaluate("0.12.1", 0, 168, datetime.date(2026, 12, 1)) == ([], [])


def test_ci_example_policy_age_rules(tmp_path, monkeypatch):
    """examples/ci/policy.yaml enables max_producer_age_days: it passes a fresh export (jax 0.12.1, the newest JAX
    this jaxport supports) on any day, and one for its consumers' jax 0.11.2, and fails one whose JAX has fallen
    behind. min_days_left stays commented out:
    enabled, it fails even a fresh export in the last 30 days of jax 0.12.1's window."""
    text = (REPO / "examples" / "ci" / "policy.yaml").read_text()
    assert "\nmax_producer_age_days: 90\n" in text and "\n# min_days_left: 30\n" in text
    p = policy.parse_policy(text, "policy.yaml")
    assert (p.max_producer_age_days, p.min_days_left) == (90, None)
    for today in ("2026-11-18", "2026-12-01", "2028-01-01"):
        monkeypatch.setenv("JAXPORT_TODAY", today)
        assert policy.check(_with_producer(tmp_path, "0.12.1"), p).passed
        assert policy.check(_with_producer(tmp_path, "0.11.2"), p).passed
    report = policy.check(_with_producer(tmp_path, "0.9.2"), p)
    assert [v.rule for v in report.violations] == ["max_producer_age_days"]
    p = policy.parse_policy(text.replace("\n# min_days_left", "\nmin_days_left"), "policy.yaml")
    assert p.min_days_left == 30
    monkeypatch.setenv("JAXPORT_TODAY", "2027-04-18")
    assert policy.check(_with_producer(tmp_path, "0.12.1"), p).passed
    monkeypatch.setenv("JAXPORT_TODAY", "2027-04-19")
    report = policy.check(_with_producer(tmp_path, "0.12.1"), p)
    assert [v.rule for v in report.violations] == ["min_days_left"]


def test_check_json_with_notes_and_age_violations_follows_its_schema(run_cli, tmp_path):
    schema = json.loads((REPO / "specs" / "schemas" / "cli" / "check.schema.json").read_text())
    for version, args in (("0.13.0", ["--max-age", "1", "--min-days-left", "30"]),
                          ("0.9.0", ["--max-producer-age", "1", "--min-days-left", "30"])):
        res = run_cli("check", _with_producer(tmp_path, version), *args, "--json")
        out = _json(res)
        assert out["notes"] or out["violations"]
        jsonschema.validate(out, schema)
