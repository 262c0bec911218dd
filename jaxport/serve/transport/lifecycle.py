"""How ``jaxport serve``'s kserve transport runs: REST (uvicorn) and gRPC in one event loop, on sockets bound here,
until SIGINT or SIGTERM, and its log lines on stderr, one per request.

Where kserve 0.21 and uvicorn fall short:

- kserve binds REST to ``0.0.0.0``, always, and uvicorn binds its own socket and exits the process when it cannot:
  the REST sockets are bound here, on ``host`` (``ports.bind``) or a unix socket (``unix.bind``), and one that
  cannot be bound is a ``UsageError``;
- SIGINT and SIGTERM stop both servers, the requests in flight answered first (``GRACE_S`` at most), and the signal
  is returned rather than the process ending in uvicorn: ``jaxport serve`` reports it (exit 130 or 143);
- kserve writes uvicorn's access lines on stdout, which is ``--json``'s events, and logs a traceback per request
  error: every line goes to stderr, and a request's error is its access line alone (:func:`route_logs`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ... import interrupts
from . import ports, unix
from .kserve_imports import InvalidInput, ModelNotFound, uvicorn

#: Seconds the requests in flight get to finish after SIGINT or SIGTERM, over REST and gRPC alike.
GRACE_S = 30


class _QuietInputErrors(logging.Filter):
    """Drops kserve's log records of a request's error (a traceback each): the access log line has the 400 or 404."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], (InvalidInput, ModelNotFound)))


def route_logs() -> None:
    """At most one log line per request, the access line (REST) or the method line (gRPC), and every log line on
    stderr (kserve writes uvicorn's access lines on stdout): stdout is ``--json``'s events."""
    logging.getLogger("kserve.trace").setLevel(logging.WARNING)  # two timing lines per request
    for name in ("kserve", "kserve.trace"):
        logging.getLogger(name).addFilter(_QuietInputErrors())
    loggers = [logging.getLogger(), *(v for v in logging.root.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger))]
    for log in loggers:
        for handler in log.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
                handler.setStream(sys.stderr)


class _Uvicorn(uvicorn.Server):
    """uvicorn's server on sockets bound here, saying when it listens and which signals stopped it."""

    def __init__(self, config: Any, on_started: Callable[[], None]):
        super().__init__(config)
        self.on_started = on_started
        self.signals: list[int] = []

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.signals.append(sig)
        super().handle_exit(sig, frame)

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and not self.should_exit:
            self.on_started()


async def _stop_when_told(rest: _Uvicorn, grpc_server: Any) -> None:
    """Stop gRPC when REST is told to stop (a signal), giving its calls in flight ``GRACE_S`` to finish."""
    while not rest.should_exit:
        await asyncio.sleep(0.1)  # as uvicorn itself polls
    await grpc_server.stop(grace=GRACE_S)


async def _serve_all(rest: _Uvicorn, sockets: list[Any], start_grpc: Callable[[], Awaitable[Any]]) -> None:
    grpc_server = await start_grpc()
    stopping = asyncio.create_task(_stop_when_told(rest, grpc_server))
    try:
        await rest.serve(sockets=sockets)  # until SIGINT or SIGTERM, then the requests in flight finish
    finally:
        rest.should_exit = True
        await stopping


def serve(config: Any, host: str, http_port: int, start_grpc: Callable[[], Awaitable[Any]],
          on_listening: Callable[[], None] | None = None, *, uds: str | None = None,
          uds_mode: int = unix.DEFAULT_MODE) -> int | None:
    """Serve REST by uvicorn's ``config`` on ``host:http_port`` (or on the unix socket ``uds``, its file given
    ``uds_mode`` and removed at the end, as gRPC's) and the gRPC server ``start_grpc`` starts, until SIGINT or
    SIGTERM; then let the requests in flight finish (``GRACE_S`` at most) and return the signal that stopped them
    (None if none did). ``on_listening`` is called once both listen. In the main thread, the signals are this
    server's until it returns (``interrupts.deferred``): the previous handlers are restored then."""
    server = _Uvicorn(config, on_listening or (lambda: None))
    sockets = [unix.bind(uds, uds, "REST", uds_mode)] if uds else ports.bind(host, http_port, "--http-port")
    ours = {where: unix.inode(where) for where, _ in unix.paths(uds)} if uds else {}
    main = threading.current_thread() is threading.main_thread()
    # Installed before the loop starts and restored after it ends (uvicorn installs the same handler while it
    # serves): a signal at any moment in between stops the server gracefully, none is lost.
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)} \
        if main else {}
    try:
        with interrupts.deferred():
            asyncio.run(_serve_all(server, sockets, start_grpc))
    finally:
        for sock in sockets:
            sock.close()
        for where, node in ours.items():
            unix.remove(where, node if where == uds else None)  # gRPC's: bound by gRPC, after this
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return server.signals[0] if server.signals else None
