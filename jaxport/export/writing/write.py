"""Writing an artifact: the one step that turns lowered functions into a file, shared by export and import.

``artifact_metadata`` settles the artifact's name and metadata before anything is lowered (a bad name fails
first); ``build_result`` assembles the manifest of ``specs/FORMAT.md`` around an artifact's ``Contents`` (the
functions' entries, their payloads, the bound weights) and packs them into an ``ExportResult``, which holds the
artifact in memory until it is saved (``save``, the same bytes as ``to_bytes``) or loaded in this process (``load``);
``write_artifact`` builds and saves in one step.
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._fsio import atomic_write
from ...artifact import bulkwrite, container, manifest, tensors
from ...artifact.model import METADATA_KEYS, Function, Manifest, Metadata, Producer, Source, Weights, replace
from ...artifact.output import artifact_output
from ...artifact.signing.bundle import drop_stale
from ...artifact.tensors import Tensor
from ...errors import UsageError
from ...isolation.isolate import trust
from ...spec import check_artifact_name
from .manifest import versions


class ExportResult:
    """What ``export`` and ``import_stablehlo`` produced: the artifact's manifest and members, notes for the user,
    and where it was written (``path``; None until it is saved).

    ``to_bytes()`` gives the artifact file's bytes, ``save(path)`` writes them (and the sidecar manifest),
    ``load()`` opens the artifact in this process as ``jaxport.load`` does (a ``Loaded``, callable), through
    ``loader``: the export layer does not import the run layer, and ``jaxport.export`` (the facade) gives each result
    ``jaxport.run.load.load``.
    """

    def __init__(self, manifest: Manifest, members: dict[str, Any], *, warnings: list[str] | None = None,
                 read: list[str] | None = None, write_manifest: bool = True):
        self._manifest = manifest  # its members are listed, and the weights' digests filled in, by _manifest_bytes
        self._final: Manifest | None = None
        self._json: dict[str, Any] | None = None
        self.warnings = list(warnings or [])
        #: The artifact's path once saved, and its sidecar manifest's (None without one).
        self.path: Path | None = None
        self.manifest_path: Path | None = None
        self._members = members
        self._read = list(read or [])  # files the export read: never overwritten by ``save``
        self._write_manifest = write_manifest
        self._raw: bytes | None = None  # the manifest's bytes, once the weights' digests are in
        self._size: int | None = None
        #: Opens an artifact as ``jaxport.load`` (``run.load.load``'s signature) for ``load``; None: not given.
        self.loader: Callable[..., Any] | None = None

    def __repr__(self) -> str:
        where = f"saved as {str(self.path)!r}" if self.path is not None else "not saved"
        return f"<jaxport.ExportResult {self.name!r} ({', '.join(self._manifest.functions)}), {where}>"

    @property
    def model(self) -> Manifest:
        """The artifact's manifest as records (``artifact.model``), its ``members`` listed."""
        self._manifest_bytes()
        assert self._final is not None
        return self._final

    @property
    def manifest(self) -> dict[str, Any]:
        """The artifact's manifest as JSON (its ``members`` filled in: the members' sizes and sha256)."""
        if self._json is None:
            self._json = self.model.to_json()
        return self._json

    def _listed(self) -> Manifest:
        """The manifest with the members listed and the weights' digests as they stand (while they are computing,
        ``PENDING_SHA256``: as long as the real ones)."""
        packed = self._members.get(manifest.WEIGHTS_MEMBER)
        m = self._manifest
        if m.weights is not None and isinstance(packed, tensors.PackedWeights):
            m = replace(m, weights=Weights(m.weights.member, dict(packed.index)))
        return container.with_members(m, self._members)

    def _manifest_bytes(self) -> bytes:
        """The manifest's bytes: the weights' digests waited for (``build_result(wait=False)``) and filled in."""
        if self._raw is None:
            for data in self._members.values():
                if getattr(data, "pending", False):
                    data.complete()
            self._final = self._listed()
            self._raw = container.manifest_bytes(self._final)
        return self._raw

    @property
    def name(self) -> str:
        """The artifact's name (``metadata.name``): ``save`` to a directory writes ``<name>.jaxport`` there."""
        return str(self._manifest.metadata.name)

    @property
    def size(self) -> int:
        """The artifact file's size in bytes."""
        if self._size is None:
            sink = _Sink()
            container.write_members(sink, self._manifest_bytes(), self._members)
            self._size = sink.end
        return self._size

    def to_bytes(self) -> bytes:
        """The artifact file's bytes (those ``save`` writes)."""
        buffer = io.BytesIO()
        container.write_members(buffer, self._manifest_bytes(), self._members)
        return buffer.getvalue()

    def save(self, path: str | Path, *, write_manifest: bool | None = None) -> Path:
        """Write the artifact to ``path`` (a file, or a directory to write ``<name>.jaxport`` in), atomically, and,
        with ``write_manifest`` (default: the export's ``write_manifest``), its manifest beside it as
        ``<artifact>.manifest.json``. Both are checked first (never a device, FIFO or directory, never a file the
        export read). Returns the artifact's path, which ``path`` also holds afterwards."""
        outputs = artifact_output(path, f"{self.name}.jaxport",
                                  manifest=self._write_manifest if write_manifest is None else write_manifest)
        outputs.check(self._read)
        out = outputs.path
        atomic_write(out, self._write, inputs=self._read)
        stale = drop_stale(out)  # a signature of the file this one replaced: removed, and said
        if stale is not None:
            self.warnings.append(stale)
        outputs.write_sidecar(self._manifest_bytes(), self._read)
        self.path, self.manifest_path, self._size = out, outputs.sidecar, out.stat().st_size
        return out

    def _write(self, f: Any) -> None:
        """Write the artifact into the new file ``f``. Large bound weights (``bulkwrite.DIRECT_MIN``) go first, at
        the offset they will have, written by a thread with direct I/O (their CRC-32 computed as they are written)
        while this one waits for their digests, which change the manifest's bytes but not its size; the headers
        and the other members follow."""
        weights: Any = self._members.get(manifest.WEIGHTS_MEMBER)
        if not hasattr(weights, "chunks") or weights.size < bulkwrite.DIRECT_MIN:
            container.write_members(f, self._manifest_bytes(), self._members, direct=True)
            return
        size = len(self._raw if self._raw is not None else  # while digests are pending, they are fixed-width
                   container.manifest_bytes(self._listed()))
        writer = _Writer(f, container.data_offset(size, self._members, manifest.WEIGHTS_MEMBER), weights)
        try:
            raw = self._manifest_bytes()
        except BaseException:
            writer.stop()  # and wait for it: the file is closed and removed next, never under the thread
            raise
        weights.crc32 = writer.join()
        f.seek(0)
        if len(raw) != size:  # cannot happen (a digest of another width): write everything in order instead
            f.truncate()
            container.write_members(f, raw, self._members, direct=True)
        else:
            container.write_members(f, raw, self._members, written=(manifest.WEIGHTS_MEMBER,))

    def load(self, function: str | None = None, *, runtime: str = "jax", allow_platform_mismatch: bool = False,
             allow_custom_calls: Iterable[str] | None = (), verify_weights: bool = True,
             cache_dir: str | Path | None = None, cache: bool = True, module_dir: str | Path | None = None,
             require_signature: str | Path | Iterable[str | Path] | None = (), signature: str | Path | None = None,
             check_ranges: bool = False, verify: bool = True, defer_verify: bool = False) -> Any:
        """The artifact's function (``function`` when it holds several), ready to call in this process: what
        ``jaxport.load`` gives for the saved file (a ``jaxport.Loaded``), with the same checks and keywords (its own:
        the export layer names no record of the run layer's). An unsaved artifact is written to a temporary file that
        is removed once it is open (the loaded function keeps it mapped)."""
        load = self.loader
        if load is None:
            raise UsageError("this export result has no loader (it was not made by jaxport.export); save it with "
                             "result.save(PATH) and open it with jaxport.load(PATH).")
        options = {"runtime": runtime, "allow_platform_mismatch": allow_platform_mismatch,
                   "allow_custom_calls": allow_custom_calls, "verify_weights": verify_weights, "cache_dir": cache_dir,
                   "cache": cache, "module_dir": module_dir, "require_signature": require_signature,
                   "signature": signature, "check_ranges": check_ranges, "verify": verify,
                   "defer_verify": defer_verify}
        if self.path is not None:
            return load(self.path, function, **options)
        fd, temporary = tempfile.mkstemp(suffix=".jaxport", prefix=f"{self.name}-")
        try:
            with os.fdopen(fd, "wb") as f:
                container.write_members(f, self._manifest_bytes(), self._members)
            art = container.open_artifact(temporary)
        finally:
            os.unlink(temporary)
        art.path = Path(f"<{self.name}.jaxport, not saved>")  # how messages name it
        return load(art, function, **options)


