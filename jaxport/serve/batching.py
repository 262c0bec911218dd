"""Batches of any size on a fixed set of compiled shapes: the engine-free core of ``jaxport serve`` and the batch
engines (Ray Data, Beam, Spark).

A request path that calls a program at whatever batch size it meets compiles a new executable for every size
(a Beam job over 3000 rows met 12 sizes and compiled 12 times; Ray Data's ragged last batch compiled mid-job in
every actor). :class:`Batched` compiles a fixed set of shape *buckets* ahead and runs every batch on one of them:

- The buckets: for each dimension variable, the sizes given (``dims={"batch": [1, 8, 32]}``, ``--dim
  batch=1,8,32``), or else the sizes proposed from the spec's bounds by the rule ``jaxport compile`` uses
  (``run.buckets.propose``), finer: the powers of two inside them with three sizes between each (:data:`STEPS`)
  and the upper bound, at most 64 buckets; every combination that satisfies the spec's constraints.
  :meth:`Batched.warmup` compiles them all (a server); ``lazy`` compiles the first bucket a call needs (a batch
  job: the bucket of its batch size, which its ragged last batch reuses).
- A call runs on the smallest bucket that fits it (the fewest input elements): each variable equal to the
  bucket's value, or not above it where the program is proven to work row by row along the variable
  (``run.buckets.rowwise``, the proof ``jaxport compile`` records for IREE modules). There the inputs are padded
  along that variable's axes with copies of their last row (``edge``: a padded row is a valid row) and the outputs
  sliced back, which gives what the call gives unpadded.
- The *batch variable* is the one that sizes axis 0 of every input and every output, exactly, with a row-wise
  proof. A batch of more rows than the largest bucket holds is split into chunks of that bucket's size (the last
  one padded), called one by one and concatenated; so are batches over the spec's upper bound. Splitting, and
  merging several requests into one call, need the proof's ``split`` verdict too (each output row depends on its
  own input row only, not on its position, and the variable sizes no axis but axis 0): without it a batch over the
  largest bucket is refused with the reason (an InputError; padding at the end keeps rows' positions, so a smaller
  one still runs, alone), and :attr:`Batched.split_reason` says why requests are not merged.
- Where padding is not proven safe, a call must match a bucket exactly; otherwise it is refused with the proof's
  reason (an InputError). Inputs are checked by the artifact's own checks (``Loaded.prepare``: names, dtypes,
  shapes, bounds, constraints) before anything runs, with the artifact's messages, once per request
  (:meth:`Batched.admit`); :meth:`Batched.run` runs admitted requests, several merged along the batch variable
  into one call (``batcher``), on the compiled program itself.

Nothing here compiles after :meth:`Batched.warmup`: every call runs on a bucket's signature
(:attr:`Batched.compilations_after_warmup` counts, and tests assert, 0). Calls are serialized by a lock (one
program runs at a time per function; XLA itself uses every core).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .. import dtypes, usercache
from .._jax_internals import lapack_left_alone, lapack_targets
from ..artifact import contract
from ..artifact.model import Function, Input, Output
from ..errors import InputError, UsageError
from ..program.checks import checked_targets
from ..run import buckets as buckets_mod
from ..run.buckets.padding import padding_verdicts, specializer
from ..run.buckets.rowwise import Verdict
from ..run.jax_backend import JaxBackend
from ..run.loaded import Loaded
from ..run.warmup import Warmed, signature

#: Sizes per power of two that serving and batch inference pad to by default (``run.buckets.ladder``): 2^k,
#: 1.25 * 2^k, 1.5 * 2^k and 1.75 * 2^k. Padding a call to the next wastes under 25% of its rows (under 9% over
#: request sizes 1..100, where powers of two alone waste 45%); more buckets cost only compilations at warm-up.
STEPS = 4

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
        return buckets_mod.propose(f, STEPS, buckets_mod.MAX_BUCKETS)
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
        lists[v] = buckets_mod.ladder(b.lo, b.hi)
    chosen = buckets_mod.plan(f, grid=lists)
    chosen.source = "--dim"
    return chosen


def verdicts_of(loaded: Loaded, cache_dir: str | Path | None = None) -> dict[str, Verdict]:
    """Whether calls may pad each dimension variable of a loaded function (``run.buckets.rowwise``, as ``jaxport
    compile`` decides it): the program specialized at two sizes of each variable and compared. The verdicts are
    remembered in ``cache_dir`` (default: the active cache directory), keyed by the program and the function's
    record, so that the next worker of a batch job, or the next start of a server, does not specialize it again."""

    f = loaded.function_record
    variables = contract.dimension_variables(f)
    backend = loaded.backend
    if not isinstance(backend, JaxBackend):
        return {v: Verdict(v, False, f"the {loaded.runtime} runtime offers no program to check it on")
                for v in variables}
    member = loaded.model.members.get(f.payload)
    directory = Path(cache_dir).expanduser() if cache_dir is not None else usercache.active_cache_dir()
    digest = None
    if member is not None:
        record = json.dumps([member.sha256, f.to_json(), len(f.weights)], sort_keys=True, default=str)
        digest = hashlib.sha256(record.encode()).hexdigest()
        remembered = _remembered(usercache.read_record(directory, PADDING_RECORD, digest), variables)
        if remembered is not None:
            return remembered
    specialized = specializer(backend, f)
    # Lowering a call of the exported program initializes jaxlib's LAPACK kernels (importing scipy.linalg: 0.3-0.4 s
    # of a batch worker's start) unless told not to; a program the allowlist check found no LAPACK call in does not
    # need them, as ``JaxBackend.compile`` decides for its own lowering.
    targets = checked_targets(backend.exported.mlir_module_serialized)
    quiet = targets is not None and not targets & lapack_targets()
    with lapack_left_alone() if quiet else contextlib.nullcontext():
        verdicts = padding_verdicts(f, len(f.weights), specialized, backend.exported.mlir_module())
    if digest is not None:
        usercache.write_record(directory, PADDING_RECORD, digest,
                               {v: {"allowed": d.allowed, "reason": d.reason, "inputs": d.inputs,
                                    "outputs": d.outputs, "split": d.split, "split_reason": d.split_reason}
                                for v, d in verdicts.items()})
    return verdicts


#: The kind of the remembered padding verdicts (``usercache.read_record``); a new proof rule takes a new one (2: the
#: splitting and merging verdict; 3: unused operations dropped before the two sizes are compared; 4: a variable whose
#: value the program computes with is refused, ``dimvalues``; 5: that refusal only where the two sizes agree).
PADDING_RECORD = "padding-verdicts-5"


def _remembered(value: Any, variables: Sequence[str]) -> dict[str, Verdict] | None:
    """Verdicts read back from their record, or None for anything that is not exactly one per variable."""
    if not isinstance(value, dict) or sorted(value) != sorted(variables):
        return None
    out = {}
    for v in variables:
        d = value[v]
        if not isinstance(d, dict) or type(d.get("allowed")) is not bool or not isinstance(d.get("reason"), str) \
                or type(d.get("split")) is not bool or not isinstance(d.get("split_reason"), str):
            return None
        axes: list[dict[str, list[int]]] = []
        for a in (d.get("inputs"), d.get("outputs")):
            if not isinstance(a, dict) or not all(isinstance(k, str) and isinstance(x, list) and
                                                  all(type(i) is int for i in x) for k, x in a.items()):
                return None
            axes.append(dict(a))
        out[v] = Verdict(v, d["allowed"], d["reason"], axes[0], axes[1], d["split"], d["split_reason"])
    return out


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
    padding added, the input elements padding added (the waste, for any variable), and the seconds its program
    calls took."""

    calls: int = 0
    rows: int = 0
    padded_rows: int = 0
    padded_elements: int = 0
    seconds: float = 0.0


