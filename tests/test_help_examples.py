"""Every command's ``--help`` ends with an "Examples:" block of real ``jaxport CMD ...`` lines (issue 17)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from jaxport_cli.main import _COMMANDS, cli


def _description(name: str) -> str:
    res = CliRunner().invoke(cli, [name, "--help"], terminal_width=110)
    assert res.exit_code == 0, res.output
    return res.output.split("\nOptions:", 1)[0].rstrip()


@pytest.mark.parametrize("name", sorted(_COMMANDS))
def test_help_ends_with_examples(name):
    text = _description(name)
    head, sep, block = text.rpartition("\n  Examples:\n")
    assert sep, f"{name} --help has no Examples: block:\n{text}"
    lines = block.split("\n")
    # every line of the block is an example of this very command, kept as written (click's \b paragraph)
    assert 2 <= len(lines) <= 3, lines
    for line in lines:
        assert re.fullmatch(rf"    jaxport {re.escape(name)} \S.*", line), line


def test_examples_name_existing_example_files():
    """The example files an example names (examples/...) exist in the repository."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for name in sorted(_COMMANDS):
        for path in re.findall(r"examples/[\w./-]+", _description(name)):
            assert (root / path).is_file(), f"{name}: {path}"


#: The order the examples run in: each command's inputs are the files the examples before it wrote.
ORDER = ["export", "inspect", "call", "verify", "diff", "check", "extract", "compile", "import", "rebind", "warmup"]
#: Examples that exit non-zero on purpose: a CI gate that fails.
EXPECTED_EXIT = {"jaxport diff mlp.jaxport mlp-bound.jaxport --rename predict=apply --fail-on breaking --json": 13}


@pytest.mark.slow
def test_examples_run(run_cli, tmp_path, monkeypatch):
    """Every example of every --help (but completion's shell lines) runs as written, in a copy of the repository's
    examples/, and exits 0 (or with the gate's documented code)."""
    import importlib.util
    import shlex
    import shutil

    from .conftest import EXAMPLES

    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JAXPORT_TODAY", "2026-12-01")
    # serve runs until stopped: tests/test_serve.py starts it and queries it
    assert sorted(ORDER) == sorted(set(_COMMANDS) - {"completion", "serve"})
    for name in ORDER:
        if name == "compile" and importlib.util.find_spec("iree") is None:
            continue
        for line in _description(name).rpartition("\n  Examples:\n")[2].split("\n"):
            example = line.strip()
            res = run_cli(*shlex.split(example)[1:])
            assert res.exit_code == EXPECTED_EXIT.get(example, 0), (example, res.stderr)
