"""Files the user names: opening them for reading with errors a user can act on, and writing them atomically.

``open_for_reading`` (and ``read_file``) open every file jaxport reads: non-blocking, checked on the opened
descriptor to be a regular file (never a FIFO, a device such as ``/dev/zero``, a socket or a directory), and turn the
ways opening fails (missing, unreadable, a NUL byte, a name too long) into one error class whose message names the
file and what it should have been; ``read_at_most`` caps the bytes actually read.

``atomic_output`` (and its one-call form ``atomic_write``) is the one way jaxport writes an output: the path is
checked first (``check_output``: never a device, FIFO, socket or directory, never the same file as an input of the
running command, which ``command_inputs`` records from every ``open_regular``), the content goes to a temporary
sibling created exclusively with a random name (never through a planted link), which is fsynced and renamed into
place, so a killed writer never leaves a partial file, and removed on any error; the temporary files killed writers
leave behind are removed by the next write of the same path (``remove_stale_temporaries``).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from . import interrupts
from ._text import closest
from .errors import OutputError

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any, BinaryIO

#: How a path that is not a regular file is named in messages, by the type bits of its mode.
_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
#: A path longer than this is shown cut in messages (an overlong name is itself the error).
_SHOWN_CHARS = 512


def file_kind(mode: int) -> str:
    """What a file of mode ``mode`` is, for messages: ``a regular file``, ``a FIFO (named pipe)``, ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((kind for test, kind in _NOT_REGULAR if test(mode)), "not a regular file")


def shown_path(path: str | Path) -> str:
    """``path`` as messages show it: a NUL byte written ``\\0``, a very long path cut."""
    text = os.fsdecode(path).replace("\0", "\\0")
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + f"... ({len(text)} characters)"


def open_regular(path: str | Path, error: Callable[[str], Exception], *, missing: str = "file",
                 directory: str = "a file", reading: str = "") -> int:
    """A read-only descriptor of ``path``, which must be a regular file: the one check every file jaxport reads goes
    through (``open_for_reading`` and ``read_file`` use it).

    The path is opened non-blocking (a FIFO without a writer would block ``open`` forever) and without becoming a
    controlling terminal, the type is checked on the opened descriptor (``fstat``, so a path swapped after the check,
    or a symbolic link to a device, is caught), and only then is the descriptor made blocking again for reading. A
    FIFO, a device (``/dev/zero``, ``/dev/urandom``, whose size reads as 0), a socket or a directory is refused with
    ``error``, and so is a path that cannot be opened (missing, a NUL byte, too long, a symbolic-link loop, no
    permission). Callers still cap the bytes they read (``read_at_most``): a regular file can grow while it is read.
    """
    shown = shown_path(path)
    cannot_read = f"{shown}: cannot read{' ' + reading if reading else ''}"
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except ValueError:  # an embedded NUL byte: no system call can name that path
        raise error(f"{cannot_read}: the path contains a NUL byte.") from None
    except FileNotFoundError:
        raise error(f"{shown}: {missing} not found.{nearby(path)}") from None
    except IsADirectoryError:
        raise error(f"{shown}: is a directory, not {directory}.") from None
    except OSError as e:
        if e.errno == errno.ENXIO:  # a socket, or a device without a driver
            try:
                mode = os.stat(path).st_mode
            except (OSError, ValueError):
                mode = stat.S_IFREG
            if not stat.S_ISREG(mode):
                raise error(_not_regular(shown, file_kind(mode), directory)) from None
        raise error(f"{cannot_read}: {e.strerror or e}.") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise error(f"{shown}: is a directory, not {directory}.")
        if not stat.S_ISREG(mode):
            raise error(_not_regular(shown, file_kind(mode), directory))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        note_input(fd, path)  # an output that is this file is refused (check_output)
    except OSError as e:
        os.close(fd)
        raise error(f"{cannot_read}: {e.strerror or e}.") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


#: At most this many names of a directory are read to suggest one for a file that is not found there.
_NEARBY_NAMES = 2000


