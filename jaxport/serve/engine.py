"""What every batch-engine adapter (``jaxport.ray``, ``jaxport.beam``, ``jaxport.spark``) holds per worker: an
artifact's function on a lazy :class:`batching.Batched` (the rows of a batch become its input arrays in
``serve.rows``), the most rows one program call takes (what an engine caps its batches at), and the artifact itself
when it arrives as bytes.

Start-up is what a batch job pays per worker, so a worker compiles only what its job reaches: the one bucket that
covers the engine's batch size when the adapter knows it (Spark's ``batch_size``, Beam's ``max_batch_size``, Ray's
``batch_size=``), at start; else the bucket of the first batch, when it comes. A smaller batch (a ragged last one)
is padded to that bucket, a batch over the largest bucket is split into chunks of it; a whole job compiles one
program per worker. Only a batch larger than every bucket compiled so far compiles another (counted in
``compilations_after_warmup``). An engine cuts a dataset into batches wherever it likes, so a function whose rows
may not be split apart (``Batched.splits``: an output row that depends on its position or on other rows, or a
variable sizing an axis but axis 0) is refused when the worker starts, with the proof's reason
(:func:`refuse_unsplittable`). With ``cache_dir`` (JAX's persistent cache: ``run.cache``), a worker fetches the
program that ``jaxport warmup --cache-dir DIR`` or an earlier worker compiled instead of compiling it, and finds the
program check's verdict there too (``isolate``), so it starts no checking child.

An artifact given as bytes (Ray's object store, a Beam handler's own copy) is written once per machine and content
to a private file named by its sha256 in the user's cache (``usercache``: ``CACHE/artifacts/SHA256.jaxport``) and
loaded from there, with every check ``jaxport.load`` makes (a damaged transfer is refused with its message).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import usercache
from .._api_types import record_of
from .._fsio import atomic_write
from ..artifact import contract
from ..artifact.model import Function
from ..errors import FormatError, OutputError, UsageError
from ..run.buckets.served import elements
from ..run.loaded import Loaded
from ..run.options import LoadOptions
from .batching import Batched, Dims, plan_served
from .compiled import COMPILING
from .loading import check_serving, load_served

#: What an adapter takes as the artifact: a path every worker can read, or the artifact's bytes.
ArtifactSource = str | Path | bytes

#: The counts an Engine keeps (``Engine.counts``), as the engines report them (Beam counters, Spark's metrics
#: accumulator, Ray columns).
COUNTS = ("workers", "rows", "program_calls", "compilations", "compilation_cache_hits", "compilations_after_warmup")


def artifacts_dir() -> Path:
    """Where artifacts received as bytes are kept: ``artifacts/`` in the user's cache (``usercache``)."""
    return usercache.default_cache_dir() / "artifacts"


def _sha256_file(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _private_dir() -> Path:
    directory = artifacts_dir()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot keep a received artifact in {directory}: {e.strerror or e}; point "
                          f"$JAXPORT_CACHE_DIR at a directory of this user's.") from None
    reason = usercache.untrusted_reason(directory)
    if reason is not None:
        raise OutputError(f"not keeping a received artifact in {directory}: {reason}, so what it holds cannot be "
                          f"trusted; point $JAXPORT_CACHE_DIR at a directory of this user's (mode 0700).")
    return directory


def artifact_file(data: bytes | bytearray | memoryview) -> Path:
    """The file of an artifact received as bytes: ``artifacts/SHA256.jaxport`` in the user's cache, written once
    (atomically) and reused while its content still has that digest. The bytes are not trusted: ``jaxport.load``
    checks the file as it checks any artifact."""
    view = memoryview(data)
    digest = hashlib.sha256(view).hexdigest()
    path = _private_dir() / f"{digest}.jaxport"
    if not (path.is_file() and not path.is_symlink() and _sha256_file(path) == digest):
        atomic_write(path, lambda f: f.write(view))
        os.chmod(path, 0o600)
    return path


def keep_file(path: str | Path) -> tuple[Path, str]:
    """A local artifact file kept under its content's name, ``artifacts/SHA256.jaxport`` in the user's cache (a
    hard link, else a copy), and that sha256: a name an engine can ship it by that no other artifact shares."""
    source = Path(path)
    digest = _sha256_file(source)
    if digest is None:
        raise UsageError(f"{source}: cannot read the artifact (no such file, or no permission).")
    kept = _private_dir() / f"{digest}.jaxport"
    if kept.is_file() and not kept.is_symlink() and _sha256_file(kept) == digest:
        return kept, digest
    with contextlib.suppress(FileNotFoundError):
        kept.unlink()
    try:
        os.link(source, kept)
    except OSError:
        atomic_write(kept, lambda f: f.write(source.read_bytes()))
        os.chmod(kept, 0o600)
    return kept, digest


