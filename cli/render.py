"""rich rendering helpers shared by the commands."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["escape", "print_json", "stderr", "stdout"]

_PIPE_WIDTH = 160  # when output is not a terminal, wide enough that signatures stay on one line


def escape(text: str) -> str:
    """Text shown literally by rich (``f32[batch, 784]`` is not markup)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _console(err: bool) -> Console:
    from rich.console import Console

    stream = sys.stderr if err else sys.stdout
    width = None if getattr(stream, "isatty", lambda: False)() else _PIPE_WIDTH
    return Console(stderr=err, width=width, highlight=False, soft_wrap=True)


def stdout() -> Console:
    return _console(False)


def stderr() -> Console:
    return _console(True)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")
