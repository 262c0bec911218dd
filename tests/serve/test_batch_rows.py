"""Bad rows on the real engines: Ray Data (local), Apache Beam (DirectRunner) and Apache Spark (local) hand
jaxport's adapters ragged, missing, NaN and foreign cells, Beam dict rows with a key missing or too many, and Spark
struct fields two outputs would share. Each is refused with jaxport's InputError naming the column (or input), the
row and what it holds (``serve.rows``), or, for the fields, a UsageError before any data runs; good rows of Python
lists and doubles that hold float32 values give the live function's values (``jax.jit``); empty partitions give
nothing. Each test skips when its engine is not installed (``make test-serve``)."""

from __future__ import annotations

import os
import re
import shutil
import sys

import jax
import numpy as np
import pytest

import jaxport
from jaxport.errors import InputError, UsageError

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

MODEL = """
def f(x):
    return {'y': 2.0 * x + 1.0, 's': x.sum(axis=1)}


def g(n):
    return n * 2


def h(x):
    return {'a': {'b': x * 2.0}, 'a_b': x + 1.0}
"""
SPECS = {"f": "f32[batch, 3]", "g": "i32[batch]", "h": "f32[batch]"}
DROP = "drop or fill the missing rows"


def _live(name: str):
    namespace: dict = {}
    exec(compile(MODEL, "model.py", "exec"), namespace)  # noqa: S102 - this file's own model
    return jax.jit(namespace[name])


def _needs(module: str, extra: str) -> None:
    pytest.importorskip(module, reason=f"needs the extra jaxport[{extra}] (make test-serve)")


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    d = tmp_path_factory.mktemp("rows")
    (d / "model.py").write_text(MODEL)
    for name, arg in SPECS.items():
        (d / f"{name}.yaml").write_text(f"jaxport: 1\ndims:\n  batch: {{min: 1, max: 64}}\nargs:\n  - \"{arg}\"\n")
        jaxport.export(f"{d}/model.py:{name}", d / f"{name}.yaml", output=d / f"{name}.jaxport")
    return d


def _raised(e: BaseException, message: str) -> None:
    """The engine's error carries jaxport's own, whole (Ray and Spark wrap it in their exception's text)."""
    assert isinstance(e, InputError) and str(e) == message or f"jaxport.errors.InputError: {message}" in str(e), \
        str(e)[-2000:]


def test_ray_refuses_bad_rows(arts):
    _needs("ray", "ray")
    import pandas as pd
    import ray

    import jaxport.ray

    p = jaxport.ray.Predictor(str(arts / "f.jaxport"))
    bad = {
        "a list of 2 values where the input's rows have shape (3,); every row of an input has one shape":
            [[1.0, 2.0, 3.0]] * 3 + [[1.0, 2.0]],
        f"None; {DROP}": [[1.0, 2.0, 3.0], None],
        "NaN, a missing cell (where the input's rows have shape (3,)): pandas fills a missing cell of a column of "
        f"arrays with NaN; {DROP}": [[1.0, 2.0, 3.0], np.nan],
        f"a missing value (pandas' NA); {DROP}": [[1.0, 2.0, 3.0], pd.NA],
        "a dict; a row holds a number or an array of numbers": [[1.0, 2.0, 3.0], {"x": 1}],
        "a str 'abc'; a row holds a number or an array of numbers": [[1.0, 2.0, 3.0], "abc"],
        "a list holding None at [1]; a row holds a number or an array of numbers": [[1.0, 2.0, 3.0], [1.0, None, 3.0]],
        "0.1 (float64) at [0] is not a float32 value (it would become 0.10000000149011612); give the column as "
        "float32, or convert it yourself if that change is what you mean": [[1.0, 2.0, 3.0], [0.1, 2.0, 3.0]],
    }
    for found, cells in bad.items():  # the bad row is the last
        message = f"column 'x', row {len(cells) - 1} of the batch: {found}."
        with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
            p(pd.DataFrame({"x": cells}))
    # a column of Python lists (float64 values float32 holds) gives the live function's values
    rows = [[1.0, 2.0, 3.0], [0.5, -4.0, 8.0]]
    out = p(pd.DataFrame({"x": rows}))
    live = _live("f")(np.array(rows, np.float32))
    np.testing.assert_array_equal(np.stack(out["y"]), live["y"])
    np.testing.assert_array_equal(out["s"].to_numpy(), live["s"])
    q = jaxport.ray.Predictor(str(arts / "g.jaxport"))
    nan = ("NaN in an integer column (int32): pandas stores a missing value of an integer column as NaN (and Spark a "
           f"null); {DROP}.")
    for column, message in [(pd.Series([1, None, 3]), f"column 'n', row 1 of the batch: {nan}"),
                            (pd.Series([1, None, 3], dtype="Int64"),
                             f"column 'n', row 1 of the batch: a missing value (pandas' NA); {DROP}."),
                            (pd.Series([1.0, 2.5]), "column 'n', row 1 of the batch: 2.5 (float64) is not an int32 "
                                                    "value (it would become 2.0); give the column as int32, or convert "
                                                    "it yourself if that change is what you mean."),
                            (pd.Series(["1", "2"]), "column 'n', row 0 of the batch: a str '1'; a row holds a number "
                                                    "or an array of numbers.")]:
        with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
            q(pd.DataFrame({"n": column}))
    assert q(pd.DataFrame({"n": pd.Series([1, 2], dtype="Int64")}))["output"].tolist() == [2, 4]
    # through Ray Data: empty blocks give no rows; a ragged row fails the job with jaxport's message
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        x = np.arange(18, dtype=np.float32).reshape(6, 3)
        ds = ray.data.from_items([{"x": r} for r in x], override_num_blocks=6).filter(lambda r: r["x"][0] % 2 == 0)
        got = ds.map_batches(jaxport.ray.Predictor, fn_constructor_args=(str(arts / "f.jaxport"),), batch_size=2,
                             concurrency=1).take_all()
        order = np.argsort([r["x"][0] for r in got])
        np.testing.assert_array_equal(np.stack([got[i]["y"] for i in order]), _live("f")(x[[0, 2, 4]])["y"])
        ds = ray.data.from_items([{"x": [1.0, 2.0, 3.0]}, {"x": [1.0, 2.0]}, {"x": [1.0, 2.0, 3.0]}])
        with pytest.raises(Exception) as raised:
            ds.map_batches(jaxport.ray.Predictor, fn_constructor_args=(str(arts / "f.jaxport"),), batch_size=3,
                           concurrency=1).take_all()
        _raised(raised.value, "column 'x', row 1 of the batch: an array of shape (2,) where the input's rows have "
                              "shape (3,); every row of an input has one shape.")
    finally:
        ray.shutdown()


