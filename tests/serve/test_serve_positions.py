"""``jaxport serve`` of programs whose rows depend on their positions (``x + arange(rows)``) or pair rows
(``x @ x.T``): a real server on 127.0.0.1 (ephemeral ports) with a batching window, queried over HTTP and gRPC by
concurrent clients. Such a request is padded up to a bucket (positions kept) but never split over the largest bucket
(it runs whole, on a bucket of its own: not rows numbered 0..7, 0..7, 0..3) nor merged with other clients' rows; a
canary still gets the right answer after each. Values are compared with ``jax.jit`` of the live function. Skips when
the extra jaxport[serve] or tritonclient is not installed."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest

import jaxport
from tests.serve.servers import free_port, serving
from tests.support import REPO

if importlib.util.find_spec("kserve") is None:
    pytest.skip("jaxport serve needs the extra jaxport[serve] (pip install 'jaxport[serve]')", allow_module_level=True)
grpcclient = pytest.importorskip("tritonclient.grpc", reason="the tests' client: pip install 'tritonclient[all]'")

pytestmark = pytest.mark.slow

READY_S = 300
MODELS = """import jax.numpy as jnp


def numbered(x):
    return x + jnp.arange(x.shape[0], dtype=x.dtype)[:, None]


def gram(x):
    return x @ x.T


def twice(x):
    return 2.0 * x + 1.0
"""
SPEC = "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - \"f32[batch, 3]\"\n"
POSITIONS = "output 'output' depends on the rows' positions along batch (stablehlo.iota: an arange over batch)"
PAIRS = "output 'output' (shape [batch, batch]) has batch as axis 1 too: its rows are not one per row of the batch"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``jaxport serve`` of ``numbered``, ``gram`` and ``twice`` on buckets batch=1,8 with a 200 ms window."""
    root = tmp_path_factory.mktemp("positions")
    (root / "models.py").write_text(MODELS)
    (root / "spec.yaml").write_text(SPEC)
    paths = {n: jaxport.export(f"{root}/models.py:{n}", root / "spec.yaml", output=root / f"{n}.jaxport").path
             for n in ("numbered", "gram", "twice")}
    http, grpc = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(root / "cache")}
    args = [*map(str, paths.values()), "--dim", "batch=1,8", "--host", "127.0.0.1", "--http-port", str(http),
            "--grpc-port", str(grpc), "--batch-window-ms", "200"]
    with open(root / "server.log", "w+") as log, serving(args, http=http, env=env, log=log, ready_s=READY_S):
        yield {"base": f"http://127.0.0.1:{http}", "grpc": f"127.0.0.1:{grpc}", "paths": paths, "log": log,
               "root": root}


@pytest.fixture(scope="module")
def live(server):
    """``jax.jit`` of the live functions, imported from the file the artifacts were exported from."""
    import jax

    spec = importlib.util.spec_from_file_location("position_models", server["root"] / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jitted = {n: jax.jit(getattr(module, n)) for n in ("numbered", "gram", "twice")}
    return {n: functools.partial(_numpy, f) for n, f in jitted.items()}


def _numpy(f, x: np.ndarray) -> np.ndarray:
    return np.asarray(f(x))


def _x(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 3), dtype=np.float32)


def _post(server, model: str, x: np.ndarray) -> tuple[int, dict]:
    body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
    req = urllib.request.Request(f"{server['base']}/v2/models/{model}/infer", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _answer(body: dict) -> np.ndarray:
    (out,) = body["outputs"]
    return np.asarray(out["data"], np.float32).reshape(out["shape"])


def _canary(server, live) -> None:
    for model in ("numbered", "gram", "twice"):
        x = _x(5, 99)
        status, body = _post(server, model, x)
        assert status == 200, body
        np.testing.assert_allclose(_answer(body), live[model](x), rtol=1e-5, atol=1e-5)


def test_a_batch_over_the_largest_bucket_runs_whole_on_a_bucket_of_its_own(server, live):
    """20 rows of a program whose rows depend on their positions (or pair rows) are never split into 8 + 8 + 4:
    they run as one call on a bucket of 20 rows, compiled on first use (``--compile-after-ready never`` refuses
    them instead: tests/run/test_position_dependence.py)."""
    for model in ("numbered", "gram"):
        x = _x(20)
        status, body = _post(server, model, x)
        assert status == 200, body
        np.testing.assert_allclose(_answer(body), live[model](x), rtol=1e-5, atol=1e-5)  # rows 0..19
        _canary(server, live)
    x = _x(20, 1)  # a row-wise program is still split: 8 + 8 + 4
    status, body = _post(server, "twice", x)
    assert status == 200
    np.testing.assert_allclose(_answer(body), live["twice"](x), rtol=1e-6)
    grpc = grpcclient.InferenceServerClient(url=server["grpc"])
    x = _x(12)
    inp = grpcclient.InferInput("x", [12, 3], "FP32")
    inp.set_data_from_numpy(x)
    np.testing.assert_allclose(grpc.infer("gram", [inp]).as_numpy("output"), live["gram"](x), rtol=1e-5, atol=1e-5)
    _canary(server, live)


def test_padded_requests_keep_their_positions(server, live):
    for rows in (1, 3, 8):
        for model in ("numbered", "gram"):
            x = _x(rows, rows)
            status, body = _post(server, model, x)
            assert status == 200, body
            np.testing.assert_allclose(_answer(body), live[model](x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model", ["numbered", "gram"])
def test_concurrent_clients_each_get_their_own_rows(server, live, model):
    """Six clients at once inside the 200 ms window: each answer equals its own request called alone (the first
    row of each numbered 0, a [3, 3] Gram matrix of its own rows), not rows merged with others'."""
    xs = [_x(3, 10 + i) for i in range(6)]
    got: list = [None] * len(xs)
    gate = threading.Barrier(len(xs))

    def client(i: int) -> None:
        gate.wait(timeout=60)
        got[i] = _post(server, model, xs[i])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for x, (status, body) in zip(xs, got):
        assert status == 200, body
        np.testing.assert_allclose(_answer(body), live[model](x), rtol=1e-5, atol=1e-5)


def test_metadata_and_the_ready_line_say_why_requests_are_not_merged(server):
    with urllib.request.urlopen(f"{server['base']}/v2/models/numbered", timeout=30) as r:
        padding = json.loads(r.read())["parameters"]["padding"]
    assert padding == {"batch": {"allowed": True, "fill": "edge", "inputs": {"x": [0]}, "outputs": {"output": [0]},
                                 "split": {"allowed": False, "reason": POSITIONS}}}
    with urllib.request.urlopen(f"{server['base']}/v2/models/twice", timeout=30) as r:
        assert json.loads(r.read())["parameters"]["padding"]["batch"]["split"] == {"allowed": True}
    server["log"].seek(0)
    log = server["log"].read()
    assert f"no batching (splitting or merging batch is not proven safe: {POSITIONS})" in log
    assert "twice version 1" in log and "batching up to 8 rows" in log
