"""What every batch-engine adapter (``jaxport.ray``, ``jaxport.beam``, ``jaxport.spark``) holds per worker: an
artifact's function on a :class:`batching.Batched`, the input columns of a batch as arrays, and the most rows one
program call takes (what an engine caps its batches at)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..artifact import contract
from ..artifact.model import Function
from ..errors import InputError
from ..run.load import load
from .batching import Batched, Dims, plan_buckets


def open_batched(path: str | Path, function: str | None = None, dims: Dims | None = None, *,
                 cache_dir: str | Path | None = None, warm: bool = True,
                 allow_custom_calls: Iterable[str] | None = None) -> Batched:
    """Load an artifact's function (``jaxport.load``), plan its buckets and (``warm``) compile them all."""
    loaded = load(path, function, allow_custom_calls=allow_custom_calls)
    batched = Batched(loaded, dims)
    if warm:
        batched.warmup(cache_dir)
    return batched


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
    return max(b[variable] for b in plan_buckets(f, dims).buckets)


def column_arrays(columns: Mapping[str, Any], names: Sequence[str],
                  renamed: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The input arrays of a batch given as columns (numpy arrays, pandas Series of arrays or lists): input ``name``
    from column ``renamed.get(name, name)``, stacked into one array; InputError naming a missing column."""
    import numpy as np

    out = {}
    for name in names:
        column = (renamed or {}).get(name, name)
        if column not in columns:
            have = ", ".join(map(repr, list(columns)[:12])) or "none"
            raise InputError(f"the batch has no column {column!r} for input {name!r} (it has {have}); name the "
                             f"column after the input, or map it (columns={{{name!r}: 'COLUMN'}}).")
        value = columns[column]
        value = value.to_numpy() if hasattr(value, "to_numpy") else value
        array = np.asarray(value)
        if array.dtype == object:  # a column of per-row arrays (pandas, Arrow tensors as objects)
            array = np.stack([np.asarray(v) for v in array]) if len(array) else array
        out[name] = array
    return out


class Engine:
    """What every engine adapter holds per worker: the loaded function on warm buckets, called per batch."""

    def __init__(self, artifact: str | Path, function: str | None = None, dims: Dims | None = None, *,
                 cache_dir: str | Path | None = None, allow_custom_calls: Iterable[str] | None = None):
        self.batched = open_batched(artifact, function, dims, cache_dir=cache_dir,
                                    allow_custom_calls=allow_custom_calls)

    @property
    def input_names(self) -> list[str]:
        return self.batched.input_names

    @property
    def output_names(self) -> list[str]:
        return self.batched.output_names

    def predict(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs of a batch by name; a batch of 0 rows gives outputs of 0 rows."""
        named = {n: arrays[n] for n in self.input_names if n in arrays}
        if named and self.batched.batch is not None and all(len(getattr(a, "shape", ())) and a.shape[0] == 0
                                                            for a in named.values()):
            return self.batched.empty_outputs()
        return self.batched(arrays)
