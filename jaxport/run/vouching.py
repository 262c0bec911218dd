"""A cache directory under a required signature: which of its entries a trusted signer vouched for
(:class:`Vouching`, what ``usercache`` asks before it reads a record about a signed program), and vouching for the
entries of one artifact (:func:`vouch_cache`, ``jaxport sign --cache-dir`` and ``warmup --sign``).

Once an artifact's signature verified (``load.open_checked``, ``load.check_signature``), every program of it is
registered with ``usercache.require_vouching``: from then on, in this process, a shipped executable, a check verdict
or padding verdicts about that program are used only if a vouch of ``artifact.signing.vouch`` by a key the caller
trusts names that file with the sha256 of the bytes read; anything else is ignored, with one line, and the program
is compiled, checked or proven again. JAX's own persistent compilation cache cannot be vouched for entry by entry, so
a program under a required signature is compiled past it (``jaxprivate.compiler.steered`` with
``persistent=False``), and IREE's compiled modules are not read from the cache for it either.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import usercache
from .._fsio import shown_path
from ..artifact.container import Artifact, open_artifact
from ..artifact.signing.check import Trust, Verified, hash_descriptor, trust
from ..artifact.signing.vouch import PREFIX, Entry, Vouches, read_vouches, trusted_keys, write_vouch
from ..errors import UsageError
from ..isolation.isolate import verdict_file
from .buckets.verdicts import PADDING_RECORD, padding_digest
from .executables import PREFIX as EXECUTABLE_PREFIX
from .executables import program_prefix, read_record

__all__ = ["Vouched", "Vouching", "register", "vouch", "vouch_cache"]


class Vouching:
    """Who may vouch for the cache entries of one artifact opened under a required signature: the artifact's
    verified sha256 and the trusted keys. The vouches of each directory are read once, when an entry of it is first
    asked about; ``notes`` collects a line for each vouch or entry ignored."""

    def __init__(self, artifact_sha256: str, trusted: Trust):
        self.artifact_sha256 = artifact_sha256
        self.trust = trusted
        self._keys = trusted_keys(trusted)  # read once, as the artifact's signature was just verified with them
        self.notes: list[str] = []
        self._read: dict[tuple[str, tuple[tuple[str, int, int, int], ...]], Vouches] = {}
        self._lock = threading.Lock()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vouching) and (other.artifact_sha256, other.trust) == (self.artifact_sha256,
                                                                                         self.trust)

    def __hash__(self) -> int:
        return hash((self.artifact_sha256, self.trust))

    def vouched(self, path: Path, sha256: str) -> str | None:
        """The signer who vouched for the file ``path`` with bytes of ``sha256``, or None."""
        return self._vouches(path.parent).entries.get(path.name, {}).get(sha256)

    def ignored(self, path: Path, keep: bool = True) -> str:
        """A line saying that the entry ``path`` is ignored, for want of a vouch (kept in ``notes`` with ``keep``)."""
        line = (f"ignored {path.name} in the cache {shown_path(path.parent)}: a signature is required and no "
                f"trusted signer vouched for it (vouch for the cache: jaxport sign ARTIFACT --key PRIVATE.pem "
                f"--cache-dir DIR); doing its work here instead.")
        if keep:
            self._note(line)
        return line

    def drain(self) -> list[str]:
        """The lines kept since the last call (each said once, to whoever reports the work that read them)."""
        with self._lock:
            lines, self.notes = self.notes, []
        return lines

    def _vouches(self, directory: Path) -> Vouches:
        """The vouches of ``directory``, read again whenever its vouch files for the artifact changed."""
        prefix = f"{PREFIX}{self.artifact_sha256[:24]}-"
        try:
            state = tuple(sorted((n, s.st_mtime_ns, s.st_size, s.st_ino)
                                 for n in os.listdir(directory) if n.startswith(prefix)
                                 for s in [os.lstat(os.path.join(directory, n))]))
        except OSError:
            state = ()
        key = (os.path.abspath(directory), state)
        with self._lock:
            found = self._read.get(key)
        if found is None:
            found = read_vouches(directory, self.artifact_sha256, self._keys)
            with self._lock:
                self._read = {k: v for k, v in self._read.items() if k[0] != key[0]}
                self._read[key] = found
            for note in found.notes:
                self._note(f"{note} in the cache {shown_path(directory)}.")
        return found

    def _note(self, line: str) -> None:
        with self._lock:
            if line not in self.notes:
                self.notes.append(line)


def register(art: Artifact, verified: Verified | None, trusted: Trust | Iterable[str | Path]) -> Vouching | None:
    """After ``art``'s signature verified with ``trusted`` (a ``Trust``, or the trusted keys' paths): require a vouch
    by one of those keys for the cache entries of each of its programs (``usercache.require_vouching``); returns
    the :class:`Vouching` (None when no signature was required)."""
    if verified is None or verified.sha256 is None:
        return None
    vouching = Vouching(verified.sha256, trust(trusted))
    for f in art.model.functions.values():
        member = art.model.members.get(f.payload)
        if member is not None:
            usercache.require_vouching(member.sha256, vouching)
    return vouching


@dataclass(frozen=True)
class Vouched:
    """A vouch written: its file, the key's id and the entries it names."""

    path: Path
    key_id: str
    entries: tuple[Entry, ...]

    def to_json(self) -> dict[str, object]:
        return {"vouch": str(self.path), "key_id": self.key_id,
                "entries": [{"name": e.name, "kind": e.kind, "sha256": e.sha256} for e in self.entries]}


