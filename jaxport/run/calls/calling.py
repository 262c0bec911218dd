"""``jaxport call`` as a library function: a :class:`CallRequest` says what to run on what, :func:`call` runs it and
returns the :class:`CallReport` that ``call`` prints (``call --json`` prints its ``as_dict()``).

The work is ordered so that a mistake costs as little as possible. Building the request checks the combination of
options (``UsageError``, exit 2, with the messages of ``jaxport call``). :func:`call` then reads the artifact's
manifest and checks, before JAX is imported: the output files (``-o``, ``--save-inputs``), the ranges, the
dimension values of ``--random``, the reference file of ``expect`` (read in full by :mod:`.expect`), the streamed
axis of ``batch_size``, and every input file against the signature, from the ``.npy`` headers (and the ``.npz``
members), before any ``.npy`` data is read: a wrong shape, dtype, dimension, bound or constraint is an
``InputError`` (exit 9) raised in a process that has not imported JAX. Only then is the program loaded (its own
checks: payload, custom calls, platform), the inputs read, and the function run.

A module ``jaxport compile`` built (its ``.run.json``, or the ``.vmfb`` beside one) is called the same way: it runs
with IREE through :mod:`..compile.iree_loader`, on the smallest bucket that fits, after the artifact's input checks,
which the run description carries, and without JAX. No JAX at import.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ... import dtypes
from ..._api_types import record_of
from ..._fsio import check_output
from ...artifact import contract
from ...artifact.container import Artifact
from ...artifact.model import Manifest
from ...errors import FormatError, InputError, PlatformError, UsageError
from .. import gradients
from ..backend import Compilation
from ..buckets import sizes
from ..cache import CacheState, compilation_cache, default_cache_dir
from ..compile import iree_loader
from ..compile.deploy import is_compiled_module, run_description_path, signature_function
from ..latency import Benchmark, Latencies
from ..load import load_by, open_checked, select_function
from ..options import LoadOptions
from ..values import inputs, outputs
from ..values.outputs import output_entries
from . import expect, streaming
from .report import CallReport, ReferenceMismatch, Timings, input_entries

__all__ = ["MAX_BENCHMARK_CALLS", "PRINT_LIMIT", "CallReport", "CallRequest", "call"]

#: The most calls ``benchmark`` times.
MAX_BENCHMARK_CALLS = 1_000_000
#: Outputs with at most this many elements carry their values in the report when ``values`` is asked for.
PRINT_LIMIT = 1000
#: The output dtypes ``output_dtype`` may name (``f32``: every real floating-point output as float32).
OUTPUT_DTYPES = {"f32": "float32", "float32": "float32"}
#: What a compiled module does not take, by the request's field (``load.NAME``: a field of how to load), with the
#: option of ``call`` that sets it.
NOT_FOR_MODULES = (("load.function", "--function"), ("cast", "--cast"), ("save_inputs", "--save-inputs"),
                   ("output_dtype", "--output-dtype"), ("expect", "--expect"), ("atol", "--atol"), ("rtol", "--rtol"),
                   ("allow_nonfinite", "--allow-nonfinite"),
                   ("load.allow_platform_mismatch", "--allow-platform-mismatch"),
                   ("load.allow_custom_calls", "--allow-custom-call"), ("load.cache_dir", "--cache-dir"),
                   ("load.cache", "--no-cache"), ("load.verify_weights", "--no-verify"), ("vjp", "--vjp"),
                   ("cotangents", "--cotangents"), ("batch_size", "--batch-size"))


def _paths(value: str | Path | Iterable[str | Path]) -> tuple[str, ...]:
    if isinstance(value, (str, os.PathLike)):
        return (os.fspath(value),)
    return tuple(os.fspath(v) for v in value)


@dataclass(frozen=True, init=False)
class CallRequest:
    """What to run on what: the options of ``jaxport call``, checked together when the request is built.

    ``artifact``: the ``.jaxport`` file, or a module ``jaxport compile`` built (``.run.json`` or ``.vmfb``; it takes the
    inputs, ``output``, ``values`` and ``benchmark``, and runs with IREE). Inputs come from ``inputs`` (what
    ``--inputs`` takes: ``FILE.npy`` in the order ``inspect`` lists the inputs, ``NAME=FILE.npy``, an ``.npz`` keyed by
    input names, ``NAME=seed:N`` for a PRNG key input) or are generated with ``random=True`` at ``dims`` (``{"batch":
    8}``; other dimension variables take their smallest valid values) from ``seed`` (default 0), each input from
    ``ranges[name]`` (``(LO, HI)``, half-open) when given. ``cast``: convert an input file's array of another dtype when
    every value is kept. ``save_inputs``: write the inputs used to this ``.npz``. ``output``: write the outputs
    (``.npz``, ``.safetensors``, or ``.npy`` for one output); ``output_dtype="f32"`` converts real floating-point
    outputs to float32 first. ``expect``: compare the outputs with the reference file, at ``atol``/``rtol`` (default by
    output dtype) and accepting all-NaN/Inf outputs with ``allow_nonfinite``. ``values``: outputs of at most
    :data:`PRINT_LIMIT` elements carry their values in the report (``call --print --json``). ``benchmark``: time that
    many calls after a warm-up call. ``vjp``: run the derivative too, for the output cotangents of the file
    ``cotangents`` (default ones). ``batch_size``: stream the inputs through in chunks of that many rows. ``load``: how
    to load the function (:class:`~jaxport.run.options.LoadOptions`), whose fields the constructor takes as keywords
    too (``function``, ``runtime``, ``allow_platform_mismatch``, ``allow_custom_calls``, ``verify_weights``, the
    compilation cache, ``cache_dir``, or none with ``cache=False``, ...; one at its default leaves ``load``'s),
    building the record once.

    Combinations ``jaxport call`` refuses raise ``UsageError`` (exit 2) here, with its messages, which name the
    command-line options (``--batch-size`` for ``batch_size``); what a compiled module does not take
    (:meth:`module_problem`) is refused by :func:`call`, as ``jaxport call`` refuses it.
    """

    artifact: str | Path
    inputs: tuple[str, ...] = ()
    random: bool = False
    dims: Mapping[str, int] = field(default_factory=dict)
    seed: int | None = None
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    cast: bool = False
    save_inputs: str | Path | None = None
    output: str | Path | None = None
    output_dtype: str | None = None
    expect: str | Path | None = None
    atol: float | None = None
    rtol: float | None = None
    allow_nonfinite: bool = False
    values: bool = False
    benchmark: int | None = None
    #: With ``benchmark``: also time the calls host to host (inputs from host memory, outputs copied back to it).
    host_latency: bool = False
    vjp: bool = False
    cotangents: str | Path | None = None
    batch_size: int | None = None
    load: LoadOptions = field(default_factory=LoadOptions)

    def __init__(self, artifact: str | Path, inputs: str | Path | Iterable[str | Path] = (), random: bool = False,
                 dims: Mapping[str, int] | None = None, seed: int | None = None,
                 ranges: Mapping[str, tuple[float, float]] | None = None, cast: bool = False,
                 save_inputs: str | Path | None = None, output: str | Path | None = None,
                 output_dtype: str | None = None, expect: str | Path | None = None, atol: float | None = None,
                 rtol: float | None = None, allow_nonfinite: bool = False, values: bool = False,
                 benchmark: int | None = None, host_latency: bool = False, vjp: bool = False,
                 cotangents: str | Path | None = None, batch_size: int | None = None, load: LoadOptions | None = None,
                 *, function: str | None = None, runtime: str = "jax",
                 allow_platform_mismatch: bool = False, allow_custom_calls: Iterable[str] | None = (),
                 verify_weights: bool = True, cache_dir: str | Path | None = None, cache: bool = True,
                 module_dir: str | Path | None = None,
                 require_signature: str | Path | Iterable[str | Path] | None = (),
                 signature: str | Path | None = None, check_ranges: bool = False) -> None:
        own = {"artifact": artifact, "inputs": _paths(inputs), "random": random,
               "dims": MappingProxyType(dict(dims or {})),  # read-only copies, as the rest of a frozen request
               "seed": seed, "ranges": MappingProxyType(dict(ranges or {})), "cast": cast, "save_inputs": save_inputs,
               "output": output, "output_dtype": output_dtype, "expect": expect, "atol": atol, "rtol": rtol,
               "allow_nonfinite": allow_nonfinite, "values": values, "benchmark": benchmark,
               "host_latency": host_latency, "vjp": vjp, "cotangents": cotangents, "batch_size": batch_size,
               "load": record_of(LoadOptions, load, locals(), "load")}
        for name, value in own.items():
            object.__setattr__(self, name, value)  # frozen: set once, here
        self._check_values()
        for problem in self._combination_problems():
            raise UsageError(problem)

    def _check_values(self) -> None:
        """What the command line's option types refuse, refused here for a caller in Python (``LoadOptions`` refuses
        an unknown runtime)."""
        if self.output_dtype is not None and self.output_dtype not in OUTPUT_DTYPES:
            raise UsageError(f"output_dtype {self.output_dtype!r}: the one output dtype is 'f32' (float32).")
        for name, value, least in (("benchmark", self.benchmark, 1), ("batch_size", self.batch_size, 1),
                                   ("seed", self.seed, 0)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise UsageError(f"{name} must be an integer of at least {least}, not {value!r}.")
        if self.benchmark is not None and self.benchmark > MAX_BENCHMARK_CALLS:
            raise UsageError(f"benchmark {self.benchmark} is more than {MAX_BENCHMARK_CALLS}, the most it takes.")
        for name, tol in (("atol", self.atol), ("rtol", self.rtol)):
            if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float))
                                    or not math.isfinite(tol) or tol < 0):
                raise UsageError(f"{name} must be a finite number of at least 0, not {tol!r}.")

    def _combination_problems(self) -> Iterable[str]:
        """The rules of ``jaxport call`` on options given together, in its order."""
        if self.random and self.inputs:
            yield "give inputs with --inputs or generate them with --random, not both."
        if not self.random and (self.dims or self.seed is not None or self.ranges):
            yield "--dim, --seed and --range choose what --random generates; add --random."
        if not self.expect and (self.atol is not None or self.rtol is not None or self.allow_nonfinite):
            yield "--atol, --rtol and --allow-nonfinite set how --expect compares; add --expect."
        if self.cast and self.random:
            yield "--cast converts input files; --random generates every input with its own dtype."
        plain_outputs: tuple[tuple[str, object], ...] = (("--expect", self.expect),
                                                         ("--output-dtype", self.output_dtype))
        for flag, value in plain_outputs:
            if value and self.vjp:
                yield f"{flag} applies to a plain call's outputs; leave out --vjp."
        for flag, value in (*plain_outputs, ("--cast", self.cast), ("--save-inputs", self.save_inputs)):
            if value and self.batch_size:
                yield f"{flag} cannot be combined with --batch-size."
        if self.save_inputs and not str(self.save_inputs).lower().endswith(".npz"):
            yield (f"--save-inputs {self.save_inputs}: inputs are saved as an .npz keyed by input name; give a name "
                   f"ending in .npz.")
        if self.save_inputs and self.output and os.path.abspath(self.save_inputs) == os.path.abspath(self.output):
            yield "--save-inputs and -o name the same file; give two files."
        if not self.load.cache and self.load.cache_dir:
            yield "--cache-dir and --no-cache contradict each other."
        if self.host_latency and not self.benchmark:
            yield "--host-latency times the calls of --benchmark from host memory to host memory; add --benchmark N."
        if self.cotangents and not self.vjp:
            yield "--cotangents gives the output cotangents of --vjp; add --vjp."
        runs_on = self.load.runs_on
        with_jax: tuple[tuple[str, object, bool], ...] = (("--vjp", self.vjp, runs_on.derivatives),
                                                          ("--batch-size", self.batch_size, runs_on.streaming))
        for flag, value, can in with_jax:
            if value and self.benchmark:
                yield f"{flag} and --benchmark cannot be combined."
            if value and not can:
                yield f"{flag} runs with JAX; leave out --runtime {runs_on.name}."
        if self.vjp and self.batch_size:
            yield "--vjp and --batch-size cannot be combined."

    @property
    def source(self) -> str:
        """How the inputs were chosen, as the report's ``source`` of a random input says it."""
        return f"random (seed {self.seed or 0})"

    @property
    def compiled(self) -> bool:
        """Whether ``artifact`` is a module ``jaxport compile`` built rather than an artifact."""
        return is_compiled_module(self.artifact)

    def module_problem(self, given: Iterable[str] = ()) -> str | None:
        """Why a compiled module cannot run this request: the first option it sets that a module does not take
        (:data:`NOT_FOR_MODULES`), else the first of ``given``, options of a command line beyond the request's
        fields (``--isolate``); None when there is none."""
        plain = CallRequest(self.artifact)
        refused = [flag for name, flag in NOT_FOR_MODULES if attrgetter(name)(self) != attrgetter(name)(plain)]
        refused += given
        if not refused:
            return None
        return f"{refused[0]} applies to artifacts; {self.artifact} is a module jaxport compile built."


