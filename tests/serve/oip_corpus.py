"""The ``oip-requests`` class: hostile Open Inference Protocol (v2) requests to a real ``jaxport serve``.

Two artifacts are served on 127.0.0.1 (ephemeral ports): ``m`` = f(x, n, b) = (2x, n + 1, not b, log x), x
``f32[batch, 3]``, n ``i32[batch]``, b ``bool[batch]``, batch 1 to 8 on buckets 1 and 2; and ``t``, the identity of
one ``[2]`` tensor of each datatype the protocol serves (BOOL to FP64), so that a value decoded is the value answered.
Each case (``oip_cases``, ``oip_grpc_cases``: the groups of :data:`GROUPS`) is one request, sent as raw HTTP
(``http.client``: JSON bodies, binary-extension bodies with ``Inference-Header-Content-Length``, compressed and
chunked bodies), as raw bytes on a socket half-closed after them (``Content-Length`` and ``Transfer-Encoding`` that
lie), or as a gRPC message (tritonclient's ``service_pb2``, and bytes that are no protobuf), with its expected
outcome, judged here:

- ``refused``: HTTP 400 / gRPC ``INVALID_ARGUMENT``, one line of at most :data:`MAX_MESSAGE` characters that
  contains the case's ``mention`` (the field: ``inputs[1].data[0]``, ``parameters.binary_data_output``,
  ``Content-Encoding``);
- ``missing``: HTTP 404 / gRPC ``NOT_FOUND`` (an unknown model, version or route), as short;
- ``answered``: 200 / OK with exactly the outputs of ``jax.jit`` of the live function on the values the request
  means (under ``jax.enable_x64`` for ``t``; NaN equal to NaN whatever its sign, the sign of zero compared), the
  outputs asked for in their order, each in binary where asked, as JSON where asked (a float's NaN and infinities
  as the strings "NaN", "Infinity", "-Infinity"), and the request's id;
- ``closed``: a request whose framing cannot be read: the connection closed, or a 4xx, within :data:`TIMEOUT_S`.

After every case a canary (a good request over the same transport) must get the right answer, and what the server
logged meanwhile must hold no ``Traceback`` and no 500. ``python -m tests.serve.oip_corpus`` runs the class and
prints the table of RELIABILITY.md; ``tests/serve/test_serve_corpus.py`` runs it in ``make test-serve``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .oip_cases import (
    DTYPES,
    INPUTS,
    OUTPUTS,
    SOURCE,
    SPEC_M,
    SPEC_T,
    Case,
    binary_cases,
    datatype_cases,
    encoding_cases,
    field_type_cases,
    good,
    id_cases,
    input_cases,
    name_cases,
    output_cases,
    parameter_cases,
    raw_cases,
    rest,
    shape_cases,
    value_cases,
)
from .oip_grpc_cases import grpc, grpc_cases, m_typed

READY_S = 300
TIMEOUT_S = 10.0
MAX_MESSAGE = 600
#: The groups of the class, each a generator of cases.
GROUPS: dict[str, Callable[[], Iterator[Case]]] = {
    "field-type": field_type_cases, "datatype": datatype_cases, "shape": shape_cases, "values": value_cases,
    "binary": binary_cases, "parameters": parameter_cases, "outputs": output_cases, "names": name_cases,
    "inputs": input_cases, "id": id_cases, "encoding": encoding_cases, "framing": raw_cases, "grpc": grpc_cases}
#: What a log line of a failed request looks like: a traceback, an HTTP 5xx, a gRPC status of a server error.
LOG_FAILURE = re.compile(r'Traceback|HTTP/1\.[01]" 5\d\d|StatusCode\.(INTERNAL|UNKNOWN)|Exception in ASGI')


def build(groups: list[str] | None = None) -> list[Case]:
    """The cases of ``groups`` (default: all), in order; their ids are unique."""
    cases = [c for g, make in GROUPS.items() if not groups or g in groups for c in make()]
    ids = Counter(c.id for c in cases)
    assert max(ids.values()) == 1, [i for i, n in ids.items() if n > 1]
    return cases


@dataclass
class Server:
    http: int
    grpc: int
    log: Path
    functions: dict[str, Any]
    channel: Any = None
    seen: int = 0  # how much of the log was read

    def new_log(self) -> str:
        with open(self.log, encoding="utf-8", errors="replace") as f:
            f.seek(self.seen)
            text = f.read()
        self.seen += len(text.encode("utf-8", errors="replace"))
        return text


@contextmanager
def serving_corpus(root: Path) -> Iterator[Server]:
    """``jaxport serve m=... t=...`` on 127.0.0.1 (ephemeral ports), its output in ``root/server.log``."""
    import grpc as grpc_lib
    import jax

    import jaxport
    from tests.serve.servers import free_port, serving
    from tests.support import REPO, load_module

    (root / "model.py").write_text(SOURCE)
    (root / "m.yaml").write_text(SPEC_M)
    (root / "t.yaml").write_text(SPEC_T)
    paths = {k: jaxport.export(f"{root}/model.py:{fn}", root / f"{k}.yaml", output=root / f"{k}.jaxport").path
             for k, fn in (("m", "f"), ("t", "t"))}
    module = load_module(root / "model.py", "oip_corpus_model")
    http, grpc_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAXPORT_CACHE_DIR": str(root / "cache")}
    args = [f"m={paths['m']}", f"t={paths['t']}", "--dim", "batch=1,2", "--host", "127.0.0.1", "--http-port",
            str(http), "--grpc-port", str(grpc_port)]
    with open(root / "server.log", "w+") as log, serving(args, http=http, env=env, log=log, ready_s=READY_S):
        server = Server(http, grpc_port, root / "server.log", {"m": jax.jit(module.f), "t": jax.jit(module.t)})
        with grpc_lib.insecure_channel(f"127.0.0.1:{grpc_port}", options=[
                ("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]) as ch:
            server.channel = ch
            yield server


# --- sending --------------------------------------------------------------------------------------------------------


def send_rest(port: int, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3 * TIMEOUT_S)
    try:
        chunked = headers.get("Transfer-Encoding") == "chunked"
        conn.putrequest(method, path, skip_accept_encoding=True)
        given = {"Content-Type": "application/json", **headers}
        if method != "GET" and not chunked:
            given["Content-Length"] = str(len(body))
        for k, v in given.items():
            conn.putheader(k, v.encode("latin-1"))
        conn.endheaders()
        if chunked:
            for i in range(0, len(body), 97):
                piece = body[i:i + 97]
                conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        elif method != "GET":
            conn.send(body)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def send_raw(port: int, data: bytes) -> tuple[int | None, dict, bytes]:
    """``data`` on a new connection, half-closed after it: the first response's status and body, or None when the
    server closed the connection without one. ``TimeoutError`` when it neither answers nor closes in time."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: what it answered, if anything, is still to be read
        r = http.client.HTTPResponse(s)
        try:
            r.begin()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, http.client.IncompleteRead):
            return None, {}, b""


