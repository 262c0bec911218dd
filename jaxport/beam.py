"""Batch inference on Apache Beam: a ``ModelHandler`` for ``RunInference``.

``RunInference(jaxport.beam.ModelHandler("m.jaxport"))`` over a PCollection of examples: each example is one row
without the batch axis, a numpy array for a function of one input, or a dict of arrays by input name. Beam's
batching (``BatchElements``) is capped at the largest compiled bucket (``batch_elements_kwargs``), so a batch never
grows past the artifact's bound; each worker loads the artifact once and compiles every bucket before its first
batch; a ragged batch is padded to a bucket, so nothing compiles mid-job. Each result is a ``PredictionResult``
whose ``inference`` is the output row (a dict by output name for several outputs). Beam metrics (namespace
``jaxport``): ``rows``, ``program_calls`` and ``compilations_after_warmup`` (0). Needs ``jaxport[beam]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from apache_beam.metrics import Metrics
from apache_beam.ml.inference import base

from .artifact.container import open_artifact
from .artifact.manifest import function_names
from .errors import InputError, UsageError
from .serve.batching import Dims
from .serve.engine import Engine, first_axis_bound

__all__ = ["ModelHandler"]


class ModelHandler(base.ModelHandler[Any, base.PredictionResult, Engine]):
    """Runs an artifact's function on Beam's batches (see the module docstring). ``dims``: the bucket sizes, as
    ``jaxport serve --dim``; ``max_batch_size`` lowers the cap (never above the largest bucket)."""

    def __init__(self, artifact: str | Path, function: str | None = None, dims: Dims | None = None, *,
                 min_batch_size: int = 1, max_batch_size: int | None = None, cache_dir: str | Path | None = None,
                 allow_custom_calls: Iterable[str] | None = None):
        super().__init__()
        self.artifact, self.function, self.dims = str(artifact), function, dict(dims or {})
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.allow_custom_calls = list(allow_custom_calls or [])
        manifest = open_artifact(artifact).model
        names = function_names(manifest, function)
        if len(names) > 1:
            raise UsageError(f"{artifact}: the artifact holds {len(names)} functions ({', '.join(names)}); choose one "
                             f"with function=NAME.")
        f = manifest.functions[names[0]]
        self.input_names = f.input_names
        cap = first_axis_bound(f, dims)
        self.max_batch_size = cap if max_batch_size is None or cap is None else max(1, min(max_batch_size, cap))
        self.min_batch_size = max(1, min(min_batch_size, self.max_batch_size or min_batch_size))
        self._rows = Metrics.counter("jaxport", "rows")
        self._calls = Metrics.counter("jaxport", "program_calls")
        self._compiled = Metrics.counter("jaxport", "compilations_after_warmup")

    def load_model(self) -> Engine:
        return Engine(self.artifact, self.function, self.dims, cache_dir=self.cache_dir,
                      allow_custom_calls=self.allow_custom_calls)

    def batch_elements_kwargs(self) -> Mapping[str, Any]:
        return {"min_batch_size": self.min_batch_size,
                **({"max_batch_size": self.max_batch_size} if self.max_batch_size is not None else {})}

    def run_inference(self, batch: Sequence[Any], model: Engine,
                      inference_args: dict[str, Any] | None = None) -> Iterable[base.PredictionResult]:
        import numpy as np

        if inference_args:
            raise InputError(f"jaxport's ModelHandler takes no inference_args (got {', '.join(inference_args)}).")
        rows = list(batch)
        if not rows:
            return []
        if isinstance(rows[0], Mapping):
            arrays = {n: np.stack([np.asarray(r[n]) for r in rows]) for n in self.input_names if n in rows[0]}
            arrays.update({k: np.stack([np.asarray(r[k]) for r in rows]) for k in rows[0] if k not in arrays})
        elif len(self.input_names) == 1:
            arrays = {self.input_names[0]: np.stack([np.asarray(r) for r in rows])}
        else:
            raise InputError(f"the function takes {len(self.input_names)} inputs ({', '.join(self.input_names)}); "
                             f"give each example as a dict of arrays by input name.")
        before = model.batched.compilations_after_warmup or 0
        calls = sum(s.calls for s in model.batched.stats.values())
        outputs = model.predict(arrays)
        self._rows.inc(len(rows))
        self._calls.inc(sum(s.calls for s in model.batched.stats.values()) - calls)
        self._compiled.inc((model.batched.compilations_after_warmup or 0) - before)
        names = model.output_names
        if len(names) == 1:
            return [base.PredictionResult(r, outputs[names[0]][i]) for i, r in enumerate(rows)]
        return [base.PredictionResult(r, {n: outputs[n][i] for n in names}) for i, r in enumerate(rows)]
