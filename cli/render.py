"""Rendering helpers shared by the commands: rich consoles, and plain-text documents (:class:`Document`) that print
what rich would without importing it (``inspect``'s tables).

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
import os
import sys
from collections.abc import Iterable, Mapping

from jaxport.frontend import visible

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment

__all__ = ["Document", "Table", "escape", "is_terminal", "plain", "plain_lines", "print_json", "stderr", "stdout"]

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


def _console(err: bool, stream: Any = None, environ: Mapping[str, str] | None = None) -> Console:
    """The console of :func:`stdout` or :func:`stderr`; ``stream`` and ``environ`` replace the standard stream and
    ``os.environ`` (what rich detects the terminal from), for tests."""
    shown = stream if stream is not None else sys.stderr if err else sys.stdout
    width = None if getattr(shown, "isatty", lambda: False)() else _PIPE_WIDTH
    extra: dict[str, Any] = {} if environ is None else {"_environ": environ}
    return _visible_console()(file=stream, stderr=err, width=width, highlight=False, soft_wrap=True, emoji=False,
                              **extra)


def stdout() -> Console:
    return _console(False)


def stderr() -> Console:
    return _console(True)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


# --- plain-text documents: what `inspect` prints, without importing rich when the output allows it ---------------

#: A piece of a line: text (already made visible with :func:`plain`) and a style (``""``, ``"bold"``,
#: ``"bold cyan"``, ``"green"``, ``"yellow"``: names as rich spells them).
Span = tuple[str, str]

#: SGR parameters of the style words a document uses, in the order rich writes them (attributes, then colour).
_ATTRIBUTES = {"bold": "1", "dim": "2", "italic": "3"}
_COLOURS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35", "cyan": "36"}
#: rich's box characters for a table without edges (box.HEAVY_HEAD): header separator, rule, rule crossing, body
#: separator.
_HEAD_BAR, _RULE, _CROSS, _BAR = "┃", "━", "╇", "│"


class Table:
    """A table of a document: a title, column names, and rows of cells (text, or ``(text, style)``), drawn as
    rich draws ``Table(title=..., title_justify="left", show_edge=False)``; ``right`` names the columns justified
    to the right (header included), as ``add_column(..., justify="right")``."""

    def __init__(self, title: str, columns: Iterable[str], right: Iterable[str] = ()):
        self.title = title
        self.columns = list(columns)
        self.right = frozenset(right)
        self.rows: list[list[Span]] = []
        self.row_styles: list[str] = []

    def add_row(self, *cells: str | Span, style: str = "") -> None:
        """A row; ``style`` applies to the whole row, as rich's ``add_row(..., style=...)`` (drawn by rich only)."""
        self.rows.append([(c, "") if isinstance(c, str) else c for c in cells])
        self.row_styles.append(style)


class Document:
    """Lines and tables to print at once: as plain padded text when that is exactly what rich would print (the
    common case: no rich import, a few milliseconds), else through rich (a table wider than the terminal, text
    whose width rich measures differently, a console rich treats specially)."""

    def __init__(self) -> None:
        self.blocks: list[list[Span] | Table] = []

    def line(self, *spans: str | Span) -> None:
        """A line of spans; a bare string is unstyled. Nothing in it is interpreted as markup."""
        self.blocks.append([(s, "") if isinstance(s, str) else s for s in spans])

    def table(self, table: Table) -> None:
        self.blocks.append(table)

    def print(self, err: bool = False) -> None:
        stream = sys.stderr if err else sys.stdout
        text = self.render_plain(stream, os.environ)
        if text is None:
            self.render_rich(err)
        else:
            stream.write(text)
            stream.flush()

    def render_plain(self, stream: Any, environ: Mapping[str, str]) -> str | None:
        """The document as rich would print it to ``stream`` under ``environ``; None where only rich can say."""
        mode = _plain_mode(stream, environ)
        if mode is None:
            return None
        colour, width = mode
        out: list[str] = []
        for block in self.blocks:
            if isinstance(block, Table):
                drawn = _draw_table(block, colour, width)
                if drawn is None:
                    return None
                out.extend(drawn)
            else:
                out.append("".join(_styled(text, style, colour) for text, style in _merged(block)))
        return "".join(line + "\n" for line in out)

    def render_rich(self, err: bool = False, console: Console | None = None) -> None:
        """Print the document through rich (``console``: default :func:`stdout` or :func:`stderr`)."""
        from rich.table import Table as RichTable
        from rich.text import Text

        out = console or _console(err)
        for block in self.blocks:
            if isinstance(block, Table):
                t = RichTable(title=block.title, title_justify="left", show_edge=False)
                for col in block.columns:
                    t.add_column(col, justify="right" if col in block.right else "left")
                for row, row_style in zip(block.rows, block.row_styles):
                    t.add_row(*(Text(text, style=style) for text, style in row), style=row_style or None)
                out.print(t)
            else:
                out.print(Text.assemble(*block))


def _merged(spans: list[Span]) -> list[Span]:
    """Neighbouring spans of one style joined, as rich writes them (one escape sequence around both)."""
    out: list[Span] = []
    for text, style in spans:
        if out and out[-1][1] == style:
            out[-1] = (out[-1][0] + text, style)
        elif text:
            out.append((text, style))
    return out