def send_grpc(server: Server, case: Case) -> tuple[Any, str, Any]:
    import grpc as grpc_lib
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pb_grpc

    if case.transport == "grpc-bytes":
        call = server.channel.unary_unary("/inference.GRPCInferenceService/ModelInfer", request_serializer=None,
                                          response_deserializer=pb.ModelInferResponse.FromString)
        message = case.request
    else:
        method, message = case.request
        call = getattr(pb_grpc.GRPCInferenceServiceStub(server.channel), method)
    try:
        return grpc_lib.StatusCode.OK, "", call(message, timeout=3 * TIMEOUT_S)
    except grpc_lib.RpcError as e:
        return e.code(), e.details() or "", None


# --- judging --------------------------------------------------------------------------------------------------------


def expected(case: Case, server: Server) -> dict[str, np.ndarray]:
    """The outputs of ``jax.jit`` of the live function on the arguments the case means."""
    import jax

    with jax.enable_x64(case.model == "t"):
        outs = server.functions[case.model](*[case.inputs[n] for n in INPUTS[case.model]])
    return dict(zip(OUTPUTS[case.model], [np.asarray(o) for o in outs]))


def same(got: np.ndarray, want: np.ndarray) -> bool:
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype.kind == "f":  # the sign of zero kept; JSON's "NaN" has no sign (nor payload) to keep
        numbers = ~np.isnan(want)
        return bool(np.array_equal(got, want, equal_nan=True) and
                    np.array_equal(np.signbit(got)[numbers], np.signbit(want)[numbers]))
    return bool(np.array_equal(got, want))


def _message(text: str, mention: str) -> str:
    """What is wrong with a refusal's message (empty: nothing)."""
    if "\n" in text or len(text) > MAX_MESSAGE:
        return f"not one short line ({len(text)} characters): {text[:200]!r}"
    return f"{mention!r} not in {text!r}" if mention not in text else ""


def _check_outputs(case: Case, server: Server, outputs: list[tuple[str, str, list[int], Any]]) -> str:
    """``outputs`` (name, datatype, shape, array or an error) against ``expected``."""
    want = expected(case, server)
    names = [o[0] for o in outputs]
    if names != list(case.asked or OUTPUTS[case.model]):
        return f"outputs {names}, asked {list(case.asked or OUTPUTS[case.model])}"
    for name, datatype, shape, got in outputs:
        if isinstance(got, str):
            return f"output {name}: {got}"
        if DTYPES.get(datatype) != str(want[name].dtype):
            return f"output {name} has datatype {datatype}, expected {want[name].dtype}"
        got = got.reshape(shape)
        if not same(got, want[name]):
            return f"output {name} is {got.tolist()!r:.200}, expected {want[name].tolist()!r:.200}"
    return ""


