"""Batches of any size on a fixed set of compiled shapes: the engine-free core of ``jaxport serve`` and the batch
engines (Ray Data, Beam, Spark).

A request path that calls a program at whatever batch size it meets compiles a new executable for every size
(a Beam job over 3000 rows met 12 sizes and compiled 12 times; Ray Data's ragged last batch compiled mid-job in
every actor). :class:`Batched` compiles a fixed set of shape *buckets* ahead and runs every batch on one of them:

- The buckets: for each dimension variable, the sizes given (``dims={"batch": [1, 8, 32]}``, ``--dim
  batch=1,8,32``), or else the sizes ``jaxport compile`` proposes from the spec's bounds (``run.buckets``: the
  powers of two inside them and the upper bound, at most 8 buckets); every combination that satisfies the spec's
  constraints. :meth:`Batched.warmup` compiles them all.
- A call runs on the smallest bucket that fits it (the fewest input elements): each variable equal to the
  bucket's value, or not above it where the program is proven to work row by row along the variable
  (``run.rowwise``, the proof ``jaxport compile`` records for IREE modules). There the inputs are padded along
  that variable's axes with copies of their last row (``edge``: a padded row is a valid row) and the outputs
  sliced back, which gives what the call gives unpadded.
- The *batch variable* is the one that sizes axis 0 of every input and every output, exactly, with a row-wise
  proof. A batch of more rows than the largest bucket holds is split into chunks of that bucket's size (the last
  one padded), called one by one and concatenated; so are batches over the spec's upper bound.
- Where padding is not proven safe, a call must match a bucket exactly; otherwise it is refused with the proof's
  reason (an InputError). Inputs are checked by the artifact's own checks (``Loaded.prepare``: names, dtypes,
  shapes, bounds, constraints) before anything runs, with the artifact's messages.

Nothing here compiles after :meth:`Batched.warmup`: every call runs on a bucket's signature
(:attr:`Batched.compilations_after_warmup` counts, and tests assert, 0). Calls are serialized by a lock (one
program runs at a time per function; XLA itself uses every core).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import dtypes
from ..artifact import contract
from ..artifact.model import Function, Input, Output
from ..errors import InputError, UsageError
from ..run import buckets as buckets_mod
from ..run.deploy import padding_verdicts
from ..run.iree import specialize
from ..run.jax_backend import JaxBackend
from ..run.loaded import Loaded
from ..run.rowwise import Verdict
from ..run.warmup import Warmed

#: What a plan is given: sizes per dimension variable (one size, or several: every combination).
Dims = Mapping[str, int | Sequence[int]]


def bucket_label(bucket: Mapping[str, int]) -> str:
    """``batch=8,seq=128``, or ``static`` for a function without dimension variables (metric labels, messages)."""
    return ",".join(f"{k}={v}" for k, v in bucket.items()) or "static"


def plan_buckets(f: Function, dims: Dims | None = None) -> buckets_mod.Plan:
    """The buckets of function ``f`` (its record): ``dims``' sizes for the variables it names, the sizes
    ``run.buckets.propose`` takes from the spec's bounds for the others (see the module docstring)."""
    variables = contract.dimension_variables(f)
    given = {k: [v] if isinstance(v, int) else list(v) for k, v in (dims or {}).items()}
    for name, values in given.items():
        if name not in variables:
            have = ", ".join(variables) or "none"
            raise UsageError(f"--dim {name}: the function has no dimension variable {name!r}; it has {have}.")
        if not values:
            raise UsageError(f"--dim {name}: give at least one size.")
        bounds = f.bounds_of(name)
        for value in values:
            if type(value) is not int or not bounds.holds(value):  # noqa: E721 - no bools or floats
                raise UsageError(f"--dim {name}={','.join(map(str, values))}: {value!r} is outside the spec bound "
                                 f"{bounds.text(name)}.")
    if not variables:
        return buckets_mod.Plan([{}], "static")
    if not given:
        return buckets_mod.propose(f)
    lists: dict[str, list[int]] = {}
    for v in variables:
        if v in given:
            lists[v] = sorted(set(given[v]))
            continue
        b = f.bounds_of(v)
        if b.hi is None:
            raise UsageError(f"dimension {v!r} has no upper bound in the spec, so no buckets can be proposed for it; "
                             f"give the sizes to compile with --dim {v}=N1,N2,... (dims={{{v!r}: [...]}} in "
                             f"Python).")
        lists[v] = [1 << k for k in range(max(b.hi, 1).bit_length()) if b.lo <= 1 << k <= b.hi]
        if not lists[v] or lists[v][-1] != b.hi:
            lists[v].append(b.hi)
    chosen = buckets_mod.plan(f, grid=lists)
    chosen.source = "--dim"
    return chosen


