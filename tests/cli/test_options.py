"""The option groups of cli/options.py, each defined once and used by every command that takes it: what they parse
into, and how they refuse (no JAX: a small click command built from the groups, and the real commands' usage)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from jaxport_cli.files import output_options, read_options
from jaxport_cli.group import cli
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
    assert code == 2 and "Invalid value for '--atol': nan is not in the range 0<=x<=1e+30." in err


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


def _params(kinds: tuple[type, ...]) -> list[tuple[str, click.Parameter]]:
    """Every (command, parameter) of the command line whose type is one of ``kinds``."""
    ctx = click.Context(cli)
    commands = [(name, cli.get_command(ctx, name)) for name in cli.list_commands(ctx)]
    return [(name, p) for name, command in commands if command is not None for p in command.params
            if isinstance(p.type, kinds)]


def _invoked(name: str, param: click.Parameter, value: str) -> tuple[int, str]:
    """``jaxport NAME`` with ``value`` for ``param`` (an argument after a placeholder for each argument before it)."""
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    before = [p for p in command.params if isinstance(p, click.Argument)]
    given = [param.opts[0], value] if isinstance(param, click.Option) else [
        *["x"] * before.index(param), value]
    res = CliRunner().invoke(cli, [name, *given])
    return res.exit_code, res.stderr


def _named(param: click.Parameter) -> str:
    """The option as click's messages name it: ``'-o' / '--output'``, or an argument's metavar, ``'ARTIFACT'``."""
    if isinstance(param, click.Option):
        return " / ".join(f"'{o}'" for o in param.opts)
    return f"'{param.make_metavar(click.Context(cli))}'"


_FLOATS = _params((click.types.FloatParamType,))
_INTS = _params((click.types.IntParamType,))


@pytest.mark.parametrize(("name", "param"), _FLOATS, ids=[f"{n} {p.opts[0]}" for n, p in _FLOATS])
def test_every_float_option_is_finite_and_bounded(name, param):
    """NaN, the infinities and 1e300 are usage errors naming the option, the value and the range, for every float
    option of every command (issue 54: serve --batch-window-ms inf killed the batching thread)."""
    assert isinstance(param.type, click.FloatRange) and None not in (param.type.min, param.type.max), param.opts
    lo, hi = param.type.min, param.type.max
    for value, shown in (("nan", "nan"), ("inf", "inf"), ("-inf", "-inf"), ("1e300", "1e+300"), ("-1e300", "-1e+300")):
        assert _invoked(name, param, value) == (
            2, f"error[usage]: Invalid value for {_named(param)}: {shown} is not in the range {lo}<=x<={hi}. See "
               f"'jaxport {name} --help'.\n")


@pytest.mark.parametrize(("name", "param"), _INTS, ids=[f"{n} {p.opts[0]}" for n, p in _INTS])
def test_every_whole_number_option_is_bounded(name, param):
    """A whole number past any bound (10**30, either sign) is a usage error naming the option, the value and its
    range."""
    assert isinstance(param.type, click.IntRange) and None not in (param.type.min, param.type.max), param.opts
    lo, hi = param.type.min, param.type.max
    for value in (10**30, -10**30):
        assert _invoked(name, param, str(value)) == (
            2, f"error[usage]: Invalid value for {_named(param)}: {value} is not in the range {lo}<=x<={hi}. See "
               f"'jaxport {name} --help'.\n")


def _path_params() -> list[tuple[str, click.Parameter]]:
    ctx = click.Context(cli)
    found = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        found += [(name, p) for p in (*read_options(command), *output_options(command))]
    return found


_PATHS = [*_path_params(), *((n, p) for n, p in _params((click.types.StringParamType,)) if p.opts[0] == "--uds")]


@pytest.mark.parametrize(("name", "param"), _PATHS, ids=[f"{n} {p.opts[0]}" for n, p in _PATHS])
def test_every_path_option_refuses_an_empty_path(name, param):
    """``''`` names no file: every option and argument that names one refuses it (issue 54: serve --uds '' served
    on TCP ports)."""
    assert _invoked(name, param, "") == (
        2, f"error[usage]: Invalid value for {_named(param)}: '' is an empty path, which names no file; give a "
           f"path. See 'jaxport {name} --help'.\n")


def test_serve_refuses_an_empty_host():
    res = CliRunner().invoke(cli, ["serve", "a.jaxport", "--host", ""])
    assert (res.exit_code, res.stderr) == (
        2, "error[usage]: Invalid value for '--host': '' is an empty host, which would listen on every interface; "
           "give an address of this machine: 127.0.0.1, or 0.0.0.0 for every interface. See 'jaxport serve "
           "--help'.\n")


@pytest.mark.parametrize(("value", "message"), [
    ("nan", "'nan' is not a size such as 8G, 512M or 1073741824."),
    ("inf", "'inf' is more than 1P, the largest memory limit."),
    ("1e300", "'1e300' is more than 1P, the largest memory limit."),
    ("-1G", "'-1G' is less than 256M, too little to start Python and JAX."),
])
@pytest.mark.parametrize("command", ["call", "inspect"])
def test_the_memory_limit_is_a_bounded_size(command, value, message):
    res = CliRunner().invoke(cli, [command, "--memory-limit", value])
    assert (res.exit_code, res.stderr) == (
        2, f"error[usage]: Invalid value for '--memory-limit': {message} See 'jaxport {command} --help'.\n")
