"""The report of one ``jaxport call``: :class:`CallReport`, whose :meth:`~CallReport.as_dict` is the document
``call --json`` prints (``specs/schemas/cli/call.schema.json``), for every kind of call (plain, ``vjp``, streamed,
a compiled module's), and :class:`ReferenceMismatch`, the failure of ``expect`` that carries it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import VerificationError
from ..backend import Placement
from ..cache import CacheState
from ..gradients import VjpResult
from ..latency import Benchmark, Latencies
from ..loaded import Loaded, Run
from ..values.outputs import Stats, output_entries, stats
from .expect import Expectation
from .streaming import StreamResult

__all__ = ["CallReport", "ReferenceMismatch", "Timings", "VjpSection", "input_entries"]


class Timings(NamedTuple):
    """The report's ``timings``: seconds to load, lower, compile and run, and whether the compilation was a cache
    hit (None: not reported)."""

    load_s: float
    lower_s: float
    compile_s: float
    compile_cache_hit: bool | None
    run_s: float
    #: Where the executable came from: ``shipped``, ``cache`` or ``compiled`` (``Compilation.source``); None when no
    #: compilation is reported.
    executable: str | None = None
    #: Under a required signature, who vouched for the shipped executable (``Compilation.vouched_by``).
    executable_vouched_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


@dataclass(frozen=True)
class VjpSection:
    """The report's ``vjp`` section: the input cotangents' :class:`Stats`, the inputs without one, and the output
    cotangents used (a file, or ``ones``)."""

    cotangents: list[Stats]
    not_differentiable: list[str]
    cotangents_of_outputs: str

    def to_json(self) -> dict[str, Any]:
        return {"cotangents": [s.to_json() for s in self.cotangents], "not_differentiable": self.not_differentiable,
                "cotangents_of_outputs": self.cotangents_of_outputs}


@dataclass
class CallReport:
    """What one ``jaxport call`` did: :meth:`as_dict` is the document ``call --json`` prints (its schema is
    ``specs/schemas/cli/call.schema.json``); the text rendering shows the same fields.

    Build it with :meth:`of_run` (a checked call, maybe benchmarked), :meth:`of_vjp` (``--vjp``) or
    :meth:`of_stream` (``--batch-size``); a compiled module's call (``jaxport.run.calls.calling``) fills the fields
    itself."""

    artifact: str
    function: str
    platform: str
    runtime: str
    dims: dict[str, int]
    inputs: list[dict[str, Any]]
    #: :func:`stats` of each output (with its ``values`` when asked for); :meth:`output_stats` reads them.
    outputs: list[dict[str, Any]]
    output_file: str | None
    timings: Timings
    cache: CacheState
    benchmark: Latencies | None
    devices: Placement | None
    #: The derivative of a ``vjp`` call (its ``vjp`` section).
    vjp: VjpSection | None = None
    #: What a streamed call did (``batch_size``; its ``streaming`` section).
    streaming: StreamResult | None = None
    #: The file the inputs were saved to (``save_inputs``; its ``saved_inputs`` section).
    saved_inputs: str | None = None
    #: The outputs compared with their references (``expect``; its ``expect`` section).
    expect: Expectation | None = None
    #: Warnings beyond the compilation cache's (outputs stored as raw bytes).
    warnings: list[str] = field(default_factory=list)
    #: The outputs as written and compared, ``(name, array)`` (not in :meth:`as_dict`: ``call --print`` shows them).
    leaves: list[tuple[str, Any]] = field(default_factory=list, repr=False)
    #: A compiled module's call: each variable padded up to the bucket it ran on, ``{name: (call's size, bucket's)}``
    #: (not in :meth:`as_dict`: ``dims`` holds the call's sizes, ``function`` the bucket).
    padded: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of_run(cls, artifact: str | Path, loaded: Loaded, arrays: Mapping[str, Any], sources: Mapping[str, str],
               result: Run, cache: CacheState, *, output: str | Path | None = None,
               benchmark: Benchmark | None = None, values_up_to: int | None = None) -> CallReport:
        """The report of ``loaded.run(arrays, sources)``; with ``values_up_to``, outputs of at most that many
        elements carry their values (larger ones ``None``)."""
        c = result.compilation
        timings = Timings(loaded.load_seconds, c.lower_seconds, c.seconds, c.cache_hit, result.run_seconds, c.source,
                          c.vouched_by)
        return dataclasses.replace(
            cls._common(artifact, loaded, arrays, sources, cache), dims=result.dims,
            outputs=output_entries(result.leaves, values_up_to), output_file=str(output) if output else None,
            timings=timings, benchmark=Latencies.of(benchmark) if benchmark else None, leaves=result.leaves)

    @classmethod
    def of_vjp(cls, artifact: str | Path, loaded: Loaded, arrays: Mapping[str, Any], sources: Mapping[str, str],
               result: VjpResult, seconds: float, cache: CacheState, *, output: str | Path | None = None,
               cotangents: str | Path | None = None) -> CallReport:
        """The report of ``gradients.vjp(loaded, arrays, ...)`` that took ``seconds``, for the output cotangents
        read from the file ``cotangents`` (None: ones)."""
        section = VjpSection([Stats.of(n, v) for n, v in result.cotangents], result.skipped,
                             str(cotangents) if cotangents else "ones")
        return dataclasses.replace(
            cls._common(artifact, loaded, arrays, sources, cache), dims=loaded.check(arrays),
            outputs=[stats(n, v) for n, v in result.outputs], output_file=str(output) if output else None,
            timings=_untimed(loaded, seconds), vjp=section)

    @classmethod
    def of_stream(cls, artifact: str | Path, loaded: Loaded, arrays: Mapping[str, Any], sources: Mapping[str, str],
                  result: StreamResult, cache: CacheState) -> CallReport:
        """The report of ``streaming.call(loaded, arrays, ...)``."""
        return dataclasses.replace(cls._common(artifact, loaded, arrays, sources, cache), dims=result.dims,
                                   outputs=result.stats, output_file=result.output_file,
                                   timings=_untimed(loaded, result.seconds), streaming=result)

    @classmethod
    def _common(cls, artifact: str | Path, loaded: Loaded, arrays: Mapping[str, Any], sources: Mapping[str, str],
                cache: CacheState) -> CallReport:
        """What every report of a loaded function's call holds (the artifact, the function, where it ran, its
        inputs, the cache, the load's notes), before its constructor fills in what that call did."""
        return cls(str(artifact), loaded.function, loaded.platform, loaded.runtime, {}, input_entries(arrays, sources),
                   [], None, _untimed(loaded, 0.0), cache, None, loaded.placement(), warnings=list(loaded.notes))

    def output_stats(self) -> list[Stats]:
        """:class:`Stats` of each output, read from :attr:`outputs`."""
        return [Stats.from_json(o) for o in self.outputs]

    @property
    def all_warnings(self) -> list[str]:
        """The compilation cache's warning, if any, then :attr:`warnings`: the report's ``warnings``."""
        return ([self.cache.problem] if self.cache.problem else []) + self.warnings

    @property
    def sections(self) -> dict[str, dict[str, Any]]:
        """The sections of the report beyond every call's fields, by key: ``vjp`` or ``streaming``, then
        ``saved_inputs`` and ``expect``, each where it applies."""
        sections = {"vjp": self.vjp.to_json() if self.vjp else None,
                    "streaming": self.streaming.as_dict() if self.streaming else None,
                    "saved_inputs": {"file": self.saved_inputs} if self.saved_inputs is not None else None,
                    "expect": self.expect.as_dict() if self.expect is not None else None}
        return {k: v for k, v in sections.items() if v is not None}

    def as_dict(self) -> dict[str, Any]:
        """The ``call --json`` document."""
        return {"artifact": self.artifact, "function": self.function, "platform": self.platform,
                "runtime": self.runtime, "dims": self.dims, "inputs": self.inputs, "outputs": self.outputs,
                "output_file": self.output_file, "timings": self.timings.to_json(),
                "compilation_cache": str(self.cache.directory) if self.cache.directory else None,
                "warnings": self.all_warnings, "benchmark": self.benchmark.to_json() if self.benchmark else None,
                **self.sections, "devices": self.devices.to_json() if self.devices else None}


def input_entries(arrays: Mapping[str, Any], sources: Mapping[str, str]) -> list[dict[str, Any]]:
    """The report's ``inputs``: each input's name, shape, dtype and where it came from."""
    return [{"name": n, "shape": [int(d) for d in a.shape], "dtype": str(a.dtype), "source": sources.get(n)}
            for n, a in arrays.items()]


def _untimed(loaded: Loaded, seconds: float) -> Timings:
    """The timings of a call whose compilations are not reported apart (derivative, streamed)."""
    return Timings(loaded.load_seconds, 0.0, 0.0, None, seconds)


class ReferenceMismatch(VerificationError):
    """Outputs of a call differ from their references (``expect``, exit 12); ``report`` is the call's finished
    report."""

    def __init__(self, message: str, report: CallReport | None = None):
        super().__init__(message)
        self.report = report
