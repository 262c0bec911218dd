"""The README's commands work as written."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

README = (REPO / "README.md").read_text()


def _block_after(heading: str) -> list[str]:
    section = README.split(heading, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def test_readme_shows_the_two_setup_commands():
    assert _block_after("## Set-up on a fresh machine") == ["make demo", "make test"]


def test_quick_start_and_call_commands_run(tmp_path):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", JAXPORT_CACHE_DIR=str(tmp_path / "c"))
    for line in _block_after("## Quick start") + _block_after("## Running an artifact"):
        argv = shlex.split(line)
        assert argv[0] == "jaxport"
        res = subprocess.run([str(bindir / "jaxport"), *argv[1:]], cwd=tmp_path, env=env, capture_output=True,
                             text=True)
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