@dataclass
class _Checked:
    """What the checks before JAX produced: the references, the random inputs' dimensions, the streamed inputs;
    and the artifact open on the descriptor whose manifest was checked (and, with a required signature, whose bytes
    were), which the call loads: never its path again, so a file renamed over it meanwhile is not what runs."""

    references: expect.References | None = None
    dims: dict[str, int] | None = None
    stream_inputs: tuple[dict[str, Any], dict[str, str]] | None = None
    opened: Artifact | None = None


def _check_before_jax(request: CallRequest) -> _Checked:
    """Every check the manifest and the files allow, before JAX is imported (see the module docstring)."""
    r = request
    art = open_checked(r.artifact, r.load)  # a required signature first (artifact.signing.check)
    try:
        checked = _checks(r, art.model)
    except BaseException:
        art.close()
        raise
    checked.opened = art
    return checked


def _checks(r: CallRequest, manifest: Manifest) -> _Checked:
    """The checks of :func:`_check_before_jax` on the artifact's ``manifest``."""
    where = str(r.artifact)
    fname = select_function(manifest, r.load.function, where)
    f = manifest.functions[fname]
    checked = _Checked()
    names = f.output_names
    native = [o.dtype for o in f.outputs]
    if r.batch_size:
        keyed = [i.name for i in f.inputs if dtypes.is_key(i.dtype)]
        if keyed:
            raise UsageError(f"--batch-size streams plain arrays, but input {keyed[0]!r} is a PRNG key array; call "
                             f"without --batch-size.")
        streaming.streamed_axis(f, fname)
    elif r.output and not r.vjp:
        written = [d if not r.output_dtype or dtypes.BY_NAME[d].kind != "float" else "float32" for d in native]
        outputs.check_output_path(r.output, names, written, safetensors=True)
    if r.save_inputs:
        check_output(r.save_inputs)
    if r.ranges:
        inputs.check_ranges(f, r.ranges)
    if r.expect:
        checked.references = expect.read(r.expect, names, native)
    if r.random:
        checked.dims = sizes.resolved(f, r.dims)
    elif r.batch_size:
        checked.stream_inputs = streaming.open_inputs(f, list(r.inputs))
    else:
        inputs.check_files(f, list(r.inputs), cast=r.cast)
    return checked