def test_beam_refuses_bad_rows(arts):
    _needs("apache_beam", "beam")
    import apache_beam as beam
    from apache_beam.ml.inference.base import RunInference

    import jaxport.beam

    handler = jaxport.beam.ModelHandler(arts / "f.jaxport")
    model = handler.load_model()
    one = np.ones(3, np.float32)
    for examples, message in [
            ([{"x": one}, {"y": one}], "example 1 of the batch has no 'x' (it has 'y'); give every input by name."),
            ([{"x": one, "label": 7}], "example 0 of the batch has 'label', which the function does not take (its "
                                       "inputs: x); give only inputs (carry other values in a KeyedModelHandler's "
                                       "key)."),
            ([{"x": one}, one], "example 1 of the batch is of type ndarray, and example 0 a dict: give every example "
                                "as a dict of arrays by input name."),
            ([one, None], f"input 'x', example 1 of the batch: None; {DROP}."),
            ([one, one[:2]], "input 'x', example 1 of the batch: an array of shape (2,) where the input's rows have "
                             "shape (3,); every row of an input has one shape."),
            ([one, b"abc"], "input 'x', example 1 of the batch: bytes b'abc'; a row holds a number or an array of "
                            "numbers.")]:
        with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
            handler.run_inference(examples, model)
    # dicts of Python lists: the live function's values
    got = list(handler.run_inference([{"x": [1.0, 2.0, 3.0]}, {"x": [0.5, 0.25, -1.0]}], model))
    live = _live("f")(np.array([[1.0, 2.0, 3.0], [0.5, 0.25, -1.0]], np.float32))
    np.testing.assert_array_equal(np.stack([r.inference["y"] for r in got]), live["y"])
    # a pipeline whose dict row lacks the key fails with jaxport's error naming the key
    with pytest.raises(InputError) as raised:  # noqa: PT012 - the pipeline runs as the block ends
        with beam.Pipeline(runner="DirectRunner") as p:
            _ = p | beam.Create([{"z": one}]) | RunInference(handler)
    assert str(raised.value).startswith("example 0 of the batch has no 'x' (it has 'z'); give every input by name.")


