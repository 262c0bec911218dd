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
    return [line.split(",", 1)[1] for line in res.stdout.splitlines()]


def test_the_script_completes_commands_and_options():
    assert _complete("jaxport ex") == ["export", "extract"]
    assert {"--random", "--range"} <= set(_complete("jaxport call --ra"))
