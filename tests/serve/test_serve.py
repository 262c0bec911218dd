"""``jaxport serve``: a real server on 127.0.0.1 (ephemeral ports), queried with tritonclient (HTTP binary and JSON,
gRPC) and plain HTTP. Skips when the extra jaxport[serve] or tritonclient is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest

import jaxport
from tests.serve.servers import free_port, serving
from tests.support import EXAMPLES, REPO

# The server runs in its own process: kserve's protocol classes and tritonclient's share names, and one process
# cannot import both.
if importlib.util.find_spec("kserve") is None:
    pytest.skip("jaxport serve needs the extra jaxport[serve] (pip install 'jaxport[serve]')", allow_module_level=True)
httpclient = pytest.importorskip("tritonclient.http", reason="the tests' client: pip install 'tritonclient[all]'")
grpcclient = pytest.importorskip("tritonclient.grpc", reason="the tests' client: pip install 'tritonclient[all]'")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.slow

#: The most seconds the server may take to load, compile every bucket and report ready.
READY_S = 300
TWICE = "def f(x):\n    return 2.0 * x + 1.0\n"
CENTERED = "def f(x):\n    return x - x.mean(axis=0)\n"
SPEC3 = "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - \"f32[batch, 3]\"\n"


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``jaxport serve`` of three artifacts: the MLP (version 1), 2x+1 as its version 2, and a function that mixes
    rows (x - mean over axis 0, sized by n) on buckets n=2 and 4; batching window 50 ms."""
    root = tmp_path_factory.mktemp("serve")
    mlp = jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml",
                         output=root / "mlp.jaxport").path
    paths = {"mlp": mlp}
    for name, src, spec in (("twice", TWICE, SPEC3.replace("3]", "784]")),
                            ("centered", CENTERED, SPEC3.replace("batch", "n"))):
        d = root / name
        d.mkdir()
        (d / "model.py").write_text(src)
        (d / "spec.yaml").write_text(spec)
        paths[name] = jaxport.export(f"{d}/model.py:f", d / "spec.yaml", output=root / f"{name}.jaxport").path
    http, grpc = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(root / "cache")}
    args = [f"mlp@1={mlp}", f"mlp@2={paths['twice']}", str(paths["centered"]), "--dim", "batch=1,8,32", "--dim",
            "n=2,4", "--host", "127.0.0.1", "--http-port", str(http), "--grpc-port", str(grpc), "--batch-window-ms",
            "50"]
    with open(root / "server.log", "w+") as log, serving(args, http=http, env=env, log=log, ready_s=READY_S):
        yield {"base": f"http://127.0.0.1:{http}", "http": f"127.0.0.1:{http}", "grpc": f"127.0.0.1:{grpc}",
               "paths": paths, "log": log}


def _x(rows: int, seed: int = 0, cols: int = 784) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32)


@pytest.fixture(scope="module")
def direct(server):
    mlp, twice = jaxport.load(server["paths"]["mlp"]), jaxport.load(server["paths"]["twice"])
    return {"1": lambda x: np.asarray(mlp(x)), "2": lambda x: np.asarray(twice(x))}


def _metrics(server) -> str:
    status, body = _get(f"{server['base']}/metrics")
    assert status == 200
    return body.decode()


def _metric(text: str, name: str, **labels: str) -> float:
    shown = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}{{{shown}}} in /metrics")


def test_outputs_equal_a_direct_call_over_every_client(server, direct):
    """HTTP binary, HTTP JSON and gRPC (tritonclient), and plain JSON over urllib, at sizes that pad (3, 20), fit
    (8), and split over the largest bucket (50 = 32 + 18): each equals the function called directly."""
    http = httpclient.InferenceServerClient(url=server["http"])
    grpc = grpcclient.InferenceServerClient(url=server["grpc"])
    for rows in (1, 3, 8, 20, 50):
        x = _x(rows, rows)
        expected = direct["1"](x)
        for binary in (True, False):
            inp = httpclient.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=binary)
            res = http.infer("mlp", [inp], model_version="1",
                             outputs=[httpclient.InferRequestedOutput("output", binary_data=binary)])
            np.testing.assert_allclose(res.as_numpy("output"), expected, rtol=1e-5, atol=1e-6)
        inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        res = grpc.infer("mlp", [inp], model_version="1")
        np.testing.assert_allclose(res.as_numpy("output"), expected, rtol=1e-5, atol=1e-6)
    x = _x(2, 7)
    status, body = _post(f"{server['base']}/v2/models/mlp/versions/1/infer",
                         {"inputs": [{"name": "x", "shape": [2, 784], "datatype": "FP32", "data": x.ravel().tolist()}]})
    assert status == 200, body
    (out,) = body["outputs"]
    assert (out["name"], out["shape"], out["datatype"]) == ("output", [2, 10], "FP32")
    np.testing.assert_allclose(np.asarray(out["data"], np.float32).reshape(2, 10), direct["1"](x), rtol=1e-5,
                               atol=1e-6)


