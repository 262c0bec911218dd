"""Ctrl-C and SIGTERM in the ``jaxport`` command: one line, exit 130 or 143, nothing left behind, at every moment.

A signal may land anywhere: in Python code, inside JAX's native code (XLA compiling, MLIR parsing), while a writer
thread streams weights, or while a checking child runs. An exception raised from the signal handler would reach
only code that runs Python bytecode, could be caught by code that wraps every error (a user's module at export),
and would end in interpreter teardown with JAX's threads alive. So :func:`install` makes the process end itself
instead, the same way from wherever the signal lands:

- the temporary files and directories the writers hold (:func:`track`, by ``_fsio.atomic_output``) are removed, so
  that an output is left as it was (absent, or the previous complete file) or, if its rename already happened,
  complete with the new content;
- the process groups of the children it started (``sandbox``: checks, ``--isolate``) are killed;
- one line is written on stderr, ``error[interrupted]: ...``, and the process exits with ``128 + signal`` (130 for
  SIGINT, 143 for SIGTERM) through ``os._exit``: no teardown, never a death by the signal itself.

Two paths lead there, whichever comes first: the Python handler, in the main thread, at its next bytecode; and a
watcher thread woken by the signal's byte on ``signal.set_wakeup_fd`` (written by the C-level handler at once),
which runs while the main thread is inside native code that released the GIL. A second signal during the exit is
ignored. Only the command line installs this (``jaxport_cli.main``); the Python API leaves signals to the caller.
"""

from __future__ import annotations

# The C module under ``signal``: the same functions and constants, without the enums ``signal`` builds on import
# (1.4 ms of every command's start, a fortieth of ``jaxport inspect``).
import _signal as signal
import os
import threading

#: The signals handled, with the words of the one line.
SIGNALS: dict[int, str] = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}
#: The thread's name: ``isolate`` may fork a checking child beside it (it holds no lock while it waits).
WATCHER_NAME = "jaxport-signal-watcher"

_temporaries: dict[str, bool] = {}  # path -> is a directory
_children: set[int] = set()  # process group ids (each child leads its own session)
_exiting = threading.Lock()
_installed = False
_wakeup_read = -1


def track(path: str | os.PathLike[str], directory: bool = False) -> None:
    """Remember a temporary file (or directory) a writer is filling, to remove it if the process is interrupted."""
    _temporaries[os.fspath(path)] = directory


def untrack(path: str | os.PathLike[str]) -> None:
    _temporaries.pop(os.fspath(path), None)


def track_child(pid: int) -> None:
    """Remember a child that leads its own process group, to kill the group if the process is interrupted."""
    _children.add(pid)


def untrack_child(pid: int) -> None:
    _children.discard(pid)


def installed() -> bool:
    return _installed


def install() -> None:
    """Handle SIGINT and SIGTERM as the module docstring says (in the main thread; once per process)."""
    global _installed, _wakeup_read
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        signal.signal(sig, _handler)
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        _wakeup_read = r
        threading.Thread(target=_watch, args=(r,), name=WATCHER_NAME, daemon=True).start()
    except (OSError, ValueError, RuntimeError):  # no pipe or no thread: the handler alone
        pass
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_reset_in_child)
    _installed = True


class deferred:  # lower case: used as a function, ``with interrupts.deferred():``
    """Within: SIGINT and SIGTERM are left to the Python handlers the caller installs, such as a server that lets the
    requests in flight finish before it ends (then calls :func:`stop`). The watcher thread stops ending the process
    from native code; the caller installs and restores its handlers; on leaving, the watcher is woken again. Outside
    the main thread, or where :func:`install` did not run, it changes nothing. (A class, not ``contextlib``: this
    module is imported by every command's start.)"""

    def __enter__(self) -> None:
        self._previous: int | None = None
        if _installed and threading.current_thread() is threading.main_thread():
            self._previous = signal.set_wakeup_fd(-1)

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.set_wakeup_fd(self._previous, warn_on_full_buffer=False)


def _reset_in_child() -> None:
    """In a forked child (``sandbox.fork_run``): the parent's handling is not the child's (its parent kills it)."""
    global _installed
    _installed = False
    _temporaries.clear()
    _children.clear()
    try:
        signal.set_wakeup_fd(-1)
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
    except (ValueError, OSError):
        pass


def _handler(signum: int, frame: object) -> None:
    stop(signum)


def _watch(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        for byte in data:
            if byte in SIGNALS:
                stop(byte)


def stop(signum: int, said: str | None = None) -> None:
    """End the process for ``signum`` now (see the module docstring); returns only in a thread that lost the race
    to another one already ending it. ``said``: the line to print instead of ``error[interrupted]: ...``, for a
    command that a signal ends as it should (``jaxport serve``, stopped gracefully)."""
    if not _exiting.acquire(blocking=False):
        if threading.current_thread() is threading.main_thread():
            threading.Event().wait()  # the other path is ending the process: wait for it
        return
    try:
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
    except (ValueError, OSError):  # not the main thread: the lock already makes a second signal harmless
        pass
    for pid in list(_children):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:  # a forked child that has not yet started its own session
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for path, directory in list(_temporaries.items()):
        try:
            if directory:
                import shutil

                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass
    # stdout is not flushed: the main thread may hold its lock, blocked in a write; what it buffered is dropped
    line = said if said is not None else (f"error[interrupted]: stopped by {SIGNALS.get(signum, 'a signal')}; every "
                                          f"output is as it was or complete, and no temporary file is left\n")
    try:
        os.write(2, line.encode("ascii", "replace"))
    except OSError:
        pass
    os._exit(128 + int(signum))
