"""Progress of a long command (``export``, ``verify``, ``compile``) for logs: one line per stage on stderr with its
elapsed time (``jaxport: lowering predict ... 0.8 s``), written when the stage ends.

The lines appear when stderr is a pipe or a file (a CI log), where rich's spinners and progress bars, which draw only
on a terminal, show nothing; never on stdout, never with ``--json``. ``$JAXPORT_PROGRESS=0`` turns them off, ``=1``
on for any stderr (for tests).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from jaxport.frontend import visible


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


class Stages:
    """The stages of one command. Calling it with a stage's text ends the current stage (its line is written) and
    starts that one; leaving the ``with`` block ends the last, as ``failed after`` when an exception leaves it."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self._text: str | None = None
        self._start = 0.0

    def __call__(self, text: str) -> None:
        if not self.on:
            return
        self.end()
        self._text, self._start = text, time.perf_counter()

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
        self.end(failed=kind is not None)