class _Writer:
    """A thread writing a streamed member's data into ``f`` at ``start`` (``bulkwrite.write_data``, direct) while
    the caller waits for its digests; ``join`` waits for it and gives its CRC-32 or raises what it raised. Nothing
    else may touch ``f`` until then."""

    def __init__(self, f: Any, start: int, data: Any):
        self._f, self._start, self._data = f, start, data
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._crc = 0
        self._thread = threading.Thread(target=self._run, name="jaxport-weights-write", daemon=True)
        self._thread.start()

    def _chunks(self) -> Any:
        for chunk in self._data.chunks():
            if self._stop.is_set():
                raise _Stopped
            yield chunk

    def _run(self) -> None:
        try:
            self._f.seek(self._start)
            written, self._crc = bulkwrite.write_data(self._f, self._chunks(), self._data.size, direct=True,
                                                      crc=True)
            if written != self._data.size:
                raise ValueError(f"{written} bytes of weights written, {self._data.size} declared")
        except BaseException as e:  # noqa: BLE001 - raised again by join()
            self._error = e

    def stop(self) -> None:
        """Ask the thread to stop, and wait for it (its error, if any, is dropped: the caller has its own)."""
        self._stop.set()
        self._wait()

    def join(self) -> int:
        """Wait for the thread to write everything, and raise what it raised; returns the data's CRC-32."""
        self._wait()
        if self._error is not None:
            raise self._error
        return self._crc

    def _wait(self) -> None:
        interrupted: BaseException | None = None
        while self._thread.is_alive():
            try:
                self._thread.join()
            except KeyboardInterrupt as e:  # the file must not be closed under the thread: stop it, then leave
                self._stop.set()
                interrupted = e
        if interrupted is not None:
            raise interrupted


