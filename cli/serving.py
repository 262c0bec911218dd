"""``jaxport serve``'s own options (where it listens, how it batches and compiles), which the command receives as one
parameter, ``server``, and its run: the options checked, the models opened and served (``jaxport.serve.models``), and
the line and exit code of a server a signal stopped."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from jaxport import interrupts

from . import render
from .devices import apply

F = TypeVar("F", bound=Callable[..., Any])

#: The options whose address ``--uds`` replaces.
_TCP = ("host", "http_port", "grpc_port")


@dataclass(frozen=True)
class Server:
    """The options of :func:`server_options` as given (checked by :func:`serve`), and which of the TCP address's
    options were given rather than defaulted (``given``: ``--host``, ...)."""

    host: str
    http_port: int
    grpc_port: int
    batch_window_ms: float
    max_batch_rows: int | None
    uds: str | None
    uds_mode: str
    warmup_budget_s: float
    compile_after_ready: str
    max_executables: int
    max_request_mb: int
    given: tuple[str, ...] = ()


_OPTIONS = (
    click.option("--host", default="127.0.0.1", show_default=True,
                 help="The address to listen on (0.0.0.0: every interface, as in a container)."),
    click.option("--http-port", type=click.IntRange(1, 65535), default=8080, show_default=True,
                 help="The REST port (Open Inference Protocol v2, /v2/...; Prometheus metrics on /metrics)."),
    click.option("--grpc-port", type=click.IntRange(1, 65535), default=8081, show_default=True,
                 help="The gRPC port (inference.GRPCInferenceService)."),
    click.option("--batch-window-ms", type=click.FloatRange(min=0), default=0.0, show_default=True,
                 help="Batch concurrent requests: whenever the worker is free, the queued requests with the same "
                      "shapes past axis 0 run as one call. A request waits at most this long for others (a request "
                      "that finds the worker idle runs at once); 0: every request is its own call."),
    click.option("--max-batch-rows", type=click.IntRange(min=1), default=None,
                 help="The most rows one batched call takes (default: the largest bucket's)."),
    click.option("--uds", metavar="PATH", default=None,
                 help="Listen on unix sockets instead of TCP ports: REST on PATH, gRPC on PATH.grpc (e.g. curl "
                      "--unix-socket PATH http://localhost/v2/health/ready; gRPC target unix:PATH.grpc)."),
    click.option("--uds-mode", metavar="MODE", default="600", show_default=True,
                 help="The socket files' permissions, octal (connecting needs write permission): 600 only this "
                      "user, 660 its group too."),
    click.option("--warmup-budget-s", type=click.FloatRange(min=0), default=0.5, show_default=True,
                 help="Seconds of compiling before ready beyond what each model must compile (its smallest bucket "
                      "and the --dim sizes): the next smallest buckets of every model in turn."),
    click.option("--compile-after-ready", type=click.Choice(["first-use", "background", "never"]),
                 default="first-use", show_default=True,
                 help="What compiles after ready: a bucket when a request first needs it (off the event loop, "
                      "once); that and the rest of the plan in the background while no request comes; or nothing "
                      "(every planned bucket before ready, and a size no planned bucket fits refused, HTTP 400)."),
    click.option("--max-executables", type=click.IntRange(min=1), default=64, show_default=True,
                 help="Buckets compiled after warm-up that each model keeps; past it the least recently used is "
                      "dropped (compiled again if needed)."),
    click.option("--max-request-mb", type=click.IntRange(1, 1024), default=256, show_default=True,
                 help="The largest request the server reads, in MiB: a larger REST body is HTTP 413 (refused before "
                      "it is read whole), a larger gRPC message RESOURCE_EXHAUSTED. A JSON request takes about 15 "
                      "times its size in memory while it is decoded."),
)


def server_options(f: F) -> F:
    """``--host``, ``--http-port``, ``--grpc-port``, ``--batch-window-ms``, ``--max-batch-rows``, ``--uds``,
    ``--uds-mode``, ``--warmup-budget-s``, ``--compile-after-ready``, ``--max-executables`` and
    ``--max-request-mb``, received as one parameter, ``server`` (a :class:`Server`)."""
    names = [name for name in Server.__dataclass_fields__ if name != "given"]

    @functools.wraps(f)
    def command(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        given = tuple(f"--{name.replace('_', '-')}" for name in _TCP
                      if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT)
        server = Server(**{name: kwargs.pop(name) for name in names}, given=given)
        return f(*args, server=server, **kwargs)

    decorated: F = command  # type: ignore[assignment]
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated


def _say(text: str) -> None:
    click.echo(f"jaxport serve: {text}", err=True)


def _note(text: str) -> None:
    render.stderr().print(f"note: {text}", markup=False, highlight=False, soft_wrap=True)


def serve(artifacts: tuple[str, ...], dims: dict[str, list[int]], load: Any, server: Server, devices: Any,
          as_json: bool) -> None:
    """Check ``server``'s options, set up the devices (``devices.apply``, before JAX starts), open the models and
    serve them until a signal stops the server: then one line that says so, and exit 130 or 143."""
    from jaxport.errors import UsageError

    mode = server.uds_mode
    if server.uds is not None and server.given:
        raise UsageError(f"--uds serves on unix sockets, not TCP: leave out {', '.join(server.given)}.")
    if not (mode and mode.isascii() and len(mode) <= 4 and all(c in "01234567" for c in mode)) or int(mode, 8) > 0o777:
        raise UsageError(f"--uds-mode {mode}: give permission bits in octal (at most 777), such as 600 or 660.")
    apply(devices)  # before JAX starts
    from jaxport.serve.models import Listen, Serving, open_models, serve_models

    listen = Listen(server.host, server.http_port, server.grpc_port, server.max_request_mb << 20, server.uds,
                    int(mode, 8))
    serving = Serving(server.batch_window_ms, server.max_batch_rows, server.warmup_budget_s,
                      server.compile_after_ready, server.max_executables)
    with open_models(artifacts, dims=dims, load=load, listen=listen, serving=serving, on_line=_say,
                     on_note=_note) as served:
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
