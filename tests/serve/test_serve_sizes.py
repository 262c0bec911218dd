"""Every size a model accepts answers (issue 47): ``jaxport serve`` of a sequence model whose padding along ``seq`` is
refused (attention over the whole sequence) plans every variable's ladder, compiles only its warm-up before ready,
and compiles any other bucket on its first use, once, off the event loop, counted on /metrics and logged once;
``--compile-after-ready never`` refuses as before; ``--max-executables`` evicts; ``background`` compiles the plan
after ready; executables shipped by ``warmup --target cpu`` are loaded, not compiled. Real servers on 127.0.0.1 at
ephemeral ports, queried with tritonclient (gRPC) and plain HTTP; every answer is compared with the function called
directly. Skips without the extra jaxport[serve] or tritonclient."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import jaxport
from jaxport.serve.batching import Batched
from tests.serve.servers import free_port
from tests.support import REPO

if importlib.util.find_spec("kserve") is None:
    pytest.skip("jaxport serve needs the extra jaxport[serve] (pip install 'jaxport[serve]')", allow_module_level=True)
grpcclient = pytest.importorskip("tritonclient.grpc", reason="the tests' client: pip install 'tritonclient[all]'")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.slow

#: The most seconds a server may take to become ready, and a wait for an event or a stop.
READY_S = 240
#: A tiny tagger: attention over the whole sequence (so padding seq would change every row's answer).
TAGGER = """\
import jax
import jax.numpy as jnp


def f(x):
    w = jnp.linspace(-1.0, 1.0, 16).reshape(4, 4)
    scores = jnp.einsum("bqd,bkd->bqk", x, x) / 2.0
    return jax.nn.softmax(scores, axis=-1) @ (x @ w)
