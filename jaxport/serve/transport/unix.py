"""Unix sockets for ``jaxport serve --uds PATH``: REST on ``PATH``, gRPC on ``PATH.grpc`` (:func:`grpc_path`), and no
TCP port at all. Engine-free (no kserve here).

A sidecar (a proxy, a batch job in the same pod) reaches the server through a file, and a machine that may open no
TCP socket (a TPU host: see the README) can serve. As for ports (``ports``), everything is checked before anything
compiles (:func:`check`), each refusal one ``UsageError`` naming ``--uds``: a path longer than a unix socket's
address holds (:data:`MAX_PATH_BYTES`), a directory that does not exist, a file there that is not a socket, and a
socket another process listens on. A socket no process listens on (left by a server that was killed) is replaced.

Permissions: each socket file is created with mode ``0600`` while it is bound (the process's umask is narrowed for
that moment, so that no one else can connect before the mode is set), then given ``mode`` (``--uds-mode``, default
:data:`DEFAULT_MODE`: only this user may connect; ``660`` lets the file's group connect too). Connecting to a unix
socket needs write permission on its file. The server removes both files when it stops.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from collections.abc import Iterator

from ...errors import UsageError

#: The most bytes of a unix socket's path (Linux's ``sun_path`` holds 108, its terminating NUL included).
MAX_PATH_BYTES = 107
#: The socket files' mode by default: only the server's user may connect.
DEFAULT_MODE = 0o600


def grpc_path(path: str) -> str:
    """The gRPC socket of ``--uds PATH``: ``PATH.grpc``."""
    return f"{path}.grpc"


def paths(path: str) -> list[tuple[str, str]]:
    """``(socket path, protocol)`` of ``--uds PATH``: REST's and gRPC's."""
    return [(path, "REST"), (grpc_path(path), "gRPC")]


def check(path: str, mode: int) -> None:
    """Refuse a ``--uds PATH`` the server could not listen on (see the module docstring): each socket is bound once
    and removed again."""
    if mode & ~0o777:
        raise UsageError(f"--uds-mode {mode:o}: give permission bits (at most 777), such as 600 or 660.")
    for where, protocol in paths(path):
        sock = bind(path, where, protocol, mode)
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(where)


def bind(option: str, where: str, protocol: str, mode: int) -> socket.socket:
    """A unix stream socket bound (not listening) at ``where`` with ``mode``, for ``--uds option``; a socket left
    there by no live process is replaced."""
    usable(option, where, protocol)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with narrowed_umask():
            sock.bind(where)
        os.chmod(where, mode)
    except OSError as e:
        sock.close()
        raise UsageError(_refusal(option, where, protocol, e)) from None
    return sock


@contextlib.contextmanager
def narrowed_umask() -> Iterator[None]:
    """Files created in the block get mode 0600 at most (a socket's file before its mode is set)."""
    previous = os.umask(0o177)
    try:
        yield
    finally:
        os.umask(previous)


def usable(option: str, where: str, protocol: str) -> None:
    """Refuse what :func:`bind` (or gRPC) cannot listen on at ``where``; remove a socket no process listens on."""
    size = len(os.fsencode(where))
    if size > MAX_PATH_BYTES:
        raise UsageError(f"--uds {option}: the {protocol} socket's path {where} is {size} bytes, more than the "
                         f"{MAX_PATH_BYTES} a unix socket's address holds; give a shorter path (a relative one, or "
                         f"in /tmp).")
    parent = os.path.dirname(os.path.abspath(where))
    if not os.path.isdir(parent):
        raise UsageError(f"--uds {option}: {parent} is not a directory; create it, or give a path in one.")
    try:
        st = os.lstat(where)
    except FileNotFoundError:
        return
    except OSError as e:
        raise UsageError(_refusal(option, where, protocol, e)) from None
    if not stat.S_ISSOCK(st.st_mode):
        raise UsageError(f"--uds {option}: {where} exists and is not a socket; remove it, or give --uds another "
                         f"path.")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(2)
        probe.connect(where)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(where)  # no process listens on it: a stopped server's, replaced
        return
    except OSError as e:
        raise UsageError(_refusal(option, where, protocol, e)) from None
    finally:
        probe.close()
    raise UsageError(f"--uds {option}: {where} is in use (another process listens there, perhaps another 'jaxport "
                     f"serve'); stop it, or give --uds another path.")


def _refusal(option: str, where: str, protocol: str, e: OSError) -> str:
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"--uds {option}: the {protocol} socket {where} cannot be created or used ({e.strerror}); give --uds " \
               f"a path in a directory this user can write."
    return f"--uds {option}: cannot listen on the {protocol} socket {where} ({e.strerror}); give --uds another path."


def remove(where: str, inode: int | None) -> None:
    """Remove the socket file at ``where`` if it is still the one this server bound (its inode ``inode``)."""
    with contextlib.suppress(OSError):
        st = os.lstat(where)
        if stat.S_ISSOCK(st.st_mode) and (inode is None or st.st_ino == inode):
            os.unlink(where)


def inode(where: str) -> int | None:
    """The inode of the socket file at ``where`` (None when there is none)."""
    try:
        return os.lstat(where).st_ino
    except OSError:
        return None
