"""The compatibility window of an artifact, from the JAX version that wrote it (artifacts carry no timestamps).

JAX's export documentation ("Compatibility guarantees", ``docs/export/export.md``) promises that an exported
artifact can be compiled and run by a JAX up to **6 months newer** than the JAX that exported it (backward
compatibility) and up to **3 weeks older** (forward compatibility); what matters is when the components were built.
jaxport dates the producer's JAX (``producer.jax``) with the table in :mod:`.releases` and derives:

- its **producer age**: how many days the producer's JAX release lags behind :data:`CURRENT`, the newest JAX release
  this jaxport supports (``releases.SUPPORTED_JAX``, pyproject.toml's pin; 0 for it and anything newer), which does
  not grow with the calendar, and is not counted from releases this jaxport cannot export with;
- its **window**: JAX releases from 3 weeks before to 6 calendar months after that date load the artifact; the
  **days left** count from today to the window's end.

A version the table does not list is dated explicitly, never by a guess (:func:`dating`): a dated nightly build
(``X.Y.Z.devYYYYMMDD``) by its build date; a release newer than the table, or missing from it, as published after
the day the table was reviewed; one older than the table, or a pre-release, as built before a known date; anything
else as unreadable. ``$JAXPORT_TODAY`` (YYYY-MM-DD) sets the date taken as today, for tests.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import re
from collections.abc import Callable

from ..._record import dataclass
from ..._text import plural
from ..._version import __version__
from ...errors import UsageError
from ..model import Producer
from .releases import RELEASES, REVIEWED, STABLEHLO, SUPPORTED_JAX

BACKWARD_MONTHS = 6  # JAX: "up to 6 months newer than the version of JAX used for exporting"
FORWARD = _dt.timedelta(days=21)  # JAX: "up to 3 weeks older"
#: The environment variable that sets the date jaxport takes as today (YYYY-MM-DD), for tests.
TODAY_ENV = "JAXPORT_TODAY"

_PEP440 = re.compile(r"^(?P<release>\d{1,6}(?:\.\d{1,6}){0,5})(?:(?P<pre>a|b|rc)\d{1,6})?(?:\.post\d{1,6})?"
                     r"(?:\.dev(?P<dev>\d{1,14}))?(?:\+[A-Za-z0-9.]{1,64})?$")


def today() -> _dt.date:
    """The date taken as today: ``$JAXPORT_TODAY`` when set (for tests), else today's UTC date (release dates are
    UTC dates too)."""
    text = os.environ.get(TODAY_ENV, "")
    if not text:
        return _dt.datetime.now(_dt.UTC).date()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) is None:
            raise ValueError
        return _dt.date.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{TODAY_ENV}={text[:40]!r}: not a date; set it to YYYY-MM-DD (the date jaxport takes as "
                         f"today, for tests) or unset it.") from None


def add_months(day: _dt.date, months: int) -> _dt.date:
    """``day`` plus calendar months, clamped to the end of a shorter month (2026-08-31 + 6 months = 2027-02-28)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    last = (_dt.date(year + (month + 1) // 12, (month + 1) % 12 + 1, 1) - _dt.timedelta(days=1)).day  # of month
    return _dt.date(year, month + 1, min(day.day, last))


def n_days(n: int) -> str:
    """``1 day``, ``5 days``."""
    return plural(n, "day")


def window_end(released: _dt.date) -> _dt.date:
    """The last day of JAX's backward-compatibility window for a JAX released (or built) on ``released``."""
    return add_months(released, BACKWARD_MONTHS)


@functools.lru_cache(maxsize=1024)  # the table's versions are keyed again and again at import
def version_key(version: str) -> tuple[int, ...]:
    """The numeric release segment of a version (``0.9.0.1`` -> (0, 9, 0, 1)); () when it is not a version."""
    m = _PEP440.match(version)
    return tuple(int(p) for p in m.group("release").split(".")) if m else ()


@dataclass(frozen=True)
class Known:
    """A row of the release table."""

    version: str
    released: _dt.date
    python: str
    yanked: bool

    @property
    def text(self) -> str:
        return f"jax {self.version} (released {self.released.isoformat()})"


#: The table, in version order.
KNOWN: tuple[Known, ...] = tuple(sorted(
    (Known(v, _dt.date.fromisoformat(r.date), r.python, r.yanked) for v, r in RELEASES.items()),
    key=lambda k: version_key(k.version)))
#: The newest release jaxport knows: the latest date (ties: the higher version).
NEWEST: Known = max(KNOWN, key=lambda k: (k.released, version_key(k.version)))
OLDEST: Known = KNOWN[0]
HIGHEST: Known = KNOWN[-1]


def _supported_range(spec: str) -> tuple[str, str]:
    m = re.fullmatch(r">=(\d+(?:\.\d+)*),<(\d+(?:\.\d+)*)", spec)
    if m is None:
        raise ValueError(f"releases.SUPPORTED_JAX={spec!r}: not '>=X,<Y'; write pyproject.toml's jax pin there.")
    return m.group(1), m.group(2)


#: The JAX versions this jaxport supports: ``jax>=SUPPORTED_FROM,<SUPPORTED_BELOW`` (``releases.SUPPORTED_JAX``).
SUPPORTED_FROM, SUPPORTED_BELOW = _supported_range(SUPPORTED_JAX)


def supported(version: str) -> bool:
    """Whether this jaxport supports (exports with) JAX ``version``: inside :data:`SUPPORTED_JAX`; a pre-release of
    the first unsupported version is outside, as for pip."""
    key = version_key(version)
    return bool(key) and version_key(SUPPORTED_FROM) <= key < version_key(SUPPORTED_BELOW)


#: The releases the age rules may advise (``jax>=X``): supported, not yanked, in version order.
ADVISABLE: tuple[Known, ...] = tuple(k for k in KNOWN if supported(k.version) and not k.yanked)
#: The newest release this jaxport supports (the latest date among the releases below :data:`SUPPORTED_BELOW`, yanked
#: ones aside; ties: the higher version). Producer ages count from it: a release this jaxport cannot export with is no
#: yardstick for its exports.
CURRENT: Known = max([k for k in KNOWN if version_key(k.version) < version_key(SUPPORTED_BELOW) and not k.yanked]
                     or KNOWN, key=lambda k: (k.released, version_key(k.version)))
#: Every release published up to this day is in the table.
TABLE_REVIEWED = _dt.date.fromisoformat(REVIEWED)
_BY_VERSION = {k.version: k for k in KNOWN}


@dataclass(frozen=True)
class Dating:
    """When the JAX that wrote an artifact was released (or built), as far as the table tells.

    ``kind`` is one of ``release`` and ``nightly`` (``released`` is exact: the PyPI date, or the build date of a
    ``.devYYYYMMDD`` version); ``newer`` and ``unlisted`` (a release not in the table: published after ``after``,
    the day the table was reviewed; a pre-release newer than the table: built after its newest release);
    ``unreleased`` (a pre-release of a version the table does not list: built after ``after``, the release before
    it); ``older`` and ``prerelease`` (older than the table, or a pre-release of a listed release: built before
    ``before``); ``unreadable`` (not a JAX version, or none).
    """

    version: str
    kind: str
    released: _dt.date | None = None
    after: _dt.date | None = None
    before: _dt.date | None = None
    python: str | None = None  # the oldest Python of the producer's release, when known

    @property
    def final(self) -> bool:
        """Whether the version names a release (not a pre-release or development build)."""
        m = _PEP440.match(self.version)
        return m is not None and m.group("pre") is None and m.group("dev") is None

    @property
    def made(self) -> str:
        """How the version came to be, for a message: releases are published, other versions built."""
        return "published" if self.final else "built"

    @property
    def text(self) -> str:
        """The producer's JAX for a message: the version and what jaxport knows about its date."""
        v, j = self.version, __version__
        if self.kind == "release":
            return f"jax {v} (released {_iso(self.released)})"
        if self.kind == "nightly":
            return f"jax {v} (a nightly build of {_iso(self.released)})"
        if self.kind == "newer":
            return (f"jax {v}, newer than every release jaxport {j} knows (the newest: jax {HIGHEST.version}, "
                    f"released {HIGHEST.released}; its table lists every release up to {REVIEWED})")
        if self.kind == "unlisted":
            return (f"jax {v}, which jaxport {j}'s table of JAX releases (every release from jax {OLDEST.version} to "
                    f"jax {HIGHEST.version}, up to {REVIEWED}) does not list, so a release published since or a local "
                    f"build")
        if self.kind == "unreleased":
            return (f"jax {v}, a pre-release of jax {_release_of(v)}, which jaxport {j}'s table of JAX releases does "
                    f"not list")
        if self.kind == "older":
            return (f"jax {v}, older than every release jaxport {j} knows (the oldest: jax {OLDEST.version}, "
                    f"released {OLDEST.released})")
        if self.kind == "prerelease":
            return f"jax {v}, a pre-release of {_BY_VERSION[_release_of(v)].text}"
        return "producer.jax is missing" if not v else f"producer.jax {v!r} is not a JAX version"

    def producer_age(self) -> int | None:
        """Days this JAX lags behind :data:`CURRENT` (0 when it is as new or newer), when the date is exact."""
        return max(0, (CURRENT.released - self.released).days) if self.released is not None else None

    def max_producer_age(self) -> int | None:
        """For a JAX built after a known date: the most days it can lag behind :data:`CURRENT`."""
        return max(0, (CURRENT.released - self.after).days) if self.after is not None else None

    def min_producer_age(self) -> int | None:
        """For a JAX built before a known date: the fewest days it can lag behind :data:`CURRENT`."""
        return max(0, (CURRENT.released - self.before).days) if self.before is not None else None


def _iso(day: _dt.date | None) -> str:
    return day.isoformat() if day else "?"


def _release_of(version: str) -> str:
    m = _PEP440.match(version)
    return m.group("release") if m else version


def _nightly_date(digits: str | None) -> _dt.date | None:
    if digits is None or len(digits) != 8:
        return None
    try:
        day = _dt.date(int(digits[:4]), int(digits[4:6]), int(digits[6:]))
    except ValueError:
        return None
    return day if day.year >= 2018 else None


def dating(version: object) -> Dating:
    """Date the JAX version an artifact records (``producer.jax``); see :class:`Dating`."""
    text = version.strip() if isinstance(version, str) else None
    m = _PEP440.match(text) if text else None
    if text is None or m is None:
        return Dating("" if version is None else str(version)[:64], "unreadable")
    release = m.group("release")
    key = version_key(text)
    known = _BY_VERSION.get(release)
    nightly = _nightly_date(m.group("dev"))
    if nightly is not None:
        return Dating(text, "nightly", released=nightly, python=known.python if known else None)
    final = m.group("pre") is None and m.group("dev") is None
    if key < version_key(OLDEST.version):
        return Dating(text, "older", before=OLDEST.released)
    if key > version_key(HIGHEST.version):
        # A release newer than the table was published after it was reviewed; a pre-release of one was built after
        # the newest release the table has before it.
        return Dating(text, "newer", after=TABLE_REVIEWED if final else HIGHEST.released)
    if known is None and final:
        return Dating(text, "unlisted", after=TABLE_REVIEWED)
    if known is None:  # a pre-release of a version never released: built after the release before it
        before_it = [k for k in KNOWN if version_key(k.version) < key]
        return Dating(text, "unreleased", after=max(k.released for k in before_it))
    if final:  # a listed release (a local label, +cuda12, is the same release)
        return Dating(text, "release", released=known.released, python=known.python)
    return Dating(text, "prerelease", before=known.released, python=known.python)


def first_release(ok: Callable[[Known], bool], at_least: str = "", *, supported_only: bool = True) -> Known | None:
    """The oldest version X, not older than ``at_least`` where a release allows, such that every release this jaxport
    supports (:data:`ADVISABLE`; with ``supported_only=False``, every release it knows) from X on, yanked ones aside,
    passes ``ok``: what ``jax>=X`` means in a message. None when the highest of them does not pass."""
    rows = ADVISABLE if supported_only else tuple(k for k in KNOWN if not k.yanked)
    found = None
    for k in reversed(rows):
        if not ok(k) or version_key(k.version) < version_key(at_least):
            break
        found = k
    if found is None and rows and ok(rows[-1]):
        found = rows[-1]  # at_least is newer than every candidate: the highest one is the advice
    return found


def requirement(target: Known) -> str:
    """``jax>=X,<Y``: ``target`` and the later releases this jaxport supports (pip stays inside its pin)."""
    return f"jax>={target.version},<{SUPPORTED_BELOW}" if supported(target.version) else f"jax>={target.version}"


def python_hint(target: Known, producer: Dating) -> str:
    """`` (it needs Python >= 3.12)`` when ``target`` needs a newer Python than the producer's JAX did."""
    if producer.python is not None and version_key(target.python) <= version_key(producer.python):
        return ""
    return f" (jax {target.version} needs Python >= {target.python})"


@dataclass(frozen=True)
class Window:
    """JAX's compatibility window for an artifact written by ``jax_version``: the JAX releases that load it."""

    jax_version: str
    dating: Dating
    loadable_from: _dt.date | None  # JAX releases from this date ...
    loadable_until: _dt.date | None  # ... to this date are guaranteed to load the artifact (exact dates only)
    oldest_jax: str | None  # the oldest known JAX release inside the window
    newest_jax: str | None  # the newest known JAX release inside the window

    @property
    def released(self) -> _dt.date | None:
        return self.dating.released

    def days_left(self, on: _dt.date | None = None) -> int | None:
        """Days until the window closes (negative: closed that many days ago); None when the date is not exact."""
        if self.loadable_until is None:
            return None
        return (self.loadable_until - (on or today())).days

    def sentence(self, on: _dt.date | None = None, written: str = "written with") -> str:
        """The window in one sentence, for ``inspect`` (``written``: how the sentence says who dates it, ``written
        for`` an artifact exported ``--for-jax``)."""
        d = self.dating
        if self.loadable_until is not None and self.loadable_from is not None:
            left = self.days_left(on) or 0
            state = f"{n_days(left)} left" if left >= 0 else f"closed {n_days(-left)} ago"
            known = f"; known releases in it: jax {self.oldest_jax} .. {self.newest_jax}" \
                if self.oldest_jax and self.newest_jax else ""
            return (f"{written} {d.text}: JAX guarantees loading by releases from "
                    f"{self.loadable_from.isoformat()} to {self.loadable_until.isoformat()} ({state}){known}")
        if d.after is not None:
            todo = "upgrade jaxport for the exact window" if d.final else \
                "re-export it with a release jaxport supports for an exact window"
            return (f"{written} {d.text}: JAX guarantees loading by releases until {window_end(d.after)} or "
                    f"later; {todo}")
        if d.before is not None:
            return (f"{written} {d.text}: JAX's guarantee that later releases load it ends by "
                    f"{window_end(d.before)}; re-export it with a release jaxport supports for an exact window")
        return f"the JAX that wrote it is unknown ({d.text}), and so is JAX's compatibility window for it"


def serializer_version(producer: Producer) -> str:
    """The version that dates an artifact's window: the jaxlib that serialized it (``producer.jaxlib``), as JAX
    itself dates the window by the jaxlib build, else ``producer.jax``.

    jax and jaxlib releases share version numbers and dates; in a mixed install (jax 0.12.0.1 over jaxlib 0.11.2) the
    payload's StableHLO and serializer are the jaxlib's, so dating by the jax version would promise a window one to
    two months too late. Only when both versions are dated and the jaxlib is the older: anything else is judged by
    ``producer.jax``, so that a version the table cannot date is still reported as such. An artifact exported
    ``--for-jax`` an older JAX is dated by that JAX (``producer.for_jax``): its payloads are what that JAX writes.
    """
    if producer.for_jax is not None:  # export --for-jax: written for that JAX, its payloads as that JAX writes them
        return producer.for_jax
    jaxlib, jax = producer.jaxlib, producer.jax
    if (dating(jaxlib).released is not None and dating(jax).released is not None
            and version_key(jaxlib) < version_key(jax)):
        return jaxlib
    return jax


def window(jax_version: object) -> Window:
    """The compatibility window of an artifact written with ``jax_version`` (its ``producer.jax``)."""
    d = dating(jax_version)
    if d.released is None:
        return Window(d.version, d, None, None, None, None)
    start, end = d.released - FORWARD, window_end(d.released)
    inside = [k.version for k in KNOWN if start <= k.released <= end and not k.yanked]
    return Window(d.version, d, start, end, inside[0] if inside else None, inside[-1] if inside else None)


#: StableHLO's promise for a portable artifact: StableHLO releases up to this many years newer than the one that
#: wrote it read it (the StableHLO compatibility RFC: "5 years of backward compatibility").
STABLEHLO_BACKWARD_YEARS = 5


def _triple(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")) if text and re.fullmatch(r"\d{1,4}(\.\d{1,4}){2}", text) else ()


@dataclass(frozen=True)
class Reach:
    """jaxport's reach for an artifact: the StableHLO its payloads are written as, the supported JAX releases whose
    StableHLO reads it, and until when StableHLO promises that newer releases read it. jaxport runs a payload from
    its StableHLO when JAX refuses its serialization as too old (``payload.deserialize``), so the artifact lives as
    long as StableHLO reads it, not as long as JAX's window."""

    stablehlo: str | None  # the newest StableHLO version among the payloads
    oldest_jax: str | None  # the oldest supported JAX whose StableHLO reads that version
    readable_until: _dt.date | None  # StableHLO's promise, from the day the payload was written

    def days_left(self, on: _dt.date | None = None) -> int | None:
        return None if self.readable_until is None else (self.readable_until - (on or today())).days

    def sentence(self, on: _dt.date | None = None) -> str:
        """The reach in one sentence, for ``inspect``."""
        if self.stablehlo is None:
            return "the payloads do not say which StableHLO wrote them"
        readers = f"read by jax {self.oldest_jax} and newer" if self.oldest_jax else \
            "no supported JAX release is known to read it"
        until = f"; StableHLO promises newer readers until {self.readable_until.isoformat()} " \
                f"({n_days(self.days_left(on) or 0)} left)" if self.readable_until is not None else ""
        return (f"StableHLO {self.stablehlo}, {readers}{until}, and jaxport after 0.1.0 runs it from its "
                f"StableHLO once JAX's window closes ('jaxport upgrade' renews that window)")


def oldest_reader(stablehlo: str | None) -> str | None:
    """The oldest JAX release jaxport knows whose StableHLO reads payloads written as ``stablehlo`` (None if none
    does, or the version is not one)."""
    if not _triple(stablehlo):
        return None
    readers = sorted((v for v, h in STABLEHLO.items() if _triple(h) >= _triple(stablehlo)), key=version_key)
    return readers[0] if readers else None


def reach(producer: Producer, stablehlo_versions: list[str | None]) -> Reach:
    """The reach of an artifact whose payloads are written as ``stablehlo_versions`` by ``producer``."""
    known = [v for v in stablehlo_versions if _triple(v)]
    if not known:
        return Reach(None, None, None)
    newest = max(known, key=_triple)
    written = dating(serializer_version(producer))
    start = written.released or written.after or written.before
    until = add_months(start, 12 * STABLEHLO_BACKWARD_YEARS) if start is not None else None
    return Reach(newest, oldest_reader(newest), until)
