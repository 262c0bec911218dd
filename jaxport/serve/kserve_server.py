"""``jaxport serve``: artifacts behind the Open Inference Protocol (v2) over REST and gRPC, on kserve's
``Model`` and ``ModelServer`` (the optional extra ``jaxport[serve]``).

Each artifact is a :class:`JaxportModel` over a :class:`batching.Batched`: every bucket is compiled before the
server starts listening, so ``/v2/health/ready`` answers only once nothing is left to compile. A request's tensors
are checked once, by the artifact's own checks; an error is HTTP 400 / gRPC ``INVALID_ARGUMENT`` with the
artifact's message (kserve's ``InvalidInput``). The program runs on one worker thread per model (``batcher``: a
call that is fast, with nothing waiting, on the event loop itself). With a batching window (``window_ms > 0``),
what queues while the worker runs a call is concatenated along the batch axis (up to ``max_rows``), run as the
next call, and split back; the REST and gRPC handlers count a request as arriving while they read it, which the
worker waits for, up to the window.

Where kserve 0.21 falls short, this adapter does the work itself (README, "Serving and batch inference"):

- kserve binds REST to ``0.0.0.0`` and gRPC to ``[::]``, always: the servers are built here, on ``host``
  (default 127.0.0.1);
- kserve's binary REST decoder turns every element into a Python object (``InferRequest.from_bytes`` calls
  ``set_data_from_numpy(..., binary_data=False)``): REST inference requests are decoded here, the binary tensors
  straight from the bytes (:func:`rest_request`);
- kserve answers every versioned route (``/v2/models/NAME/versions/N/...``) with "not supported" and ignores gRPC's
  ``model_version``: versions are routed here, the unversioned routes serving the highest version;
- kserve's metadata drops ``versions`` and ``parameters``: REST metadata is answered here (gRPC's
  ``ModelMetadataResponse`` has no ``parameters`` field, so gRPC metadata has names, datatypes and shapes only);
- kserve parses the process's command line when imported (its own flags): it is imported here with an empty one.
- gRPC sets ``SO_REUSEPORT``, so a second server on a port in use starts and shares it silently: it is turned off,
  and a port that cannot be bound is a ``UsageError`` (``ports``), as is every address ``jaxport serve`` checks
  before it compiles;
- uvicorn binds its own socket, and exits the process when it cannot: the REST sockets are bound here
  (``ports.bind``); SIGINT and SIGTERM stop both servers, the requests in flight answered first.

Metrics: kserve's own (request latency histograms) and, per model, version and bucket, program calls, real rows,
rows and input elements added by padding, requests per program call, and compilations after warm-up, on
``/metrics`` (Prometheus text).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from .. import interrupts
from ..errors import InputError, JaxportError
from . import oip, ports
from .batcher import Batcher
from .batching import Batched

_argv, sys.argv = sys.argv, sys.argv[:1]  # kserve.model_server parses sys.argv when imported
try:
    import orjson
    import uvicorn
    from fastapi import Request
    from fastapi.responses import Response
    from grpc import aio
    from kserve import InferInput, InferOutput, InferRequest, InferResponse, Model, ModelServer
    from kserve.constants.constants import FASTAPI_APP_IMPORT_STRING, INFERENCE_CONTENT_LENGTH_HEADER
    from kserve.errors import InferenceError, InvalidInput, ModelNotFound
    from kserve.metrics import PREDICT_HIST_TIME, get_labels
    from kserve.model_server import app
    from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
    from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc
    from kserve.protocol.grpc.interceptors import ExceptionToStatusInterceptor, LoggingInterceptor
    from kserve.protocol.grpc.servicer import InferenceServicer
    from kserve.protocol.infer_type import RequestedOutput, get_content
    from kserve.protocol.rest.server import RESTServer
    from prometheus_client import REGISTRY
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        SummaryMetricFamily,
    )
finally:
    sys.argv = _argv

#: Seconds the requests in flight get to finish after SIGINT or SIGTERM, over REST and gRPC alike.
GRACE_S = 30
#: The most bytes one gRPC message may carry, each way.
GRPC_MESSAGE_BYTES = 1 << 30
#: Requests per program call, the buckets of the ``jaxport_requests_per_call`` histogram.
_PER_CALL = (1, 2, 4, 8, 16, 32, 64, 128)


class JaxportModel(Model):
    """One version of one artifact's function, served (see the module docstring)."""

    def __init__(self, name: str, version: str, batched: Batched, *, window_ms: float = 0.0,
                 max_rows: int | None = None):
        super().__init__(name)
        self.version = version
        self.batched = batched
        f = batched.function_record
        self.inputs = [oip.Tensor.of(i, "input") for i in f.inputs]  # UsageError for a dtype OIP lacks
        self.outputs = [oip.Tensor.of(o, "output") for o in f.outputs]
        self.batcher = Batcher(batched, merge=window_ms > 0, max_rows=max_rows, window_ms=window_ms,
                               name=f"jaxport-{name}")
        self.max_rows = self.batcher.max_rows
        self._latency = PREDICT_HIST_TIME.labels(**get_labels(name))
        self.ready = True  # every bucket was compiled before the model was made

    @property
    def batching(self) -> bool:
        return self.batcher.merge

    def metadata(self, versions: Sequence[str]) -> dict[str, Any]:
        return oip.model(self.batched.function_record, self.name, versions, self.batched.loaded.function,
                         self.batched.describe())

    def get_input_types(self) -> list[dict[str, Any]]:
        return [t.types() for t in self.inputs]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [t.types() for t in self.outputs]

    async def outputs_of(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs by name of one request's input arrays: checked once, run on the event loop when that is
        fastest, else on the worker (``batcher``), merged with others when batching. The request's errors are
        kserve's ``InvalidInput`` (400), a failed call ``InferenceError`` (500)."""
        start = time.perf_counter()
        try:
            admitted = self.batched.admit(arrays)  # the one check of this request
            if self.batcher.merge:
                # let the handlers of requests already read reach their arrival first: with others arriving, this
                # one goes to the worker, which merges them (inline, each would run alone)
                await asyncio.sleep(0)
            outputs = self.batcher.inline(admitted)
            if outputs is None:
                outputs = await asyncio.wrap_future(self.batcher.submit(admitted))
        except InputError as e:
            raise InvalidInput(str(e)) from None
        except JaxportError as e:
            raise InferenceError(str(e)) from None
        self._latency.observe(time.perf_counter() - start)
        return outputs

    async def predict(self, payload: Any, headers: Mapping[str, str] | None = None,
                      response_headers: Any = None) -> Any:
        if not isinstance(payload, InferRequest):
            raise InvalidInput("jaxport serves the Open Inference Protocol (v2): POST /v2/models/NAME/infer.")
        arrays: dict[str, Any] = {}
        for inp in payload.inputs:
            if inp.name in arrays:
                raise InvalidInput(f"input {inp.name!r} is given twice.")
            try:
                arrays[inp.name] = inp.as_numpy()
            except (ValueError, TypeError) as e:
                raise InvalidInput(f"input {inp.name!r}: its data does not fill shape {list(inp.shape)} of "
                                   f"{inp.datatype} ({e}).") from None
        outputs = await self.outputs_of(arrays)
        infer_outputs = []
        for t in self.outputs:
            value = outputs[t.name]
            out = InferOutput(name=t.name, shape=list(value.shape), datatype=t.datatype)
            out.set_data_from_numpy(value, binary_data=True)  # JSON responses convert it when encoding
            infer_outputs.append(out)
        return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name,
                             model_version=self.version, infer_outputs=infer_outputs,
                             use_binary_outputs=payload.use_binary_outputs,
                             requested_outputs=payload.request_outputs)

    def grpc_response(self, request_id: str, outputs: Mapping[str, Any]) -> Any:
        """A gRPC ``ModelInferResponse`` of the outputs, every tensor's bytes in ``raw_output_contents``."""
        import numpy as np

        tensors, raw = [], []
        for t in self.outputs:
            value = np.ascontiguousarray(outputs[t.name])
            tensors.append(pb.ModelInferResponse.InferOutputTensor(name=t.name, datatype=t.datatype,
                                                                   shape=list(value.shape)))
            raw.append(value.tobytes())
        return pb.ModelInferResponse(id=request_id or str(uuid.uuid4()), model_name=self.name,
                                     model_version=self.version, outputs=tensors, raw_output_contents=raw)


