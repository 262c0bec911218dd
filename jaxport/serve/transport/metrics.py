"""The Prometheus metrics of ``jaxport serve`` beside kserve's own (request latency histograms), on ``/metrics``:
per model, version and bucket that ran, program calls, real rows, rows and input elements added by padding,
seconds; per model and version, requests per program call, seconds queued and running, calls run inline,
compilations by phase (before ready, in the background, for a request) and after warm-up, the executables held and
evicted, and those shipped. Read from the models' ``Batched`` and ``Batcher`` statistics at each scrape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    SummaryMetricFamily,
)

if TYPE_CHECKING:
    from .registry import Registry

#: Requests per program call, the buckets of the ``jaxport_requests_per_call`` histogram.
_PER_CALL = (1, 2, 4, 8, 16, 32, 64, 128)


class Metrics:
    """A Prometheus collector of the served models' bucket statistics, read at each scrape."""

    def __init__(self, registry: Registry):
        self.registry = registry

    def collect(self) -> Any:
        labels = ["model", "version", "bucket"]
        calls = CounterMetricFamily("jaxport_program_calls", "Program calls per bucket", labels=labels)
        rows = CounterMetricFamily("jaxport_rows", "Real rows run per bucket", labels=labels)
        padded = CounterMetricFamily("jaxport_padded_rows", "Rows added by padding per bucket (waste)",
                                     labels=labels)
        elements = CounterMetricFamily("jaxport_padded_elements", "Input elements added by padding per bucket",
                                       labels=labels)
        compiled = GaugeMetricFamily("jaxport_compilations_after_warmup", "Programs compiled after ready (in the "
                                     "background or for a request)", labels=["model", "version"])
        phases = CounterMetricFamily("jaxport_compilations", "Programs compiled (or fetched from the compilation "
                                     "cache), by phase: warmup (before ready), background, request",
                                     labels=["model", "version", "phase"])
        held = GaugeMetricFamily("jaxport_executables", "Executables held (buckets compiled)",
                                 labels=["model", "version"])
        evicted = CounterMetricFamily("jaxport_executables_evicted", "Executables dropped past --max-executables, "
                                      "least recently used first", labels=["model", "version"])
        shipped = GaugeMetricFamily("jaxport_executables_shipped", "Executables loaded from the cache as shipped "
                                    "(warmup --target) instead of compiled", labels=["model", "version"])
        per_call = HistogramMetricFamily("jaxport_requests_per_call", "Requests served by one program call",
                                         labels=["model", "version"])
        queued = SummaryMetricFamily("jaxport_queue_seconds", "Seconds requests waited for the worker",
                                     labels=["model", "version"])
        running = SummaryMetricFamily("jaxport_run_seconds", "Seconds program calls took (padding, the call, "
                                      "the outputs to host memory)", labels=["model", "version"])
        bucket_seconds = CounterMetricFamily("jaxport_bucket_seconds", "Seconds the program calls of a bucket took",
                                             labels=labels)
        inline = CounterMetricFamily("jaxport_inline_calls", "Program calls run on the event loop (fast, nothing "
                                     "waiting) rather than the worker", labels=["model", "version"])
        for (name, version), m in self.registry.models.items():
            for bucket, s in list(m.batched.stats.items()):
                key = [name, version, bucket]
                calls.add_metric(key, s.calls)
                rows.add_metric(key, s.rows)
                padded.add_metric(key, s.padded_rows)
                elements.add_metric(key, s.padded_elements)
                bucket_seconds.add_metric(key, s.seconds)
            c = m.batched.compiled
            compiled.add_metric([name, version], m.batched.compilations_after_warmup or 0)
            for phase, count in c.counts.items():
                phases.add_metric([name, version, phase], count)
            held.add_metric([name, version], len(c.held))
            evicted.add_metric([name, version], c.evicted)
            shipped.add_metric([name, version], sum(1 for c in m.batched.loaded.compilations if c.shipped))
            counts = dict(m.batcher.waits.per_call)
            buckets = [(str(edge), sum(c for n, c in counts.items() if n <= edge)) for edge in _PER_CALL]
            buckets.append(("+Inf", sum(counts.values())))
            per_call.add_metric([name, version], buckets, sum(n * c for n, c in counts.items()))
            w = m.batcher.waits
            queued.add_metric([name, version], w.requests, w.queued_seconds)
            running.add_metric([name, version], w.calls, w.run_seconds)
            inline.add_metric([name, version], w.inline)
        yield from (calls, rows, padded, elements, bucket_seconds, compiled, phases, held, evicted, shipped, per_call,
                    queued, running, inline)