def test_versions_route_to_their_artifacts(server, direct):
    """/v2/models/mlp/versions/N and gRPC's model_version reach version N; the plain name serves the highest."""
    x = _x(3, 1)
    http = httpclient.InferenceServerClient(url=server["http"])
    grpc = grpcclient.InferenceServerClient(url=server["grpc"])
    for version in ("1", "2"):
        inp = httpclient.InferInput("x", [3, 784], "FP32")
        inp.set_data_from_numpy(x)
        got = http.infer("mlp", [inp], model_version=version).as_numpy("output")
        np.testing.assert_allclose(got, direct[version](x), rtol=1e-5, atol=1e-6)
        ginp = grpcclient.InferInput("x", [3, 784], "FP32")
        ginp.set_data_from_numpy(x)
        got = grpc.infer("mlp", [ginp], model_version=version).as_numpy("output")
        np.testing.assert_allclose(got, direct[version](x), rtol=1e-5, atol=1e-6)
        status, body = _get(f"{server['base']}/v2/models/mlp/versions/{version}/ready")
        assert (status, json.loads(body)) == (200, {"name": "mlp", "ready": True})
    inp = httpclient.InferInput("x", [3, 784], "FP32")
    inp.set_data_from_numpy(x)
    np.testing.assert_allclose(http.infer("mlp", [inp]).as_numpy("output"), direct["2"](x), rtol=1e-6)
    status, body = _get(f"{server['base']}/v2/models/mlp/versions/3")
    assert status == 404 and b"mlp version 3" in body


def test_metadata_matches_the_manifest(server):
    f = jaxport.open_artifact(server["paths"]["mlp"]).model.functions["predict"]
    status, body = _get(f"{server['base']}/v2/models/mlp/versions/1")
    assert status == 200
    meta = json.loads(body)
    assert meta["name"] == "mlp" and meta["versions"] == ["1", "2"] and meta["platform"] == "jaxport"
    assert meta["inputs"] == [{"name": i.name, "datatype": "FP32", "shape": [-1, 784],
                               "parameters": {"shape": list(i.shape)}} for i in f.inputs]
    assert meta["outputs"] == [{"name": "output", "datatype": "FP32", "shape": [-1, 10],
                                "parameters": {"shape": ["batch", 10]}}]
    p = meta["parameters"]
    assert (p["function"], p["dims"], p["constraints"]) == ("predict", {"batch": {"min": 1, "max": 4096}}, [])
    assert (p["buckets"], p["batch"], p["max_rows"]) == ([{"batch": 1}, {"batch": 8}, {"batch": 32}], "batch", 32)
    assert (p["sizes"], p["planned"], p["strict"]) == ({"batch": [1, 8, 32]}, 3, False)
    assert p["padding"]["batch"] == {"allowed": True, "fill": "edge", "inputs": {"x": [0]},
                                     "outputs": {"output": [0]}, "split": {"allowed": True}}
    grpc = grpcclient.InferenceServerClient(url=server["grpc"])
    gmeta = grpc.get_model_metadata("mlp", "1", as_json=True)
    assert gmeta["versions"] == ["1", "2"]
    assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in gmeta["inputs"]] == [
        ("x", "FP32", [-1, 784])]
    status, body = _get(f"{server['base']}/v2/models")
    assert sorted(json.loads(body)["models"]) == ["centered", "mlp"]


def test_bad_input_is_400_with_the_artifacts_message(server):
    x = np.zeros((2, 3), np.float32)
    status, body = _post(f"{server['base']}/v2/models/mlp/infer",
                         {"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": x.ravel().tolist()}]})
    assert (status, body) == (400, {"error": "input 'x': shape[1] = 3, but the artifact expects 784 "
                                             "(f32[batch, 784])."})
    status, body = _post(f"{server['base']}/v2/models/mlp/infer",
                         {"inputs": [{"name": "y", "shape": [1, 784], "datatype": "FP32", "data": [0.0] * 784}]})
    assert (status, body) == (400, {"error": "inputs[0].name: unknown input name 'y'; the inputs are: x."})
    status, body = _post(f"{server['base']}/v2/models/mlp/infer",
                         {"inputs": [{"name": "x", "shape": [1, 784], "datatype": "FP32", "data": [0.0] * 5}]})
    assert (status, body) == (400, {"error": "inputs[0].data has 5 values, but shape [1, 784] takes 784."})
    # a function that mixes rows, on buckets n=2 and 4: n=3 may not be padded to 4, so it runs on a bucket of its
    # own, compiled on its first use (once), and counted
    for rows in (4, 3, 3):
        xn = _x(rows, 3, cols=3)
        status, body = _post(f"{server['base']}/v2/models/centered/infer",
                             {"inputs": [{"name": "x", "shape": [rows, 3], "datatype": "FP32",
                                          "data": xn.ravel().tolist()}]})
        assert status == 200, body
        np.testing.assert_allclose(np.asarray(body["outputs"][0]["data"]).reshape(rows, 3), xn - xn.mean(axis=0),
                                   rtol=1e-5, atol=1e-6)
    metrics = _metrics(server)
    assert _metric(metrics, "jaxport_compilations_after_warmup", model="centered", version="1") == 1
    assert _metric(metrics, "jaxport_compilations_total", model="centered", version="1", phase="request") == 1
    assert _metric(metrics, "jaxport_program_calls_total", model="centered", version="1", bucket="n=3") == 2
    grpc = grpcclient.InferenceServerClient(url=server["grpc"])
    inp = grpcclient.InferInput("x", [2, 3], "FP32")
    inp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException) as e:
        grpc.infer("mlp", [inp])
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert e.value.message() == "input 'x': shape[1] = 3, but the artifact expects 784 (f32[batch, 784])."


