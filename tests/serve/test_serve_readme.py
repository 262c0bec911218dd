"""The README's requests to ``jaxport serve`` ("Serving and batch inference") run as written: the curl block in a
shell and the tritonclient snippet in Python, against a real server of the quick start's mlp.jaxport on 127.0.0.1.

The README's server listens on ports 8080 and 8081; the test's listens on free ephemeral ports, so the blocks are
run with ``127.0.0.1:8080`` and ``127.0.0.1:8081`` replaced by those (the only change to their text). Skips without
the extra jaxport[serve], tritonclient or curl."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from tests.serve.servers import free_port, serving
from tests.support import EXAMPLES, REPO

if importlib.util.find_spec("kserve") is None:
    pytest.skip("jaxport serve needs the extra jaxport[serve] (pip install 'jaxport[serve]')", allow_module_level=True)
pytest.importorskip("tritonclient.grpc", reason="the README's client: pip install 'tritonclient[grpc]'")

pytestmark = pytest.mark.slow

SECTION = (REPO / "README.md").read_text().split("## Serving and batch inference", 1)[1].split("\n## ", 1)[0]
#: The most seconds the server may take to load, compile every bucket and report ready.
READY_S = 240


def _block(language: str, containing: str) -> str:
    (block,) = [b for b in re.findall(rf"```{language}\n(.*?)```", SECTION, re.S) if containing in b]
    return block


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A directory with the examples and the quick start's mlp.jaxport, served on free ports: (directory, the
    README's text for a block with those ports put in)."""
    d = tmp_path_factory.mktemp("readme-serve")
    shutil.copytree(EXAMPLES, d / "examples")
    jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=d / "mlp.jaxport")
    http, grpc = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(d / "cache")}
    with open(d / "server.log", "w+") as log, serving(["mlp.jaxport", "--dim", "batch=1,4", "--http-port", str(http),
                                                         "--grpc-port", str(grpc)], http=http, env=env, log=log,
                                                        ready_s=READY_S, cwd=d):

        def ported(text: str) -> str:
            assert "127.0.0.1:8080" in text or "127.0.0.1:8081" in text
            return text.replace("127.0.0.1:8080", f"127.0.0.1:{http}").replace("127.0.0.1:8081", f"127.0.0.1:{grpc}")

        yield d, ported


@pytest.fixture(scope="module")
def expected(served) -> np.ndarray:
    d, _ = served
    return np.asarray(jaxport.load(d / "mlp.jaxport")(np.load(d / "examples" / "mlp" / "x.npy")))


def test_the_curl_request_runs_as_written(served, expected):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    d, ported = served
    block = ported(_block("sh", "/v2/models/mlp/infer"))
    lines = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert [line.split()[0] for line in lines] == ["python", "curl"]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # its numpy
    for line in lines:
        res = subprocess.run(["bash", "-c", line], cwd=d, env=env, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, f"{line}\n{res.stderr}"
    answer = json.loads(res.stdout)
    assert (answer["model_name"], answer["model_version"]) == ("mlp", "1")
    (out,) = answer["outputs"]
    assert (out["name"], out["shape"], out["datatype"]) == ("output", [4, 10], "FP32")
    np.testing.assert_allclose(np.array(out["data"], np.float32).reshape(4, 10), expected, rtol=1e-5, atol=1e-6)


def test_the_tritonclient_snippet_runs_as_written(served, expected, monkeypatch, capsys):
    d, ported = served
    block = _block("python", "import tritonclient")
    monkeypatch.chdir(d)
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(ported(block), "README.md", "exec"), namespace)  # noqa: S102 - the README's own snippet
    np.testing.assert_allclose(namespace["scores"], expected, rtol=1e-5, atol=1e-6)
    assert capsys.readouterr().out == f"{expected.argmax(axis=1)}\n"
