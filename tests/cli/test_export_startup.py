"""What `jaxport export` imports (issue 48): the layers exporting needs, and none it does not (running, verifying,
serving, the policy language), nor ``jax.extend`` (Pallas, checkify) for one helper or rich's live machinery when
stderr is not a terminal. A structural guard on start-up, not a timing test.

And how the process ends (issue 54): as plain Python ends, whatever the user's module left running (thread and
process pools, a thread waiting for an event, a file never closed), a signal during that end ending it as at every
other moment, a closed stdout or stderr handled as the documentation says, and the garbage a module makes while it
imports collected, not kept."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import EXAMPLES, GOLDEN_MLP

#: Prefixes of modules `export` never imports, and why: running (`jaxport.run`), verifying, serving, the policy
#: language, `jax.extend`, rich (progress lines instead, on a stderr that is no terminal).
NEVER = ("jaxport.run", "jaxport.verify", "jaxport.serve", "jaxport.artifact.policy", "jax.extend", "rich")
#: The export's optional stages the example's command uses none of: the rules of an older JAX (``--for-jax``).
UNUSED_STAGES = ("jaxport.export.writing.target", "jaxport.artifact.window.compat")

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
    """`jaxport export` imports jaxport and JAX without Python's garbage collector (``jaxport.collection``) and ends
    as the interpreter does: the user's function is traced with the collector on, threads that are not daemons
    finish, ``atexit`` functions and finalizers run, stdout is complete."""
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


_SPEC = 'jaxport: 1\nargs:\n  - "f32[3]"\n'
#: The line of a command that a signal ended (``jaxport.interrupts``).
_STOPPED = "error[interrupted]: stopped by {}; every output is as it was or complete, and no temporary file is left\n"
#: The line of a command whose stdout was closed (``>&-``) when it started.
_CLOSED_STDOUT = ("error[output]: cannot write the standard output: it is closed (the command was started with >&-). "
                  "Redirect the output to a file, or to /dev/null to discard it.\n")


def _model(tmp_path: Path, name: str, body: str) -> list[str]:
    """A model module ``name.py`` that runs ``body`` at import (``_write(NAME, TEXT)`` writes a file beside it), its
    spec, and the command that exports it with --json."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""\
        import os
        import jax.numpy as jnp

        def _write(name, text):
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), "w") as f:
                f.write(text)

        def f(x):
            return jnp.tanh(x)
        """) + textwrap.dedent(body))
    (tmp_path / "spec.yaml").write_text(_SPEC)
    return [*JAXPORT, "export", f"{name}.py:f", "--shapes", "spec.yaml", "-o", f"{name}.jaxport", "--json"]


def _run(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``args`` run to its end, in a session of its own, its output in files (a pool's worker that outlived it would
    hold a pipe open): if it has not ended within ``timeout`` seconds, its whole process group is killed and the
    test fails; what it left running when it ended is killed too."""
    out_path, err_path = cwd / "stdout.txt", cwd / "stderr.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(args, stdout=out, stderr=err, cwd=cwd, start_new_session=True)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if code is None:
        pytest.fail(f"{' '.join(args)} did not end within {timeout} s; its stderr: {err_path.read_text()}")
    return subprocess.CompletedProcess(args, code, out_path.read_text(), err_path.read_text())


_POOLS = {
    "threads": """\
        import concurrent.futures, time
        POOL = concurrent.futures.ThreadPoolExecutor(2)
        POOL.submit(lambda: (time.sleep(0.5), _write("pool", "done")))
        """,
    "processes": """\
        import concurrent.futures, multiprocessing
        POOL = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        POOL.submit(pow, 2, 10).add_done_callback(lambda done: _write("pool", str(done.result())))
        """,
}


