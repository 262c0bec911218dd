"""The gRPC half of ``jaxport serve``'s kserve transport: the servicer, requests decoded and responses encoded
straight from and to the tensors' bytes, and the server, started on ``host``.

Where kserve 0.21 falls short over gRPC:

- it decodes typed ``contents`` with numpy's casts (an INT8 of 300 wraps) and ignores the outputs asked for:
  requests are decoded here (:func:`grpc_inputs`, every value kept exactly, each error ``INVALID_ARGUMENT`` naming
  the field), and only the outputs asked for are answered (:func:`grpc_outputs`);
- it ignores ``model_version``: versions are routed here (``registry.Registry``), and metadata comes from the
  registry (gRPC's ``ModelMetadataResponse`` has no ``parameters`` field, so it has names, datatypes and shapes
  only);
- it binds gRPC to ``[::]``, always: the server is built here, on ``host`` or a unix socket (:func:`start`);
- gRPC answers bytes that are no protobuf message ``UNKNOWN`` (a server error): each request is decoded here
  (:func:`add_servicer`), and such bytes are ``INVALID_ARGUMENT``;
- gRPC sets ``SO_REUSEPORT``, so a second server on a port in use starts and shares it silently: it is turned off,
  and a port that cannot be bound is a ``UsageError`` (``ports``).
"""

from __future__ import annotations

import concurrent.futures
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ...errors import InputError, UsageError
from . import oip, ports, unix
from .kserve_imports import (
    DecodeError,
    ExceptionToStatusInterceptor,
    InferenceServicer,
    InvalidInput,
    LoggingInterceptor,
    Unimplemented,
    aio,
    grpc,
    pb,
)

if TYPE_CHECKING:
    from .registry import JaxportModel, Registry

#: The most bytes one gRPC message may carry, each way.
GRPC_MESSAGE_BYTES = 1 << 30


#: The typed contents field of each datatype (FP16 has none: its bytes go in ``raw_input_contents``).
CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
            "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
            "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
            "FP64": "fp64_contents"}


def _parameters(given: Any, at: str) -> dict[str, Any]:
    """A gRPC ``parameters`` map as ``oip.parameters`` checks it (an unset value is refused there, as JSON null)."""
    values = {}
    for key, p in given.items():
        choice = p.WhichOneof("parameter_choice")
        values[key] = None if choice is None else getattr(p, choice)
    return oip.parameters(values, at)


def _contents(tensor: Any, at: str) -> list[Any]:
    """The values of a tensor's typed ``contents``: the field of its datatype (``CONTENTS``), and no other."""
    want = CONTENTS.get(tensor.datatype)
    given = [f.name for f, _ in tensor.contents.ListFields()]
    wrong = [g for g in given if g != want]
    if wrong or want is None:
        goes = f"{tensor.datatype} data goes in contents.{want}" if want else \
            f"{tensor.datatype} has no typed contents: send its bytes in raw_input_contents"
        shown = f", not contents.{wrong[0]}" if wrong else ""
        raise InputError(f"{at}.contents: {goes}{shown}.")
    return list(getattr(tensor.contents, want))


def grpc_inputs(request: Any, names: Sequence[str]) -> dict[str, Any]:
    """A gRPC ``ModelInferRequest``'s input tensors as arrays by name, for a model of the inputs ``names``: from
    ``raw_input_contents`` (straight from the bytes) or each tensor's typed ``contents``, every field checked and
    every value kept exactly (``oip.decode``); an ``InputError`` naming the field that is wrong."""
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise InputError(f"the request has {len(request.inputs)} inputs but {len(raw)} raw_input_contents; give "
                         f"one raw_input_contents entry per input, in the inputs' order.")
    arrays: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for k, tensor in enumerate(request.inputs):
        at = f"inputs[{k}]"
        name = oip.check_name(tensor.name, f"{at}.name", seen, names, "input")
        _parameters(tensor.parameters, f"{at}.parameters")
        datatype, shape = tensor.datatype, list(tensor.shape)
        if raw:
            if tensor.HasField("contents"):
                raise InputError(f"{at} has contents as well as raw_input_contents[{k}]; give one.")
            arrays[name] = oip.decode(at, datatype, shape, raw=raw[k], data_at=f"raw_input_contents[{k}]")
        else:
            data = _contents(tensor, at) if datatype in oip.DTYPES else []  # else decode names the datatype
            arrays[name] = oip.decode(at, datatype, shape, data=data, data_at=f"{at}.contents.{CONTENTS.get(datatype)}")
    return arrays


def grpc_outputs(request: Any, names: Sequence[str]) -> list[str]:
    """The names of the outputs a ``ModelInferRequest`` asks for (all ``names``, the model's, when it names none);
    an ``InputError`` naming the field that is wrong."""
    seen: dict[str, str] = {}
    asked = []
    for k, tensor in enumerate(request.outputs):
        at = f"outputs[{k}]"
        asked.append(oip.check_name(tensor.name, f"{at}.name", seen, names, "output"))
        _parameters(tensor.parameters, f"{at}.parameters")
    return asked or list(names)


