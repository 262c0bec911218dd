"""examples/ci: the GitHub Actions workflow's steps run as written, with the bundled examples, in a temporary
checkout, signing on (a key pair made as the workflow's comment says, the policy's signature rule enabled); a breaking
change against the main branch fails the diff step with exit code 13; the workflow's Python installs the newest JAX
release jaxport supports, whose artifacts pass the example policy's age rule, and the policy's comments name that
release.

Steps are found by name and every `run:` step runs (with the workflow's, the job's and the step's env), so a step
added to the workflow (signing, publishing) runs here too and needs no change to these tests."""

from __future__ import annotations

import os
import re
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


#: The steps the example gates on, in order (others may come between and after them): it signs before the policy
#: check, so that the policy's signature rule can require the signature.
GATES = ["Install jaxport", "Export", "Sign", "Check against the policy", "Verify against the live function",
         "Export the artifact of the main branch", "Diff against main"]


def _job() -> dict:
    (job,) = WORKFLOW["jobs"].values()
    return job


def _steps() -> list[dict]:
    return _job()["steps"]


def _in_order(names: list[str], wanted: list[str]) -> bool:
    """Whether ``wanted`` appear in ``names`` in that order (others may come between)."""
    rest = iter(names)
    return all(w in rest for w in wanted)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in str(text).split("."))


def test_workflow_runs_export_check_verify_and_diff_against_main():
    names = [s.get("name", s.get("uses", "")) for s in _steps()]
    assert _in_order(names, GATES), names
    runs = "\n".join(s["run"] for s in _steps() if "run" in s)
    commands = [line.split()[1] for line in runs.splitlines() if line.strip().startswith("jaxport ")]
    assert _in_order(commands, ["export", "sign", "check", "check", "verify", "export", "diff"]), commands
    assert "--fail-on breaking" in runs
    assert "origin/main" in runs
    assert WORKFLOW["env"]["POLICY"] == "examples/ci/policy.yaml"
    assert (REPO / WORKFLOW["env"]["SPEC"]).is_file()
    assert (REPO / WORKFLOW["env"]["MODEL"].split(":")[0]).is_file()


def test_the_workflow_python_installs_the_newest_jax_jaxport_supports():
    """pip picks the newest JAX inside jaxport's pin that installs on the runner's Python: with a Python older than
    the newest release needs (3.11 for jax 0.12), it gets an older JAX, which fails max_producer_age_days."""
    from jaxport.artifact.window import compat
    from jaxport.artifact.window.releases import RELEASES, SUPPORTED_JAX

    (setup,) = [s for s in _steps() if str(s.get("uses", "")).startswith("actions/setup-python")]
    python = _version(setup["with"]["python-version"])
    newest = compat.CURRENT
    assert python >= _version(newest.python), (python, newest)
    installable = [v for v, r in RELEASES.items() if compat.supported(v) and not r.yanked
                   and _version(r.python) <= python]
    assert max(installable, key=compat.version_key) == newest.version
    assert SUPPORTED_JAX in (REPO / "pyproject.toml").read_text()


def test_the_policy_names_the_newest_jax_and_the_end_of_its_window():
    """The example policy's age rules pass a fresh export (0 days behind, within the limit), and its comment on
    min_days_left names the newest supported JAX and the day its window ends (so a new release table updates it)."""
    from jaxport.artifact.window import age, compat

    policy_text = (CI / "policy.yaml").read_text()
    policy = yaml.safe_load(policy_text)
    newest = compat.CURRENT
    assert f"(jax {newest.version}: {compat.window_end(newest.released)})" in policy_text
    today = newest.released
    assert age.evaluate(newest.version, policy["max_producer_age_days"], None, today) == ([], [])
    behind = [k for k in compat.KNOWN if (newest.released - k.released).days > policy["max_producer_age_days"]]
    violations, _ = age.evaluate(behind[-1].version, policy["max_producer_age_days"], None, today)
    assert [rule for rule, _ in violations] == ["max_producer_age_days"]


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
    env.update({k: str(v) for k, v in _job().get("env", {}).items()})
    secrets = _signing_key(workspace)
    results = []
    for step in _steps():
        if "run" not in step:
            continue
        cwd = workspace / step.get("working-directory", ".")
        step_env = dict(env, **{k: secrets.get(str(v), str(v)) for k, v in step.get("env", {}).items()})
        res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                             env=step_env, capture_output=True, text=True)
        results.append((step["name"], res.returncode, res.stdout + res.stderr))
        if res.returncode != 0:
            break
    return results


