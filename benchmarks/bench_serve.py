"""`jaxport serve` and the batch adapters against what a user writes instead (issue 33), side by side in one run.

    .venv-serve/bin/python benchmarks/bench_serve.py [--quick] [--only serve|batch|sizes] [--runs N] [--json PATH]
    python3 benchmarks/bench_serve.py --uds [--quick]      # on the TPU host: the TPU section (serve_sizes.py)

Serving (`--only serve`), for two models, the bundled example (examples/mlp `predict`) and a 4x1024 MLP
(benchmarks/models/mlp4x1024.py): three servers at once on 127.0.0.1, ephemeral ports, each with a cold
compilation cache of its own: `jaxport serve` of the artifact (batching off), the same with `--batch-window-ms 2`
(batching on), and a bare KServe model (benchmarks/serve_baselines.py: a `kserve.Model` whose `predict` runs a
`jax.jit` of the same function, on kserve's own `ModelServer`). Every contender gets the same requests, interleaved:
- latency of one-row requests, per protocol (gRPC, JSON REST, binary REST; tritonclient), p50 and p99;
- throughput at 1, 8 and 32 client threads (gRPC, one-row requests; each level bounded by a count and a time;
  `--client-procs P` spreads them over P processes), p99; before the runs, a first burst at 32 clients to each
  server, timed apart (jaxport compiles the merged calls' buckets its warm-up left then, on first use);
  jaxport's requests per program call from /metrics (`jaxport_requests_per_call`);
- padding waste: one request of each size 1..100 rows to `jaxport serve` (default buckets), from /metrics
  (`jaxport_rows_total`, `jaxport_padded_rows_total`); the same requests to the bare model count its compilations;
- compilations after warm-up (`jaxport_compilations_after_warmup`; the bare server's `jax.monitoring` count) and
  the servers' RSS at the end.
Batch jobs (`--only batch`), on the example MLP, each in a fresh process with an empty compilation cache: Ray Data
(100 000 rows, 2 actors), Beam (10 000 rows, DirectRunner), Spark (50 000 rows, local[2]), and Ray Data on the
4x1024 MLP (40 000 rows), jaxport's adapter against hand glue; rows/s including start-up (actor start, load,
compilation), Ray's cold start per actor, compilations.
The sequence-model case (`--only sizes`: ready times of a tagger and two MLP versions cold, warm and shipped, and
the sizes the tagger serves) and the TPU section (`--uds`) are benchmarks/serve_sizes.py's.

Each figure is the median over `--runs` runs (3; `--quick`: 1, fewer requests, smaller row counts). Ratios are
jaxport / bare (latency, lower is better) or jaxport / bare (throughput, higher is better), each run's contenders
measured in the same loop. Prints tables, writes JSON (default out/bench_serve.json, git-ignored).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

BASELINES = common.BENCH_DIR / "serve_baselines.py"
MODELS = {
    "mlp": ("examples/mlp/model.py:predict", "examples/mlp/spec.yaml", 784),
    "mlp4x1024": ("benchmarks/models/mlp4x1024.py:predict", "benchmarks/models/mlp4x1024.yaml", 1024),
}
READY_S = 240  # the most a server may take to load, compile and answer ready
STOP_S = 20
WINDOW_MS = 2.0
CLIENTS = (1, 8, 32)
PROTOCOLS = ("grpc", "rest-json", "rest-binary")
SETTINGS = {
    "full": {"runs": 3, "latency_n": 300, "latency_s": 12.0, "warm_n": 30, "tput_n": 3000, "tput_s": 4.0,
             "sizes": 100, "ray": 100_000, "beam": 10_000, "spark": 50_000, "ray_heavy": 40_000, "sizes_n": 40,
             "tput_warm_s": 3.0,
             "tpu_sizes_n": 24},
    "quick": {"runs": 1, "latency_n": 60, "latency_s": 4.0, "warm_n": 10, "tput_n": 400, "tput_s": 1.5,
              "sizes": 100, "ray": 10_000, "beam": 2_000, "spark": 5_000, "ray_heavy": 5_000, "sizes_n": 16,
              "tput_warm_s": 1.5,
              "tpu_sizes_n": 8},
}
GOALS = {"latency": 1.10, "tput32": 1.5, "one_client": 1.1, "waste": 0.15, "cold": 1.5, "batch": 1.0}


def _port() -> int:
    """A free TCP port on 127.0.0.1; 0 where this host may open no TCP socket (a TPU host: --uds needs none)."""
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    except OSError:
        return 0


def _get(url: str, timeout: float = 10) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


#: JAX_PLATFORMS of the servers and jobs: cpu, unless --uds (the TPU section) leaves the host's own platform.
PLATFORMS = {"JAX_PLATFORMS": "cpu"}


def _env(cache: Path) -> dict[str, str]:
    path = os.pathsep.join([str(common.BENCH_DIR), str(common.REPO), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    env = {**common.CHILD_ENV, "JAXPORT_CACHE_DIR": str(cache), "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    env.pop("JAX_PLATFORMS", None)
    return {**env, **PLATFORMS}


class _UnixHTTP(http.client.HTTPConnection):
    """HTTP over a unix socket (a server started with --uds)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def _unix_request(path: str, method: str, url: str, body: bytes | None = None, timeout: float = 10,
                  connection: _UnixHTTP | None = None) -> tuple[int, bytes]:
    conn = connection or _UnixHTTP(path, timeout)
    try:
        conn.request(method, url, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        if connection is None:
            conn.close()


# -- servers --

@dataclass
class Server:
    label: str
    argv: list[str]
    cache: Path
    log: Path
    http: int = field(default_factory=_port)
    grpc: int = field(default_factory=_port)
    proc: subprocess.Popen | None = None
    #: Listen on unix sockets (REST on this path, gRPC on PATH.grpc) instead of the ports (--uds).
    uds: Path | None = None

    def start(self) -> None:
        self.argv = [a.format(http=self.http, grpc=self.grpc, uds=self.uds) for a in self.argv]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=_env(self.cache),
                                         cwd=common.REPO, start_new_session=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.http}"

    @property
    def grpc_url(self) -> str:
        return f"unix:{self.uds}.grpc" if self.uds else f"127.0.0.1:{self.grpc}"

    def get(self, path: str, timeout: float = 10) -> tuple[int, bytes]:
        """A REST GET of ``path`` (over the unix socket with --uds)."""
        if self.uds:
            return _unix_request(str(self.uds), "GET", path, timeout=timeout)
        return _get(f"{self.base}{path}", timeout=timeout)

    def client(self, model: str, input_name: str, output_name: str, protocol: str = "grpc") -> Client:
        return Client(self, model, input_name, output_name, protocol)

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if self.get("/v2/health/ready", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.25)
        tail = self.log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"benchmarks: {self.label} did not become ready (exit {self.proc.poll()}):\n{tail}")

    def metrics(self) -> dict[str, float]:
        """``/metrics`` summed over labels: ``{name: value}``."""
        _, body = self.get("/metrics")
        out: dict[str, float] = {}
        for line in body.decode().splitlines():
            if not line or line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            name = name.split("{", 1)[0]
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                pass
        return out

    def rss(self) -> int | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=STOP_S)


