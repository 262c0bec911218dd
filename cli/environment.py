"""The process's surroundings, made safe before a command runs: streams that cannot show every character, a
working directory that was deleted, a standard output that cannot be written (a full disk, ``> /dev/full``).

None of these is jaxport's bug, so none may end as ``error[internal]`` or a traceback:

- stdout and stderr escape what their encoding cannot show (``PYTHONIOENCODING=ascii`` or ``latin-1`` with a
  non-ASCII description or file name): ``\\u00e9`` instead of a ``UnicodeEncodeError``;
- a deleted working directory is refused at once, with one line and exit 2, when an argument is a relative path
  (which cannot mean anything then) or the command is not one of ``WITHOUT_DIRECTORY``; ``inspect /abs/a.jaxport``
  runs;
- a standard output whose reader went away (``jaxport inspect ART | head -1``) takes the rest of the output to the
  null device: the command ends as it would have, with its own exit code, and no ``BrokenPipeError``;
- a standard output that fails to take what a command prints ends the command with one ``error[output]`` line on
  stderr and exit 11 (README, "Exit codes"), the output error's code; one closed when the process started
  (``>&-``) is such an output (:func:`reopen_closed_streams`);
- a standard error closed when the process started (``2>&-``) takes what the command writes there to the null
  device: the command runs and ends with its own exit code;
- a setting that XLA, libtpu or JAX refuse as they start (``XLA_FLAGS``, ``LIBTPU_INIT_ARGS``, ``JAX_*``) ends the
  command with one ``error[platform]`` line naming the variable, exit 10, before JAX starts (:class:`_JaxStart`).
"""

from __future__ import annotations

import errno
import io
import os
import sys

TYPE_CHECKING = False  # typing's constant, without importing typing (the inspect fast path stays light)
if TYPE_CHECKING:
    from typing import Any

#: Exit code of an output that cannot be written (``errors.EXIT_CODES``: ``OutputError``).
EXIT_OUTPUT = 11
EXIT_USAGE = 2
#: The commands that read only the paths they are given: with absolute paths they run in a deleted directory.
WITHOUT_DIRECTORY = ("inspect", "call", "diff", "check")


class _StdoutFile(io.FileIO):
    """File descriptor 1, remembering the first error a write met (the buffer above drops the bytes it could not
    write, so a later flush cannot tell)."""

    def write(self, b: Any) -> int:  # type: ignore[override]
        global _failure
        try:
            return super().write(b)  # type: ignore[no-any-return]
        except BrokenPipeError:  # the reader went away (`| head`): the rest goes nowhere, the command runs on
            _discard_stdout()  # and ends with its own exit code (a verdict is kept under `set -o pipefail`)
            return len(b)
        except OSError as e:
            _failure = _failure or e
            raise


_failure: OSError | None = None


class _ClosedStdout(io.RawIOBase):
    """Standard output when the process started without descriptor 1 (``>&-``): every write fails as a write to a
    closed descriptor does (``EBADF``), so that a command that prints ends with ``error[output]``, exit 11."""

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:  # type: ignore[override]
        global _failure
        e = OSError(errno.EBADF, os.strerror(errno.EBADF))
        _failure = _failure or e
        raise e


def reopen_closed_streams() -> None:
    """Give each of descriptors 0, 1 and 2 that the process started without (``<&-``, ``>&-``, ``2>&-``) the null
    device, before anything opens a file, so that no file, pipe or socket opened later takes its number (a pipe on
    descriptor 1 would receive the output; a child would inherit it as its stdout). Python left ``sys.stdin``,
    ``sys.stdout`` or ``sys.stderr`` None for each: stdin then reads nothing, what is written to stderr is discarded,
    and stdout fails every write (:class:`_ClosedStdout`): a command that prints to a closed stdout has not done
    what it was asked, and ends with one ``error[output]`` line and exit 11."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            null = os.open(os.devnull, os.O_RDWR)
        except OSError:
            continue
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if fd == 0 and sys.stdin is None:
            sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        elif fd == 1 and sys.stdout is None:
            sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClosedStdout()), errors="backslashreplace")
        elif fd == 2 and sys.stderr is None:
            sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                          errors="backslashreplace", write_through=True)


class _JaxStart:
    """An importer ahead of Python's own, for ``jax`` alone: a command's first ``import jax``, wherever it happens,
    gets its spec from ``jaxport.isolation.startup.jax_spec``, which refuses (exit 10, one line naming the variable)
    the settings XLA, libtpu or JAX would end the process on or raise from deep inside (``XLA_FLAGS=--xla_bogus``,
    ``JAX_ENABLE_X64=maybe``) before JAX starts. It leaves once JAX is imported; nothing is loaded until then, so
    commands that never import JAX (``inspect``, ``check``) pay nothing."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "jax":
            return None
        from jaxport.isolation import startup

        spec = startup.jax_spec(path, target, self)
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        return spec