def artifact_path(artifact: ArtifactSource) -> Path:
    """The local file of an artifact given as a path (as it is) or as bytes (:func:`artifact_file`)."""
    if isinstance(artifact, (bytes, bytearray, memoryview)):
        return artifact_file(artifact)
    if isinstance(artifact, (str, os.PathLike)):
        return Path(artifact)
    raise UsageError(f"the artifact is a path or its bytes, not {type(artifact).__name__}.")


def first_axis_bound(f: Function, dims: Dims | None = None) -> int | None:
    """The most rows one program call takes, from the function's record alone (no JAX): the largest bucket's value
    of the variable that sizes the first input's axis 0, or None. What an engine caps its batches at (Beam's
    ``max_batch_size``, Spark's ``batch_size``); :class:`Batched` splits larger batches anyway."""
    axis0 = f.inputs[0].shape[0] if f.inputs and f.inputs[0].shape else None
    if not isinstance(axis0, str):
        return None
    variable = axis0.strip()
    if variable not in contract.dimension_variables(f):
        return None
    return max(b[variable] for b in plan_served(f, dims).buckets)


def _job_dims(f: Function, dims: Dims | None, batch_size: int | None) -> Dims | None:
    """The buckets of a job: ``dims`` when given; else, with the engine's batch size known, that size itself as the
    only bucket of the variable sizing the first input's axis 0 (when the spec's bounds hold it), so that full
    batches run unpadded and the ragged last one is padded to it; else None (the default plan)."""
    if dims is not None or batch_size is None or not f.inputs or not f.inputs[0].shape:
        return dims
    axis0 = f.inputs[0].shape[0]
    variable = axis0.strip() if isinstance(axis0, str) else None
    if variable not in contract.dimension_variables(f) or not f.bounds_of(variable).holds(batch_size):
        return dims
    return {variable: [batch_size]}


def _batch_bucket(f: Function, dims: Dims | None, batch_size: int) -> dict[str, int] | None:
    """The planned bucket a batch of ``batch_size`` rows runs on (``Batched.bucket_of_rows``), from the function's
    record alone (its first input's axis 0 taken as the batch variable), or None: known before the padding proof,
    so that it compiles meanwhile."""
    axis0 = f.inputs[0].shape[0] if f.inputs and f.inputs[0].shape else None
    variable = axis0.strip() if isinstance(axis0, str) else None
    if variable not in contract.dimension_variables(f):
        return None
    plan = plan_served(f, dims).buckets
    rows = min(batch_size, max(b[variable] for b in plan))
    fits = [b for b in plan if b[variable] >= rows]
    return min(fits, key=lambda b: (elements(f, b), tuple(b.values()))) if fits else None


def _compile_quietly(loaded: Loaded, bucket: dict[str, int], cache_dir: str | Path | None) -> None:
    """Compile ``bucket`` ahead of the warm-up that needs it; a failure is left to that warm-up to report."""
    with contextlib.suppress(Exception), COMPILING:
        loaded.warmup([bucket], cache_dir=cache_dir)


def refuse_unsplittable(batched: Batched) -> None:
    """Refuse (UsageError) a function a batch engine would give wrong answers with: one whose first input's axis 0
    is a dimension variable (the rows an engine batches) along which a batch may not be split (``Batched.splits``).
    An engine's batches are arbitrary slices of a dataset, so each output row must depend on its own input row
    only; a function with a static axis 0 is called on batches of exactly that size, as the user chose."""
    f = batched.function_record
    axis0 = f.inputs[0].shape[0] if f.inputs and f.inputs[0].shape else None
    if batched.splits or not isinstance(axis0, str) or axis0.strip() not in batched.variables:
        return
    raise UsageError(f"{batched.where}: a batch engine cuts the dataset into batches of rows along "
                     f"{axis0.strip()}, which would change the answers: {batched.split_reason}. Call the function on "
                     f"the whole input (jaxport call, jaxport.load), or export one whose output rows each depend "
                     f"on their own input row only.")


