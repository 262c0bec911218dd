"""Progress of a long command (``export``, ``verify``, ``compile``, ``warmup``, ``check --target``, ``serve``'s
start-up), in the form its stderr calls for:

- on a terminal, one transient line: a spinner, the stage under way and its elapsed seconds (``compiling predict at
  batch=8 for tpu-v5e  0:00:03``), redrawn in place and gone when the command ends, so that only its result stays;
- on a pipe or a file (a CI log), where a spinner would draw nothing but control codes, one line per stage with its
  elapsed time (``jaxport: lowering predict ... 0.8 s``), written when the stage ends;
- never on stdout, never with ``--json``. ``$JAXPORT_PROGRESS=0`` turns both off, ``=1`` forces the lines on any
  stderr but a terminal (for tests).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from jaxport.frontend import visible

from . import render


def enabled(as_json: bool) -> bool:
    """Whether a command prints its stage lines: not with ``--json``, and on a stderr that is a file or a pipe."""
    if as_json:
        return False
    forced = os.environ.get("JAXPORT_PROGRESS", "")
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr
    try:
        stream.fileno()  # an OS stream: not an in-memory capture
        return not stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def spinning(as_json: bool) -> bool:
    """Whether a command shows its stages as a spinner: not with ``--json`` nor ``$JAXPORT_PROGRESS=0``, and on a
    stderr that rich draws on as a terminal (an OS stream that is one, or ``TTY_COMPATIBLE=1``)."""
    if as_json or os.environ.get("JAXPORT_PROGRESS", "") == "0":
        return False
    stream = sys.stderr
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return render.is_terminal(stream)


def stages(as_json: bool) -> Stages:
    """The stages of a command as its stderr calls for (see the module docstring): a spinner on a terminal, else the
    lines of :func:`enabled`."""
    spinner = spinning(as_json)
    return Stages(enabled(as_json) and not spinner, spinner=spinner)


class Stages:
    """The stages of one command. Calling it with a stage's text ends the current stage (its line is written) and
    starts that one; leaving the ``with`` block ends the last, as ``failed after`` when an exception leaves it.
    ``on``: write a line per stage; ``spinner``: show the stage under way on the terminal instead (rich is imported
    only then). :meth:`clear` takes the spinner off the screen before the command prints a line of its own; the next
    stage puts it back."""

    def __init__(self, on: bool, *, spinner: bool = False) -> None:
        self.on = on
        self.spinner = spinner
        self._text: str | None = None
        self._start = 0.0
        self._live: Any = None

    def __call__(self, text: str) -> None:
        if self.spinner:
            self._show(text)
        if not self.on:
            return
        self.end()
        self._text, self._start = text, time.perf_counter()

    def _show(self, text: str) -> None:
        from rich.markup import escape
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        if self._live is None:
            # stdout (a command's result, --json's events) and other writers of stderr (a server's log) are left
            # as they are: rich would send them through this console
            self._live = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                  console=render.stderr(), transient=True, redirect_stdout=False,
                                  redirect_stderr=False)
            self._live.start()
        for task in list(self._live.task_ids):  # a new task, so that the elapsed time is the stage's
            self._live.remove_task(task)
        self._live.add_task(escape(visible(text)), total=None)
        self._live.refresh()  # drawn now, however short the stage

    def clear(self) -> None:
        """Take the spinner off the terminal (nothing to do without one)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def end(self, failed: bool = False) -> None:
        """Write the current stage's line, if one is under way."""
        if self._text is None:
            return
        seconds = time.perf_counter() - self._start
        line = f"jaxport: {visible(self._text)} ... {'failed after ' if failed else ''}{seconds:.1f} s\n"
        self._text = None
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed or broken stderr: progress is not worth an error
            pass

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, kind: Any, *rest: Any) -> None:
        self.clear()
        self.end(failed=kind is not None)
