"""``jaxport serve``: artifacts behind the Open Inference Protocol (v2), over REST and gRPC, on kserve."""

from __future__ import annotations

import json
import sys

import click

from jaxport import interrupts

from .. import errors, render
from ..devices import apply, device_options
from ..files import NamesFiles
from ..options import debug_option, dim_option, json_option, load_options


def _say(text: str) -> None:
    click.echo(f"jaxport serve: {text}", err=True)


@click.command("serve")
@click.argument("artifacts", nargs=-1, required=True, type=NamesFiles(), metavar="[NAME[@VERSION]=]ARTIFACT...")
@dim_option("Sizes of a dimension variable to pad to and compile before ready (e.g. batch=1,8,32); repeat for each "
            "variable (every combination). Default, for every variable: the powers of two inside the spec's bounds "
            "with three sizes between each (8, 10, 12, 14, 16, ...) and the upper bound.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (0.0.0.0: every interface, as in a container).")
@click.option("--http-port", type=click.IntRange(1, 65535), default=8080, show_default=True,
              help="The REST port (Open Inference Protocol v2, /v2/...; Prometheus metrics on /metrics).")
@click.option("--grpc-port", type=click.IntRange(1, 65535), default=8081, show_default=True,
              help="The gRPC port (inference.GRPCInferenceService).")
@click.option("--batch-window-ms", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Batch concurrent requests: whenever the worker is free, the queued requests with the same "
                   "shapes past axis 0 run as one call. A request waits at most this long for others (a request "
                   "that finds the worker idle runs at once); 0: every request is its own call.")
@click.option("--max-batch-rows", type=click.IntRange(min=1), default=None,
              help="The most rows one batched call takes (default: the largest bucket's).")
@click.option("--uds", metavar="PATH", default=None,
              help="Listen on unix sockets instead of TCP ports: REST on PATH, gRPC on PATH.grpc (e.g. curl "
                   "--unix-socket PATH http://localhost/v2/health/ready; gRPC target unix:PATH.grpc).")
@click.option("--uds-mode", metavar="MODE", default="600", show_default=True,
              help="The socket files' permissions, octal (connecting needs write permission): 600 only this user, "
                   "660 its group too.")
@click.option("--warmup-budget-s", type=click.FloatRange(min=0), default=0.5, show_default=True,
              help="Seconds of compiling before ready beyond what each model must compile (its smallest bucket and "
                   "the --dim sizes): the next smallest buckets of every model in turn.")
@click.option("--compile-after-ready", type=click.Choice(["first-use", "background", "never"]), default="first-use",
              show_default=True,
              help="What compiles after ready: a bucket when a request first needs it (off the event loop, once); "
                   "that and the rest of the plan in the background while no request comes; or nothing (every "
                   "planned bucket before ready, and a size no planned bucket fits refused, HTTP 400).")
@click.option("--max-executables", type=click.IntRange(min=1), default=64, show_default=True,
              help="Buckets compiled after warm-up that each model keeps; past it the least recently used is "
                   "dropped (compiled again if needed).")
@click.option("--max-request-mb", type=click.IntRange(1, 1024), default=256, show_default=True,
              help="The largest request the server reads, in MiB: a larger REST body is HTTP 413 (refused before it "
                   "is read whole), a larger gRPC message RESOURCE_EXHAUSTED. A JSON request takes about 15 times "
                   "its size in memory while it is decoded.")
@load_options(omit=("runtime", "allow_platform_mismatch", "verify_weights", "cache"), help={
    "cache_dir": "JAX's compilation cache to warm up into and fetch from (default: as 'jaxport warmup'); an image "
                 "that ran 'jaxport warmup' at build time starts without compiling."})
@device_options
@json_option
@debug_option
def command(artifacts, dims, host, http_port, grpc_port, batch_window_ms, max_batch_rows, uds, uds_mode,
            warmup_budget_s, compile_after_ready, max_executables, max_request_mb, load, devices, as_json, debug):
    """Serve artifacts over the Open Inference Protocol (v2, KServe and Triton clients), REST and gRPC.

    Each ARTIFACT is served as a model named after its file (or NAME=ARTIFACT), version 1 (or
    NAME@VERSION=ARTIFACT; /v2/models/NAME/versions/VERSION, the plain name serving the highest). Every size the
    spec allows answers: a request is padded to the smallest planned bucket that fits where the program is proven
    to work row by row, split over the largest, and run at its own size where padding is refused. Before ready
    each model compiles its smallest bucket, the --dim sizes and what --warmup-budget-s allows; a bucket compiled
    after ready is compiled once, off the event loop, and counted on /metrics (--compile-after-ready never: none).
    Bad inputs get HTTP 400 / gRPC INVALID_ARGUMENT with the artifact's message. A model given twice, an artifact
    that cannot be read and an address that cannot be listened on are refused before anything compiles. SIGTERM
    or Ctrl-C: the requests in flight are answered, then exit 143 or 130. --json prints one JSON object a line on
    stdout per event (listening, ready, stopped). Needs the optional extra jaxport[serve] (kserve).

    \b
    Examples:
      jaxport serve mlp.jaxport --dim batch=1,8,32 --http-port 8080 --grpc-port 8081
      jaxport serve mlp@2=mlp-v2.jaxport mlp@1=mlp.jaxport --batch-window-ms 2
      jaxport serve mlp.jaxport --uds /run/mlp.sock
    """
    ctx = click.get_current_context()
    given = [f"--{name.replace('_', '-')}" for name in ("host", "http_port", "grpc_port")
             if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT]

    def body():
        from jaxport.errors import UsageError
        if uds is not None and given:
            raise UsageError(f"--uds serves on unix sockets, not TCP: leave out {', '.join(given)}.")
        if not (uds_mode and uds_mode.isascii() and len(uds_mode) <= 4 and all(c in "01234567" for c in uds_mode)) or \
                int(uds_mode, 8) > 0o777:
            raise UsageError(f"--uds-mode {uds_mode}: give permission bits in octal (at most 777), such as 600 or "
                             f"660.")
        apply(devices)  # before JAX starts
        from jaxport.serve.models import Listen, open_models, serve_models
        listen = Listen(host, http_port, grpc_port, max_request_mb << 20, uds, int(uds_mode, 8))
        with open_models(artifacts, dims=dims, load=load, window_ms=batch_window_ms, max_rows=max_batch_rows,
                         listen=listen, warmup_budget_s=warmup_budget_s, compile_after_ready=compile_after_ready,
                         max_executables=max_executables, on_line=_say, on_note=lambda text: render.stderr().print(
                             f"note: {text}", markup=False, highlight=False, soft_wrap=True)) as served:
            stopped_by = serve_models(served, listen, on_line=_say, on_event=(  # --json: one event a line
                lambda event: click.echo(json.dumps(event))) if as_json else None)
        if stopped_by is not None:  # stopped as it should be: a line that says so, not an error; exit 130 or 143
            sys.stdout.flush()
            said = f"jaxport serve: stopped by {interrupts.SIGNALS.get(stopped_by, 'a signal')}; every request in " \
                   f"flight was answered\n"
            if interrupts.installed():
                interrupts.stop(stopped_by, said)
            sys.stderr.write(said)
            sys.exit(128 + stopped_by)

    errors.run(body, debug=debug, as_json=as_json)
