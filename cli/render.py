"""rich rendering helpers shared by the commands.

Text from outside jaxport (manifest fields, file names, YAML text, module names) may hold terminal escapes or rich
markup. A renderer shows it through :func:`escape` (inside markup) or :func:`plain` (printed with
``markup=False``); both apply ``jaxport._text.visible``, the one rule for showing foreign text. The consoles of
:func:`stdout` and :func:`stderr` apply the same rule once more to every piece of text they write, so that a
string a renderer forgot to escape still cannot reach the terminal as a control sequence (only rich's own style
and cursor codes do). ``--json`` output is ``json.dumps`` with ``ensure_ascii``: every control, bidirectional and
non-ASCII character is a ``\\uXXXX`` escape.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from jaxport._text import visible

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment

__all__ = ["escape", "plain", "plain_lines", "print_json", "stderr", "stdout"]

_PIPE_WIDTH = 160  # when output is not a terminal, wide enough that signatures stay on one line


def plain(text: object) -> str:
    """Foreign text as shown by a ``markup=False`` print: every control and invisible character escaped."""
    return visible(str(text))


def plain_lines(text: str) -> str:
    """Foreign multi-line text (a module's MLIR) as :func:`plain` shows it, each line made visible on its own."""
    return visible(text, newlines=True)


def escape(text: object) -> str:
    """Foreign text shown literally inside rich markup: control and invisible characters escaped (``\\x1b``), and
    markup (``f32[batch, 784]``, ``[link=...]``) not interpreted."""
    from rich.markup import escape as rich_escape

    escaped = rich_escape(visible(str(text)))
    trailing = len(escaped) - len(escaped.rstrip("\\"))
    return escaped + "\\" if trailing % 2 else escaped  # an odd backslash would escape the tag that follows


@functools.cache
def _visible_console() -> type[Console]:
    """rich's ``Console``, with every text segment made visible (``jaxport._text.visible``, line breaks kept); the
    control segments rich produces itself (cursor movement of a progress bar) pass as they are. rich is imported
    here, on first use, so that ``jaxport --help`` stays light."""
    from rich.console import Console

    class VisibleConsole(Console):
        def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
            for segment in super().render(renderable, options):
                text = segment.text
                if segment.control or text.isprintable() and text.isascii():
                    yield segment
                else:
                    shown = visible(text, newlines=True)
                    yield segment if shown == text else segment._replace(text=shown)

    return VisibleConsole


def _console(err: bool) -> Console:
    stream = sys.stderr if err else sys.stdout
    width = None if getattr(stream, "isatty", lambda: False)() else _PIPE_WIDTH
    return _visible_console()(stderr=err, width=width, highlight=False, soft_wrap=True, emoji=False)


def stdout() -> Console:
    return _console(False)


def stderr() -> Console:
    return _console(True)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")
