"""Several processes: two `jaxport call` processes on localhost joined by jax.distributed, each with 4 simulated
devices, run the 8-device sharded example and get the single-process result."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

import jaxport
from tests.support import EXAMPLES


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*args: str, cwd) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.Popen([sys.executable, "-c", "from jaxport_cli.main import main; main()", "call", *args],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_two_processes_match_one(tmp_path, monkeypatch):
    for name in ("model.py", "spec.yaml", "params.npz", "x.npy"):
        shutil.copy(EXAMPLES / "sharded" / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    jaxport.export("model.py:predict", "spec.yaml", output="predict.jaxport")
    common = ("predict.jaxport", "--inputs", "x.npy", "--no-cache", "--json")
    port = _free_port()
    group = ("--host-devices", "4", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2")
    procs = [_start(*common, *group, "--process-id", str(i), "-o", f"out{i}.npy", cwd=tmp_path) for i in (0, 1)]
    single = _start(*common, "--host-devices", "8", "-o", "single.npy", cwd=tmp_path)
    results = []
    for p in [*procs, single]:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        results.append(json.loads(out))  # one JSON document: what gloo prints goes to stderr
    assert [r["devices"] for r in results] == [
        {"devices": 8, "mesh": "data=4 x model=2", "process_index": 0, "process_count": 2},
        {"devices": 8, "mesh": "data=4 x model=2", "process_index": 1, "process_count": 2},
        {"devices": 8, "mesh": "data=4 x model=2", "process_index": 0, "process_count": 1}]
    # every process gets the whole result
    assert results[0]["outputs"] == results[1]["outputs"]
    single = np.load(tmp_path / "single.npy")
    for i in (0, 1):
        np.testing.assert_allclose(np.load(tmp_path / f"out{i}.npy"), single, rtol=1e-6, atol=1e-6)
