"""``jaxport serve``: artifacts behind the Open Inference Protocol (v2) over REST and gRPC, on kserve's
``Model`` and ``ModelServer`` (the optional extra ``jaxport[serve]``).

Each artifact is a :class:`JaxportModel` over a :class:`batching.Batched`: the buckets its warm-up budget allows are
compiled before the server starts listening (``models.open_models``); a request whose bucket is not compiled yet
waits, off the event loop, for its one compile on the compile thread (``compiled``), while the compiled buckets keep
answering. A request's tensors are checked once, by the artifact's own checks; an error is HTTP 400 / gRPC
``INVALID_ARGUMENT`` with the artifact's message (kserve's ``InvalidInput``). The program runs on one worker thread
per model (``batcher``: a call that is fast, with nothing waiting, on the event loop itself). With a batching window
(``window_ms > 0``), what queues while the worker runs a call is concatenated along the batch axis (up to
``max_rows``), run as the next call, and split back; the REST and gRPC handlers count a request as arriving while
they read it, which the worker waits for, up to the window.

The served models are a :class:`Registry` by name and version. Where kserve 0.21 falls short (README, "Serving and
batch inference"), this adapter does the work itself, each in the module of what it concerns: ``rest`` (requests
decoded from the bytes; versioned routes and metadata over REST), ``grpc_service`` (``model_version``; the gRPC
server on ``host``, without ``SO_REUSEPORT``), ``lifecycle`` (the REST sockets bound here, on ``host``; signals;
log lines) and ``kserve_imports`` (kserve parses the command line when imported). ``metrics``: kserve's own and,
per model, version and bucket, the batching statistics, on ``/metrics`` (Prometheus text).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prometheus_client import REGISTRY

from ..errors import InputError, JaxportError
from . import grpc_service, lifecycle, oip
from .batcher import Batcher
from .batching import Batched
from .kserve_imports import (
    FASTAPI_APP_IMPORT_STRING,
    PREDICT_HIST_TIME,
    InferenceError,
    InvalidInput,
    Model,
    ModelNotFound,
    ModelServer,
    RESTServer,
    get_labels,
)
from .metrics import Metrics
from .ports import MAX_REQUEST_BYTES
from .rest import add_routes
from .unix import DEFAULT_MODE


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
        self.ready = True  # its warm-up ran before the model was made

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
            compiling = self.batched.pending(admitted)
            if compiling is not None:  # a size not compiled yet: compiled on the compile thread, once
                await asyncio.wrap_future(compiling)
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
        """kserve's entry point, which only its own routes reach (the protocol's v1): refused. The v2 routes decode,
        run (:meth:`outputs_of`) and encode here (``rest``, ``grpc_service``)."""
        raise InvalidInput("jaxport serves the Open Inference Protocol (v2): POST /v2/models/NAME/infer.")


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
        if model is None:  # the names shortened: gRPC carries the message in its metadata (8 KiB at most)
            raise ModelNotFound(f"{oip.shorten(name)} version {oip.shorten(version)}" if version else oip.shorten(name))
        return model


class Server(ModelServer):
    """kserve's ``ModelServer`` listening on ``host`` (or on the unix sockets of ``uds``: ``unix``), with the routes
    and servicer of this adapter."""

    def __init__(self, models: Sequence[JaxportModel], *, host: str = "127.0.0.1", http_port: int = 8080,
                 grpc_port: int = 8081, grpc_threads: int = 4, max_request_bytes: int = MAX_REQUEST_BYTES,
                 uds: str | None = None, uds_mode: int = DEFAULT_MODE):
        super().__init__(http_port=http_port, grpc_port=grpc_port, enable_latency_logging=False, workers=1,
                         max_threads=grpc_threads)
        self.host = host
        self.max_request_bytes = max_request_bytes
        self.uds, self.uds_mode = uds, uds_mode
        self.registry = Registry(models)
        for model in self.registry.latest.values():
            self.register_model(model)
        self.metrics = Metrics(self.registry)
        REGISTRY.register(self.metrics)

    def serve(self, on_listening: Callable[[], None] | None = None) -> int | None:
        """Listen on REST and gRPC until SIGINT or SIGTERM, then let the requests in flight finish
        (``lifecycle.GRACE_S`` at most) and return the signal that stopped it (None if none did).

        ``on_listening`` is called once both listen. An address that cannot be listened on is a ``UsageError``
        (``ports``): ``jaxport serve`` checks them before it compiles (``ports.check``), but a port may be taken in
        between. In the main thread, the signals are this server's until it returns (``lifecycle.serve``)."""
        add_routes(self.registry, self.max_request_bytes)
        lifecycle.route_logs()
        rest = RESTServer(FASTAPI_APP_IMPORT_STRING, self.dataplane, self.model_repository_extension,
                          self.http_port, workers=1, timeout_keep_alive=self.timeout_keep_alive,
                          grace_period=lifecycle.GRACE_S)
        rest.config.host = self.host
        rest.create_application()

        def start_grpc() -> Any:  # in the event loop, as REST starts
            servicer = grpc_service.Servicer(self.registry, self.dataplane, self.model_repository_extension)
            return grpc_service.start(servicer, self.host, self.grpc_port, self.max_threads, self.max_request_bytes,
                                      self.uds, self.uds_mode)

        return lifecycle.serve(rest.config, self.host, self.http_port, start_grpc, on_listening, uds=self.uds,
                               uds_mode=self.uds_mode)
