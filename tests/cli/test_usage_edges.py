"""The edges a new user trips on (issue 50): an option given several values at once says to repeat it, a GPU
platform is named by JAX's name for it, a missing extra and an unreadable file each have one exit code, and
successful runs print no noise (rebind's result, an imported program's shape checks, the README's files)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jaxport
from tests.support import EXAMPLES, GOLDEN_MLP, REPO


@pytest.mark.parametrize(("args", "message"), [
    (["--inputs", "a.npy", "b.npy", "c.npy"],
     "--inputs takes one value each time, and b.npy c.npy were read as extra arguments: repeat the option for each "
     "value (--inputs a.npy --inputs b.npy --inputs c.npy)"),
    (["--inputs=a.npy", "b.npy"],
     "--inputs takes one value each time, and b.npy was read as an extra argument: repeat the option for each value "
     "(--inputs a.npy --inputs b.npy)"),
    (["--random", "--range", "x=0:1", "y=0:2"],
     "--range takes one value each time, and y=0:2 was read as an extra argument: repeat the option for each value "
     "(--range x=0:1 --range y=0:2)"),
    (["--random", "--dim", "batch=3", "seq=17"],
     "--dim takes one value each time, and seq=17 was read as an extra argument: repeat the option for each value "
     "(--dim batch=3 --dim seq=17)"),
    (["--random", "--dim", "batch=3,seq=17"],
     "Invalid value for '--dim': 'batch=3,seq=17' sets two variables; give each its own --dim (repeat the option): "
     "--dim batch=3 --dim seq=17"),
], ids=["inputs", "inputs-inline", "range", "dim", "dim-pairs"])
def test_several_values_for_one_option_say_to_repeat_it(run_cli, args, message):
    res = run_cli("call", GOLDEN_MLP, *args)
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {message}. See 'jaxport call --help'.\n")


def test_an_extra_argument_after_no_repeatable_option_keeps_click_s_words(run_cli):
    res = run_cli("inspect", GOLDEN_MLP, "extra")
    assert res.stderr == "error[usage]: Got unexpected extra argument (extra). See 'jaxport inspect --help'.\n"


def test_a_gpu_is_named_cuda(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(EXAMPLES / "mlp", "mlp")
    hint = "Did you mean 'cuda'? (JAX names an NVIDIA GPU cuda, an AMD one rocm.) Use some of: cpu, cuda, rocm, tpu."
    res = run_cli("export", "mlp/model.py:predict", "--shapes", "mlp/spec.yaml", "--platform", "gpu")
    assert (res.exit_code, res.stderr) == (3, f"error[spec]: --platform: unknown platform 'gpu'. {hint}\n")
    Path("gpu.yaml").write_text('jaxport: 1\nargs: ["f32[b, 784]"]\nplatforms: [cpu, GPU]\n')
    with pytest.raises(jaxport.SpecError, match=re.escape(f"gpu.yaml:3: platforms: unknown platform 'GPU'. {hint}")):
        jaxport.load_spec("gpu.yaml")


def test_serve_without_its_extra_is_exit_10_as_every_missing_extra(run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "jaxport.serve.transport.kserve_server", None)  # import fails: as without kserve
    res = run_cli("serve", GOLDEN_MLP, "--dim", "batch=1")
    assert res.exit_code == 10
    assert res.stderr.startswith("error[platform]: 'jaxport serve' needs the optional extra jaxport[serve] (kserve), "
                                 "which is not installed (")
    assert res.stderr.endswith("): pip install 'jaxport[serve]'.\n")


def test_rebind_s_result_shows_what_was_done_not_the_manifest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(EXAMPLES / "mlp", "mlp")
    jaxport.export("mlp/model.py:apply", "mlp/spec-npz.yaml", output="model.jaxport")
    result = jaxport.rebind("model.jaxport", {"params": "mlp/params.npz"}, "tuned.jaxport")
    assert repr(result) == (f"<jaxport.RebindResult 'tuned.jaxport' ({result.size} bytes): params <- mlp/params.npz "
                            f"(0 of 4 tensors changed)>")


def test_an_imported_serialization_lists_each_shape_check_once(tmp_path, run_cli):
    raw = REPO / "tests" / "golden" / "jaxexport" / "0.9.1" / "bf16.jaxexport"  # which every supported JAX reads
    assert run_cli("import", raw, "-o", tmp_path / "imp.jaxport").exit_code == 0
    lines = run_cli("inspect", tmp_path / "imp.jaxport").stdout.splitlines()
    at = lines.index("  shape checks: 2 in the wrapped main")
    assert lines[at + 1:at + 3] == ["    - Expected value >= 1 for dimension variable 'b'. (2 times)", "custom calls"]


def _readme_outputs() -> list[str]:
    """The files and directories the README's shell commands write, by the options that name them."""
    text = (REPO / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", text, re.S))
    named = re.findall(r"(?<![\w-])(?:-o|--save-inputs|--cache-dir|--weights)\s+([\w.-]+)", blocks)
    named += re.findall(r"--(?:output|input)=@([\w.-]+)", blocks)  # iree-run-module's files
    copied = re.findall(r"^cp \S+ ([\w.-]+)", blocks, re.M)
    beside = [n.removesuffix(".vmfb") + s for n in named if n.endswith(".vmfb") for s in (".irpa", ".run.json")]
    return sorted({n for n in named + copied + beside if not n.isupper() and n not in ("DIR", "NEW")})


def test_the_readme_s_commands_leave_nothing_git_would_add(tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    outputs = _readme_outputs()
    assert {"gold-in.npz", "mlp.vmfb", "mlp.run.json", "xla-cache", "x.npy", "output.npy"} <= set(outputs), outputs
    res = subprocess.run(["git", "check-ignore", "--no-index", *outputs], cwd=REPO, capture_output=True, text=True)
    assert sorted(res.stdout.split()) == outputs