def grpc_inputs(request: Any) -> dict[str, Any]:
    """A gRPC ``ModelInferRequest``'s input tensors as arrays by name, from ``raw_input_contents`` (straight from
    the bytes) or each tensor's typed ``contents``; kserve's ``InvalidInput`` naming what is wrong."""
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise InvalidInput(f"the request has {len(request.inputs)} inputs but {len(raw)} raw_input_contents; give "
                           f"one raw_input_contents entry per input, in the inputs' order.")
    arrays: dict[str, Any] = {}
    for k, tensor in enumerate(request.inputs):
        name = tensor.name
        if name in arrays:
            raise InvalidInput(f"input {name!r} is given twice.")
        try:
            if raw:
                if tensor.HasField("contents"):
                    raise InvalidInput(f"input {name!r} has contents as well as raw_input_contents; give one.")
                arrays[name] = oip.decode(name, tensor.datatype, list(tensor.shape), raw=raw[k])
            else:
                data = get_content(tensor.datatype, tensor.contents) if tensor.datatype in oip.DTYPES else None
                arrays[name] = oip.decode(name, tensor.datatype, list(tensor.shape), data=data)
        except InputError as e:
            raise InvalidInput(str(e)) from None
    return arrays


def _version_key(version: str) -> tuple[int, Any]:
    return (0, int(version)) if version.isdigit() else (1, version)


