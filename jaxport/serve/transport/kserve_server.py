"""``jaxport serve``: artifacts behind the Open Inference Protocol (v2) over REST and gRPC, on kserve's
``Model`` and ``ModelServer`` (the optional extra ``jaxport[serve]``).

Each artifact is a ``registry.JaxportModel`` over a ``batching.Batched``: the buckets its warm-up budget allows are
compiled before the server starts listening (``models.open_models``); a request whose bucket is not compiled yet
waits, off the event loop, for its one compile on the compile thread (``compiled``), while the compiled buckets keep
answering. A request's tensors are checked once, by the artifact's own checks; an error is HTTP 400 / gRPC
``INVALID_ARGUMENT`` with the artifact's message (kserve's ``InvalidInput``). The program runs on one worker thread
per model (``batcher``: a call that is fast, with nothing waiting, on the event loop itself). With a batching window
(``window_ms > 0``), what queues while the worker runs a call is concatenated along the batch axis (up to
``max_rows``), run as the next call, and split back; the REST and gRPC handlers count a request as arriving while
they read it, which the worker waits for, up to the window.

The served models are a ``registry.Registry``, by name and version. Where kserve 0.21 falls short (README, "Serving and
batch inference"), this adapter does the work itself, each in the module of what it concerns: ``rest`` (requests
decoded from the bytes; versioned routes and metadata over REST), ``grpc_service`` (``model_version``; the gRPC
server on ``host``, without ``SO_REUSEPORT``), ``lifecycle`` (the REST sockets bound here, on ``host``; signals;
log lines) and ``kserve_imports`` (kserve parses the command line when imported). ``metrics``: kserve's own and,
per model, version and bucket, the batching statistics, on ``/metrics`` (Prometheus text).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import REGISTRY

from . import grpc_service, lifecycle
from .kserve_imports import FASTAPI_APP_IMPORT_STRING, ModelServer, RESTServer
from .metrics import Metrics
from .ports import MAX_REQUEST_BYTES
from .registry import JaxportModel, Registry
from .rest import add_routes
from .unix import DEFAULT_MODE


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
