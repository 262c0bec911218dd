"""The README's commands work as written."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

README = (REPO / "README.md").read_text()


def _block_after(heading: str) -> list[str]:
    section = README.split(heading, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def test_readme_shows_the_two_setup_commands():
    assert _block_after("## Set-up on a fresh machine") == ["make demo", "make test"]


def _producer_age() -> int:
    """How many days the JAX running the tests lags behind the newest JAX this jaxport supports."""
    import jax

    from jaxport.artifact.window import compat

    return compat.dating(jax.__version__).producer_age() or 0


@pytest.mark.slow
def test_quick_start_and_call_commands_run(tmp_path):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", JAXPORT_CACHE_DIR=str(tmp_path / "c"))
    quick = _block_after("## Quick start")
    # After `make demo` nothing is on PATH: the quick start names the environment's script, as a user types it.
    assert [shlex.split(line)[0] for line in quick] == [".venv/bin/jaxport"] * 3
    assert "activate the environment once per shell (`source .venv/bin/activate`)" in README.replace("\n", " ")
    for line in quick + _block_after("## Running an artifact") + _block_after("## In CI: verify, diff, check"):
        argv = shlex.split(line)
        assert argv[0] in ("jaxport", ".venv/bin/jaxport")
        res = subprocess.run([str(bindir / "jaxport"), *argv[1:]], cwd=tmp_path, env=env, capture_output=True,
                             text=True)
        if argv[1] == "check" and _producer_age() > 60:
            # Under the oldest supported JAX (make test-compat), a fresh export is more than 60 days behind the newest
            # this jaxport supports: the age rules fail it, as they mean to.
            assert res.returncode == 14 and "max_producer_age_days" in res.stdout, f"{line}\n{res.stdout}"
            continue
        assert res.returncode == 0, f"{line}\n{res.stderr}"
    out = subprocess.run([str(bindir / "jaxport"), "inspect", "mlp.jaxport"], cwd=tmp_path, env=env,
                         capture_output=True, text=True).stdout
    assert "predict(x: f32[batch, 784]) -> f32[batch, 10]   where 1 <= batch <= 4096" in out
    assert (tmp_path / "out.npz").is_file()


@pytest.mark.slow
def test_make_demo_runs():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    res = subprocess.run(["make", "demo"], cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "predict(x: f32[batch, 784]) -> f32[batch, 10]" in res.stdout


#: A ``python`` code block, fenced at any indentation (a block inside a list item is indented).
_PYTHON_BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)
#: The section whose blocks need a server or a batch engine: tests/serve/ runs them (``make test-serve``, in
#: .venv-serve), each block picked by what it imports.
SERVING = "## Serving and batch inference"
SERVED_BY = {"import tritonclient.grpc": "tests/serve/test_serve_readme.py",
             "import jaxport.ray\n": "tests/serve/test_batch_engines.py",
             "import jaxport.beam\n": "tests/serve/test_batch_engines.py",
             "import jaxport.spark\n": "tests/serve/test_batch_engines.py"}


def _all_python_blocks() -> list[tuple[int, str, str]]:
    """Every ``python`` code block of the README: (line, the ``## `` section it is in, its code, dedented)."""
    out = []
    for m in _PYTHON_BLOCK.finditer(README):
        line = README.count("\n", 0, m.start()) + 1
        heading = re.findall(r"^## .*$", README[:m.start()], re.M)[-1]
        indent = len(m.group(1))
        code = "".join(x[indent:] if x.strip() else "\n" for x in m.group(2).splitlines(keepends=True))
        out.append((line, heading, code))
    return out


def _python_blocks(heading: str) -> list[str]:
    """The ``python`` code blocks of the README section under ``heading`` (up to the next ``## `` heading)."""
    return [code for _, section, code in _all_python_blocks() if section == heading]


def _run_block(code: str, line: int, cwd: Path) -> subprocess.CompletedProcess:
    """A README block run on its own, as a script in a fresh process in ``cwd``; its exit code must be 0."""
    script = cwd / f"readme_{line}.py"
    script.write_text(code)
    env = dict(os.environ, JAXPORT_CACHE_DIR=str(cwd / "c"))
    res = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, f"README.md:{line}\n{res.stdout}{res.stderr}"
    return res


def test_every_python_block_is_run_by_a_test():
    """Blocks of "From Python" run in test_from_python_examples_run, the serving section's in tests/serve/, every
    other one in test_python_block_runs_on_its_own; every block imports what it uses (none continues another)."""
    blocks = _all_python_blocks()
    assert len(blocks) >= 9
    for line, section, code in blocks:
        if section == SERVING:
            assert [m for m in SERVED_BY if m in code], f"README.md:{line}: no test in tests/serve/ runs it"
        code = re.sub(r"#.*", "", code)  # what the comments name is not used
        if "jaxport." in code:
            assert re.search(r"^import jaxport(\.\w+)?$", code, re.M), f"README.md:{line} does not import jaxport"
        if "np." in code:
            assert "import numpy as np\n" in code, f"README.md:{line} does not import numpy"


_OTHER_BLOCKS = [(line, code) for line, section, code in _all_python_blocks()
                 if section not in (SERVING, "## From Python")]


@pytest.mark.slow
@pytest.mark.parametrize(("line", "code"), _OTHER_BLOCKS, ids=[f"README.md:{line}" for line, _ in _OTHER_BLOCKS])
def test_python_block_runs_on_its_own(line, code, tmp_path):
    """Each block outside "From Python" and the serving section, in a fresh process, in a directory holding a copy
    of the examples (and the quick start's mlp.jaxport when it names it); the libraries it imports installed."""
    for module in re.findall(r"^(?:import|from) (\w+)", code, re.M):
        if importlib.util.find_spec(module) is None:  # found, not imported: keras reads KERAS_BACKEND at import
            pytest.skip(f"README.md:{line} needs {module}")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    if "mlp.jaxport" in code:
        _run(_block_after("## Quick start")[0].replace(".venv/bin/jaxport", "jaxport"), tmp_path,
             dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"))
    _run_block(code, line, tmp_path)


@pytest.mark.slow
def test_from_python_examples_run(tmp_path):
    """The "From Python" section's code blocks, each on its own in a fresh process, in order (a later block reads
    the files an earlier one wrote, as the prose says: "mlp.jaxport from the block above"), in a directory holding
    a copy of the examples."""
    blocks = _python_blocks("## From Python")
    assert len(blocks) == 4 and "from flax import nnx" in blocks[0] and "import equinox as eqx" in blocks[1]
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    printed = "".join(_run_block(code, i, tmp_path).stdout for i, code in enumerate(blocks))
    for name in ("mlp-nnx.jaxport", "mlp-eqx.jaxport", "mlp.jaxport", "mlp-0.9.jaxport", "mlp-new.jaxport",
                 "imported.jaxport"):
        assert (tmp_path / name).is_file(), name
    assert "jaxport: 1\ndims:\n  batch: {min: 1, max: 1024}\nargs: ['f32[batch, 16]']\n" in printed
    assert "predict(x: f32[batch, 784]) -> f32[batch, 10]   where 1 <= batch <= 4096" in printed
    assert "{'predict': 3}" in printed


def _environment(tmp_path: Path) -> dict[str, str]:
    """A copy of the examples in ``tmp_path``, and the environment a README command runs in there: this
    environment's scripts first on PATH (``jaxport``, ``iree-run-module``), a cache of its own."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    bindir = Path(sys.executable).parent
    return dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", JAXPORT_CACHE_DIR=str(tmp_path / "c"))


def _run(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    argv = shlex.split(line)
    exe = shutil.which(Path(argv[0]).name, path=env["PATH"])  # .venv/bin/jaxport: this environment's
    assert exe, f"{argv[0]} is not installed: {line}"
    res = subprocess.run([exe, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{line}\n{res.stderr}"
    return res


def _cache_files(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


@pytest.mark.slow
def test_warm_up_commands_run(tmp_path):
    """The Warm-up block runs as written after the quick start's export: warmup prints the check's verdict, and the
    call after it fetches its program from the cache (it adds nothing there)."""
    env = _environment(tmp_path)
    warm, call = _block_after("## Warm-up")
    _run(_block_after("## Quick start")[0], tmp_path, env)
    res = _run(warm, tmp_path, env)
    cache = tmp_path / "xla-cache"
    assert "3 shape signatures in xla-cache (3 compiled, 0 already there)" in res.stdout
    assert "check: passed; its verdict is now in the cache" in res.stdout
    before = _cache_files(cache)
    assert sum(1 for name in before if name.startswith("jaxport-verdict-")) == 1
    _run(call, tmp_path, env)
    assert _cache_files(cache) == before


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("iree") is None, reason="needs the iree extra (pip install -e '.[iree]')")
def test_iree_deployment_commands_run(tmp_path):
    """The IREE deployment block runs as written: the module's command line is one 'compile --print-command' prints,
    and iree-run-module's output is the artifact's, run by XLA."""
    import numpy as np

    import jaxport

    env = _environment(tmp_path)
    lines = _block_after("Deployment without Python JAX")
    assert [shlex.split(line)[0] for line in lines] == ["jaxport", "jaxport", "jaxport", "cp", "iree-run-module"]
    for line in lines:
        _run(line, tmp_path, env)
    printed = _run(f"{lines[1]} --print-command", tmp_path, env).stdout.splitlines()
    assert lines[-1] in printed and len(printed) == 4
    x = np.load(tmp_path / "examples" / "mlp" / "x.npy")
    want = np.asarray(jaxport.load(tmp_path / "mlp-bound.jaxport")(x))
    np.testing.assert_allclose(np.load(tmp_path / "output.npy"), want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed (jaxport[tpu])")
def test_compiling_for_a_tpu_you_do_not_have_runs_as_written(tmp_path):
    """The section's check and warmup lines, on the example MLP exported for cpu and tpu as model.jaxport (its serve
    line runs on a TPU host: tests/tpu covers what it relies on)."""
    import jaxport

    jaxport.export(str(REPO / "examples/mlp/model.py:predict"), str(REPO / "examples/mlp/spec.yaml"),
                   output=tmp_path / "model.jaxport", platforms=["cpu", "tpu"])
    bindir = Path(sys.executable).parent
    lines = _block_after("## Compiling for a TPU you do not have")
    assert [shlex.split(line)[1] for line in lines] == ["check", "warmup", "serve"]
    for line in lines[:2]:
        res = subprocess.run([str(bindir / "jaxport"), *shlex.split(line)[1:]], cwd=tmp_path, capture_output=True,
                             text=True)
        assert res.returncode == 0, f"{line}\n{res.stdout}\n{res.stderr}"
    assert len(list((tmp_path / "tpu-cache").glob("jaxport-executable-*.bin"))) == 3
