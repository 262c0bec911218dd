"""``jaxport serve`` answers every wrong request with a 4xx naming the field (HTTP 400 / gRPC ``INVALID_ARGUMENT``,
404 / ``NOT_FOUND`` for an unknown model), and never changes a value: a real server on 127.0.0.1 (ephemeral ports),
queried with raw HTTP, tritonclient and gRPC's stub. After every bad request a canary request still gets the right
answer, and the server's log holds no traceback. Skips without the extra jaxport[serve] or tritonclient."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request

import numpy as np
import pytest

import jaxport
from tests.serve.servers import free_port, serving
from tests.support import REPO

if importlib.util.find_spec("kserve") is None:
    pytest.skip("jaxport serve needs the extra jaxport[serve] (pip install 'jaxport[serve]')", allow_module_level=True)
httpclient = pytest.importorskip("tritonclient.http", reason="the tests' client: pip install 'tritonclient[all]'")
grpcclient = pytest.importorskip("tritonclient.grpc", reason="the tests' client: pip install 'tritonclient[all]'")
grpc = pytest.importorskip("grpc")
from tritonclient.grpc import service_pb2 as pb  # noqa: E402 - the protocol's messages, as the client ships them
from tritonclient.grpc import service_pb2_grpc as pb_grpc  # noqa: E402

pytestmark = pytest.mark.slow

READY_S = 300
SOURCE = "import jax.numpy as jnp\n\n\ndef f(x, n, b):\n    return 2.0 * x, n + 1, jnp.logical_not(b), jnp.log(x)\n"
SPEC = ('jaxport: 1\ndims:\n  batch: {min: 1, max: 8}\nargs:\n  - "f32[batch, 3]"\n  - "i32[batch]"\n'
        '  - "bool[batch]"\noutputs: [y, k, nb, w]\n')
X = np.array([[1.0, 2.0, 0.5], [4.0, 0.25, 3.0]], np.float32)
N = np.array([1, -7], np.int32)
B = np.array([True, False])
INT32 = "INT32 takes integers from -2147483648 to 2147483647."
FP32 = "FP32 takes numbers from -3.40282e+38 to 3.40282e+38."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``jaxport serve m=m.jaxport`` (f(x, n, b) = 2x, n + 1, not b, log x), on buckets batch=1 and 2, the sizes
    the tests call it with."""
    root = tmp_path_factory.mktemp("requests")
    (root / "model.py").write_text(SOURCE)
    (root / "spec.yaml").write_text(SPEC)
    path = jaxport.export(f"{root}/model.py:f", root / "spec.yaml", output=root / "m.jaxport").path
    http, grpc_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(root / "cache")}
    args = [f"m={path}", "--dim", "batch=1,2", "--host", "127.0.0.1", "--http-port", str(http), "--grpc-port",
            str(grpc_port)]
    with open(root / "server.log", "w+") as log, serving(args, http=http, env=env, log=log, ready_s=READY_S):
        loaded = jaxport.load(path)
        yield {"base": f"http://127.0.0.1:{http}", "http": f"127.0.0.1:{http}", "grpc": f"127.0.0.1:{grpc_port}",
               "log": log, "direct": lambda x, n, b: [np.asarray(o) for o in loaded(x, n, b)]}


def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _tensor(name: str, array: np.ndarray, datatype: str) -> dict:
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": array.ravel().tolist()}


def _good(**replace) -> dict:
    inputs = {"x": _tensor("x", X, "FP32"), "n": _tensor("n", N, "INT32"), "b": _tensor("b", B, "BOOL")}
    return {"inputs": [{**inputs[k], **replace.get(k, {})} for k in ("x", "n", "b")]}


def _canary(server) -> None:
    """A good JSON request: its outputs equal the function's, called directly."""
    status, _, body = _post(f"{server['base']}/v2/models/m/infer", json.dumps(
        {**_good(), "outputs": [{"name": n} for n in ("y", "k", "nb")]}).encode())
    assert status == 200, body
    got = {o["name"]: np.asarray(o["data"]).reshape(o["shape"]) for o in json.loads(body)["outputs"]}
    y, k, nb, _ = server["direct"](X, N, B)
    np.testing.assert_array_equal(got["y"], y)
    np.testing.assert_array_equal(got["k"], k)
    np.testing.assert_array_equal(got["nb"], nb)


