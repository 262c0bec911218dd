"""Batch inference on Apache Spark: an iterator pandas UDF over an artifact, as ``predict_batch_udf``
(``pyspark.ml.functions``) makes one, without importing ``pyspark.ml`` (0.3-0.7 s on the driver and in every
Python worker).

``df.withColumn("y", jaxport.spark.predict_udf("m.jaxport")("x"))``: the UDF takes one column per input, in the
manifest's order (a tensor input as a flat array column, reshaped to the input's fixed shape past axis 0), and
returns the output: a scalar column for an output of one axis, an array column for more (flattened past axis 0,
as Spark holds tensors), a struct of them for several outputs.

Each Python worker loads the artifact once and compiles one program, at start: the bucket of ``batch_size`` rows
when given, else of Spark's Arrow batch (``spark.sql.execution.arrow.maxRecordsPerBatch``, 10 000 rows by default)
cut evenly into calls of at most the largest bucket's rows (:func:`even_share`: three calls of 3334 rows, not 4096,
4096 and 1808 padded to 4096). Each Arrow batch is cut the same way, and a partition's ragged last batch is padded
to that bucket, so a job compiles one program per Python worker. Rows reach the program as Arrow gives them: a
column of numpy arrays of one shape is stacked in one call (``serve.rows``). The artifact reaches the executors by
Spark itself: ``ship=True`` (the default) adds it with ``SparkContext.addFile`` under its content's name
(``SHA256.jaxport``) and each worker reads it by ``SparkFiles.get``, so only the driver needs the file (or the
bytes, given instead of a path); ``ship=False`` reads the path as given on every executor (an image's file, a shared
mount). ``cache_dir``: JAX's persistent compilation cache, from which a worker fetches its program instead of
compiling it; a relative ``cache_dir`` names a directory in SparkFiles' root, so a cache filled by ``jaxport warmup
m.jaxport --dim batch=N --cache-dir cache`` ships with the job as an archive (``spark.archives`` =
``cache.tgz#jaxport-cache``, ``cache_dir="jaxport-cache"``).

Counts (as Beam's counters): pass ``metrics=jaxport.spark.metrics(spark)``, an accumulator whose ``value``, after an
action, sums the workers' ``workers``, ``rows``, ``program_calls``, ``compilations`` (compiled or fetched from the
cache: one per worker), ``compilation_cache_hits`` and ``compilations_after_warmup`` (0). Like every accumulator
updated in a transformation it counts again what Spark runs again (a retried task, a plan that evaluates the UDF
twice: select its output once, or cache it). Needs the optional extra ``jaxport[spark]`` (and Java).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import dtypes
from ._api_types import record_of
from .artifact.manifest import function_names
from .artifact.model import Output
from .errors import InputError, MissingExtra, UsageError
from .run.load import open_checked
from .run.options import LoadOptions
from .serve.batching import Dims
from .serve.engine import COUNTS, Engine, artifact_path, first_axis_bound, keep_file
from .serve.loading import check_serving
from .serve.rows import Column, stack_column

try:
    from pyspark.accumulators import Accumulator, AccumulatorParam
    from pyspark.sql import types as T
except ImportError as e:  # the extra jaxport[spark]: exit 10 naming it, not a traceback of Spark's absence
    raise MissingExtra("jaxport.spark", "spark", "pyspark, pandas, pyarrow", e) from None
for _needed in ("pandas", "pyarrow"):  # a pandas UDF's batches: found, not imported (a worker imports them)
    if importlib.util.find_spec(_needed) is None:
        raise MissingExtra("jaxport.spark", "spark", "pyspark, pandas, pyarrow", f"No module named {_needed!r}")

__all__ = ["metrics", "predict_udf"]

_SPARK_TYPES = {d.name: getattr(T, d.spark) for d in dtypes.TABLE if d.spark is not None}


def _spark_type(entry: Output) -> Any:
    if entry.dtype not in _SPARK_TYPES:
        raise UsageError(f"output {entry.name!r} is {entry.dtype}, which has no Spark SQL type here (it "
                         f"takes {', '.join(_SPARK_TYPES)}).")
    element = _SPARK_TYPES[entry.dtype]()
    return element if len(entry.shape) == 1 else T.ArrayType(element)


def _field(name: str) -> str:
    return name.replace("/", "_").replace(".", "_")


def _fields(outputs: tuple[Output, ...], given: Mapping[str, str] | None) -> dict[str, str]:
    """Each output's field of the struct that holds several: ``given[name]``, else the name with ``/`` and ``.``
    as ``_`` (Spark resolves a dot as a struct's field). UsageError, before any data runs, for a name that is no
    output, a field name that is empty, or two outputs on one field (Spark compares field names without case)."""
    names = [o.name for o in outputs]
    given = dict(given or {})
    unknown = [k for k in given if k not in names]
    if unknown:
        raise UsageError(f"fields= names {', '.join(map(repr, unknown))}, which the function does not return (its "
                         f"outputs: {', '.join(names)}).")
    bad = [k for k, v in given.items() if not isinstance(v, str) or not v.strip()]
    if bad:
        raise UsageError(f"fields={{{bad[0]!r}: {given[bad[0]]!r}}}: a struct field's name is a non-empty string.")
    if len(outputs) == 1 and given:
        raise UsageError(f"fields= names the struct fields of several outputs; the function returns one output "
                         f"({names[0]!r}), the UDF's column itself.")
    fields = {n: given.get(n, _field(n)) for n in names}
    seen: dict[str, str] = {}
    for n, field in fields.items():
        other = seen.setdefault(field.lower(), n)
        if other != n:
            rename = n if fields[n] != n or fields[other] == other else other  # the one jaxport renamed
            if fields[other] == field:
                why = (f"both become the struct field {field!r} (jaxport writes the '/' and '.' of an output's "
                       f"name as '_': Spark resolves a dot as a field)")
            else:
                why = (f"become the struct fields {fields[other]!r} and {field!r}, one to Spark, which compares "
                       f"field names without case")
            raise UsageError(f"outputs {other!r} and {n!r} {why}: one would be lost. Name them apart with "
                             f"fields={{{rename!r}: 'NAME'}}.")
    return fields


class Counts(AccumulatorParam):
    """Sums of jaxport's counts by name (``serve.engine.COUNTS``): the parameter of :func:`metrics`."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return {}

    def addInPlace(self, value1: dict[str, int], value2: dict[str, int]) -> dict[str, int]:  # noqa: N802 - Spark's
        for name, count in value2.items():
            value1[name] = value1.get(name, 0) + count
        return value1


def metrics(spark: Any) -> Accumulator:
    """An accumulator for ``predict_udf(..., metrics=...)``: its ``value`` sums the workers' counts by name (see the
    module docstring), each 0 before an action."""
    return spark.sparkContext.accumulator(dict.fromkeys(COUNTS, 0), Counts())


#: Accumulator id -> the copy of it that the task this Python worker runs deserialized (Spark sends a task's own
#: copies back when it ends; a model cached from an earlier task must add to the running task's).
_TASK_ACCUMULATORS: dict[int, Accumulator] = {}


class _Sink:
    """An accumulator that a cached worker adds to across tasks: unpickled with each task, it records the task's
    copy (:func:`_task_sink`), and :meth:`add` adds to the running task's."""

    def __init__(self, accumulator: Accumulator):
        self.accumulator = accumulator

    def __reduce__(self) -> Any:
        return _task_sink, (self.accumulator,)

    def add(self, counts: dict[str, int]) -> None:
        changed = {k: v for k, v in counts.items() if v}
        if changed:
            _TASK_ACCUMULATORS.get(self.accumulator.aid, self.accumulator).add(changed)


def _task_sink(accumulator: Accumulator) -> _Sink:
    _TASK_ACCUMULATORS[accumulator.aid] = accumulator
    return _Sink(accumulator)


def _shipped(local: Path) -> str:
    """Add ``local`` to the active SparkContext under its content's name; the name executors get it by."""
    from pyspark.sql import SparkSession

    kept, _ = keep_file(local)
    session = SparkSession.getActiveSession()
    try:
        context = session.sparkContext if session is not None else None
    except Exception:  # noqa: BLE001 - Spark Connect's sessions have no SparkContext
        context = None
    if context is None:
        raise UsageError(f"{local}: predict_udf ships the artifact with SparkContext.addFile, which needs an active "
                         f"SparkSession (classic, not Spark Connect): create it first, or pass ship=False with a "
                         f"path every executor can read.")
    context.addFile(str(kept))
    return kept.name


def predict_udf(artifact: str | Path | bytes, function: str | None = None, dims: Dims | None = None, *,
                batch_size: int | None = None, ship: bool = True, metrics: Accumulator | None = None,
                fields: Mapping[str, str] | None = None, load: LoadOptions | None = None,
                runtime: str = "jax",
                allow_platform_mismatch: bool = False, allow_custom_calls: Iterable[str] | None = (),
                verify_weights: bool = True, cache_dir: str | Path | None = None, cache: bool = True,
                module_dir: str | Path | None = None,
                require_signature: str | Path | Iterable[str | Path] | None = (),
                signature: str | Path | None = None, check_ranges: bool = False) -> Any:
    """The pandas UDF that runs ``function`` of ``artifact`` (see the module docstring). ``artifact``: a path on the
    driver, or the artifact's bytes. ``dims``: the bucket sizes, as ``jaxport serve --dim``; ``batch_size``: the
    rows of one program call (at most the largest bucket's; default: Spark's Arrow batch cut evenly, see the module
    docstring); ``metrics``: an accumulator from :func:`metrics`.
    ``fields``: the struct's field name of an output (of several), by output name (default: the name with ``/`` and
    ``.`` as ``_``); two outputs on one field are refused here, before any data runs.
    ``load``: how to load the function (``run.options.LoadOptions``), whose fields it takes by keyword as well
    (``cache_dir``, ``allow_custom_calls``, ...; one at its default leaves ``load``'s)."""
    options = record_of(LoadOptions, load, locals(), "load")
    check_serving(options)
    given_bytes = isinstance(artifact, (bytes, bytearray, memoryview))
    local = artifact_path(artifact)
    with open_checked(local, options) as art:  # a required signature first, on the bytes read
        manifest = art.model
    names = function_names(manifest, options.function)
    if len(names) > 1:
        raise UsageError(f"{local}: the artifact holds {len(names)} functions ({', '.join(names)}); choose one "
                         f"with function=NAME.")
    f = manifest.functions[names[0]]
    outputs = f.outputs
    if any(len(o.shape) == 0 or isinstance(o.shape[0], int) for o in outputs):
        raise UsageError(f"{local}: every output needs a batch axis (axis 0 sized by a dimension variable) for "
                         f"a Spark column; function {names[0]!r} has outputs "
                         f"{', '.join(o.name + str(list(o.shape)) for o in outputs)}.")
    columns: list[Column] = []
    for k, i in enumerate(f.inputs):
        rest = [d for d in i.shape[1:] if isinstance(d, int)]
        if len(rest) != len(i.shape[1:]):
            raise UsageError(f"{local}: input {i.name!r} has shape {list(i.shape)}; a Spark column holds a fixed "
                             f"shape past axis 0.")
        columns.append(Column(f"input {i.name!r} (the UDF's column {k})", i.dtype, rest, flat=True))
    field_names = _fields(outputs, fields)
    if batch_size is not None and (type(batch_size) is not int or batch_size < 1):  # noqa: E721
        raise UsageError(f"batch_size={batch_size!r}: give a whole number of rows, at least 1.")
    cap = first_axis_bound(f, dims) or 1
    size = even_share(arrow_batch_rows(), cap) if batch_size is None else min(batch_size, cap)
    if len(outputs) == 1:
        return_type = _spark_type(outputs[0])
    else:
        return_type = T.StructType([T.StructField(field_names[o.name], _spark_type(o)) for o in outputs])
    shipped = _shipped(local) if ship or given_bytes else None
    path, dims_ = str(local), dict(dims or {})
    cache_path = os.fspath(options.cache_dir) if options.cache and options.cache_dir is not None else None
    warm = size  # the one bucket each worker compiles, at start
    sink = None if metrics is None else _Sink(metrics)

    def make_predict_fn() -> Any:
        from pyspark import SparkFiles

        source = SparkFiles.get(shipped) if shipped is not None else path
        where = cache_path if cache_path is None or os.path.isabs(cache_path) else SparkFiles.get(cache_path)
        engine = Engine(source, dims=dims_, batch_size=warm, load=dataclasses.replace(options, cache_dir=where))

        def predict(*columns: Any) -> Any:
            out = engine.predict(dict(zip(engine.input_names, columns)))
            if sink is not None:
                sink.add(engine.increments())
            flat = {o: v.reshape(v.shape[0], -1) if v.ndim > 2 else v for o, v in out.items()}
            if len(flat) == 1:
                return next(iter(flat.values()))
            return {field_names[o]: v for o, v in flat.items()}

        return predict

    return _pandas_udf(make_predict_fn, return_type, size, [i.name for i in f.inputs], columns)


#: Spark's rows per Arrow batch when the session does not say (``spark.sql.execution.arrow.maxRecordsPerBatch``).
ARROW_BATCH_ROWS = 10_000


def arrow_batch_rows() -> int | None:
    """The rows of the Arrow batches the active session hands a pandas UDF (None: unlimited, or no session)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        return ARROW_BATCH_ROWS
    try:
        rows = int(session.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS)) or 0)
    except (ValueError, TypeError):
        return ARROW_BATCH_ROWS
    return rows if rows > 0 else None


def even_share(rows: int | None, most: int) -> int:
    """The rows of each call when ``rows`` are cut into as few calls of at most ``most`` rows as they need, evenly
    (10 000 rows over calls of at most 4096: three of 3334): a batch cut at ``most`` would leave a last call padded
    up to ``most`` (1808 rows run as 4096)."""
    if rows is None or rows <= 0:
        return most
    calls = -(-rows // most)
    return -(-rows // calls)


#: Per Python worker: the predict function of each UDF (by the id its ``predict_udf`` call drew), made by the first
#: task that needs it and kept for the next tasks (Spark reuses Python workers), as ``pyspark.ml``'s ModelCache.
_PREDICTORS: dict[str, Callable[..., Any]] = {}


def _predictor(key: str, make: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    found = _PREDICTORS.get(key)
    if found is None:
        found = _PREDICTORS[key] = make()
    return found


def _result(preds: Any, return_type: Any) -> Any:
    """A batch's predictions as Spark takes them back: a Series (scalars, or a list of arrays per row), or for
    several outputs a DataFrame of such columns by field name."""
    import pandas as pd

    def column(value: Any) -> Any:
        return pd.Series(list(value)) if value.ndim > 1 else pd.Series(value).astype(value.dtype)

    if isinstance(return_type, T.StructType):
        return pd.DataFrame({name: list(v) if v.ndim > 1 else v for name, v in preds.items()})
    return column(preds)


def _partition() -> str:
    """How a message names the rows of the running task: ``partition P`` (Spark's ``TaskContext``)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return f"partition {context.partitionId()}" if context is not None else "this task's rows"


def _pandas_udf(make_predict_fn: Callable[[], Callable[..., Any]], return_type: Any, batch_size: int,
                names: list[str], columns: list[Column]) -> Any:
    """An iterator pandas UDF that calls the worker's predict function on slices of ``batch_size`` rows of each
    Arrow batch, one numpy array per input column (what ``predict_batch_udf`` does, minus its import), each stacked
    by ``serve.rows`` (a bad row is named by its index in the task's partition)."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    key = uuid.uuid4().hex  # a new id per call on the driver: a worker never reuses another UDF's model

    def predict(batches: Iterator[Any]) -> Iterator[Any]:
        fn = _predictor(key, make_predict_fn)
        named = [c.named(f"row {{}} of {_partition()}") for c in columns]
        seen = 0  # rows of the partition before this batch
        for batch in batches:
            given = batch if isinstance(batch, tuple) else (batch,)
            if len(given) != len(names):
                raise InputError(f"the UDF takes {len(names)} column{'s' if len(names) > 1 else ''}, one per input "
                                 f"({', '.join(names)}), not {len(given)}.")
            rows = len(given[0])
            step = even_share(rows, batch_size)  # as few calls as the batch needs, of even size
            for start in range(0, rows, step):
                part = [c.iloc[start:start + step] if rows > step else c for c in given]
                arrays = [stack_column(c, col, first_row=seen + start) for c, col in zip(part, named)]
                yield _result(fn(*arrays), return_type)
            seen += rows

    # Spark reads the UDF's kind from its annotations, as objects (this module's are text)
    given: Any = pd.Series if len(names) == 1 else tuple[pd.Series, ...]
    out: Any = pd.DataFrame if isinstance(return_type, T.StructType) else pd.Series
    predict.__annotations__ = {"batches": Iterator[given], "return": Iterator[out]}
    return pandas_udf(predict, return_type)  # type: ignore[call-overload]