#: The most input signatures :meth:`Batched.admit` remembers (a client sending every shape cannot grow it further).
_ADMITTED_SIGNATURES = 4096


class Admitted(NamedTuple):
    """A request checked once (:meth:`Batched.admit`): its input arrays in the inputs' order, the solved dimension
    values, its rows (None without a batch variable), what a request must share with others to run in one call
    with them (the shapes past axis 0 and the dtypes), and the chunks a batch over the largest bucket runs as."""

    flat: list[Any]
    dims: dict[str, int]
    rows: int | None
    key: tuple[Any, ...]
    chunks: tuple[Admitted, ...] = ()


class Batched:
    """A loaded function called on a fixed set of compiled buckets (see the module docstring).

    ``batched(arrays)`` takes input arrays by name and returns the outputs by name (numpy), equal to the function
    called directly on ``arrays``. ``dims`` chooses the buckets (default: from the spec's bounds). ``lazy``: no
    up-front warm-up; a call runs on the smallest compiled bucket that fits and compiles the smallest planned one
    that fits only when none does (what a batch job wants: the bucket of its batch size, once). ``cache_dir``: where
    the padding verdicts are remembered and, until :meth:`warmup` names another, programs compiled lazily go.
    """

    def __init__(self, loaded: Loaded, dims: Dims | None = None, *,
                 verdicts: Mapping[str, Verdict] | None = None, lazy: bool = False,
                 cache_dir: str | Path | None = None):
        self.loaded = loaded
        f = self.function_record = loaded.function_record
        self.where = f"{loaded.path}: function {loaded.function!r}"
        self.plan = plan_buckets(f, dims)
        self.buckets: list[dict[str, int]] = self.plan.buckets
        self.variables = contract.dimension_variables(f)
        self.verdicts: dict[str, Verdict] = dict(verdicts) if verdicts is not None else \
            verdicts_of(loaded, cache_dir)
        self.input_names = f.input_names
        self.output_names = f.output_names
        self.lazy = lazy
        #: The batch variable (axis 0 of everything, padding proven), or None; why not, when None.
        self.batch, self.no_batch_reason = batch_variable(f, self.verdicts) if self.variables else \
            (None, "the function has no dimension variables")
        #: Why a batch may not be split over the largest bucket nor requests merged into one call, or "" (they may).
        self.split_reason = self.no_batch_reason if self.batch is None else \
            "" if self.verdicts[self.batch].split else \
            f"splitting or merging {self.batch} is not proven safe: {self.verdicts[self.batch].split_reason}"
        self._elements = [sum(math.prod(contract.concrete_shape(i, b)) for i in f.inputs) for b in self.buckets]
        self._order = sorted(range(len(self.buckets)), key=lambda k: self._elements[k])
        self.stats: dict[str, BucketStats] = {bucket_label(b): BucketStats() for b in self.buckets}
        #: The axes padded per input and sliced per output, per variable that may be padded.
        self._pad_inputs = [[(v, axis) for v, d in self.verdicts.items() if d.allowed
                             for axis in d.inputs.get(i.name, [])] for i in f.inputs]
        self._pad_outputs = [[(v, axis) for v, d in self.verdicts.items() if d.allowed
                              for axis in d.outputs.get(o.name, [])] for o in f.outputs]
        self._lock = threading.Lock()
        self._warm: int | None = None
        self._cache_dir: str | Path | None = cache_dir
        #: Bucket index -> the call of its compiled program on the inputs in order (``_runner``).
        self._runners: dict[int, Any] = {}
        #: ``((shape, dtype), ...)`` of numpy inputs that passed the checks -> what :meth:`admit` gave them.
        self._admitted: dict[tuple[Any, ...], Admitted] = {}
        #: Solved dimension values -> the bucket index a call with them runs on.
        self._chosen: dict[tuple[tuple[str, int], ...], int] = {}

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

    @property
    def splits(self) -> bool:
        """Whether a batch over the largest bucket is split into calls, and requests may be merged into one call
        (a batch variable whose ``split`` verdict allows it; else :attr:`split_reason` says why not)."""
        return not self.split_reason

    def describe(self) -> dict[str, Any]:
        """The plan as plain data: buckets, the batch variable, and each variable's padding verdict, with its
        splitting and merging verdict under ``split``."""
        return {"buckets": [dict(b) for b in self.buckets], "source": self.plan.source, "notes": list(self.plan.notes),
                "batch": self.batch, "max_rows": self.max_rows,
                "no_batch_reason": self.no_batch_reason or None, "split_reason": self.split_reason or None,
                "padding": {v: {**d.as_dict(), "split": d.split_dict()} for v, d in self.verdicts.items()}}

    # -- warm-up --

    def warmup(self, cache_dir: str | Path | None = None,
               buckets: Sequence[Mapping[str, int]] | None = None) -> list[Warmed]:
        """Compile every bucket, or the planned ``buckets`` given (``Loaded.warmup``, into JAX's persistent cache in
        ``cache_dir``); from then on :attr:`compilations_after_warmup` counts compilations (0 is the contract)."""
        chosen = [dict(b) for b in self.buckets] if buckets is None else [dict(b) for b in buckets]
        for b in chosen:
            if b not in self.buckets:
                raise UsageError(f"{self.where}: {bucket_label(b)} is not one of the planned buckets "
                                 f"({'; '.join(map(bucket_label, self.buckets))}).")
        self._cache_dir = cache_dir if cache_dir is not None else self._cache_dir
        done = self.loaded.warmup(chosen, cache_dir=self._cache_dir)
        for b in chosen:  # the compiled buckets a call may run on (``lazy`` takes only these, then compiles)
            k = self.buckets.index(b)
            self._runners.setdefault(k, self._runner(k))
        self._warm = len(self.loaded.compiled_signatures)
        return done

    def bucket_of_rows(self, rows: int) -> dict[str, int] | None:
        """The smallest planned bucket a batch of ``rows`` rows runs on (the batch variable at least ``rows``, the
        other variables at their smallest), or None without a batch variable or above the largest bucket."""
        if self.batch is None:
            return None
        fits = [self.buckets[k] for k in self._order if self.buckets[k][self.batch] >= rows]
        return fits[0] if fits else None

    @property
    def compilations(self) -> int:
        """Programs compiled for this function so far (warm-up included)."""
        return len(self.loaded.compiled_signatures)

    @property
    def compilations_after_warmup(self) -> int | None:
        """Programs compiled since :meth:`warmup` (lazy: since the first bucket compiled); None before either."""
        return None if self._warm is None else len(self.loaded.compiled_signatures) - self._warm

    # -- checks --

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

    def choose(self, dims: Mapping[str, int]) -> dict[str, int]:
        """The smallest bucket that fits a call's dimension values; InputError saying why none does."""
        return self.buckets[self._fitting(dims)[0]]

    def _fitting(self, dims: Mapping[str, int]) -> list[int]:
        """The indices of the buckets that fit, smallest first; InputError saying why none does."""
        fits = [k for k in self._order
                if all(v not in dims or self.buckets[k][v] == dims[v] or
                       (self.padding(v) and self.buckets[k][v] >= dims[v]) for v in self.variables)]
        if fits:
            return fits
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

    def admit(self, arrays: Mapping[str, Any]) -> Admitted:
        """Check a request once, as a call would, without running it (the artifact's checks, then a bucket that
        fits); :meth:`run` takes what this returns. Raises InputError (the artifact's message, or why no bucket
        fits)."""
        import numpy as np

        # The checks depend only on the names, shapes and dtypes: numpy arrays of a signature that passed once
        # pass again, with the same dimension values (the steady state of a server).
        if len(arrays) == len(self.input_names):
            flat = [arrays.get(n) for n in self.input_names]
            signature_ = tuple([(a.shape, a.dtype) for a in flat if type(a) is np.ndarray])
            if len(signature_) == len(flat):
                seen = self._admitted.get(signature_)
                if seen is not None:
                    return seen._replace(flat=flat)
                admitted = self._admit(arrays)
                if not admitted.chunks and all(dtype.kind != "V" for _, dtype in signature_) and \
                        len(self._admitted) < _ADMITTED_SIGNATURES:
                    self._admitted[signature_] = admitted
                return admitted
        return self._admit(arrays)

    def _admit(self, arrays: Mapping[str, Any]) -> Admitted:
        named = self._named(arrays)
        rows, most = self.rows(named), self.max_rows
        if rows is not None and most is not None and rows > most:
            if not self.splits:
                raise self._unsplit(rows, most)
            chunks = [{n: a[lo:lo + most] for n, a in named.items()} for lo in range(0, rows, most)]
            first, last = self._admit_one(chunks[0]), self._admit_one(chunks[-1])
            # the middle chunks have the first's shapes, which passed the checks
            middle = [first._replace(flat=[c[n] for n in self.input_names]) for c in chunks[1:-1]]
            return Admitted(first.flat, first.dims, rows, first.key, (first, *middle, last))
        return self._admit_one(named)

    def _unsplit(self, rows: int, most: int) -> InputError:
        """The error of a batch over the largest bucket that may not be split (:attr:`split_reason`)."""
        assert self.batch is not None
        bounds = self.function_record.bounds_of(self.batch)
        fix = f", or compile a bucket that holds them (--dim {self.batch}=...,{rows}; dims={{...}} in Python)" \
            if bounds.holds(rows) else f" ({rows} is outside the spec bound {bounds.text(self.batch)}: no bucket " \
                                       f"can hold them)"
        return InputError(f"{self.where}: {rows} rows are more than the largest bucket's {most}, and the batch may "
                          f"not be split into calls of {most} rows: {self.split_reason}. Send at most {most} rows "
                          f"per call{fix}.")

    def _admit_one(self, named: Mapping[str, Any]) -> Admitted:
        prepared = self.loaded.prepare(named)
        self._fitting(prepared.dims)
        rows = prepared.dims.get(self.batch) if self.batch else None
        key = tuple((tuple(v.shape[1:]), v.dtype) for v in prepared.flat)
        return Admitted(prepared.flat, prepared.dims, rows, key)

    def check(self, arrays: Mapping[str, Any]) -> list[dict[str, int]]:
        """Check a batch as a call would, without running it: the bucket each chunk runs on. Raises InputError
        (the artifact's message, or why no bucket fits)."""
        admitted = self.admit(arrays)
        return [self.choose(a.dims) for a in admitted.chunks or (admitted,)]

    # -- calls --

    def __call__(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs by name for input arrays by name (any number of rows; see the module docstring)."""
        return self.run([self.admit(arrays)])[0]

    def run(self, requests: Sequence[Admitted]) -> list[dict[str, Any]]:
        """Run admitted requests as one program call (several only along the batch variable, with the same
        :attr:`Admitted.key`), and give each its outputs by name: what each gives called alone."""
        import numpy as np

        if len(requests) == 1:
            (one,) = requests
            if not one.chunks:
                return [self._execute(one.flat, one.dims)]
            parts = [self._execute(c.flat, c.dims) for c in one.chunks]
            return [{n: np.concatenate([p[n] for p in parts]) for n in self.output_names}]
        if not self.splits:  # each alone: a merged call would answer one request with others' rows
            return [self.run([r])[0] for r in requests]
        assert self.batch is not None and all(r.key == requests[0].key and not r.chunks for r in requests)
        flat = [np.concatenate([np.asarray(r.flat[i]) for r in requests]) for i in range(len(self.input_names))]
        total = sum(r.rows or 0 for r in requests)
        merged = self._execute(flat, {**requests[0].dims, self.batch: total})
        out, start = [], 0
        for r in requests:
            stop = start + (r.rows or 0)
            out.append({k: v[start:stop] for k, v in merged.items()})
            start = stop
        return out

    def _bucket(self, dims: Mapping[str, int]) -> int:
        """The bucket a call with these dimension values runs on, compiled (see the class docstring: ``lazy``)."""
        key = tuple(dims.items())
        chosen = self._chosen.get(key)
        if chosen is not None:
            return chosen
        fits = self._fitting(dims)
        chosen = fits[0]
        if self.lazy:
            warm = [k for k in fits if k in self._runners]
            chosen = warm[0] if warm else fits[0]
        if chosen not in self._runners:
            with self._lock:
                if chosen not in self._runners:
                    first = self._warm is None
                    self.loaded.warmup([dict(self.buckets[chosen])], cache_dir=self._cache_dir)
                    if first:
                        self._warm = len(self.loaded.compiled_signatures)
                    self._runners[chosen] = self._runner(chosen)
        if not self.lazy or all(k in self._runners for k in fits[:fits.index(chosen)]):
            self._chosen[key] = chosen  # lazily, a smaller bucket compiled later may take it
        return chosen

    def _runner(self, k: int) -> Any:
        """The program compiled for bucket ``k`` as a call on its inputs in order: the compiled executable itself
        where the backend offers it (``direct``), else ``execute``; the outputs as a list of arrays."""
        import jax

        loaded, key = self.loaded, signature(self.function_record, self.buckets[k])
        backend = loaded.backend
        direct = getattr(backend, "direct", None)
        program = direct(key) if direct is not None else None

        def reported(flat: list[Any]) -> Any:
            return backend.execute(key, backend.place(flat))

        def run(flat: list[Any]) -> list[Any]:
            out = None
            if program is not None:
                try:
                    out = program(*flat)
                except Exception:  # noqa: BLE001 - execute runs it again and reports the failure
                    out = None
            return jax.tree_util.tree_leaves(reported(flat) if out is None else out)

        return run

    def _execute(self, flat: list[Any], dims: Mapping[str, int]) -> dict[str, Any]:
        import numpy as np

        k = self._bucket(dims)
        bucket = self.buckets[k]
        grown = {v: bucket[v] - dims[v] for v in self.variables if v in dims and bucket[v] > dims[v]}
        padded = flat
        if grown:
            padded = []
            for a, axes in zip(flat, self._pad_inputs):
                widths = [(0, 0)] * len(a.shape)
                for v, axis in axes:
                    if v in grown:
                        widths[axis] = (0, grown[v])
                if any(w for _, w in widths):
                    a = np.asarray(a)
                    a = np.pad(a, widths, mode="edge") if a.size else np.pad(a, widths)
                padded.append(a)
        run = self._runners[k]
        with self._lock:
            start = time.perf_counter()
            leaves = run(padded)
            values = [np.asarray(v) for v in leaves]
            seconds = time.perf_counter() - start
            stats = self.stats[bucket_label(bucket)]
            stats.calls += 1
            stats.seconds += seconds
            rows = dims[self.batch] if self.batch else 1
            stats.rows += rows
            stats.padded_rows += bucket[self.batch] - rows if self.batch else 0
            if grown:
                stats.padded_elements += sum(int(p.size) - int(np.size(a)) for p, a in zip(padded, flat))
        out = {}
        for name, value, axes in zip(self.output_names, values, self._pad_outputs):
            cut = [(axis, dims[v]) for v, axis in axes if v in grown]
            if cut:
                index = [slice(None)] * value.ndim
                for axis, size in cut:
                    index[axis] = slice(0, size)
                value = value[tuple(index)]
            out[name] = value
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
