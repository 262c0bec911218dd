"""The wheel holds every subpackage: built, installed apart from the source tree, it runs ``--help`` and the demo."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support import REPO

#: The packages pyproject.toml ships (``[tool.setuptools] packages``), as the wheel's directories.
PACKAGES = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
SUBPACKAGES = [p.replace(".", "/") for p in PACKAGES]


def _source_packages() -> set[str]:
    """Every package of the source tree by import name: each directory under jaxport/ and cli/ (``jaxport_cli``) that
    holds an ``__init__.py``."""
    found = set()
    for root, name in ((REPO / "jaxport", "jaxport"), (REPO / "cli", "jaxport_cli")):
        for init in root.rglob("__init__.py"):
            found.add(".".join([name, *init.parent.relative_to(root).parts]))
    return found


def test_pyproject_lists_every_package_of_the_source_tree():
    # setuptools ships only the packages listed: one left out is missing from the wheel, not from the checkout.
    assert sorted(_source_packages() - set(PACKAGES)) == []
    assert sorted(set(PACKAGES) - _source_packages() - {"jaxport.schemas"}) == []  # schemas: specs/schemas


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """The wheel, and what building it printed."""
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")
    shutil.copytree(REPO, build / "src", ignore=shutil.ignore_patterns(".venv*", ".git", "build", "*.egg-info",
                                                                         "__pycache__", ".pytest_cache"))
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                          str(out), str(build / "src")], check=True, capture_output=True, text=True)
    (whl,) = out.glob("jaxport-*.whl")
    return whl, res.stdout + res.stderr


@pytest.fixture(scope="module")
def wheel(built) -> Path:
    return built[0]


@pytest.mark.slow
def test_the_wheel_carries_the_spdx_license_and_builds_without_deprecation_warnings(built):
    whl, output = built
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        metadata = next(z.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "deprecat" not in output.lower(), output


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> dict[str, str]:
    """An environment whose ``jaxport`` comes from the wheel alone: the wheel installed into a fresh directory, the
    dependencies from this environment's site-packages, and no site processing (so the editable install's path
    hook is not there)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, text=True)
    deps = sysconfig.get_paths()["purelib"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(target), deps])
    env["JAXPORT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    return env


def _jaxport(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from jaxport_cli.main import main; sys.argv[0] = 'jaxport'; main()"
    return subprocess.run([sys.executable, "-S", "-P", "-c", code, *args], cwd=cwd, env=env, capture_output=True,
                          text=True)


@pytest.mark.slow
def test_wheel_contains_every_subpackage_and_the_entry_point(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    for package in SUBPACKAGES:
        assert f"{package}/__init__.py" in names or package == "jaxport/schemas", package
    assert "jaxport/schemas/manifest.schema.json" in names
    assert "jaxport = jaxport_cli.main:main" in entry_points
    local = {str(p.relative_to(REPO)) for p in (REPO / "jaxport").rglob("*.py")}
    assert local <= set(names), sorted(local - set(names))


@pytest.mark.slow
def test_installed_wheel_runs_help_and_the_demo(installed, tmp_path):
    where = subprocess.run([sys.executable, "-S", "-P", "-c", "import jaxport, jaxport_cli; print(jaxport.__file__); "
                            "print(jaxport_cli.__file__)"], env=installed, capture_output=True, text=True, check=True)
    assert str(REPO) not in where.stdout, where.stdout
    res = _jaxport(installed, "--help", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Export a JAX function into an artifact" in res.stdout
    shutil.copytree(REPO / "examples" / "mlp", tmp_path / "mlp")
    d = tmp_path / "mlp"
    res = _jaxport(installed, "export", "model.py:predict", "--shapes", "spec.yaml", "-o", "mlp.jaxport", cwd=d)
    assert res.returncode == 0, res.stderr
    res = _jaxport(installed, "inspect", "mlp.jaxport", cwd=d)
    assert res.returncode == 0, res.stderr
    assert "predict(x: f32[batch, 784]) -> f32[batch, 10]   where 1 <= batch <= 4096" in res.stdout
    res = _jaxport(installed, "call", "mlp.jaxport", "--inputs", "x.npy", "-o", "out.npz", cwd=d)
    assert res.returncode == 0, res.stderr
    assert (d / "out.npz").is_file()