def prepare() -> None:
    """Make the streams escape what they cannot encode (stdout through :class:`_StdoutFile`); refuse a deleted
    working directory; keep JAX's op-by-op debugging mode off (``JAX_DISABLE_JIT``: exporting, compiling ahead and
    calling an exported program all need jit, and JAX refuses them with it); check the settings JAX and XLA read as
    they start before JAX is imported (:class:`_JaxStart`)."""
    os.environ.pop("JAX_DISABLE_JIT", None)
    if "jax" not in sys.modules and not any(isinstance(f, _JaxStart) for f in sys.meta_path):
        sys.meta_path.insert(0, _JaxStart())
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
        relative = _relative_path(sys.argv[1:])
        if relative is not None:
            _leave(f"error[usage]: the current directory no longer exists (it was deleted or moved away), so the "
                   f"relative path {relative!r} names nothing; change to an existing directory, or give absolute "
                   f"paths, and run the command again.", EXIT_USAGE)
        if next((a for a in sys.argv[1:] if not a.startswith("-")), None) not in WITHOUT_DIRECTORY:
            _leave("error[usage]: the current directory no longer exists (it was deleted or moved away); change to an "
                   "existing directory and run the command again.", EXIT_USAGE)
        # every path is absolute: the root stands in for the directory that is gone (Python itself misbehaves in
        # a deleted one: decoding a zip member's cp437 name ends in a SystemError), and `python -c`'s '' entry of
        # sys.path, which named that directory, goes
        os.chdir("/")
        sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    except OSError:  # unreadable, but there: relative paths still work
        pass


def _relative_path(argv: list[str]) -> str | None:
    """The first argument that reads as a relative path (``base.jaxport``, ``x=x.npy``, ``model.py:f``, ``out/``),
    or None: a command of absolute paths needs no working directory. Numbers (``1.5``) are not paths."""
    import re

    for arg in argv:
        for piece in re.split(r"[=:,]", arg):
            if not piece or piece.startswith(("/", "~", "-")) or re.fullmatch(r"[-+0-9.e]+", piece):
                continue
            if "/" in piece or re.fullmatch(r"[^/]*\.[A-Za-z]\w*", piece):
                return piece
    return None


def stdout_failed() -> OSError | None:
    """The error of writing what stdout holds, if it cannot take it (a full disk, a closed descriptor); None if it
    can. A failed write leaves its bytes buffered, so the next flush fails the same way."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away: the command's output is not wanted (exit 0, as before)
        _discard_stdout()
        return None
    except OSError as e:
        return _failure or e
    except (ValueError, AttributeError):  # closed, or no stdout
        return None
    return _failure


def _discard_stdout() -> None:
    """Point descriptor 1 at the null device, so that what stdout still buffers (and Python's flush at exit) goes
    nowhere instead of failing again as "Exception ignored ... BrokenPipeError" with exit 120."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def exit_if_stdout_failed(exc: BaseException | None = None) -> None:
    """If stdout cannot be written (``exc``, an error a command raised, is such a failure, or flushing fails now):
    one ``error[output]`` line on stderr and exit 11, without the interpreter flushing stdout again at exit (which
    would print a second message). Returns otherwise."""
    if exc is not None and not isinstance(exc, OSError):
        return
    failure = stdout_failed()
    if failure is None:
        return
    if failure.errno == errno.EBADF:
        _leave("error[output]: cannot write the standard output: it is closed (the command was started with >&-). "
               "Redirect the output to a file, or to /dev/null to discard it.", EXIT_OUTPUT)
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
