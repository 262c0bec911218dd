"""examples/ci: the GitHub Actions workflow's steps run as written, with the bundled examples, in a temporary
checkout; a breaking change against the main branch fails the diff step with exit code 13."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import REPO

CI = REPO / "examples" / "ci"
WORKFLOW = yaml.safe_load((CI / "jaxport.yml").read_text())

# Stand-ins for the tools a runner has: `git worktree add DIR REF` checks out the "main branch" (a directory the
# test prepares), and `pip install` is a no-op (jaxport is installed in this environment).
FAKE_GIT = """#!/bin/sh
if [ "$1" = worktree ] && [ "$2" = add ]; then
  shift 2
  while [ "$1" = --detach ]; do shift; done
  mkdir -p "$1" && cp -R "$FAKE_MAIN/." "$1"
  exit 0
fi
echo "fake git: unexpected: git $*" >&2
exit 1
"""
FAKE_PIP = "#!/bin/sh\nexit 0\n"


def _steps() -> list[dict]:
    (job,) = WORKFLOW["jobs"].values()
    return job["steps"]


def test_workflow_runs_export_check_verify_and_diff_against_main():
    runs = "\n".join(s["run"] for s in _steps() if "run" in s)
    commands = [line.split()[1] for line in runs.splitlines() if line.strip().startswith("jaxport ")]
    assert commands == ["export", "check", "verify", "export", "diff"]
    assert "--fail-on breaking" in runs
    assert "origin/main" in runs
    assert WORKFLOW["env"]["POLICY"] == "examples/ci/policy.yaml"
    assert (REPO / WORKFLOW["env"]["SPEC"]).is_file()
    assert (REPO / WORKFLOW["env"]["MODEL"].split(":")[0]).is_file()


def _checkout(root: Path, name: str) -> Path:
    """A checkout with the bundled examples (what the workflow's steps read)."""
    d = root / name
    d.mkdir()
    shutil.copytree(REPO / "examples", d / "examples")
    return d


def _run_workflow(root: Path, workspace: Path, main: Path) -> list[tuple[str, int, str]]:
    """Run the workflow's `run` steps in order, as GitHub runs them (bash -eo pipefail), until one fails."""
    bindir = root / "bin"
    bindir.mkdir()
    for name, text in (("git", FAKE_GIT), ("pip", FAKE_PIP)):
        (bindir / name).write_text(text)
        (bindir / name).chmod((bindir / name).stat().st_mode | stat.S_IEXEC)
    runner_temp = root / "runner-temp"
    runner_temp.mkdir()
    env = dict(os.environ, **WORKFLOW["env"], GITHUB_WORKSPACE=str(workspace), RUNNER_TEMP=str(runner_temp),
               FAKE_MAIN=str(main), JAXPORT_CACHE_DIR=str(root / "cache"),
               PATH=os.pathsep.join([str(bindir), str(Path(sys.executable).parent), os.environ["PATH"]]))
    results = []
    for step in _steps():
        if "run" not in step:
            continue
        res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=workspace,
                             env=env, capture_output=True, text=True)
        results.append((step["name"], res.returncode, res.stdout + res.stderr))
        if res.returncode != 0:
            break
    return results


@pytest.mark.slow
def test_workflow_steps_pass_on_the_bundled_examples(tmp_path):
    workspace, main = _checkout(tmp_path, "workspace"), _checkout(tmp_path, "main")
    results = _run_workflow(tmp_path, workspace, main)
    assert [(name, code) for name, code, _ in results] == [
        ("Install jaxport", 0), ("Export", 0), ("Check against the policy", 0),
        ("Verify against the live function", 0), ("Export the artifact of the main branch", 0),
        ("Diff against main", 0)], results[-1][2]
    assert (workspace / "build" / "model.jaxport").is_file() and (workspace / "build" / "main.jaxport").is_file()
    assert "OK: 3 cases match." in results[3][2]
    assert "is identical to" in results[5][2]


@pytest.mark.slow
def test_a_breaking_change_against_main_fails_the_build(tmp_path):
    workspace, main = _checkout(tmp_path, "workspace"), _checkout(tmp_path, "main")
    spec = main / "examples" / "mlp" / "spec.yaml"
    spec.write_text(spec.read_text().replace("max: 4096", "max: 8192"))  # main accepted larger batches
    results = _run_workflow(tmp_path, workspace, main)
    name, code, output = results[-1]
    assert (name, code) == ("Diff against main", 13)
    assert "bound_tightened" in output
    assert "error[diff]: build/model.jaxport differs from build/main.jaxport: 1 breaking" in output
