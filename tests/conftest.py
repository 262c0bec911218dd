"""Shared fixtures: the CLI driver, an artifact factory and the bundled examples exported once per run."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from jaxport.run.compile.targets import quiet_cuda, quiet_libtpu
from tests.support import EXAMPLES

# libtpu is installed (the extra `tpu`, to compile for a TPU here): keep its start-up warnings out of every process a
# test starts, as the command line does for itself; and JAX's CUDA plugin (the extra `cuda`, in .venv-cuda) without a
# GPU: JAX starts its CPU alone.
quiet_libtpu()
quiet_cuda()

# Strictness: warnings are errors (pyproject's filterwarnings). JAX's rank-promotion check is left at its default:
# jaxport exports users' functions, which rely on broadcasting, and must see them as users run them.


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli():
    """Run ``jaxport ARGS...`` in-process; returns exit code, stdout and stderr separately."""
    from jaxport_cli.main import cli

    def run(*args: str, input: str | None = None) -> CliResult:
        runner = CliRunner()
        result = runner.invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)
        return CliResult(result.exit_code, result.stdout, result.stderr)

    return run


@pytest.fixture
def call(run_cli, tmp_path, monkeypatch):
    """``jaxport call ARGS... --no-cache`` from a temporary directory."""
    monkeypatch.chdir(tmp_path)

    def run(*args):
        return run_cli("call", *args, "--no-cache")

    return run


@pytest.fixture
def example_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Copy examples/NAME into a temporary directory, chdir there and return its path."""

    def make(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(EXAMPLES / name, dst)
        monkeypatch.chdir(dst)
        return dst

    return make


@pytest.fixture
def make_artifact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write ``model.py`` and ``spec.yaml`` from text into a fresh directory, export, and return the artifact path.

    ``make_artifact(model_src, spec_yaml, entry="model.py:f", extra_args=[...])``.
    """
    import jaxport

    counter = [0]

    def make(model_src: str, spec_yaml: str, entry: str = "model.py:f", **options) -> Path:
        counter[0] += 1
        d = tmp_path / f"case{counter[0]}"
        d.mkdir()
        (d / "model.py").write_text(model_src)
        (d / "spec.yaml").write_text(spec_yaml)
        monkeypatch.chdir(d)
        return jaxport.export(entry, "spec.yaml", output=d / "out.jaxport", **options).path

    return make


@pytest.fixture(scope="session")
def mlp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/mlp exported once for the whole run. Shared: read it, call it, copy it, never change it in place."""
    import jaxport

    out = tmp_path_factory.mktemp("mlp") / "mlp.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml", output=out).path


@pytest.fixture(scope="session")
def pytree_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/pytree exported once for the whole run (shared like ``mlp_path``)."""
    import jaxport

    out = tmp_path_factory.mktemp("pytree") / "enc.jaxport"
    return jaxport.export(f"{EXAMPLES}/pytree/model.py:encode", EXAMPLES / "pytree" / "spec.yaml", output=out).path


#: Test files that are corpora rather than one path per behaviour: the hostile-input corpus, the fuzzers, fault
#: injection and the IREE deployment suite, marked ``corpus``. `make test` runs them; `make test-fast`
#: (``pytest -m "not slow and not corpus"``) does not.
CORPUS_FILES = frozenset({"test_hostile.py", "test_fuzz.py", "test_faults.py", "test_iree_deploy.py",
                          "test_iree_padding.py"})


def pytest_unconfigure(config):
    """Silence IREE's nanobind leak report at interpreter exit. IREE's runtime keeps objects in C++ caches (its HAL
    driver cache) that Python's finalization never frees, so every process that ran it (each xdist worker) ended by
    printing hundreds of lines of ``nanobind: leaked ... types/functions`` below the test summary. The runtime
    exposes nanobind's switch as ``disable_leak_checker``; it is set only where IREE was imported."""
    runtime = sys.modules.get("iree._runtime_libs._runtime")
    if runtime is not None and hasattr(runtime, "disable_leak_checker"):
        runtime.disable_leak_checker()


#: Why a test marked ``libtpu`` skips where libtpu is not installed: jaxport's own environment never has it (the test
#: tools leave the user's JAX alone), and ``make test-tpu-deviceless`` runs these tests in one that does.
NO_LIBTPU = "needs libtpu (the extra tpu): make test-tpu-deviceless runs it, in .venv-tpu"


def pytest_collection_modifyitems(config, items):
    import importlib.util

    has_libtpu = importlib.util.find_spec("libtpu") is not None
    for item in items:
        if item.path.name in CORPUS_FILES:
            item.add_marker(pytest.mark.corpus)
        if not has_libtpu and item.get_closest_marker("libtpu") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_LIBTPU))
