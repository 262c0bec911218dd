"""Batch inference on Ray Data (local, num_cpus=2), Apache Beam (DirectRunner) and Apache Spark (local): the README's
snippets run as written, their numbers equal a direct call, batches over the largest bucket and the spec's bound are
split, ragged last batches padded, and nothing compiles after warm-up. Each test skips when its engine (the extras
jaxport[ray], jaxport[beam], jaxport[spark]) is not installed."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys

import numpy as np
import pytest

import jaxport
from tests.support import EXAMPLES, REPO

# The engines' own warnings (deprecations inside Ray, Beam and Spark; Ray's note that one block cannot keep two
# actors busy) are theirs, not jaxport's.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

SECTION = (REPO / "README.md").read_text().split("## Serving and batch inference", 1)[1].split("\n## ", 1)[0]
#: 2x+1 and a row sum over a batch bounded at 64: Ray batches of 100 go past the bound.
TWO_OUTPUTS = "def f(x):\n    return {'y': 2.0 * x + 1.0, 's': x.sum(axis=1)}\n"
SPEC = "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - \"f32[batch, 3]\"\n"


def _snippet(engine: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", SECTION, re.S)
    (block,) = [b for b in blocks if f"import jaxport.{engine}\n" in b]
    return block


def _needs(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs the extra jaxport[{extra}] (pip install 'jaxport[{extra}]')")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory with the quick start's mlp.jaxport and a two-output function bounded at 64 (small.jaxport)."""
    d = tmp_path_factory.mktemp("engines")
    jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=d / "mlp.jaxport")
    src = d / "small"
    src.mkdir()
    (src / "model.py").write_text(TWO_OUTPUTS)
    (src / "spec.yaml").write_text(SPEC)
    jaxport.export(f"{src}/model.py:f", src / "spec.yaml", output=d / "small.jaxport")
    shutil.rmtree(src)
    return d


def _run(block: str, workdir, monkeypatch) -> dict:
    monkeypatch.chdir(workdir)
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own snippet
    return namespace


def _direct(workdir, name: str, x: np.ndarray, chunk: int = 64) -> dict[str, np.ndarray]:
    """The function called directly, in calls of at most ``chunk`` rows (within every spec bound here)."""
    loaded = jaxport.load(workdir / name)
    parts = [dict(loaded.leaves(loaded(x[i:i + chunk]))) for i in range(0, len(x), chunk)]
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}


def test_ray_data_predictor(workdir, monkeypatch):
    _needs("ray", "ray")
    import ray

    try:
        ns = _run(_snippet("ray"), workdir, monkeypatch)
        rows = ns["rows"]
        assert len(rows) == 1000  # batches of 300 over buckets 64 and 256: 256 + 44 (-> 64); the last 100 -> 256
        x = np.stack([r["x"] for r in rows])
        np.testing.assert_allclose(np.stack([r["output"] for r in rows]), _direct(workdir, "mlp.jaxport", x)["output"],
                                   rtol=1e-5, atol=1e-6)
        assert {int(r["jaxport_compilations"]) for r in rows} == {0}
        assert sorted(map(tuple, x.tolist())) == sorted(map(tuple, ns["x"].tolist()))
        # batches of 100 past the spec's bound of 64 (split), pandas batches, two outputs, the last batch of 50
        import jaxport.ray

        small = np.random.default_rng(1).standard_normal((250, 3), dtype=np.float32)
        ds = ray.data.from_numpy(small).rename_columns({"data": "x"})
        out = ds.map_batches(jaxport.ray.Predictor, fn_constructor_args=(str(workdir / "small.jaxport"),),
                             fn_constructor_kwargs={"report_compilations": True}, batch_size=100, concurrency=1,
                             batch_format="pandas").take_all()
        got = np.stack([r["x"] for r in out])
        expected = _direct(workdir, "small.jaxport", got)
        assert sorted(expected) == ["s", "y"]
        np.testing.assert_allclose(np.stack([r["y"] for r in out]), expected["y"], rtol=1e-6)
        np.testing.assert_allclose(np.array([r["s"] for r in out]), expected["s"], rtol=1e-5, atol=1e-6)
        assert {int(r["jaxport_compilations"]) for r in out} == {0}
    finally:
        ray.shutdown()