def _json(value) -> bytes:
    return json.dumps(value).encode()


REST = [
    # the cases of the report: a name that is not a string, an int datatype, parameters that are a list, INT32 data
    # out of range or with a fraction (once truncated to 1)
    (_json(_good(x={"name": 5})), {}, "inputs[0].name is 5; give the input's name, a string."),
    (_json(_good(x={"name": [1]})), {}, "inputs[0].name is a list of 1 item; give the input's name, a string."),
    (_json(_good(x={"name": {"a": 1}})), {}, "inputs[0].name is an object; give the input's name, a string."),
    (_json(_good(x={"datatype": 7})), {},
     "inputs[0].datatype is 7; jaxport serves BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FP16, "
     "FP32, FP64."),
    (_json({**_good(), "parameters": [1]}), {},
     'parameters is a list of 1 item; give an object of parameters ({"NAME": value, ...}).'),
    (_json(_good(n={"data": [2 ** 33, 1]})), {}, f"inputs[1].data[0] is 8589934592, which INT32 cannot hold: {INT32}"),
    (_json(_good(n={"data": [1, 1.5]})), {}, f"inputs[1].data[1] is 1.5, which INT32 cannot hold: {INT32}"),
    # beyond them
    (_json(_good(x={"data": [1.0, True, 0, 0, 0, 0]})), {},
     f"inputs[0].data[1] is true, which FP32 cannot hold: {FP32}"),
    (_json(_good(b={"data": [1, 0]})), {}, "inputs[2].data[0] is 1, which BOOL cannot hold: BOOL takes true or false."),
    (_json(_good(x={"shape": [2, -3]})), {}, "inputs[0].shape[1] is -3; a size is a non-negative integer."),
    (_json(_good(x={"shape": "2,3"})), {}, "inputs[0].shape is '2,3'; give a list of sizes (non-negative integers)."),
    (_json(_good(x={"shape": [2, 4]})), {}, "inputs[0].data has 6 values, but shape [2, 4] takes 8."),
    (_json(_good(x={"shape": [1 << 30, 1 << 30, 1 << 30]})), {},
     "inputs[0].shape is [1073741824, 1073741824, 1073741824]: larger than any array can be."),
    (_json(_good(x={"data": [[1.0, 2.0, 3.0], [4.0, 5.0]]})), {},
     "inputs[0].data[1] is a list of 2 items, where shape [2, 3] takes a list of 3 (axis 1); give the data flat, or "
     "nested as the shape."),
    (_json({"inputs": [*_good()["inputs"], _tensor("x", X, "FP32")]}), {},
     "inputs[3].name: input 'x' is given twice (inputs[0] and inputs[3])."),
    (_json(_good(x={"name": "z" * 10_000})), {},
     f"inputs[0].name: unknown input name '{'z' * 64}...'; the inputs are: x, n, b."),
    (_json({**_good(), "outputs": [{"name": "q"}]}), {}, "outputs[0].name: unknown output name 'q'; the outputs are: "
                                                         "y, k, nb, w."),
    (_json({**_good(), "parameters": {"binary_data_output": 1}}), {},
     "parameters.binary_data_output is 1; it takes true or false."),
    (_json({**_good(), "id": 12}), {}, "id is 12; an id is a string."),
    (_json([_good()]), {}, 'the request is a list of 1 item; give a JSON object: {"inputs": [...]}.'),
    (_json("inputs"), {}, 'the request is \'inputs\'; give a JSON object: {"inputs": [...]}.'),
    (b"inputs=1", {"Content-Type": "application/x-www-form-urlencoded"},
     "the request is not JSON (unexpected character, expected a JSON value: line 1 column 1 (char 0)); send an "
     'inference request\'s JSON, {"inputs": [...]}, then any binary tensors.'),
    (gzip.compress(_json(_good())), {"Content-Encoding": "gzip"},
     "the request's Content-Encoding is 'gzip'; send the body uncompressed."),
    (_json(_good()), {"Inference-Header-Content-Length": "-1"},
     "the Inference-Header-Content-Length header is '-1'; give the JSON's length in bytes, at most the body's "
     f"{len(_json(_good()))}."),
    (_json(_good()), {"Inference-Header-Content-Length": "99999"},
     "the Inference-Header-Content-Length header is '99999'; give the JSON's length in bytes, at most the body's "
     f"{len(_json(_good()))}."),
    (_json(_good()) + b"\0\0", {"Inference-Header-Content-Length": str(len(_json(_good())))},
     "the request has 2 bytes after its JSON that no input's binary_data_size covers; send the JSON, then each "
     "binary tensor, nothing else."),
    (_json(_good(n={"data": None, "parameters": {"binary_data_size": 8}}))[:-3] + b"]}" + N.tobytes()[:4], {},
     None),  # replaced below: a binary_data_size larger than what follows
]


