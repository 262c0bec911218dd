"""Options shared by several commands, defined once."""

from __future__ import annotations

from typing import Any, Callable

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
