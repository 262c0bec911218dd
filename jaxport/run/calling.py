"""``jaxport call`` as a library function: a :class:`CallRequest` says what to run on what, :func:`call` runs it and
returns the :class:`~jaxport.run.outputs.CallReport` that ``call`` prints (``call --json`` prints its ``as_dict()``).

The work is ordered so that a mistake costs as little as possible. Building the request checks the combination of
options (``UsageError``, exit 2, with the messages of ``jaxport call``). :func:`call` then reads the artifact's
manifest and checks, before JAX is imported: the output files (``-o``, ``--save-inputs``), the ranges, the
dimension values of ``--random``, the reference file of ``expect`` (read in full), the streamed axis of
``batch_size``, and every input file against the signature, from the ``.npy`` headers (and the ``.npz`` members),
before any ``.npy`` data is read: a wrong shape, dtype, dimension, bound or constraint is an ``InputError``
(exit 9) raised in a process that has not imported JAX. Only then is the program loaded (its own checks: payload,
custom calls, platform), the inputs read, and the function run.

The reference comparison of ``expect`` is ``jaxport.verify``'s, which this layer does not import: :func:`call`
takes it as ``references`` (a :data:`ReadReferences`), and ``jaxport.call(request)`` passes
``jaxport.verify.reference.read``. No JAX at import.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from .. import dtypes
from .._fsio import check_output
from ..artifact import contract
from ..artifact.container import open_artifact
from ..errors import JaxportError, UsageError
from . import gradients, inputs, outputs, streaming
from .cache import compilation_cache, default_cache_dir
from .iree import iree_cache_dir
from .load import load, select_function
from .outputs import CallReport

__all__ = ["MAX_BENCHMARK_CALLS", "PRINT_LIMIT", "CallRequest", "Comparison", "References", "ReadReferences", "call"]

#: The most calls ``benchmark`` times.
MAX_BENCHMARK_CALLS = 1_000_000
#: Outputs with at most this many elements carry their values in the report when ``values`` is asked for.
PRINT_LIMIT = 1000
#: The output dtypes ``output_dtype`` may name (``f32``: every real floating-point output as float32).
OUTPUT_DTYPES = {"f32": "float32", "float32": "float32"}
RUNTIMES = ("jax", "iree")


class Comparison(Protocol):
    """The outputs compared with their references (``jaxport.verify.reference.Expectation``)."""

    @property
    def passed(self) -> bool: ...

    def as_dict(self) -> dict[str, Any]:
        """The ``expect`` section of the report."""
        ...

    def error(self, report: CallReport) -> JaxportError:
        """The failure, carrying ``report``: a ``VerificationError`` (exit 12)."""
        ...


class References(Protocol):
    """Reference outputs read before the call, to compare the call's outputs with after it."""

    def compare(self, leaves: list[tuple[str, Any]], native: list[str], *, atol: float | None, rtol: float | None,
                allow_nonfinite: bool) -> Comparison: ...


#: Reads the references of ``expect`` (path, output names, their dtypes) before anything runs; raises what is wrong
#: with the file (``InputError``, exit 9).
ReadReferences = Callable[[str | Path, list[str], list[str]], References]


def _paths(value: str | Path | Iterable[str | Path]) -> tuple[str, ...]:
    if isinstance(value, (str, os.PathLike)):
        return (os.fspath(value),)
    return tuple(os.fspath(v) for v in value)


@dataclass(frozen=True)
class CallRequest:
    """What to run on what: the options of ``jaxport call``, checked together when the request is built.

    ``artifact``: the ``.jaxport`` file. Inputs come from ``inputs`` (what ``--inputs`` takes: ``FILE.npy`` in the
    order ``inspect`` lists the inputs, ``NAME=FILE.npy``, an ``.npz`` keyed by input names, ``NAME=seed:N`` for a
    PRNG key input) or are generated with ``random=True`` at ``dims`` (``{"batch": 8}``; other dimension variables
    take their smallest valid values) from ``seed`` (default 0), each input from ``ranges[name]`` (``(LO, HI)``,
    half-open) when given. ``cast``: convert an input file's array of another dtype when every value is kept.
    ``save_inputs``: write the inputs used to this ``.npz``. ``output``: write the outputs (``.npz``,
    ``.safetensors``, or ``.npy`` for one output); ``output_dtype="f32"`` converts real floating-point outputs to
    float32 first. ``expect``: compare the outputs with the reference file, at ``atol``/``rtol`` (default by output
    dtype) and accepting all-NaN/Inf outputs with ``allow_nonfinite``. ``values``: outputs of at most
    :data:`PRINT_LIMIT` elements carry their values in the report (``call --print --json``). ``benchmark``: time
    that many calls after a warm-up call. ``vjp``: run the derivative too, for the output cotangents of the file
    ``cotangents`` (default ones). ``batch_size``: stream the inputs through in chunks of that many rows. The other
    fields are those of :func:`jaxport.run.load.load` and of the compilation cache (``cache_dir``, or none with
    ``cache=False``).

    Combinations ``jaxport call`` refuses raise ``UsageError`` (exit 2) here, with its messages, which name the
    command-line options (``--batch-size`` for ``batch_size``).
    """

    artifact: str | Path
    inputs: tuple[str, ...] = ()
    random: bool = False
    dims: Mapping[str, int] = field(default_factory=dict)
    seed: int | None = None
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    function: str | None = None
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
    allow_platform_mismatch: bool = False
    allow_custom_calls: tuple[str, ...] = ()
    cache_dir: str | Path | None = None
    cache: bool = True
    runtime: str = "jax"
    verify_weights: bool = True
    vjp: bool = False
    cotangents: str | Path | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise the containers once, here
        set_(self, "inputs", _paths(self.inputs))
        set_(self, "allow_custom_calls", (self.allow_custom_calls,) if isinstance(self.allow_custom_calls, str)
             else tuple(self.allow_custom_calls))
        set_(self, "dims", MappingProxyType(dict(self.dims)))  # read-only, as the rest of a frozen request
        set_(self, "ranges", MappingProxyType(dict(self.ranges)))
        self._check_values()
        for problem in self._combination_problems():
            raise UsageError(problem)

    def _check_values(self) -> None:
        """What the command line's option types refuse, refused here for a caller in Python."""
        if self.runtime not in RUNTIMES:
            raise UsageError(f"unknown runtime {self.runtime!r}: use 'jax' or 'iree'.")
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
        if not self.cache and self.cache_dir:
            yield "--cache-dir and --no-cache contradict each other."
        if self.cotangents and not self.vjp:
            yield "--cotangents gives the output cotangents of --vjp; add --vjp."
        with_jax: tuple[tuple[str, object], ...] = (("--vjp", self.vjp), ("--batch-size", self.batch_size))
        for flag, value in with_jax:
            if value and self.benchmark:
                yield f"{flag} and --benchmark cannot be combined."
            if value and self.runtime == "iree":
                yield f"{flag} runs with JAX; leave out --runtime iree."
        if self.vjp and self.batch_size:
            yield "--vjp and --batch-size cannot be combined."

    @property
    def source(self) -> str:
        """How the inputs were chosen, as the report's ``source`` of a random input says it."""
        return f"random (seed {self.seed or 0})"


