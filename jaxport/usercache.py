"""The user's cache directory: JAX's compiled programs (``call``, ``warmup``) and jaxport's check verdicts.

Compiled executables and verdicts are facts about this machine's software, never part of an artifact: they live only
in a directory of the user's own, ``$JAXPORT_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxport/xla``, else
``~/.cache/jaxport/xla`` (``call --cache-dir DIR`` and ``warmup --cache-dir DIR`` choose another).

A *verdict* records that a program passed the child check of ``isolate.check_payload``: the JSON file
``jaxport-verdict-<sha256>-<key>.json`` holds its key (the program's sha256, the versions of jaxlib, whose native
readers the check exercises, and of jaxport, and what the check does) and nothing else; no native code, no pickle.
Trust model: whoever can write in the directory can plant verdicts and compiled programs that JAX loads and runs,
so both are read only from a directory owned by this user and writable by no one else (:func:`untrusted_reason`;
``run.cache`` runs without JAX's cache, with a note, in any other), and a verdict never beyond its key: a verdict
file that is not a regular file of this user's that only this user can write, is larger than a verdict, does not
parse, or holds any other key is ignored (the check runs again and replaces it). Verdicts are written
atomically (``_fsio.atomic_write``); failing to write one only costs a check next time.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from ._fsio import atomic_write
from ._version import __version__
from .errors import OutputError

#: What a verdict file says it is.
VERDICT_FORMAT = "jaxport-check-verdict/1"
#: A verdict file is a few hundred bytes; one larger than this is not one.
MAX_VERDICT_BYTES = 4096


def default_cache_dir() -> Path:
    """``$JAXPORT_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxport/xla``, else ``~/.cache/jaxport/xla``."""
    if os.environ.get("JAXPORT_CACHE_DIR"):
        return Path(os.environ["JAXPORT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jaxport" / "xla"


def active_cache_dir() -> Path:
    """The cache directory this process uses: JAX's persistent compilation cache directory when it has that cache on
    (``call``, ``warmup``: verdicts travel with the compiled programs), else :func:`default_cache_dir`."""
    jax = sys.modules.get("jax")
    config = getattr(jax, "config", None)
    if config is not None:
        directory = getattr(config, "jax_compilation_cache_dir", None)
        if directory and getattr(config, "jax_enable_compilation_cache", False):
            return Path(directory)
    return default_cache_dir()


def jaxlib_version() -> str:
    """The installed jaxlib's version, without importing JAX (``jaxlib.version`` is a small module)."""
    from jaxlib.version import __version__ as version

    return str(version)


def verdict_key(digest: str, check: str) -> dict[str, str]:
    """What a verdict is about: the program's sha256, jaxlib's and jaxport's versions, and the check (``check``)."""
    return {"format": VERDICT_FORMAT, "sha256": digest, "jaxlib": jaxlib_version(), "jaxport": __version__,
            "check": check, "verdict": "passed"}


def verdict_path(directory: Path, key: dict[str, str]) -> Path:
    """The file of ``key``'s verdict in ``directory``: one per program, jaxlib, jaxport and check, so that software
    versions sharing a cache directory do not overwrite each other's."""
    tag = "-".join(_safe(key[k]) for k in ("jaxlib", "jaxport", "check"))
    return directory / f"jaxport-verdict-{_safe(key['sha256'])}-{tag}.json"


