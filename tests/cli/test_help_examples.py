"""Every command's ``--help`` ends with an "Examples:" block of real ``jaxport CMD ...`` lines (issue 17)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from jaxport_cli.commands import COMMANDS
from jaxport_cli.main import cli


def _description(name: str) -> str:
    res = CliRunner().invoke(cli, [name, "--help"], terminal_width=110)
    assert res.exit_code == 0, res.output
    return res.output.split("\nOptions:", 1)[0].rstrip()


@pytest.mark.parametrize("name", sorted(COMMANDS))
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

    root = Path(__file__).resolve().parents[2]
    for name in sorted(COMMANDS):
        for path in re.findall(r"examples/[\w./-]+", _description(name)):
            assert (root / path).is_file(), f"{name}: {path}"


#: The order the examples run in: each command's inputs are the files the examples before it wrote.
ORDER = ["export", "inspect", "call", "verify", "diff", "warmup", "sign", "check", "extract", "compile", "import",
         "rebind", "upgrade"]
#: Examples that exit non-zero on purpose: a CI gate that fails.
EXPECTED_EXIT = {"jaxport diff mlp.jaxport mlp-bound.jaxport --rename predict=apply --fail-on rebind --json": 13}


@pytest.mark.slow
def test_examples_run(run_cli, tmp_path, monkeypatch):
    """Every example of every --help (but completion's shell lines) runs as written, in a copy of the repository's
    examples/, and exits 0 (or with the gate's documented code)."""
    import importlib.util
    import shlex
    import shutil

    from tests.support import EXAMPLES

    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JAXPORT_TODAY", "2026-12-01")
    # serve runs until stopped: tests/test_serve.py starts it and queries it; target captures a GPU (tests/gpu)
    assert sorted(ORDER) == sorted(set(COMMANDS) - {"completion", "serve", "target"})
    if importlib.util.find_spec("model_signing") is not None:  # sign's and check's examples use this key pair
        from tests.sign.keys import key_pair

        key_pair(tmp_path, "ci-signing")
    for name in ORDER:
        if name == "compile" and importlib.util.find_spec("iree") is None:
            continue
        if name == "sign" and importlib.util.find_spec("model_signing") is None:
            continue
        for line in _description(name).rpartition("\n  Examples:\n")[2].split("\n"):
            example = line.strip()
            res = run_cli(*shlex.split(example)[1:])
            assert res.exit_code == EXPECTED_EXIT.get(example, 0), (example, res.stderr)


def test_top_level_help_lists_every_exit_code(run_cli):
    """``jaxport --help`` names every exit code the command line can return (issue 23: 15 was missing)."""
    from jaxport_cli.errors import EXIT_CODES

    text = " ".join(run_cli("--help").stdout.split())
    listed = [int(n) for n in re.findall(r"(\d+) [a-z]", text.split("Exit codes: ", 1)[1].split(" See ", 1)[0])]
    assert listed == list(range(16))
    assert {code for _, code in EXIT_CODES} <= set(listed)
    assert "15 crash (an --isolate child died or reached its limits; out of memory)" in text


@pytest.mark.parametrize("typed,message", [
    ("inpsect", "No such command 'inpsect'. Did you mean 'inspect'? See 'jaxport --help'."),
    ("verfiy", "No such command 'verfiy'. Did you mean 'verify'? See 'jaxport --help'."),
    ("frobnicate", "No such command 'frobnicate'. See 'jaxport --help'."),
])
def test_a_mistyped_command_names_the_closest_one(run_cli, typed, message):
    res = run_cli(typed, "mlp.jaxport")
    assert (res.exit_code, res.stdout, res.stderr) == (2, "", f"error[usage]: {message}\n")


def test_a_mistyped_option_reads_as_one_sentence(run_cli):
    res = run_cli("inspect", "mlp.jaxport", "--jsn")
    assert (res.exit_code, res.stderr) == (
        2, "error[usage]: No such option '--jsn'. Did you mean '--json'? See 'jaxport inspect --help'.\n")
