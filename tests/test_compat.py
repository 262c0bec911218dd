"""The compatibility window derived from the JAX version that wrote an artifact."""

from __future__ import annotations

import datetime
from pathlib import Path

from jaxport.artifact.compat import RELEASES, window

TODAY = datetime.date(2026, 11, 29)


def test_window_of_a_known_release():
    w = window("0.10.2")
    assert (w.released, w.approximate) == (datetime.date(2026, 10, 21), False)
    assert w.loadable_from == datetime.date(2026, 9, 30) and w.loadable_until == datetime.date(2027, 4, 22)
    assert w.age_days(TODAY) == 39 and w.days_left(TODAY) == 144
    assert w.sentence(TODAY) == ("written with jax 0.10.2 (2026-10-21): JAX guarantees loading by releases from "
                                 "2026-09-30 to 2027-04-22 (144 days left); known releases in it: jax 0.10.1 .. "
                                 "0.10.2")


def test_unknown_versions_are_placed_by_their_neighbours():
    assert window("0.10.3").released == datetime.date(2026, 10, 21) and window("0.10.3").approximate
    old = window("0.3.25")
    assert old.approximate and old.days_left(TODAY) < 0
    assert old.sentence(TODAY).startswith("written with jax 0.3.25 (before 2024-06-18): ")
    assert "(closed 711 days ago)" in old.sentence(TODAY)


def test_release_table_is_ordered_by_version_and_date():
    def key(v):
        return tuple(int(x) for x in v.split("."))

    versions = sorted(RELEASES, key=key)
    dates = [RELEASES[v] for v in versions]
    assert dates == sorted(dates)


def test_inspect_states_the_window(run_cli):
    golden = Path(__file__).parent / "golden" / "1.0" / "mlp.jaxport"
    out = run_cli("inspect", golden).stdout
    assert "compatibility: written with jax 0.10.2 (2026-10-21): JAX guarantees loading by releases from " \
           "2026-09-30 to 2027-04-22" in out
