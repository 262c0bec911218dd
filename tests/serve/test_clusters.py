"""The batch adapters on real clusters, each node or daemon its own process on 127.0.0.1: Ray Data on a two-node
Ray cluster (``ray start --head`` and ``ray start --address``) and Spark standalone (a Master and a Worker started
with ``spark-class``). The artifact reaches the workers only by the engine's own transfer (Ray's object store,
``SparkContext.addFile``): the driver's file is gone, or never was, and each node has its own user cache. Every
output is compared with the function called directly on the driver, and the compilation counts are exact. Every
process started here is stopped (by its id, with its children) in the fixture's teardown; every wait is bounded.
Each test skips when its engine is not installed (``make test-serve``'s environment) or Java is missing."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import jaxport
from tests.serve.servers import free_port
from tests.support import REPO

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

#: 2x+1 and a row sum, batch bounded at 256; the jobs use the buckets 32 and 128 and batches of 100.
MODEL = "def f(x):\n    return {'y': 2.0 * x + 1.0, 's': x.sum(axis=1)}\n"
SPEC = "jaxport: 1\ndims:\n  batch: {min: 1, max: 256}\nargs:\n  - \"f32[batch, 3]\"\n"
DIMS = {"batch": [32, 128]}
BATCH = 100
WAIT_S = 90  # the most any start-up may take on two busy cores


def _needs(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs the extra jaxport[{extra}] (pip install 'jaxport[{extra}]'; make test-serve)")


def _until(what: str, check, log: Path | None = None, limit: float = WAIT_S):
    """Poll ``check`` until it returns something true, for at most ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            value = check()
            if value:
                return value
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(f"{what}: not within {limit} s\n{tail}")


def _children(pid: int) -> list[int]:
    """The descendants of ``pid`` (from /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Processes:
    """Processes this test starts; :meth:`stop` ends each, and its descendants, by pid."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.started: list[subprocess.Popen] = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> Path:
        log = self.logs / f"{name}.log"
        with open(log, "wb") as out:
            self.started.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                                 stdin=subprocess.DEVNULL, start_new_session=True))
        return log

    def stop(self) -> None:
        pids = []
        for p in self.started:
            pids += [p.pid, *_children(p.pid)]
        for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace
            for p in self.started:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
            pids = [pid for pid in pids if Path(f"/proc/{pid}").exists() and
                    "zombie" not in _state(pid)]
            if not pids:
                return


def _state(pid: int) -> str:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.lower()
    return "zombie"


