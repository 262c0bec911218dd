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


#: A ``sh`` code block, fenced at any indentation.
_SH_BLOCK = re.compile(r"^( *)```sh\n(.*?)^\1```", re.S | re.M)

#: Every ``sh`` block of the README (its section, and how its first command starts) with the test that runs it as
#: written, or ``skip: `` and why none can here. A block of a section that is not listed fails
#: test_every_sh_block_is_run_by_a_test_or_skipped_with_a_reason: a new block needs a test, or a reason.
SH_BLOCKS = [
    ("## Set-up on a fresh machine", "make demo",
     "tests/test_readme.py::test_make_demo_runs"),  # and `make test`: .ci/run, after `make test-setup`
    ("## Quick start", ".venv/bin/jaxport export", "tests/test_readme.py::test_quick_start_and_call_commands_run"),
    ("## Running an artifact", "jaxport call", "tests/test_readme.py::test_quick_start_and_call_commands_run"),
    ("## Warm-up", "jaxport warmup", "tests/test_readme.py::test_warm_up_commands_run"),
    ("## Compiling for a TPU you do not have", "jaxport export",
     "tests/test_readme.py::test_compiling_for_a_tpu_you_do_not_have_runs_as_written"),  # make test-tpu-deviceless
    ("## Compiling for a GPU you do not have", "jaxport export",
     "tests/cuda/test_deviceless.py::test_compiling_for_a_gpu_you_do_not_have_runs_as_written"),  # in .venv-cuda
    ("## Beyond one device: shards, gradients, large inputs", "jaxport export",
     "tests/foundation/test_sharding.py::test_readme_commands_export_inspect_and_call_on_eight_simulated_devices"),
    ("## In CI: verify, diff, check", "jaxport call", "tests/test_readme.py::test_quick_start_and_call_commands_run"),
    ("## Signed artifacts", "openssl ecparam", "tests/test_readme.py::test_signing_commands_run_as_written"),
    ("## Signed artifacts", "jaxport warmup",
     "tests/sign/test_cache_vouch.py::test_the_readme_signed_cache_block_runs_as_written"),
    ("## A second runtime: IREE", "jaxport export", "tests/test_readme.py::test_iree_deployment_commands_run"),
    ("## Serving and batch inference", "pip install",
     "skip: an image's build and its server: an install from the package index, the container's /opt/cache, ports "
     "8080 and 8081 on every interface (tests/serve/test_serve_readme.py serves mlp.jaxport and sends the section's "
     "requests; test_warm_up_commands_run runs warmup)"),
    ("## Serving and batch inference", "jaxport serve mlp.jaxport --uds",
     "tests/serve/test_serve_uds.py::test_the_readmes_unix_socket_lines_run_as_written"),
    ("## Serving and batch inference", "python -c",
     "tests/serve/test_serve_readme.py::test_the_curl_request_runs_as_written"),
    ("## Untrusted artifacts", "jaxport call",
     "tests/test_hostile.py::test_the_readme_commands_for_untrusted_artifacts_run"),
]


def _sh_blocks() -> list[tuple[int, str, list[str]]]:
    """Every ``sh`` block of the README: (line, the ``## `` section it is in, its commands without comments)."""
    out = []
    for m in _SH_BLOCK.finditer(README):
        heading = re.findall(r"^## .*$", README[:m.start()], re.M)[-1]
        lines = [line.split("#")[0].strip() for line in m.group(2).splitlines() if line.split("#")[0].strip()]
        out.append((README.count("\n", 0, m.start()) + 1, heading, lines))
    return out


def test_every_sh_block_is_run_by_a_test_or_skipped_with_a_reason():
    """Issue 57: blocks that did not run as pasted (an artifact never exported for the TPU, an unset
    $SIGNING_KEY_FILE, an x.npy that is not at the root). Each block is matched, in order, to its entry of SH_BLOCKS:
    the test named there exists and reads the README (so it runs the block's lines), or the reason says why none
    can run here."""
    blocks = _sh_blocks()
    assert [(heading, lines[0].startswith(start)) for (_, heading, lines), (_, start, _) in zip(blocks, SH_BLOCKS)] \
        == [(heading, True) for heading, _, _ in SH_BLOCKS], [(line, h, lines[0]) for line, h, lines in blocks]
    assert len(blocks) == len(SH_BLOCKS)
    for heading, start, runner in SH_BLOCKS:
        if runner.startswith("skip: "):
            assert len(runner) > 40, f"{heading} {start}: give the reason"
            continue
        path, name = runner.split("::")
        source = (REPO / path).read_text()
        assert f"def {name}(" in source and "README" in source, runner
    for _, _, lines in blocks:  # what issue 57 found
        text = "\n".join(lines)
        assert "$SIGNING_KEY_FILE" not in text and "--inputs x.npy" not in text, text


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
@pytest.mark.libtpu
def test_compiling_for_a_tpu_you_do_not_have_runs_as_written(tmp_path):
    """The section's export, check and warmup lines as written, in a copy of the examples (its serve line runs on a
    TPU host: tests/tpu covers what it relies on)."""
    env = _environment(tmp_path)
    lines = _block_after("## Compiling for a TPU you do not have")
    assert [shlex.split(line)[1] for line in lines] == ["export", "check", "warmup", "serve"]
    assert "--platform tpu" in lines[0]  # issue 57: the block compiled an artifact it never said to export for tpu
    for line in lines[:3]:
        _run(line, tmp_path, env)
    assert len(list((tmp_path / "tpu-cache").glob("jaxport-executable-*.bin"))) == 3


@pytest.mark.slow
def test_signing_commands_run_as_written(tmp_path):
    """The key-pair block of "Signed artifacts" as written, after the quick start's export, but its last line (a
    server; tests/sign/test_commands.py runs serve --require-signature): the key made where the block uses it, the
    signature checked, the signed artifact called."""
    pytest.importorskip("model_signing", reason="needs the extra jaxport[sign] (pip install -e '.[sign]')")
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    env = _environment(tmp_path)
    _run(_block_after("## Quick start")[0], tmp_path, env)
    section = README.split("## Signed artifacts", 1)[1]
    lines = _block_after("## Signed artifacts")
    assert [shlex.split(line)[:2] for line in lines] == [
        ["openssl", "ecparam"], ["openssl", "ec"], ["jaxport", "sign"], ["jaxport", "check"], ["jaxport", "call"],
        ["jaxport", "serve"]] and "--require-signature ci-signing.pub" in lines[-1] and section
    for line in lines[:-1]:
        _run(line, tmp_path, env)
    assert (tmp_path / "mlp.jaxport.sig").is_file() and (tmp_path / "ci-signing.pub").is_file()
    other = tmp_path / "other"  # a key that did not sign it is refused: the check the block relies on
    other.mkdir()
    for line in lines[:2]:
        _run(line, other, env)
    res = subprocess.run([shutil.which("jaxport", path=env["PATH"]), "call", "mlp.jaxport", "--inputs",
                          "examples/mlp/x.npy", "--require-signature", "other/ci-signing.pub"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 14 and res.stderr.startswith("error[signature]: "), res.stderr