def test_concurrent_requests_are_batched_and_nothing_compiles_after_ready(server, direct):
    """16 one-row clients at once (a barrier): fewer program calls than requests, each client's rows equal to a
    direct call; per-bucket counts and padding waste on /metrics; 0 compilations after ready."""
    before = _metrics(server)
    calls_before = _metric(before, "jaxport_requests_per_call_count", model="mlp", version="2")
    requests_before = _metric(before, "jaxport_requests_per_call_sum", model="mlp", version="2")
    n = 16
    barrier = threading.Barrier(n, timeout=60)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def client(i: int) -> None:
        try:
            c = httpclient.InferenceServerClient(url=server["http"], network_timeout=60)
            inp = httpclient.InferInput("x", [1, 784], "FP32")
            inp.set_data_from_numpy(_x(1, 100 + i))
            barrier.wait()
            results[i] = c.infer("mlp", [inp]).as_numpy("output")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    for i in range(n):
        np.testing.assert_allclose(results[i], direct["2"](_x(1, 100 + i)), rtol=1e-6)
    after = _metrics(server)
    calls = _metric(after, "jaxport_requests_per_call_count", model="mlp", version="2") - calls_before
    served = _metric(after, "jaxport_requests_per_call_sum", model="mlp", version="2") - requests_before
    assert served == n and calls < n, (served, calls)
    assert _metric(after, "jaxport_program_calls_total", model="mlp", version="1", bucket="batch=32") >= 2
    padded = _metric(after, "jaxport_padded_rows_total", model="mlp", version="1", bucket="batch=8")
    assert padded >= 5  # the 3-row request ran on bucket 8
    for model, version in (("mlp", "1"), ("mlp", "2")):  # every size listed (--dim) compiled before ready
        assert _metric(after, "jaxport_compilations_after_warmup", model=model, version=version) == 0
    server["log"].flush()
    server["log"].seek(0)
    log = server["log"].read()
    assert "Traceback" not in log
    assert re.search(r"jaxport serve: mlp version 1 \(.*mlp\.jaxport, function predict\): 3 buckets compiled "
                     r"\(batch in 1, 8, 32\), batching up to 32 rows", log), log[-3000:]


def test_grpc_typed_contents_and_malformed_raw_contents(server, direct):
    """jaxport decodes gRPC tensors itself: typed ``contents`` equal the raw bytes; raw and typed contents mixed,
    or a raw_input_contents count that does not match the inputs, are INVALID_ARGUMENT naming what is wrong."""
    import grpc
    from tritonclient.grpc import service_pb2 as pb  # the protocol's messages, as the client ships them
    from tritonclient.grpc import service_pb2_grpc as pb_grpc

    x = _x(2, 7)
    tensor = pb.ModelInferRequest.InferInputTensor
    with grpc.insecure_channel(server["grpc"]) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        typed = tensor(name="x", datatype="FP32", shape=[2, 784],
                       contents=pb.InferTensorContents(fp32_contents=x.reshape(-1).tolist()))
        reply = stub.ModelInfer(pb.ModelInferRequest(model_name="mlp", model_version="1", inputs=[typed]),
                                timeout=60)
        assert (reply.model_name, reply.model_version, list(reply.outputs[0].shape)) == ("mlp", "1", [2, 10])
        got = np.frombuffer(reply.raw_output_contents[0], dtype=np.float32).reshape(2, 10)
        np.testing.assert_allclose(got, direct["1"](x), rtol=1e-6)
        cases = [
            (pb.ModelInferRequest(model_name="mlp", inputs=[typed], raw_input_contents=[x.tobytes()]),
             "inputs[0] has contents as well as raw_input_contents[0]; give one."),
            (pb.ModelInferRequest(model_name="mlp", inputs=[tensor(name="x", datatype="FP32", shape=[2, 784])],
                                  raw_input_contents=[x.tobytes(), x.tobytes()]),
             "the request has 1 inputs but 2 raw_input_contents; give one raw_input_contents entry per input, in "
             "the inputs' order."),
            (pb.ModelInferRequest(model_name="mlp", inputs=[tensor(name="x", datatype="FP32", shape=[2, 784])],
                                  raw_input_contents=[x.tobytes()[:-4]]),
             "raw_input_contents[0]: 6268 bytes of data for shape [2, 784] of FP32, which takes 6272."),
        ]
        for request, message in cases:
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelInfer(request, timeout=60)
            assert (e.value.code(), e.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