class _Stopped(Exception):
    """The writer thread was asked to stop."""


class _Sink:
    """A seekable file that keeps nothing: how large an artifact would be, without holding its bytes."""

    def __init__(self) -> None:
        self.pos = self.end = 0

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        self.pos += n
        self.end = max(self.end, self.pos)
        return n

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.end + offset
        return self.pos

    def seekable(self) -> bool:
        return True

    def flush(self) -> None:
        pass


def relative_path(path: Path) -> str:
    """``path`` relative to the current directory when under it, else its base name (never absolute)."""
    try:
        return Path(os.path.relpath(path.resolve(), Path.cwd().resolve())).as_posix() \
            if path.resolve().is_relative_to(Path.cwd().resolve()) else path.name
    except (OSError, ValueError):
        return path.name


def artifact_metadata(spec_metadata: Mapping[str, Any], name: str | None, version: str | None,
                      default_name: str) -> Metadata:
    """The manifest's ``metadata``: the spec's, with ``name`` (``--name``, else the spec's, else ``default_name``)
    and ``version`` (``--version``, else the spec's) settled and checked. Its keys keep the spec's order (then
    ``labels``, ``version``, ``description`` when the spec leaves them out): the order is part of the bytes."""
    given = Metadata(**{k: v for k, v in spec_metadata.items() if k in METADATA_KEYS})
    order = [k for k in spec_metadata if k in METADATA_KEYS]
    order += [k for k in ("labels", "name", "version", "description") if k not in order]
    artifact_name = name or given.name or default_name
    check_artifact_name(artifact_name, "--name" if name else "metadata.name")
    return Metadata(artifact_name, str(version) if version is not None else given.version, given.description,
                    dict(given.labels or {}), tuple(order))


