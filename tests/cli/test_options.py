"""The option groups of cli/options.py, each defined once and used by every command that takes it: what they parse
into, and how they refuse (no JAX: a small click command built from the groups, and the real commands' usage)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from jaxport_cli.options import bind_root_options, dim_option, tolerance_options


def _parsed(decorate, args):
    """What a command decorated with ``decorate`` receives for ``args``: (exit code, its keyword arguments, stderr)."""
    got = {}

    @click.command()
    @decorate
    def command(**kwargs):
        got.update(kwargs)

    res = CliRunner().invoke(command, args)
    return res.exit_code, got, res.stderr


def test_dim_takes_several_values_and_a_repeated_name_adds_them():
    code, got, _ = _parsed(dim_option("help"), ["--dim", "b=1,2", "--dim", "t=4", "--dim", "b=2,3"])
    assert (code, got) == (0, {"dims": {"b": [1, 2, 3], "t": [4]}})


def test_dim_of_a_command_that_runs_one_shape_takes_one_value():
    assert _parsed(dim_option("help", one_value=True), ["--dim", "b=8", "--dim", "t=2"])[:2] == (
        0, {"dims": {"b": 8, "t": 2}})
    code, _, err = _parsed(dim_option("help", one_value=True), ["--dim", "b=1,2"])
    assert code == 2 and ("Invalid value for '--dim': b has 2 values (1, 2), and this command runs one shape; give "
                          "one (e.g. --dim b=1).") in err
    code, _, err = _parsed(dim_option("help", one_value=True), ["--dim", "b"])
    assert code == 2 and "Invalid value for '--dim': 'b' is not NAME=VALUE (e.g. --dim batch=8)." in err


def test_the_deprecated_alias_adds_its_values_and_says_so_once():
    code, got, err = _parsed(dim_option("help", deprecated_alias="--dims"),
                             ["--dims", "b=1,8", "--dim", "t=2", "--dims", "b=32"])
    assert (code, got) == (0, {"dims": {"t": [2], "b": [1, 8, 32]}})
    assert err == "note: --dims is deprecated; it is now --dim NAME=V[,V...], which takes the same values.\n"
    assert _parsed(dim_option("help", deprecated_alias="--dims"), ["--dim", "b=1"])[2] == ""


def test_bind_gives_each_name_once():
    group = bind_root_options("bind help", "root help")
    assert _parsed(group, ["--bind", "params=w.npz", "--root", "."])[:2] == (
        0, {"binds": {"params": "w.npz"}, "root": "."})
    code, _, err = _parsed(group, ["--bind", "params=a.npz", "--bind", "params=b.npz"])
    assert code == 2 and "Invalid value for '--bind': 'params' is given twice; bind each argument once." in err
    code, _, err = _parsed(group, ["--bind", "params"])
    assert code == 2 and "Invalid value for '--bind': 'params': expected NAME=SOURCE, e.g. params=weights.npz." in err


def test_tolerances_read_as_sentences_with_or_without_a_condition():
    @click.command()
    @tolerance_options("With --expect: ")
    def conditional(**kwargs):
        pass

    @click.command()
    @tolerance_options()
    def plain(**kwargs):
        pass

    assert [p.help for p in conditional.params] == [
        "With --expect: absolute tolerance for every output (default: by output dtype).",
        "With --expect: relative tolerance for every output (default: by output dtype).",
        "With --expect: let an output that is NaN/Inf everywhere on both sides pass (default: it is inconclusive and "
        "fails)."]
    assert [p.help for p in plain.params][0] == "Absolute tolerance for every output (default: by output dtype)."
    code, _, err = _parsed(tolerance_options(), ["--atol", "nan"])
    assert code == 2 and "Invalid value for '--atol': nan is not a finite number." in err


@pytest.mark.parametrize("args,message", [
    (["call", "a.jaxport", "--random", "--dim", "batch=1,2"],
     "Invalid value for '--dim': batch has 2 values (1, 2), and this command runs one shape; give one (e.g. --dim "
     "batch=1). See 'jaxport call --help'."),
    (["export", "m.py:f", "-s", "s.yaml", "--bind", "p=a.npz", "--bind", "p=b.npz"],
     "Invalid value for '--bind': 'p' is given twice; bind each argument once. See 'jaxport export --help'."),
    (["verify", "a.jaxport", "--bind", "p"],
     "Invalid value for '--bind': 'p': expected NAME=SOURCE, e.g. params=weights.npz. See 'jaxport verify --help'."),
    (["compile", "a.jaxport", "-o", "m.vmfb", "--dim", "batch=x"],
     "Invalid value for '--dim': 'batch=x': 'x' is not an integer. See 'jaxport compile --help'."),
])
def test_the_commands_refuse_as_the_groups_do(run_cli, args, message):
    res = run_cli(*args)
    assert (res.exit_code, res.stdout, res.stderr) == (2, "", f"error[usage]: {message}\n")
