"""What `jaxport export` imports (issue 48): the layers exporting needs, and none it does not (running, verifying,
serving, the policy language), nor ``jax.extend`` (Pallas, checkify) for one helper or rich's live machinery when
stderr is not a terminal. A structural guard on start-up, not a timing test."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support import EXAMPLES

#: Prefixes of modules `export` never imports, and why: running (`jaxport.run`), verifying, serving, the policy
#: language, `jax.extend`, rich (progress lines instead, on a stderr that is no terminal).
NEVER = ("jaxport.run", "jaxport.verify", "jaxport.serve", "jaxport.artifact.policy", "jax.extend", "rich")
#: The export's optional stages the example's command uses none of: the rules of an older JAX (``--for-jax``).
UNUSED_STAGES = ("jaxport.export.target", "jaxport.artifact.window.compat")

JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]

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
    assert [m for m in modules if m in UNUSED_STAGES] == []


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


#: A model module that watches how the process treats it: its function records whether Python's garbage collector
#: is on while it is traced; at import it registers an ``atexit`` function and a ``weakref.finalize``, and starts a
#: thread that is not a daemon, each of which writes a file when it runs.
_WATCHED_MODEL = """
import atexit, gc, os, threading, time, weakref
import jax.numpy as jnp

OUT = os.environ["WATCH_DIR"]

def _write(name, text):
    with open(os.path.join(OUT, name), "w") as f:
        f.write(text)

class _Held:
    pass

HELD = _Held()
weakref.finalize(HELD, _write, "finalized", "yes")
atexit.register(_write, "atexit", "yes")
threading.Thread(target=lambda: (time.sleep(0.5), _write("thread", "yes"))).start()

def f(x):
    _write("collector", str(gc.isenabled()))
    return jnp.tanh(x)
"""


def test_export_traces_with_the_collector_on_and_ends_as_the_interpreter_would(tmp_path):
    """`jaxport export` starts without Python's garbage collector and ends without the interpreter's teardown
    (``jaxport.collection``, ``environment.exit_without_teardown``): the user's function is traced with the collector
    on, and what the interpreter does at exit that can be seen still happens: threads that are not daemons finish,
    ``atexit`` functions and finalizers run, stdout is complete."""
    (tmp_path / "watched.py").write_text(_WATCHED_MODEL)
    (tmp_path / "spec.yaml").write_text('jaxport: 1\ndims:\n  b: {min: 1, max: 8}\nargs:\n  - "f32[b, 3]"\n')
    env = {**os.environ, "WATCH_DIR": str(tmp_path)}
    done = subprocess.run([*JAXPORT, "export", "watched.py:f", "--shapes", "spec.yaml", "-o", "w.jaxport", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["artifact"] == "w.jaxport"
    assert {name: (tmp_path / name).read_text() for name in ("collector", "atexit", "finalized", "thread")} == {
        "collector": "True", "atexit": "yes", "finalized": "yes", "thread": "yes"}


def test_a_failed_export_keeps_its_exit_code_and_message(tmp_path):
    (tmp_path / "spec.yaml").write_text('jaxport: 1\nargs:\n  - "f32[3]"\n')
    done = subprocess.run([*JAXPORT, "export", "missing.py:f", "--shapes", "spec.yaml", "-o", "w.jaxport"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 4, done.stderr
    assert done.stderr.endswith("error[entrypoint]: entry point 'missing.py:f': file missing.py not found.\n")
    assert not (tmp_path / "w.jaxport").exists()
