"""Vouches: a trusted signer's word for the entries of a cache directory that belong to a signed artifact.

A cache directory holds code and verdicts (executables ``warmup --target`` ships, the program check's verdicts,
padding verdicts): under a required signature, nothing of it is used unless a signer the caller trusts vouched for
it. A vouch is a file of the cache directory, ``jaxport-vouch-<artifact>-<key>.sig``: a sigstore bundle, signed with
an elliptic-curve key as ``jaxport sign --key`` signs an artifact (``dsse``), whose in-toto statement names each
entry it vouches for by file name and sha256 (the subjects) and, in its predicate, the artifact they belong to (file
name and sha256) and what each entry is (its kind and the program's sha256)::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "jaxport-executable-....bin", "digest": {"sha256": "..."}}, ...],
     "predicateType": "https://jaxport.dev/cache-vouch/v1",
     "predicate": {"artifact": {"name": "mlp.jaxport", "sha256": "..."},
                   "entries": [{"name": "jaxport-executable-....bin", "kind": "executable", "program": "..."}]}}

Trust model: a vouch is hostile until its signature verifies with a key the caller trusts (its key hint only selects
among them), it is read as cache files are (a regular file of this user's, in a directory no one else can write, at
most :data:`MAX_VOUCH_BYTES`), and it counts only for the artifact whose verified sha256 it names: a vouch for
another artifact, or by another key, vouches for nothing here. An entry is used only when its file's bytes, as read
for use, have the sha256 vouched for. Keys only: a trust of CA certificates or Sigstore identities alone gets no
vouched entries (the work they would save is done again).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._fsio import atomic_write, shown_path
from ...errors import SignatureError
from .bundle import parse_envelope
from .dsse import signed_bundle, verify_envelope
from .trust import Trust, key_id, read_trusted
from .trust import private_key as signing_key

__all__ = ["KINDS", "MAX_VOUCH_BYTES", "PREDICATE", "PREFIX", "Entry", "Vouches", "read_vouches", "trusted_keys",
           "vouch_path", "write_vouch"]

PREDICATE = "https://jaxport.dev/cache-vouch/v1"
PREFIX = "jaxport-vouch-"
#: A vouch names one entry in about 250 bytes; this allows some thousands.
MAX_VOUCH_BYTES = 1 << 20
#: What an entry may be: a shipped executable, the program check's verdict, a function's padding verdicts.
KINDS = ("executable", "check-verdict", "padding-verdicts")


@dataclass(frozen=True)
class Entry:
    """One file of a cache directory a vouch names: its name, its bytes' sha256, what it is and its program."""

    name: str
    sha256: str
    kind: str
    program: str


def vouch_path(directory: Path, artifact_sha256: str, key: str) -> Path:
    """The vouch of the key with id ``key`` for the artifact of sha256 ``artifact_sha256`` in ``directory``."""
    return directory / f"{PREFIX}{artifact_sha256[:24]}-{key[:16]}.sig"


def write_vouch(directory: Path, artifact: str, artifact_sha256: str, entries: Sequence[Entry], private_key: Path,
                password: str | None = None) -> tuple[Path, str]:
    """Vouch for ``entries`` of ``directory`` as belonging to the artifact named ``artifact`` of sha256
    ``artifact_sha256``, signed with the elliptic-curve private key ``private_key`` (PEM); the vouch replaces this
    key's earlier one for the artifact. Returns its path and the key id. ``UsageError`` for a key that cannot sign."""
    key = signing_key(private_key, password)
    statement = {"_type": "https://in-toto.io/Statement/v1",
                 "subject": [{"name": e.name, "digest": {"sha256": e.sha256}} for e in entries],
                 "predicateType": PREDICATE,
                 "predicate": {"artifact": {"name": artifact, "sha256": artifact_sha256},
                               "entries": [{"name": e.name, "kind": e.kind, "program": e.program}
                                           for e in entries]}}
    raw = signed_bundle(statement, key)
    kid = key_id(key.public_key())
    path = vouch_path(directory, artifact_sha256, kid)
    atomic_write(path, lambda f: f.write(raw))
    os.chmod(path, 0o644)
    return path, kid