def _key_commands() -> list[str]:
    """The commands the workflow's comment gives to make the signing key pair."""
    text = (CI / "jaxport.yml").read_text()
    return re.findall(r"^#   (openssl .*)$", text, re.M)


def _signing_key(workspace: Path) -> dict[str, str]:
    """The Sign step's secret by the text the workflow names it with: a private key made, with its public half, by
    the commands the workflow's comment gives, run in the checkout (which commits the public half where the
    workflow's SIGNING_PUBLIC_KEY says, in place of the example's)."""
    pytest.importorskip("model_signing", reason="the workflow's Sign step needs jaxport[sign] (make test installs it)")
    if shutil.which("openssl") is None:
        pytest.skip("the documented key-pair commands need openssl")
    for command in _key_commands():
        subprocess.run(command, shell=True, cwd=workspace, check=True, capture_output=True)
    pem = (workspace / "signing.pem").read_text()
    (workspace / "signing.pem").unlink()  # the secret store holds it from here on
    return {"${{ secrets.JAXPORT_SIGNING_KEY }}": pem}


def test_the_example_commits_a_public_key_and_says_how_to_make_a_pair():
    """examples/ci/signing.pub is in the repository (the Sign step and the policy's signature rule name it), the
    workflow's comment makes a pair that replaces it, and the policy's rule names the same file."""
    pytest.importorskip("cryptography", reason="reading the key needs cryptography (jaxport[sign])")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    public = REPO / WORKFLOW["env"]["SIGNING_PUBLIC_KEY"]
    assert public == CI / "signing.pub"
    key = serialization.load_pem_public_key(public.read_bytes())
    assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
    assert _key_commands() == ["openssl ecparam -name prime256v1 -genkey -noout -out signing.pem",
                               f"openssl ec -in signing.pem -pubout -out {WORKFLOW['env']['SIGNING_PUBLIC_KEY']}"]
    assert "# signature:\n#   keys: [signing.pub]\n" in (CI / "policy.yaml").read_text()


def test_the_sign_step_without_the_secret_says_what_to_set(tmp_path):
    (sign,) = [s for s in _steps() if s.get("name") == "Sign"]
    env = dict(os.environ, **WORKFLOW["env"], SIGNING_KEY="", RUNNER_TEMP=str(tmp_path))
    res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", sign["run"]], cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert (res.returncode, res.stdout) == (1, (
        "::error::the secret JAXPORT_SIGNING_KEY is not set: make a key pair (README, Signed artifacts), store the "
        "private key's PEM as that secret and commit its public key as examples/ci/signing.pub\n"))


def _output(results: list[tuple[str, int, str]], name: str) -> str:
    return next(output for step, _, output in results if step == name)


@pytest.mark.slow
def test_workflow_steps_pass_on_the_bundled_examples(tmp_path):
    workspace, main = _checkout(tmp_path, "workspace"), _checkout(tmp_path, "main")
    policy = workspace / WORKFLOW["env"]["POLICY"]  # signing on: the policy requires the CI's signature
    policy.write_text(policy.read_text().replace("# signature:\n#   keys: [signing.pub]",
                                                 "signature:\n  keys: [signing.pub]"))
    results = _run_workflow(tmp_path, workspace, main)
    ran = [name for name, _, _ in results]
    assert [code for _, code, _ in results] == [0] * len(results), results[-1][2]
    assert ran == [s["name"] for s in _steps() if "run" in s] and _in_order(ran, GATES), ran
    assert (workspace / "build" / "model.jaxport").is_file() and (workspace / "build" / "main.jaxport").is_file()
    import jax

    assert f"jax {jax.__version__}\n" in _output(results, "Install jaxport")
    assert "OK: 3 cases match." in _output(results, "Verify against the live function")
    assert "is identical to" in _output(results, "Diff against main")
    assert "signature verified: key" in _output(results, "Sign")
    assert "signature verified: key" in _output(results, "Check against the policy")
    assert (workspace / "build" / "model.jaxport.sig").is_file()