def test_spark_refuses_bad_rows_and_shared_fields(arts, monkeypatch):
    _needs("pyspark", "spark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    import jaxport.spark

    # fields: refused when the UDF is made, before any data (no SparkSession needed)
    for kwargs, message in [
            ({}, "outputs 'a/b' and 'a_b' both become the struct field 'a_b' (jaxport writes the '/' and '.' of an "
                 "output's name as '_': Spark resolves a dot as a field): one would be lost. Name them apart with "
                 "fields={'a/b': 'NAME'}."),
            ({"fields": {"a/b": "A_B"}}, "outputs 'a/b' and 'a_b' become the struct fields 'A_B' and 'a_b', one to "
                                         "Spark, which compares field names without case: one would be lost. Name "
                                         "them apart with fields={'a/b': 'NAME'}."),
            ({"fields": {"a/c": "c"}}, "fields= names 'a/c', which the function does not return (its outputs: a/b, "
                                       "a_b)."),
            ({"fields": {"a/b": ""}}, "fields={'a/b': ''}: a struct field's name is a non-empty string.")]:
        with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
            jaxport.spark.predict_udf(arts / "h.jaxport", **kwargs)
    with pytest.raises(UsageError, match=re.escape("fields= names the struct fields of several outputs; the function "
                                                   "returns one output ('output'), the UDF's column itself.")):
        jaxport.spark.predict_udf(arts / "g.jaxport", fields={"output": "y"})
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        f = jaxport.spark.predict_udf(arts / "f.jaxport")
        g = jaxport.spark.predict_udf(arts / "g.jaxport")
        where = "input 'x' (the UDF's column 0), row 1 of partition 0: "
        for rows, schema, udf, message in [
                ([(1, [1.0, 2.0, 3.0]), (2, None)], "x array<float>", f, f"{where}None; {DROP}."),
                ([(1, [1.0, 2.0, 3.0]), (2, [1.0, 2.0])], "x array<float>", f,
                 f"{where}an array of 2 values where the input's rows hold 3 values (shape (3,), flat or not); every "
                 f"row of an input has one shape."),
                ([(1, [1.0, 2.0, 3.0]), (2, [0.1, 2.0, 3.0])], "x array<double>", f,
                 f"{where}0.1 (float64) at [0] is not a float32 value (it would become 0.10000000149011612); give "
                 f"the column as float32, or convert it yourself if that change is what you mean."),
                ([(1, 1), (2, None)], "x int", g,
                 "input 'n' (the UDF's column 0), row 1 of partition 0: NaN in an integer column (int32): pandas "
                 f"stores a missing value of an integer column as NaN (and Spark a null); {DROP}."),
                ([(1, "a")], "x string", g, "input 'n' (the UDF's column 0), row 0 of partition 0: a str 'a'; a row "
                                            "holds a number or an array of numbers.")]:
            df = spark.createDataFrame(rows, f"id long, {schema}").coalesce(1)
            with pytest.raises(Exception) as raised:
                df.withColumn("out", udf("x")).collect()
            _raised(raised.value, message)
        # doubles that hold float32 values, ids as longs, renamed fields, and empty partitions: the live values
        x = np.array([[1.0, 2.0, 3.0], [0.5, 0.25, -8.0], [4.0, 5.0, 6.0]], np.float32)
        df = spark.createDataFrame([(i, r.tolist()) for i, r in enumerate(x)], "id long, x array<double>")
        got = sorted(df.repartition(6).withColumn("out", f("x")).collect(), key=lambda r: r["id"])
        np.testing.assert_array_equal(np.array([r["out"]["y"] for r in got], np.float32), _live("f")(x)["y"])
        ids = spark.createDataFrame([(i, 2**20 + i) for i in range(3)], "id long, n long")
        assert sorted(r["out"] for r in ids.withColumn("out", g("n")).collect()) == [2**21, 2**21 + 2, 2**21 + 4]
        h = jaxport.spark.predict_udf(arts / "h.jaxport", fields={"a/b": "ab"})
        v = spark.createDataFrame([(1, 1.5), (2, -2.0)], "id long, x float")
        got = sorted(v.withColumn("out", h("x")).collect(), key=lambda r: r["id"])
        live = _live("h")(np.array([1.5, -2.0], np.float32))
        assert [(r["out"]["ab"], r["out"]["a_b"]) for r in got] == list(zip(live["a"]["b"].tolist(),
                                                                            live["a_b"].tolist()))
        # Spark's null float reaches the UDF as NaN, a float value: it runs (and Spark gives the NaN back as null)
        nulls = spark.createDataFrame([(1, 1.5), (2, None)], "id long, x float")
        got = sorted(nulls.withColumn("out", h("x")).collect(), key=lambda r: r["id"])
        assert [r["out"]["a_b"] for r in got] == [2.5, None]
    finally:
        spark.stop()