@dataclass
class _Checked:
    """What the checks before JAX produced: the function, the references, the random inputs' dimensions."""

    fname: str
    references: References | None = None
    dims: dict[str, int] | None = None
    stream_inputs: tuple[dict[str, Any], dict[str, str]] | None = None


def _check_before_jax(request: CallRequest, read_references: ReadReferences | None) -> _Checked:
    """Every check the manifest and the files allow, before JAX is imported (see the module docstring)."""
    r = request
    where = str(r.artifact)
    with open_artifact(r.artifact) as art:
        fname = select_function(art.model, r.function, where)
        f = art.model.functions[fname]
    checked = _Checked(fname)
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
        if read_references is None:
            raise UsageError("expect= compares the outputs with jaxport.verify's rule, which jaxport.run does not "
                             "import; call jaxport.call(request), which passes it.")
        checked.references = read_references(r.expect, names, native)
    if r.random:
        checked.dims = contract.resolve_dims(f, r.dims)
    elif r.batch_size:
        checked.stream_inputs = streaming.open_inputs(f, list(r.inputs))
    else:
        inputs.check_files(f, list(r.inputs), cast=r.cast)
    return checked


def call(request: CallRequest, *, references: ReadReferences | None = None,
         progress: Callable[[str], None] | None = None,
         rows: Callable[[int, int | None], None] | None = None) -> CallReport:
    """Run ``request`` (see :class:`CallRequest` and the module docstring for the order of the checks); returns
    the report of the call, of its derivative (``vjp``) or of the streamed call (``batch_size``).

    ``references`` reads the reference file of ``expect`` (``jaxport.call`` passes ``jaxport.verify``'s);
    outputs that differ from it raise the comparison's error (``jaxport.verify.reference.ReferenceMismatch``, a
    ``VerificationError``, exit 12) carrying the finished report (its ``report`` attribute), after the outputs are
    written. ``progress`` is called with the text of each stage as it starts (``Loading mlp.jaxport...``);
    ``rows(done, total)`` with the rows a streamed call has done. Errors are ``JaxportError`` subclasses (each with
    the exit code ``jaxport call`` documents for it)."""
    r = request
    say = progress or (lambda text: None)
    checked = _check_before_jax(r, references)
    directory = None if not r.cache else (r.cache_dir or default_cache_dir())
    with compilation_cache(directory) as cache:
        import gc

        # JAX is imported now: what exists lives as long as the process, so later full collections of the garbage
        # collector need not walk it again (one took 40-50 ms of a first call's lowering).
        gc.freeze()
        say(f"Loading {r.artifact}...")
        loaded = load(r.artifact, checked.fname, allow_platform_mismatch=r.allow_platform_mismatch,
                      verify=r.verify_weights, runtime=r.runtime, cache_dir=iree_cache_dir(cache.directory),
                      allow_custom_calls=r.allow_custom_calls, defer_verify=True)
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
            bench = loaded.benchmark(arrays, r.benchmark)
    leaves = outputs.cast_outputs(result.leaves, "float32") if r.output_dtype else result.leaves
    result.leaves = leaves
    report = CallReport.of_run(r.artifact, loaded, arrays, sources, result, cache, output=r.output, benchmark=bench,
                               values_up_to=PRINT_LIMIT if r.values else None)
    report.leaves = leaves
    if r.output:
        outputs.save_outputs(r.output, leaves)
        raw = outputs.raw_in_npy(leaves)
        if raw and not str(r.output).lower().endswith(".safetensors"):
            report.warnings.append(outputs.raw_warning(r.output, raw))
    if r.save_inputs:
        report.saved_inputs = str(r.save_inputs)
    if checked.references is not None:
        native = [o.dtype for o in loaded.function_record.outputs]
        comparison = checked.references.compare(leaves, native, atol=r.atol, rtol=r.rtol,
                                                allow_nonfinite=r.allow_nonfinite)
        report.expect = comparison
        if not comparison.passed:
            raise comparison.error(report)
    return report


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