def call(request: CallRequest, *, progress: Callable[[str], None] | None = None,
         rows: Callable[[int, int | None], None] | None = None) -> CallReport:
    """Run ``request`` (see :class:`CallRequest` and the module docstring for the order of the checks); returns
    the report of the call, of its derivative (``vjp``), of the streamed call (``batch_size``) or of the compiled
    module's call.

    Outputs that differ from the references of ``expect`` (compared by :mod:`.expect`) raise
    :class:`~jaxport.run.calls.report.ReferenceMismatch` (a ``VerificationError``, exit 12) carrying the finished report
    (its ``report`` attribute), after the outputs are written. ``progress`` is called with the text of each stage
    as it starts (``Loading mlp.jaxport...``); ``rows(done, total)`` with the rows a streamed call has done. Errors
    are ``JaxportError`` subclasses (each with the exit code ``jaxport call`` documents for it)."""
    r = request
    say = progress or (lambda text: None)
    if r.compiled:
        return _call_module(r, say)
    checked = _check_before_jax(r)
    try:
        return _call_artifact(r, checked, say, rows)
    finally:
        if checked.opened is not None:
            checked.opened.close()


def _call_artifact(r: CallRequest, checked: _Checked, say: Callable[[str], None],
                   rows: Callable[[int, int | None], None] | None) -> CallReport:
    """:func:`call` of an artifact, once its checks before JAX passed."""
    directory = None if not r.load.cache else (r.load.cache_dir or default_cache_dir())
    with compilation_cache(directory) as cache:
        import gc

        # JAX is imported now: what exists lives as long as the process, so later full collections of the garbage
        # collector need not walk it again (one took 40-50 ms of a first call's lowering).
        gc.freeze()
        say(f"Loading {r.artifact}...")
        loaded = load_by(checked.opened or r.artifact, r.load, defer_verify=True, held=cache)
        f = loaded.function_record
        if r.batch_size:
            return _stream(r, loaded, checked, cache, rows)
        say("Generating inputs..." if r.random else "Reading inputs...")
        if checked.dims is not None:
            arrays = inputs.random_inputs(f, checked.dims, r.seed or 0, ranges=r.ranges)
            sources = {n: r.source for n in arrays}
        else:
            arrays, sources = inputs.gather(f, list(r.inputs))
            if r.cast:
                arrays, sources = inputs.cast_inputs(f, arrays, sources)
        if r.save_inputs:
            loaded.check(arrays)  # the saved inputs are ones the function accepts
            outputs.save_arrays(r.save_inputs, arrays)
        if r.vjp:
            say(f"Running {loaded.function} and its derivative on {loaded.platform}...")
            return _derivative(r, loaded, arrays, sources, cache)
        say(f"Compiling and running {loaded.function} on {loaded.platform}...")
        result = loaded.run(arrays, sources)
        bench = None
        if r.benchmark:
            say(f"Benchmarking {r.benchmark} calls...")
            bench = loaded.benchmark(arrays, r.benchmark, host=r.host_latency)
    result.leaves = outputs.cast_outputs(result.leaves, "float32") if r.output_dtype else result.leaves
    report = CallReport.of_run(r.artifact, loaded, arrays, sources, result, cache, output=r.output, benchmark=bench,
                               values_up_to=PRINT_LIMIT if r.values else None)
    return _written_and_compared(r, report, checked.references, [o.dtype for o in f.outputs])


