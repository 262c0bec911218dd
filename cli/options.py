"""Options shared by several commands, defined once."""

from __future__ import annotations

import math
import re
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


def allow_custom_call_option(f: F) -> F:
    """``--allow-custom-call TARGET``: what the caller lets a program call beyond JAX's guaranteed-stable targets."""
    return click.option("--allow-custom-call", "allow_custom_calls", multiple=True, metavar="TARGET",
                        help="Let the program call this custom-call target, which JAX does not guarantee stable (a "
                             "kernel this process provides); repeatable. The artifact's own list of allowed targets "
                             "grants nothing, and host callbacks are never allowed.")(f)


def _parse_dims(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for text in values:
        name, eq, value = text.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise click.BadParameter(f"{text!r} is not NAME=VALUE (e.g. --dim batch=8).", ctx, param)
        try:
            dims[name] = _dimension(value)
        except ValueError:
            raise click.BadParameter(f"{text[:60]!r}: {value[:40]!r} is not an integer.", ctx, param) from None
        if dims[name] < 0:
            raise click.BadParameter(f"{text!r}: a dimension cannot be negative.", ctx, param)
        _check_dimension(dims[name], text, ctx, param)
    return dims


#: The largest dimension size (what a manifest may record).
MAX_DIMENSION = 1 << 62


def _dimension(text: str) -> int:
    """An integer option value; one of more digits than any dimension has reads as just above the cap (int()
    refuses thousands of digits with a message about Python, not about the option)."""
    digits = text.strip().lstrip("+")
    if digits.isdigit() and len(digits.lstrip("0")) > 19:
        return MAX_DIMENSION + 1
    return int(text.strip())


def _check_dimension(value: int, text: str, ctx: click.Context, param: click.Parameter) -> None:
    if value > MAX_DIMENSION:
        raise click.BadParameter(f"{text[:60]!r}: a dimension is at most 2**62.", ctx, param)


def finite_float(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A callback for float options: NaN and infinities are refused (FloatRange lets NaN through)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number.", ctx, param)
    return value


def at_most(limit: int) -> Callable[[click.Context, click.Parameter, int | None], int | None]:
    """A callback for integer options that refuses values above ``limit`` (after the option's own type check)."""

    def check(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
        if value is not None and value > limit:
            raise click.BadParameter(f"{value} is more than {limit}, the most this option takes.", ctx, param)
        return value

    return check


def seed_option(default: int | None, help: str) -> Callable[[F], F]:
    """``--seed N``: a non-negative integer, as numpy's generators take."""
    return click.option("--seed", type=click.IntRange(min=0), default=default, show_default=default is not None,
                        help=help)


def dim_option(f: F) -> F:
    return click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE", callback=_parse_dims,
                        help="Value of a dimension variable (e.g. batch=8); repeatable.")(f)


def input_selection_options(f: F) -> F:
    """``--inputs`` (files), or ``--random`` with ``--dim`` and ``--seed``: where a command's input arrays come from."""
    f = seed_option(None, "Seed of --random (default 0).")(f)
    f = dim_option(f)
    f = click.option("--random", "use_random", is_flag=True,
                     help="Generate the inputs from the signature: each from the range: its spec declares, else "
                          "standard normal floats, integers 0..7, fair coin-flip bools.")(f)
    return click.option("--inputs", "-i", "items", multiple=True, metavar="FILE",
                        help="Input arrays: FILE.npy repeated in the order 'inspect' lists the inputs, NAME=FILE.npy, "
                             "or one .npz keyed by input names. Repeatable.")(f)


def _range_bound(text: str) -> float | str:
    """One bound of ``--range``: an integer (kept exact, for 64-bit integer inputs), a finite float, or a dimension
    expression (``nodes``, ``seq - 1``: an integer input's bound at each call's dimension values)."""
    t = text.strip()
    try:
        float(t)
    except ValueError:
        if re.fullmatch(r"[-+*()0-9\s]*[A-Za-z_][A-Za-z0-9_+\-*/()\s,]*", t):
            return t  # a dimension expression: the range's check and each call's dimensions take it from here
    digits = t.lstrip("+-")
    if digits.isdigit() and t[:1] in "+-0123456789":
        if len(digits) > 40:  # beyond any dtype; int() refuses thousands of digits with a message about Python
            raise ValueError(t)
        return int(t)
    value = float(t)
    if not math.isfinite(value):
        raise ValueError(t)
    return value


def _parse_ranges(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
                  ) -> dict[str, tuple[float | str, float | str]]:
    ranges: dict[str, tuple[float | str, float | str]] = {}
    for text in values:
        name, eq, rest = text.rpartition("=")
        name = name.strip()
        lo_text, colon, hi_text = rest.partition(":")
        if not eq or not name or not colon:
            raise click.BadParameter(f"{text[:80]!r} is not NAME=LO:HI (e.g. --range tokens=0:32000).", ctx, param)
        try:
            lo, hi = _range_bound(lo_text), _range_bound(hi_text)
        except ValueError:
            raise click.BadParameter(f"{text[:80]!r}: LO and HI must be finite numbers (e.g. x=-1:1, "
                                     f"tokens=0:32000).", ctx, param) from None
        if not isinstance(lo, str) and not isinstance(hi, str) and lo >= hi:
            raise click.BadParameter(f"{text[:80]!r}: the range is empty; LO must be less than HI (the range is "
                                     f"half-open, [LO, HI)).", ctx, param)
        if name in ranges:
            raise click.BadParameter(f"input {name!r} has two ranges; give one --range per input.", ctx, param)
        ranges[name] = (lo, hi)
    return ranges


def range_option(f: F) -> F:
    """``--range NAME=LO:HI`` (repeatable): the half-open value range of a random input, as ``ranges``
    (input name -> (LO, HI)); check it against the function with ``jaxport.run.inputs.check_ranges``."""
    return click.option("--range", "ranges", multiple=True, metavar="NAME=LO:HI", callback=_parse_ranges,
                        help="Draw random input NAME from [LO, HI): floats uniform, integers LO..HI-1 (e.g. "
                             "tokens=0:32000 gives ids 0..31999; an integer input's bound may be a dimension, "
                             "senders=0:nodes); repeatable. Default: the spec's range: of the "
                             "input, else floats N(0,1), integers 0..7, bools coin flips.")(f)


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
                value = _dimension(item)
            except ValueError:
                raise click.BadParameter(f"{text[:60]!r}: {item.strip()[:40]!r} is not an integer.", ctx,
                                         param) from None
            if value < 0:
                raise click.BadParameter(f"{text!r}: a dimension cannot be negative.", ctx, param)
            _check_dimension(value, text, ctx, param)
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


# --- --isolate: rerun a command in a child process with limits ----------------------------------------------------

#: The child's wall-clock limit when --time-limit is not given.
DEFAULT_TIME_LIMIT = 600.0
_ISOLATE_FLAGS = ("--isolate",)
_ISOLATE_VALUED = ("--memory-limit", "--time-limit")


class IsolatableCommand(click.Command):
    """A command that can rerun itself in a child process (``--isolate``): it keeps its raw arguments for that."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["jaxport.args"] = list(args)
        return super().parse_args(ctx, args)


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
#: The largest ``--memory-limit`` (1 PiB) and ``--time-limit`` (a week): past them a limit means nothing.
MAX_MEMORY_LIMIT = 1 << 50
MAX_TIME_LIMIT = 7 * 24 * 3600.0


def _parse_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1:] if text[-1:] in _UNITS and text[-1:] else ""
    try:
        number = float(text[:-1] if unit else text) if len(text) <= 32 else math.inf
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a size such as 8G, 512M or 1073741824.", ctx, param) from None
    if math.isnan(number):
        raise click.BadParameter(f"{value!r} is not a size such as 8G, 512M or 1073741824.", ctx, param)
    if number * _UNITS[unit] > MAX_MEMORY_LIMIT:
        raise click.BadParameter(f"{value[:40]!r} is more than {MAX_MEMORY_LIMIT >> 50}P, the largest memory limit.",
                                 ctx, param)
    size = int(number * _UNITS[unit])
    if size < 256 << 20:
        raise click.BadParameter(f"{value!r} is less than 256M, too little to start Python and JAX.", ctx, param)
    return size


def isolate_options(f: F) -> F:
    """``--isolate`` with ``--memory-limit`` and ``--time-limit``: run the command in a child process."""
    f = click.option("--time-limit", type=click.FloatRange(min=1, max=MAX_TIME_LIMIT), callback=finite_float,
                     metavar="SECONDS",
                     help=f"With --isolate: stop the child after SECONDS (default {DEFAULT_TIME_LIMIT:g}).")(f)
    f = click.option("--memory-limit", callback=_parse_size, metavar="SIZE",
                     help="With --isolate: the child's memory limit, e.g. 8G (default: the machine's physical "
                          "memory), on data memory (heap and private mappings); a limit below what Python and JAX "
                          "need to start is refused, naming that floor.")(f)
    return click.option("--isolate", is_flag=True,
                        help="Read and run the artifact in a child process with memory and time limits, so that a "
                             "crash in native code becomes an error (exit code 15). For untrusted artifacts.")(f)


def isolated_args(args: list[str]) -> list[str]:
    """A command's arguments without the --isolate options (what the child runs)."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in _ISOLATE_FLAGS:
            continue
        elif a in _ISOLATE_VALUED:
            skip = True
        elif a.split("=", 1)[0] in _ISOLATE_VALUED:
            continue
        else:
            out.append(a)
    return out


def run_isolated(ctx: click.Context, what: str, memory_limit: int | None, time_limit: float | None,
                 target: str = "jaxport_cli.main:main") -> None:
    """Rerun the current command in an isolated child (``target``, the command line's entry point); relay its
    output and exit with its status. Raises CrashError when the child dies by a signal or reaches its time limit.
    """
    import sys

    from jaxport import isolate
    from jaxport._text import visible
    from jaxport.errors import CrashError

    limits = isolate.command_limits(memory_limit, time_limit or DEFAULT_TIME_LIMIT)
    args = [ctx.info_name or "", *isolated_args(ctx.meta.get("jaxport.args", []))]
    outcome = isolate.run(target, args, limits)
    # The child renders as this process does; what native code printed in it is made visible all the same.
    click.echo(visible(outcome.stdout.decode("utf-8", "replace"), newlines=True), nl=False)
    click.echo(visible(outcome.stderr.decode("utf-8", "replace"), newlines=True), nl=False, err=True)
    out_of_memory = isolate.command_error(what, outcome, limits)
    if out_of_memory is not None:
        raise out_of_memory
    death = outcome.death(limits)
    if death is not None:
        raise CrashError(f"{what}: the isolated process {death}. The artifact may be damaged or hostile; do not run "
                         f"it without --isolate.")
    sys.exit(outcome.returncode)
