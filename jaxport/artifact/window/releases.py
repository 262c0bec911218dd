"""The JAX releases jaxport knows, with their dates: the one table the compatibility window is computed from.

To update it (with each jaxport release, and whenever JAX releases): run ``scripts/jax_releases.py``, which reads
PyPI and prints the rows missing here (exit 1 when one is), add them, then set :data:`REVIEWED` to the day you
checked; for each new supported release, add its :data:`STABLEHLO` row (measured under it: ``scripts/jax_releases.py
--measure``) and review the custom calls it guarantees (``tests/foundation/test_checks.py`` says when they differ from
``jaxprivate.stable.REVIEWED_STABLE_TARGETS``). The source of every date is PyPI: the upload time (UTC) of the earliest
file of that release, ``releases[VERSION][i].upload_time_iso_8601`` in https://pypi.org/pypi/jax/json;
``requires_python`` and ``yanked`` come from the same files. Keep every release from
the first row on (patch releases of an older line too, such as 0.8.3, published after 0.9.0): a version missing
from the table is read as "published after REVIEWED", so a gap would make an old release look new.
``tests/artifact/test_policy_age.py`` checks the rows' shapes and that the newest one is not newer than REVIEWED.
The table lists releases jaxport does not support too (:data:`SUPPORTED_JAX`): they date artifacts that other JAX
installations wrote.
"""

from __future__ import annotations

from collections import namedtuple


class Release(namedtuple("Release", ("date", "python", "yanked"), defaults=(False,))):
    """One JAX release: its PyPI upload date (``date``, YYYY-MM-DD, UTC), the oldest Python it installs on
    (``python``), whether PyPI marks it yanked (``yanked``: it is then dated, but never suggested). A
    ``collections.namedtuple``: ``typing.NamedTuple`` would import typing, which reading an artifact does not."""

    __slots__ = ()


#: The JAX versions this jaxport supports, as a pip version specifier: it MUST match the ``jax>=...,<...`` dependency
#: in pyproject.toml (``tests/artifact/test_policy_age.py`` checks that they agree). Producer ages count from the
#: newest table row inside it, and every ``jax>=X`` the age rules advise names a release inside it: a newer JAX needs
#: another jaxport. Change both together (the only place the age rules read the range from).
SUPPORTED_JAX = ">=0.9.1,<0.13"

#: The day this table was last checked against PyPI: every JAX release published up to this day, from the first row
#: on, is a row.
REVIEWED = "2026-12-07"

#: Every JAX release from 0.4.30 (the first with the public ``jax.export`` API) to the newest on PyPI at REVIEWED.
RELEASES: dict[str, Release] = {
    "0.4.30": Release("2024-06-18", "3.9"),
    "0.4.31": Release("2024-07-30", "3.10"),
    "0.4.32": Release("2024-09-11", "3.10", yanked=True),
    "0.4.33": Release("2024-09-16", "3.10"),
    "0.4.34": Release("2024-10-04", "3.10"),
    "0.4.35": Release("2024-10-22", "3.10"),
    "0.4.36": Release("2024-12-05", "3.10"),
    "0.4.37": Release("2024-12-10", "3.10"),
    "0.4.38": Release("2024-12-17", "3.10"),
    "0.5.0": Release("2025-01-17", "3.10"),
    "0.5.1": Release("2025-02-24", "3.10"),
    "0.5.2": Release("2025-03-05", "3.10"),
    "0.5.3": Release("2025-03-19", "3.10"),
    "0.6.0": Release("2025-04-17", "3.10"),
    "0.6.1": Release("2025-05-21", "3.10"),
    "0.6.2": Release("2025-06-17", "3.10"),
    "0.7.0": Release("2025-07-22", "3.11"),
    "0.7.1": Release("2025-08-20", "3.11"),
    "0.7.2": Release("2025-09-16", "3.11"),
    "0.8.0": Release("2025-10-15", "3.11"),
    "0.8.1": Release("2025-11-18", "3.11"),
    "0.8.2": Release("2025-12-18", "3.11"),
    "0.8.3": Release("2026-01-29", "3.11"),
    "0.9.0": Release("2026-01-20", "3.11"),
    "0.9.0.1": Release("2026-02-05", "3.11"),
    "0.9.1": Release("2026-03-02", "3.11"),
    "0.9.2": Release("2026-03-18", "3.11"),
    "0.10.0": Release("2026-04-16", "3.11"),
    "0.10.1": Release("2026-05-20", "3.11"),
    "0.10.2": Release("2026-06-17", "3.11"),
    "0.11.0": Release("2026-07-16", "3.12"),
    "0.11.1": Release("2026-08-17", "3.12"),
    "0.11.2": Release("2026-09-17", "3.12"),
    "0.12.0": Release("2026-10-19", "3.12"),
    "0.12.0.1": Release("2026-10-21", "3.12"),
    "0.12.1": Release("2026-11-18", "3.12"),
}

#: The newest StableHLO version the jaxlib of each supported JAX release reads (``stablehlo.get_current_version()``
#: there, measured), which ``export --for-jax`` writes payloads as. A supported release missing here reads at least
#: what the newest older row reads (StableHLO only grows). Add a row with each new JAX release.
STABLEHLO: dict[str, str] = {
    "0.9.1": "1.13.8",
    "0.9.2": "1.14.0",
    "0.10.0": "1.16.0",
    "0.10.1": "1.17.0",
    "0.10.2": "1.17.0",
    "0.11.0": "1.18.0",
    "0.11.1": "1.19.0",
    "0.11.2": "1.20.0",
    "0.12.0": "1.22.0",
    "0.12.0.1": "1.22.0",
    "0.12.1": "1.25.3",
}
