"""What a user writes instead of jaxport, for benchmarks/bench_serve.py; each part runs as its own process.

    python benchmarks/serve_baselines.py bare FILE.py:FN --name N --output O --http-port P --grpc-port Q [--uds PATH]
    python benchmarks/serve_baselines.py job ray|beam|spark jaxport|glue --artifact A --model FILE.py:FN \
        --data X.npy --rows N --batch-size B --out RESULT.json

``bare``: a plain ``kserve.Model`` whose ``predict`` runs a ``jax.jit`` of the function on the request's numpy
arrays, started with kserve's own ``ModelServer``. kserve 0.21 binds REST to 0.0.0.0 and gRPC to [::] whatever it
is told; here two patches of the bind addresses only (uvicorn's ``config.host``, gRPC's ``add_insecure_port``)
keep it on 127.0.0.1; nothing in its request path is changed. Its compilations are counted by a ``jax.monitoring``
listener (``/jax/core/compile/backend_compile_duration``) and published on ``/metrics`` as ``bare_compilations``.

``job``: one batch job over ``--rows`` rows of ``--data``, with jaxport's adapter or with hand glue (a ``jax.jit``
per worker in a plain ``map_batches`` callable / Beam ``DoFn`` after ``BatchElements`` / Spark pandas UDF). It
writes the job's seconds (from building the dataset to the last row consumed; the engine's session, ``ray.init``
or the ``SparkSession``, is up before), rows, compilations where they can be read, and Ray's cold start per actor.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import sys
import time
import uuid
from pathlib import Path

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def load_function(ref: str):
    """``FILE.py:FN`` -> the function (the file imported as a module of its own name)."""
    path, _, name = ref.rpartition(":")
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


class CompileCounter:
    """Counts XLA backend compilations in this process (``jax.monitoring``), from its creation on."""

    _instance: CompileCounter | None = None

    def __init__(self) -> None:
        import jax.monitoring

        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event: str, duration: float, **_: object) -> None:
        if event == COMPILE_EVENT:
            self.count += 1

    @classmethod
    def get(cls) -> CompileCounter:
        if cls._instance is None:
            cls._instance = CompileCounter()
        return cls._instance


# -- the bare KServe model --

def bare_server(args: argparse.Namespace) -> None:
    sys.argv = sys.argv[:1]  # kserve's model_server parses the command line when imported
    import grpc.aio._server as grpc_server
    import jax
    import numpy as np
    from kserve import InferOutput, InferResponse, Model, ModelServer
    from kserve.protocol.rest import server as rest_server
    from prometheus_client import REGISTRY
    from prometheus_client.core import GaugeMetricFamily

    counter = CompileCounter.get()

    # kserve binds 0.0.0.0 / [::] whatever it is told: keep the benchmark on the loopback interface (or, with --uds,
    # on unix sockets: REST on PATH, gRPC on PATH.grpc, as jaxport serve --uds; a TPU host may open no TCP socket).
    rest_init = rest_server.RESTServer.__init__

    def rest_on_loopback(self, *a, **k):
        rest_init(self, *a, **k)
        self.config.host = "127.0.0.1"
        if args.uds:
            self.config.uds = args.uds

    rest_server.RESTServer.__init__ = rest_on_loopback
    add_port = grpc_server.Server.add_insecure_port
    grpc_server.Server.add_insecure_port = lambda self, address: add_port(
        self, f"unix:{args.uds}.grpc" if args.uds else address.replace("[::]", "127.0.0.1"))

    class Compilations:
        def collect(self):
            g = GaugeMetricFamily("bare_compilations", "XLA compilations in the bare server's process")
            g.add_metric([], counter.count)
            yield g

    REGISTRY.register(Compilations())

    class BareModel(Model):
        """What the kserve docs show: ``predict`` on the request's numpy arrays, here a ``jax.jit``."""

        def __init__(self, name: str, fn, output: str):
            super().__init__(name)
            self.fn = jax.jit(fn)
            self.output = output
            self.ready = True

        def predict(self, payload, headers=None, response_headers=None):
            x = payload.inputs[0].as_numpy()
            y = np.asarray(self.fn(x))
            out = InferOutput(name=self.output, shape=list(y.shape), datatype="FP32")
            out.set_data_from_numpy(y, binary_data=True)
            return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name, infer_outputs=[out],
                                 use_binary_outputs=payload.use_binary_outputs,
                                 requested_outputs=payload.request_outputs)

    model = BareModel(args.name, load_function(args.function), args.output)
    ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1,
                enable_latency_logging=False).start([model])


# -- batch jobs --

def _result(out: str, **fields: object) -> None:
    Path(out).write_text(json.dumps(fields))


class GlueRay:
    """Hand glue for Ray Data: a ``jax.jit`` per actor in a plain callable class."""

    def __init__(self, function: str):
        self.t0 = time.perf_counter()
        self.counter = CompileCounter.get()
        import jax

        self.fn = jax.jit(load_function(function))
        self.cold: float | None = None

    def __call__(self, batch):
        import numpy as np

        y = np.asarray(self.fn(batch["x"]))
        if self.cold is None:
            self.cold = time.perf_counter() - self.t0
        n = len(y)
        return {"output": y, "cold_start_s": np.full(n, self.cold), "compiles": np.full(n, self.counter.count),
                "after_warmup": np.full(n, -1)}


