"""The REST half of ``jaxport serve``'s kserve transport: inference requests decoded here, and the routes answered
here, ahead of kserve's own (``add_routes``).

Where kserve 0.21 falls short over REST:

- its binary REST decoder turns every element into a Python object (``InferRequest.from_bytes`` calls
  ``set_data_from_numpy(..., binary_data=False)``): REST inference requests are decoded here, the binary tensors
  straight from the bytes (:func:`rest_request`);
- it answers every versioned route (``/v2/models/NAME/versions/N/...``) with "not supported": versions are routed
  here (``kserve_server.Registry``), the unversioned routes serving the highest version;
- its metadata drops ``versions`` and ``parameters``: REST metadata is answered here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import InputError
from . import oip
from .kserve_imports import (
    INFERENCE_CONTENT_LENGTH_HEADER,
    InferInput,
    InferRequest,
    InvalidInput,
    Request,
    RequestedOutput,
    Response,
    app,
    orjson,
)

if TYPE_CHECKING:
    from .kserve_server import Registry


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