@pytest.fixture
def processes(tmp_path):
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop()


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """The artifact's bytes and the function called directly on the driver (``jaxport.load``), then the file
    deleted: the clusters get the bytes only."""
    d = tmp_path_factory.mktemp("cluster-artifact")
    (d / "model.py").write_text(MODEL)
    (d / "spec.yaml").write_text(SPEC)
    path = d / "f.jaxport"
    jaxport.export(f"{d}/model.py:f", d / "spec.yaml", output=path)
    data = Path(path).read_bytes()
    loaded = jaxport.load(path)

    def direct(x: np.ndarray) -> dict[str, np.ndarray]:
        parts = [dict(loaded.leaves(loaded(x[i:i + 256]))) for i in range(0, len(x), 256)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    shutil.rmtree(d)
    return data, direct


def _node_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SPARK_", "PYSPARK_"))}
    env.update(JAXPORT_CACHE_DIR=str(cache), PYTHONPATH=str(REPO), RAY_USAGE_STATS_ENABLED="0",
               PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return env


#: The Ray driver, its own process (Ray keeps its connection and authentication state per process): a Ray Data job
#: over 1600 rows in 16 blocks on two actors, the artifact passed only as an ObjectRef to its bytes.
RAY_DRIVER = """
import sys
import time
from pathlib import Path

import numpy as np
import ray

import jaxport.ray


@ray.remote(num_cpus=0)
class Barrier:
    def __init__(self):
        self.arrived = 0

    def arrive(self):
        self.arrived += 1

    def count(self):
        return self.arrived


class NodePredictor:
    # jaxport.ray.Predictor plus the id of the node each batch ran on; an actor is ready once both are (or the
    # first would run every batch while the second still starts)

    def __init__(self, *args, **kwargs):
        self.predictor = jaxport.ray.Predictor(*args, **kwargs)
        barrier = ray.get_actor("barrier")
        ray.get(barrier.arrive.remote())
        deadline = time.monotonic() + 120
        while ray.get(barrier.count.remote()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)

    def __call__(self, batch):
        out = self.predictor(batch)
        out["node"] = np.full(len(out["y"]), ray.get_runtime_context().get_node_id())
        return out


address, artifact, result = sys.argv[1:]
ray.init(address=address, logging_level="ERROR", log_to_driver=False)
ray.data.DataContext.get_current().actor_locality_enabled = False  # spread the blocks over both actors
barrier = Barrier.options(name="barrier").remote()
ref = ray.put(Path(artifact).read_bytes())
Path(artifact).unlink()  # the ObjectRef is the only copy the cluster gets
x = np.random.default_rng(7).standard_normal((1600, 3), dtype=np.float32)
ds = ray.data.from_numpy(np.array_split(x, 16)).rename_columns({"data": "x"})
out = ds.map_batches(NodePredictor, fn_constructor_args=(ref,),
                     fn_constructor_kwargs={"dims": {"batch": [32, 128]}, "batch_size": 100,
                                            "report_compilations": True},
                     batch_size=100, concurrency=2, num_cpus=1).take_all()
np.savez(result, sent=x, **{k: np.stack([r[k] for r in out]) for k in out[0]},
         alive=np.array(sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])))
ray.shutdown()
"""


def test_ray_data_on_two_nodes(artifact, processes, tmp_path):
    _needs("ray", "ray")
    data, direct = artifact
    digest = hashlib.sha256(data).hexdigest()
    # this cluster's own token (Ray turns token authentication on where ~/.ray/auth_token exists)
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.urandom(16).hex()}
    ray_cli = str(Path(sys.executable).parent / "ray")
    temp = Path(tempfile.mkdtemp(prefix="jxray", dir="/tmp"))  # short: Ray's socket paths live under it
    caches = [tmp_path / "head-cache", tmp_path / "node-cache"]
    port = free_port()
    common = ["--block", "--num-cpus=1", "--node-ip-address=127.0.0.1", "--object-store-memory=100000000",
              "--disable-usage-stats", "--include-log-monitor=false"]
    try:
        head = processes.start("ray-head", [ray_cli, "start", "--head", f"--port={port}", "--include-dashboard=false",
                                            f"--temp-dir={temp}", f"--ray-client-server-port={free_port()}",
                                            f"--dashboard-agent-listen-port={free_port()}", *common],
                               {**_node_env(caches[0]), **token})
        _until("the Ray head's GCS listening", lambda: socket.create_connection(("127.0.0.1", port), 1).close() or 1,
               head)
        processes.start("ray-node", [ray_cli, "start", f"--address=127.0.0.1:{port}",
                                     f"--dashboard-agent-listen-port={free_port()}", *common],
                        {**_node_env(caches[1]), **token})
        (tmp_path / "driver.py").write_text(RAY_DRIVER)
        (tmp_path / "f.jaxport").write_bytes(data)
        driver = subprocess.run([sys.executable, str(tmp_path / "driver.py"), f"127.0.0.1:{port}",
                                 str(tmp_path / "f.jaxport"), str(tmp_path / "out.npz")], capture_output=True,
                                text=True, timeout=240, env={**_node_env(tmp_path / "driver-cache"), **token})
        assert driver.returncode == 0, driver.stdout[-3000:] + driver.stderr[-5000:]
    finally:
        processes.stop()
        shutil.rmtree(temp, ignore_errors=True)
    out = dict(np.load(tmp_path / "out.npz"))
    assert not (tmp_path / "f.jaxport").exists()
    assert len(out["x"]) == 1600
    assert sorted(map(tuple, out["x"].tolist())) == sorted(map(tuple, out["sent"].tolist()))
    expected = direct(out["x"])
    np.testing.assert_allclose(out["y"], expected["y"], rtol=1e-6)
    np.testing.assert_allclose(out["s"], expected["s"], rtol=1e-5, atol=1e-6)
    assert len(out["alive"]) == 2 and set(out["node"].tolist()) == set(out["alive"].tolist())  # both nodes ran
    # one program per actor (bucket 128 for batches of 100, ragged ones padded to it), none after it
    assert set(out["jaxport_compilations"].tolist()) == {0}
    assert set(out["jaxport_compilations_total"].tolist()) == {1}
    for cache in caches:  # each node wrote the bytes it received, once, to its own user cache
        assert (cache / "artifacts" / f"{digest}.jaxport").read_bytes() == data


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def test_spark_standalone(artifact, processes, tmp_path, monkeypatch, run_cli):
    _needs("pyspark", "spark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    from pyspark.sql import SparkSession

    import jaxport.spark

    data, direct = artifact
    digest = hashlib.sha256(data).hexdigest()
    monkeypatch.setenv("JAXPORT_CACHE_DIR", str(tmp_path / "driver-cache"))
    # the compilation cache a job ships: `jaxport warmup` on the driver, packed as an archive for spark.archives
    (tmp_path / "f.jaxport").write_bytes(data)
    warm = tmp_path / "warm-cache"
    result = run_cli("warmup", tmp_path / "f.jaxport", "--dim", "batch=128", "--cache-dir", warm)
    assert result.exit_code == 0, result.stdout + result.stderr
    (tmp_path / "f.jaxport").unlink()
    archive = tmp_path / "cache.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for entry in sorted(warm.iterdir()):
            tar.add(entry, arcname=entry.name)

    spark_class = str(_spark_home() / "bin" / "spark-class")
    env = _node_env(tmp_path / "executor-cache")
    env.update(SPARK_HOME=str(_spark_home()), SPARK_DAEMON_MEMORY="512m")
    port, ui = free_port(), free_port()
    master = processes.start("spark-master", [spark_class, "org.apache.spark.deploy.master.Master", "--host",
                                              "127.0.0.1", "--port", str(port), "--webui-port", str(ui)], env)

    def workers_alive() -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
            return sum(w["state"] == "ALIVE" for w in json.load(r)["workers"])

    _until("the Spark master's UI", lambda: workers_alive() + 1, master)
    work = tmp_path / "work"
    worker = processes.start("spark-worker", [spark_class, "org.apache.spark.deploy.worker.Worker",
                                              f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "2",
                                              "--memory", "2g", "--work-dir", str(work), "--webui-port",
                                              str(free_port())], env)
    _until("a Spark worker registered", lambda: workers_alive() == 1, worker)

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(f"spark://127.0.0.1:{port}").appName("jaxport-test-clusters")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.executor.memory", "1g")
             .config("spark.cores.max", "2").config("spark.pyspark.python", sys.executable)
             .config("spark.executorEnv.JAXPORT_CACHE_DIR", str(tmp_path / "executor-cache"))
             .config("spark.archives", f"{archive}#jaxport-cache").getOrCreate())
    try:
        x = np.random.default_rng(8).standard_normal((600, 3), dtype=np.float32)
        df = spark.createDataFrame(spark.sparkContext.parallelize([(i, r.tolist()) for i, r in enumerate(x)], 3),
                                   "id long, x array<float>")
        counts = jaxport.spark.metrics(spark)
        udf = jaxport.spark.predict_udf(data, dims=DIMS, batch_size=BATCH, cache_dir="jaxport-cache",
                                        metrics=counts)
        rows = sorted(df.withColumn("out", udf("x")).select("id", "out").collect(), key=lambda r: r["id"])

        assert [r["id"] for r in rows] == list(range(len(x)))
        expected = direct(x)
        np.testing.assert_allclose(np.array([r["out"]["y"] for r in rows], np.float32), expected["y"], rtol=1e-6)
        np.testing.assert_allclose(np.array([r["out"]["s"] for r in rows], np.float32), expected["s"], rtol=1e-5,
                                   atol=1e-6)
        value = dict(counts.value)
        workers = value.pop("workers")
        assert 1 <= workers <= 3  # Python workers: one per task at most, reused across tasks
        # each worker fetched its one program (bucket 128) from the shipped cache: compiled nothing
        assert value == {"rows": 600, "program_calls": 6, "compilations": workers,
                         "compilation_cache_hits": workers, "compilations_after_warmup": 0}
        # the executor got the artifact from Spark (addFile under its content's name), not from a driver's path
        shipped = list(work.glob(f"app-*/*/{digest}.jaxport"))
        assert shipped and all(p.read_bytes() == data for p in shipped)
    finally:
        spark.stop()