def _binary_request(size: int, extra: bytes = b"") -> tuple[bytes, dict[str, str]]:
    """The good request with input n in binary, its binary_data_size ``size``, followed by n's bytes and ``extra``."""
    request = _good()
    del request["inputs"][1]["data"]
    request["inputs"][1]["parameters"] = {"binary_data_size": size}
    header = _json(request)
    return header + N.tobytes() + extra, {"Inference-Header-Content-Length": str(len(header))}


REST[-1] = (*_binary_request(16),
            "inputs[1].parameters.binary_data_size is 16, but 8 bytes of the request are left after the JSON and the "
            "tensors before it.")
REST.append((*_binary_request(4), "inputs[1].parameters.binary_data_size: 4 bytes of data for shape [2] of INT32, "
                                  "which takes 8."))
REST.append((*_binary_request(-8), "inputs[1].parameters.binary_data_size is -8; it takes a non-negative integer."))


@pytest.mark.parametrize(("body", "headers", "message"), REST)
def test_a_wrong_rest_request_is_400_naming_the_field(server, body, headers, message):
    status, _, reply = _post(f"{server['base']}/v2/models/m/infer", body, headers)
    assert (status, json.loads(reply)) == (400, {"error": message})
    _canary(server)


def test_the_artifacts_checks_still_answer_400(server):
    """A request whose fields decode is checked by the artifact, as a call is: a dtype that is not the input's."""
    status, _, reply = _post(f"{server['base']}/v2/models/m/infer", _json(_good(x={"datatype": "FP64"})))
    assert status == 400 and json.loads(reply)["error"].startswith("input 'x'"), reply
    _canary(server)


def test_the_content_type_is_not_consulted(server):
    """The body is judged, not its Content-Type (curl's -d sends application/x-www-form-urlencoded)."""
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/octet-stream"):
        status, _, reply = _post(f"{server['base']}/v2/models/m/infer", _json(_good()), {"Content-Type": content_type})
        assert status == 200 and [o["name"] for o in json.loads(reply)["outputs"]] == ["y", "k", "nb", "w"]


def test_a_long_model_name_is_echoed_shortened(server):
    """A 10 KB model name comes back shortened: over gRPC the message goes in the metadata, 8 KiB at most."""
    status, _, reply = _post(f"{server['base']}/v2/models/{'m' * 10_000}/infer", _json(_good()))
    assert (status, json.loads(reply)) == (404, {"error": f"Model with name {'m' * 64}... does not exist."})
    status, _, reply = _post(f"{server['base']}/v2/models/m/versions/{'9' * 10_000}/infer", _json(_good()))
    assert (status, json.loads(reply)) == (404, {"error": f"Model with name m version {'9' * 64}... does not exist."})
    with grpc.insecure_channel(server["grpc"]) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        for method, request, shown in (
                (stub.ModelInfer, pb.ModelInferRequest(model_name="m" * 10_000), f"{'m' * 64}..."),
                (stub.ModelMetadata, pb.ModelMetadataRequest(name="m" * 10_000), f"{'m' * 64}..."),
                (stub.ModelReady, pb.ModelReadyRequest(name="m", version="9" * 10_000), f"m version {'9' * 64}...")):
            with pytest.raises(grpc.RpcError) as e:
                method(request, timeout=60)
            assert (e.value.code(), e.value.details()) == (grpc.StatusCode.NOT_FOUND,
                                                           f"Model with name {shown} does not exist.")
    _canary(server)


