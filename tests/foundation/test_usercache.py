"""The payload check's verdicts in the user's cache: a pass is remembered by its key, and nothing else is trusted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import jaxport
from jaxport import usercache
from jaxport.errors import FormatError
from jaxport.isolation import isolate
from tests.support import EXAMPLES, REPO


@pytest.fixture(scope="module")
def payloads(tmp_path_factory):
    """Two different programs (the MLP and the pytree encoder), as an artifact stores them."""
    out = {}
    for name, entry, spec in (("mlp", "mlp/model.py:predict", "mlp/spec.yaml"),
                              ("encode", "pytree/model.py:encode", "pytree/spec.yaml")):
        path = tmp_path_factory.mktemp(name) / f"{name}.jaxport"
        jaxport.export(f"{EXAMPLES}/{entry}", EXAMPLES / spec, output=path)
        with jaxport.open_artifact(path) as art:
            out[name] = art.read(f"functions/{name if name == 'encode' else 'predict'}.jaxexport")
    return out


@pytest.fixture
def children(monkeypatch, tmp_path):
    """A fresh process memory of checks, the user's cache in a temporary directory, and the checking children
    started, counted."""
    monkeypatch.setattr(isolate, "_CHECKED", set())
    monkeypatch.setattr(isolate, "_REFUSED", {})
    monkeypatch.setenv("JAXPORT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(isolate.ISOLATED_ENV, raising=False)
    started = []
    real = isolate.run

    def counted(target, *args, **kwargs):
        started.append(target)
        return real(target, *args, **kwargs)

    monkeypatch.setattr(isolate, "run", counted)
    return started


def _forget(monkeypatch):
    """What a new process knows: nothing but the cache."""
    monkeypatch.setattr(isolate, "_CHECKED", set())


def _verdicts(tmp_path):
    return sorted((tmp_path / "cache").glob("jaxport-verdict-*.json"))


def _key(payload):
    import hashlib

    return usercache.verdict_key(hashlib.sha256(payload).hexdigest(), isolate._CHECK_VERSION)


def test_a_pass_is_remembered_in_the_cache_and_used_by_the_next_process(payloads, children, monkeypatch, tmp_path):
    isolate.check_payload(payloads["mlp"], "mlp.jaxport", "predict")
    assert children == ["jaxport.isolation.isolate:_read_program"]
    (verdict,) = _verdicts(tmp_path)
    assert json.loads(verdict.read_text()) == _key(payloads["mlp"])
    assert _key(payloads["mlp"]) == {"format": "jaxport-check-verdict/1", "sha256": verdict.name.split("-")[2],
                                     "jaxlib": usercache.jaxlib_version(), "jaxport": jaxport.__version__,
                                     "check": isolate._CHECK_VERSION, "verdict": "passed"}
    _forget(monkeypatch)
    isolate.check_payload(payloads["mlp"], "mlp.jaxport", "predict")  # a hit: no second child
    assert len(children) == 1


@pytest.mark.slow
def test_another_program_is_checked_again(payloads, children, monkeypatch, tmp_path):
    isolate.check_payload(payloads["mlp"], "mlp.jaxport", "predict")
    _forget(monkeypatch)
    isolate.check_payload(payloads["encode"], "enc.jaxport", "encode")  # a miss: another sha256
    assert len(children) == 2 and len(_verdicts(tmp_path)) == 2


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "truncated", "other program", "other jaxlib", "older check", "link",
                                    "too large", "directory"])
def test_a_damaged_or_foreign_verdict_is_ignored_and_replaced(payloads, children, monkeypatch, tmp_path, damage):
    isolate.check_payload(payloads["mlp"], "mlp.jaxport", "predict")
    (verdict,) = _verdicts(tmp_path)
    good = verdict.read_text()
    key = _key(payloads["mlp"])
    verdict.unlink()
    if damage == "garbage":
        verdict.write_bytes(b"\x00\xffnot json")
    elif damage == "truncated":
        verdict.write_text(good[: len(good) // 2])
    elif damage == "other program":
        verdict.write_text(json.dumps({**key, "sha256": "0" * 64}))
    elif damage == "other jaxlib":
        verdict.write_text(json.dumps({**key, "jaxlib": "0.0.1"}))
    elif damage == "older check":
        verdict.write_text(json.dumps({**key, "check": "v2n128c4o2000000"}))
    elif damage == "link":  # a valid verdict, reached through a symbolic link planted in the cache
        (tmp_path / "elsewhere.json").write_text(good)
        verdict.symlink_to(tmp_path / "elsewhere.json")
    elif damage == "too large":
        verdict.write_text(good + " " * usercache.MAX_VERDICT_BYTES)
    else:
        verdict.mkdir()
    _forget(monkeypatch)
    isolate.check_payload(payloads["mlp"], "mlp.jaxport", "predict")
    assert len(children) == 2, damage  # not trusted: checked again
    if damage != "directory":
        assert not verdict.is_symlink() and json.loads(verdict.read_text()) == key  # replaced by a good one
        _forget(monkeypatch)
        isolate.check_payload(payloads["mlp"], "mlp.jaxport", "predict")
        assert len(children) == 2


def test_a_refusal_is_not_written_to_the_cache(payloads, children, monkeypatch, tmp_path):
    real = isolate.run
    monkeypatch.setattr(isolate, "run", lambda target, *a, **k: real("tests.hostile.crash:segfault", *a, **k))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    with pytest.raises(FormatError) as e:
        isolate.check_payload(payloads["mlp"], "mlp.jaxport", "predict")
    assert str(e.value).startswith("mlp.jaxport: function 'predict': JAX's reader crashed with SIGSEGV")
    assert not _verdicts(tmp_path)  # only passes are remembered


#: Run in a fresh interpreter (JAX imported, its backends not started): check a program, reporting on stdout how.
FORKED = """\
import json, os, signal, sys, threading, time
import jax
from jaxport.isolation import isolate, sandbox
payload = open(sys.argv[1], "rb").read()
case = sys.argv[2]
forks = []
real_fork = isolate.fork_run
isolate.fork_run = lambda target, limits: forks.append(1) or real_fork(target, limits)
if case == "crash":
    isolate._read_program_bytes = lambda data: os.kill(os.getpid(), signal.SIGSEGV)