"""
TAGGER_SPEC = ('jaxport: 1\ndims:\n  batch: {min: 1, max: 8}\n  seq: {min: 1, max: 16}\nargs:\n'
               '  - "f32[batch, seq, 4]"\n')
ROWS = "def f(x):\n    return 2.0 * x + 1.0\n"
ROWS_SPEC = 'jaxport: 1\ndims:\n  batch: {min: 1, max: 8}\nargs:\n  - "f32[batch, 3]"\n'
SEQ_SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("sizes")
    for name, src, spec in (("tagger", TAGGER, TAGGER_SPEC), ("rows", ROWS, ROWS_SPEC)):
        d = root / name
        d.mkdir()
        (d / "model.py").write_text(src)
        (d / "spec.yaml").write_text(spec)
        jaxport.export(f"{d}/model.py:f", d / "spec.yaml", output=root / f"{name}.jaxport")
    return root


class Served:
    """``jaxport serve --json ARGS`` in its own process: its events (read by a thread), requests, /metrics."""

    def __init__(self, work, *args: str, cache: str = "cache"):
        self.http, self.grpc = free_port(), free_port()
        self.log = open(work / f"serve-{self.http}.log", "w+")
        env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(work / cache)}
        self.proc = subprocess.Popen([sys.executable, "-c", "from jaxport_cli.main import main; main()", "serve",
                                      *args, "--json", "--http-port", str(self.http), "--grpc-port", str(self.grpc)],
                                     cwd=work, env=env, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.events: queue.Queue[dict | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.client = None

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.events.put(json.loads(line))
        self.events.put(None)

    def ready(self) -> dict:
        """The ``ready`` event's models, once the server listens (bounded in time)."""
        for _ in range(2):
            try:
                event = self.events.get(timeout=READY_S)
            except queue.Empty:
                event = None
            if event is None:
                pytest.fail(f"jaxport serve printed no event (exit {self.proc.poll()}):\n{self.text()[-4000:]}")
            if event["event"] == "ready":
                self.client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{self.grpc}")
                return {m["name"]: m for m in event["models"]}
        pytest.fail("no ready event after listening")

    def infer(self, model: str, x: np.ndarray) -> np.ndarray:
        inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        return self.client.infer(model, [inp], client_timeout=READY_S).as_numpy("output")

    def post(self, model: str, x: np.ndarray) -> tuple[int, dict]:
        body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
        req = urllib.request.Request(f"http://127.0.0.1:{self.http}/v2/models/{model}/infer",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=READY_S) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def metric(self, name: str, **labels: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/metrics", timeout=30) as r:
            text = r.read().decode()
        for line in text.splitlines():
            if line.startswith(f"{name}{{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no {name}{labels} in /metrics")

    def text(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.reader.join(timeout=30)
        self.proc.stdout.close()
        self.log.close()


@pytest.fixture
def serve(work):
    started: list[Served] = []

    def start(*args: str, cache: str = "cache") -> Served:
        started.append(Served(work, *args, cache=cache))
        return started[-1]

    yield start
    for s in started:
        s.close()


def _x(batch: int, seq: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed * 1000 + batch * 31 + seq).standard_normal((batch, seq, 4), dtype=np.float32)


def test_every_size_answers_compiling_each_bucket_not_warmed_once_on_first_use(work, serve):
    direct = jaxport.load(work / "tagger.jaxport")
    server = serve("tagger.jaxport", "--warmup-budget-s", "0")
    (model,) = server.ready().values()
    assert {k: model[k] for k in ("buckets", "sizes", "planned", "compile_after_ready")} == {
        "buckets": [{"batch": 1, "seq": 1}], "sizes": {"batch": [1, 2, 3, 4, 5, 6, 7, 8], "seq": SEQ_SIZES},
        "planned": 96, "compile_after_ready": "first-use"}
    # (batch, seq) -> the bucket it runs on: batch padded up the ladder, seq never padded (its own size)
    cases = [((1, 1), "batch=1,seq=1"), ((3, 9), "batch=3,seq=9"), ((3, 9), "batch=3,seq=9"), ((2, 9), "batch=2,seq=9"),
             ((8, 16), "batch=8,seq=16"), ((5, 1), "batch=5,seq=1"), ((1, 1), "batch=1,seq=1")]
    for (batch, seq), _ in cases:
        x = _x(batch, seq)
        np.testing.assert_allclose(server.infer("tagger", x), np.asarray(direct(x)), rtol=1e-5, atol=1e-6)
    # six clients at once on a size not compiled: one compile, every answer right
    x = _x(4, 11)
    expected = np.asarray(direct(x))
    barrier, answers, errors = threading.Barrier(6, timeout=60), [], []

    def client() -> None:
        try:
            c = grpcclient.InferenceServerClient(url=f"127.0.0.1:{server.grpc}")
            inp = grpcclient.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            barrier.wait()
            answers.append(c.infer("tagger", [inp], client_timeout=READY_S).as_numpy("output"))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=READY_S)
    assert not errors and len(answers) == 6, errors
    for got in answers:
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    compiled = ["batch=3,seq=9", "batch=2,seq=9", "batch=8,seq=16", "batch=5,seq=1", "batch=4,seq=11"]
    assert server.metric("jaxport_compilations_total", model="tagger", phase="request") == len(compiled)
    assert server.metric("jaxport_compilations_after_warmup", model="tagger") == len(compiled)
    assert server.metric("jaxport_compilations_total", model="tagger", phase="warmup") == 1
    assert server.metric("jaxport_executables", model="tagger") == 1 + len(compiled)
    assert server.metric("jaxport_program_calls_total", model="tagger", bucket="batch=1,seq=1") == 2  # no compile
    assert server.metric("jaxport_program_calls_total", model="tagger", bucket="batch=4,seq=11") == 6
    log = server.text()
    for bucket in compiled:  # one line per compile, each once
        assert log.count(f"jaxport serve: tagger version 1: {bucket} compiled on first use in ") == 1, log[-3000:]
    assert "Traceback" not in log
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http}/v2/models/tagger", timeout=30) as r:
        p = json.loads(r.read())["parameters"]
    assert [(b["batch"], b["seq"]) for b in p["buckets"]] == [(1, 1), (2, 9), (3, 9), (4, 11), (5, 1), (8, 16)]
    assert (p["sizes"], p["planned"], p["strict"]) == ({"batch": [1, 2, 3, 4, 5, 6, 7, 8], "seq": SEQ_SIZES}, 96,
                                                       False)
    assert p["padding"]["seq"]["allowed"] is False and p["padding"]["batch"]["allowed"] is True