class Registry:
    """The served models by name and version; an unversioned name means its highest version."""

    def __init__(self, models: Sequence[JaxportModel]):
        self.models: dict[tuple[str, str], JaxportModel] = {}
        for m in models:
            if (m.name, m.version) in self.models:
                raise InputError(f"model {m.name!r} version {m.version} is given twice; give each artifact its own "
                                 f"NAME or version (NAME@VERSION=ARTIFACT).")
            self.models[(m.name, m.version)] = m
        self.latest: dict[str, JaxportModel] = {}
        for (name, _), m in sorted(self.models.items(), key=lambda kv: (kv[0][0], _version_key(kv[0][1]))):
            self.latest[name] = m

    def versions(self, name: str) -> list[str]:
        return sorted((v for n, v in self.models if n == name), key=_version_key)

    def get(self, name: str, version: str | None = None) -> JaxportModel:
        model = self.latest.get(name) if not version else self.models.get((name, version))
        if model is None:
            raise ModelNotFound(f"{name} version {version}" if version else name)
        return model


class _Request(NamedTuple):
    """What an inference request's JSON says (the protocol's fields; None where absent): its inputs (the binary
    tensors' bytes follow the JSON), the outputs asked for, its id and its parameters."""

    inputs: Any
    outputs: Any
    id: Any
    parameters: Any


class _RestInput(NamedTuple):
    """One of a request's ``inputs``: its name, shape, datatype and parameters, and its JSON ``data``
    (``has_data``), or else (the ``binary_data_size`` parameter) its bytes after the JSON."""

    name: Any
    shape: Any
    datatype: Any
    parameters: Any
    data: Any
    has_data: bool

    @classmethod
    def read(cls, entry: Any) -> _RestInput:
        if not isinstance(entry, dict) or not {"name", "shape", "datatype"} <= set(entry):
            raise InvalidInput('each of "inputs" has a "name", a "shape" and a "datatype".')
        name, shape, datatype, parameters, data = _fields(entry, ("name", "shape", "datatype", "parameters", "data"))
        return cls(name, shape, datatype, parameters, data, "data" in entry)


class _Requested(NamedTuple):
    """One of a request's ``outputs``: the name of an output to return, and its parameters."""

    name: Any
    parameters: Any


