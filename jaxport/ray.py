"""Batch inference on Ray Data: ``ds.map_batches(jaxport.ray.Predictor, fn_constructor_args=("m.jaxport",), ...)``.

Each actor loads the artifact once, compiles every bucket (``jaxport.serve.batching``) before its first batch, and
runs every batch on them: a ragged last batch is padded to a bucket, a batch over the largest bucket (or the spec's
bound) is split; nothing compiles mid-job. Needs the optional extra ``jaxport[ray]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .serve.batching import Dims
from .serve.engine import Engine, column_arrays

__all__ = ["Predictor"]


class Predictor:
    """A Ray Data callable class: ``batch -> batch`` with the artifact's outputs added as columns.

    ``ds.map_batches(Predictor, fn_constructor_args=("m.jaxport",), batch_size=256, concurrency=2)``. Batches are
    numpy (``batch_format="numpy"``, Ray's default) or pandas, with a column per input, named after it (or mapped:
    ``columns={"x": "image"}``). ``keep_inputs=False`` returns the outputs only. ``report_compilations=True`` adds
    a column ``jaxport_compilations``: the programs this actor compiled after its warm-up (0, always).
    ``dims``: the bucket sizes, as ``jaxport serve --dim`` (default: powers of two inside the spec's bounds).
    """

    def __init__(self, artifact: str | Path, function: str | None = None, dims: Dims | None = None, *,
                 columns: Mapping[str, str] | None = None, keep_inputs: bool = True,
                 report_compilations: bool = False, cache_dir: str | Path | None = None,
                 allow_custom_calls: Iterable[str] | None = None):
        self.engine = Engine(artifact, function, dims, cache_dir=cache_dir, allow_custom_calls=allow_custom_calls)
        self.columns = dict(columns or {})
        self.keep_inputs = keep_inputs
        self.report_compilations = report_compilations

    def __call__(self, batch: Any) -> Any:
        import numpy as np

        outputs = self.engine.predict(column_arrays(batch, self.engine.input_names, self.columns))
        if self.report_compilations:
            rows = len(next(iter(outputs.values()))) if outputs else 0
            outputs = {**outputs,
                       "jaxport_compilations": np.full(rows, self.engine.batched.compilations_after_warmup or 0)}
        if hasattr(batch, "columns") and hasattr(batch, "assign"):  # pandas
            import pandas as pd

            frame = batch.copy() if self.keep_inputs else pd.DataFrame(index=batch.index)
            for name, value in outputs.items():
                frame[name] = list(value) if np.ndim(value) > 1 else value
            return frame
        result = dict(batch) if self.keep_inputs else {}
        result.update(outputs)
        return result
