"""The gRPC half of ``jaxport serve``'s kserve transport: the servicer, requests decoded and responses encoded
straight from and to the tensors' bytes, and the server, started on ``host``.

Where kserve 0.21 falls short over gRPC:

- it ignores ``model_version``: versions are routed here (``kserve_server.Registry``), and metadata comes from the
  registry (gRPC's ``ModelMetadataResponse`` has no ``parameters`` field, so it has names, datatypes and shapes
  only);
- it binds gRPC to ``[::]``, always: the server is built here, on ``host`` (:func:`start`);
- gRPC sets ``SO_REUSEPORT``, so a second server on a port in use starts and shares it silently: it is turned off,
  and a port that cannot be bound is a ``UsageError`` (``ports``).
"""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from . import oip, ports
from .kserve_imports import (
    ExceptionToStatusInterceptor,
    InferenceServicer,
    InvalidInput,
    LoggingInterceptor,
    aio,
    get_content,
    grpc_predict_v2_pb2_grpc,
    pb,
)

if TYPE_CHECKING:
    from .kserve_server import JaxportModel, Registry

#: The most bytes one gRPC message may carry, each way.
GRPC_MESSAGE_BYTES = 1 << 30


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


def grpc_response(model: JaxportModel, request_id: str, outputs: Mapping[str, Any]) -> Any:
    """A gRPC ``ModelInferResponse`` of the outputs, every tensor's bytes in ``raw_output_contents``."""
    import numpy as np

    tensors, raw = [], []
    for t in model.outputs:
        value = np.ascontiguousarray(outputs[t.name])
        tensors.append(pb.ModelInferResponse.InferOutputTensor(name=t.name, datatype=t.datatype,
                                                               shape=list(value.shape)))
        raw.append(value.tobytes())
    return pb.ModelInferResponse(id=request_id or str(uuid.uuid4()), model_name=model.name,
                                 model_version=model.version, outputs=tensors, raw_output_contents=raw)


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
        return grpc_response(model, request.id, outputs)


async def start(servicer: Servicer, host: str, port: int, threads: int) -> Any:
    """A gRPC server of ``servicer`` started on ``host:port`` with ``threads`` worker threads; a ``UsageError``
    (``ports.grpc_refusal``) when it cannot bind."""
    # gRPC sets SO_REUSEPORT by default: a second server on the same port would bind too, and share it silently.
    server = aio.server(concurrent.futures.ThreadPoolExecutor(max_workers=threads),
                        interceptors=(LoggingInterceptor(), ExceptionToStatusInterceptor()),
                        options=[("grpc.max_send_message_length", GRPC_MESSAGE_BYTES),
                                 ("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES),
                                 ("grpc.so_reuseport", 0)])
    grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
    try:
        bound = server.add_insecure_port(ports.address(host, port))
    except RuntimeError:  # "Failed to bind to address": the reason is only in gRPC's log
        bound = 0
    if not bound:
        raise ports.grpc_refusal(host, port)
    await server.start()
    return server
