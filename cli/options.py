"""Options shared by several commands, defined once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

F = Callable[..., Any]


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")(f)


def debug_option(f: F) -> F:
    return click.option("--debug", is_flag=True, help="Show the Python traceback of an error.")(f)


def platform_option(f: F) -> F:
    return click.option("--platform", "platforms", multiple=True, metavar="NAME",
                        help="Target platform (cpu, cuda, rocm, tpu); repeat for several.")(f)


def function_option(f: F) -> F:
    return click.option("--function", "function", metavar="NAME",
                        help="Function of the artifact to use when it holds several.")(f)


def _parse_dims(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for text in values:
        name, eq, value = text.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise click.BadParameter(f"{text!r} is not NAME=VALUE (e.g. --dim batch=8).", ctx, param)
        try:
            dims[name] = int(value.strip())
        except ValueError:
            raise click.BadParameter(f"{text!r}: {value!r} is not an integer.", ctx, param) from None
        if dims[name] < 0:
            raise click.BadParameter(f"{text!r}: a dimension cannot be negative.", ctx, param)
    return dims


def dim_option(f: F) -> F:
    return click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE", callback=_parse_dims,
                        help="Value of a dimension variable (e.g. batch=8); repeatable.")(f)


def input_selection_options(f: F) -> F:
    """``--inputs`` (files), or ``--random`` with ``--dim`` and ``--seed``: where a command's input arrays come from."""
    f = click.option("--seed", type=int, help="Seed of --random (default 0).")(f)
    f = dim_option(f)
    f = click.option("--random", "use_random", is_flag=True,
                     help="Generate the inputs from the signature (standard normal floats, small integers).")(f)
    return click.option("--inputs", "-i", "items", multiple=True, metavar="FILE",
                        help="Input arrays: FILE.npy repeated in the order 'inspect' lists the inputs, NAME=FILE.npy, "
                             "or one .npz keyed by input names. Repeatable.")(f)


def _parse_dim_values(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, list[int]]:
    dims: dict[str, list[int]] = {}
    for text in values:
        name, eq, rest = text.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise click.BadParameter(f"{text!r} is not NAME=VALUE[,VALUE...] (e.g. --dim batch=1,7,128).", ctx, param)
        chosen: list[int] = []
        for item in rest.split(","):
            try:
                value = int(item.strip())
            except ValueError:
                raise click.BadParameter(f"{text!r}: {item.strip()!r} is not an integer.", ctx, param) from None
            if value < 0:
                raise click.BadParameter(f"{text!r}: a dimension cannot be negative.", ctx, param)
            if value not in chosen:
                chosen.append(value)
        dims.setdefault(name, [])
        dims[name] += [v for v in chosen if v not in dims[name]]
    return dims


def dim_values_option(f: F) -> F:
    """``--dim NAME=V1,V2,...``: the values of a dimension variable to try; repeatable."""
    return click.option("--dim", "dims", multiple=True, metavar="NAME=V1,V2,...", callback=_parse_dim_values,
                        help="Values of a dimension variable to verify at (e.g. batch=1,7,128); repeatable. "
                             "Several variables: every combination.")(f)