class Engine:
    """What every engine adapter holds per worker: the loaded function on a lazy :class:`Batched`, called per
    batch (see the module docstring). ``batch_size``: the engine's batch, when known; its bucket compiles here.
    ``load``: how to load the function (``LoadOptions``), whose fields it takes by keyword as well (``function``,
    ``cache_dir``, ``allow_custom_calls``, ...; one at its default leaves ``load``'s: ``serve.loading``); JAX's
    compilation cache is used only where ``cache_dir`` is given."""

    def __init__(self, artifact: ArtifactSource, function: str | None = None, dims: Dims | None = None, *,
                 batch_size: int | None = None, load: LoadOptions | None = None, runtime: str = "jax",
                 allow_platform_mismatch: bool = False, allow_custom_calls: Iterable[str] | None = (),
                 verify_weights: bool = True, cache_dir: str | Path | None = None, cache: bool = True,
                 module_dir: str | Path | None = None,
                 require_signature: str | Path | Iterable[str | Path] | None = (),
                 signature: str | Path | None = None, check_ranges: bool = False):
        if batch_size is not None and (type(batch_size) is not int or batch_size < 1):  # noqa: E721
            raise UsageError(f"batch_size={batch_size!r}: give a whole number of rows, at least 1.")
        self.load = record_of(LoadOptions, load, locals(), "load")
        self.cache_dir = self.load.cache_dir if self.load.cache else None
        check_serving(self.load)
        path = artifact_path(artifact)
        try:
            loaded = load_served(path, self.load, self.cache_dir)
        except FormatError:  # IntegrityError included
            if isinstance(artifact, (bytes, bytearray, memoryview)):  # refused: keep no damaged copy
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        job = _job_dims(loaded.function_record, dims, batch_size)
        early = _batch_bucket(loaded.function_record, job, batch_size) if batch_size is not None else None
        # The bucket of a known batch size compiles while the padding proof runs (XLA leaves Python free)
        compiling = threading.Thread(target=_compile_quietly, args=(loaded, early, self.cache_dir),
                                     name="jaxport-first-bucket", daemon=True) if early is not None else None
        if compiling is not None:
            compiling.start()
        try:
            self.batched = Batched(loaded, job, lazy=True, cache_dir=self.cache_dir)
            refuse_unsplittable(self.batched)
        finally:
            if compiling is not None:
                compiling.join()
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(COUNTS, 0)
        self._counts["workers"] = 1
        self._reported = dict.fromkeys(COUNTS, 0)
        self.batch_size = batch_size
        if batch_size is not None:
            most = self.batched.max_rows
            bucket = self.batched.bucket_of_rows(batch_size if most is None else min(batch_size, most))
            if bucket is not None:
                self._warm([bucket])  # every smaller batch runs on it (Batched's lazy choice)

    def _warm(self, buckets: list[dict[str, int]]) -> None:
        done = self.batched.warmup(self.cache_dir, buckets=buckets)
        self._counts["compilation_cache_hits"] += sum(1 for w in done if w.compilation.cache_hit)

    @property
    def input_names(self) -> list[str]:
        return self.batched.input_names

    @property
    def output_names(self) -> list[str]:
        return self.batched.output_names

    @property
    def compilations(self) -> int:
        """Programs this worker compiled (or fetched from the compilation cache), its warm-up included."""
        return self.batched.compilations

    @property
    def compilations_after_warmup(self) -> int:
        """Programs compiled after the first bucket this worker needed (0 when every batch fits it)."""
        return self.batched.compilations_after_warmup or 0

    def predict(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs of a batch by name; a batch of 0 rows gives outputs of 0 rows."""
        named = {n: arrays[n] for n in self.input_names if n in arrays}
        if named and self.batched.batch is not None and all(len(getattr(a, "shape", ())) and a.shape[0] == 0
                                                            for a in named.values()):
            return self.batched.empty_outputs()
        if self.batched.compilations_after_warmup is None:  # the first batch: its bucket, through the cache
            with self._lock:
                if self.batched.compilations_after_warmup is None:
                    self._warm(self.batched.check(arrays)[:1])
        calls = self.program_calls
        outputs = self.batched(arrays)
        with self._lock:
            self._counts["program_calls"] += self.program_calls - calls
            self._counts["rows"] += len(next(iter(outputs.values()))) if outputs and self.batched.batch else 1
        return outputs

    @property
    def program_calls(self) -> int:
        """Program calls this worker's batches made (a batch over the largest bucket makes several)."""
        return sum(s.calls for s in self.batched.stats.values())

    def counts(self) -> dict[str, int]:
        """This worker's counts (:data:`COUNTS`): 1 worker, the rows and program calls of its batches, the programs
        it compiled (cache hits included) and fetched from the compilation cache, and those after its warm-up."""
        with self._lock:
            return {**self._counts, "compilations": self.compilations,
                    "compilations_after_warmup": self.compilations_after_warmup}

    def increments(self) -> dict[str, int]:
        """What :meth:`counts` gained since the last call (the first call: everything), for an engine's counters."""
        now = self.counts()
        with self._lock:
            delta = {k: now[k] - self._reported[k] for k in COUNTS}
            self._reported = now
        return delta
