"""``jaxport serve``'s own options (where it listens, how it batches and compiles), which the command receives as one
parameter, ``server``, and its run: the options checked, the models opened and served
(``jaxport.serve.transport.models``), and the line and exit code of a server a signal stopped."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from jaxport import interrupts
from jaxport.serve import limits

from . import render
from .bounds import FiniteRange
from .devices import apply
from .files import nonempty_path
from .progress import Stages, spinning

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
    retune: bool = False
    given: tuple[str, ...] = ()


def _nonempty_host(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``--host ''`` is refused: it would listen on every interface (what ``getaddrinfo`` makes of an empty name)."""
    if value == "":
        raise click.BadParameter("'' is an empty host, which would listen on every interface; give an address of this "
                                 "machine: 127.0.0.1, or 0.0.0.0 for every interface.", ctx, param)
    return value


_OPTIONS = (
    click.option("--host", default="127.0.0.1", show_default=True, callback=_nonempty_host,
                 help="The address to listen on (0.0.0.0: every interface, as in a container)."),
    click.option("--http-port", type=click.IntRange(1, 65535), default=8080, show_default=True,
                 help="The REST port (Open Inference Protocol v2, /v2/...; Prometheus metrics on /metrics)."),
    click.option("--grpc-port", type=click.IntRange(1, 65535), default=8081, show_default=True,
                 help="The gRPC port (inference.GRPCInferenceService)."),
    click.option("--batch-window-ms", type=FiniteRange(0, limits.MAX_WINDOW_MS), default=0.0, show_default=True,
                 help="Batch concurrent requests: whenever the worker is free, the queued requests with the same "
                      "shapes past axis 0 run as one call. A request waits at most this long for others (a request "
                      "that finds the worker idle runs at once); 0: every request is its own call."),
    click.option("--max-batch-rows", type=click.IntRange(1, limits.MAX_BATCH_ROWS), default=None,
                 help="The most rows one batched call takes (default: the largest bucket's)."),
    click.option("--uds", metavar="PATH", default=None, callback=nonempty_path,
                 help="Listen on unix sockets instead of TCP ports: REST on PATH, gRPC on PATH.grpc (e.g. curl "
                      "--unix-socket PATH http://localhost/v2/health/ready; gRPC target unix:PATH.grpc)."),
    click.option("--uds-mode", metavar="MODE", default="600", show_default=True,
                 help="The socket files' permissions, octal (connecting needs write permission): 600 only this "
                      "user, 660 its group too."),
    click.option("--warmup-budget-s", type=FiniteRange(0, limits.MAX_WARMUP_BUDGET_S), default=0.5,
                 show_default=True,
                 help="Seconds of compiling before ready beyond what each model must compile (its smallest bucket "
                      "and the --dim sizes): the next smallest buckets of every model in turn."),
    click.option("--compile-after-ready", type=click.Choice(["first-use", "background", "never"]),
                 default="first-use", show_default=True,
                 help="What compiles after ready: a bucket when a request first needs it (off the event loop, "
                      "once); that and the rest of the plan in the background while no request comes; or nothing "
                      "(every planned bucket before ready, and a size no planned bucket fits refused, HTTP 400)."),
    click.option("--max-executables", type=click.IntRange(1, limits.MOST_EXECUTABLES), default=64, show_default=True,
                 help="Buckets compiled after warm-up that each model keeps; past it the least recently used is "
                      "dropped (compiled again if needed)."),
    click.option("--max-request-mb", type=click.IntRange(1, 1024), default=256, show_default=True,
                 help="The largest request the server reads, in MiB: a larger REST body is HTTP 413 (refused before "
                      "it is read whole), a larger gRPC message RESOURCE_EXHAUSTED. A JSON request takes about 15 "
                      "times its size in memory while it is decoded."),
    click.option("--retune", is_flag=True,
                 help="On a GPU: start with the executables compiled without it (warmup --target cuda-*: nothing "
                      "to compile, nothing autotuned), then compile each again here, autotuned, in the background, "
                      "and swap it in while serving; its record in the cache is replaced for the next start."),
)


def server_options(f: F) -> F:
    """``--host``, ``--http-port``, ``--grpc-port``, ``--batch-window-ms``, ``--max-batch-rows``, ``--uds``,
    ``--uds-mode``, ``--warmup-budget-s``, ``--compile-after-ready``, ``--max-executables``, ``--max-request-mb``
    and ``--retune``, received as one parameter, ``server`` (a :class:`Server`)."""
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


def _fate(unanswered: int) -> str:
    """What became of the requests in flight when a server stopped, ``unanswered`` of them held without an answer."""
    if not unanswered:
        return "every request in flight was answered"
    return (f"{unanswered} request{'s' if unanswered != 1 else ''} in flight {'were' if unanswered != 1 else 'was'} "
            f"not answered: cut off when the server stopped")


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
    from jaxport.serve.transport.models import Listen, Serving, open_models, serve_models, unanswered

    listen = Listen(server.host, server.http_port, server.grpc_port, server.max_request_mb << 20, server.uds,
                    int(mode, 8))
    serving = Serving(server.batch_window_ms, server.max_batch_rows, server.warmup_budget_s,
                      server.compile_after_ready, server.max_executables, server.retune)
    shown = Stages(False, spinner=spinning(as_json))  # the start-up's stages, on a terminal

    def say(text: str) -> None:
        shown.clear()
        _say(text)

    def note(text: str) -> None:
        shown.clear()
        _note(text)

    with shown, open_models(artifacts, dims=dims, load=load, listen=listen, serving=serving, on_line=say,
                            on_note=note, on_stage=shown) as served:
        shown.clear()  # what the servers log as they start goes to stderr as it is
        stopped_by = serve_models(served, listen, on_line=_say, on_event=(  # --json: one event a line
            lambda event: click.echo(json.dumps(event))) if as_json else None)
        left = unanswered(served) if stopped_by is not None else 0
    if stopped_by is not None:  # stopped as it should be: a line that says so, not an error; exit 130 or 143
        sys.stdout.flush()
        said = f"jaxport serve: stopped by {interrupts.SIGNALS.get(stopped_by, 'a signal')}; {_fate(left)}\n"
        if interrupts.installed():
            interrupts.stop(stopped_by, said)
        sys.stderr.write(said)
        sys.exit(128 + stopped_by)
