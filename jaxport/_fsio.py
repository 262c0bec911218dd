"""Files the user names: opening them for reading with errors a user can act on, and writing them atomically.

``open_for_reading`` turns the ways opening a file fails (missing, a directory, unreadable) into one error class
whose message names the file and what it should have been. ``atomic_write`` writes through a locked temporary
sibling that is fsynced and renamed into place, so a killed writer never leaves a partial file; the temporary files
killed writers leave behind are removed by the next write of the same path (``remove_stale_temporaries``).
"""

from __future__ import annotations

import errno
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from .errors import OutputError


@contextmanager
def open_for_reading(path: str | Path, error: Callable[[str], Exception], *, missing: str = "file",
                     directory: str = "a file", reading: str = "") -> Iterator[BinaryIO]:
    """``open(path, "rb")`` as a context manager; failing to open or read it raises ``error`` with a message that
    starts with the path: ``{missing} not found.``, ``is a directory, not {directory}.`` or ``cannot read
    {reading}: {reason}.``. Errors the block raises itself pass through."""
    shown = str(path)
    cannot_read = f"{shown}: cannot read{' ' + reading if reading else ''}"
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise error(f"{shown}: {missing} not found.") from None
    except IsADirectoryError:
        raise error(f"{shown}: is a directory, not {directory}.") from None
    except OSError as e:
        raise error(f"{cannot_read}: {e.strerror}.") from None
    with f:
        try:
            yield f
        except OSError as e:
            raise error(f"{cannot_read}: {e.strerror}.") from None


# --- atomic writes ---------------------------------------------------------------------------------------------

#: A temporary file of another writer is removed once its writer is gone; one whose writer cannot be told (a name
#: without a process id, a process on another machine) once it is older than this.
STALE_SECONDS = 3600.0


def atomic_write(path: str | Path, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write(fileobj)`` on a temporary sibling of ``path``, fsync, and rename it over ``path``.

    Killed at any point, the writer leaves ``path`` as it was (absent, or the previous complete file) or complete
    with the new content, never partial. The temporary file is ``.NAME.PID-RANDOM.tmp``, locked (``flock``) while
    it is written; each write first removes the temporary files of ``path`` that earlier writers left behind when
    they were killed (unlocked, and their process gone or the file older than ``STALE_SECONDS``), and never those of
    a writer still running, so concurrent writers to one path each finish, and the last rename wins.
    """
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{path}: directory {parent} does not exist. Create it first.")
    remove_stale_temporaries(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp")
    except OSError as e:
        raise OutputError(_write_failure(path, parent, e, creating=True)) from None
    f = os.fdopen(fd, "wb")
    try:
        _lock(f.fileno(), blocking=True)
        write(f)
        f.flush()
        os.fsync(f.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)  # the lock is held until here: no other writer takes this file for a stale one
    except BaseException as e:
        f.close()
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise OutputError(_write_failure(path, parent, e)) from None
        raise
    f.close()
    try:
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _write_failure(path: Path, parent: Path, e: OSError, creating: bool = False) -> str:
    """What went wrong writing ``path``, and what to do about it."""
    reason = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{path}: cannot write: {reason}. Free space on that disk, or write the file elsewhere."
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{path}: cannot write in {parent}: {reason}. Choose a directory you can write to."
    if creating:
        return f"{path}: cannot create a file in {parent}: {reason}."
    return f"{path}: cannot write: {reason}."


def _lock(fd: int, blocking: bool) -> bool:
    """Take an exclusive ``flock`` on ``fd``; False if another process holds it. Always True without ``fcntl``."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: process ids and ages decide alone
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except OSError:
        return False


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(path: str | Path) -> list[str]:
    """Remove the temporary files earlier, killed writers of ``path`` left next to it; returns their names."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    prefix = f".{path.name}."
    removed: list[str] = []
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(prefix) and e.name.endswith(".tmp")]
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        middle = entry.name[len(prefix):-len(".tmp")]
        pid_text, dash, _ = middle.partition("-")
        pid = int(pid_text) if dash and pid_text.isdigit() and pid_text.isascii() else None
        if pid == os.getpid():
            continue  # this process's own writer, perhaps in another thread
        try:
            fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            if not _lock(fd, blocking=False):
                continue  # a writer is at work on it
            stat = os.fstat(fd)
            old = now - stat.st_mtime > STALE_SECONDS
            if (pid is not None and not _process_alive(pid)) or old:
                os.unlink(entry.path)
                removed.append(entry.name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed
