"""The format layer stays light: importing it, and the commands that only read artifacts, never import JAX."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import jaxport
from jaxport.artifact.window import compat
from tests.support import EXAMPLES, REPO

JAX = importlib.metadata.version("jax")

#: examples/ci/policy.yaml's max_producer_age_days (60) passes a fresh export only with a JAX at most 60 days behind the
#: newest this jaxport supports: the oldest (make test-compat runs the tests with it) fails it, as the rule means.
FRESH_EXPORT_PASSES_THE_EXAMPLE_POLICY = pytest.mark.skipif(
    (compat.dating(JAX).producer_age() or 0) > 60,
    reason=f"jax {JAX} is more than 60 days behind jax {compat.CURRENT.version}: a fresh export fails the example "
           f"policy's max_producer_age_days")

#: Run first in the child: any import of jax (or jaxlib) fails, as it would where JAX is not installed.
NO_JAX = textwrap.dedent("""
    import sys

    class NoJax:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("jax", "jaxlib"):
                raise ImportError(f"{name} is not importable in this test")
            return None

    sys.meta_path.insert(0, NoJax())
""")


def _child(code: str, *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def test_importing_the_format_layer_imports_neither_jax_nor_numpy():
    code = textwrap.dedent("""
        import importlib, pkgutil, sys
        import jaxport, jaxport.artifact

        names = sorted(m.name for m in pkgutil.walk_packages(jaxport.artifact.__path__, "jaxport.artifact."))
        for name in names:
            importlib.import_module(name)
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"jax", "jaxlib", "numpy"})
        print(len(names), heavy)
    """)
    res = _child(code)
    assert res.returncode == 0, res.stderr
    count, heavy = res.stdout.split(" ", 1)
    assert int(count) >= 35  # every module of the package and its rooms was imported
    assert heavy.strip() == "[]"


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> tuple[Path, Path]:
    """The mlp example exported twice, the second time with a tighter bound (so its program differs)."""
    d = tmp_path_factory.mktemp("layer")
    spec = (EXAMPLES / "mlp" / "spec.yaml").read_text()
    assert "max: 4096" in spec
    (d / "tighter.yaml").write_text(spec.replace("max: 4096", "max: 2048"))
    entry = f"{EXAMPLES}/mlp/model.py:predict"
    old = jaxport.export(entry, EXAMPLES / "mlp" / "spec.yaml", output=d / "old.jaxport", write_manifest=False).path
    new = jaxport.export(entry, d / "tighter.yaml", output=d / "new.jaxport", write_manifest=False).path
    return old, new


def _cli_without_jax(*args: str | Path) -> subprocess.CompletedProcess:
    code = NO_JAX + textwrap.dedent("""
        from jaxport_cli.main import cli

        try:
            cli(sys.argv[1:], prog_name="jaxport")
        except SystemExit as e:
            code = e.code
        print("IMPORTED", sorted({m.split(".")[0] for m in sys.modules} & {"jax", "jaxlib", "numpy"}))
        sys.exit(code)
    """)
    return _child(code, *args)


def test_the_guard_really_blocks_jax():
    res = _child(NO_JAX + "import jax\n")
    assert res.returncode == 1
    assert "ImportError: jax is not importable in this test" in res.stderr


def test_inspect_runs_without_jax(artifacts):
    old, _ = artifacts
    res = _cli_without_jax("inspect", old)
    assert res.returncode == 0, res.stderr
    assert "predict(x: f32[batch, 784]) -> f32[batch, 10]   where 1 <= batch <= 4096" in res.stdout
    assert res.stdout.rstrip().endswith("IMPORTED []")


@FRESH_EXPORT_PASSES_THE_EXAMPLE_POLICY
def test_check_runs_without_jax(artifacts):
    old, _ = artifacts
    res = _cli_without_jax("check", old, "--policy", EXAMPLES / "ci" / "policy.yaml", "--json")
    assert res.returncode == 0, res.stderr
    report, imported = res.stdout.rsplit("IMPORTED", 1)
    assert json.loads(report)["passed"] is True
    assert imported.strip() == "[]"


def test_diff_without_programs_runs_without_jax(artifacts):
    old, new = artifacts
    res = _cli_without_jax("diff", old, new, "--no-programs", "--json")
    assert res.returncode == 0, res.stderr
    report, imported = res.stdout.rsplit("IMPORTED", 1)
    data = json.loads(report)
    assert data["programs"]["predict"]["status"] == "not compared"
    assert {(c["severity"], c["kind"]) for c in data["changes"]} == {
        ("breaking", "bound_tightened"), ("compatible", "source_changed"), ("compatible", "payload_changed")}
    assert imported.strip() == "[]"
