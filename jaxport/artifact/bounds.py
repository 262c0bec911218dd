"""The one rule for a dimension variable's bounds: ``min`` (default 1) and ``max`` (default: none).

A spec's ``dims: {b: {min: 0, max: 64}}`` and a manifest's ``dims`` entry read the same way everywhere: input
checks, dimension solving, ``inspect``, ``diff`` and ``verify``. ``min: 0`` is allowed by the format and honoured
as written; a missing ``min`` is 1, since JAX's dimension variables are positive unless told otherwise.
"""

from __future__ import annotations

from .._record import dataclass

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from ..spec import DimVar

DEFAULT_MIN = 1


@dataclass(frozen=True)
class Bounds:
    """``lo <= v`` and, when ``hi`` is not None, ``v <= hi``."""

    lo: int = DEFAULT_MIN
    hi: int | None = None

    @classmethod
    def of(cls, d: DimVar | None) -> Bounds:
        """The bounds a spec's ``DimVar`` declares (``.min``, ``.max``), or the defaults when D is None (the spec
        declares none). A manifest's bounds are ``model.DimVar.bounds``, made by ``manifest.validate``."""
        if d is None:
            return cls()
        return cls(DEFAULT_MIN if d.min is None else int(d.min), None if d.max is None else int(d.max))

    def holds(self, value: int) -> bool:
        return value >= self.lo and (self.hi is None or value <= self.hi)

    def text(self, var: str) -> str:
        """``1 <= batch <= 4096``, or ``batch >= 1`` without an upper bound."""
        return f"{self.lo} <= {var} <= {self.hi}" if self.hi is not None else f"{var} >= {self.lo}"

    def to_manifest(self) -> dict[str, int | None]:
        return {"min": self.lo, "max": self.hi}

