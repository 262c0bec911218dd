"""``jaxport serve``'s start-up and stop: what it refuses before it compiles (exact lines, exit codes), its ``--json``
events, and SIGTERM and SIGINT letting the requests in flight finish. Real servers on 127.0.0.1 at ephemeral ports,
in their own processes, queried with plain HTTP and tritonclient; skips without the extra jaxport[serve] or
tritonclient."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import jsonschema
import numpy as np
import pytest

import jaxport
from tests.serve.servers import free_port
from tests.support import REPO

if importlib.util.find_spec("kserve") is None:
    pytest.skip("jaxport serve needs the extra jaxport[serve] (pip install 'jaxport[serve]')", allow_module_level=True)
grpcclient = pytest.importorskip("tritonclient.grpc", reason="the tests' client: pip install 'tritonclient[all]'")

pytestmark = pytest.mark.slow

#: The most seconds a server may take to load, compile every bucket and listen.
READY_S = 240
#: The most seconds a command refused at start-up may take, and a stopped server may take to exit.
EXIT_S = 120
SERVE = [sys.executable, "-c", "from jaxport_cli.main import main; main()", "serve"]
TWICE = "def f(x):\n    return 2.0 * x + 1.0\n"
# The loop's trip count is the request's first value: a request as slow as the test needs, nothing compiled for it.
SLOW = textwrap.dedent("""\
    import jax
    import jax.numpy as jnp


    def f(x):
        n = x[0, 0].astype(jnp.int32)
        _, y = jax.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.sin(c[1]) + 0.5), (0, x))
        return y
    """)
SPEC = 'jaxport: 1\ndims:\n  batch: {min: 1, max: 8}\nargs:\n  - "f32[batch, 3]"\n'
IN_USE = ("error[usage]: {option} {port}: 127.0.0.1:{port} is already in use (another process listens there, "
          "perhaps another 'jaxport serve'); stop it, or give {option} another port.\n")
SCHEMA = json.loads((REPO / "specs" / "schemas" / "cli" / "serve.schema.json").read_text())


def _env(root) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(root / "cache")}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """a.jaxport and b.jaxport (2x+1 on f32[batch, 3], batch <= 8) and slow.jaxport (a loop as long as asked)."""
    root = tmp_path_factory.mktemp("startup")
    for name, src in (("twice", TWICE), ("slow", SLOW)):
        d = root / name
        d.mkdir()
        (d / "model.py").write_text(src)
        (d / "spec.yaml").write_text(SPEC.replace("3]", "2]") if name == "slow" else SPEC)
        jaxport.export(f"{d}/model.py:f", d / "spec.yaml", output=root / f"{name}.jaxport")
    (root / "a.jaxport").write_bytes((root / "twice.jaxport").read_bytes())
    (root / "b.jaxport").write_bytes((root / "twice.jaxport").read_bytes())
    return root


def _serve(work, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """``jaxport serve ARGS`` in ``work``, expected to end by itself: its result and seconds taken."""
    start = time.monotonic()
    res = subprocess.run([*SERVE, *args], cwd=work, env=_env(work), capture_output=True, text=True, timeout=EXIT_S)
    return res, time.monotonic() - start


def _ports(*args: str) -> list[str]:
    return [*args, "--http-port", str(free_port()), "--grpc-port", str(free_port())]


# --- refused before anything compiles ------------------------------------------------------------------------------

def test_missing_artifact_is_refused_at_once_as_call_refuses_it(work):
    res, elapsed = _serve(work, *_ports("missing.jaxport"))
    call = subprocess.run([*SERVE[:-1], "call", "missing.jaxport"], cwd=work, env=_env(work), capture_output=True,
                          text=True, timeout=EXIT_S)
    assert (res.returncode, res.stderr, res.stdout) == (7, "error[format]: missing.jaxport: file not found.\n", "")
    assert (call.returncode, call.stderr) == (res.returncode, res.stderr)
    assert elapsed < 2, f"{elapsed:.2f} s: the artifact must be checked before kserve is imported"


def test_a_file_that_is_not_an_artifact_is_refused_as_call_refuses_it(work):
    (work / "notes.jaxport").write_text("not a zip archive, and longer than twenty-two bytes\n")
    res, elapsed = _serve(work, *_ports("notes.jaxport"))
    call = subprocess.run([*SERVE[:-1], "call", "notes.jaxport"], cwd=work, env=_env(work), capture_output=True,
                          text=True, timeout=EXIT_S)
    assert res.returncode == call.returncode == 7
    assert res.stderr == call.stderr and res.stderr.startswith("error[format]: notes.jaxport: not a jaxport artifact")
    assert res.stderr.count("\n") == 1 and elapsed < 2


def test_missing_artifact_with_json_prints_the_error_object(work):
    res, _ = _serve(work, *_ports("missing.jaxport", "--json"))
    assert res.returncode == 7
    assert json.loads(res.stdout) == {"error": {"kind": "format", "message": "missing.jaxport: file not found.",
                                                "exit_code": 7}}


@pytest.mark.parametrize("args, line", [
    (["a.jaxport", "a.jaxport"],
     "error[usage]: model 'a' version 1 is given twice (a.jaxport and a.jaxport); give each artifact its own name or "
     "version: NAME=ARTIFACT or NAME@VERSION=ARTIFACT.\n"),
    (["m=a.jaxport", "m=b.jaxport"],
     "error[usage]: model 'm' version 1 is given twice (a.jaxport and b.jaxport); give each artifact its own name or "
     "version: NAME=ARTIFACT or NAME@VERSION=ARTIFACT.\n"),
    (["m@2=a.jaxport", "m@2=b.jaxport"],
     "error[usage]: model 'm' version 2 is given twice (a.jaxport and b.jaxport); give each artifact its own name or "
     "version: NAME=ARTIFACT or NAME@VERSION=ARTIFACT.\n"),
], ids=["same file", "same name", "same name and version"])
def test_a_model_given_twice_is_refused_before_loading(work, args, line):
    res, elapsed = _serve(work, *_ports(*args))
    assert (res.returncode, res.stderr, res.stdout) == (2, line, "")  # one line: nothing was loaded or compiled
    assert elapsed < 2


def test_the_same_port_for_rest_and_grpc_is_refused(work):
    port = free_port()
    res, _ = _serve(work, "a.jaxport", "--http-port", str(port), "--grpc-port", str(port))
    assert (res.returncode, res.stderr) == (2, f"error[usage]: --http-port and --grpc-port are both {port}: REST and "
                                               f"gRPC each need a port of their own; give --grpc-port another one.\n")


def test_a_host_that_does_not_resolve_is_refused_before_compiling(work):
    try:
        socket.getaddrinfo("nowhere.invalid", 80, type=socket.SOCK_STREAM)
        pytest.skip("this machine's resolver answers for nowhere.invalid")
    except socket.gaierror as e:
        reason = e.strerror
    res, elapsed = _serve(work, *_ports("a.jaxport", "--host", "nowhere.invalid"))
    assert (res.returncode, res.stderr) == (
        2, f"error[usage]: --host nowhere.invalid: no address found for it ({reason}); give an address of this machine "
           f"(127.0.0.1, or 0.0.0.0 for every interface) or a host name that resolves to one.\n")
    assert elapsed < 2  # checked before kserve is imported


@pytest.mark.parametrize("option", ["--http-port", "--grpc-port"])
def test_a_port_another_process_listens_on_is_refused_before_compiling(work, option):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        other = "--grpc-port" if option == "--http-port" else "--http-port"
        res, _ = _serve(work, "a.jaxport", option, str(port), other, str(free_port()))
    assert (res.returncode, res.stderr) == (2, IN_USE.format(option=option, port=port))


# In a process of its own, as the servers: kserve's protocol buffers and tritonclient's (imported here) collide.
OPEN_MODELS = textwrap.dedent("""\
    import json, sys

    import jaxport.serve
    from jaxport.errors import UsageError
    from jaxport.run.options import LoadOptions

    artifact, cache = sys.argv[1:]
    lines, stages = [], []
    with jaxport.serve.open_models([f"m@2={artifact}"], dims={"batch": [1, 4]}, load=LoadOptions(cache_dir=cache),
                                   window_ms=5, on_line=lines.append, on_stage=stages.append) as served:
        print(json.dumps({"described": [m.as_dict() for m in served], "lines": lines, "stages": stages,
                          "summaries": [m.summary() for m in served]}))
    for args in (dict(load=LoadOptions(runtime="iree")), dict(load=LoadOptions(cache=False)),
                 dict(dims={"rows": [2]})):
        try:
            with jaxport.serve.open_models([artifact], **args):
                pass
        except UsageError as e:
            print(e)
    """)


def test_open_models_is_jaxport_serve_in_python(work):
    """``jaxport.serve.open_models``: what the command prints and reports, from Python, with its refusals."""
    script = work / "open_models.py"
    script.write_text(OPEN_MODELS)
    artifact = work / "a.jaxport"
    res = subprocess.run([sys.executable, str(script), str(artifact), str(work / "cache")], cwd=work, env=_env(work),
                         capture_output=True, text=True, timeout=EXIT_S)
    assert res.returncode == 0, res.stderr[-4000:]
    first, *refusals = res.stdout.splitlines()
    report = json.loads(first)
    (described,) = report["described"]
    assert {k: described[k] for k in ("name", "version", "artifact", "function", "buckets", "batching",
                                      "max_batch_rows")} == {
        "name": "m", "version": "2", "artifact": str(artifact), "function": "f",
        "buckets": [{"batch": 1}, {"batch": 4}], "batching": True, "max_batch_rows": 4}
    assert report["lines"] == report["summaries"] and report["lines"][0].startswith(
        f"m version 2 ({artifact}, function f): 2 buckets compiled (batch in 1, 4), batching up to 4 rows, in ")
    # the start-up's stages, which `jaxport serve` shows on a terminal (issue 57: it was silent until ready)
    assert report["stages"] == ["importing kserve", "checking the programs",
                                "loading m version 2 and compiling its warm-up",
                                "compiling more buckets for up to 0.5 s (--warmup-budget-s)"]
    assert refusals == [
        "runtime 'iree' cannot serve: serving compiles every shape bucket ahead, which the 'jax' runtime does; load "
        "with that one.",
        "a server compiles into JAX's compilation cache and fetches from it: give cache_dir=DIR rather than "
        "cache=False.",
        "--dim rows: the function has no dimension variable 'rows'; it has batch."]


def test_on_a_terminal_the_start_up_shows_its_stages_then_the_servers_lines(work):
    """Issue 57: `jaxport serve` said nothing until its models were warm. On a terminal (TTY_COMPATIBLE=1: what rich
    takes as one) a spinner names each stage of the start-up, erased before each line the server prints; with --json
    or on a pipe, nothing is drawn."""
    import re
    import select

    http, grpc = free_port(), free_port()
    env = {**_env(work), "TTY_COMPATIBLE": "1"}
    proc = subprocess.Popen([*SERVE, "a.jaxport", "--http-port", str(http), "--grpc-port", str(grpc)], cwd=work,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = b""
    try:
        deadline = time.monotonic() + EXIT_S
        while not re.search(rb"\(gRPC\), ready.*\n", seen) and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stderr], [], [], 1)[0]:
                seen += os.read(proc.stderr.fileno(), 65536)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=EXIT_S)
        proc.stderr.close()
    text = re.sub(r"\x1b\[[0-9;]*m", "", seen.decode())
    drawn = [line.strip() for line in re.split(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n", text) if line.strip()]
    stages = {m.group(1) for line in drawn if (m := re.fullmatch(r"\S (.+) \d+:\d\d:\d\d", line))}
    assert stages == {"importing kserve", "checking the programs", "loading a version 1 and compiling its warm-up",
                      "compiling more buckets for up to 0.5 s (--warmup-budget-s)"}, drawn
    assert any(line.startswith("jaxport serve: a version 1 (a.jaxport, function f): ") for line in drawn), drawn
    listening = f"jaxport serve: listening on http://127.0.0.1:{http} (REST) and 127.0.0.1:{grpc} (gRPC), ready"
    assert any(line.startswith(listening) for line in drawn), "\n".join(drawn[-12:])


# --- a running server: its events, a second server on its ports, SIGINT --------------------------------------------

class Running:
    """A ``jaxport serve --json`` process and its stdout events, read by a thread (every wait bounded)."""

    def __init__(self, work, *args: str):
        self.http, self.grpc = free_port(), free_port()
        self.stderr = open(work / f"serve-{self.http}.log", "w+")
        self.proc = subprocess.Popen([*SERVE, *args, "--json", "--host", "127.0.0.1", "--http-port", str(self.http),
                                      "--grpc-port", str(self.grpc)], cwd=work, env=_env(work),
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.events: queue.Queue[dict | None] = queue.Queue()
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            self.events.put(json.loads(line))
        self.events.put(None)

    def next_event(self, timeout: float) -> dict:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            event = None
        if event is None:
            self.stderr.seek(0)
            pytest.fail(f"jaxport serve printed no event in {timeout} s (exit {self.proc.poll()}):\n"
                        f"{self.stderr.read()[-4000:]}")
        return event

    def ready(self) -> tuple[dict, dict]:
        listening = self.next_event(READY_S)
        for port in (self.http, self.grpc):  # listening means both sockets accept connections now
            socket.create_connection(("127.0.0.1", port), timeout=10).close()
        return listening, self.next_event(30)

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=EXIT_S)

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.reader.join(timeout=30)  # the pipe's end, after the process's
        self.proc.stdout.close()
        self.stderr.close()


@pytest.fixture
def running(work):
    started: list[Running] = []

    def start(*args: str) -> Running:
        started.append(Running(work, *args))
        return started[-1]

    yield start
    for r in started:
        r.close()


def test_json_events_a_second_server_on_its_ports_and_sigint(work, running):
    server = running("m@1=a.jaxport", "m@2=b.jaxport", "--dim", "batch=1,4", "--batch-window-ms", "5")
    listening, ready = server.ready()
    assert listening == {"event": "listening", "host": "127.0.0.1", "http_port": server.http,
                         "grpc_port": server.grpc, "rest": f"http://127.0.0.1:{server.http}",
                         "grpc": f"127.0.0.1:{server.grpc}",
                         "models": [{"name": "m", "version": "1"}, {"name": "m", "version": "2"}]}
    assert ready["event"] == "ready"
    assert [(m["name"], m["version"], m["artifact"], m["function"], m["buckets"], m["batching"], m["max_batch_rows"])
            for m in ready["models"]] == [("m", "1", "a.jaxport", "f", [{"batch": 1}, {"batch": 4}], True, 4),
                                          ("m", "2", "b.jaxport", "f", [{"batch": 1}, {"batch": 4}], True, 4)]
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http}/v2/health/ready", timeout=30) as r:
        assert r.status == 200
    # Another jaxport serve on either port is refused before it compiles; gRPC's SO_REUSEPORT would have let it
    # share the gRPC port.
    for option, port, other in (("--grpc-port", server.grpc, "--http-port"),
                                ("--http-port", server.http, "--grpc-port")):
        res, _ = _serve(work, "a.jaxport", option, str(port), other, str(free_port()))
        assert (res.returncode, res.stderr) == (2, IN_USE.format(option=option, port=port))
    assert server.stop(signal.SIGINT) == 130
    assert server.next_event(30) == {"event": "stopped", "signal": "SIGINT", "exit_code": 130}
    assert server.log().endswith("jaxport serve: stopped by SIGINT (Ctrl-C); every request in flight was "
                                 "answered\n")  # a stop as it should be: no error line
    assert len(server.lines) == 3 and all(line.endswith("}\n") for line in server.lines)
    for line in server.lines:  # one JSON object per line, each valid
        jsonschema.validate(json.loads(line), SCHEMA)


def test_sigterm_lets_the_requests_in_flight_finish_then_exits_143(work, running):
    """A REST and a gRPC request, each seconds long, are in flight when SIGTERM comes: both are answered with
    what the function called directly gives, after the signal, and then the process exits 143."""
    direct = jaxport.load(work / "slow.jaxport")
    n = 1e8  # loop iterations: 1 to 4 s a request on CPUs of today (30 ns an iteration here)
    x = np.array([[n, 0.1], [0.0, -0.3]], np.float32)
    expected = np.asarray(direct(x))
    server = running("slow.jaxport", "--dim", "batch=2")
    server.ready()
    answers: dict[str, tuple[float, np.ndarray | BaseException]] = {}

    def rest() -> None:
        body = {"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": x.ravel().tolist()}]}
        req = urllib.request.Request(f"http://127.0.0.1:{server.http}/v2/models/slow/infer",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=EXIT_S) as r:
                out = json.loads(r.read())["outputs"][0]
            answers["rest"] = (time.monotonic(), np.array(out["data"], np.float32).reshape(out["shape"]))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            answers["rest"] = (time.monotonic(), e)

    def grpc() -> None:
        try:
            client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{server.grpc}")
            inp = grpcclient.InferInput("x", [2, 2], "FP32")
            inp.set_data_from_numpy(x)
            out = client.infer("slow", [inp], client_timeout=EXIT_S).as_numpy("output")
            answers["grpc"] = (time.monotonic(), out)
        except BaseException as e:  # noqa: BLE001
            answers["grpc"] = (time.monotonic(), e)

    threads = [threading.Thread(target=t, daemon=True) for t in (rest, grpc)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # both requests reach the server (it runs them one after the other)
    signalled = time.monotonic()
    assert "rest" not in answers and "grpc" not in answers, "a request ended before the signal: make it longer"
    code = server.stop(signal.SIGTERM)
    for t in threads:
        t.join(timeout=EXIT_S)
    assert code == 143, server.log()[-4000:]
    for protocol in ("rest", "grpc"):
        when, got = answers[protocol]
        assert not isinstance(got, BaseException), f"{protocol}: {got!r}\n{server.log()[-4000:]}"
        assert when > signalled
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert server.next_event(30) == {"event": "stopped", "signal": "SIGTERM", "exit_code": 143}
    assert server.log().endswith("jaxport serve: stopped by SIGTERM; every request in flight was answered\n")


# --- the real bind, after warm-up ----------------------------------------------------------------------------------

RACE = textwrap.dedent("""\
    import socket, sys
    from concurrent import futures

    import grpc
    from prometheus_client import REGISTRY

    import jaxport
    from jaxport.errors import UsageError
    from jaxport.serve.transport import kserve_server
    from jaxport.serve.batching import Batched

    batched = Batched(jaxport.load(sys.argv[1]), {"batch": [1]})
    batched.warmup()
    free = [int(p) for p in sys.argv[2:]]
    # A port taken between the check and the bind: by a gRPC server that sets SO_REUSEPORT (gRPC's default), then
    # by a plain listening socket.
    other = grpc.server(futures.ThreadPoolExecutor(1))
    taken_grpc = other.add_insecure_port("127.0.0.1:0")
    other.start()
    plain = socket.socket()
    plain.bind(("127.0.0.1", 0))
    plain.listen()
    taken_http = plain.getsockname()[1]
    print("taken", taken_grpc, taken_http, flush=True)
    for http, grpc_port in ((free[0], taken_grpc), (taken_http, free[1])):
        server = kserve_server.Server([kserve_server.JaxportModel("m", "1", batched)], http_port=http,
                                      grpc_port=grpc_port)
        try:
            server.serve(lambda: print("listening", flush=True))
        except UsageError as e:
            print(f"UsageError: {e}", flush=True)
        REGISTRY.unregister(server.metrics)
    other.stop(None)
    """)


def test_a_port_taken_after_the_check_is_a_usage_error(work):
    """``Server.serve`` itself (what 'jaxport serve' runs after warm-up, whose UsageError the command line reports
    as error[usage], exit 2): a gRPC port taken by a server with SO_REUSEPORT, then a REST port taken."""
    script = work / "race.py"
    script.write_text(RACE)
    http, grpc_port = free_port(), free_port()
    res = subprocess.run([sys.executable, str(script), str(work / "a.jaxport"), str(http), str(grpc_port)], cwd=work,
                         env=_env(work), capture_output=True, text=True, timeout=EXIT_S)
    assert res.returncode == 0, res.stderr[-4000:]
    taken, *lines = res.stdout.splitlines()
    taken_grpc, taken_http = (int(p) for p in taken.split()[1:])
    assert lines == [f"UsageError: {IN_USE.format(option='--grpc-port', port=taken_grpc)[len('error[usage]: '):-1]}",
                     f"UsageError: {IN_USE.format(option='--http-port', port=taken_http)[len('error[usage]: '):-1]}"]
