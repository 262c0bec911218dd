"""The compatibility window of an artifact, from the JAX version that wrote it (artifacts carry no timestamps).

JAX documents that a serialized ``Exported`` keeps loading in JAX releases up to 6 months newer than the one that
wrote it (backward compatibility) and in releases up to 3 weeks older (forward compatibility); StableHLO itself
promises 5 years backward and 2 years forward. jaxport turns the writer's JAX version into a release date with the
table below and states which consumers are covered and until when.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

BACKWARD = _dt.timedelta(days=183)  # 6 months
FORWARD = _dt.timedelta(days=21)  # 3 weeks

#: Release dates of JAX versions (first publication; later patch releases of a line get their own rows). Reviewed
#: with each jaxport release; a version missing here is placed by its neighbours and marked approximate.
RELEASES: dict[str, str] = {
    "0.4.30": "2024-06-18", "0.4.31": "2024-07-29", "0.4.33": "2024-09-16", "0.4.34": "2024-10-04",
    "0.4.35": "2024-10-22", "0.4.36": "2024-12-05", "0.4.37": "2024-12-09", "0.4.38": "2024-12-17",
    "0.5.0": "2025-01-17", "0.5.1": "2025-02-24", "0.5.2": "2025-03-04", "0.5.3": "2025-03-19",
    "0.6.0": "2025-04-16", "0.6.1": "2025-05-21", "0.6.2": "2025-06-17", "0.7.0": "2025-07-22",
    "0.7.1": "2025-08-20", "0.7.2": "2025-09-16", "0.8.0": "2025-10-15", "0.8.1": "2025-11-18",
    "0.8.2": "2025-12-18", "0.9.0": "2026-01-20", "0.9.1": "2026-03-10", "0.9.2": "2026-04-08",
    "0.10.0": "2026-07-15", "0.10.1": "2026-10-14", "0.10.2": "2026-10-21",
}


def _key(version: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", version.split("+")[0].split("rc")[0].split(".dev")[0])
    return tuple(int(p) for p in parts[:3]) or (0,)


@dataclass(frozen=True)
class Window:
    jax_version: str
    released: _dt.date
    approximate: bool  # the version is not in RELEASES
    loadable_from: _dt.date  # JAX releases from this date ...
    loadable_until: _dt.date  # ... to this date are guaranteed to load the artifact
    oldest_jax: str | None  # the oldest known JAX release inside the window
    newest_jax: str | None  # the newest known JAX release inside the window

    def age_days(self, today: _dt.date | None = None) -> int:
        return ((today or _dt.date.today()) - self.released).days

    def days_left(self, today: _dt.date | None = None) -> int:
        """Days until the window closes (negative: closed that many days ago)."""
        return (self.loadable_until - (today or _dt.date.today())).days

    def as_dict(self, today: _dt.date | None = None) -> dict[str, object]:
        return {"jax": self.jax_version, "released": self.released.isoformat(), "approximate": self.approximate,
                "loadable_from": self.loadable_from.isoformat(), "loadable_until": self.loadable_until.isoformat(),
                "oldest_jax": self.oldest_jax, "newest_jax": self.newest_jax, "age_days": self.age_days(today),
                "days_left": self.days_left(today)}

    def sentence(self, today: _dt.date | None = None) -> str:
        oldest = min(RELEASES, key=_key)
        when = (f"before {self.released.isoformat()}" if _key(self.jax_version) < _key(oldest) else
                f"about {self.released.isoformat()}" if self.approximate else self.released.isoformat())
        left = self.days_left(today)
        state = f"{left} days left" if left >= 0 else f"closed {-left} days ago"
        known = f"; known releases in it: jax {self.oldest_jax} .. {self.newest_jax}" \
            if self.oldest_jax and self.newest_jax else ""
        return (f"written with jax {self.jax_version} ({when}): JAX guarantees loading by releases from "
                f"{self.loadable_from.isoformat()} to {self.loadable_until.isoformat()} ({state}){known}")


def release_date(version: str) -> tuple[_dt.date, bool]:
    """The release date of a JAX version and whether it is approximate (not in the table)."""
    if version in RELEASES:
        return _dt.date.fromisoformat(RELEASES[version]), False
    known = sorted(RELEASES, key=_key)
    older = [v for v in known if _key(v) <= _key(version)]
    base = older[-1] if older else known[0]
    return _dt.date.fromisoformat(RELEASES[base]), True


def window(jax_version: str) -> Window:
    released, approximate = release_date(jax_version)
    start, end = released - FORWARD, released + BACKWARD
    inside = [v for v in sorted(RELEASES, key=_key) if start <= _dt.date.fromisoformat(RELEASES[v]) <= end]
    return Window(jax_version, released, approximate, start, end, inside[0] if inside else None,
                  inside[-1] if inside else None)