def _rest_answer(case: Case, server: Server, headers: dict, body: bytes) -> str:
    length = headers.get("inference-header-content-length")
    header = json.loads(body[:int(length)] if length else body)
    raw, offset, outputs = body[int(length):] if length else b"", 0, []
    if case.rid is not None and header.get("id") != case.rid:
        return f"id {str(header.get('id'))[:80]!r}, sent {case.rid[:80]!r}"
    for o in header["outputs"]:
        dtype = np.dtype(DTYPES[o["datatype"]])
        if "data" in o:
            numbers = all(type(v) in (int, float, bool) or (dtype.kind == "f" and v in ("NaN", "Infinity", "-Infinity"))
                          for v in o["data"])
            got: Any = np.array(o["data"], dtype) if numbers else f"JSON values {o['data'][:5]} (not numbers)"
            if o["name"] in case.binary:
                got = "asked for in binary, came as JSON"
        else:
            size = o["parameters"]["binary_data_size"]
            got = np.frombuffer(raw[offset:offset + size], dtype)
            offset += size
            if o["name"] in case.text:
                got = "asked for as JSON, came in binary"
        outputs.append((o["name"], o["datatype"], o["shape"], got))
    if offset != len(raw):
        return f"{len(raw) - offset} bytes after the outputs"
    return _check_outputs(case, server, outputs)


def judge(case: Case, server: Server) -> tuple[str, str]:
    """The outcome of one case: (refused | answered | failure, what was wrong)."""
    import grpc as grpc_lib

    if case.transport == "raw":
        try:
            status, headers, body = send_raw(server.http, case.request)
        except TimeoutError:
            return "failure", f"no answer and the connection open after {TIMEOUT_S} s"
        if case.expect == "answered":
            wrong = f"HTTP {status}: {body[:200]!r}" if status != 200 else _rest_answer(case, server, headers, body)
            return ("failure", wrong) if wrong else ("answered", "")
        if case.expect == "refused" and status != 400:
            return "failure", f"HTTP {status}, expected 400: {body[:200]!r}"
        if status is not None and not 400 <= status < 500:
            return "failure", f"HTTP {status}: {body[:200]!r}"
        wrong = _message(body.decode(errors="replace"), case.mention) if case.expect == "refused" else ""
        return ("failure", wrong) if wrong else ("refused", "")
    if case.transport == "rest":
        status, headers, body = send_rest(server.http, *case.request)
        want = {"refused": 400, "missing": 404, "answered": 200}.get(case.expect) or int(case.expect)
        if status != want:
            return "failure", f"HTTP {status}, expected {want}: {body[:300]!r}"
        if status == 200:
            wrong = _rest_answer(case, server, headers, body)
            return ("failure", wrong) if wrong else ("answered", "")
        try:
            reply = json.loads(body)
            text = reply.get("error", reply.get("detail"))
            assert isinstance(text, str)
        except (ValueError, AttributeError, AssertionError):
            return "failure", f"HTTP {status} without a JSON error: {body[:200]!r}"
        wrong = _message(text, case.mention)
        return ("failure", wrong) if wrong else ("refused", "")
    code, details, reply = send_grpc(server, case)
    want = {"refused": grpc_lib.StatusCode.INVALID_ARGUMENT, "missing": grpc_lib.StatusCode.NOT_FOUND,
            "answered": grpc_lib.StatusCode.OK}[case.expect]
    if code != want:
        return "failure", f"{code}, expected {want}: {details[:300]!r}"
    if reply is None:
        wrong = _message(details, case.mention)
        return ("failure", wrong) if wrong else ("refused", "")
    if case.rid is not None and reply.id != case.rid:
        return "failure", f"id {reply.id[:80]!r}, sent {case.rid[:80]!r}"
    if len(reply.raw_output_contents) != len(reply.outputs):
        return "failure", f"{len(reply.outputs)} outputs, {len(reply.raw_output_contents)} raw_output_contents"
    outputs = [(o.name, o.datatype, list(o.shape), np.frombuffer(raw, DTYPES.get(o.datatype, "V1")))
               for o, raw in zip(reply.outputs, reply.raw_output_contents)]
    wrong = _check_outputs(case, server, outputs)
    return ("failure", wrong) if wrong else ("answered", "")


# --- running --------------------------------------------------------------------------------------------------------

CANARY = {"rest": rest("canary", "rest", {**good(), "id": "canary"}, "answered"),
          "grpc": grpc("canary", "grpc", {"inputs": m_typed(), "id": "canary"}, "answered")}