REPOSITORY = ("jaxport serve does not load or unload models through the protocol's repository extension: the "
              "artifacts served are those of its command line, each ready until the server stops.")


def test_no_client_unloads_a_model_and_kserve_s_v1_routes_are_not_served(server):
    """kserve's repository extension let any client unload a model for good (its readiness false, a load failing)
    and its v1 ``:explain`` failed with a traceback in the log: both are a 404 over REST and ``UNIMPLEMENTED`` over
    gRPC, and the model stays ready."""
    for path in ("/v2/repository/models/m/unload", "/v2/repository/models/m/load", "/v2/repository/index",
                 "/v2/repository/models/nosuch/load"):
        status, _, reply = _post(f"{server['base']}{path}", b"{}")
        assert (status, json.loads(reply)) == (404, {"error": REPOSITORY}), path
    for path in ("/v1/models/m:explain", "/v1/models/m:predict"):
        status, _, reply = _post(f"{server['base']}{path}", b"{}")
        assert (status, json.loads(reply)) == (404, {"error": f"jaxport serves the Open Inference Protocol v2, not "
                                                              f"kserve's v1 ({path}): POST /v2/models/NAME/infer."})
    with grpc.insecure_channel(server["grpc"]) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        for method, request in ((stub.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(model_name="m")),
                                (stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name="m")),
                                (stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name="nosuch"))):
            with pytest.raises(grpc.RpcError) as e:
                method(request, timeout=60)
            assert (e.value.code(), e.value.details()) == (grpc.StatusCode.UNIMPLEMENTED, REPOSITORY)
        assert stub.ModelReady(pb.ModelReadyRequest(name="m"), timeout=60).ready
    with urllib.request.urlopen(f"{server['base']}/v2/models/m/ready", timeout=60) as r:
        assert json.loads(r.read()) == {"name": "m", "ready": True}
    _canary(server)


def test_nan_and_infinities_asked_for_as_json_come_as_json_strings(server):
    """log(x) of 0 and -1 is -inf and NaN, which JSON has no number for: a JSON response carries them as the strings
    "-Infinity" and "NaN" (the body stays JSON, which tritonclient and curl read), and a JSON request sends them so."""
    x = np.array([[0.0, -1.0, 1.0]], np.float32)
    n, b = np.array([3], np.int32), np.array([False])
    client = httpclient.InferenceServerClient(url=server["http"])
    inputs = []
    for name, value, datatype in (("x", x, "FP32"), ("n", n, "INT32"), ("b", b, "BOOL")):
        inp = httpclient.InferInput(name, list(value.shape), datatype)
        inp.set_data_from_numpy(value, binary_data=False)
        inputs.append(inp)
    result = client.infer("m", inputs, outputs=[httpclient.InferRequestedOutput(o, binary_data=False)
                                                for o in ("w", "k")])
    y, k, nb, w = server["direct"](x, n, b)
    np.testing.assert_array_equal(result.as_numpy("w"), w)
    assert np.isneginf(result.as_numpy("w")[0, 0]) and np.isnan(result.as_numpy("w")[0, 1])
    np.testing.assert_array_equal(result.as_numpy("k"), k)
    assert [(o["name"], o.get("parameters"), o.get("data")) for o in result.get_response()["outputs"]] == [
        ("w", None, ["-Infinity", "NaN", 0.0]), ("k", None, [4])]
    request = {"inputs": [{**_tensor("x", x, "FP32"), "data": ["NaN", "Infinity", 1.0]}, _tensor("n", n, "INT32"),
                          _tensor("b", b, "BOOL")], "outputs": [{"name": "y"}]}
    status, headers, body = _post(f"{server['base']}/v2/models/m/infer", _json(request))
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body)["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [1, 3],
                                            "data": ["NaN", "Infinity", 2.0]}]
    if shutil.which("curl") is not None:  # the command line a user types
        res = subprocess.run(["curl", "-s", "-w", "\\n%{content_type}", "-H", "Content-Type: application/json",
                              "-d", json.dumps(request), f"{server['base']}/v2/models/m/infer"],
                             capture_output=True, text=True, timeout=60)
        text, content_type = res.stdout.rsplit("\n", 1)
        assert content_type == "application/json"
        assert json.loads(text)["outputs"][0]["data"] == ["NaN", "Infinity", 2.0]
    _canary(server)