def _styled(text: str, style: str, colour: str | None) -> str:
    """``text`` with ``style`` as rich writes it: ``colour`` is None (no escape codes at all), ``"no-colour"``
    (``NO_COLOR``: attributes only) or ``"colour"``. Text that is not plain printable ASCII is made visible first,
    as the consoles of :func:`stdout` and :func:`stderr` do."""
    if not (text.isprintable() and text.isascii()):
        text = visible(text, newlines=True)
    if not text or not style or colour is None:
        return text
    words = style.split()
    codes = [_ATTRIBUTES[w] for w in words if w in _ATTRIBUTES]
    if colour == "colour":
        codes += [_COLOURS[w] for w in words if w in _COLOURS]
    return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes else text


def _plain_mode(stream: Any, environ: Mapping[str, str]) -> tuple[str | None, int] | None:
    """How rich's console for ``stream`` (:func:`_console`) would print: its colour mode (see :func:`_styled`) and
    width, following rich's own detection (``rich.console.Console``: ``is_terminal``, ``_detect_color_system``,
    ``size``); None for the cases left to rich (Windows, IPython, IDLE, a non-UTF-8 stream)."""
    import builtins

    if sys.platform == "win32" or hasattr(builtins, "get_ipython") or \
            getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    if not (getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf"):
        return None  # rich draws its tables with ASCII boxes then
    isatty = _isatty(stream)
    terminal = _terminal(stream, environ)
    dumb = terminal and environ.get("TERM", "").lower() in ("dumb", "unknown")
    colour = None if not terminal or dumb else "no-colour" if environ.get("NO_COLOR", "") != "" else "colour"
    # the width, as Console.size computes it for _console's width (160 on a pipe, else the terminal's)
    columns, lines = _size(environ.get("COLUMNS")), _size(environ.get("LINES"))
    fixed = _PIPE_WIDTH if not isatty else columns
    if fixed is not None and lines is not None:
        width = fixed
    elif dumb:
        width = 80
    elif fixed is not None:
        width = fixed
    else:
        measured = None
        for fd in (0, 1, 2):
            try:
                measured = os.get_terminal_size(fd).columns
                break
            except (AttributeError, ValueError, OSError):
                continue
        if columns is not None:
            measured = columns
        width = measured or 80
    return colour, width


def _size(value: str | None) -> int | None:
    """A terminal size from the environment (``COLUMNS``, ``LINES``) as rich reads one: ASCII digits, else None
    (``'²'`` is a digit to ``str.isdigit`` and no number to ``int``)."""
    return int(value) if value is not None and value.isascii() and value.isdigit() else None


def is_terminal(stream: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Whether rich's console for ``stream`` treats it as a terminal (spinners and progress bars are shown only
    there), by rich's rules (``TTY_COMPATIBLE``, ``FORCE_COLOR``, else ``isatty``); True where only rich can say."""
    import builtins

    if sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return True
    return _terminal(stream, os.environ if environ is None else environ)


def _terminal(stream: Any, environ: Mapping[str, str]) -> bool:
    """rich's ``Console.is_terminal`` on Linux and macOS: ``TTY_COMPATIBLE``, then ``FORCE_COLOR``, then ``isatty``."""
    compatible, force = environ.get("TTY_COMPATIBLE", ""), environ.get("FORCE_COLOR")
    return False if compatible == "0" else True if compatible == "1" else \
        force != "" if force is not None else _isatty(stream)


def _isatty(stream: Any) -> bool:
    try:
        return bool(getattr(stream, "isatty", lambda: False)())
    except ValueError:  # a closed stream
        return False


def _cell_len(text: str) -> int:
    """The width rich gives ``text`` in a table cell: one column per character for ASCII and the ellipsis, else
    rich's own measure (``rich.cells``, a small module)."""
    if text.isascii() or all(ch.isascii() or ch == "…" for ch in text):
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _draw_table(table: Table, colour: str | None, width: int) -> list[str] | None:
    """The lines rich draws for ``table`` on a console ``width`` columns wide; None when the table does not fit
    (rich would then wrap its cells), holds text that is not printable (rich would break or escape it) or a styled
    row."""
    texts = [table.title, *table.columns, *(text for row in table.rows for text, _ in row)]
    if any(table.row_styles) or not all(visible(t) == t for t in texts):
        return None
    widths = []
    for i, name in enumerate(table.columns):
        widths.append(max([_cell_len(name)] + [_cell_len(row[i][0]) for row in table.rows]))
    if sum(widths) + 3 * len(widths) - 1 > width:
        return None
    lines = [_styled(table.title, "italic", colour)]

    def pad(text: str, w: int) -> str:
        return " " * (w - _cell_len(text))

    def cell(text: str, style: str, w: int, right: bool) -> str:
        if right:
            return " " + pad(text, w) + _styled(text, style, colour) + " "
        return " " + _styled(text, style, colour) + pad(text, w) + " "

    head = []
    for name, w in zip(table.columns, widths):
        shown = pad(name, w) + name if name in table.right else name + pad(name, w)
        head.append(_styled(" ", "bold", colour) + _styled(shown, "bold", colour) + _styled(" ", "bold", colour))
    lines.append(_HEAD_BAR.join(head))
    lines.append(_CROSS.join(_RULE * (w + 2) for w in widths))
    for row in table.rows:
        lines.append(_BAR.join(cell(text, style, w, name in table.right)
                               for (text, style), w, name in zip(row, widths, table.columns)))
    return lines