@dataclass
class Result:
    case: Case
    outcome: str  # refused, answered, failure
    detail: str = ""
    canary: str = ""  # what was wrong with the canary after it (empty: right)


@dataclass
class Report:
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Result]:
        return [r for r in self.results if r.outcome == "failure" or r.canary]

    def table(self) -> str:
        head = f"| {'group':<15} | {'cases':>5} | {'runs':>5} | {'refused 4xx':>11} | {'answered right':>14} | " \
               f"{'failures':>8} |"
        lines = [head, "|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|"]
        rows: dict[str, Counter[str]] = {}
        for r in self.results:
            c = rows.setdefault(r.case.group, Counter())
            c["cases"] += 1
            c["runs"] += 2
            c[r.outcome] += 1
            c["answered" if not r.canary else "failure"] += 1
        total: Counter[str] = Counter()
        for name, c in [*rows.items(), ("total", None)]:
            if c is None:
                c, name = total, "oip-requests"
            else:
                total.update(c)
            lines.append(f"| {name:<15} | {c['cases']:>5} | {c['runs']:>5} | {c['refused']:>11} | "
                         f"{c['answered']:>14} | {c['failure']:>8} |")
        return "\n".join(lines)


def run(cases: list[Case], server: Server, *, deadline_s: float = 900.0,
        progress: Callable[[str], None] | None = None) -> Report:
    """Every case, then a canary over its transport and a look at what the server logged meanwhile; the cases
    not reached within ``deadline_s`` are failures."""
    report, start = Report(), time.monotonic()
    server.new_log()
    for i, case in enumerate(cases):
        if time.monotonic() - start > deadline_s:
            report.results.append(Result(case, "failure", f"not run: past the deadline of {deadline_s:.0f} s"))
            continue
        try:
            outcome, detail = judge(case, server)
        except Exception as e:  # noqa: BLE001 - a reply the judge cannot read is the case's failure
            outcome, detail = "failure", f"{type(e).__name__}: {e}"[:300]
        canary = CANARY["grpc" if case.transport.startswith("grpc") else "rest"]
        try:
            canary_outcome, canary_detail = judge(canary, server)
        except Exception as e:  # noqa: BLE001
            canary_outcome, canary_detail = "failure", f"{type(e).__name__}: {e}"[:300]
        logged = server.new_log()
        bad = LOG_FAILURE.search(logged)
        if bad:
            shown = logged[max(0, bad.start() - 200):]
            shown = shown if len(shown) < 900 else f"{shown[:300]} ... {shown[-600:]}"
            outcome, detail = "failure", f"{detail}; the server logged {shown!r}"
        report.results.append(Result(case, outcome, detail, canary_detail if canary_outcome == "failure" else ""))
        if progress and (outcome == "failure" or report.results[-1].canary):
            progress(f"FAIL {case.id}: {detail} {report.results[-1].canary}")
        if progress and (i + 1) % 100 == 0:
            progress(f"  {i + 1}/{len(cases)} cases, {len(report.failures)} failures")
    report.seconds = time.monotonic() - start
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.serve.oip_corpus", description=__doc__.split("\n")[0])
    parser.add_argument("--group", action="append", choices=list(GROUPS), help="only this group (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the groups and their sizes")
    parser.add_argument("--json", help="write every result to this file")
    parser.add_argument("--dir", help="work in this directory (kept: the artifacts and the server's log)")
    args = parser.parse_args(argv)
    cases = build(args.group)
    if args.list:
        for group, n in Counter(c.group for c in cases).items():
            print(f"{group:<20} {n:>5}")
        return 0
    with tempfile.TemporaryDirectory(prefix="oip-corpus-") as tmp:
        if args.dir:
            Path(args.dir).mkdir(parents=True, exist_ok=True)
        tmp = args.dir or tmp
        started = time.monotonic()
        with serving_corpus(Path(tmp)) as server:
            ready = time.monotonic() - started
            report = run(cases, server, progress=lambda s: print(s, file=sys.stderr, flush=True))
            server.new_log()
            log = server.log.read_text(errors="replace")
    print(report.table())
    print(f"\n{len(report.results)} cases, {2 * len(report.results)} runs (each case and a canary) in "
          f"{report.seconds:.0f} s (the server ready in {ready:.0f} s); {len(report.failures)} failures; "
          f"the server's log: {'a Traceback' if 'Traceback' in log else 'no Traceback'}.")
    for r in report.failures:
        print(f"FAIL {r.case.id}: {r.detail} {r.canary}")
    if args.json:
        Path(args.json).write_text(json.dumps([{"id": r.case.id, "expect": r.case.expect, "outcome": r.outcome,
                                                "detail": r.detail, "canary": r.canary} for r in report.results],
                                              indent=1))
    return 1 if report.failures or "Traceback" in log else 0


if __name__ == "__main__":
    sys.exit(main())