class _Bad(SignatureError):
    pass


def _bad(path: Path, what: str) -> SignatureError:
    return _Bad(f"{path.name}: {what}")


@dataclass
class Vouches:
    """The entries trusted signers vouched for in one directory, for one artifact: file name -> {sha256: signer}
    (every vouch's, so that an older vouch of one key for earlier bytes hides no other key's for the bytes there
    now); and a line for each vouch that was ignored, and why."""

    entries: dict[str, dict[str, str]]
    notes: list[str]


def trusted_keys(trust: Trust) -> list[tuple[str, Path, Any]]:
    """The keys of ``trust`` a vouch may be signed with: (key id, the file it was read from, the public key)."""
    return [(kid, t.path, key) for t in (read_trusted(p) for p in trust.keys) for kid, key in t.keys]


def read_vouches(directory: Path, artifact_sha256: str, keys: list[tuple[str, Path, Any]]) -> Vouches:
    """What the vouches in ``directory`` for the artifact of sha256 ``artifact_sha256`` vouch for, by ``keys``
    (:func:`trusted_keys`; see the module docstring for what is ignored)."""
    out = Vouches({}, [])
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(f"{PREFIX}{artifact_sha256[:24]}-"))
    except OSError:
        return out
    if not names:
        return out
    for name in names:
        try:
            _read_one(directory / name, artifact_sha256, keys, out)
        except SignatureError as e:
            out.notes.append(f"ignored the vouch {str(e)}")
    return out


def _read_one(path: Path, artifact_sha256: str, keys: Iterable[tuple[str, Path, Any]], out: Vouches) -> None:
    raw = _read_cache_file(path)
    envelope = parse_envelope(raw, path, PREDICATE, bad=_bad)
    if envelope.method != "key":
        raise _bad(path, "it is not signed with a key")
    matching = [(p, key) for kid, p, key in keys if kid == envelope.key_id]
    if not matching:
        raise _bad(path, f"signed by key {(envelope.key_id or '')[:16]}, which is not trusted")
    signer = next((p for p, key in matching if verify_envelope(envelope.payload, envelope.signature, key)), None)
    if signer is None:
        raise _bad(path, "its signature does not verify (altered after signing)")
    statement = envelope.statement
    predicate = statement.get("predicate")
    artifact = predicate.get("artifact") if isinstance(predicate, dict) else None
    if not isinstance(artifact, dict) or artifact.get("sha256") != artifact_sha256:
        raise _bad(path, "it vouches for another artifact")
    subjects = statement.get("subject")
    if not isinstance(subjects, list):
        raise _bad(path, "its statement names no entries")
    who = f"key {(envelope.key_id or '')[:16]} ({shown_path(signer)})"
    for s in subjects:
        digest = s.get("digest") if isinstance(s, dict) else None
        name, sha = (s.get("name"), digest.get("sha256")) if isinstance(digest, dict) else (None, None)
        if isinstance(name, str) and isinstance(sha, str) and "/" not in name:
            out.entries.setdefault(name, {}).setdefault(sha, who)


def _read_cache_file(path: Path) -> bytes:
    """A vouch's bytes, read as cache files are: a regular file (never through a link) of this user's that no one
    else may write, at most :data:`MAX_VOUCH_BYTES`."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise _bad(path, f"it cannot be opened ({e.strerror or e})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _bad(path, "it is not a regular file")
        if hasattr(os, "geteuid") and (info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            raise _bad(path, "it belongs to another user, or others can write it")
        data = os.read(fd, MAX_VOUCH_BYTES + 1)
    except OSError as e:
        raise _bad(path, f"it cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_VOUCH_BYTES:
        raise _bad(path, f"it is larger than {MAX_VOUCH_BYTES} bytes")
    return data
