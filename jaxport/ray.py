"""Batch inference on Ray Data: ``ds.map_batches(jaxport.ray.Predictor, fn_constructor_args=(ARTIFACT,), ...)``.

Each actor loads the artifact once and compiles one program: the bucket (``jaxport.serve.batching``) that covers
``batch_size=`` when given (at start), else the first batch's (when it comes). A ragged last batch is padded to
it, a batch over the largest bucket (or the spec's bound) is split into chunks of it, so a job compiles one program
per actor. The artifact reaches the actors by Ray's own transfer when given as an ``ObjectRef`` to its bytes
(``ref = ray.put(Path("m.jaxport").read_bytes())``, then ``fn_constructor_args=(ref,)``): no node needs the
driver's path; each node writes it once to its user cache, named by its sha256 (``serve.engine``). With
``cache_dir``, an actor fetches the program from JAX's persistent compilation cache there (filled by ``jaxport warmup
--cache-dir DIR`` or an earlier actor: bake it into the nodes' image, or ship it with
``runtime_env={"working_dir": ...}`` and a relative ``cache_dir``). Needs the optional extra ``jaxport[ray]``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._api_types import record_of
from .errors import MissingExtra, UsageError
from .run.options import LoadOptions
from .serve.batching import Dims
from .serve.engine import Engine
from .serve.rows import batch_columns

if importlib.util.find_spec("ray") is None:  # found, not imported: Ray is imported where it is used (an ObjectRef)
    raise MissingExtra("jaxport.ray", "ray", "ray[data]", "No module named 'ray'")

__all__ = ["Predictor"]


def _resolved(artifact: Any) -> str | Path | bytes:
    """The artifact as a path or bytes: an ``ObjectRef`` (Ray Data passes constructor arguments through as they are)
    is fetched from the object store."""
    if isinstance(artifact, (str, Path, bytes)):
        return artifact
    import ray

    if isinstance(artifact, ray.ObjectRef):
        value = ray.get(artifact)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise UsageError(f"the ObjectRef {artifact.hex()} holds a {type(value).__name__}, not an artifact's bytes; "
                         f"put the bytes: ray.put(Path('m.jaxport').read_bytes()).")
    raise UsageError(f"the artifact is a path, its bytes or an ObjectRef to its bytes, not {type(artifact).__name__}.")


class Predictor:
    """A Ray Data callable class: ``batch -> batch`` with the artifact's outputs added as columns.

    ``ds.map_batches(Predictor, fn_constructor_args=(ARTIFACT,), batch_size=256, concurrency=2)``, ARTIFACT a path every
    node can read, the bytes, or an ``ObjectRef`` to them (``ray.put``). Batches are numpy (``batch_format="numpy"``,
    Ray's default) or pandas, with a column per input, named after it (or mapped: ``columns={"x": "image"}``), each cell
    a row of it (``serve.rows``: a bad cell is refused naming its column and row; values are converted to the input's
    dtype when every one is kept). ``keep_inputs=False`` returns the outputs only. ``batch_size``: the batch size given
    to ``map_batches``, so the actor compiles its bucket at start (default: the first batch's, then).
    ``report_compilations=True`` adds two columns: ``jaxport_compilations``, the programs this actor compiled after its
    warm-up (0: every batch fits the bucket of the first), and ``jaxport_compilations_total``, all it compiled or
    fetched from the compilation cache (1). ``dims``: the bucket sizes, as ``jaxport serve --dim`` (default: the spec's
    bounds' sizes). ``load``: how to load the function (``run.options.LoadOptions``), whose fields it takes by keyword
    as well (one at its default leaves ``load``'s): ``cache_dir``, JAX's persistent compilation cache (see the module
    docstring), ``allow_custom_calls``, ...
    """

    def __init__(self, artifact: Any, function: str | None = None, dims: Dims | None = None, *,
                 columns: Mapping[str, str] | None = None, keep_inputs: bool = True,
                 report_compilations: bool = False, batch_size: int | None = None, load: LoadOptions | None = None,
                 runtime: str = "jax",
                 allow_platform_mismatch: bool = False, allow_custom_calls: Iterable[str] | None = (),
                 verify_weights: bool = True, cache_dir: str | Path | None = None, cache: bool = True,
                 module_dir: str | Path | None = None,
                 require_signature: str | Path | Iterable[str | Path] | None = (),
                 signature: str | Path | None = None, check_ranges: bool = False):
        options = record_of(LoadOptions, load, locals(), "load")
        self.engine = Engine(_resolved(artifact), dims=dims, batch_size=batch_size, load=options)
        self.columns = dict(columns or {})
        self.keep_inputs = keep_inputs
        self.report_compilations = report_compilations

    def __call__(self, batch: Any) -> Any:
        import numpy as np

        inputs = self.engine.batched.function_record.inputs
        outputs = self.engine.predict(batch_columns(batch, inputs, self.columns))
        if self.report_compilations:
            rows = len(next(iter(outputs.values()))) if outputs else 0
            outputs = {**outputs, "jaxport_compilations": np.full(rows, self.engine.compilations_after_warmup),
                       "jaxport_compilations_total": np.full(rows, self.engine.compilations)}
        if hasattr(batch, "columns") and hasattr(batch, "assign"):  # pandas
            import pandas as pd

            frame = batch.copy() if self.keep_inputs else pd.DataFrame(index=batch.index)
            for name, value in outputs.items():
                frame[name] = list(value) if np.ndim(value) > 1 else value
            return frame
        result = dict(batch) if self.keep_inputs else {}
        result.update(outputs)
        return result