# -- clients --

class Client:
    """One-row (or n-row) inference requests to one server, by protocol (tritonclient)."""

    def __init__(self, server: Server, model: str, input_name: str, output_name: str, protocol: str):
        self.protocol, self.model, self.input_name, self.output_name = protocol, model, input_name, output_name
        self.unix = None
        if protocol == "grpc":  # only the client a protocol needs: tritonclient's HTTP one needs gevent
            import tritonclient.grpc as grpcclient

            self.mod, self.client = grpcclient, grpcclient.InferenceServerClient(server.grpc_url)
        elif server.uds:  # tritonclient's HTTP client has no unix sockets: JSON requests over one connection
            if protocol != "rest-json":
                raise SystemExit(f"benchmarks: {protocol} over a unix socket is not measured (JSON REST and gRPC are)")
            self.unix = _UnixHTTP(str(server.uds), 30)
        else:
            import tritonclient.http as httpclient

            self.mod = httpclient
            self.client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}", connection_timeout=30,
                                                           network_timeout=30)

    def infer(self, x, datatype: str = "FP32"):
        if self.unix is not None:
            import numpy as np

            body = json.dumps({"inputs": [{"name": self.input_name, "shape": list(x.shape), "datatype": datatype,
                                           "data": x.ravel().tolist()}]}).encode()
            status, reply = _unix_request("", "POST", f"/v2/models/{self.model}/infer", body, connection=self.unix)
            if status != 200:
                raise SystemExit(f"benchmarks: HTTP {status}: {reply[:300]!r}")
            (out,) = [o for o in json.loads(reply)["outputs"] if o["name"] == self.output_name]
            return np.asarray(out["data"], np.float32).reshape(out["shape"])
        inp = self.mod.InferInput(self.input_name, list(x.shape), datatype)
        if self.protocol == "grpc":
            inp.set_data_from_numpy(x)
            out = self.mod.InferRequestedOutput(self.output_name)
        else:
            binary = self.protocol == "rest-binary"
            inp.set_data_from_numpy(x, binary_data=binary)
            out = self.mod.InferRequestedOutput(self.output_name, binary_data=binary)
        # kserve reads a REST body without `Content-Type: application/json` as binary (and then wants the binary
        # extension's header), so the JSON requests say what they are, to every server alike
        headers = {"Content-Type": "application/json"} if self.protocol == "rest-json" else None
        return self.client.infer(self.model, [inp], outputs=[out], headers=headers).as_numpy(self.output_name)

    def close(self) -> None:
        (self.unix or self.client).close()


