"""Batches of any size on a set of compiled shapes: the engine-free core of ``jaxport serve`` and the batch engines
(Ray Data, Beam, Spark).

A request path that calls a program at whatever batch size it meets compiles a new executable for every size
(a Beam job over 3000 rows met 12 sizes and compiled 12 times; Ray Data's ragged last batch compiled mid-job in
every actor). :class:`Batched` runs every batch on a shape *bucket* instead:

- The buckets (``run.buckets.served``): for each dimension variable, the sizes given (``dims={"batch": [1, 8, 32]}``,
  ``--dim batch=1,8,32``), or else the ladder of the spec's bounds (the powers of two with three sizes between
  each, :data:`~served.STEPS`, and the upper bound), every combination that satisfies the spec's constraints.
  :meth:`Batched.warmup` compiles the buckets given (a server: what its budget allows before it is ready); a
  bucket a call needs that is not compiled yet is compiled then, once (``compiled``: one compile per bucket at a
  time, a bounded cache of those compiled after warm-up). ``lazy``: a call runs on the smallest *compiled* bucket
  that fits and compiles one only when none does (a batch job: the bucket of its batch size, which its ragged last
  batch reuses).
- A call runs on the smallest bucket that fits it (the fewest input elements): each variable equal to the
  bucket's value, or not above it where the program is proven to work row by row along the variable
  (``run.buckets.rowwise``, the proof ``jaxport compile`` records for IREE modules). There the inputs are padded
  along that variable's axes with copies of their last row (``edge``: a padded row is a valid row) and the outputs
  sliced back, which gives what the call gives unpadded. Where padding is not proven safe, a call runs on a bucket
  of its own size, compiled on first use when the plan has none (``strict``: refused instead, with the proof's
  reason, an InputError).
- The *batch variable* (``run.buckets.verdicts``) is the one that sizes axis 0 of every input and every output,
  exactly, with a row-wise proof. A batch of more rows than the largest bucket holds is split into chunks of that
  bucket's size (the last one padded), called one by one and concatenated; so are batches over the spec's upper bound.
  Splitting, and merging several requests into one call, need the proof's ``split`` verdict too (each output row
  depends on its own input row only, not on its position, and the variable sizes no axis but axis 0): without it a
  batch over the largest bucket runs on a bucket of its own (``strict``: refused with the reason; padding at the end
  keeps rows' positions, so a smaller one still runs, alone), and :attr:`Batched.split_reason` says why requests are
  not merged.
- Inputs are checked by the artifact's own checks (``Loaded.prepare``: names, dtypes, shapes, bounds, constraints)
  before anything runs, with the artifact's messages, once per request (:meth:`Batched.admit`); :meth:`Batched.run`
  runs admitted requests, several merged along the batch variable into one call (``batcher``), on the compiled
  program itself.

:attr:`Batched.compilations_after_warmup` counts what compiled after :meth:`Batched.warmup` (0 while every call
fits a bucket warmed up). Calls are serialized by a lock (one program runs at a time per function; XLA itself uses
every core); a compile does not hold it.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .. import dtypes
from ..artifact import contract
from ..errors import InputError, PlatformError, UsageError
from ..run.buckets.rowwise import Verdict
from ..run.buckets.served import STEPS, Dims, Key, bucket_label, elements, fitting, plan_served, unfit_reason
from ..run.buckets.verdicts import PADDING_RECORD, batch_variable, verdicts_of
from ..run.loaded import Loaded
from ..run.warmup import Warmed
from .compiled import MAX_EXECUTABLES, Compiled

__all__ = ["MAX_EXECUTABLES", "PADDING_RECORD", "STEPS", "Admitted", "Batched", "BucketStats", "Dims",
           "batch_variable", "bucket_label", "plan_served", "verdicts_of"]

#: How many times a call looks for its bucket's executable when other buckets' compiles keep evicting it.
_EVICTED_RETRIES = 4


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


#: The most input signatures :meth:`Batched.admit` remembers (a client sending every shape cannot grow it further),
#: and the most dimension values whose buckets it remembers.
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
    """A loaded function called on compiled buckets (see the module docstring).

    ``batched(arrays)`` takes input arrays by name and returns the outputs by name (numpy), equal to the function
    called directly on ``arrays``. ``dims`` chooses the planned sizes (default: from the spec's bounds). ``lazy``: no
    up-front warm-up; a call runs on the smallest compiled bucket that fits and compiles the smallest one that fits
    only when none does (what a batch job wants: the bucket of its batch size, once). ``strict``: a call runs on a
    planned bucket or is refused (nothing outside the plan compiles). ``most``: how many buckets compiled after
    warm-up are kept (``compiled``). ``cache_dir``: where the padding verdicts are remembered and, until
    :meth:`warmup` names another, where programs are compiled with JAX's persistent cache.
    """

    def __init__(self, loaded: Loaded, dims: Dims | None = None, *,
                 verdicts: Mapping[str, Verdict] | None = None, lazy: bool = False,
                 cache_dir: str | Path | None = None, strict: bool = False, most: int = MAX_EXECUTABLES):
        self.loaded = loaded
        f = self.function_record = loaded.function_record
        self.where = f"{loaded.path}: function {loaded.function!r}"
        self.plan = plan_served(f, dims)
        #: The planned buckets, every combination of :attr:`sizes` the constraints allow.
        self.buckets: list[dict[str, int]] = self.plan.buckets
        self.variables = contract.dimension_variables(f)
        #: The planned sizes of each dimension variable.
        self.sizes: dict[str, list[int]] = {v: sorted({b[v] for b in self.buckets}) for v in self.variables}
        self.verdicts: dict[str, Verdict] = dict(verdicts) if verdicts is not None else \
            verdicts_of(loaded, cache_dir)
        self.input_names = f.input_names
        self.output_names = f.output_names
        self.lazy = lazy
        self.strict = strict
        #: The batch variable (axis 0 of everything, padding proven), or None; why not, when None.
        self.batch, self.no_batch_reason = batch_variable(f, self.verdicts) if self.variables else \
            (None, "the function has no dimension variables")
        #: Why a batch may not be split over the largest bucket nor requests merged into one call, or "" (they may).
        self.split_reason = self.no_batch_reason if self.batch is None else \
            "" if self.verdicts[self.batch].split else \
            f"splitting or merging {self.batch} is not proven safe: {self.verdicts[self.batch].split_reason}"
        #: What each bucket that ran so far ran (by :func:`~served.bucket_label`).
        self.stats: dict[str, BucketStats] = {}
        #: The axes padded per input and sliced per output, per variable that may be padded.
        self._pad_inputs = [[(v, axis) for v, d in self.verdicts.items() if d.allowed
                             for axis in d.inputs.get(i.name, [])] for i in f.inputs]
        self._pad_outputs = [[(v, axis) for v, d in self.verdicts.items() if d.allowed
                              for axis in d.outputs.get(o.name, [])] for o in f.outputs]
        self._lock = threading.Lock()  # held while a program runs
        #: The compiled buckets (``compiled``).
        self.compiled = Compiled(loaded, self.variables, self._lock, cache_dir=cache_dir, most=most)
        self._warmed = False
        #: ``time.monotonic()`` of the last request admitted (a server's background compiles wait for quiet).
        self.last_admitted = 0.0
        #: ``((shape, dtype), ...)`` of numpy inputs that passed the checks -> what :meth:`admit` gave them.
        self._admitted: dict[tuple[Any, ...], Admitted] = {}
        #: Solved dimension values -> the buckets a call with them may run on, smallest first.
        self._fits: dict[tuple[tuple[str, int], ...], list[Key]] = {}
        self._first = threading.Lock()  # a lazy Batched's first bucket, compiled once as its warm-up

    def __repr__(self) -> str:
        return f"<jaxport.serve.Batched {self.loaded.function!r}: {len(self.buckets)} buckets>"

    # -- the plan --

    @property
    def max_rows(self) -> int | None:
        """The most rows of the batch variable one program call takes (the largest planned bucket's), or None."""
        return self.sizes[self.batch][-1] if self.batch else None

    def padding(self, variable: str) -> bool:
        verdict = self.verdicts.get(variable)
        return bool(verdict and verdict.allowed)

    @property
    def splits(self) -> bool:
        """Whether a batch over the largest bucket is split into calls, and requests may be merged into one call
        (a batch variable whose ``split`` verdict allows it; else :attr:`split_reason` says why not)."""
        return not self.split_reason

    @functools.cached_property
    def ordered(self) -> list[dict[str, int]]:
        """The planned buckets, fewest input elements first."""
        f = self.function_record
        return sorted(self.buckets, key=lambda b: (elements(f, b), tuple(b.values())))

    def describe(self) -> dict[str, Any]:
        """The plan as plain data: the buckets compiled now (a call that fits one compiles nothing), the planned
        sizes per variable, the batch variable, and each variable's padding verdict, with its splitting and
        merging verdict under ``split``."""
        return {"buckets": sorted(self.compiled.held, key=lambda b: tuple(b.values())), "sizes": self.sizes,
                "planned": len(self.buckets), "strict": self.strict, "source": self.plan.source,
                "notes": list(self.plan.notes), "batch": self.batch, "max_rows": self.max_rows,
                "no_batch_reason": self.no_batch_reason or None, "split_reason": self.split_reason or None,
                "padding": {v: {**d.as_dict(), "split": d.split_dict()} for v, d in self.verdicts.items()}}

    # -- warm-up --

    def warmup(self, cache_dir: str | Path | None = None,
               buckets: Sequence[Mapping[str, int]] | None = None) -> list[Warmed]:
        """Compile every planned bucket, or the ``buckets`` given (planned ones, or where padding is refused a
        variable's own size), into JAX's persistent cache in ``cache_dir``, and keep them; from then on
        :attr:`compilations_after_warmup` counts compilations (0 while every call fits them)."""
        chosen = [dict(b) for b in self.buckets] if buckets is None else [dict(b) for b in buckets]
        for b in chosen:
            if b not in self.buckets and (self.strict or set(b) != set(self.variables) or
                                          self.compiled.key(b) not in self._candidates(b)):
                shown = "; ".join(f"{v} in {', '.join(map(str, s))}" for v, s in self.sizes.items())
                raise UsageError(f"{self.where}: {bucket_label(b)} is not one of the planned buckets ({shown}).")
        if cache_dir is not None:
            self.compiled.cache_dir = cache_dir
        done = self.compiled.warmup(chosen)
        self._warmed = True
        return done

    def bucket_of_rows(self, rows: int) -> dict[str, int] | None:
        """The smallest planned bucket a batch of ``rows`` rows runs on (the batch variable at least ``rows``, the
        other variables at their smallest), or None without a batch variable or above the largest bucket."""
        if self.batch is None:
            return None
        fits = [b for b in self.ordered if b[self.batch] >= rows]
        return fits[0] if fits else None

    @property
    def compilations(self) -> int:
        """Programs compiled (or fetched from the compilation cache) for this function so far, warm-up included."""
        return sum(self.compiled.counts.values())

    @property
    def compilations_after_warmup(self) -> int | None:
        """Programs compiled since :meth:`warmup` (lazy: since the first bucket compiled); None before either."""
        return self.compiled.after_warmup if self._warmed else None

    # -- checks --

    def _named(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """The inputs by name, as arrays (a plain value made one), once their names are checked as
        ``Loaded.prepare`` checks them (``contract.check_input_names``)."""
        import numpy as np

        contract.check_input_names(arrays, self.input_names)
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
        """The bucket a call with these dimension values runs on (lazy: the smallest compiled one that fits, if
        any); InputError saying why none does."""
        return self.compiled.bucket(self._target(dims))

    def _candidates(self, dims: Mapping[str, int]) -> list[Key]:
        """The buckets a call with these dimension values may run on, smallest first (``served.fitting``)."""
        key = tuple(dims.items())
        found = self._fits.get(key)
        if found is None:
            found = [self.compiled.key(b) for b in fitting(self.function_record, self.sizes, self.padding, dims,
                                                           strict=self.strict)]
            if len(self._fits) < _ADMITTED_SIGNATURES:
                self._fits[key] = found
        return found

    def _target(self, dims: Mapping[str, int], merged: bool = False) -> Key:
        """The bucket a call with these dimension values runs on, compiled or not; InputError saying why none
        fits. Lazy, and for a call of requests merged (``merged``): the smallest compiled bucket that fits, when one
        does; a merged call's own bucket then compiles on the compile thread, for the next such call."""
        found = self._candidates(dims)
        if not found:
            raise self._unfit(dims)
        if self.lazy or merged:
            for k in found:
                if self.compiled.has(k):
                    if merged and k != found[0]:
                        self.compiled.submit([self.compiled.bucket(found[0])], "request")
                    return k
        return found[0]

    def merge_rows(self, admitted: Admitted, wanted: int | None = None) -> int:
        """The most rows a call merging requests like ``admitted`` (its shapes past axis 0) takes when ``wanted``
        rows (default: the most a call takes) are queued: all of them where the bucket that holds them is compiled;
        else the largest compiled bucket's size not above them (at least the request's own rows), while that bucket
        compiles on the compile thread, for the next merge. A merged call never waits for a compile, nor pads to a
        bucket much larger than it."""
        own = admitted.rows or 0
        if self.batch is None or self.max_rows is None:
            return own
        wanted = min(self.max_rows if wanted is None else wanted, self.max_rows)
        needed = self._candidates({**admitted.dims, self.batch: max(wanted, 1)})
        if needed and self.compiled.has(needed[0]):
            return max(wanted, own)
        if needed:
            self.compiled.submit([self.compiled.bucket(needed[0])], "request")
        found = self._candidates({**admitted.dims, self.batch: 1})
        sizes = [self.compiled.bucket(k)[self.batch] for k in found if self.compiled.has(k)]
        return max([b for b in sizes if b <= wanted] + [own])

    def _unfit(self, dims: Mapping[str, int]) -> InputError:
        shown = ", ".join(f"{v}={dims[v]}" for v in self.variables if v in dims)
        detail = unfit_reason(self.function_record, self.sizes, self.padding,
                              {v: d.reason for v, d in self.verdicts.items()}, dims) or \
            f"no combination of the planned sizes ({'; '.join(f'{v} in {s}' for v, s in self.sizes.items())}) " \
            f"satisfies the spec's constraints"
        return InputError(f"{self.where}: no compiled bucket fits {shown}: {detail}. Serve with --dim to compile "
                          f"the sizes you call with (dims={{...}} in Python).")

    def admit(self, arrays: Mapping[str, Any]) -> Admitted:
        """Check a request once, as a call would, without running it (the artifact's checks, then a bucket that
        fits); :meth:`run` takes what this returns. Raises InputError (the artifact's message, or why no bucket
        fits)."""
        import numpy as np

        self.last_admitted = time.monotonic()
        # The checks depend only on the names, shapes and dtypes: numpy arrays of a signature that passed once
        # pass again, with the same dimension values (the steady state of a server).
        if len(arrays) == len(self.input_names):
            flat = [arrays.get(n) for n in self.input_names]
            signature_ = tuple([(a.shape, a.dtype) for a in flat if type(a) is np.ndarray])
            if len(signature_) == len(flat):
                seen = self._admitted.get(signature_)
                if seen is not None:
                    self.loaded.check_values(flat, seen.dims)  # values, with --check-ranges: every request's own
                    return seen._replace(flat=flat)
                admitted = self._admit(arrays)
                kept = all(p.dtype == getattr(a, "dtype", None) for p, a in zip(admitted.flat, flat))  # unconverted
                if not admitted.chunks and kept and all(dtype.kind != "V" for _, dtype in signature_) and \
                        len(self._admitted) < _ADMITTED_SIGNATURES:
                    self._admitted[signature_] = admitted
                return admitted
        return self._admit(arrays)

    def _admit(self, arrays: Mapping[str, Any]) -> Admitted:
        named = self._named(arrays)
        rows, most = self.rows(named), self.max_rows
        if rows is not None and most is not None and rows > most:
            if not self.splits:  # a bucket of its own, past the plan (strict: refused)
                if self.strict:
                    raise self._unsplit(rows, most)
                return self._admit_one(named)
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
        self._target(prepared.dims)
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
        merged = self._execute(flat, {**requests[0].dims, self.batch: total}, merged=True)
        out, start = [], 0
        for r in requests:
            stop = start + (r.rows or 0)
            out.append({k: v[start:stop] for k, v in merged.items()})
            start = stop
        return out

    def pending(self, admitted: Admitted) -> concurrent.futures.Future[None] | None:
        """The compile of the buckets an admitted request runs on that are not compiled yet, started on the
        process's compile thread (``compiled``), or None when they all are: a server awaits it off its event loop,
        then runs the request."""
        targets = {self._target(a.dims) for a in admitted.chunks or (admitted,)}
        if all(self.compiled.has(k) for k in targets):
            return None
        return self.compiled.submit([self.compiled.bucket(k) for k in targets], "request")

    def compiled_for(self, admitted: Admitted) -> bool:
        """Whether every bucket an admitted request runs on is compiled now (then running it compiles nothing)."""
        return all(self.compiled.has(self._target(a.dims)) for a in admitted.chunks or (admitted,))

    def _bucket(self, dims: Mapping[str, int], merged: bool = False) -> Key:
        """The bucket a call with these dimension values runs on, compiled now if it is not (lazy, before any
        warm-up: as the warm-up)."""
        key = self._target(dims, merged)
        if not self.compiled.has(key):
            bucket = self.compiled.bucket(key)
            if self.lazy and not self._warmed:
                with self._first:
                    if not self._warmed:
                        self.warmup(buckets=[bucket])
            self.compiled.compile(bucket, "request")
        return key

    def _execute(self, flat: list[Any], dims: Mapping[str, int], merged: bool = False) -> dict[str, Any]:
        import numpy as np

        for _ in range(_EVICTED_RETRIES):
            key = self._bucket(dims, merged)
            bucket = self.compiled.bucket(key)
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
            with self._lock:
                run = self.compiled.runner(key)
                if run is None:  # evicted since it compiled: compile it again
                    continue
                start = time.perf_counter()
                leaves = run(padded)
                values = [np.asarray(v) for v in leaves]
                seconds = time.perf_counter() - start
                label = bucket_label(bucket)
                stats = self.stats.get(label)
                if stats is None:
                    stats = self.stats[label] = BucketStats()
                stats.calls += 1
                stats.seconds += seconds
                rows = dims[self.batch] if self.batch else 1
                stats.rows += rows
                stats.padded_rows += bucket[self.batch] - rows if self.batch else 0
                if grown:
                    stats.padded_elements += sum(int(p.size) - int(np.size(a)) for p, a in zip(padded, flat))
            break
        else:
            raise PlatformError(f"{self.where}: the bucket {bucket_label(bucket)} was evicted {_EVICTED_RETRIES} "
                                f"times before it could run: other sizes keep filling the {self.compiled.most} "
                                f"executables kept (--max-executables); keep more.")
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
        smallest = self.ordered[0]
        return {o.name: np.zeros(contract.concrete_shape(o, {**smallest, self.batch: 0}), dtypes.to_numpy(o.dtype))
                for o in self.function_record.outputs}
