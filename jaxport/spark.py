"""Batch inference on Apache Spark: a ``predict_batch_udf`` (``pyspark.ml.functions``) over an artifact.

``df.withColumn("y", jaxport.spark.predict_udf("m.jaxport")("x"))``: the UDF takes one column per input, in the
manifest's order (a tensor input as a flat array column, reshaped to the input's fixed shape past axis 0), and
returns the output: a scalar column for an output of one axis, an array column for more (flattened past axis 0,
as Spark holds tensors), a struct of them for several outputs. Each Python worker loads the artifact once and
compiles every bucket before its first batch; Spark's batches are capped at the largest bucket and a ragged last
batch is padded to one, so nothing compiles mid-job. Needs the optional extra ``jaxport[spark]`` (and Java).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyspark.ml.functions import predict_batch_udf
from pyspark.sql import types as T

from . import dtypes
from .artifact.container import open_artifact
from .artifact.manifest import function_names
from .artifact.model import Output
from .errors import UsageError
from .serve.batching import Dims
from .serve.engine import Engine, first_axis_bound

__all__ = ["predict_udf"]

_SPARK_TYPES = {d.name: getattr(T, d.spark) for d in dtypes.TABLE if d.spark is not None}


def _spark_type(entry: Output) -> Any:
    if entry.dtype not in _SPARK_TYPES:
        raise UsageError(f"output {entry.name!r} is {entry.dtype}, which has no Spark SQL type here (it "
                         f"takes {', '.join(_SPARK_TYPES)}).")
    element = _SPARK_TYPES[entry.dtype]()
    return element if len(entry.shape) == 1 else T.ArrayType(element)


def _field(name: str) -> str:
    return name.replace("/", "_").replace(".", "_")


def predict_udf(artifact: str | Path, function: str | None = None, dims: Dims | None = None, *,
                batch_size: int | None = None, cache_dir: str | Path | None = None,
                allow_custom_calls: Iterable[str] | None = None) -> Any:
    """The pandas UDF that runs ``function`` of ``artifact`` (see the module docstring). ``dims``: the bucket sizes,
    as ``jaxport serve --dim``; ``batch_size`` (default and most: the largest bucket's) is Spark's batch."""
    manifest = open_artifact(artifact).model
    names = function_names(manifest, function)
    if len(names) > 1:
        raise UsageError(f"{artifact}: the artifact holds {len(names)} functions ({', '.join(names)}); choose one "
                         f"with function=NAME.")
    f = manifest.functions[names[0]]
    outputs = f.outputs
    if any(len(o.shape) == 0 or isinstance(o.shape[0], int) for o in outputs):
        raise UsageError(f"{artifact}: every output needs a batch axis (axis 0 sized by a dimension variable) for "
                         f"a Spark column; function {names[0]!r} has outputs "
                         f"{', '.join(o.name + str(list(o.shape)) for o in outputs)}.")
    shapes: list[list[int] | None] = []
    for i in f.inputs:
        rest = [d for d in i.shape[1:] if isinstance(d, int)]
        if len(rest) != len(i.shape[1:]):
            raise UsageError(f"{artifact}: input {i.name!r} has shape {list(i.shape)}; a Spark column holds a fixed "
                             f"shape past axis 0.")
        shapes.append(rest or None)
    cap = first_axis_bound(f, dims) or 1
    size = cap if batch_size is None else max(1, min(batch_size, cap))
    if len(outputs) == 1:
        return_type = _spark_type(outputs[0])
    else:
        return_type = T.StructType([T.StructField(_field(o.name), _spark_type(o)) for o in outputs])
    path, dims_, cache = str(artifact), dict(dims or {}), None if cache_dir is None else str(cache_dir)
    allowed = list(allow_custom_calls or [])

    def make_predict_fn() -> Any:
        engine = Engine(path, function, dims_, cache_dir=cache, allow_custom_calls=allowed)

        def predict(*columns: Any) -> Any:
            out = engine.predict(dict(zip(engine.input_names, columns)))
            flat = {o: v.reshape(v.shape[0], -1) if v.ndim > 2 else v for o, v in out.items()}
            if len(flat) == 1:
                return next(iter(flat.values()))
            return {_field(o): v for o, v in flat.items()}

        return predict

    return predict_batch_udf(make_predict_fn, return_type=return_type, batch_size=size,
                             input_tensor_shapes=shapes if any(s is not None for s in shapes) else None)
