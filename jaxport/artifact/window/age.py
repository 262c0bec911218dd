"""The two policy rules about the producer's JAX: ``max_producer_age_days`` and ``min_days_left`` (``specs/POLICY.md``).

Producer ages count from :data:`.compat.CURRENT`, the newest JAX release this jaxport supports (pyproject.toml's pin,
``releases.SUPPORTED_JAX``), and every ``jax>=X`` a message advises is a release it supports: a fresh export is never
behind a JAX its user cannot export with. Where only a newer JAX (and so another jaxport) would do, the message says
so, naming that JAX and the Python it needs.

Each rule gives a violation (one line: what, why, what to do) or passes, possibly with a note when jaxport could
not date the producer's JAX exactly but could still decide. How each kind of version is decided (see
:class:`.compat.Dating`):

========================  ==============================================  ============================================
producer.jax              max_producer_age_days                           min_days_left
========================  ==============================================  ============================================
a listed release,         exact: days behind the newest supported release exact: days until its window ends
a dated nightly
newer than the table,     passes: taken as current (0 days behind),       passes when the window's earliest possible
or missing from it        with a note to upgrade jaxport                  end leaves enough days (with a note), else
                                                                          fails: upgrade jaxport
older than the table,     fails (it lags at least the known bound, or     fails (its window ends by a known date, or
a pre-release             cannot be dated): re-export                     cannot be dated): re-export
not a version             fails: re-export                                fails: re-export
========================  ==============================================  ============================================
"""

from __future__ import annotations

import datetime as _dt

from ..._version import __version__
from . import compat
from .compat import CURRENT, Dating, Known, first_release, n_days, python_hint, requirement, supported, window_end
from .releases import SUPPORTED_JAX

#: The rule names.
PRODUCER_AGE = "max_producer_age_days"
DAYS_LEFT = "min_days_left"

#: What a deprecated ``max_age_days`` (``--max-age``) now means.
DEPRECATED_MAX_AGE = (
    "{old} is deprecated: it now sets {new} (how many days the producer's JAX lags behind the newest JAX release "
    "jaxport supports); it used to count days since that JAX's release, which grows for a fresh export too. Use {new}, "
    "and {left} for the days left in JAX's compatibility window.")


def _newest() -> str:
    return f"{CURRENT.text}, the newest JAX release jaxport {__version__} supports"


def _left(end: _dt.date, today: _dt.date) -> str:
    days = (end - today).days
    if days >= 0:
        return f"JAX guarantees that releases up to {end} load it as it is ({n_days(days)} from today, {today})"
    return f"JAX's guarantee that later releases load it ended on {end} ({n_days(-days)} before today, {today})"


def _fix(target: Known | None, d: Dating, dated: bool = False) -> str:
    """What to do: re-export with ``jax>=X,<Y`` (``dated``: stressing that X is a release jaxport can date)."""
    if target is None:
        return f"Re-export it with a JAX release jaxport {__version__} supports (jax{SUPPORTED_JAX})"
    what = "a release jaxport can date, " if dated else ""
    return f"Re-export it with {what}{requirement(target)}{python_hint(target, d)}"


def _since(d: Dating) -> str:
    """The version the advice must not go below: the producer's own release, when it has one."""
    return d.version if d.kind != "unreadable" else ""


def producer_age(d: Dating, limit: int, today: _dt.date) -> tuple[str | None, str | None]:
    """The ``max_producer_age_days`` rule: (violation, note), at most one of them set."""
    target = first_release(lambda k: (CURRENT.released - k.released).days <= limit, _since(d))
    fix = _fix(target, d)
    age = d.producer_age()
    if d.released is not None and age is not None:
        if age <= limit:
            return None, None
        return (f"the artifact was exported with {d.text}, {n_days(age)} behind {_newest()}; the policy allows at "
                f"most {n_days(limit)}. {fix}. {_left(window_end(d.released), today)}."), None
    most = d.max_producer_age()
    if most is not None and d.after is not None:
        if most == 0 and d.final:
            return None, (f"the artifact was exported with {d.text}: taken as current, 0 days behind {_newest()}. "
                          f"Upgrade jaxport to date it.")
        if most <= limit:
            return None, (f"the artifact was exported with {d.text}: {d.made} after {d.after}, it is at most "
                          f"{n_days(most)} behind {_newest()}, within the policy's {n_days(limit)}.")
        return (f"the artifact was exported with {d.text}; jaxport cannot date it: {d.made} after {d.after}, it is "
                f"at most {n_days(most)} behind {_newest()}, perhaps more than the {n_days(limit)} the policy allows. "
                f"{_fix(target, d, dated=True)}."), None
    bound = d.min_producer_age()
    if bound is not None and d.before is not None:
        if bound > limit:
            return (f"the artifact was exported with {d.text}: built before {d.before}, it is at least {n_days(bound)} "
                    f"behind {_newest()}; the policy allows at most {n_days(limit)}. {fix}."), None
        lag = f"it is at least {n_days(bound)} behind {_newest()}, perhaps more than the {n_days(limit)}" if bound \
            else f"it may lag behind {_newest()}, by more than the {n_days(limit)}"
        return (f"the artifact was exported with {d.text}; jaxport cannot date it: built before {d.before}, {lag} "
                f"the policy allows. {_fix(target, d, dated=True)}."), None
    return (f"the artifact does not say which JAX exported it ({d.text}), so how far that JAX lags behind the newest "
            f"release jaxport supports cannot be checked. {fix}."), None


def _no_release_leaves(d: Dating, minimum: int, today: _dt.date) -> str:
    """The advice when no release this jaxport supports leaves ``minimum`` days: what the newest one leaves, and that
    more takes a newer JAX, so a jaxport that supports it (named, with the Python it needs, when one is out)."""
    end = window_end(CURRENT.released)
    left = (end - today).days
    current = d.released is not None and d.released >= CURRENT.released  # as new as any supported release
    if current:
        head = f"No JAX release jaxport {__version__} supports leaves more days: the newest it supports is jax " \
               f"{CURRENT.version}."
    else:
        state = f"ends on {end} ({n_days(left)} from today)" if left >= 0 else \
            f"ended on {end} ({n_days(-left)} before today)"
        head = (f"No JAX release jaxport {__version__} supports leaves {n_days(minimum)}: the window of the newest, "
                f"{CURRENT.text}, {state}.")
    beyond = first_release(lambda k: (window_end(k.released) - today).days >= minimum, _since(d),
                           supported_only=False)
    if beyond is not None and not supported(beyond.version):
        upgrade = (f"Upgrade jaxport to a version that supports {requirement(beyond)}{python_hint(beyond, d)} and "
                   f"re-export with it")
    else:
        upgrade = "Upgrade jaxport and re-export with a newer JAX once one is out"
    if current:
        alt = ", or lower min_days_left" if d.released is not None and window_end(d.released) >= today else ""
    else:
        alt = f", or re-export with jax {CURRENT.version}{python_hint(CURRENT, d)} and lower min_days_left" \
            if left >= 0 else ""
    return f"{head} {upgrade}{alt}."


def _days_fix(target: Known | None, d: Dating, minimum: int, today: _dt.date, dated: bool = False) -> str:
    """What to do about ``min_days_left``: re-export with ``jax>=X,<Y``, or what :func:`_no_release_leaves` says."""
    if target is None:
        return _no_release_leaves(d, minimum, today)
    return f"{_fix(target, d, dated)}, whose window ends on {window_end(target.released)} or later."


def days_left(d: Dating, minimum: int, today: _dt.date) -> tuple[str | None, str | None]:
    """The ``min_days_left`` rule: (violation, note), at most one of them set."""
    target = first_release(lambda k: (window_end(k.released) - today).days >= minimum, _since(d))
    fix = _days_fix(target, d, minimum, today)
    wants = f"the policy requires at least {n_days(minimum)} left"
    if d.released is not None:
        end = window_end(d.released)
        left = (end - today).days
        if left >= minimum:
            return None, None
        if left >= 0:
            return (f"JAX guarantees that artifacts exported with {d.text} load in JAX releases up to {end}: "
                    f"{n_days(left)} from today ({today}); {wants}. {fix}"), None
        return (f"JAX's guarantee that JAX releases load artifacts exported with {d.text} ended on {end}, "
                f"{n_days(-left)} before today ({today}); {wants}. {fix}"), None
    if d.after is not None:
        earliest = window_end(d.after)
        left = (earliest - today).days
        why = (f"the artifact was exported with {d.text}; the end of JAX's compatibility window for it cannot be "
               f"computed exactly: {d.made} after {d.after}, it ends on {earliest} or later ({n_days(left)} from "
               f"today, {today})")
        if left >= minimum:
            return None, f"{why}, which leaves the policy's {n_days(minimum)} either way."
        todo = "Upgrade jaxport (pip install -U jaxport) to date it." if d.kind in ("newer", "unlisted") and d.final \
            else _days_fix(target, d, minimum, today, dated=True)
        return f"{why}; {wants}, which that does not show. {todo}", None
    if d.before is not None:
        latest = window_end(d.before)
        left = (latest - today).days
        if left < 0:
            state = f"ended by {latest}, at least {n_days(-left)} before today ({today})"
        else:
            state = f"ends by {latest}, at most {n_days(left)} from today ({today})"
        if left < minimum:
            return (f"the artifact was exported with {d.text}: built before {d.before}, JAX's guarantee that later "
                    f"releases load it {state}; {wants}. {fix}"), None
        return (f"the artifact was exported with {d.text}; jaxport cannot date it: built before {d.before}, JAX's "
                f"guarantee that later releases load it {state}, perhaps with fewer than the {n_days(minimum)} the "
                f"policy requires. {fix}"), None
    return (f"the artifact does not say which JAX exported it ({d.text}), so the end of JAX's compatibility window "
            f"for it cannot be computed; {wants}. {fix}"), None


def evaluate(producer_jax: object, max_producer_age_days: int | None, min_days_left: int | None,
             today: _dt.date | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Both rules for an artifact whose manifest records ``producer_jax``: ([(rule, violation)], [(rule, note)])."""
    on = today or compat.today()
    d = compat.dating(producer_jax)
    violations: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    for rule, limit, fn in ((PRODUCER_AGE, max_producer_age_days, producer_age),
                            (DAYS_LEFT, min_days_left, days_left)):
        if limit is None:
            continue
        violation, note = fn(d, limit, on)
        if violation:
            violations.append((rule, violation))
        if note:
            notes.append((rule, note))
    return violations, notes
