"""``jaxport serve``: artifacts behind the Open Inference Protocol (v2), over REST and gRPC, on kserve."""

from __future__ import annotations

import re
import sys
import time

import click

from .. import errors, render
from ..devices import apply, device_options
from ..options import allow_custom_call_option, debug_option, dim_option, function_option

_NAMED = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)(@(?P<version>[A-Za-z0-9][A-Za-z0-9_.-]*))?=(?P<path>.+)")


_dims_option = dim_option("Sizes of a dimension variable to compile a bucket for (e.g. batch=1,8,32); repeat for "
                          "each variable (every combination is compiled). Default: the powers of two inside the "
                          "spec's bounds and the upper bound, as 'jaxport compile' proposes them.")


def _parse(spec: str) -> tuple[str, str, str]:
    """``[NAME[@VERSION]=]ARTIFACT`` as (name, version, path); the name defaults to the file's stem, the version
    to 1."""
    from pathlib import Path

    m = _NAMED.fullmatch(spec)
    if m and not Path(spec).exists():
        name, version, path = m.group("name", "version", "path")
        return name, version or "1", path
    stem = Path(spec).name
    stem = stem[:-len(".jaxport")] if stem.endswith(".jaxport") and len(stem) > 8 else stem
    return stem, "1", spec


def _say(text: str) -> None:
    click.echo(f"jaxport serve: {text}", err=True)


@click.command("serve")
@click.argument("artifacts", nargs=-1, required=True, metavar="[NAME[@VERSION]=]ARTIFACT...")
@_dims_option
@function_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (0.0.0.0: every interface, as in a container).")
@click.option("--http-port", type=click.IntRange(1, 65535), default=8080, show_default=True,
              help="The REST port (Open Inference Protocol v2, /v2/...; Prometheus metrics on /metrics).")
@click.option("--grpc-port", type=click.IntRange(1, 65535), default=8081, show_default=True,
              help="The gRPC port (inference.GRPCInferenceService).")
@click.option("--batch-window-ms", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Batch concurrent requests: wait up to this long after a request for others with the same shapes "
                   "past axis 0, and run them as one call (0: every request is its own call).")
@click.option("--max-batch-rows", type=click.IntRange(min=1), default=None,
              help="The most rows one batched call takes (default: the largest bucket's).")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="JAX's compilation cache to warm up into and fetch from (default: as 'jaxport warmup'); an image "
                   "that ran 'jaxport warmup' at build time starts without compiling.")
@allow_custom_call_option
@device_options
@debug_option
def command(artifacts, dims, function, host, http_port, grpc_port, batch_window_ms, max_batch_rows, cache_dir,
            allow_custom_calls, devices, debug):
    """Serve artifacts over the Open Inference Protocol (v2, KServe and Triton clients), REST and gRPC.

    Each ARTIFACT is served as a model named after its file (or NAME=ARTIFACT), version 1 (or
    NAME@VERSION=ARTIFACT; /v2/models/NAME/versions/VERSION, the plain name serving the highest). Every shape
    bucket is compiled before the server listens, so /v2/health/ready means nothing compiles any more; a request
    is padded to the smallest bucket that fits where the program is proven to work row by row, split over the
    largest, and refused with the reason elsewhere. Bad inputs get HTTP 400 / gRPC INVALID_ARGUMENT with the
    artifact's message. Needs the optional extra jaxport[serve] (kserve).

    \b
    Examples:
      jaxport serve mlp.jaxport --dim batch=1,8,32 --http-port 8080 --grpc-port 8081
      jaxport serve mlp@2=mlp-v2.jaxport mlp@1=mlp.jaxport --batch-window-ms 2
    """

    def body():
        from jaxport.errors import UsageError

        apply(devices)  # before JAX starts
        try:
            from jaxport.serve import kserve_server
        except ImportError as e:
            raise UsageError(f"'jaxport serve' needs the optional extra jaxport[serve] (kserve), which is not "
                             f"installed ({e}): pip install 'jaxport[serve]'.") from None
        from jaxport.artifact import contract
        from jaxport.run.cache import compilation_cache, default_cache_dir
        from jaxport.run.load import load
        from jaxport.serve.batching import Batched

        directory = cache_dir or default_cache_dir()
        parsed = [_parse(spec) for spec in artifacts]
        models, seen = [], set()
        for name, version, path in parsed:
            start = time.perf_counter()
            with compilation_cache(directory):
                loaded = load(path, function, allow_custom_calls=allow_custom_calls)
            for note in loaded.notes:  # a program older than this JAX's window, read by jaxport
                render.stderr().print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
            variables = contract.dimension_variables(loaded.function_record)
            seen.update(v for v in dims if v in variables)
            batched = Batched(loaded, {k: v for k, v in dims.items() if k in variables})
            batched.warmup(directory)
            model = kserve_server.JaxportModel(name, version, batched, window_ms=batch_window_ms,
                                               max_rows=max_batch_rows)
            models.append(model)
            plan = "; ".join(f"{v} in {', '.join(str(x) for x in sorted({b[v] for b in batched.buckets}))}"
                             for v in variables) or "static shapes"
            batching = ("batching up to " + str(model.max_rows) + " rows") if model.batching else \
                "no batching" if batch_window_ms == 0 else f"no batching ({batched.no_batch_reason})"
            _say(f"{name} version {version} ({path}, function {loaded.function}): {len(batched.buckets)} "
                 f"bucket{'s' if len(batched.buckets) != 1 else ''} compiled ({plan}), {batching}, in "
                 f"{time.perf_counter() - start:.1f} s")
        unused = [v for v in dims if v not in seen]
        if unused:
            raise UsageError(f"--dim {unused[0]}: no served function has a dimension variable {unused[0]!r}.")
        server = kserve_server.Server(models, host=host, http_port=http_port, grpc_port=grpc_port)
        _say(f"listening on http://{host}:{http_port} (REST) and {host}:{grpc_port} (gRPC); ready when "
             f"/v2/health/ready says so")
        sys.stderr.flush()
        server.serve()

    errors.run(body, debug=debug, as_json=False)