class JaxportRay:
    """``jaxport.ray.Predictor``, timed the same way (construction to the first batch done)."""

    def __init__(self, artifact: str, batch_size: int, cache_dir: str):
        self.t0 = time.perf_counter()
        self.counter = CompileCounter.get()
        import jaxport.ray

        kwargs = {"keep_inputs": False, "report_compilations": True, "cache_dir": cache_dir}
        if "batch_size" in inspect.signature(jaxport.ray.Predictor.__init__).parameters:
            kwargs["batch_size"] = batch_size  # the option it may gain: the batch Ray gives it
        self.predictor = jaxport.ray.Predictor(artifact, **kwargs)
        self.cold: float | None = None

    def __call__(self, batch):
        import numpy as np

        out = self.predictor(batch)
        if self.cold is None:
            self.cold = time.perf_counter() - self.t0
        n = len(out["jaxport_compilations"])
        return {"cold_start_s": np.full(n, self.cold), "compiles": np.full(n, self.counter.count),
                "after_warmup": np.asarray(out["jaxport_compilations"])}


def ray_job(args: argparse.Namespace) -> None:
    import numpy as np
    import ray
    import serve_baselines as mod  # the classes by reference, for the actors

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        x = np.load(args.data, mmap_mode="r")[:args.rows]
        t0 = time.perf_counter()
        ds = ray.data.from_numpy(np.ascontiguousarray(x)).rename_columns({"data": "x"})
        if args.side == "jaxport":
            out = ds.map_batches(mod.JaxportRay, fn_constructor_args=(args.artifact, args.batch_size, args.cache_dir),
                                 batch_size=args.batch_size, concurrency=2)
        else:
            out = ds.map_batches(mod.GlueRay, fn_constructor_args=(args.model,), batch_size=args.batch_size,
                                 concurrency=2)
        rows, colds, compiles, after = 0, set(), {}, 0
        for b in out.iter_batches(batch_size=None):
            rows += len(b["cold_start_s"])
            for c, k in zip(b["cold_start_s"], b["compiles"]):
                colds.add(float(c))
                compiles[float(c)] = max(compiles.get(float(c), 0), int(k))
            after = max(after, int(np.max(b["after_warmup"])))
        elapsed = time.perf_counter() - t0
    finally:
        ray.shutdown()
    _result(args.out, seconds=elapsed, rows=rows, cold_start_s=sorted(colds),
            compilations=sum(compiles.values()), after_warmup=after if args.side == "jaxport" else None)


def beam_job(args: argparse.Namespace) -> None:
    import apache_beam as beam
    import numpy as np
    from apache_beam.ml.inference.base import RunInference

    counter = CompileCounter.get()  # the DirectRunner runs the pipeline in this process
    x = np.load(args.data, mmap_mode="r")[:args.rows]
    t0 = time.perf_counter()

    class GlueDoFn(beam.DoFn):
        def setup(self):
            import jax

            self.fn = jax.jit(load_function(args.model))

        def process(self, batch):
            yield from np.asarray(self.fn(np.stack(batch)))

    with beam.Pipeline(runner="DirectRunner") as p:
        rows = p | beam.Create(list(np.asarray(x)))
        if args.side == "jaxport":
            import jaxport.beam

            out = rows | RunInference(jaxport.beam.ModelHandler(args.artifact, cache_dir=args.cache_dir))
        else:
            out = rows | beam.BatchElements() | beam.ParDo(GlueDoFn())
        counted = out | beam.combiners.Count.Globally()
        counted | beam.Map(lambda n: Path(args.out + ".rows").write_text(str(n)))
    elapsed = time.perf_counter() - t0
    _result(args.out, seconds=elapsed, rows=int(Path(args.out + ".rows").read_text()), compilations=counter.count)


def _glue_spark_udf(function: str):
    from collections.abc import Iterator

    import numpy as np
    import pandas as pd
    from pyspark.sql import types as T
    from pyspark.sql.functions import pandas_udf

    def glue(batches):
        import jax

        fn = jax.jit(load_function(function))  # once per Python worker's task
        for x in batches:
            y = np.asarray(fn(np.stack(x.to_numpy())))
            yield pd.Series(list(y))

    # Iterator[pd.Series] -> Iterator[pd.Series]: an iterator UDF, set as objects (this module's annotations are text)
    glue.__annotations__ = {"batches": Iterator[pd.Series], "return": Iterator[pd.Series]}
    return pandas_udf(T.ArrayType(T.FloatType()))(glue)


def spark_job(args: argparse.Namespace) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        t0 = time.perf_counter()
        df = spark.read.parquet(args.data)
        if args.side == "jaxport":
            import jaxport.spark

            udf = jaxport.spark.predict_udf(args.artifact, cache_dir=args.cache_dir)
        else:
            udf = _glue_spark_udf(args.model)
        row = df.withColumn("y", udf("x")).agg(F.count(F.element_at("y", 1)).alias("n")).collect()[0]
        elapsed = time.perf_counter() - t0
    finally:
        spark.stop()
    _result(args.out, seconds=elapsed, rows=int(row["n"]), compilations=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    bare = sub.add_parser("bare")
    bare.add_argument("function")
    bare.add_argument("--name", required=True)
    bare.add_argument("--output", required=True)
    bare.add_argument("--http-port", type=int, required=True)
    bare.add_argument("--grpc-port", type=int, required=True)
    bare.add_argument("--uds", help="Listen on unix sockets: REST on PATH, gRPC on PATH.grpc (the ports unused).")
    job = sub.add_parser("job")
    job.add_argument("engine", choices=["ray", "beam", "spark"])
    job.add_argument("side", choices=["jaxport", "glue"])
    for name in ("--artifact", "--model", "--data", "--out", "--cache-dir"):
        job.add_argument(name, required=True)
    job.add_argument("--rows", type=int, required=True)
    job.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args()
    if args.command == "bare":
        bare_server(args)
    else:
        {"ray": ray_job, "beam": beam_job, "spark": spark_job}[args.engine](args)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