def nearby(path: str | Path, base: str | Path | None = None) -> str:
    """`` Did you mean 'x.npy'?`` for the name in the missing file's directory (under ``base``, default the current
    directory, when the path is relative) closest to its own, a misspelt file name, written as the path was given; an
    empty string when none is close (a shared extension alone is not close: ``t.jaxport`` for ``nothere.jaxport``)
    or the directory cannot be read."""
    import difflib  # only for messages

    try:
        given = os.fsdecode(path)
        folder, name = os.path.split(given)
        listed = os.path.join(os.fsdecode(base), folder) if base is not None and not os.path.isabs(folder) else folder
        with os.scandir(listed or ".") as entries:
            names = [e.name for _, e in zip(range(_NEARBY_NAMES), entries) if not e.name.startswith(".")]
    except (OSError, ValueError):
        return ""
    close = closest(name, names)
    if close is None or close == name:
        return ""
    stem, other = os.path.splitext(name)[0].casefold(), os.path.splitext(close)[0].casefold()
    if stem != other and difflib.SequenceMatcher(None, stem, other).ratio() < 0.6:
        return ""
    return f" Did you mean {shown_path(os.path.join(folder, close))!r}?"


def _not_regular(shown: str, kind: str, directory: str) -> str:
    return (f"{shown}: is {kind}, not {directory}: jaxport reads regular files only. Save the data to a file and "
            f"give its path.")


@contextmanager
def open_for_reading(path: str | Path, error: Callable[[str], Exception], *, missing: str = "file",
                     directory: str = "a file", reading: str = "") -> Iterator[BinaryIO]:
    """``path`` opened for reading (``open_regular``: a regular file, never a FIFO, device, socket or directory) as
    a context manager; failing to open or read it raises ``error`` with a message that starts with the path:
    ``{missing} not found.``, ``is a directory, not {directory}.``, ``is a FIFO (named pipe), not {directory}: ...``
    or ``cannot read {reading}: {reason}.``. Errors the block raises itself pass through."""
    cannot_read = f"{shown_path(path)}: cannot read{' ' + reading if reading else ''}"
    f = os.fdopen(open_regular(path, error, missing=missing, directory=directory, reading=reading), "rb")
    with f:
        try:
            yield f
        except OSError as e:
            raise error(f"{cannot_read}: {e.strerror or e}.") from None