elif case == "hang":
    isolate._read_program_bytes = lambda data: time.sleep(100)
    isolate.payload_limits = lambda size: sandbox.Limits(None, None, 1.0, memory_after_imports=True)
elif case == "backends":
    jax.devices()
elif case == "thread":
    stop = threading.Event()
    threading.Thread(target=stop.wait).start()
sys.stdout.write("unflushed output of the caller;")
try:
    isolate.check_payload(payload, "m.jaxport", "f")
    result = "passed"
except Exception as e:
    result = str(e)
if case == "thread":
    stop.set()
print(json.dumps({"forks": len(forks), "result": result}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("case", ["good", "crash", "hang", "backends", "thread", "no-fork"])
def test_the_check_forks_where_it_is_safe(payloads, tmp_path, case):
    """With JAX imported and nothing running, the child is a fork of the caller (no second JAX import); its crash or
    hang is refused as a spawned child's is, and nothing it does reaches the caller's output. With JAX's backends
    started, another thread, or JAXPORT_CHECK_FORK=0, a fresh interpreter checks the program."""
    program = tmp_path / "program.bin"
    program.write_bytes(payloads["mlp"])
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop(isolate.ISOLATED_ENV, None)
    if case == "no-fork":
        env[isolate.FORK_ENV] = "0"
    res = subprocess.run([sys.executable, "-c", FORKED, str(program), case], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("unflushed output of the caller;{") and res.stdout.count("unflushed") == 1
    report = json.loads(res.stdout.split(";", 1)[1])
    expected = {
        "good": (1, "passed"),
        "crash": (1, "m.jaxport: function 'f': JAX's reader crashed with SIGSEGV (in native code, or on reaching its "
                     "memory limit of 2 GiB above what JAX itself uses) on this program in a test process; the "
                     "artifact is damaged or hostile. Do not load it; re-export it from its source."),
        "hang": (1, "m.jaxport: function 'f': JAX's reader ran longer than 1 s and was stopped on this program in a "
                    "test process; the artifact is damaged or hostile. Do not load it; re-export it from its source."),
        "backends": (0, "passed"),
        "thread": (0, "passed"),
        "no-fork": (0, "passed"),
    }[case]
    assert (report["forks"], report["result"]) == expected
    assert len(list((tmp_path / "cache").glob("jaxport-verdict-*.json"))) == (report["result"] == "passed")


def test_the_checking_child_imports_only_what_the_check_needs(payloads, monkeypatch):
    """The child that reads a program imports JAX and the few jaxport modules of the check, not jaxport's public
    API (the artifact reader, the spec parser): Python's import log of a real check says so."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "PYTHONUNBUFFERED": "1"}  # every line, before os._exit
    outcome = isolate.run("jaxport.isolation.isolate:_read_program", [], isolate.payload_limits(len(payloads["mlp"])),
                          stdin=payloads["mlp"], env=env, light=True)
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in outcome.stderr.decode().splitlines()
                if line.startswith("import time:") and line.count("|") == 2}
    # (the target module itself is imported by importlib, which the log does not show; its imports are shown)
    assert {"jax", "jaxport.isolation.sandbox", "jaxport.usercache", "jaxport.program.module_scan"} <= imported
    assert not imported & {"jaxport.artifact", "jaxport.artifact.container", "jaxport.spec", "jaxport.run", "yaml"}
