"""Plain helpers shared by the tests, imported absolutely (``from tests.support import EXAMPLES``)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
