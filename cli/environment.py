"""The process's surroundings, made safe before a command runs: streams that cannot show every character, a
working directory that was deleted, a standard output that cannot be written (a full disk, ``> /dev/full``).

None of these is jaxport's bug, so none may end as ``error[internal]`` or a traceback:

- stdout and stderr escape what their encoding cannot show (``PYTHONIOENCODING=ascii`` or ``latin-1`` with a
  non-ASCII description or file name): ``\\u00e9`` instead of a ``UnicodeEncodeError``;
- a deleted working directory is refused at once, with one line and exit 2 (relative paths cannot mean anything);
- a standard output that fails to take what a command prints ends the command with one ``error[output]`` line on
  stderr and exit 11 (README, "Exit codes"), the output error's code.
"""

from __future__ import annotations

import io
import os
import sys

TYPE_CHECKING = False  # typing's constant, without importing typing (the inspect fast path stays light)
if TYPE_CHECKING:
    from typing import Any

#: Exit code of an output that cannot be written (``errors.EXIT_CODES``: ``OutputError``).
EXIT_OUTPUT = 11
EXIT_USAGE = 2


class _StdoutFile(io.FileIO):
    """File descriptor 1, remembering the first error a write met (the buffer above drops the bytes it could not
    write, so a later flush cannot tell)."""

    def write(self, b: Any) -> int:  # type: ignore[override]
        global _failure
        try:
            return super().write(b)  # type: ignore[no-any-return]
        except BrokenPipeError:
            raise
        except OSError as e:
            _failure = _failure or e
            raise


_failure: OSError | None = None


def prepare() -> None:
    """Make the streams escape what they cannot encode (stdout through :class:`_StdoutFile`); refuse a deleted
    working directory."""
    old = sys.stdout
    if old is not None and getattr(old, "fileno", None) is not None:
        try:
            if old.fileno() == 1:
                old.flush()
                sys.stdout = io.TextIOWrapper(io.BufferedWriter(_StdoutFile(1, "w", closefd=False)),
                                              encoding=old.encoding, errors="backslashreplace",
                                              line_buffering=bool(old.line_buffering),
                                              write_through=bool(getattr(old, "write_through", False)))
        except (OSError, ValueError, AttributeError):  # no descriptor 1 (closed): leave it as it is
            pass
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream already closed or detached: nothing to show anyway
                pass
    try:
        os.getcwd()
    except FileNotFoundError:
        _leave("error[usage]: the current directory no longer exists (it was deleted or moved away); change to an "
               "existing directory and run the command again.", EXIT_USAGE)
    except OSError:  # unreadable, but there: relative paths still work
        pass


def stdout_failed() -> OSError | None:
    """The error of writing what stdout holds, if it cannot take it (a full disk, a closed descriptor); None if it
    can. A failed write leaves its bytes buffered, so the next flush fails the same way."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return None  # the reader went away: the command's output is not wanted (exit 0, as before)
    except OSError as e:
        return _failure or e
    except (ValueError, AttributeError):  # closed, or no stdout
        return None
    return _failure


def exit_if_stdout_failed(exc: BaseException | None = None) -> None:
    """If stdout cannot be written (``exc``, an error a command raised, is such a failure, or flushing fails now):
    one ``error[output]`` line on stderr and exit 11, without the interpreter flushing stdout again at exit (which
    would print a second message). Returns otherwise."""
    if exc is not None and not isinstance(exc, OSError):
        return
    failure = stdout_failed()
    if failure is None:
        return
    reason = failure.strerror or type(failure).__name__
    _leave(f"error[output]: cannot write the standard output: {reason}. Free space on that disk, or redirect the "
           f"output elsewhere.", EXIT_OUTPUT)


def exit_after_command(code: object) -> None:
    """At the end of a command that exits with ``code``: if stdout cannot take what it holds, a successful command
    fails with exit 11 (one line), a failed one keeps its code and its own message; either way the interpreter is
    not left to flush stdout again (a second message). Returns when stdout is fine."""
    if stdout_failed() is None:
        return
    if code in (None, 0):
        exit_if_stdout_failed()
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code if isinstance(code, int) else 1)


def _leave(line: str, code: int) -> None:
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        os.write(2, (line + "\n").encode("ascii", "backslashreplace"))
    except OSError:
        pass
    os._exit(code)