@dataclass(frozen=True)
class Contents:
    """What an artifact holds, before it is packed: its ``metadata``; its ``functions`` (manifest entries by name)
    and their ``payloads`` (member name -> serialized ``Exported``, produced by this process); the ``bound`` tensors,
    packed into the weights member; and where it came from. ``source`` is the manifest's ``source`` (export's, with
    paths relative to its root); without it, ``spec_file`` is recorded relative to the current directory, unless it
    is a placeholder such as ``<no spec>`` (or None). ``producer`` (default: this process's versions) is what the
    manifest records as its writer."""

    metadata: Metadata
    functions: dict[str, Function]
    payloads: dict[str, bytes]
    bound: list[Tensor] = field(default_factory=list)
    spec_file: str | None = None
    source: Source | None = None
    producer: Producer | None = None
    #: Other files the build read (an imported module), which ``save`` never replaces, as it never replaces the spec.
    read: tuple[str, ...] = ()


def build_result(contents: Contents, *, write_manifest: bool = True, warnings: list[str] | None = None,
                 wait: bool = True) -> ExportResult:
    """The artifact of ``contents``, in memory. ``write_manifest`` is ``save``'s default for writing the sidecar
    manifest. Without ``wait``, the weights' digests may still be computing when it returns: the result waits for
    them when first asked for its manifest or bytes, and a ``save`` meanwhile writes the weights while they
    finish."""
    for payload in contents.payloads.values():
        trust(payload)  # serialized by JAX in this process: no child check when it is loaded here
    spec_file = contents.spec_file
    recorded_spec = relative_path(Path(spec_file)) if spec_file and not spec_file.startswith("<") else None
    members: dict[str, Any] = dict(contents.payloads)
    weights = None
    if contents.bound:
        packed = tensors.pack(contents.bound, wait=wait)
        weights = Weights(manifest.WEIGHTS_MEMBER, packed.index)
        members[manifest.WEIGHTS_MEMBER] = packed
    m = Manifest(manifest.FORMAT_VERSION, contents.producer or versions(), {}, contents.functions, contents.metadata,
                 contents.source if contents.source is not None else Source(recorded_spec), weights,
                 manifest.FORMAT_NAME)
    read = [spec_file] if spec_file and not spec_file.startswith("<") else []
    read += contents.read
    return ExportResult(m, members, warnings=warnings, read=read, write_manifest=write_manifest)


def write_artifact(output: str | Path | None, contents: Contents, *, write_manifest: bool = True,
                   warnings: list[str] | None = None) -> ExportResult:
    """``build_result``, saved to ``output``: the artifact's path or a directory (default: ``<name>.jaxport`` in the
    current directory). With ``write_manifest``, the manifest is also written next to the artifact as
    ``<artifact>.manifest.json``. Both outputs are checked (``check_output``: never a device, FIFO or directory, never
    the spec or another file the export read) before either is written.
    """
    result = build_result(contents, write_manifest=write_manifest, warnings=warnings)
    result.save(output if output is not None else Path("."))
    return result
