"""Batch inference on Apache Beam: a ``ModelHandler`` for ``RunInference``.

``RunInference(jaxport.beam.ModelHandler("m.jaxport"))`` over a PCollection of examples: each example is one row
without the batch axis, a numpy array for a function of one input, or a dict of arrays by input name. Beam's
batching (``BatchElements``) is capped at ``max_batch_size`` (default and most: the largest bucket's,
``batch_elements_kwargs``), and each worker loads the artifact once and compiles one program, the bucket covering
``max_batch_size``, before its first batch; every smaller batch is padded to it, so nothing compiles mid-job (give
``max_batch_size`` to the batch you want: a batch padded from far below wastes the padding's work). Each result is
a ``PredictionResult`` whose ``inference`` is the output row (a dict by output name for several outputs).

The artifact reaches the workers as a path or URL that Beam's ``FileSystems`` reads (``gs://``, ``s3://``,
``hdfs://``, or a local path every worker sees), read on each worker, or as the artifact's bytes, carried by the
handler itself (small artifacts: the pipeline holds them); received bytes are written once per worker to the user's
cache, named by their sha256 (``serve.engine``), and checked as ``jaxport.load`` checks any artifact. ``cache_dir``:
JAX's persistent compilation cache, filled by ``jaxport warmup --cache-dir DIR`` (bake it into the workers'
container image, e.g. Dataflow's ``--sdk_container_image``), from which a worker fetches its program.

Beam metrics (namespace ``jaxport``), summed over workers: ``workers``, ``rows``, ``program_calls``,
``compilations`` (programs compiled or fetched from the cache: one per worker), ``compilation_cache_hits`` (of them,
fetched) and ``compilations_after_warmup`` (0). Needs ``jaxport[beam]``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._api_types import record_of
from .artifact.manifest import function_names
from .errors import InputError, MissingExtra, UsageError
from .run.load import open_checked
from .run.options import LoadOptions
from .serve.batching import Dims
from .serve.engine import COUNTS, Engine, artifact_path, first_axis_bound
from .serve.loading import check_serving
from .serve.rows import example_columns

try:
    from apache_beam.metrics import Metrics
    from apache_beam.ml.inference import base
except ImportError as e:  # the extra jaxport[beam]: exit 10 naming it, not a traceback of Beam's absence
    raise MissingExtra("jaxport.beam", "beam", "apache-beam", e) from None

__all__ = ["ModelHandler"]


def _is_url(text: str) -> bool:
    return "://" in text


def _fetched(url: str) -> bytes:
    """The bytes at ``url``, read by Beam's ``FileSystems`` (the schemes its installed extras register)."""
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    try:
        with FileSystems.open(url, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            return bytes(f.read())
    except Exception as e:  # noqa: BLE001 - each filesystem raises its own errors
        raise UsageError(f"{url}: Beam's FileSystems cannot read the artifact ({type(e).__name__}: "
                         f"{str(e)[:300]}).") from None


class ModelHandler(base.ModelHandler[Any, base.PredictionResult, Engine]):
    """Runs an artifact's function on Beam's batches (see the module docstring). ``artifact``: a path or URL
    (``FileSystems``), or the artifact's bytes. ``dims``: the bucket sizes, as ``jaxport serve --dim``;
    ``max_batch_size`` lowers the cap (never above the largest bucket) and chooses the bucket each worker
    compiles. ``load``: how to load the function (``run.options.LoadOptions``), whose fields it takes by keyword as
    well (``cache_dir``, ``allow_custom_calls``, ...; one at its default leaves ``load``'s)."""

    def __init__(self, artifact: str | Path | bytes, function: str | None = None, dims: Dims | None = None, *,
                 min_batch_size: int = 1, max_batch_size: int | None = None, load: LoadOptions | None = None,
                 runtime: str = "jax",
                 allow_platform_mismatch: bool = False, allow_custom_calls: Iterable[str] | None = (),
                 verify_weights: bool = True, cache_dir: str | Path | None = None, cache: bool = True,
                 module_dir: str | Path | None = None,
                 require_signature: str | Path | Iterable[str | Path] | None = (),
                 signature: str | Path | None = None, check_ranges: bool = False):
        super().__init__()
        self.load = record_of(LoadOptions, load, locals(), "load")
        check_serving(self.load)
        if isinstance(artifact, (bytes, bytearray, memoryview)):
            self.artifact: str | bytes = bytes(artifact)
            local = artifact_path(self.artifact)
        elif isinstance(artifact, (str, os.PathLike)):
            self.artifact = os.fspath(artifact).removeprefix("file://")
            local = artifact_path(_fetched(self.artifact)) if _is_url(self.artifact) else Path(self.artifact)
        else:
            raise UsageError(f"the artifact is a path, a URL or its bytes, not {type(artifact).__name__}.")
        self.dims = dict(dims or {})
        with open_checked(local, self.load) as art:  # a required signature first, on the bytes read
            manifest = art.model
        names = function_names(manifest, self.load.function)
        if len(names) > 1:
            raise UsageError(f"{local}: the artifact holds {len(names)} functions ({', '.join(names)}); choose one "
                             f"with function=NAME.")
        f = manifest.functions[names[0]]
        self.input_names = f.input_names
        cap = first_axis_bound(f, dims)
        self.max_batch_size = cap if max_batch_size is None or cap is None else max(1, min(max_batch_size, cap))
        self.min_batch_size = max(1, min(min_batch_size, self.max_batch_size or min_batch_size))
        self._counters = {name: Metrics.counter("jaxport", name) for name in COUNTS}

    def load_model(self) -> Engine:
        source: str | bytes = self.artifact
        if isinstance(source, str) and _is_url(source):
            source = _fetched(source)
        return Engine(source, dims=self.dims, batch_size=self.max_batch_size, load=self.load)

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        return {"min_batch_size": self.min_batch_size,
                **({"max_batch_size": self.max_batch_size} if self.max_batch_size is not None else {})}

    def run_inference(self, batch: Sequence[Any], model: Engine,
                      inference_args: dict[str, Any] | None = None) -> Iterable[base.PredictionResult]:

        if inference_args:
            raise InputError(f"jaxport's ModelHandler takes no inference_args (got {', '.join(inference_args)}).")
        rows = list(batch)
        if not rows:
            return []
        arrays = example_columns(rows, model.batched.function_record.inputs)
        outputs = model.predict(arrays)
        for name, value in model.increments().items():
            self._counters[name].inc(value)  # 0 too: a counter Beam reports as 0 says it was counted
        names = model.output_names
        if len(names) == 1:
            return [base.PredictionResult(r, outputs[names[0]][i]) for i, r in enumerate(rows)]
        return [base.PredictionResult(r, {n: outputs[n][i] for n in names}) for i, r in enumerate(rows)]
