"""The addresses ``jaxport serve`` listens on, checked before anything compiles: engine-free (no kserve here).

A server compiles every bucket before it listens, which may take minutes; an address it cannot listen on must be
refused before that, in one line that names the option, not after it with a framework's traceback. :func:`check`
refuses the same port for REST and gRPC and a host that does not resolve, and binds each port once (then closes
it): a port another process listens on (another ``jaxport serve`` included) is refused there. :func:`bind` is the
same bind, kept open: the REST server listens on its sockets, so the check and the real bind cannot disagree.
:class:`Listen` is where a server listens, as ``jaxport serve --json`` reports it.

Sockets are bound as uvicorn binds them: ``SO_REUSEADDR`` (a port a stopped server left in TIME_WAIT is free) and
never ``SO_REUSEPORT`` (which would let a second server share a port silently); IPv6 sockets are IPv6 only, as
asyncio makes them, so that a host name resolving to both families gets one socket each. An IPv6 address that the
machine does not have (IPv6 disabled in a container) is skipped, as asyncio skips it, unless it is the only one.
Every refusal is a :class:`UsageError`.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from typing import Any

from ...errors import UsageError
from . import unix

#: The largest request a server reads, by default: a REST body or a gRPC message (``--max-request-mb``). Decoding
#: a JSON request takes about 15 times its size in memory, so the limit bounds a request's memory too.
MAX_REQUEST_BYTES = 256 << 20


@dataclass(frozen=True)
class Listen:
    """The address a server listens on: REST (Open Inference Protocol v2, ``/metrics``) and gRPC each on a port of
    their own, of ``host`` (0.0.0.0: every interface, as in a container), or each on a unix socket (``uds``: REST
    on that path, gRPC on ``PATH.grpc``, files of mode ``uds_mode``; then no TCP port: ``unix``); and the largest
    request it reads (``max_request_bytes``: a REST body, a gRPC message)."""

    host: str = "127.0.0.1"
    http_port: int = 8080
    grpc_port: int = 8081
    max_request_bytes: int = MAX_REQUEST_BYTES
    uds: str | None = None
    uds_mode: int = unix.DEFAULT_MODE

    def __post_init__(self) -> None:
        """An empty socket path or host is refused (``UsageError``): each would serve somewhere no one asked for,
        the one on TCP ports, the other on every interface."""
        if self.uds == "":
            raise UsageError("uds='': an empty path names no socket file; give the socket's path, or uds=None to "
                             "listen on TCP ports.")
        if self.host == "":
            raise UsageError("host='': an empty host would listen on every interface; give an address of this "
                             "machine: '127.0.0.1', or '0.0.0.0' for every interface.")

    @property
    def rest(self) -> str:
        """The REST base URL: ``http://HOST:PORT``, or ``unix:PATH``."""
        return f"unix:{self.uds}" if self.uds else f"http://{address(self.host, self.http_port)}"

    @property
    def grpc(self) -> str:
        """The gRPC address: ``HOST:PORT`` (``[HOST]:PORT`` for IPv6), or ``unix:PATH.grpc`` (gRPC's target)."""
        return f"unix:{unix.grpc_path(self.uds)}" if self.uds else address(self.host, self.grpc_port)

    def check(self) -> None:
        """:func:`check` of this address (``unix.check`` of a unix socket's)."""
        if self.uds:
            unix.check(self.uds, self.uds_mode)
        else:
            check(self.host, self.http_port, self.grpc_port)

    def as_dict(self) -> dict[str, Any]:
        """The address as ``jaxport serve --json``'s ``listening`` event gives it."""
        if self.uds:
            return {"uds": self.uds, "grpc_uds": unix.grpc_path(self.uds), "uds_mode": f"{self.uds_mode:04o}",
                    "rest": self.rest, "grpc": self.grpc}
        return {"host": self.host, "http_port": self.http_port, "grpc_port": self.grpc_port, "rest": self.rest,
                "grpc": self.grpc}


def address(host: str, port: int) -> str:
    """``host:port``, an IPv6 address in brackets (``[::1]:8081``), as gRPC and URLs write it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check(host: str, http_port: int, grpc_port: int) -> None:
    """Refuse addresses ``jaxport serve`` could not listen on (see the module docstring); bind nothing for good."""
    if http_port == grpc_port:
        raise UsageError(f"--http-port and --grpc-port are both {http_port}: REST and gRPC each need a port of their "
                         f"own; give --grpc-port another one.")
    for option, port in (("--http-port", http_port), ("--grpc-port", grpc_port)):
        for sock in bind(host, port, option):
            sock.close()


def bind(host: str, port: int, option: str = "--http-port") -> list[socket.socket]:
    """Sockets bound (not listening) on every address ``host`` resolves to, at ``port``; ``option`` is the
    command-line option that gave the port, named by the error when one cannot be bound."""
    sockets: list[socket.socket] = []
    unavailable: OSError | None = None
    try:
        for family, kind, proto, sockaddr in _resolve(host, port):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(sockaddr)
            except OSError as e:
                sock.close()
                if e.errno == errno.EADDRNOTAVAIL:  # this family or address is not on this machine
                    unavailable = e
                    continue
                raise UsageError(refusal(e, host, port, option)) from None
            sockets.append(sock)
        if not sockets:
            reason = unavailable.strerror if unavailable is not None else "no address"
            raise UsageError(f"--host {host}: {address(host, port)} is not an address of this machine ({reason}); "
                             f"give one of its addresses (127.0.0.1, or 0.0.0.0 for every interface).")
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def refusal(e: OSError, host: str, port: int, option: str) -> str:
    """What a failed bind of ``host:port`` (given by ``option``) means, and what to do."""
    where = address(host, port)
    if e.errno == errno.EADDRINUSE:
        return (f"{option} {port}: {where} is already in use (another process listens there, perhaps another "
                f"'jaxport serve'); stop it, or give {option} another port.")
    if e.errno == errno.EACCES:
        low = "; ports below 1024 need privileges" if port < 1024 else ""
        return (f"{option} {port}: listening on {where} is not permitted ({e.strerror}){low}; give {option} another "
                f"port.")
    return (f"{option} {port}: cannot listen on {where} ({e.strerror}); give {option} another port, or --host "
            f"another address.")


def grpc_refusal(host: str, port: int) -> UsageError:
    """The error for a gRPC server that could not bind ``host:port`` (gRPC says only "Failed to bind"): the reason
    a plain bind of the same address gives now, else a general one."""
    try:
        for sock in bind(host, port, "--grpc-port"):
            sock.close()
    except UsageError as e:
        return e
    return UsageError(f"--grpc-port {port}: gRPC could not listen on {address(host, port)} (it was in use a moment "
                      f"ago); give --grpc-port another port, or start again.")


def _resolve(host: str, port: int) -> list[tuple[int, int, int, tuple]]:
    """The distinct stream addresses ``host`` resolves to, for a server (``AI_PASSIVE``)."""
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        reason = e.strerror if isinstance(e, socket.gaierror) else str(e)
        raise UsageError(f"--host {host}: no address found for it ({reason}); give an address of this machine "
                         f"(127.0.0.1, or 0.0.0.0 for every interface) or a host name that resolves to "
                         f"one.") from None
    seen: list[tuple[int, int, int, tuple]] = []
    for family, kind, proto, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6) and (family, kind, proto, sockaddr) not in seen:
            seen.append((family, kind, proto, sockaddr))
    return seen
