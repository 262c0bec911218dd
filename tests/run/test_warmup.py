"""warmup: an artifact checked and compiled ahead, so that a later call compiles nothing and starts no check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from tests.support import EXAMPLES, REPO

JAXPORT = [sys.executable, "-c", "from jaxport_cli.main import main; main()"]

#: Imported by every Python process started with this directory on PYTHONPATH: a child that checks a program (the
#: target isolate._read_program) exits at once with status 99, so a call that succeeds started no check.
TRIPWIRE = """\
import os, sys
if "jaxport.isolation.isolate:_read_program" in sys.argv:
    os._exit(99)
"""


@pytest.fixture(scope="module")
def mlp(mlp_path):
    return mlp_path


def _run(*args, env=None, cwd=None):
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([*JAXPORT, *map(str, args)], capture_output=True, text=True, env=full, cwd=cwd,
                          timeout=600)


def _listing(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file of a cache directory with its size and modification time."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir()}


def _predict(x):
    sys.path.insert(0, str(EXAMPLES / "mlp"))
    try:
        from model import predict
    finally:
        sys.path.remove(str(EXAMPLES / "mlp"))
    return np.asarray(predict(x))


@pytest.mark.slow
def test_warmup_then_call_compiles_nothing_and_checks_nothing(mlp, tmp_path):
    """A call in a fresh process after `warmup` fetches the executable from the cache (JAX's cache-hit event),
    writes nothing to the cache, starts no checking child (a tripwire kills any), and gives the model's numbers;
    a shape that was not warmed up is compiled, and a cache without the verdict runs the check."""
    cache = tmp_path / "cache"
    res = _run("warmup", mlp, "--dim", "batch=2,8", "--cache-dir", cache, "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert (report["function"], report["cache_dir"]) == ("predict", str(cache))
    assert report["check"] == {"verdict": "passed", "cache": "checked, now cached"}
    assert [(s["dims"], s["inputs"], s["compile_cache_hit"]) for s in report["signatures"]] == [
        ({"batch": 2}, {"x": {"shape": [2, 784], "dtype": "float32"}}, False),
        ({"batch": 8}, {"x": {"shape": [8, 784], "dtype": "float32"}}, False)]
    digest = jaxport.open_artifact(mlp).manifest["members"]["functions/predict.jaxexport"]["sha256"]
    assert [p.name for p in cache.iterdir() if p.name.startswith("jaxport-verdict-")] == [
        f"jaxport-verdict-{digest}-{_jaxlib()}-{jaxport.__version__}-{_check_version()}.json"]
    before = _listing(cache)
    assert sum(1 for name in before if name.endswith("-cache")) == 2  # one executable per signature

    tripwire = tmp_path / "tripwire"
    tripwire.mkdir()
    (tripwire / "sitecustomize.py").write_text(TRIPWIRE)
    # checks in fresh interpreters only (not forks of the caller), where the tripwire sees them
    env = {"PYTHONPATH": os.pathsep.join([str(tripwire), str(REPO)]), "JAXPORT_CHECK_FORK": "0"}
    x = np.random.default_rng(0).standard_normal((8, 784), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    res = _run("call", mlp, "--inputs", tmp_path / "x.npy", "--cache-dir", cache, "-o", tmp_path / "y.npy", "--json",
               env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["timings"]["compile_cache_hit"] is True
    assert _listing(cache) == before
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), _predict(x), rtol=1e-5, atol=1e-5)

    res = _run("call", mlp, "--random", "--dim", "batch=3", "--cache-dir", cache, "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["timings"]["compile_cache_hit"] is False  # not warmed up: compiled now
    assert len(_listing(cache)) == len(before) + 1

    res = _run("call", mlp, "--random", "--dim", "batch=8", "--cache-dir", tmp_path / "empty", env=env)
    assert res.returncode == 7, res.stderr  # no verdict there: the check ran, and the tripwire killed it
    assert "JAX's reader failed in a test process (exit status 99" in res.stderr


def _jaxlib() -> str:
    from jaxlib.version import __version__

    return __version__


def _check_version() -> str:
    from jaxport.isolation import isolate

    return isolate._CHECK_VERSION


@pytest.mark.slow
def test_warmup_prints_the_checks_verdict(mlp, tmp_path):
    """The first warm-up into a cache checks the program and records the verdict; the next one finds it there."""
    cache = tmp_path / "cache"
    first = _run("warmup", mlp, "--dim", "batch=2", "--cache-dir", cache)
    second = _run("warmup", mlp, "--dim", "batch=2", "--cache-dir", cache)
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert first.stdout.splitlines()[:2] == [
        f"Warmed up predict of {mlp} on cpu: 1 shape signature in {cache} (1 compiled, 0 already there)",
        "check: passed; its verdict is now in the cache, so a call with this cache starts no check"]
    assert second.stdout.splitlines()[:2] == [
        f"Warmed up predict of {mlp} on cpu: 1 shape signature in {cache} (0 compiled, 1 already there)",
        "check: passed (its verdict was already in the cache: no check ran)"]


def test_loaded_warmup_compiles_ahead_in_this_process(mlp, tmp_path):
    """`Loaded.warmup` compiles every combination of the given values; calls with those shapes reuse them."""
    loaded = jaxport.load(mlp)
    done = loaded.warmup({"batch": [1, 4]}, cache_dir=tmp_path / "c")
    assert [(w.dims, w.key) for w in done] == [({"batch": 1}, (((1, 784), "float32"),)),
                                               ({"batch": 4}, (((4, 784), "float32"),))]
    assert [w.compilation.cache_hit for w in done] == [False, False]
    assert loaded.compiled_signatures == [w.key for w in done]
    x = np.random.default_rng(1).standard_normal((4, 784), dtype=np.float32)
    np.testing.assert_allclose(np.asarray(loaded(x)), _predict(x), rtol=1e-5, atol=1e-5)
    assert loaded.compiled_signatures == [w.key for w in done]  # nothing new compiled
    assert loaded.warmup([{"batch": 4}], cache_dir=tmp_path / "c")[0].compilation is done[1].compilation
    assert any(p.name.startswith("jaxport-verdict-") for p in (tmp_path / "c").iterdir())


def test_warmup_refuses_shapes_it_cannot_compile(mlp, run_cli, tmp_path):
    cache = str(tmp_path / "c")
    cases = [
        ([], 2, f"error[usage]: {mlp}: function 'predict': give a value for every dimension variable to warm up "
                f"(batch missing): --dim NAME=V, or several values --dim NAME=V1,V2 (in Python: "
                f"warmup({{'batch': 8}}))."),
        (["--dim", "bach=2"], 2, "error[usage]: --dim bach: the function has no dimension variable 'bach'; it has "
                                 "batch. Did you mean 'batch'?"),
        (["--dim", "batch=0"], 2, "error[usage]: --dim batch=0: 0 is outside the spec bound 1 <= batch <= 4096."),
        (["--dim", "batch=" + ",".join(str(i) for i in range(1, 300))], 2,
         f"error[usage]: {mlp}: function 'predict': 299 shape signatures to warm up (every combination of the "
         f"values given); at most 256 are allowed. Give fewer values."),
    ]
    for args, code, message in cases:
        res = run_cli("warmup", mlp, *args, "--cache-dir", cache)
        assert (res.exit_code, res.stderr) == (code, message + "\n"), args
    (tmp_path / "file").write_text("not a directory")
    res = run_cli("warmup", mlp, "--dim", "batch=2", "--cache-dir", tmp_path / "file" / "cache")
    assert (res.exit_code, res.stderr) == (11, f"error[output]: {mlp}: function 'predict': cannot use the "
                                               f"compilation cache {tmp_path}/file/cache: Not a directory; warm up "
                                               f"into a directory this user can write (--cache-dir DIR).\n")
    assert not (tmp_path / "c").exists() or not any(p.name.endswith("-cache") for p in (tmp_path / "c").iterdir())


def test_warmup_is_listed_and_documented(run_cli):
    res = run_cli("--help")
    assert "warmup" in res.stdout and "Check and compile an artifact ahead for given shapes" in res.stdout
    readme = (REPO / "README.md").read_text()
    assert "## Warm-up" in readme and "jaxport warmup" in readme