def _written_and_compared(r: CallRequest, report: CallReport, references: expect.References | None,
                          native: list[str]) -> CallReport:
    """A plain call's report after its outputs are written (``output``) and compared with ``references``, the
    default tolerances those of the function's own output dtypes (``native``)."""
    leaves = report.leaves
    if r.random:
        report.warnings += [w for w in [random_nan_warning(report.output_stats())] if w]
    if r.output:
        outputs.save_outputs(r.output, leaves)
        raw = outputs.raw_in_npy(leaves)
        if raw and not str(r.output).lower().endswith(".safetensors"):
            report.warnings.append(outputs.raw_warning(r.output, raw))
    if r.save_inputs:
        report.saved_inputs = str(r.save_inputs)
    if references is not None:
        comparison = references.compare(leaves, native, atol=r.atol, rtol=r.rtol, allow_nonfinite=r.allow_nonfinite)
        report.expect = comparison
        if not comparison.passed:
            raise ReferenceMismatch(comparison.failure(), report)
    return report


def random_nan_warning(stats: Iterable[outputs.Stats]) -> str | None:
    """The warning for outputs that are NaN everywhere after a call on ``--random`` inputs: the values drawn are
    likely outside what the function takes (a negative variance, an optimizer state, a log's argument). None when
    every output has a value that is not NaN."""
    nan = [s.name for s in stats if s.size and s.nan == s.size]
    if not nan:
        return None
    shown = ", ".join(map(repr, nan[:5])) + (f" and {len(nan) - 5} more" if len(nan) > 5 else "")
    return (f"output{'s' if len(nan) > 1 else ''} {shown} {'are' if len(nan) > 1 else 'is'} NaN everywhere on the "
            f"--random inputs, which are likely outside what the function takes (random values for a variance, an "
            f"optimizer state or a log's argument): draw such inputs from a range with --range NAME=LO:HI, or give "
            f"real inputs with --inputs (jaxport.save_inputs writes a pytree argument's file).")


def _derivative(r: CallRequest, loaded: Any, arrays: Mapping[str, Any], sources: Mapping[str, str],
                cache: Any) -> CallReport:
    """``vjp``: the outputs and the input cotangents, written to ``output``."""
    f = loaded.function_record
    if r.output:
        grads = [i for i in loaded.function_record.inputs if gradients.differentiable(i.dtype)]
        outputs.check_output_path(r.output, [i.name for i in grads], [i.dtype for i in grads], safetensors=True)
    cts = gradients.read_cotangents(f, r.cotangents) if r.cotangents else None
    start = time.perf_counter()
    res = gradients.vjp(loaded, arrays, cts)
    seconds = time.perf_counter() - start
    if r.output:
        outputs.save_outputs(r.output, res.cotangents)
    return CallReport.of_vjp(r.artifact, loaded, arrays, sources, res, seconds, cache, output=r.output,
                             cotangents=r.cotangents)


def _stream(r: CallRequest, loaded: Any, checked: _Checked, cache: Any,
            rows: Callable[[int, int | None], None] | None) -> CallReport:
    """``batch_size``: chunks of axis 0 through the artifact."""
    f = loaded.function_record
    assert r.batch_size is not None
    if checked.dims is not None:
        arrays = inputs.random_inputs(f, checked.dims, r.seed or 0, ranges=r.ranges)
        sources = {n: r.source for n in arrays}
    else:
        assert checked.stream_inputs is not None
        arrays, sources = checked.stream_inputs
    result = streaming.call(loaded, arrays, r.batch_size, r.output or None, progress=rows)
    report = CallReport.of_stream(r.artifact, loaded, arrays, sources, result, cache)
    raw = [(o.name, o.dtype) for o in loaded.function_record.outputs if o.dtype in outputs.NOT_IN_NPY]
    if r.output and raw:
        report.warnings.append(outputs.raw_warning(r.output, raw, streamed=True))
    return report