def _grpc_tensor(name: str, array: np.ndarray, datatype: str, **contents):
    return pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype, shape=list(array.shape),
                                                 contents=pb.InferTensorContents(**contents) if contents else None)


def _grpc_good(**replace):
    tensors = {"x": _grpc_tensor("x", X, "FP32", fp32_contents=X.ravel().tolist()),
               "n": _grpc_tensor("n", N, "INT32", int_contents=N.tolist()),
               "b": _grpc_tensor("b", B, "BOOL", bool_contents=B.tolist())}
    tensors.update(replace)
    return [tensors[k] for k in ("x", "n", "b")]


GRPC = [
    (dict(inputs=_grpc_good(x=_grpc_tensor("x", X, "BF16"))),
     "inputs[0].datatype is 'BF16'; jaxport serves BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, "
     "FP16, FP32, FP64."),
    (dict(inputs=_grpc_good(n=_grpc_tensor("n", N, "INT32", fp32_contents=[1.0, 2.0]))),
     "inputs[1].contents: INT32 data goes in contents.int_contents, not contents.fp32_contents."),
    (dict(inputs=_grpc_good(x=_grpc_tensor("x", X, "FP16", fp32_contents=X.ravel().tolist()))),
     "inputs[0].contents: FP16 has no typed contents: send its bytes in raw_input_contents, not "
     "contents.fp32_contents."),
    (dict(inputs=_grpc_good(n=_grpc_tensor("n", N, "INT8", int_contents=[300, 1]))),
     "inputs[1].contents.int_contents[0] is 300, which INT8 cannot hold: INT8 takes integers from -128 to 127."),
    (dict(inputs=_grpc_good(n=pb.ModelInferRequest.InferInputTensor(
        name="n", datatype="INT32", shape=[-2], contents=pb.InferTensorContents(int_contents=[1, 2])))),
     "inputs[1].shape[0] is -2; a size is a non-negative integer."),
    (dict(inputs=_grpc_good(n=_grpc_tensor("n", N, "INT32", int_contents=[1]))),
     "inputs[1].contents.int_contents has 1 value, but shape [2] takes 2."),
    (dict(inputs=[*_grpc_good(), _grpc_tensor("b", B, "BOOL", bool_contents=B.tolist())]),
     "inputs[3].name: input 'b' is given twice (inputs[2] and inputs[3])."),
    (dict(inputs=_grpc_good(b=_grpc_tensor("b" * 10_000, B, "BOOL", bool_contents=B.tolist()))),
     f"inputs[2].name: unknown input name '{'b' * 64}...'; the inputs are: x, n, b."),
    (dict(inputs=_grpc_good(), outputs=[pb.ModelInferRequest.InferRequestedOutputTensor(name="q")]),
     "outputs[0].name: unknown output name 'q'; the outputs are: y, k, nb, w."),
    (dict(inputs=_grpc_good(), outputs=[pb.ModelInferRequest.InferRequestedOutputTensor(
        name="y", parameters={"classification": pb.InferParameter(int64_param=2)})]),
     "outputs[0].parameters.classification: jaxport does not serve the classification extension; ask for the "
     "output itself."),
    (dict(inputs=[pb.ModelInferRequest.InferInputTensor(name=n, datatype=d, shape=list(a.shape))
                  for n, a, d in (("x", X, "FP32"), ("n", N, "INT32"), ("b", B, "BOOL"))],
          raw_input_contents=[X.tobytes(), N.tobytes()[:4], B.tobytes()]),
     "raw_input_contents[1]: 4 bytes of data for shape [2] of INT32, which takes 8."),
    (dict(inputs=[pb.ModelInferRequest.InferInputTensor(name=n, datatype=d, shape=list(a.shape))
                  for n, a, d in (("x", X, "FP32"), ("n", N, "INT32"), ("b", B, "BOOL"))],
          raw_input_contents=[X.tobytes(), N.tobytes(), b"\x01\x07"]),
     "raw_input_contents[2]: byte 1 is 7; a BOOL is one byte, 0 or 1."),
]


