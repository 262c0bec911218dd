"""Numbers on the command line: every number an option takes is finite and bounded, and one out of its range is a
usage error naming the option, the value and the range (click's ``Invalid value for '--OPTION': VALUE is not in the
range LO<=x<=HI.``). A float option's type is :class:`FiniteRange`; a whole number's, ``click.IntRange`` with both
bounds (:data:`MAX_NUMBER` where no smaller bound means more). ``tests/cli/test_options.py`` walks every option of
every command with ``nan``, ``inf`` and ``1e300``, so a new option cannot forget its bounds.
"""

from __future__ import annotations

import math
from typing import Any

import click

#: The largest whole number an option takes where no smaller bound means more: a dimension's largest value, 2**62, as
#: ``--dim`` and a policy's numbers are bounded.
MAX_NUMBER = 1 << 62
#: The largest ``--atol`` and ``--rtol``: far past any tolerance that tells two outputs apart, so that none is infinite
#: in all but name (``1e300``).
MAX_TOLERANCE = 1e30
#: The largest ``--seed``: numpy's generators take any non-negative integer, and 64 bits of one are plenty.
MAX_SEED = (1 << 64) - 1
#: The largest ``--memory-limit`` (1 PiB) and ``--time-limit`` (a week): past them a limit means nothing.
MAX_MEMORY_LIMIT = 1 << 50
MAX_TIME_LIMIT = 7 * 24 * 3600.0
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class FiniteRange(click.FloatRange):
    """The type of every float option: a number from ``min`` to ``max``, both bounds given, so that ``inf``, ``-inf``
    and ``1e300`` are refused as out of range, naming the range; NaN too, which click's ``FloatRange`` lets through
    (every comparison with it is false)."""

    def __init__(self, min: float, max: float) -> None:
        super().__init__(min, max)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{number} is not in the range {self._describe_range()}.", param, ctx)
        return number



def size_bytes(value: str) -> float:
    """The bytes a size such as ``8G``, ``512M``, ``1.5GiB`` or ``1073741824`` says: NaN where it says none, inf for
    a text of over 32 characters (no size is that long)."""
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1:] if text[-1:] in _UNITS and text[-1:] else ""
    try:
        return float(text[:-1] if unit else text) * _UNITS[unit] if len(text) <= 32 else math.inf
    except ValueError:
        return math.nan


def memory_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """The callback of ``--memory-limit SIZE``: bytes, from ``8G``, ``512M`` or ``1073741824``, at least 256M (what
    Python and JAX need to start) and at most :data:`MAX_MEMORY_LIMIT`."""
    if value is None:
        return None
    size = size_bytes(value)
    if math.isnan(size):
        raise click.BadParameter(f"{value!r} is not a size such as 8G, 512M or 1073741824.", ctx, param)
    if size > MAX_MEMORY_LIMIT:
        raise click.BadParameter(f"{value[:40]!r} is more than {MAX_MEMORY_LIMIT >> 50}P, the largest memory limit.",
                                 ctx, param)
    if size < 256 << 20:
        raise click.BadParameter(f"{value!r} is less than 256M, too little to start Python and JAX.", ctx, param)
    return int(size)