def _pct(times: list[float], q: float) -> float:
    s = sorted(times)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def latency(clients: dict[str, Client], x, n: int, warm: int, limit_s: float) -> dict[str, dict[str, float]]:
    """One request at a time, the contenders interleaved (the order rotating); p50 and p99 per contender."""
    for c in clients.values():
        for _ in range(warm):
            c.infer(x)
    times: dict[str, list[float]] = {k: [] for k in clients}
    order = list(clients)
    deadline = time.monotonic() + limit_s
    for i in range(n):
        if time.monotonic() > deadline:
            break
        for k in order[i % len(order):] + order[:i % len(order)]:
            start = time.perf_counter()
            clients[k].infer(x)
            times[k].append(time.perf_counter() - start)
    return {k: {"p50": _pct(t, 0.5), "p99": _pct(t, 0.99), "n": len(t)} for k, t in times.items()}


def throughput(make_client, x, threads: int, n: int, limit_s: float, keep: bool = False) -> dict:
    """``threads`` client threads sending one-row gRPC requests until ``n`` are done or ``limit_s`` passed."""
    clients = [make_client() for _ in range(threads)]
    lock = threading.Lock()
    state = {"left": n}
    lat: list[float] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def worker(c: Client) -> None:
        barrier.wait()
        mine = []
        try:
            while time.monotonic() < stop_at[0]:
                with lock:
                    if state["left"] <= 0:
                        break
                    state["left"] -= 1
                start = time.perf_counter()
                c.infer(x)
                mine.append(time.perf_counter() - start)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=worker, args=(c,), daemon=True) for c in clients]
    for t in ts:
        t.start()
    stop_at[0] = time.monotonic() + limit_s
    start = time.perf_counter()
    barrier.wait()
    for t in ts:
        t.join(limit_s + 60)
    elapsed = time.perf_counter() - start
    for c in clients:
        c.close()
    if errors:
        raise SystemExit(f"benchmarks: a client failed: {errors[0]!r}")
    if keep:
        return {"latencies": lat, "elapsed": elapsed}
    return {"rps": len(lat) / elapsed, "p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99), "n": len(lat)}


def _client_process(spec: tuple, threads: int, n: int, limit_s: float, start_at: float) -> dict:
    """One client process of :func:`throughput_procs`: ``threads`` threads, from wall time ``start_at``."""
    grpc_port, uds, model, input_name, output_name, width = spec
    import numpy as np

    server = Server("", [], Path(), Path(), http=0, grpc=grpc_port, uds=uds)
    x = np.random.default_rng(0).standard_normal((1, width), dtype=np.float32)
    Client(server, model, input_name, output_name, "grpc").infer(x)  # connected and imported before the start
    time.sleep(max(0.0, start_at - time.time()))
    return throughput(lambda: Client(server, model, input_name, output_name, "grpc"), x, threads, n, limit_s,
                      keep=True)


def throughput_procs(spec: tuple, threads: int, procs: int, n: int, limit_s: float) -> dict[str, float]:
    """:func:`throughput` over ``procs`` client processes (no GIL shared between clients), ``threads`` in all."""
    import concurrent.futures as cf
    import multiprocessing

    procs = max(1, min(procs, threads))
    share = [threads // procs + (i < threads % procs) for i in range(procs)]
    start_at = time.time() + 3.0 + 0.5 * procs  # time for every process to import and connect
    with cf.ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("spawn")) as pool:
        parts = list(pool.map(_client_process, [spec] * procs, share, [max(1, n // procs)] * procs,
                              [limit_s] * procs, [start_at] * procs, timeout=limit_s + 120))
    lat = [t for p in parts for t in p["latencies"]]
    elapsed = max(p["elapsed"] for p in parts)
    return {"rps": len(lat) / elapsed, "p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99), "n": len(lat)}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def serve_model(name: str, s: dict, tmp: Path, jaxport: str) -> dict:
    import numpy as np

    from jaxport.artifact.container import open_artifact

    ref, spec, width = MODELS[name]
    artifact = tmp / f"{name}.jaxport"
    print(f"[{name}] exporting ...", flush=True)
    common.run_once([jaxport, "export", ref, "--shapes", spec, "--output", str(artifact)], cwd=common.REPO)
    f = next(iter(open_artifact(artifact).model.functions.values()))
    input_name, output_name = f.inputs[0].name, f.outputs[0].name
    serve = [jaxport, "serve", f"{name}={artifact}", "--host", "127.0.0.1", "--http-port", "{http}",
             "--grpc-port", "{grpc}"]
    servers = {
        "bare": Server("bare KServe", [sys.executable, str(BASELINES), "bare", ref, "--name", name, "--output",
                                       output_name, "--http-port", "{http}", "--grpc-port", "{grpc}"],
                       tmp / f"{name}-cache-bare", tmp / f"{name}-bare.log"),
        "off": Server("jaxport serve", serve, tmp / f"{name}-cache-off", tmp / f"{name}-off.log"),
        "on": Server(f"jaxport serve --batch-window-ms {WINDOW_MS:g}", serve + ["--batch-window-ms", str(WINDOW_MS)],
                     tmp / f"{name}-cache-on", tmp / f"{name}-on.log"),
    }
    result: dict = {"input": input_name, "output": output_name}
    try:
        t0 = time.monotonic()
        for srv in servers.values():
            srv.start()
        for srv in servers.values():
            srv.wait_ready(t0 + READY_S)
        result["ready_s"] = time.monotonic() - t0
        print(f"[{name}] three servers ready in {result['ready_s']:.1f} s", flush=True)
        result["jaxport_parameters"] = json.loads(_get(f"{servers['off'].base}/v2/models/{name}")[1]).get(
            "parameters")  # its buckets and padding
        x1 = np.random.default_rng(0).standard_normal((1, width), dtype=np.float32)

        def client(key: str, protocol: str = "grpc") -> Client:
            return Client(servers[key], name, input_name, output_name, protocol)

        # the same answer from every server
        ref_out = client("bare").infer(x1)
        for key in ("off", "on"):
            np.testing.assert_allclose(client(key).infer(x1), ref_out, rtol=1e-4, atol=1e-4)
        bare_base = servers["bare"].metrics().get("bare_compilations", 0.0)
        # Traffic before the measured runs: a burst at the most clients to each server, timed but not among the
        # runs' figures. Each compiles what that traffic needs (jaxport the merged calls' buckets its warm-up left,
        # on first use; the bare model nothing more for one-row requests), so the runs measure the steady state;
        # the burst's own req/s say what the first seconds cost.
        result["first_burst"] = {k: throughput(lambda k=k: client(k), x1, max(CLIENTS), s["tput_n"], s["tput_warm_s"])
                                 for k in ("bare", "off", "on")}
        compiled_before = {k: servers[k].metrics().get("jaxport_compilations_after_warmup", 0.0) for k in ("off", "on")}

        runs: list[dict] = []
        for r in range(s["runs"]):
            run: dict = {"latency": {}, "throughput": {}}
            for protocol in PROTOCOLS:
                cs = {k: client(k, protocol) for k in ("bare", "off", "on")}
                run["latency"][protocol] = latency(cs, x1, s["latency_n"], s["warm_n"], s["latency_s"])
                for c in cs.values():
                    c.close()
            for threads in CLIENTS:
                level = {}
                keys = ["bare", "off", "on"]
                for key in keys[r % 3:] + keys[:r % 3]:
                    before = servers[key].metrics() if key == "on" else {}
                    if s["client_procs"] > 1 and threads > 1:
                        spec = (servers[key].grpc, servers[key].uds, name, input_name, output_name, width)
                        level[key] = throughput_procs(spec, threads, s["client_procs"], s["tput_n"], s["tput_s"])
                    else:
                        level[key] = throughput(lambda key=key: client(key), x1, threads, s["tput_n"], s["tput_s"])
                    if key == "on":
                        after = servers[key].metrics()
                        calls = after.get("jaxport_requests_per_call_count", 0) - before.get(
                            "jaxport_requests_per_call_count", 0)
                        reqs = after.get("jaxport_requests_per_call_sum", 0) - before.get(
                            "jaxport_requests_per_call_sum", 0)
                        level[key]["requests_per_call"] = reqs / calls if calls else None
                run["throughput"][str(threads)] = level
            runs.append(run)
            print(f"[{name}] run {r + 1}/{s['runs']} done", flush=True)
        result["runs"] = runs
        result["compiled_in_runs"] = {k: servers[k].metrics().get("jaxport_compilations_after_warmup", 0.0) -
                                      compiled_before[k] for k in ("off", "on")}

        # padding waste (jaxport, default buckets) and the bare model's compilations on the same ragged sizes
        sizes = list(range(1, s["sizes"] + 1))
        random.Random(0).shuffle(sizes)
        before = servers["off"].metrics()
        bare_before = servers["bare"].metrics().get("bare_compilations", 0.0)
        c_off, c_bare = client("off"), client("bare")
        rng = np.random.default_rng(1)
        for n in sizes:
            x = rng.standard_normal((n, width), dtype=np.float32)
            c_off.infer(x)
            c_bare.infer(x)
        after = servers["off"].metrics()
        real = after.get("jaxport_rows_total", 0) - before.get("jaxport_rows_total", 0)
        padded = after.get("jaxport_padded_rows_total", 0) - before.get("jaxport_padded_rows_total", 0)
        bare_after = servers["bare"].metrics().get("bare_compilations", 0.0)
        result["padding"] = {"sizes": f"1..{s['sizes']}", "real_rows": real, "padded_rows": padded,
                             "padded_per_real": padded / real if real else None,
                             "padded_share": padded / (real + padded) if real + padded else None,
                             "bare_compilations_on_these_sizes": bare_after - bare_before,
                             "jaxport_compilations_on_these_sizes": after.get(
                                 "jaxport_compilations_after_warmup", 0) - before.get(
                                 "jaxport_compilations_after_warmup", 0)}
        result["compilations_after_warmup"] = {
            "jaxport_off": servers["off"].metrics().get("jaxport_compilations_after_warmup"),
            "jaxport_on": servers["on"].metrics().get("jaxport_compilations_after_warmup"),
            "bare_one_row_traffic": bare_before - bare_base,
            "bare_total": bare_after,
        }
        result["rss_bytes"] = {k: srv.rss() for k, srv in servers.items()}
    finally:
        for srv in servers.values():
            srv.stop()
    return result


# -- batch jobs --

def batch_jobs(s: dict, runs: int, tmp: Path, jaxport: str) -> dict:
    import numpy as np

    ref, spec, width = MODELS["mlp"]
    artifact = tmp / "mlp.jaxport"
    if not artifact.exists():
        common.run_once([jaxport, "export", ref, "--shapes", spec, "--output", str(artifact)], cwd=common.REPO)
    most = max(s["ray"], s["beam"], s["spark"])
    x = np.random.default_rng(0).standard_normal((most, width), dtype=np.float32)
    data = tmp / "x.npy"
    np.save(data, x)
    parquet = tmp / "x.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    xs = x[:s["spark"]]
    column = pa.FixedSizeListArray.from_arrays(pa.array(xs.reshape(-1)), width).cast(pa.list_(pa.float32()))
    pq.write_table(pa.table({"x": column}), parquet, row_group_size=max(1, len(xs) // 4))
    # Ray on the heavy model too (issue 47): 4x1024, weights closed over
    heavy_ref, heavy_spec, heavy_width = MODELS["mlp4x1024"]
    heavy = tmp / "mlp4x1024-batch.jaxport"
    if not heavy.exists():
        common.run_once([jaxport, "export", heavy_ref, "--shapes", heavy_spec, "--output", str(heavy)],
                        cwd=common.REPO)
    heavy_data = tmp / "x1024.npy"
    np.save(heavy_data, np.random.default_rng(0).standard_normal((s["ray_heavy"], heavy_width), dtype=np.float32))
    jobs = {"ray": ("ray", artifact, ref, data, s["ray"]), "beam": ("beam", artifact, ref, data, s["beam"]),
            "spark": ("spark", artifact, ref, parquet, s["spark"]),
            "ray-mlp4x1024": ("ray", heavy, heavy_ref, heavy_data, s["ray_heavy"])}
    out: dict = {}
    for job, (engine, job_artifact, job_ref, job_data, rows) in jobs.items():
        results: dict[str, list[dict]] = {"jaxport": [], "glue": []}
        for r in range(runs):
            for side in (("jaxport", "glue") if r % 2 == 0 else ("glue", "jaxport")):
                cache = Path(tempfile.mkdtemp(dir=tmp, prefix=f"cache-{job}-{side}-"))
                res = tmp / f"{job}-{side}-{r}.json"
                argv = [sys.executable, str(BASELINES), "job", engine, side, "--artifact", str(job_artifact),
                        "--model", job_ref, "--data", str(job_data), "--rows", str(rows), "--batch-size", "1000",
                        "--out", str(res), "--cache-dir", str(cache)]
                start = time.perf_counter()
                proc = subprocess.run(argv, cwd=common.REPO, env=_env(cache), capture_output=True, timeout=900)
                wall = time.perf_counter() - start
                if proc.returncode != 0:
                    raise SystemExit(f"benchmarks: {engine} {side} exited with {proc.returncode}:\n"
                                     f"{proc.stderr.decode(errors='replace')[-4000:]}")
                one = json.loads(res.read_text())
                one["process_s"] = wall
                results[side].append(one)
                print(f"[batch] {job} {side}: {one['rows']} rows in {one['seconds']:.1f} s "
                      f"(process {wall:.1f} s)", flush=True)
        out[job] = results
    return out


# -- report --

def _ms(t: float) -> str:
    return f"{t * 1e3:.2f} ms"


def _ok(value: float | None, goal: float, higher: bool) -> str:
    if value is None:
        return "-"
    return "yes" if (value >= goal if higher else value <= goal) else "no"


def report_serve(name: str, res: dict, summary: list[list[str]]) -> None:
    runs = res["runs"]
    print(f"\n### {name}: latency of one-row requests (median of {len(runs)} run(s))\n")
    rows = []
    for p in PROTOCOLS:
        med = {k: {q: _median([r["latency"][p][k][q] for r in runs]) for q in ("p50", "p99")}
               for k in ("bare", "off", "on")}
        ratio = _median([r["latency"][p]["off"]["p50"] / r["latency"][p]["bare"]["p50"] for r in runs])
        on_off = _median([r["latency"][p]["on"]["p50"] / r["latency"][p]["off"]["p50"] for r in runs])
        rows.append([p, f"{_ms(med['bare']['p50'])} / {_ms(med['bare']['p99'])}",
                     f"{_ms(med['off']['p50'])} / {_ms(med['off']['p99'])}",
                     f"{_ms(med['on']['p50'])} / {_ms(med['on']['p99'])}", f"{ratio:.2f}x", f"{on_off:.2f}x"])
        goal = f"<= {GOALS['latency']:.2f}x" if p != "rest-binary" else "(no target)"
        summary.append([f"{name}: {p} one-row p50, jaxport / bare", goal, f"{ratio:.2f}x",
                        _ok(ratio, GOALS["latency"], False) if p != "rest-binary" else "-"])
        if p == "grpc":
            summary.append([f"{name}: one client, batching on / off (gRPC p50)", f"<= {GOALS['one_client']}x",
                            f"{on_off:.2f}x", _ok(on_off, GOALS["one_client"], False)])
    print(common.table(["protocol", "bare p50 / p99", "jaxport p50 / p99", "jaxport batching p50 / p99",
                        "jaxport / bare (p50)", "batching on / off (p50)"], rows))
    print(f"\n### {name}: throughput, one-row gRPC requests (median of {len(runs)} run(s))\n")
    rows = []
    for c in map(str, CLIENTS):
        med = {k: {q: _median([r["throughput"][c][k][q] for r in runs]) for q in ("rps", "p99")}
               for k in ("bare", "off", "on")}
        off_ratio = _median([r["throughput"][c]["off"]["rps"] / r["throughput"][c]["bare"]["rps"] for r in runs])
        on_ratio = _median([r["throughput"][c]["on"]["rps"] / r["throughput"][c]["bare"]["rps"] for r in runs])
        p99_ratio = _median([r["throughput"][c]["on"]["p99"] / r["throughput"][c]["bare"]["p99"] for r in runs])
        rpc = [r["throughput"][c]["on"].get("requests_per_call") for r in runs]
        rpc = [v for v in rpc if v is not None]
        rows.append([c, f"{med['bare']['rps']:.0f} ({_ms(med['bare']['p99'])})",
                     f"{med['off']['rps']:.0f} ({_ms(med['off']['p99'])})",
                     f"{med['on']['rps']:.0f} ({_ms(med['on']['p99'])})", f"{off_ratio:.2f}x", f"{on_ratio:.2f}x",
                     f"{p99_ratio:.2f}x", f"{_median(rpc):.1f}" if rpc else "-"])
        if c == "32" and name == "mlp4x1024":
            summary.append([f"{name}: 32 clients, batching on / bare (req/s)", f">= {GOALS['tput32']}x",
                            f"{on_ratio:.2f}x", _ok(on_ratio, GOALS["tput32"], True)])
            summary.append([f"{name}: 32 clients, p99 batching on / bare", "<= 1.00x", f"{p99_ratio:.2f}x",
                            _ok(p99_ratio, 1.0, False)])
    print(common.table(["clients", "bare req/s (p99)", "jaxport", "jaxport batching", "jaxport / bare",
                        "batching / bare", "p99 batching / bare", "requests per call"], rows))
    pad, comp, rss = res["padding"], res["compilations_after_warmup"], res["rss_bytes"]
    print(f"\n{name}: jaxport's model parameters: {res.get('jaxport_parameters')}")
    print(f"{name}: padding of sizes {pad['sizes']} on the default buckets: {pad['real_rows']:.0f} real rows, "
          f"{pad['padded_rows']:.0f} padded = {pad['padded_per_real']:.1%} of real, {pad['padded_share']:.1%} of "
          f"all rows run; on them jaxport compiled {pad.get('jaxport_compilations_on_these_sizes', 0):.0f} buckets "
          f"(first use), the bare model {pad['bare_compilations_on_these_sizes']:.0f} programs.")
    burst = res.get("first_burst", {})
    if burst:
        print(f"{name}: the first burst ({max(CLIENTS)} clients, before the runs): "
              + ", ".join(f"{k} {v['rps']:.0f} req/s (p99 {_ms(v['p99'])})" for k, v in burst.items()) + ".")
    ran = res.get("compiled_in_runs", {"off": 0, "on": 0})
    print(f"{name}: compilations after ready: jaxport {comp['jaxport_off']:.0f} (batching on: "
          f"{comp['jaxport_on']:.0f}), of which during the measured runs {ran['off']:.0f} ({ran['on']:.0f}); bare, "
          f"one-row traffic after its first requests: {comp['bare_one_row_traffic']:.0f}, in all "
          f"{comp['bare_total']:.0f}. RSS at the end: "
          + ", ".join(f"{k} {common.megabytes(v) if v else '-'}" for k, v in rss.items()) + ".")
    summary.append([f"{name}: padding waste, sizes 1..100 (padded / real; padded / all)", f"<= {GOALS['waste']:.0%}",
                    f"{pad['padded_per_real']:.0%}; {pad['padded_share']:.0%}",
                    _ok(pad["padded_per_real"], GOALS["waste"], False)])
    summary.append([f"{name}: compilations during the measured runs (jaxport; after the first burst)", "0",
                    f"{ran['off']:.0f}; batching {ran['on']:.0f}", "yes" if ran["off"] == 0 and ran["on"] == 0 else
                    "no"])


def report_batch(res: dict, summary: list[list[str]]) -> None:
    print("\n### Batch jobs on the example MLP, and Ray on the 4x1024 MLP (empty compilation cache; median of "
          "runs)\n")
    rows = []
    for engine, sides in res.items():
        rps = {k: _median([r["rows"] / r["seconds"] for r in v]) for k, v in sides.items()}
        ratio = _median([j["seconds"] and (j["rows"] / j["seconds"]) / (g["rows"] / g["seconds"])
                         for j, g in zip(sides["jaxport"], sides["glue"])])
        comp = {k: [r.get("compilations") for r in v] for k, v in sides.items()}

        def c(k: str, comp: dict = comp) -> str:
            vals = [v for v in comp[k] if v is not None]
            return f"{_median(vals):.0f}" if vals else "not read"

        rows.append([engine, str(sides["jaxport"][0]["rows"]), f"{rps['jaxport']:,.0f}", f"{rps['glue']:,.0f}",
                     f"{ratio:.2f}x", c("jaxport"), c("glue")])
        summary.append([f"{engine}: rows/s with start-up, jaxport / hand glue", f">= {GOALS['batch']:.1f}x",
                        f"{ratio:.2f}x", _ok(ratio, GOALS["batch"], True)])
        if engine.startswith("ray"):
            cold = {k: _median([_median(r["cold_start_s"]) for r in v]) for k, v in sides.items()}
            cr = _median([_median(j["cold_start_s"]) / _median(g["cold_start_s"])
                          for j, g in zip(sides["jaxport"], sides["glue"])])
            after = [r.get("after_warmup") for r in sides["jaxport"]]
            print(f"Ray cold start per actor (construction to first batch done, median over actors): jaxport "
                  f"{cold['jaxport']:.2f} s, hand glue {cold['glue']:.2f} s ({cr:.2f}x); jaxport's compilations "
                  f"after warm-up per actor: {after}.")
            summary.append([f"{engine}: cold start per actor, jaxport / hand glue", f"<= {GOALS['cold']}x",
                            f"{cr:.2f}x", _ok(cr, GOALS["cold"], False)])
    print(common.table(["engine", "rows", "jaxport rows/s", "hand glue rows/s", "jaxport / glue",
                        "compilations jaxport", "compilations glue"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="A dry run: 1 run, fewer requests, fewer rows.")
    parser.add_argument("--only", choices=["serve", "batch", "sizes"],
                        help="Only the servers, only the batch jobs, or only the sequence-model case (sizes served, "
                             "ready times: benchmarks/serve_sizes.py).")
    parser.add_argument("--uds", action="store_true",
                        help="The TPU section instead: every server on unix sockets, one at a time, on the host's own "
                             "platform (run it on the TPU host: benchmarks/serve_sizes.py).")
    parser.add_argument("--runs", type=int, help="Runs per figure (default 3; --quick: 1); figures are medians.")
    parser.add_argument("--models", help=f"Models to serve (comma-separated; default {','.join(MODELS)}, with --uds "
                                         f"mlp,mlp4x1024,tagger).")
    parser.add_argument("--client-procs", type=int, default=1,
                        help="Spread the throughput clients over this many processes (default 1: threads only).")
    parser.add_argument("--json", type=Path, default=common.REPO / "out" / "bench_serve.json")
    args = parser.parse_args()
    s = dict(SETTINGS["quick" if args.quick else "full"])
    if args.runs:
        s["runs"] = args.runs
    s["client_procs"] = args.client_procs
    jaxport = common.jaxport_command()
    common.print_machine()
    load = os.getloadavg()
    print(f"Load average at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}. Settings: {s}", flush=True)
    report: dict = {"machine": common.machine(), "settings": s, "quick": args.quick,
                    "load_start": load, "serve": {}, "batch": None}
    summary: list[list[str]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-serve-", dir="/tmp") as d:  # short: unix socket paths
        tmp = Path(d)
        if args.uds:
            import serve_sizes

            report["tpu"] = serve_sizes.tpu_section(sys.modules[__name__], s, tmp, jaxport,
                                                    args.models.split(",") if args.models else None)
            serve_sizes.report_tpu(report["tpu"], summary)
        if args.only in (None, "sizes") and not args.uds:
            import serve_sizes

            report["sizes"] = serve_sizes.sizes_case(sys.modules[__name__], s, tmp, jaxport)
            serve_sizes.report_sizes(report["sizes"], summary)
        if args.only in (None, "serve") and not args.uds:
            for name in (args.models or ",".join(MODELS)).split(","):
                report["serve"][name] = serve_model(name, s, tmp, jaxport)
                report_serve(name, report["serve"][name], summary)
        if args.only in (None, "batch") and not args.uds:
            report["batch"] = batch_jobs(s, s["runs"], tmp, jaxport)
            report_batch(report["batch"], summary)
    report["load_end"] = os.getloadavg()
    report["seconds"] = time.monotonic() - started
    print("\n### Targets\n")
    print(common.table(["ratio", "target", "this run", "met"], summary))
    report["summary"] = summary
    print(f"\nLoad average at the end: {report['load_end'][0]:.2f}; {report['seconds']:.0f} s in all.")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1, default=str))
    print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