@pytest.mark.parametrize(("fields", "message"), GRPC)
def test_a_wrong_grpc_request_is_invalid_argument_naming_the_field(server, fields, message):
    with grpc.insecure_channel(server["grpc"]) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(pb.ModelInferRequest(model_name="m", **fields), timeout=60)
        assert (e.value.code(), e.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
        reply = stub.ModelInfer(pb.ModelInferRequest(model_name="m", inputs=_grpc_good()), timeout=60)
    y = np.frombuffer(reply.raw_output_contents[0], np.float32).reshape(list(reply.outputs[0].shape))
    np.testing.assert_array_equal(y, server["direct"](X, N, B)[0])
    _canary(server)


def test_grpc_answers_the_outputs_asked_for(server):
    """Only the outputs asked for, in their order; every value as the function gives it (NaN included)."""
    x = np.array([[0.0, -1.0, 2.0]], np.float32)
    with grpc.insecure_channel(server["grpc"]) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        asked = [pb.ModelInferRequest.InferRequestedOutputTensor(name=n) for n in ("w", "nb")]
        reply = stub.ModelInfer(pb.ModelInferRequest(model_name="m", outputs=asked, inputs=_grpc_good(
            x=_grpc_tensor("x", x, "FP32", fp32_contents=x.ravel().tolist()),
            n=_grpc_tensor("n", N[:1], "INT32", int_contents=[5]),
            b=_grpc_tensor("b", B[:1], "BOOL", bool_contents=[True]))), timeout=60)
    assert [(o.name, o.datatype, list(o.shape)) for o in reply.outputs] == [("w", "FP32", [1, 3]),
                                                                             ("nb", "BOOL", [1])]
    _, _, nb, w = server["direct"](x, np.array([5], np.int32), np.array([True]))
    np.testing.assert_array_equal(np.frombuffer(reply.raw_output_contents[0], np.float32).reshape(1, 3), w)
    np.testing.assert_array_equal(np.frombuffer(reply.raw_output_contents[1], np.bool_), nb)


#: What an attacker puts in a field instead of what belongs there.
ODD = [None, True, False, 0, -1, 2 ** 64, 1.5, -1e308, "", "x" * 5000, [], [[]], [None], [True], {}, {"a": [1]}]


def _paths(value, path=()):
    """Every path into a JSON value (keys and indices), the value's own first."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for k, v in enumerate(value[:2]):
            yield from _paths(v, (*path, k))


def _replaced(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def test_every_field_replaced_by_an_odd_value_is_a_4xx_or_an_answer(server):
    """A generated corpus: each field of a good request (with outputs and parameters asked for), and each of its first
    values, replaced by each of ``ODD``: a 400 with one message, or (where the value is one the field takes) a 200;
    never a 500. The canary still gets the right answer after them."""
    good = {**_good(), "id": "r", "parameters": {"binary_data_output": False},
            "outputs": [{"name": "y", "parameters": {"binary_data": False}}]}
    good["inputs"][1]["parameters"] = {"note": "n"}
    seen = {}
    for path in _paths(good):
        for new in ODD:
            status, _, reply = _post(f"{server['base']}/v2/models/m/infer", _json(_replaced(good, path, new)))
            assert status in (200, 400), (path, new, status, reply[:300])
            if status == 400:
                (message,) = json.loads(reply).values()
                assert "\n" not in message and len(message) < 400, (path, new, message)
            seen[status] = seen.get(status, 0) + 1
    assert seen[400] > 300 and seen.get(200, 0) > 10, seen
    _canary(server)


#: Values for each of gRPC's typed contents fields: in range for INT32 but not INT8, and such.
CONTENTS = {"bool_contents": [True, False], "int_contents": [300, -1], "int64_contents": [2 ** 40, 1],
            "uint_contents": [70000, 1], "uint64_contents": [2 ** 63, 1], "fp32_contents": [1.5, float("nan")],
            "fp64_contents": [1e300, 2.0], "bytes_contents": [b"ab", b""]}


def test_every_grpc_tensor_of_any_datatype_shape_and_contents_is_invalid_argument_or_an_answer(server):
    """A generated corpus over gRPC: input n given each datatype, each contents field, each odd shape: answered or
    ``INVALID_ARGUMENT`` with one message naming an ``inputs[1]`` field; never another status."""
    codes: dict[object, int] = {}
    with grpc.insecure_channel(server["grpc"]) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        for datatype in ("INT32", "", "int32", "BYTES", "BF16", "INT8", "UINT64", "FP16", "BOOL", "FP64"):
            for field, values in CONTENTS.items():
                for shape in ([2], [], [-1], [0], [1, 2], [1 << 62, 1 << 62], [1] * 65):
                    n = pb.ModelInferRequest.InferInputTensor(name="n", datatype=datatype, shape=shape,
                                                              contents=pb.InferTensorContents(**{field: values}))
                    try:
                        stub.ModelInfer(pb.ModelInferRequest(model_name="m", inputs=_grpc_good(n=n)), timeout=60)
                        codes["OK"] = codes.get("OK", 0) + 1
                    except grpc.RpcError as e:
                        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (datatype, field, shape, e.details())
                        assert e.details().startswith(("inputs[1]", "input 'n'")), (datatype, field, e.details())
                        codes[e.code()] = codes.get(e.code(), 0) + 1
    assert codes == {"OK": 1, grpc.StatusCode.INVALID_ARGUMENT: 10 * 8 * 7 - 1}, codes
    _canary(server)


def test_no_traceback_in_the_log(server):
    """Every request above was answered without one (runs last in this module)."""
    _canary(server)
    server["log"].flush()
    server["log"].seek(0)
    log = server["log"].read()
    assert "Traceback" not in log and " 500 " not in log, log[-4000:]


def test_a_request_over_max_request_mb_is_413_or_resource_exhausted(tmp_path):
    """--max-request-mb bounds what a request may make the server read (and so the memory decoding takes): a REST
    body declaring more is refused from its Content-Length, a chunked one as soon as it passes the limit, a gRPC
    message by gRPC itself; the server then answers a good request."""
    import http.client

    (tmp_path / "model.py").write_text(SOURCE)
    (tmp_path / "spec.yaml").write_text(SPEC)
    path = jaxport.export(f"{tmp_path}/model.py:f", tmp_path / "spec.yaml", output=tmp_path / "m.jaxport").path
    http_port, grpc_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(tmp_path / "cache")}
    args = [f"m={path}", "--dim", "batch=1,2", "--http-port", str(http_port), "--grpc-port", str(grpc_port),
            "--max-request-mb", "1"]
    limit = 1 << 20
    with open(tmp_path / "server.log", "w+") as log, serving(args, http=http_port, env=env, log=log,
                                                             ready_s=READY_S):
        base = f"http://127.0.0.1:{http_port}"
        big = _json({**_good(), "id": "x" * (limit + 10)})
        status, _, reply = _post(f"{base}/v2/models/m/infer", big)
        assert (status, json.loads(reply)) == (413, {"error": (
            f"the request is {len(big)} bytes, more than this server reads ({limit} bytes, --max-request-mb); send "
            f"fewer rows per request (or in binary), or start the server with a larger --max-request-mb.")})
        connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=60)
        connection.putrequest("POST", "/v2/models/m/infer")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.putheader("Content-Type", "application/json")
        connection.endheaders()
        for start in range(0, len(big), 1 << 16):
            piece = big[start:start + (1 << 16)]
            try:
                connection.send(b"%x\r\n%s\r\n" % (len(piece), piece))
            except (BrokenPipeError, ConnectionResetError):  # the server answered and closed: the rest unsent
                break
        else:
            connection.send(b"0\r\n\r\n")
        response = connection.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["error"].startswith(f"the request is over {limit} bytes, more than this "
                                                               f"server reads")
        connection.close()
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}", options=[
                ("grpc.max_send_message_length", 4 << 20)]) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelInfer(pb.ModelInferRequest(model_name="m", id="x" * (limit + 10)), timeout=60)
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        _canary({"base": base, "direct": lambda x, n, b: [np.asarray(o) for o in jaxport.load(path)(x, n, b)]})
