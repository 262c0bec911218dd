"""The REST half of ``jaxport serve``'s kserve transport: inference requests decoded and responses encoded here,
and the routes answered here, ahead of kserve's own (``add_routes``).

Where kserve 0.21 falls short over REST:

- its decoder trusts the request: an input ``name`` that is a number, ``parameters`` that are a list, a value its
  datatype cannot hold are a 500 (or, for INT32 data of ``1.5``, silently ``1``), and its binary decoder turns every
  element into a Python object. Requests are decoded here, every field checked and every value kept exactly
  (``oip.read_request``), the binary tensors straight from the bytes: each error is a 400 naming the field;
- its JSON responses write NaN and infinities as ``null``: responses are encoded here (``oip.response``), with
  them as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, so that a JSON request gets a JSON body;
- it answers every versioned route (``/v2/models/NAME/versions/N/...``) with "not supported": versions are routed
  here (``registry.Registry``), the unversioned routes serving the highest version;
- its metadata drops ``versions`` and ``parameters``: REST metadata is answered here;
- it answers kserve's v1 routes (a v1 ``:explain`` fails with a traceback in the log) and the repository extension,
  which lets any client unload a model for good: both are answered here with a 404 saying what jaxport serves.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import InputError
from . import oip
from .kserve_imports import (
    INFERENCE_CONTENT_LENGTH_HEADER,
    ClientDisconnect,
    InvalidInput,
    Request,
    Response,
    app,
    orjson,
)

if TYPE_CHECKING:
    from .registry import JaxportModel, Registry


def _json_length(headers: Mapping[str, str], body: bytes) -> int:
    """How many bytes of ``body`` are the JSON: the ``Inference-Header-Content-Length`` header's (digits only, within
    the body), else all of them."""
    length = headers.get(INFERENCE_CONTENT_LENGTH_HEADER.lower())
    if length is None:
        return len(body)
    if not (length.isascii() and length.isdigit() and len(length) <= 20) or int(length) > len(body):
        raise InvalidInput(f"the Inference-Header-Content-Length header is {oip.shown(length)}; give the JSON's "
                           f"length in bytes, at most the body's {len(body)}.")
    return int(length)


def rest_request(body: bytes, headers: Mapping[str, str], model: JaxportModel) -> oip.Inference:
    """An inference request from a REST body (``headers``: lower-case names): JSON, or JSON followed by binary tensors
    (the binary tensor extension), for ``model``. kserve's ``InvalidInput`` (400) naming what is wrong."""
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        raise InvalidInput(f"the request's Content-Encoding is {oip.shown(encoding)}; send the body uncompressed.")
    length = _json_length(headers, body)
    try:
        header = orjson.loads(body[:length])
    except orjson.JSONDecodeError as e:
        raise InvalidInput(f"the request is not JSON ({e}); send an inference request's JSON, "
                           f'{{"inputs": [...]}}, then any binary tensors.') from None
    try:
        return oip.read_request(header, body, length, [t.name for t in model.inputs], [t.name for t in model.outputs])
    except InputError as e:
        raise InvalidInput(str(e)) from None


def _json(body: Any) -> Any:
    return Response(content=orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json")


def _json_error(status: int, message: str) -> Any:
    return Response(content=orjson.dumps({"error": message}), status_code=status, media_type="application/json")


def rest_response(model: JaxportModel, request: oip.Inference, outputs: Mapping[str, Any]) -> Any:
    """The REST response of ``request``'s ``outputs``: JSON, or JSON followed by the outputs sent in binary."""
    rid = request.id if request.id is not None else str(uuid.uuid4())  # an id given is echoed, "" too
    body, raw = oip.response(model.name, model.version, rid, model.outputs, outputs,
                             request.outputs, request.binary)
    if not raw:
        return _json(body)
    header = orjson.dumps(body)
    return Response(content=b"".join([header, *raw]), media_type="application/octet-stream",
                    headers={INFERENCE_CONTENT_LENGTH_HEADER: str(len(header))})


def add_routes(registry: Registry, max_request_bytes: int) -> None:
    """The REST routes this adapter answers itself, added ahead of kserve's own (see the module docstring); a body
    over ``max_request_bytes`` is a 413, refused before it is read whole."""

    def too_large(size: int | str) -> Any:
        return _json_error(413, f"the request is {size} bytes, more than this server reads ({max_request_bytes} "
                                f"bytes, --max-request-mb); send fewer rows per request (or in binary), or start the "
                                f"server with a larger --max-request-mb.")

    async def metadata(model_name: str, model_version: str | None = None) -> Any:
        model = registry.get(model_name, model_version)
        return _json(model.metadata(registry.versions(model_name)))

    async def ready(model_name: str, model_version: str | None = None) -> Any:
        model = registry.get(model_name, model_version)
        return _json({"name": model.name, "ready": bool(model.ready)})

    async def infer(request: Request, model_name: str, model_version: str | None = None) -> Any:
        model = registry.get(model_name, model_version)
        with model.batcher.arrival():  # the batcher waits for a request being read, up to its window
            headers = {k.lower(): v for k, v in request.headers.items()}
            declared = headers.get("content-length", "")
            if declared.isascii() and declared.isdigit() and int(declared) > max_request_bytes:
                return too_large(declared)
            try:
                chunks, size = [], 0
                async for chunk in request.stream():  # chunked bodies declare no length: counted as they come
                    size += len(chunk)
                    if size > max_request_bytes:
                        return too_large(f"over {max_request_bytes}")
                    chunks.append(chunk)
                body = b"".join(chunks)
            except ClientDisconnect:  # no traceback in the log: a 400 (that no one reads) and the next request
                raise InvalidInput("the client closed the connection before the request's body ended (its "
                                   "Content-Length or a chunk's size is past the bytes sent); nothing was "
                                   "run.") from None
            inference = rest_request(body, headers, model)
            outputs = await model.outputs_of(inference.inputs)
        return rest_response(model, inference, outputs)

    async def v1(rest: str) -> Any:
        return _json_error(404, f"jaxport serves the Open Inference Protocol v2, not kserve's v1 "
                                f"(/v1/{oip.shorten(rest)}): POST /v2/models/NAME/infer.")

    async def repository(rest: str) -> Any:
        return _json_error(404, oip.REPOSITORY)

    prefix = "/v2/models/{model_name}"
    any_method = "GET POST PUT PATCH DELETE"
    routes = [(prefix, metadata, "GET"), (prefix + "/versions/{model_version}", metadata, "GET"),
              (prefix + "/ready", ready, "GET"), (prefix + "/versions/{model_version}/ready", ready, "GET"),
              (prefix + "/infer", infer, "POST"), (prefix + "/versions/{model_version}/infer", infer, "POST"),
              ("/v1/{rest:path}", v1, any_method), ("/v2/repository/{rest:path}", repository, any_method)]
    for path, endpoint, methods in routes:
        app.add_api_route(path, endpoint, methods=methods.split(), include_in_schema=False)
    # Routes match in order: move these ahead of any kserve registered before.
    added = app.router.routes[-len(routes):]
    del app.router.routes[-len(routes):]
    app.router.routes[0:0] = added