def vouch(artifact: str | Path, key: str | Path, cache_dir: str | Path, *, password: str | None = None) -> Vouched:
    """Vouch, with the elliptic-curve private key ``key`` (PEM; ``password`` if it is encrypted), for the entries of
    the cache directory ``cache_dir`` that belong to ``artifact``: a vouch file there (``artifact.signing.vouch``)
    names each by its sha256, so that ``--require-signature`` and ``require_signature=`` by the key's public half
    use them. The artifact is opened and every member's sha256 checked first. ``UsageError`` when the directory
    holds nothing of it, or the key cannot sign; ``jaxport warmup --sign`` and ``jaxport sign --cache-dir``."""
    with open_artifact(artifact) as art:
        art.verify_all()
        return vouch_cache(art, cache_dir, key, password)


def vouch_cache(art: Artifact, directory: str | Path, key: str | Path, password: str | None = None) -> Vouched:
    """Vouch, with the private key ``key``, for every entry of the cache ``directory`` that belongs to the open
    artifact ``art`` (its executables that read whole, its programs' check verdicts and its functions' padding
    verdicts, for this jaxlib and jaxport). ``UsageError`` when the directory holds none."""
    directory = Path(directory).expanduser()
    reason = usercache.untrusted_reason(directory)
    if reason is not None or not directory.is_dir():
        raise UsageError(f"{shown_path(directory)}: {reason or 'not a directory'}; give the cache directory that "
                         f"warmup filled (--cache-dir DIR).")
    entries = _entries(art, directory)
    if not entries:
        raise UsageError(f"{shown_path(directory)} holds nothing of {shown_path(art.path)} to vouch for: warm it up "
                         f"first (jaxport warmup {shown_path(art.path)} --cache-dir {shown_path(directory)}).")
    sha = hash_descriptor(art.fileno(), art.size, art.path).sha256
    path, kid = write_vouch(directory, art.path.name, sha, entries, Path(key), password)
    return Vouched(path, kid, tuple(entries))


def _entries(art: Artifact, directory: Path) -> list[Entry]:
    """The entries of ``directory`` that belong to ``art``, each with its file's sha256."""
    found: list[Entry] = []
    names = sorted(os.listdir(directory))
    for f in art.model.functions.values():
        member = art.model.members.get(f.payload)
        if member is None:
            continue
        program = member.sha256
        prefix = program_prefix(program)
        for name in names:
            if name.startswith(prefix) and name.startswith(EXECUTABLE_PREFIX):
                record, _ = read_record(directory / name)
                if record is not None and record.header.get("program") == program:
                    found.append(Entry(name, record.sha256, "executable", program))
        candidates = [(verdict_file(directory, program), "check-verdict"),
                      (usercache.record_path(directory, PADDING_RECORD, padding_digest(member.sha256, f)),
                       "padding-verdicts")]
        for path, kind in candidates:
            sha = _file_sha256(path)
            if sha is not None:
                found.append(Entry(path.name, sha, kind, program))
    unique = {e.name: e for e in found}
    return [unique[n] for n in sorted(unique)]


def _file_sha256(path: Path) -> str | None:
    data = usercache.read_small(path, usercache.MAX_RECORD_BYTES)
    if data is None:
        return None
    try:
        json.loads(data)
    except ValueError:
        return None
    return hashlib.sha256(data).hexdigest()
