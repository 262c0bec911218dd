"""The compatibility window derived from the JAX version that wrote an artifact (``jaxport.artifact.window.compat``)."""

from __future__ import annotations

import datetime
from pathlib import Path

from jaxport import _version
from jaxport.artifact.window import compat
from jaxport.artifact.window.compat import ADVISABLE, CURRENT, KNOWN, first_release, requirement, version_key, window
from jaxport.artifact.window.releases import REVIEWED

TODAY = datetime.date(2026, 11, 29)


def test_window_of_a_known_release():
    w = window("0.10.2")
    assert (w.released, w.dating.kind) == (datetime.date(2026, 6, 17), "release")
    assert w.loadable_from == datetime.date(2026, 5, 27) and w.loadable_until == datetime.date(2026, 12, 17)
    assert w.days_left(TODAY) == 18
    assert w.sentence(TODAY) == ("written with jax 0.10.2 (released 2026-06-17): JAX guarantees loading by releases "
                                 "from 2026-05-27 to 2026-12-17 (18 days left); known releases in it: jax 0.10.2 .. "
                                 "0.12.1")
    assert window("0.9.0").sentence(TODAY).endswith("to 2026-07-20 (closed 132 days ago); known releases in it: jax "
                                                    "0.8.3 .. 0.11.0")


def test_versions_outside_the_table_are_not_placed_by_guess():
    newer = window("0.13.0")
    assert newer.loadable_until is None and newer.days_left(TODAY) is None
    assert newer.sentence(TODAY) == (
        f"written with jax 0.13.0, newer than every release jaxport {_version.__version__} knows (the newest: jax "
        f"0.12.1, released 2026-11-18; its table lists every release up to {REVIEWED}): JAX guarantees loading by "
        f"releases until {compat.window_end(datetime.date.fromisoformat(REVIEWED))} or later; upgrade jaxport for the "
        f"exact window")
    old = window("0.3.25")
    assert old.dating.kind == "older" and old.loadable_until is None
    assert old.sentence(TODAY).endswith("(the oldest: jax 0.4.30, released 2024-06-18): JAX's guarantee that later "
                                        "releases load it ends by 2024-12-18; re-export it with a release jaxport "
                                        "supports for an exact window")
    assert window("").sentence() == "the JAX that wrote it is unknown (producer.jax is missing), and so is JAX's " \
                                    "compatibility window for it"


def test_advice_names_a_supported_version_every_later_supported_release_satisfies():
    recent = first_release(lambda k: (CURRENT.released - k.released).days <= 30)
    assert recent is not None and recent.version == "0.12.0" and requirement(recent) == "jax>=0.12.0,<0.13"
    assert all((CURRENT.released - k.released).days <= 30 for k in ADVISABLE
               if version_key(k.version) >= version_key(recent.version))
    assert first_release(lambda k: False) is None
    # only releases this jaxport supports (jax>=0.9.1,<0.13), however many older or newer ones pass
    assert first_release(lambda k: True).version == "0.9.1"  # type: ignore[union-attr]
    assert first_release(lambda k: k.version.startswith("0.8") or k.version.startswith("0.9.0")) is None
    assert first_release(lambda k: k.version.startswith("0.13")) is None
    assert first_release(lambda k: k.version.startswith("0.12")).version == "0.12.0"  # type: ignore[union-attr]
    # not below the producer's own release when that one would do; the highest supported one above it
    assert first_release(lambda k: True, "0.10.1rc1").version == "0.10.1"  # type: ignore[union-attr]
    assert first_release(lambda k: True, "0.13.0").version == "0.12.1"  # type: ignore[union-attr]
    # over every known release (for "upgrade jaxport to a version that supports ..."), outside the pin
    anywhere = first_release(lambda k: True, "0.11.0rc1", supported_only=False)
    assert anywhere is not None and anywhere.version == "0.11.0" and requirement(anywhere) == "jax>=0.11.0,<0.13"
    assert first_release(lambda k: True, "0.13.0", supported_only=False).version == "0.12.1"  # type: ignore[union-attr]
    # a yanked release is never the advice
    assert first_release(lambda k: True, "0.4.32", supported_only=False).version == "0.4.33"  # type: ignore[union-attr]
    assert all(not k.yanked for k in ADVISABLE) and any(k.yanked for k in KNOWN)


def test_inspect_states_the_window(run_cli, monkeypatch):
    monkeypatch.setenv("JAXPORT_TODAY", "2026-11-29")
    golden = Path(__file__).parents[1] / "golden" / "1.0" / "mlp.jaxport"
    out = run_cli("inspect", golden).stdout
    assert "compatibility: written with jax 0.10.2 (released 2026-06-17): JAX guarantees loading by releases from " \
           "2026-05-27 to 2026-12-17 (18 days left)" in out