def test_never_compiles_every_planned_bucket_before_ready_and_refuses_other_sizes(work, serve):
    path = work / "tagger.jaxport"
    direct = jaxport.load(path)
    reason = Batched(jaxport.load(path), {"batch": [1, 2], "seq": [4, 8]}).verdicts["seq"].reason
    server = serve("tagger.jaxport", "--compile-after-ready", "never", "--dim", "batch=1,2", "--dim", "seq=4,8")
    (model,) = server.ready().values()
    assert (model["buckets"], model["planned"], model["compile_after_ready"]) == (
        [{"batch": 1, "seq": 4}, {"batch": 1, "seq": 8}, {"batch": 2, "seq": 4}, {"batch": 2, "seq": 8}], 4, "never")
    x = _x(2, 8)
    np.testing.assert_allclose(server.infer("tagger", x), np.asarray(direct(x)), rtol=1e-5, atol=1e-6)
    message = (f"{path.name}: function 'f': no compiled bucket fits batch=1, seq=5: seq must equal a bucket's value "
               f"(4, 8) because padding it is not proven safe: {reason}. Serve with --dim to compile the sizes you "
               f"call with (dims={{...}} in Python).")
    assert server.post("tagger", _x(1, 5)) == (400, {"error": message})
    with pytest.raises(InferenceServerException) as e:
        server.infer("tagger", _x(1, 5))
    assert (e.value.status(), e.value.message()) == ("StatusCode.INVALID_ARGUMENT", message)
    assert server.metric("jaxport_compilations_after_warmup", model="tagger") == 0
    assert "the rest on first use" not in server.text()


def test_past_max_executables_the_least_recently_used_is_evicted_and_compiled_again(work, serve):
    direct = jaxport.load(work / "tagger.jaxport")
    server = serve("tagger.jaxport", "--warmup-budget-s", "0", "--max-executables", "2")
    server.ready()
    for seq in (9, 11, 13, 9, 1):  # 13 evicts 9; 9 evicts 11 and compiles again; 1 is the warm-up's, kept
        x = _x(1, seq)
        np.testing.assert_allclose(server.infer("tagger", x), np.asarray(direct(x)), rtol=1e-5, atol=1e-6)
    assert server.metric("jaxport_compilations_total", model="tagger", phase="request") == 4
    assert server.metric("jaxport_executables_evicted_total", model="tagger") == 2
    assert server.metric("jaxport_executables", model="tagger") == 3
    assert "jaxport serve: tagger version 1: batch=1,seq=9 compiled on first use in " in server.text()


def test_background_compiles_the_rest_of_the_plan_after_ready(work, serve):
    direct = jaxport.load(work / "rows.jaxport")
    server = serve("rows.jaxport", "--warmup-budget-s", "0", "--compile-after-ready", "background")
    (model,) = server.ready().values()
    assert (model["buckets"], model["planned"], model["compile_after_ready"]) == ([{"batch": 1}], 8, "background")
    deadline = time.monotonic() + READY_S
    for _ in range(READY_S * 4):  # the 7 other buckets, while no request comes
        if server.metric("jaxport_compilations_total", model="rows", phase="background") == 7 or \
                time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert server.metric("jaxport_compilations_total", model="rows", phase="background") == 7
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_allclose(server.infer("rows", x), np.asarray(direct(x)))
    assert server.metric("jaxport_compilations_total", model="rows", phase="request") == 0
    assert "jaxport serve: rows version 1: batch=5 compiled in the background in " in server.text()


def test_executables_shipped_by_warmup_target_cpu_are_loaded_not_compiled(work, serve):
    """``warmup --target cpu`` ships every bucket; the server is ready with each warm bucket loaded as shipped,
    and a bucket first used after ready is loaded too (the cache directory is the server's throughout)."""
    res = subprocess.run([sys.executable, "-c", "from jaxport_cli.main import main; main()", "warmup",
                          "rows.jaxport", "--target", "cpu", "--dim", "batch=1,2,3,4,5,6,7,8", "--cache-dir",
                          str(work / "shipped")], cwd=work, env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=READY_S)
    assert res.returncode == 0, res.stderr[-3000:]
    direct = jaxport.load(work / "rows.jaxport")
    server = serve("rows.jaxport", "--warmup-budget-s", "0", "--cache-dir", str(work / "shipped"), cache="unused")
    (model,) = server.ready().values()
    assert (model["buckets"], model["executables_shipped"]) == ([{"batch": 1}], 1)
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_allclose(server.infer("rows", x), np.asarray(direct(x)))
    assert server.metric("jaxport_executables_shipped", model="rows") == 2
    log = server.text()
    assert "rows version 1 (rows.jaxport, function f): 1 of 8 buckets compiled (batch in 1, 2, 3, 4, 5, 6, 7, 8), " \
           "the rest on first use, 1 shipped executable loaded, no batching, in " in log
    assert "jaxport serve: rows version 1: batch=5 loaded the shipped executable on first use in " in log
