"""What `jaxport export` imports (issue 48): the layers exporting needs, and none it does not (running, verifying,
serving, the policy language), nor ``jax.extend`` (Pallas, checkify) for one helper or rich's live machinery when
stderr is not a terminal. A structural guard on start-up, not a timing test."""

from __future__ import annotations

import subprocess
import sys

from tests.support import EXAMPLES

#: Prefixes of modules `export` never imports, and why: running (`jaxport.run`), verifying, serving, the policy
#: language, `jax.extend`, rich (progress lines instead, on a stderr that is no terminal).
NEVER = ("jaxport.run", "jaxport.verify", "jaxport.serve", "jaxport.artifact.policy", "jax.extend", "rich")

_PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("\\nMODULES " + ",".join(sorted(sys.modules)) + "\\n"))
from jaxport_cli.main import main

sys.argv = ["jaxport", *sys.argv[1:]]
main()
"""


def test_export_imports_only_what_exporting_needs(tmp_path):
    done = subprocess.run([sys.executable, "-c", _PROBE, "export", str(EXAMPLES / "mlp/model.py:predict"), "--shapes",
                           str(EXAMPLES / "mlp/spec.yaml"), "-o", str(tmp_path / "mlp.jaxport")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    modules = done.stderr.rsplit("\nMODULES ", 1)[1].strip().split(",")
    assert "jaxport.export.pipeline" in modules  # the probe saw the export
    assert [m for m in modules if m.startswith(NEVER)] == []


def test_result_load_imports_the_loader_when_called(tmp_path):
    probe = f"""
import sys
import jaxport
result = jaxport.export({str(EXAMPLES / "mlp/model.py:predict")!r}, {str(EXAMPLES / "mlp/spec.yaml")!r})
assert "jaxport.run.load" not in sys.modules, "exported with the loader imported"
f = result.load()
import numpy as np
print(f(np.ones((2, 784), np.float32)).shape)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(2, 10)"