def verdicts_of(loaded: Loaded) -> dict[str, Verdict]:
    """Whether calls may pad each dimension variable of a loaded function (``run.rowwise``, as ``jaxport compile``
    decides it): the program specialized at two sizes of each variable and compared."""
    import jax

    f = loaded.function_record
    variables = contract.dimension_variables(f)
    backend = loaded.backend
    if not isinstance(backend, JaxBackend):
        return {v: Verdict(v, False, f"the {loaded.runtime} runtime offers no program to check it on")
                for v in variables}
    cache: dict[tuple[tuple[str, int], ...], str] = {}

    def specialized(env: Mapping[str, int]) -> str:
        key = tuple(sorted(env.items()))
        if key not in cache:
            structs = [jax.ShapeDtypeStruct(contract.concrete_shape(i, env), dtypes.to_numpy(i.dtype))
                       for i in f.inputs]
            cache[key] = specialize(backend, structs)
        return cache[key]

    return padding_verdicts(f, len(f.weights), specialized)


def batch_variable(f: Function, verdicts: Mapping[str, Verdict]) -> tuple[str | None, str]:
    """The variable that sizes axis 0 of every input and output, exactly, and may be padded; or None and why not."""
    entries: list[tuple[str, Input | Output]] = [("input", e) for e in f.inputs] + [("output", e) for e in f.outputs]
    if not f.inputs:
        return None, "the function takes no inputs"
    first: str | None = None
    for kind, e in entries:
        shape = e.shape
        axis0 = shape[0].strip() if shape and isinstance(shape[0], str) else None
        if axis0 is None or axis0 not in verdicts:
            what = "is a scalar" if not shape else f"has axis 0 = {shape[0]}, not a dimension variable"
            return None, f"{kind} {e.name!r} {what}"
        if first is None:
            first = axis0
        elif axis0 != first:
            return None, f"{kind} {e.name!r} has axis 0 = {axis0}, but {entries[0][0]} " \
                         f"{entries[0][1].name!r} has {first}"
    assert first is not None
    verdict = verdicts[first]
    if not verdict.allowed:
        return None, f"padding {first} is not proven safe: {verdict.reason}"
    return first, ""


@dataclass
class BucketStats:
    """What one bucket ran: program calls, real rows (of the batch variable; 1 per call without one), the rows
    padding added, and the input elements padding added (the waste, for any variable)."""

    calls: int = 0
    rows: int = 0
    padded_rows: int = 0
    padded_elements: int = 0