def test_beam_model_handler(workdir, monkeypatch, capsys):
    _needs("apache_beam", "beam")
    import apache_beam as beam
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
    from apache_beam.testing.util import BeamAssertException, assert_that

    import jaxport.beam

    ns = _run(_snippet("beam"), workdir, monkeypatch)
    scores = _direct(workdir, "mlp.jaxport", ns["x"])["output"]
    counts = {}
    for label in scores.argmax(axis=1):
        counts[int(label)] = counts.get(int(label), 0) + 1
    printed = capsys.readouterr().out
    assert sorted(tuple(map(int, re.findall(r"-?\d+", line))) for line in printed.splitlines() if line) == \
        sorted(counts.items())
    # every element's inference against a direct call, batches capped at the bound, counters
    handler = jaxport.beam.ModelHandler(workdir / "small.jaxport")
    assert handler.batch_elements_kwargs() == {"min_batch_size": 1, "max_batch_size": 64}
    assert jaxport.beam.ModelHandler(workdir / "mlp.jaxport", dims={"batch": [8, 32]},
                                     max_batch_size=1000).batch_elements_kwargs()["max_batch_size"] == 32
    x = np.random.default_rng(2).standard_normal((300, 3), dtype=np.float32)
    expected = _direct(workdir, "small.jaxport", x)

    def matches(actual):
        got = dict(actual)
        if sorted(got) != list(range(len(x))):
            raise BeamAssertException(f"keys {sorted(got)[:5]}...")
        np.testing.assert_allclose(np.stack([got[i]["y"] for i in range(len(x))]), expected["y"], rtol=1e-6)
        np.testing.assert_allclose(np.array([got[i]["s"] for i in range(len(x))]), expected["s"], rtol=1e-5,
                                   atol=1e-6)

    p = beam.Pipeline(runner="DirectRunner")
    results = (p | beam.Create([(i, x[i]) for i in range(len(x))]) | RunInference(KeyedModelHandler(handler))
               | beam.Map(lambda kv: (kv[0], kv[1].inference)))
    assert_that(results, matches)
    result = p.run()
    result.wait_until_finish()
    counters = {c.key.metric.name: c.committed
                for c in result.metrics().query(MetricsFilter().with_namespace("jaxport"))["counters"]}
    assert counters["rows"] == len(x)
    assert counters["compilations_after_warmup"] == 0
    assert counters["program_calls"] >= len(x) // 64
    # one program per worker: the bucket of max_batch_size (64), every smaller batch padded to it
    assert counters["compilations"] == counters["workers"] >= 1
    # the artifact as bytes, carried by the handler: the same results
    handler = jaxport.beam.ModelHandler((workdir / "small.jaxport").read_bytes(), max_batch_size=40)
    assert handler.batch_elements_kwargs() == {"min_batch_size": 1, "max_batch_size": 40}
    p = beam.Pipeline(runner="DirectRunner")
    results = (p | beam.Create([(i, x[i]) for i in range(len(x))]) | RunInference(KeyedModelHandler(handler))
               | beam.Map(lambda kv: (kv[0], kv[1].inference)))
    assert_that(results, matches)
    p.run().wait_until_finish()


