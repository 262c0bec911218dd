"""kserve and the web stack it serves on (fastapi, uvicorn, gRPC, orjson), imported here once, for every module of
``jaxport serve``'s kserve transport (``kserve_server``, ``rest``, ``grpc_service``, ``lifecycle``), which import
their names from here.

kserve's ``model_server`` parses the process's command line when it is imported (its own flags: it would read
``jaxport serve``'s): it is imported with an empty one, whichever of those modules comes first. Needs the optional
extra ``jaxport[serve]``.
"""

from __future__ import annotations

import sys

_argv, sys.argv = sys.argv, sys.argv[:1]  # kserve.model_server parses sys.argv when imported
try:
    import grpc
    import orjson
    import uvicorn
    from fastapi import Request
    from fastapi.responses import Response
    from google.protobuf.message import DecodeError
    from grpc import aio
    from grpc_interceptor.exceptions import Unimplemented
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
    from starlette.requests import ClientDisconnect
finally:
    sys.argv = _argv

__all__ = ["FASTAPI_APP_IMPORT_STRING", "INFERENCE_CONTENT_LENGTH_HEADER", "PREDICT_HIST_TIME", "RESTServer",
           "ClientDisconnect", "DecodeError", "ExceptionToStatusInterceptor", "InferInput", "InferOutput",
           "InferRequest", "InferResponse", "InferenceError", "InferenceServicer", "InvalidInput", "LoggingInterceptor",
           "Model", "ModelNotFound", "ModelServer", "Request", "RequestedOutput", "Response", "Unimplemented", "aio",
           "app", "get_content", "get_labels", "grpc", "grpc_predict_v2_pb2_grpc", "orjson", "pb", "uvicorn"]