class Batched:
    """A loaded function called on a fixed set of compiled buckets (see the module docstring).

    ``batched(arrays)`` takes input arrays by name and returns the outputs by name (numpy), equal to the function
    called directly on ``arrays``. ``dims`` chooses the buckets (default: from the spec's bounds).
    """

    def __init__(self, loaded: Loaded, dims: Dims | None = None, *,
                 verdicts: Mapping[str, Verdict] | None = None):
        self.loaded = loaded
        f = self.function_record = loaded.function_record
        self.where = f"{loaded.path}: function {loaded.function!r}"
        self.plan = plan_buckets(f, dims)
        self.buckets: list[dict[str, int]] = self.plan.buckets
        self.variables = contract.dimension_variables(f)
        self.verdicts: dict[str, Verdict] = dict(verdicts) if verdicts is not None else verdicts_of(loaded)
        self.input_names = f.input_names
        self.output_names = f.output_names
        #: The batch variable (axis 0 of everything, padding proven), or None; why not, when None.
        self.batch, self.no_batch_reason = batch_variable(f, self.verdicts) if self.variables else \
            (None, "the function has no dimension variables")
        self._elements = [sum(math.prod(contract.concrete_shape(i, b)) for i in f.inputs) for b in self.buckets]
        self._order = sorted(range(len(self.buckets)), key=lambda k: self._elements[k])
        self.stats: dict[str, BucketStats] = {bucket_label(b): BucketStats() for b in self.buckets}
        self._lock = threading.Lock()
        self._warm: int | None = None

    def __repr__(self) -> str:
        return f"<jaxport.serve.Batched {self.loaded.function!r}: {len(self.buckets)} buckets>"

    # -- the plan --

    @property
    def max_rows(self) -> int | None:
        """The most rows of the batch variable one program call takes (the largest bucket's), or None."""
        return max(b[self.batch] for b in self.buckets) if self.batch else None

    def padding(self, variable: str) -> bool:
        verdict = self.verdicts.get(variable)
        return bool(verdict and verdict.allowed)

    def describe(self) -> dict[str, Any]:
        """The plan as plain data: buckets, the batch variable, and each variable's padding verdict."""
        return {"buckets": [dict(b) for b in self.buckets], "source": self.plan.source, "notes": list(self.plan.notes),
                "batch": self.batch, "max_rows": self.max_rows,
                "no_batch_reason": self.no_batch_reason or None,
                "padding": {v: d.as_dict() for v, d in self.verdicts.items()}}

    # -- warm-up --

    def warmup(self, cache_dir: str | Path | None = None) -> list[Warmed]:
        """Compile every bucket (``Loaded.warmup``, into JAX's persistent cache in ``cache_dir``); from then on
        :attr:`compilations_after_warmup` counts compilations (0 is the contract)."""
        done = self.loaded.warmup([dict(b) for b in self.buckets], cache_dir=cache_dir)
        self._warm = len(self.loaded.compiled_signatures)
        return done

    @property
    def compilations_after_warmup(self) -> int | None:
        """Programs compiled since :meth:`warmup` (None before it)."""
        return None if self._warm is None else len(self.loaded.compiled_signatures) - self._warm

    # -- calls --

    def _named(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        import numpy as np

        for name in arrays:
            if name not in self.input_names:
                raise contract.unknown_input_error(name, self.input_names)
        missing = [n for n in self.input_names if n not in arrays]
        if missing:
            raise InputError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}.")
        return {n: arrays[n] if hasattr(arrays[n], "shape") and hasattr(arrays[n], "dtype") else np.asarray(arrays[n])
                for n in self.input_names}

    def rows(self, arrays: Mapping[str, Any]) -> int | None:
        """The rows of a batch (axis 0 of its inputs, all equal), or None without a batch variable; raises
        InputError naming the input whose row count differs."""
        if self.batch is None:
            return None
        named = self._named(arrays)
        counts = {n: int(a.shape[0]) if len(a.shape) else None for n, a in named.items()}
        first = self.input_names[0]
        for n, c in counts.items():
            if c is None:
                raise InputError(f"input {n!r} is a scalar; its declared shape starts with {self.batch} (the batch "
                                 f"axis).")
            if c != counts[first]:
                raise InputError(f"input {n!r} has {c} rows (axis 0, {self.batch}) and input {first!r} has "
                                 f"{counts[first]}; every input's axis 0 is {self.batch}.")
        return counts[first]

    def _chunks(self, named: dict[str, Any]) -> list[dict[str, Any]]:
        rows, most = self.rows(named), self.max_rows
        if rows is None or most is None or rows <= most:
            return [named]
        return [{n: a[lo:lo + most] for n, a in named.items()} for lo in range(0, rows, most)]

    def choose(self, dims: Mapping[str, int]) -> dict[str, int]:
        """The smallest bucket that fits a call's dimension values; InputError saying why none does."""
        for k in self._order:
            b = self.buckets[k]
            if all(v not in dims or b[v] == dims[v] or (self.padding(v) and b[v] >= dims[v]) for v in self.variables):
                return b
        shown = ", ".join(f"{v}={dims[v]}" for v in self.variables if v in dims)
        why = []
        for v in self.variables:
            if v not in dims:
                continue
            sizes = sorted({b[v] for b in self.buckets})
            if self.padding(v):
                if dims[v] > sizes[-1]:
                    why.append(f"{v}={dims[v]} is above the largest bucket's {sizes[-1]}")
            elif dims[v] not in sizes:
                why.append(f"{v} must equal a bucket's value ({', '.join(map(str, sizes))}) because padding it is "
                           f"not proven safe: {self.verdicts[v].reason}")
        detail = "; ".join(why) or f"no combination of the buckets ({'; '.join(map(bucket_label, self.buckets))}) " \
                                    f"covers it"
        raise InputError(f"{self.where}: no compiled bucket fits {shown}: {detail}. Serve with --dim to compile "
                         f"the sizes you call with (dims={{...}} in Python).")

    def check(self, arrays: Mapping[str, Any]) -> list[dict[str, int]]:
        """Check a batch as a call would, without running it: the bucket each chunk runs on. Raises InputError
        (the artifact's message, or why no bucket fits)."""
        chunks = self._chunks(self._named(arrays))
        ends = chunks if len(chunks) < 3 else [chunks[0], chunks[-1]]  # the middle chunks have the first's shapes
        chosen = [self.choose(self.loaded.prepare(c).dims) for c in ends]
        return chosen if len(chunks) < 3 else [chosen[0]] * (len(chunks) - 1) + [chosen[1]]

    def __call__(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs by name for input arrays by name (any number of rows; see the module docstring)."""
        import numpy as np

        named = self._named(arrays)
        chunks = self._chunks(named)
        if len(chunks) > 1:
            self.check(named)  # every chunk's shapes before the first runs
        parts = [self._one(c) for c in chunks]
        if len(parts) == 1:
            return parts[0]
        return {n: np.concatenate([p[n] for p in parts]) for n in self.output_names}

    def _one(self, arrays: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        dims = self.loaded.prepare(arrays).dims
        bucket = self.choose(dims)
        f = self.function_record
        padded: dict[str, Any] = {}
        for inp in f.inputs:
            a = arrays[inp.name]
            widths = [(0, 0)] * len(a.shape)
            for v, verdict in self.verdicts.items():
                if v in dims and bucket[v] > dims[v]:
                    for axis in verdict.inputs.get(inp.name, []):
                        widths[axis] = (0, bucket[v] - dims[v])
            if any(w for _, w in widths):
                a = np.asarray(a)
                a = np.pad(a, widths, mode="edge") if a.size else np.pad(a, widths)
            padded[inp.name] = a
        with self._lock:
            run = self.loaded.run(padded)
            stats = self.stats[bucket_label(bucket)]
            stats.calls += 1
            rows = dims[self.batch] if self.batch else 1
            stats.rows += rows
            stats.padded_rows += bucket[self.batch] - rows if self.batch else 0
            stats.padded_elements += sum(math.prod(np.shape(padded[n])) - math.prod(np.shape(arrays[n]))
                                         for n in self.input_names)
        out = {}
        for (name, value), o in zip(run.leaves, f.outputs):
            index = [slice(None)] * np.ndim(value)
            for v, verdict in self.verdicts.items():
                if v in dims and bucket[v] > dims[v]:
                    for axis in verdict.outputs.get(o.name, []):
                        index[axis] = slice(0, dims[v])
            out[name] = np.asarray(value)[tuple(index)]
        return out

    def empty_outputs(self) -> dict[str, Any]:
        """Outputs of a batch of 0 rows (what an engine passes for an empty partition): arrays of 0 rows."""
        import numpy as np

        if self.batch is None:
            raise InputError(f"{self.where}: a batch of 0 rows has no batch axis to be empty along "
                             f"({self.no_batch_reason}).")
        smallest = self.buckets[self._order[0]]
        return {o.name: np.zeros(contract.concrete_shape(o, {**smallest, self.batch: 0}), dtypes.to_numpy(o.dtype))
                for o in self.function_record.outputs}
