"""How long calls take: a benchmark's timed calls (:class:`Benchmark`, what ``Loaded.benchmark`` measures) and the
latencies a report gives of them (:class:`Latencies`, ``call --benchmark``'s ``benchmark`` section). numpy only
where percentiles are computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .backend import Compilation


@dataclass
class Benchmark:
    """The latencies of repeated calls, after the load and the compilation they needed: each call timed alone
    (``calls``: inputs already on the device, outputs left there, the call waited for), then the same number of
    calls pipelined (``pipelined``: all dispatched, one wait for the last), as a serving loop runs them."""

    load_seconds: float
    compilation: Compilation
    warmup: int
    calls: list[float] = field(default_factory=list)
    pipelined: float | None = None  # seconds per call, pipelined
    #: With ``host``: each call from inputs in host memory to outputs copied back to it (what a serving client sees).
    host_calls: list[float] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        import numpy as np

        return float(np.percentile(self.calls, q))

    def as_dict(self) -> dict[str, Any]:
        """The report's ``benchmark`` (:class:`Latencies`)."""
        return Latencies.of(self).to_json()


class Latencies(NamedTuple):
    """The report's ``benchmark``: what the timed calls needed first, and their latencies (seconds)."""

    load_s: float
    lower_s: float
    compile_s: float
    compile_cache_hit: bool | None
    warmup: int
    n: int
    p50_s: float
    p90_s: float
    p99_s: float
    min_s: float
    max_s: float
    mean_s: float
    #: Seconds per call with the calls pipelined (all dispatched, one wait): what a loop that does not wait for
    #: each result gets; the percentiles above time each call alone, waited for.
    pipelined_s: float | None
    #: Where the executable came from: ``shipped`` (warmup --target), ``cache`` (JAX's cache) or ``compiled``.
    executable: str
    #: With ``call --host-latency``: p50 and p99 of the calls timed from host memory to host memory (None without).
    host_p50_s: float | None = None
    host_p99_s: float | None = None

    @classmethod
    def of(cls, bench: Benchmark) -> Latencies:
        """The latencies of a benchmark's timed calls (percentiles interpolated as ``numpy.percentile`` does)."""
        c, calls = bench.compilation, bench.calls
        import numpy as np

        host = [float(np.percentile(bench.host_calls, q)) for q in (50, 99)] if bench.host_calls else [None, None]
        return cls(bench.load_seconds, c.lower_seconds, c.seconds, c.cache_hit, bench.warmup, len(calls),
                   bench.percentile(50), bench.percentile(90), bench.percentile(99), min(calls), max(calls),
                   sum(calls) / len(calls), bench.pipelined, c.source, *host)

    def to_json(self) -> dict[str, Any]:
        return self._asdict()