def grpc_response(model: JaxportModel, request_id: str, outputs: Mapping[str, Any], asked: Sequence[str]) -> Any:
    """A gRPC ``ModelInferResponse`` of the outputs ``asked`` for, every tensor's bytes in ``raw_output_contents``."""
    import numpy as np

    datatypes = {t.name: t.datatype for t in model.outputs}
    tensors, raw = [], []
    for name in asked:
        value = np.ascontiguousarray(outputs[name])
        tensors.append(pb.ModelInferResponse.InferOutputTensor(name=name, datatype=datatypes[name],
                                                               shape=list(value.shape)))
        raw.append(value.tobytes())
    return pb.ModelInferResponse(id=request_id or str(uuid.uuid4()), model_name=model.name,
                                 model_version=model.version, outputs=tensors, raw_output_contents=raw)


class Servicer(InferenceServicer):
    """kserve's gRPC servicer, with ``model_version`` honoured, metadata from the registry, and the repository
    extension refused (``UNIMPLEMENTED``)."""

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

    async def RepositoryModelLoad(self, request: Any, context: Any) -> Any:  # noqa: N802
        raise Unimplemented(oip.REPOSITORY)

    async def RepositoryModelUnload(self, request: Any, context: Any) -> Any:  # noqa: N802
        raise Unimplemented(oip.REPOSITORY)

    async def ModelInfer(self, request: Any, context: Any) -> Any:  # noqa: N802
        model = self.registry.get(request.model_name, request.model_version)
        with model.batcher.arrival():
            try:
                arrays = grpc_inputs(request, [t.name for t in model.inputs])
                asked = grpc_outputs(request, [t.name for t in model.outputs])
                _parameters(request.parameters, "parameters")
            except InputError as e:
                raise InvalidInput(str(e)) from None
            outputs = await model.outputs_of(arrays)
        return grpc_response(model, request.id, outputs, asked)


class Undecodable(NamedTuple):
    """A request whose bytes are no message of its method's type (``why``: protobuf's error)."""

    type: str
    why: str


def _decoder(message: Any) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return message.FromString(data)
        except DecodeError as e:
            return Undecodable(message.DESCRIPTOR.name, str(e))
    return decode


def _refusing_undecodable(behavior: Callable[..., Any]) -> Callable[..., Any]:
    async def call(request: Any, context: Any) -> Any:
        if isinstance(request, Undecodable):  # an INVALID_ARGUMENT (the interceptor's), not gRPC's UNKNOWN
            raise InvalidInput(f"the request is not a {request.type} message: {oip.shorten(request.why)}; send "
                               f"the protocol's message (grpc_predict_v2.proto).")
        return await behavior(request, context)
    return call


def add_servicer(servicer: Servicer, server: Any) -> None:
    """The servicer's methods added to ``server`` as kserve's generated ``add_GRPCInferenceServiceServicer_to_server``
    adds them, but each request decoded here: bytes that are no message of the method's type are
    ``INVALID_ARGUMENT`` saying so, where gRPC answers ``UNKNOWN`` (a server error) with the decoder's exception."""
    service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    handlers = {m.name: grpc.unary_unary_rpc_method_handler(
        _refusing_undecodable(getattr(servicer, m.name)), request_deserializer=_decoder(getattr(pb, m.input_type.name)),
        response_serializer=getattr(pb, m.output_type.name).SerializeToString) for m in service.methods}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


async def start(servicer: Servicer, host: str, port: int, threads: int, max_request_bytes: int,
                uds: str | None = None, uds_mode: int = unix.DEFAULT_MODE) -> Any:
    """A gRPC server of ``servicer`` started on ``host:port`` (or on the unix socket ``uds``, its file given
    ``uds_mode``) with ``threads`` worker threads, receiving messages of at most ``max_request_bytes`` (a larger one
    is ``RESOURCE_EXHAUSTED``, gRPC's own answer); a ``UsageError`` (``ports.grpc_refusal``) when it cannot bind."""
    # gRPC sets SO_REUSEPORT by default: a second server on the same port would bind too, and share it silently.
    server = aio.server(concurrent.futures.ThreadPoolExecutor(max_workers=threads),
                        interceptors=(LoggingInterceptor(), ExceptionToStatusInterceptor()),
                        options=[("grpc.max_send_message_length", GRPC_MESSAGE_BYTES),
                                 ("grpc.max_receive_message_length", min(max_request_bytes, GRPC_MESSAGE_BYTES)),
                                 ("grpc.so_reuseport", 0)])
    add_servicer(servicer, server)
    if uds is not None:
        where = unix.grpc_path(uds)
        unix.usable(uds, where, "gRPC")  # taken since the check: refused; a dead server's socket: removed
        try:
            with unix.narrowed_umask():
                bound = server.add_insecure_port(f"unix:{where}")
            os.chmod(where, uds_mode)
        except (RuntimeError, OSError):
            bound = 0
        if not bound:
            raise UsageError(f"--uds {uds}: gRPC could not listen on the unix socket {where}; give --uds another "
                             f"path, or start again.")
    else:
        try:
            bound = server.add_insecure_port(ports.address(host, port))
        except RuntimeError:  # "Failed to bind to address": the reason is only in gRPC's log
            bound = 0
        if not bound:
            raise ports.grpc_refusal(host, port)
    await server.start()
    return server