def _call_module(r: CallRequest, say: Callable[[str], None]) -> CallReport:
    """A module ``jaxport compile`` built: the artifact's input checks (which its run description carries), then
    the call with IREE on the smallest bucket that fits (``iree_loader``), padded where the program allows it."""
    problem = r.module_problem()
    if problem:
        raise UsageError(problem)
    run_json = run_description_path(r.artifact)
    start = time.perf_counter()
    say(f"Loading {r.artifact}...")
    try:
        module = iree_loader.load(run_json)
    except iree_loader.DescriptionError as e:
        raise FormatError(str(e)) from None
    fn = signature_function(module.parsed)
    if r.output:
        outputs.check_output_path(r.output, module.output_names, [o.dtype for o in fn.outputs], safetensors=True)
    if r.ranges:
        inputs.check_ranges(fn, r.ranges)
    if r.random:
        arrays = inputs.random_inputs(fn, sizes.resolved(fn, r.dims), r.seed or 0, ranges=r.ranges)
        sources = {n: r.source for n in arrays}
    else:
        arrays, sources = inputs.gather(fn, list(r.inputs))
    dims = contract.check(fn, [contract.ArrayInfo(n, tuple(arrays[n].shape), str(arrays[n].dtype), sources.get(n))
                               for n in fn.input_names])
    try:
        choice = module.choose({n: a.shape for n, a in arrays.items()})
        module.start()
        load_s = time.perf_counter() - start
        say(f"Running {choice.function} with IREE...")
        start = time.perf_counter()
        result = module.run(arrays)
        run_s = time.perf_counter() - start
        bench = _benchmark_module(module, arrays, r.benchmark, load_s) if r.benchmark else None
    except iree_loader.CallError as e:
        raise InputError(f"{run_json}: {e}") from None
    except iree_loader.DescriptionError as e:
        raise FormatError(str(e)) from None
    except iree_loader.DeployError as e:
        raise PlatformError(str(e)) from None
    leaves = [(n, result[n]) for n in module.output_names]
    if r.output:
        outputs.save_outputs(r.output, leaves)
    # the modules jaxport compile builds run with IREE on the CPU (iree-llvm-cpu)
    return CallReport(str(r.artifact), choice.function, "cpu", "iree", dims,
                      input_entries({n: arrays[n] for n in module.input_names}, sources),
                      output_entries(leaves, PRINT_LIMIT if r.values else None), str(r.output) if r.output else None,
                      Timings(load_s, 0.0, 0.0, None, run_s), CacheState(None), bench, None, leaves=leaves,
                      padded={v: (choice.sizes[v], choice.dims[v]) for v in choice.padded})


def _benchmark_module(module: iree_loader.Deployed, arrays: Mapping[str, Any], n: int, load_s: float) -> Latencies:
    """The latencies of ``n`` calls of a compiled module after one untimed call, summed up as a call of an
    artifact's are (its compilation was done ahead of time)."""
    module.run(arrays)  # warm-up
    bench = Benchmark(load_s, Compilation(0.0, 0.0, None), 1)
    for _ in range(n):
        start = time.perf_counter()
        module.run(arrays)
        bench.calls.append(time.perf_counter() - start)
    return Latencies.of(bench)
