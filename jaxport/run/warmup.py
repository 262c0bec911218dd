"""Warming up: an artifact's program checked and compiled for given shapes ahead of its first call.

``jaxport warmup`` and ``Loaded.warmup`` compile a loaded function for the input shapes that given dimension values
make (every combination of them), with JAX's persistent compilation cache on in the user's cache directory
(``usercache.default_cache_dir``, or ``--cache-dir``), so that a later process with the same cache (a server's first
request) fetches each executable instead of compiling it; the check of the program (``isolate``) leaves its
verdict in the same directory, so that process starts no checking child either. Build a container image this way:
warm up at build time, ship the cache directory.

Compiled executables are native code: they stay in the user's own cache directory and never enter an artifact.
JAX keys each one by the program, the jaxlib version, the platform, the devices' kind and topology and the compile
options (see ``cache``), so another jaxlib, device kind or program never reuses it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..artifact import contract
from ..artifact.model import Function
from ..errors import UsageError
from .backend import Compilation, ShapeKey
from .buckets import sizes

#: The most shape signatures one warm-up compiles (every combination of the given values counts).
MAX_SIGNATURES = 256

#: What ``Loaded.warmup`` takes: dimension values (one signature, or several values per dimension: every
#: combination), or a list of such mappings.
Shapes = Mapping[str, int | Sequence[int]] | Sequence[Mapping[str, int]] | None


@dataclass(frozen=True)
class Warmed:
    """One input shape signature compiled ahead: the dimension values, the signature and how it was compiled."""

    dims: dict[str, int]
    key: ShapeKey
    compilation: Compilation

    def as_dict(self, input_names: Sequence[str]) -> dict[str, Any]:
        c = self.compilation
        return {"dims": self.dims,
                "inputs": {n: {"shape": list(shape), "dtype": dt} for n, (shape, dt) in zip(input_names, self.key)},
                "lower_s": c.lower_seconds, "compile_s": c.seconds, "compile_cache_hit": c.cache_hit,
                "executable": c.source}


def combinations(fn: Function, shapes: Shapes, where: str) -> list[dict[str, int]]:
    """The dimension values of each signature to compile: ``{"batch": 8}`` gives one, ``{"batch": [1, 8]}`` two,
    ``[{"batch": 1}, {"batch": 8}]`` two, each checked by the rules of every ``--dim`` (``buckets.sizes``). Every
    dimension variable of the function needs a value (a server knows the shapes it will serve; none is guessed)."""
    variables = contract.dimension_variables(fn)
    if shapes is None:
        shapes = {}
    if isinstance(shapes, Mapping):
        count = math.prod(len(v) if isinstance(v, (list, tuple, range)) else 1 for v in shapes.values())
        if count > MAX_SIGNATURES:
            raise UsageError(f"{where}: {count} shape signatures to warm up (every combination of the values "
                             f"given); at most {MAX_SIGNATURES} are allowed. Give fewer values.")
        checked = sizes.given(fn, shapes)
        combos = [dict(zip(checked, chosen)) for chosen in itertools.product(*checked.values())]
    else:
        combos = [dict(c) for c in shapes]
        if len(combos) > MAX_SIGNATURES:
            raise UsageError(f"{where}: {len(combos)} shape signatures to warm up; at most {MAX_SIGNATURES} are "
                             f"allowed.")
        combos = [sizes.one(fn, c) for c in combos]
    for dims in combos:
        missing = [v for v in variables if v not in dims]
        if missing:
            raise UsageError(f"{where}: give a value for every dimension variable to warm up ({', '.join(missing)} "
                             f"missing): --dim NAME=V, or several values --dim NAME=V1,V2 (in Python: "
                             f"warmup({{{missing[0]!r}: 8}})).")
        sizes.resolved(fn, dims)  # the constraints, as every --dim
    return combos


def signature(fn: Function, dims: Mapping[str, int]) -> ShapeKey:
    """The input shape signature that ``dims`` give, checked as a call's inputs are (bounds, constraints)."""
    env = contract.resolve_dims(fn, dims)
    infos = [contract.ArrayInfo(inp.name, contract.concrete_shape(inp, env), str(dtypes.to_numpy(inp.dtype)))
             for inp in fn.inputs]
    contract.check(fn, infos)
    return tuple((a.shape, a.dtype) for a in infos)