def _safe(text: str) -> str:
    """A version string as part of a file name: letters, digits, ``.``, ``_`` and ``+`` kept, anything else ``_``."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "._+") else "_" for c in text)[:64]


def untrusted_reason(directory: str | os.PathLike[str]) -> str | None:
    """Why ``directory`` may not be trusted with verdicts and compiled programs, or None if it may: it must be a
    directory (not a symbolic link) owned by this user, not writable by its group or by others. In a shared or
    foreign directory anyone could plant a "passed" verdict (its name is predictable) or a compiled program."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return None  # created by this process, with mode 0700, when something is written
    except (OSError, ValueError) as e:
        return f"it cannot be read ({getattr(e, 'strerror', None) or e})"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    uid = os.geteuid() if hasattr(os, "geteuid") else info.st_uid
    if info.st_uid != uid:
        return f"it belongs to another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"others can write in it (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def has_verdict(directory: Path, key: dict[str, str]) -> bool:
    """Whether ``directory`` holds a passed verdict of exactly ``key`` (see the module docstring for what is
    ignored), read only from a directory of this user's that no one else can write (:func:`untrusted_reason`)."""
    return _read_json(directory, verdict_path(directory, key), MAX_VERDICT_BYTES) == key


def _read_json(directory: Path, path: Path, most: int) -> Any:
    """The JSON value in ``path`` inside ``directory``, read only from a directory no one else may write
    (:func:`untrusted_reason`) and as :func:`_read_small` reads; None when it cannot be read or is not JSON."""
    if untrusted_reason(directory) is not None:
        return None
    data = _read_small(path, most)
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _read_small(path: Path, most: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (never through a symbolic link, never a FIFO or device) of at
    most ``most`` bytes; None otherwise, or if it cannot be read."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > most:
            return None
        if hasattr(os, "geteuid") and (info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            return None  # a file someone else wrote or may rewrite
        data = os.read(fd, most + 1)
        return data if len(data) <= most else None
    except OSError:
        return None
    finally:
        os.close(fd)


def write_verdict(directory: Path, key: dict[str, str]) -> bool:
    """Record ``key``'s passed verdict in ``directory`` (created if needed), atomically; False if it could not be
    written (a read-only or full disk: the check runs again next time)."""
    data = (json.dumps(key, indent=1, sort_keys=True) + "\n").encode("ascii")
    return _write(directory, verdict_path(directory, key), data)


def _write(directory: Path, path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` in ``directory`` (created if needed, mode 0700), atomically, readable by all and
    writable only by this user; False if it could not be written or the directory is not one to trust."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if untrusted_reason(directory) is not None:
            return False  # never leave a verdict where it would not be read, or where others could see it planted
        atomic_write(path, lambda f: f.write(data))
        os.chmod(path, 0o644)  # read only if no one else can write it, whatever the umask
        return True
    except (OSError, OutputError):
        return False


def write_cache_file(directory: Path, path: Path, chunks: list[bytes]) -> None:
    """Write ``chunks`` as the file ``path`` in ``directory`` (created if needed, mode 0700), atomically, readable by
    all and writable only by this user; ``OutputError`` naming why when it cannot (a directory others can write:
    nothing is left where it would not be trusted)."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot create the cache directory {directory}: {e.strerror or e}; give a directory this "
                          f"user can write (--cache-dir DIR).") from None
    untrusted = untrusted_reason(directory)
    if untrusted is not None:
        raise OutputError(f"cannot use the cache directory {directory}: {untrusted}, so nothing compiled may be kept "
                          f"there; use a directory of your own, mode 0700 (--cache-dir DIR).")

    def write(f: Any) -> None:
        for chunk in chunks:
            f.write(chunk)

    atomic_write(path, write)
    try:
        os.chmod(path, 0o644)  # read only if no one else can write it, whatever the umask
    except OSError as e:
        raise OutputError(f"cannot set the mode of {path}: {e.strerror or e}.") from None


#: The most bytes a remembered record (:func:`read_record`) may take.
MAX_RECORD_BYTES = 1 << 16


def record_path(directory: Path, kind: str, digest: str) -> Path:
    """The file of a record of ``kind`` about the program of sha256 ``digest``, for this jaxlib and jaxport."""
    return directory / f"jaxport-{_safe(kind)}-{_safe(digest)}-{_safe(jaxlib_version())}-{_safe(__version__)}.json"


def read_record(directory: Path, kind: str, digest: str) -> Any:
    """A JSON value remembered by :func:`write_record` for ``kind`` and ``digest`` (under this jaxlib and jaxport),
    read as verdicts are (a regular file of this user's that no one else can write, in a directory no one else can
    write, at most :data:`MAX_RECORD_BYTES`); None when there is none or it is not one."""
    found = _read_json(directory, record_path(directory, kind, digest), MAX_RECORD_BYTES)
    if not isinstance(found, dict) or found.get("key") != _record_key(kind, digest):
        return None
    return found.get("value")


def write_record(directory: Path, kind: str, digest: str, value: Any) -> bool:
    """Remember a JSON ``value`` of ``kind`` about the program of sha256 ``digest`` in ``directory``, atomically;
    False if it could not be written."""
    try:
        data = (json.dumps({"key": _record_key(kind, digest), "value": value}, sort_keys=True) + "\n").encode()
    except (TypeError, ValueError):
        return False
    return len(data) <= MAX_RECORD_BYTES and _write(directory, record_path(directory, kind, digest), data)


def _record_key(kind: str, digest: str) -> dict[str, str]:
    return {"kind": kind, "sha256": digest, "jaxlib": jaxlib_version(), "jaxport": __version__}
