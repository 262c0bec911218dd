"""``jaxport completion``: the script each shell sources, and completions it answers through click."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

JAXPORT = str(Path(sys.executable).parent / "jaxport")


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o nosort -F _jaxport_completion jaxport"),
                                               ("zsh", "compdef _jaxport_completion jaxport"),
                                               ("fish", "complete --no-files --command jaxport")])
def test_completion_prints_the_script_of_each_shell(shell, marker):
    res = subprocess.run([JAXPORT, "completion", shell], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert marker in res.stdout
    assert "_JAXPORT_COMPLETE" in res.stdout


def test_completion_of_an_unknown_shell_is_a_usage_error():
    res = subprocess.run([JAXPORT, "completion", "tcsh"], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.startswith("error[usage]: ")
    assert "'tcsh' is not one of 'bash', 'fish', 'zsh'" in res.stderr


def _complete(words: str) -> list[str]:
    env = dict(os.environ, _JAXPORT_COMPLETE="bash_complete", COMP_WORDS=words,
               COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    res = subprocess.run([JAXPORT], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return [line.split(",", 1)[1] for line in res.stdout.splitlines() if line]  # none: one empty line


def test_the_script_completes_commands_and_options():
    assert _complete("jaxport ex") == ["export", "extract"]
    assert {"--random", "--range"} <= set(_complete("jaxport call --ra"))


@pytest.mark.parametrize(("words", "values"), [
    ("jaxport export m.py:f --platform ", ["cpu", "cuda", "rocm", "tpu"]),
    ("jaxport export m.py:f --platform t", ["tpu"]),
    ("jaxport verify a.jaxport --platform cu", ["cuda"]),
    ("jaxport verify a.jaxport --against-platform c", ["cpu", "cuda"]),
    ("jaxport warmup a.jaxport --target tpu-v6", ["tpu-v6e", "tpu-v6e-4", "tpu-v6e-8"]),
    ("jaxport check a.jaxport --target cuda-h1", ["cuda-h100", "cuda-h100-8"]),
    ("jaxport call a.jaxport --runtime ", ["jax", "iree"]),
    ("jaxport verify a.jaxport --runtime i", ["iree"]),
    ("jaxport diff a.jaxport b.jaxport --fail-on ", ["breaking", "rebind", "any", "never"]),
    ("jaxport diff a.jaxport b.jaxport --fail-on r", ["rebind"]),
    ("jaxport export m.py:f --platform x", []),
])
def test_option_values_complete(words, values):
    """Issue 57: completion knew commands and options, not their values."""
    assert _complete(words) == values


def test_completed_values_are_accepted_and_refused_as_before(tmp_path):
    """Completion adds no check: --platform and --target still take any name, and refuse it with their own
    messages (the spec's and the target's), as before."""
    (tmp_path / "m.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "s.yaml").write_text('jaxport: 1\nargs: ["f32[2]"]\n')
    res = subprocess.run([JAXPORT, "export", "m.py:f", "--shapes", "s.yaml", "--platform", "gpu", "-o", "m.jaxport"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert (res.returncode, res.stderr) == (3, (
        "error[spec]: --platform: unknown platform 'gpu'. Did you mean 'cuda'? (JAX names an NVIDIA GPU cuda, an AMD "
        "one rocm.) Use some of: cpu, cuda, rocm, tpu.\n"))
    res = subprocess.run([JAXPORT, "warmup", "m.jaxport", "--target", "tpu-v5"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert res.returncode == 2
    assert res.stderr.startswith(
        "error[usage]: --target tpu-v5: unknown target. Did you mean 'tpu-v5e'? Targets: cpu, tpu-v5e, ")