@pytest.mark.parametrize("kind", sorted(_POOLS))
def test_an_export_whose_module_holds_a_pool_ends_once_its_work_is_done(tmp_path, kind):
    """A thread or process pool, as data loaders and checkpoint libraries keep: its exit hook
    (``threading._register_atexit``) runs before its workers are waited for, as in plain Python; the export ended
    there for good before (issue 54)."""
    done = _run(_model(tmp_path, "pooled", _POOLS[kind]), tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["artifact"] == "pooled.jaxport"
    assert (tmp_path / "pool").read_text() == {"threads": "done", "processes": "1024"}[kind]


def test_a_file_the_module_never_closes_keeps_its_bytes(tmp_path):
    """A file written and left open is flushed and closed by the interpreter's teardown, as in plain Python."""
    body = """\
        LOG = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "log.txt"), "w")
        LOG.write("line\\n" * 1000)
        """
    done = _run(_model(tmp_path, "logged", body), tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "log.txt").read_text() == "line\n" * 1000


@pytest.mark.parametrize(("signum", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"),
                                                       (signal.SIGINT, 130, "SIGINT (Ctrl-C)")])
def test_a_signal_while_the_module_s_thread_runs_ends_the_export(tmp_path, signum, code, name):
    """The export is done (its line printed) and the process waits, as Python does, for a thread of the module that
    waits for an event no one sets: SIGTERM or Ctrl-C ends it at once, with the usual line and code."""
    body = """\
        import threading
        threading.Thread(target=threading.Event().wait).start()
        """
    with subprocess.Popen(_model(tmp_path, "waiting", body), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, cwd=tmp_path, start_new_session=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            # stdout is flushed once the command is over, before the thread is waited for
            assert select.select([proc.stdout], [], [], 60)[0], "the export printed nothing within 60 s"
            first = proc.stdout.readline()
            assert first == "{\n"
            proc.send_signal(signum)
            proc.wait(timeout=60)  # its few lines of stderr fit in the pipe
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.returncode == code
    assert json.loads(first + out)["artifact"] == "waiting.jaxport"
    assert err.endswith(_STOPPED.format(name))


def _closed(stream: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``jaxport ARGS`` started with stdout (``>&-``) or stderr (``2>&-``) closed, by a shell as a user would."""
    return _run(["sh", "-c", f'exec "$@" {stream}', "sh", *JAXPORT, *args], cwd, timeout=120)


_COMMANDS = {
    "export": (["export", "model.py:f", "--shapes", "spec.yaml", "-o", "model.jaxport"], "Exported model.jaxport"),
    "export --json": (["export", "model.py:f", "--shapes", "spec.yaml", "-o", "model.jaxport", "--json"], "{\n"),
    "call": (["call", str(GOLDEN_MLP), "--random", "--dim", "batch=2", "--no-cache"], "predict on cpu  batch=2  "),
    "inspect": (["inspect", str(GOLDEN_MLP)], f"mlp 1.0.0  ({GOLDEN_MLP}, 109.7 kB, 2 members, sha256 verified)\n"),
    "inspect --json": (["inspect", str(GOLDEN_MLP), "--json"], '{\n  "format": "jaxport",\n'),
    "inspect --function": (["inspect", str(GOLDEN_MLP), "--function", "nope"], ""),
}


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_a_closed_stdout_is_an_output_error(tmp_path, command):
    """stdout closed (``>&-``): what the command prints cannot be written, exit 11 and one line (issue 54: export
    and call ended in ``error[internal]``, inspect in a traceback); a command that failed keeps its own code."""
    _model(tmp_path, "model", "")
    args, _ = _COMMANDS[command]
    done = _closed(">&-", args, tmp_path)
    if command == "inspect --function":
        assert (done.returncode, done.stderr) == (2, "error[usage]: the artifact has no function 'nope'. Functions: "
                                                     "predict.\n")
        return
    assert (done.returncode, done.stdout) == (11, "")
    assert done.stderr.endswith(_CLOSED_STDOUT) and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("error[") == 1


@pytest.mark.parametrize("command", sorted(_COMMANDS))
def test_a_closed_stderr_is_discarded_and_the_exit_code_kept(tmp_path, command):
    """stderr closed (``2>&-``): what the command writes there goes nowhere; it runs and ends with its own code
    (issue 54: an export that wrote its artifact exited 1)."""
    _model(tmp_path, "model", "")
    args, start = _COMMANDS[command]
    done = _closed("2>&-", args, tmp_path)
    assert (done.returncode, done.stderr) == (2 if command == "inspect --function" else 0, "")
    assert done.stdout.startswith(start)


#: A model module that makes about 300 MB of cyclic garbage while it imports: 16 KiB of bytes in each cycle of 21
#: containers, so that the collector, run every few thousand containers, frees it as it is made.
_GARBAGE = """\
    def _garbage(megabytes):
        for _ in range(megabytes * 64):
            d = {"pad": bytes(16384), "lists": [[] for _ in range(20)]}
            d["self"] = d

    _garbage(300)
    """

#: Runs a command and prints its peak resident memory in MiB (a fresh process: the children it waited for alone).
_PEAK = """\
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
"""


def _peak_mib(args: list[str], cwd: Path) -> int:
    done = subprocess.run([sys.executable, "-c", _PEAK, *args], capture_output=True, text=True, cwd=cwd, timeout=180)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_the_garbage_a_module_makes_while_importing_is_collected(tmp_path):
    """The user's module imports with the collector on and none of its garbage is frozen: exporting a module that
    makes 300 MB of cyclic garbage takes no more memory than exporting one that makes none, and importing it in
    plain Python no more than importing JAX (issue 54: 1115 MB against 167 MB for 1 GB of garbage)."""
    _model(tmp_path, "plain", "")
    garbage = _model(tmp_path, "garbage", _GARBAGE)[:-1]
    plain = [*JAXPORT, "export", "plain.py:f", "--shapes", "spec.yaml", "-o", "plain.jaxport"]
    python = _peak_mib([sys.executable, "-c", "import jax; import garbage"], tmp_path)
    bare = _peak_mib([sys.executable, "-c", "import jax"], tmp_path)
    assert python < bare + 64, (python, bare)  # the workload: Python collects the garbage as it is made
    exported, baseline = _peak_mib(garbage, tmp_path), _peak_mib(plain, tmp_path)
    assert exported < baseline + 64, (exported, baseline)