@pytest.mark.slow
def test_the_policy_with_a_consumer_jax_passes_an_artifact_written_for_it(tmp_path, monkeypatch, run_cli):
    """The policy's commented-out min_consumer_jax, as its comment says: an export with the newest JAX fails it,
    one written for that JAX (--for-jax) passes it and the age rule (the consumer's JAX is within the age limit)."""
    monkeypatch.chdir(_checkout(tmp_path, "workspace"))
    policy = Path("examples/ci/policy.yaml")
    text = policy.read_text()
    (consumer,) = re.findall(r'^# min_consumer_jax: "([0-9.]+)"$', text, re.M)
    assert f"--for-jax {consumer})" in text
    policy.write_text(text.replace(f'# min_consumer_jax: "{consumer}"', f'min_consumer_jax: "{consumer}"'))
    model, spec, weights = WORKFLOW["env"]["MODEL"], WORKFLOW["env"]["SPEC"], WORKFLOW["env"]["WEIGHTS"]
    for name, extra in (("newest", []), ("for", ["--for-jax", consumer])):
        assert run_cli("export", model, "--shapes", spec, "--bind", weights, "-o", f"{name}.jaxport",
                       *extra).exit_code == 0
    res = run_cli("check", "newest.jaxport", "--policy", str(policy))
    assert res.exit_code == 14 and "min_consumer_jax" in res.stdout + res.stderr, res.stdout + res.stderr
    res = run_cli("check", "for.jaxport", "--policy", str(policy))
    assert res.exit_code == 0, res.stdout + res.stderr


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


def _resize(model: Path, old: str, new: str) -> None:
    """Rewrite examples/mlp/model.py's parameter shapes in a checkout (``(32, 10)`` -> ``(32, 12)``)."""
    text = model.read_text()
    assert old in text
    model.write_text(text.replace(old, new))


@pytest.mark.slow
def test_a_resized_hidden_layer_passes_and_a_changed_output_fails(tmp_path):
    """The artifact stores its weights (WEIGHTS): a hidden layer of 48 units where main has 32 changes three bound
    tensors' shapes, which breaks no caller (the same input, the same output): the gate passes and the diff says the
    change breaks rebinding. Ten classes where main had twelve changes the output: the gate fails."""
    for run in ("resize", "output"):
        (tmp_path / run).mkdir()
    workspace, main = _checkout(tmp_path / "resize", "workspace"), _checkout(tmp_path / "resize", "main")
    model = workspace / "examples" / "mlp" / "model.py"
    for hidden in ("(784, 32)", "np.zeros(32,", "(32, 10)"):
        _resize(model, hidden, hidden.replace("32", "48"))
    results = _run_workflow(tmp_path / "resize", workspace, main)
    assert [code for _, code, _ in results] == [0] * len(results), results[-1][2]
    said = " ".join(_output(results, "Diff against main").split())  # the lines as a terminal of any width wraps them
    assert ("build/model.jaxport differs from build/main.jaxport: 0 breaking, 4 compatible changes, 3 of which break "
            "rebinding (a bound tensor's layout).") in said
    assert _output(results, "Diff against main").count("weights_layout_changed") == 3
    workspace, main = _checkout(tmp_path / "output", "workspace"), _checkout(tmp_path / "output", "main")
    for classes in ("(32, 10)", "np.zeros(10,"):
        _resize(main / "examples" / "mlp" / "model.py", classes, classes.replace("10", "12"))
    results = _run_workflow(tmp_path / "output", workspace, main)
    name, code, output = results[-1]
    assert (name, code) == ("Diff against main", 13)
    assert "output_dimension_changed" in output
    assert ("error[diff]: build/model.jaxport differs from build/main.jaxport: 1 breaking, 3 compatible changes, 2 of "
            "which break rebinding (a bound tensor's layout). Failing on breaking changes (--fail-on breaking).") \
        in " ".join(output.split())
