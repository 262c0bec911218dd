"""Warming up: an artifact's program checked and compiled for given shapes ahead of its first call.

``jaxport warmup`` and ``Loaded.warmup`` compile a loaded function for the input shapes that given dimension values make
(every combination of them: ``buckets.ahead.plan_warmup``), with JAX's persistent compilation cache on in the user's
cache directory (``usercache.default_cache_dir``, or ``--cache-dir``), so that a later process with the same cache (a
server's first request) fetches each executable instead of compiling it; the check of the program (``isolate``) leaves
its verdict in the same directory, so that process starts no checking child either. Build a container image this way:
warm up at build time, ship the cache directory.

Compiled executables are native code: they stay in the user's own cache directory and never enter an artifact.
JAX keys each one by the program, the jaxlib version, the platform, the devices' kind and topology and the compile
options (see ``cache``), so another jaxlib, device kind or program never reuses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..artifact import contract
from ..artifact.model import Function
from .backend import Compilation, ShapeKey


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
                "executable": c.source, "executable_vouched_by": c.vouched_by}


def signature(fn: Function, dims: Mapping[str, int]) -> ShapeKey:
    """The input shape signature that ``dims`` give, checked as a call's inputs are (bounds, constraints)."""
    env = contract.resolve_dims(fn, dims)
    infos = [contract.ArrayInfo(inp.name, contract.concrete_shape(inp, env), str(dtypes.to_numpy(inp.dtype)))
             for inp in fn.inputs]
    contract.check(fn, infos)
    return tuple((a.shape, a.dtype) for a in infos)