def test_spark_predict_udf(workdir, monkeypatch):
    _needs("pyspark", "spark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    ns = _run(_snippet("spark"), workdir, monkeypatch)
    try:
        rows = sorted(ns["rows"], key=lambda r: r["id"])
        assert [r["id"] for r in rows] == list(range(700))
        np.testing.assert_allclose(np.array([r["scores"] for r in rows], np.float32),
                                   _direct(workdir, "mlp.jaxport", ns["x"])["output"], rtol=1e-5, atol=1e-6)
        # two outputs as a struct; Spark's batch capped at the bound (64)
        import jaxport.spark

        small = np.random.default_rng(3).standard_normal((150, 3), dtype=np.float32)
        df = ns["spark"].createDataFrame([(i, r.tolist()) for i, r in enumerate(small)], "id long, x array<float>")
        udf = jaxport.spark.predict_udf(workdir / "small.jaxport", batch_size=1000)
        got = sorted(df.withColumn("out", udf("x")).select("id", "out").collect(), key=lambda r: r["id"])
        expected = _direct(workdir, "small.jaxport", small)
        np.testing.assert_allclose(np.array([r["out"]["y"] for r in got], np.float32), expected["y"], rtol=1e-6)
        np.testing.assert_allclose(np.array([r["out"]["s"] for r in got], np.float32), expected["s"], rtol=1e-5,
                                   atol=1e-6)
        # without batch_size, each worker compiles the bucket of Spark's Arrow batch cut evenly: 100 rows over calls
        # of at most 64 are two calls of 50 (not 64 and 36 padded to 64), its one bucket, compiled at start
        ns["spark"].conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
        assert jaxport.spark.arrow_batch_rows() == 100
        assert [jaxport.spark.even_share(n, 64) for n in (100, 10_000, 64, 65, None)] == [50, 64, 64, 33, 64]
        counts = jaxport.spark.metrics(ns["spark"])
        udf = jaxport.spark.predict_udf(workdir / "small.jaxport", metrics=counts)
        got = sorted(df.withColumn("out", udf("x")).select("id", "out").collect(), key=lambda r: r["id"])
        np.testing.assert_allclose(np.array([r["out"]["y"] for r in got], np.float32), expected["y"], rtol=1e-6)
        c = counts.value
        assert (c["rows"], c["compilations"], c["compilations_after_warmup"]) == (150, c["workers"], 0), c
    finally:
        ns["spark"].stop()


def test_engine_takes_bytes_and_refuses_a_damaged_transfer(workdir, monkeypatch, tmp_path):
    """An artifact given as bytes is written once to the user's cache, named by its sha256, and loaded with every
    check: a damaged copy is refused with jaxport's message (and not kept); the batch size's bucket is the only
    program compiled, and a compilation cache filled by `jaxport warmup` serves it."""
    import hashlib

    from jaxport.errors import IntegrityError
    from jaxport.serve.engine import Engine, artifacts_dir

    monkeypatch.setenv("JAXPORT_CACHE_DIR", str(tmp_path / "user-cache"))
    data = (workdir / "mlp.jaxport").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    x = np.random.default_rng(4).standard_normal((300, 784), dtype=np.float32)
    engine = Engine(data, dims={"batch": [64, 256]}, batch_size=200)
    kept = artifacts_dir() / f"{digest}.jaxport"
    assert kept.read_bytes() == data and oct(kept.stat().st_mode & 0o777) == "0o600"
    for n in (200, 7, 300):  # 300: 256 + 44, the 44 padded to 256
        np.testing.assert_allclose(engine.predict({"x": x[:n]})["output"], _direct(workdir, "mlp.jaxport", x[:n])[
            "output"], rtol=1e-5, atol=1e-6)
    assert engine.counts() == {"workers": 1, "rows": 507, "program_calls": 4, "compilations": 1,
                               "compilation_cache_hits": 0, "compilations_after_warmup": 0}
    written = kept.stat().st_mtime_ns
    Engine(data, dims={"batch": [64, 256]})
    assert kept.stat().st_mtime_ns == written  # reused, not rewritten

    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    bad = hashlib.sha256(damaged).hexdigest()
    with pytest.raises(IntegrityError, match=re.escape(
            f"{artifacts_dir()}/{bad}.jaxport: member 'functions/predict.jaxexport' is damaged: its sha256 is ")):
        Engine(bytes(damaged))
    assert not (artifacts_dir() / f"{bad}.jaxport").exists()

    # a cache filled by `jaxport warmup` (what a job ships): the worker fetches its one program from it
    from click.testing import CliRunner
    from jaxport_cli.main import cli

    cache = tmp_path / "shipped-cache"
    result = CliRunner().invoke(cli, ["warmup", str(kept), "--dim", "batch=256", "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    warm = Engine(data, dims={"batch": [64, 256]}, batch_size=200, cache_dir=cache)
    assert warm.counts()["compilations"] == warm.counts()["compilation_cache_hits"] == 1


def test_ray_predictor_resolves_object_refs_and_names_bad_ones(workdir):
    _needs("ray", "ray")
    import ray

    import jaxport.ray
    from jaxport.errors import UsageError

    try:
        ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")
        predictor = jaxport.ray.Predictor(ray.put((workdir / "small.jaxport").read_bytes()), batch_size=10,
                                          report_compilations=True)
        x = np.random.default_rng(5).standard_normal((10, 3), dtype=np.float32)
        out = predictor({"x": x})
        np.testing.assert_allclose(out["y"], 2 * x + 1, rtol=1e-6)
        assert out["jaxport_compilations"].tolist() == [0] * 10
        assert out["jaxport_compilations_total"].tolist() == [1] * 10
        ref = ray.put([1, 2])
        with pytest.raises(UsageError, match=re.escape(
                f"the ObjectRef {ref.hex()} holds a list, not an artifact's bytes; put the bytes: "
                f"ray.put(Path('m.jaxport').read_bytes()).")):
            jaxport.ray.Predictor(ref)
    finally:
        ray.shutdown()