def read_at_most(f: BinaryIO, limit: int) -> bytes:
    """At most ``limit`` bytes of ``f`` from its position, however large the file says it is; a caller passes its
    cap plus one to tell a file over the cap from one at it."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = f.read(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_file(path: str | Path, error: Callable[[str], Exception], limit: int, too_big: Callable[[int], str], *,
              missing: str = "file", directory: str = "a file", reading: str = "") -> bytes:
    """The whole content of the regular file ``path``, refused with ``error(too_big(size))`` past ``limit`` bytes
    (checked on the size before reading, and on the bytes actually read)."""
    with open_for_reading(path, error, missing=missing, directory=directory, reading=reading) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise error(too_big(size))
        data = read_at_most(f, limit + 1)
    if len(data) > limit:
        raise error(too_big(len(data)))
    return data


# --- what a command read: no output may replace it ----------------------------------------------------------------

_inputs: dict[tuple[int, int], str] = {}
_inputs_depth = 0
_inputs_lock = threading.Lock()


@contextmanager
def command_inputs() -> Iterator[None]:
    """Remember, while the block runs, every file opened for reading (``open_regular``) and every file given to
    ``note_input``: an output that is one of them is refused (``check_output``). A command runs inside one such
    block (the command line's ``errors.run``); nested blocks share the outermost one's record."""
    global _inputs_depth
    with _inputs_lock:
        _inputs_depth += 1
    try:
        yield
    finally:
        with _inputs_lock:
            _inputs_depth -= 1
            if not _inputs_depth:
                _inputs.clear()


def note_input(file: str | Path | int, shown: str | Path | None = None) -> None:
    """Record ``file`` (a path, or an open descriptor of the file ``shown``) as read by the running command, when
    one runs (``command_inputs``); a file that cannot be looked at is not recorded."""
    if not _inputs_depth:
        return
    try:
        st = os.fstat(file) if isinstance(file, int) else os.stat(file)
    except (OSError, ValueError):
        return
    name = shown_path(shown) if shown is not None else "an input" if isinstance(file, int) else shown_path(file)
    with _inputs_lock:
        _inputs.setdefault((st.st_dev, st.st_ino), name)


def _input_named(ids: set[tuple[int, int]], inputs: Iterable[str | Path]) -> str | None:
    """The name of the input among ``inputs``, the files this command read and the loaded Python modules whose
    (device, inode) is in ``ids``; None if none is."""
    for given in inputs:
        try:
            st = os.stat(given)
        except (OSError, ValueError):
            continue
        if (st.st_dev, st.st_ino) in ids:
            return shown_path(given)
    with _inputs_lock:
        for key, name in _inputs.items():
            if key in ids:
                return name
    for module in list(sys.modules.values()):  # the model's source, or any module this process runs
        try:
            source = getattr(module, "__file__", None)
            if not isinstance(source, str):
                continue
            known = _module_files.get(source)
            if known is None:
                module_file = os.stat(source)
                known = _module_files[source] = (module_file.st_dev, module_file.st_ino)
        except Exception:  # noqa: BLE001 - a lazy module's attribute hook, a file gone: not this output
            continue
        if known in ids:
            return f"{shown_path(source)} (Python module {getattr(module, '__name__', '?')})"
    return None


#: The (device, inode) of each loaded module's file, by its path, as first looked at: an output is checked against
#: every module JAX and the model loaded (about 1500) several times a command, one ``stat`` each only the first time.
_module_files: dict[str, tuple[int, int]] = {}


def check_output(path: str | Path, inputs: Iterable[str | Path] = ()) -> Path:
    """Refuse, with an ``OutputError``, an output path that jaxport must not write; returns its directory.

    The rule every output goes through (``atomic_write`` checks it again right before it renames): the directory
    exists; the path, if it exists, is a regular file or a symbolic link (which is replaced, never written through:
    nothing outside the output's directory is written); and it is not the same file (device and inode, the link
    resolved or not) as ``inputs``, a file the running command read (``command_inputs``) or a loaded Python module.
    """
    path = Path(path)
    shown = shown_path(path)
    if "\0" in os.fsdecode(path):
        raise OutputError(f"{shown}: cannot write: the path contains a NUL byte.")
    parent = path.parent if str(path.parent) else Path(".")
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        link = None
    except OSError as e:
        if e.errno == errno.ENOTDIR or (e.errno == errno.ENOENT):
            link = None
        else:
            raise OutputError(f"{shown}: cannot write: {e.strerror or e}.") from None
    if not parent.is_dir():
        raise OutputError(f"{shown}: directory {shown_path(parent)} does not exist. Create it first.")
    if link is None:
        return parent
    ids = {(link.st_dev, link.st_ino)}
    if stat.S_ISLNK(link.st_mode):
        try:
            target = os.stat(path)
            ids.add((target.st_dev, target.st_ino))
        except OSError:
            pass  # a dangling link: replaced like any other
    elif not stat.S_ISREG(link.st_mode):
        kind = file_kind(link.st_mode)
        raise OutputError(f"{shown}: is {kind}, not a regular file; jaxport writes each output as a new regular file "
                          f"and will not replace {kind}. Give the path of a file.")
    same = _input_named(ids, inputs)
    if same is not None:
        raise OutputError(f"{shown}: is the same file as the input {same}; writing the output there would destroy "
                          f"that input. Choose another output file.")
    return parent


def write_failure(path: str | Path, e: OSError, creating: bool = False) -> OutputError:
    """The error of writing ``path`` failing with ``e``: what went wrong, and what to do about it."""
    shown = shown_path(path)
    p = Path(path)
    parent = shown_path(p.parent if str(p.parent) else Path("."))
    reason = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return OutputError(f"{shown}: cannot write: {reason}. Free space on that disk, or write the file elsewhere.")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return OutputError(f"{shown}: cannot write in {parent}: {reason}. Choose a directory you can write to.")
    if creating:
        return OutputError(f"{shown}: cannot create a file in {parent}: {reason}.")
    return OutputError(f"{shown}: cannot write: {reason}.")


#: A temporary file of another writer is removed once its writer is gone; one whose writer cannot be told (a name
#: without a process id, a process on another machine) once it is older than this.
STALE_SECONDS = 3600.0

#: Bytes of the output's name kept in its temporary files' names, which must stay under the 255 bytes of a name.
_NAME_BYTES = 200


def _temporary_prefix(path: Path) -> str:
    """``.NAME.``: the start of the names of ``path``'s temporary files (NAME cut to ``_NAME_BYTES`` bytes)."""
    return "." + os.fsdecode(os.fsencode(path.name)[:_NAME_BYTES]) + "."


@contextmanager
def atomic_output(path: str | Path, inputs: Iterable[str | Path] = (), durable: bool = True) -> Iterator[BinaryIO]:
    """A file to write ``path``'s new content into: a temporary sibling, renamed over ``path`` when the block ends
    without an error, and removed when it raises (any exception, ``KeyboardInterrupt`` included).

    The one write helper every output of jaxport goes through (``atomic_write`` is its one-call form). The path is
    checked first (``check_output``: never a device, FIFO, socket or directory, never an input). The temporary file
    ``.NAME.PID-RANDOM.tmp`` is created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0600) with a random
    name in the output's directory, so a symbolic link or file planted there is never followed nor reused, and is
    locked (``flock``) while it is written. Killed at any point, the writer leaves ``path`` as it was (absent, or the
    previous complete file) or complete with the new content, never partial. Each write first removes the temporary
    files of ``path`` that earlier writers left behind when they were killed (unlocked, and their process gone or
    the file older than ``STALE_SECONDS``), never those of a writer still running, so concurrent writers to one
    path each finish, and the last rename wins. Errors of the block's own writes pass through as they are; the
    caller turns them into ``write_failure(path, e)``.
    """
    inputs = list(inputs)
    parent = check_output(path, inputs)
    path = Path(path)
    remove_stale_temporaries(path)
    try:
        import tempfile  # here: `inspect`, which writes nothing, does not import it (nor `random`)

        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f"{_temporary_prefix(path)}{os.getpid()}-", suffix=".tmp")
    except OSError as e:
        raise write_failure(path, e, creating=True) from None
    committed = False
    interrupts.track(tmp)  # removed by a Ctrl-C or SIGTERM that ends the process here
    f = os.fdopen(fd, "wb")
    try:
        _lock(f.fileno(), blocking=True)
        try:
            yield f
        except OSError as e:  # the block's own writes (a full disk, a file-size limit, an I/O error)
            raise write_failure(path, e) from None
        try:
            f.flush()
            if durable:
                os.fsync(f.fileno())
            mask = os.umask(0)
            os.umask(mask)
            os.fchmod(f.fileno(), 0o666 & ~mask)
        except OSError as e:
            raise write_failure(path, e) from None
        check_output(path, inputs)  # the path may have changed while the content was written
        try:
            os.replace(tmp, path)  # the lock is held until here: no other writer takes this file for a stale one
        except OSError as e:
            raise write_failure(path, e) from None
        committed = True
    finally:
        try:
            f.close()
        except OSError:  # a failed flush, after an error: the file is removed anyway
            pass
        if not committed:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        interrupts.untrack(tmp)
    if not durable:
        return
    try:
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def atomic_write(path: str | Path, write: Callable[[BinaryIO], Any], inputs: Iterable[str | Path] = (),
                 durable: bool = True) -> None:
    """Call ``write(fileobj)`` on a temporary sibling of ``path`` and rename it over ``path`` (``atomic_output``);
    an ``OSError`` of ``write`` (a full disk, an I/O error) is an ``OutputError`` naming ``path``. Without
    ``durable`` (a file that only restates another, such as an artifact's manifest sidecar), neither the file nor its
    directory is synced to the disk: the rename still makes it old or new, never partial, to every reader."""
    with atomic_output(path, inputs, durable) as f:
        try:
            write(f)
        except OSError as e:
            raise write_failure(path, e) from None