def _fields(entry: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
    """The values of the fields ``names`` of a JSON object (None for each it lacks), in order."""
    return [entry.get(n) for n in names]


def rest_request(body: bytes, headers: Mapping[str, str], model_name: str) -> Any:
    """An inference request from a REST body: JSON, or JSON followed by binary tensors (the binary tensor
    extension), whose bytes become arrays without passing through Python objects."""
    length = headers.get(INFERENCE_CONTENT_LENGTH_HEADER)
    try:
        header_length = len(body) if length is None else int(length)
        if not 0 <= header_length <= len(body):
            raise ValueError(f"{header_length} is not within the body's {len(body)} bytes")
        header = orjson.loads(body[:header_length])
    except (ValueError, orjson.JSONDecodeError) as e:
        raise InvalidInput(f"the request is not an inference request's JSON ({e}).") from None
    request = _Request(*_fields(header, _Request._fields)) if isinstance(header, dict) else None
    if request is None or not isinstance(request.inputs, list):
        raise InvalidInput('the request has no "inputs" list.')
    inputs, start = [], header_length
    for raw in request.inputs:
        entry = _RestInput.read(raw)
        name, shape, dtype = entry.name, entry.shape, entry.datatype
        parameters = entry.parameters or {}
        if entry.has_data:
            inp = InferInput(name=name, shape=shape, datatype=dtype)
            inp.data = entry.data
        elif isinstance(parameters, dict) and "binary_data_size" in parameters:
            size = parameters["binary_data_size"]
            if type(size) is not int or size < 0 or start + size > len(body):  # noqa: E721
                raise InvalidInput(f"input {name!r}: binary_data_size {size!r} does not fit the request's "
                                   f"{len(body) - start} remaining bytes.")
            try:
                array = oip.decode(str(name), str(dtype), shape, raw=body[start:start + size])
            except InputError as e:
                raise InvalidInput(str(e)) from None
            start += size
            inp = InferInput(name=name, shape=list(array.shape), datatype=dtype)
            inp.set_data_from_numpy(array, binary_data=True)
        else:
            raise InvalidInput(f"input {name!r} has neither \"data\" nor a binary_data_size parameter.")
        inputs.append(inp)
    outputs = None
    if isinstance(request.outputs, list):
        asked = [_Requested(*_fields(o, _Requested._fields)) for o in request.outputs if isinstance(o, dict)]
        outputs = [RequestedOutput(name=o.name, parameters=o.parameters) for o in asked]
    return InferRequest(model_name=model_name, infer_inputs=inputs, request_id=request.id,
                        parameters=request.parameters, request_outputs=outputs)


def _json(body: Any) -> Any:
    return Response(content=orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json")


def _rest_response(response: Any) -> Any:
    body, json_length = response.to_rest()
    if json_length is None:
        return _json(body)
    return Response(content=body, media_type="application/octet-stream",
                    headers={INFERENCE_CONTENT_LENGTH_HEADER: str(json_length)})


def add_routes(registry: Registry) -> None:
    """The REST routes this adapter answers itself, added ahead of kserve's own (see the module docstring)."""

    async def metadata(model_name: str, model_version: str | None = None) -> Any:
        model = registry.get(model_name, model_version)
        return _json(model.metadata(registry.versions(model_name)))

    async def ready(model_name: str, model_version: str) -> Any:
        model = registry.get(model_name, model_version)
        return _json({"name": model_name, "ready": bool(model.ready)})

    async def infer(request: Request, model_name: str, model_version: str | None = None) -> Any:
        model = registry.get(model_name, model_version)
        with model.batcher.arrival():  # the batcher waits for a request being read, up to its window
            headers = {k.lower(): v for k, v in request.headers.items()}
            payload = rest_request(await request.body(), headers, model_name)
            response = await model.predict(payload, headers)  # kserve's pre- and postprocess are no-ops here
        return _rest_response(response)

    prefix = "/v2/models/{model_name}"
    routes = [(prefix, metadata, "GET"), (prefix + "/versions/{model_version}", metadata, "GET"),
              (prefix + "/versions/{model_version}/ready", ready, "GET"), (prefix + "/infer", infer, "POST"),
              (prefix + "/versions/{model_version}/infer", infer, "POST")]
    for path, endpoint, method in routes:
        app.add_api_route(path, endpoint, methods=[method], include_in_schema=False)
    # Routes match in order: move these ahead of any kserve registered before.
    added = app.router.routes[-len(routes):]
    del app.router.routes[-len(routes):]
    app.router.routes[0:0] = added


class Servicer(InferenceServicer):
    """kserve's gRPC servicer, with ``model_version`` honoured and metadata from the registry."""

    def __init__(self, registry: Registry, *args: Any):
        super().__init__(*args)
        self.registry = registry

    async def ModelReady(self, request: Any, context: Any) -> Any:  # noqa: N802 - the protocol's name
        return pb.ModelReadyResponse(ready=bool(self.registry.get(request.name, request.version).ready))

    async def ModelMetadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        model = self.registry.get(request.name, request.version)
        return pb.ModelMetadataResponse(name=request.name, versions=self.registry.versions(request.name),
                                        platform="jaxport", inputs=model.get_input_types(),
                                        outputs=model.get_output_types())

    async def ModelInfer(self, request: Any, context: Any) -> Any:  # noqa: N802
        model = self.registry.get(request.model_name, request.model_version)
        with model.batcher.arrival():
            outputs = await model.outputs_of(grpc_inputs(request))
        return model.grpc_response(request.id, outputs)


class Metrics:
    """A Prometheus collector of the served models' bucket statistics, read at each scrape."""

    def __init__(self, registry: Registry):
        self.registry = registry

    def collect(self) -> Any:
        labels = ["model", "version", "bucket"]
        calls = CounterMetricFamily("jaxport_program_calls", "Program calls per bucket", labels=labels)
        rows = CounterMetricFamily("jaxport_rows", "Real rows run per bucket", labels=labels)
        padded = CounterMetricFamily("jaxport_padded_rows", "Rows added by padding per bucket (waste)",
                                     labels=labels)
        elements = CounterMetricFamily("jaxport_padded_elements", "Input elements added by padding per bucket",
                                       labels=labels)
        compiled = GaugeMetricFamily("jaxport_compilations_after_warmup", "Programs compiled after warm-up",
                                     labels=["model", "version"])
        per_call = HistogramMetricFamily("jaxport_requests_per_call", "Requests served by one program call",
                                         labels=["model", "version"])
        queued = SummaryMetricFamily("jaxport_queue_seconds", "Seconds requests waited for the worker",
                                     labels=["model", "version"])
        running = SummaryMetricFamily("jaxport_run_seconds", "Seconds program calls took (padding, the call, "
                                      "the outputs to host memory)", labels=["model", "version"])
        bucket_seconds = CounterMetricFamily("jaxport_bucket_seconds", "Seconds the program calls of a bucket took",
                                             labels=labels)
        inline = CounterMetricFamily("jaxport_inline_calls", "Program calls run on the event loop (fast, nothing "
                                     "waiting) rather than the worker", labels=["model", "version"])
        for (name, version), m in self.registry.models.items():
            for bucket, s in m.batched.stats.items():
                key = [name, version, bucket]
                calls.add_metric(key, s.calls)
                rows.add_metric(key, s.rows)
                padded.add_metric(key, s.padded_rows)
                elements.add_metric(key, s.padded_elements)
                bucket_seconds.add_metric(key, s.seconds)
            compiled.add_metric([name, version], m.batched.compilations_after_warmup or 0)
            counts = dict(m.batcher.waits.per_call)
            buckets = [(str(edge), sum(c for n, c in counts.items() if n <= edge)) for edge in _PER_CALL]
            buckets.append(("+Inf", sum(counts.values())))
            per_call.add_metric([name, version], buckets, sum(n * c for n, c in counts.items()))
            w = m.batcher.waits
            queued.add_metric([name, version], w.requests, w.queued_seconds)
            running.add_metric([name, version], w.calls, w.run_seconds)
            inline.add_metric([name, version], w.inline)
        yield from (calls, rows, padded, elements, bucket_seconds, compiled, per_call, queued, running, inline)


class _QuietInputErrors(logging.Filter):
    """Drops kserve's log records of a request's error (a traceback each): the access log line has the 400 or 404."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], (InvalidInput, ModelNotFound)))


def quiet_logs() -> None:
    """At most one log line per request: the access line (REST) or the method line (gRPC)."""
    logging.getLogger("kserve.trace").setLevel(logging.WARNING)  # two timing lines per request
    for name in ("kserve", "kserve.trace"):
        logging.getLogger(name).addFilter(_QuietInputErrors())


class _Uvicorn(uvicorn.Server):
    """uvicorn's server on sockets bound here, saying when it listens and which signals stopped it."""

    def __init__(self, config: Any, on_started: Callable[[], None]):
        super().__init__(config)
        self.on_started = on_started
        self.signals: list[int] = []

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.signals.append(sig)
        super().handle_exit(sig, frame)

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            self.on_started()


def _logs_to_stderr() -> None:
    """Every log line on stderr (kserve writes uvicorn's access lines on stdout): stdout is ``--json``'s events."""
    loggers = [logging.getLogger(), *(v for v in logging.root.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger))]
    for log in loggers:
        for handler in log.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
                handler.setStream(sys.stderr)


async def _stop_when_told(rest: _Uvicorn, grpc_server: Any) -> None:
    """Stop gRPC when REST is told to stop (a signal), giving its calls in flight ``GRACE_S`` to finish."""
    while not rest.should_exit:
        await asyncio.sleep(0.1)  # as uvicorn itself polls
    await grpc_server.stop(grace=GRACE_S)


class Server(ModelServer):
    """kserve's ``ModelServer`` listening on ``host``, with the routes and servicer of this adapter."""

    def __init__(self, models: Sequence[JaxportModel], *, host: str = "127.0.0.1", http_port: int = 8080,
                 grpc_port: int = 8081, grpc_threads: int = 4):
        super().__init__(http_port=http_port, grpc_port=grpc_port, enable_latency_logging=False, workers=1,
                         max_threads=grpc_threads)
        self.host = host
        self.registry = Registry(models)
        for model in self.registry.latest.values():
            self.register_model(model)
        self.metrics = Metrics(self.registry)
        REGISTRY.register(self.metrics)

    async def _grpc(self) -> Any:
        # gRPC sets SO_REUSEPORT by default: a second server on the same port would bind too, and share it silently.
        server = aio.server(concurrent.futures.ThreadPoolExecutor(max_workers=self.max_threads),
                            interceptors=(LoggingInterceptor(), ExceptionToStatusInterceptor()),
                            options=[("grpc.max_send_message_length", GRPC_MESSAGE_BYTES),
                                     ("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES),
                                     ("grpc.so_reuseport", 0)])
        grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(
            Servicer(self.registry, self.dataplane, self.model_repository_extension), server)
        try:
            bound = server.add_insecure_port(ports.address(self.host, self.grpc_port))
        except RuntimeError:  # "Failed to bind to address": the reason is only in gRPC's log
            bound = 0
        if not bound:
            raise ports.grpc_refusal(self.host, self.grpc_port)
        await server.start()
        return server

    async def _serve_all(self, rest: _Uvicorn, sockets: list[Any]) -> None:
        grpc_server = await self._grpc()
        stopping = asyncio.create_task(_stop_when_told(rest, grpc_server))
        try:
            await rest.serve(sockets=sockets)  # until SIGINT or SIGTERM, then the requests in flight finish
        finally:
            rest.should_exit = True
            await stopping

    def serve(self, on_listening: Callable[[], None] | None = None) -> int | None:
        """Listen on REST and gRPC until SIGINT or SIGTERM, then let the requests in flight finish (``GRACE_S`` at
        most) and return the signal that stopped it (None if none did).

        ``on_listening`` is called once both listen. An address that cannot be listened on is a ``UsageError``
        (``ports``): ``jaxport serve`` checks them before it compiles (``ports.check``), but a port may be taken in
        between. In the main thread, the signals are this server's until it returns (``interrupts.deferred``):
        the previous handlers are restored then."""
        add_routes(self.registry)
        quiet_logs()
        _logs_to_stderr()
        rest = RESTServer(FASTAPI_APP_IMPORT_STRING, self.dataplane, self.model_repository_extension,
                          self.http_port, workers=1, timeout_keep_alive=self.timeout_keep_alive, grace_period=GRACE_S)
        rest.config.host = self.host
        rest.create_application()
        server = _Uvicorn(rest.config, on_listening or (lambda: None))
        sockets = ports.bind(self.host, self.http_port, "--http-port")
        main = threading.current_thread() is threading.main_thread()
        # Installed before the loop starts and restored after it ends (uvicorn installs the same handler while it
        # serves): a signal at any moment in between stops the server gracefully, none is lost.
        previous = {sig: signal.signal(sig, server.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)} \
            if main else {}
        try:
            with interrupts.deferred():
                asyncio.run(self._serve_all(server, sockets))
        finally:
            for sock in sockets:
                sock.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return server.signals[0] if server.signals else None
