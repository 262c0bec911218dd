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

Under a required signature the cache directory is code the signer did not write: a record about a program loaded
under one (:func:`require_vouching`: the program's sha256 and who may vouch) is read only if a trusted signer vouched
for that very file, its name and sha256 (``artifact.signing.vouch``); any other is ignored with one note, and the
work it would have saved is done again.
"""

from __future__ import annotations

import hashlib
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
    return _read_json(directory, verdict_path(directory, key), MAX_VERDICT_BYTES, key.get("sha256")) == key


# --- records under a required signature ----------------------------------------------------------------------------

#: Program sha256 -> what may vouch for the records about it (``run.vouching.Vouching``: ``vouched(path, sha256)``
#: gives the signer who vouched for that file, or None, and ``notes`` the lines about what was ignored).
_REQUIRED: dict[str, list[Any]] = {}


def require_vouching(program: str, vouching: Any) -> None:
    """From now on in this process, read a record about the program of sha256 ``program`` only if ``vouching``
    (or another one given for it) vouches for the file's bytes: the program was loaded under a required
    signature."""
    known = _REQUIRED.setdefault(program, [])
    if vouching not in known:
        known.append(vouching)


def vouching_required(program: str | None) -> bool:
    """Whether records about ``program`` are read only when vouched for (:func:`require_vouching`)."""
    return program is not None and program in _REQUIRED


def vouched(program: str | None, path: Path, sha256: str) -> tuple[bool, str | None]:
    """Whether the file ``path`` whose bytes have ``sha256`` may be used as a record about ``program``, and the
    signer who vouched for it: (True, None) when no signature is required for the program; (False, None) when one
    is and no trusted signer vouched for these bytes (:func:`unvouched` then says so)."""
    if program is None or program not in _REQUIRED:
        return True, None
    for vouching in _REQUIRED[program]:
        signer = vouching.vouched(path, sha256)
        if signer is not None:
            return True, signer
    return False, None


def unvouched(program: str, path: Path, keep: bool = False) -> str:
    """The line saying that ``path``, a record about ``program``, is ignored for want of a vouch; with ``keep``, it
    is also among the program's :func:`vouching_notes`, for whoever reports the work that read it."""
    lines = [vouching.ignored(path, keep) for vouching in _REQUIRED.get(program, ())[:1]]
    return lines[0] if lines else f"ignored {path.name} in the cache: no trusted signer vouched for it."


def vouching_notes(program: str | None) -> list[str]:
    """The lines about the records of ``program`` ignored under a required signature (vouches that did not verify,
    entries no one vouched for) since they were last asked for: each is said once."""
    return [n for vouching in _REQUIRED.get(program or "", ()) for n in vouching.drain()]


def _read_json(directory: Path, path: Path, most: int, program: str | None = None) -> Any:
    """The JSON value in ``path`` inside ``directory``, read only from a directory no one else may write
    (:func:`untrusted_reason`) and as :func:`read_small` reads; None when it cannot be read or is not JSON, or
    when a signature is required for ``program`` and no trusted signer vouched for the file (:func:`vouched`)."""
    if untrusted_reason(directory) is not None:
        return None
    data = read_small(path, most)
    if data is None:
        return None
    if vouching_required(program) and not vouched(program, path, hashlib.sha256(data).hexdigest())[0]:
        assert program is not None
        unvouched(program, path, keep=True)
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def read_small(path: Path, most: int) -> bytes | None:
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
        data = os.read(fd, min(most, info.st_size) + 1)  # never a buffer of ``most`` for a small file
        return data if len(data) <= min(most, info.st_size) else None
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


def read_record(directory: Path, kind: str, digest: str, program: str | None = None) -> Any:
    """A JSON value remembered by :func:`write_record` for ``kind`` and ``digest`` (under this jaxlib and jaxport),
    read as verdicts are (a regular file of this user's that no one else can write, in a directory no one else can
    write, at most :data:`MAX_RECORD_BYTES`); None when there is none or it is not one, or when it is about
    ``program`` (a sha256), which requires a vouch, and no trusted signer vouched for it (:func:`vouched`)."""
    found = _read_json(directory, record_path(directory, kind, digest), MAX_RECORD_BYTES, program)
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
