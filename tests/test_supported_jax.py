"""The supported JAX range as users meet it: what pip keeps, which Python `make` picks, a fresh export's window."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from jaxport.artifact.window import releases
from tests.support import EXAMPLES, REPO

PICK = REPO / "scripts" / "pick_python.sh"


def _requirement(name: str) -> Requirement:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == name]
    return req


@pytest.mark.parametrize("name", ["jax", "jaxlib"])
@pytest.mark.parametrize("version", ["0.9.1", "0.9.2", "0.10.2", "0.11.2", "0.12.0", "0.12.0.1", "0.12.1"])
def test_pip_keeps_an_installed_supported_jax(name, version):
    """`pip install jaxport` beside a supported JAX keeps it: the pin admits every supported release."""
    assert _requirement(name).specifier.contains(version)


@pytest.mark.parametrize("version", ["0.9.0.1", "0.8.3", "0.13.0"])
def test_the_pin_refuses_what_is_not_supported(version):
    assert not _requirement("jax").specifier.contains(version)
    assert _requirement("jax").specifier == SpecifierSet(releases.SUPPORTED_JAX)


def _fake_python(directory: Path, name: str, minor: int) -> Path:
    path = directory / name
    path.write_text(f"#!/bin/sh\necho {minor}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _pick(path_dirs: list[Path], pyenv_root: Path) -> subprocess.CompletedProcess:
    env = {"PATH": os.pathsep.join([*map(str, path_dirs), "/usr/bin", "/bin"]), "PYENV_ROOT": str(pyenv_root),
           "HOME": str(pyenv_root)}
    return subprocess.run(["sh", str(PICK)], capture_output=True, text=True, env=env, timeout=60)


def test_make_picks_the_newest_python_312_or_later_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_python(bin_dir, "python3.12", 12)
    newest = _fake_python(bin_dir, "python3.13", 13)
    _fake_python(bin_dir, "python3", 11)
    res = _pick([bin_dir], tmp_path / "no-pyenv")
    assert res.returncode == 0 and res.stdout.strip() == str(newest)
    assert f"using Python 3.13 ({newest}, from PATH)" in res.stderr


def test_make_looks_in_pyenvs_versions_directory_next(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_python(bin_dir, "python3", 11)
    for version, minor in (("3.12.1", 12), ("3.13.0", 13), ("3.11.7", 11)):
        (tmp_path / "pyenv" / "versions" / version / "bin").mkdir(parents=True)
        _fake_python(tmp_path / "pyenv" / "versions" / version / "bin", "python3", minor)
    res = _pick([bin_dir], tmp_path / "pyenv")
    want = tmp_path / "pyenv" / "versions" / "3.13.0" / "bin" / "python3"
    assert res.returncode == 0 and res.stdout.strip() == str(want)
    assert "from pyenv's versions directory" in res.stderr


def test_without_python_312_make_falls_back_to_python3_and_says_so(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_python(bin_dir, "python3", 11)
    res = _pick([bin_dir], tmp_path / "no-pyenv")
    assert res.returncode == 0 and res.stdout.strip() == "python3"
    assert "falling back to python3" in res.stderr and "jax 0.10.x" in res.stderr


@pytest.mark.skipif(not jax.__version__.startswith("0.12."), reason="the newest supported JAX's window")
def test_a_fresh_export_with_the_newest_jax_passes_min_days_left_30(run_cli, tmp_path, monkeypatch):
    """`make demo`'s export under jax 0.12.x has JAX's window well open (the issue's 'done when'), dated by jaxlib."""
    monkeypatch.setenv("JAXPORT_TODAY", "2026-12-02")
    out = tmp_path / "mlp.jaxport"
    res = run_cli("export", EXAMPLES / "mlp" / "model.py:predict", "--shapes", EXAMPLES / "mlp" / "spec.yaml",
                  "-o", out)
    assert res.exit_code == 0, res.stderr
    res = run_cli("check", out, "--min-days-left", "30", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["passed"] is True


def test_a_mixed_install_is_dated_by_its_older_jaxlib(run_cli, tmp_path):
    """jax 0.12.0.1 over jaxlib 0.11.2: JAX dates the window by the jaxlib that serialized (2026-09-17 + 6 months)."""
    from jaxport.artifact.model import Producer
    from jaxport.artifact.window import compat

    assert compat.serializer_version(Producer("0.1.0", "0.12.0.1", "0.11.2")) == "0.11.2"
    assert compat.window(compat.serializer_version(Producer("0.1.0", "0.12.0.1", "0.11.2"))).loadable_until \
        .isoformat() == "2027-03-17"
    assert compat.serializer_version(Producer("0.1.0", "0.12.0.1", "0.12.0.1")) == "0.12.0.1"
    # an undatable jax is judged as it is (reported as unreadable), whatever jaxlib says
    assert compat.serializer_version(Producer("0.1.0", "not-a-version", "0.11.2")) == "not-a-version"
    assert compat.serializer_version(Producer("0.1.0", "0.11.2", "0.12.0.1")) == "0.11.2"


def _pypi_document(rows: dict[str, releases.Release]) -> dict:
    """PyPI's JSON document of jax (the fields scripts/jax_releases.py reads) listing ``rows``, each release with a
    wheel and a source archive uploaded that day, and a pre-release that is no row."""
    files = {v: [{"upload_time_iso_8601": f"{r.date}T{t}Z", "requires_python": f">={r.python}", "yanked": r.yanked}
                 for t in ("21:07:07.9", "21:04:05.0")] for v, r in rows.items()}
    return {"releases": {**files, "0.13.0rc1": [{"upload_time_iso_8601": "2026-12-02T10:00:00Z",
                                                 "requires_python": ">=3.12", "yanked": False}]}}


def test_the_release_script_finds_what_the_table_lacks(tmp_path):
    """scripts/jax_releases.py, the table's update procedure: a release PyPI has and the table lacks (or dates
    otherwise) is printed as the row to add, exit 1; a table that lists every release is exit 0."""
    script = [sys.executable, str(REPO / "scripts" / "jax_releases.py"), "--json", str(tmp_path / "jax.json")]
    (tmp_path / "jax.json").write_text(json.dumps(_pypi_document(releases.RELEASES)))
    res = subprocess.run(script, capture_output=True, text=True, timeout=120)
    newest = max(releases.RELEASES, key=lambda v: releases.RELEASES[v].date)
    assert (res.returncode, res.stdout, res.stderr) == (0, (
        f"The table lists every JAX release on PyPI from 0.4.30 on ({len(releases.RELEASES)}; the newest: {newest}, "
        f"{releases.RELEASES[newest].date}).\n"), "")
    rows = {**releases.RELEASES, "0.12.2": releases.Release("2026-12-03", "3.12"),
            "0.10.2": releases.Release("2026-06-18", "3.11")}
    (tmp_path / "jax.json").write_text(json.dumps(_pypi_document(rows)))
    res = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert (res.returncode, res.stdout) == (1, (
        'differs: "0.10.2": Release("2026-06-17", "3.11"),  PyPI: "0.10.2": Release("2026-06-18", "3.11"),\n'
        'missing: "0.12.2": Release("2026-12-03", "3.12"),\n'
        "Add or correct these rows in jaxport/artifact/window/releases.py, then set REVIEWED to today (this script's "
        "docstring gives the rest of the procedure).\n"))
