"""``jaxport serve --uds PATH``: REST on a unix socket at PATH and gRPC on PATH.grpc, no TCP port (a TPU host may open
none). Queried with curl (``--unix-socket``) and tritonclient (gRPC target ``unix:PATH.grpc``), with JAX_PLATFORMS
set to cpu and unset; the socket files' mode, their removal at the end, and what is refused before anything compiles
(exact lines, exit 2). Skips without the extra jaxport[serve], tritonclient or curl."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys

import numpy as np
import pytest

import jaxport
from tests.support import REPO

if importlib.util.find_spec("kserve") is None:
    pytest.skip("jaxport serve needs the extra jaxport[serve] (pip install 'jaxport[serve]')", allow_module_level=True)
grpcclient = pytest.importorskip("tritonclient.grpc", reason="the tests' client: pip install 'tritonclient[all]'")
if shutil.which("curl") is None:
    pytest.skip("the REST client of these tests is curl", allow_module_level=True)

pytestmark = pytest.mark.slow

READY_S = 240
EXIT_S = 120
SERVE = [sys.executable, "-c", "from jaxport_cli.main import main; main()", "serve"]
ROWS = "def f(x):\n    return 2.0 * x + 1.0\n"
SPEC = 'jaxport: 1\ndims:\n  batch: {min: 1, max: 8}\nargs:\n  - "f32[batch, 3]"\n'


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    # a short directory: a unix socket's path holds at most 107 bytes
    root = tmp_path_factory.mktemp("uds")
    d = root / "m"
    d.mkdir()
    (d / "model.py").write_text(ROWS)
    (d / "spec.yaml").write_text(SPEC)
    jaxport.export(f"{d}/model.py:f", d / "spec.yaml", output=root / "rows.jaxport")
    return root


def _env(work, platforms: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(work / "cache")}
    env.pop("JAX_PLATFORMS", None)
    if platforms is not None:
        env["JAX_PLATFORMS"] = platforms
    return env


def _curl(*args: str) -> tuple[int, str]:
    res = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=60)
    body, _, code = res.stdout.rpartition("\n")
    return int(code), body


@pytest.mark.parametrize("platforms", ["cpu", None], ids=["JAX_PLATFORMS=cpu", "JAX_PLATFORMS unset"])
def test_rest_and_grpc_on_unix_sockets_answer_curl_and_tritonclient(work, platforms):
    sock = work / f"s-{platforms}.sock"
    proc = subprocess.Popen([*SERVE, "rows.jaxport", "--uds", str(sock), "--json"], cwd=work,
                            env=_env(work, platforms), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        listening = json.loads(proc.stdout.readline() or "{}")  # bounded: the process ends or prints
        assert listening == {"event": "listening", "uds": str(sock), "grpc_uds": f"{sock}.grpc", "uds_mode": "0600",
                             "rest": f"unix:{sock}", "grpc": f"unix:{sock}.grpc",
                             "models": [{"name": "rows", "version": "1"}]}, proc.stderr.read()[-3000:] \
            if proc.poll() is not None else listening
        assert json.loads(proc.stdout.readline())["event"] == "ready"
        for path in (sock, sock.with_name(sock.name + ".grpc")):
            mode = os.stat(path).st_mode
            assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert _curl("--unix-socket", str(sock), "http://localhost/v2/health/ready") == (200, '{"ready":true}')
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        body = json.dumps({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": x.ravel().tolist()}]})
        code, text = _curl("--unix-socket", str(sock), "-X", "POST", "-H", "Content-Type: application/json", "-d",
                           body, "http://localhost/v2/models/rows/infer")
        assert code == 200, text
        (out,) = json.loads(text)["outputs"]
        assert (out["shape"], out["data"]) == ([2, 3], (2 * x + 1).ravel().tolist())
        client = grpcclient.InferenceServerClient(url=f"unix:{sock}.grpc")
        inp = grpcclient.InferInput("x", [2, 3], "FP32")
        inp.set_data_from_numpy(x)
        np.testing.assert_array_equal(client.infer("rows", [inp], client_timeout=60).as_numpy("output"), 2 * x + 1)
        client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=EXIT_S) == 143
        assert json.loads(proc.stdout.readline()) == {"event": "stopped", "signal": "SIGTERM", "exit_code": 143}
        assert not sock.exists() and not sock.with_name(sock.name + ".grpc").exists()  # both removed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


def test_uds_mode_and_a_socket_left_by_a_killed_server_is_replaced(work):
    sock = work / "m.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock))  # bound, never listening, closed: what a killed server leaves
    stale.close()
    proc = subprocess.Popen([*SERVE, "rows.jaxport", "--uds", str(sock), "--uds-mode", "660", "--json"], cwd=work,
                            env=_env(work, "cpu"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert json.loads(proc.stdout.readline() or "{}").get("uds_mode") == "0660"
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o660
        assert _curl("--unix-socket", str(sock), "http://localhost/v2/health/ready")[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=EXIT_S)
        proc.stdout.close()


def test_what_uds_refuses_before_anything_compiles(work):
    def refused(*args: str) -> tuple[int, str]:
        res = subprocess.run([*SERVE, "rows.jaxport", *args], cwd=work, env=_env(work, "cpu"), capture_output=True,
                             text=True, timeout=EXIT_S)
        assert res.stdout == ""
        return res.returncode, res.stderr

    long = "x" * 100 + ".sock"
    assert refused("--uds", long) == (2, f"error[usage]: --uds {long}: the gRPC socket's path {long}.grpc is 110 "
                                         f"bytes, more than the 107 a unix socket's address holds; give a shorter "
                                         f"path (a relative one, or in /tmp).\n")
    (work / "plain.sock").write_text("not a socket")
    assert refused("--uds", "plain.sock") == (2, "error[usage]: --uds plain.sock: plain.sock exists and is not a "
                                                 "socket; remove it, or give --uds another path.\n")
    assert refused("--uds", "missing/s.sock") == (2, f"error[usage]: --uds missing/s.sock: {work / 'missing'} is not "
                                                     f"a directory; create it, or give a path in one.\n")
    live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    live.bind(str(work / "busy.sock.grpc"))
    live.listen()
    try:
        assert refused("--uds", "busy.sock") == (2, "error[usage]: --uds busy.sock: busy.sock.grpc is in use (another "
                                                    "process listens there, perhaps another 'jaxport serve'); stop "
                                                    "it, or give --uds another path.\n")
    finally:
        live.close()
    assert refused("--uds", "a.sock", "--http-port", "8080", "--host", "0.0.0.0") == (
        2, "error[usage]: --uds serves on unix sockets, not TCP: leave out --host, --http-port.\n")
    assert refused("--uds", "a.sock", "--uds-mode", "999") == (
        2, "error[usage]: --uds-mode 999: give permission bits in octal (at most 777), such as 600 or 660.\n")
    assert not (work / "a.sock").exists() and not (work / "plain.sock.grpc").exists()


def test_the_readmes_unix_socket_lines_run_as_written(work):
    """README, "Serving and batch inference": the client lines of the --uds block, the socket path made the test's."""
    section = (REPO / "README.md").read_text().split("## Serving and batch inference", 1)[1].split("\n## ", 1)[0]
    (block,) = [b for b in section.split("```sh\n")[1:] if "--unix-socket" in b]
    block = block.split("```", 1)[0]
    serve_line, *client = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert serve_line.startswith("jaxport serve mlp.jaxport --uds /tmp/mlp.sock")
    sock = work / "r.sock"
    (work / "mlp.jaxport").write_bytes((work / "rows.jaxport").read_bytes())
    proc = subprocess.Popen([*SERVE, "mlp.jaxport", "--uds", str(sock), "--json"], cwd=work, env=_env(work, "cpu"),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert json.loads(proc.stdout.readline() or "{}").get("event") == "listening"
        outputs = []
        for line in client:
            line = line.replace("/tmp/mlp.sock", str(sock)).replace("python -c", f"{sys.executable} -c")
            res = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr[-2000:]
            outputs.append(res.stdout.strip())
        assert outputs == ['{"ready":true}', "True"]
    finally:
        proc.terminate()
        proc.wait(timeout=EXIT_S)
        proc.stdout.close()