def scratch_file(beside: str | Path) -> BinaryIO:
    """An anonymous temporary file in the directory of ``beside`` (on its disk), for data on its way into that
    output: it has no name once created (``tempfile.TemporaryFile``), so nothing can be planted in its place and
    nothing is left behind, whatever happens."""
    path = Path(beside)
    parent = path.parent if str(path.parent) else Path(".")
    import tempfile

    try:
        return tempfile.TemporaryFile(dir=parent, buffering=0)  # unbuffered: a failed write fails at once
    except OSError as e:
        raise write_failure(path, e, creating=True) from None


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
    """Remove the temporary files earlier, killed writers of ``path`` left next to it; returns their names.

    Only regular files are looked at (``lstat`` first, then opened without following a link, non-blocking): a
    FIFO, device or link planted under a temporary file's name is left alone."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    prefix = _temporary_prefix(path)
    removed: list[str] = []
    try:
        with os.scandir(parent) as scan:
            entries = [e for e in scan if e.name.startswith(prefix) and e.name.endswith(".tmp")]
    except (OSError, ValueError):
        return removed
    now = time.time()
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    for entry in entries:
        middle = entry.name[len(prefix):-len(".tmp")]
        pid_text, dash, _ = middle.partition("-")
        pid = int(pid_text) if dash and pid_text.isdigit() and pid_text.isascii() and len(pid_text) <= 9 else None
        if pid == os.getpid():
            continue  # this process's own writer, perhaps in another thread
        try:
            if not stat.S_ISREG(os.lstat(entry.path).st_mode):
                continue
            fd = os.open(entry.path, flags)
        except OSError:
            continue
        try:
            if not _lock(fd, blocking=False):
                continue  # a writer is at work on it
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                continue
            old = now - info.st_mtime > STALE_SECONDS
            if (pid is not None and not _process_alive(pid)) or old:
                os.unlink(entry.path)
                removed.append(entry.name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed
