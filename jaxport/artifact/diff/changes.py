"""One difference between two artifacts, as ``diff`` reports it: its severity, a stable kind, where and what.

Severities: *breaking* (a caller of the old artifact may fail with, or misread, the new one), *compatible* (every
such caller keeps working), and *undecided* (jaxport could prove neither; ``--fail-on breaking`` counts it as
breaking, for safety, and says that it was not proven breaking).

Who a change breaks (``breaks``): its *callers* (a breaking or undecided change), or only those who *rebind* its
weights (``jaxport rebind`` gives the bound tensors new values of the same names, shapes and dtypes: a bound tensor
added, removed or reshaped is compatible for callers, who pass the same inputs and get the same outputs, and breaks
rebinding), or no one (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BREAKING = "breaking"
COMPATIBLE = "compatible"
UNDECIDED = "undecided"

#: Who a change breaks (``Change.breaks``).
CALLERS = "callers"
REBINDERS = "rebinders"


@dataclass(frozen=True)
class Change:
    """One difference. ``kind`` is a stable name (see specs/CLI.md); ``path`` says where, in manifest terms."""

    severity: str
    kind: str
    function: str | None
    path: str
    message: str
    old: Any = None
    new: Any = None
    #: :data:`CALLERS` for a breaking or undecided change, :data:`REBINDERS` for one that breaks only rebinding its
    #: weights (compatible for callers), None for one that breaks no one.
    breaks: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "kind": self.kind, "function": self.function, "path": self.path,
                "message": self.message, "old": self.old, "new": self.new, "breaks": self.breaks}


class Collector:
    """The changes found so far, in the order found."""

    def __init__(self) -> None:
        self.changes: list[Change] = []

    def add(self, severity: str, kind: str, function: str | None, path: str, message: str, old: Any = None,
            new: Any = None, breaks: str | None = None) -> None:
        """Record a change; ``breaks`` defaults to :data:`CALLERS` for a breaking or undecided one."""
        if breaks is None and severity in (BREAKING, UNDECIDED):
            breaks = CALLERS
        self.changes.append(Change(severity, kind, function, path, message, jsonable(old), jsonable(new), breaks))


def jsonable(v: Any) -> Any:
    """``v`` as plain JSON values (tuples become lists, other objects their text)."""
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    return str(v)
