"""``jaxport serve``: artifacts behind the Open Inference Protocol (v2), over REST and gRPC, on kserve."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from jaxport import interrupts
from jaxport.artifact import contract
from jaxport.artifact.container import Artifact, open_artifact
from jaxport.errors import UsageError
from jaxport.run.cache import compilation_cache, default_cache_dir
from jaxport.run.load import load, select_function
from jaxport.serve import ports
from jaxport.serve.batching import Batched

from .. import errors, render
from ..devices import apply, device_options
from ..options import allow_custom_call_option, debug_option, dim_option, function_option, json_option

_NAMED = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)(@(?P<version>[A-Za-z0-9][A-Za-z0-9_.-]*))?=(?P<path>.+)")
_SIGNALS = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


_dims_option = dim_option("Sizes of a dimension variable to compile a bucket for (e.g. batch=1,8,32); repeat for "
                          "each variable (every combination is compiled). Default: the powers of two inside the "
                          "spec's bounds with three sizes between each (8, 10, 12, 14, 16, ...) and the upper "
                          "bound.")


def _parse(spec: str) -> tuple[str, str, str]:
    """``[NAME[@VERSION]=]ARTIFACT`` as (name, version, path); the name defaults to the file's stem, the version
    to 1."""
    m = _NAMED.fullmatch(spec)
    if m and not Path(spec).exists():
        name, version, path = m.group("name", "version", "path")
        return name, version or "1", path
    stem = Path(spec).name
    stem = stem[:-len(".jaxport")] if stem.endswith(".jaxport") and len(stem) > 8 else stem
    return stem, "1", spec


def _say(text: str) -> None:
    click.echo(f"jaxport serve: {text}", err=True)


def _event(as_json: bool, event: str, **fields: Any) -> None:
    """One ``--json`` event, a JSON object on one line of stdout (specs/schemas/cli/serve.schema.json), flushed."""
    if as_json:
        click.echo(json.dumps({"event": event, **fields}))


def _distinct(parsed: list[tuple[str, str, str]]) -> None:
    """Refuse a model name and version given twice, before anything is loaded."""
    first: dict[tuple[str, str], str] = {}
    for name, version, path in parsed:
        if (name, version) in first:
            raise UsageError(f"model {name!r} version {version} is given twice ({first[name, version]} and {path}); "
                             f"give each artifact its own name or version: NAME=ARTIFACT or NAME@VERSION=ARTIFACT.")
        first[name, version] = path


def _opened(stack: contextlib.ExitStack, parsed: list[tuple[str, str, str]], function: str | None,
            dims: dict[str, Any]) -> list[tuple[Artifact, str]]:
    """Every artifact opened and checked (the manifest, without JAX), with the function to serve; a ``--dim`` that
    no served function has is refused here, before anything compiles."""
    opened, seen = [], set()
    for _, _, path in parsed:
        art = stack.enter_context(open_artifact(path))
        fname = select_function(art.model, function, path)
        seen.update(contract.dimension_variables(art.model.functions[fname]))
        opened.append((art, fname))
    unused = [v for v in dims if v not in seen]
    if unused:
        raise UsageError(f"--dim {unused[0]}: no served function has a dimension variable {unused[0]!r}.")
    return opened


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
              help="Batch concurrent requests: whenever the worker is free, the queued requests with the same "
                   "shapes past axis 0 run as one call. A request waits at most this long for others (a request "
                   "that finds the worker idle runs at once); 0: every request is its own call.")
@click.option("--max-batch-rows", type=click.IntRange(min=1), default=None,
              help="The most rows one batched call takes (default: the largest bucket's).")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="JAX's compilation cache to warm up into and fetch from (default: as 'jaxport warmup'); an image "
                   "that ran 'jaxport warmup' at build time starts without compiling.")
@allow_custom_call_option
@device_options
@json_option
@debug_option
def command(artifacts, dims, function, host, http_port, grpc_port, batch_window_ms, max_batch_rows, cache_dir,
            allow_custom_calls, devices, as_json, debug):
    """Serve artifacts over the Open Inference Protocol (v2, KServe and Triton clients), REST and gRPC.

    Each ARTIFACT is served as a model named after its file (or NAME=ARTIFACT), version 1 (or
    NAME@VERSION=ARTIFACT; /v2/models/NAME/versions/VERSION, the plain name serving the highest). Every shape
    bucket is compiled before the server listens, so /v2/health/ready means nothing compiles any more; a request
    is padded to the smallest bucket that fits where the program is proven to work row by row, split over the
    largest, and refused with the reason elsewhere. Bad inputs get HTTP 400 / gRPC INVALID_ARGUMENT with the
    artifact's message. A model given twice, an artifact that cannot be read and an address that cannot be
    listened on are refused before anything compiles. SIGTERM or Ctrl-C: the requests in flight are answered, then
    exit 143 or 130. --json prints one JSON object a line on stdout per event (listening, ready, stopped). Needs
    the optional extra jaxport[serve] (kserve).

    \b
    Examples:
      jaxport serve mlp.jaxport --dim batch=1,8,32 --http-port 8080 --grpc-port 8081
      jaxport serve mlp@2=mlp-v2.jaxport mlp@1=mlp.jaxport --batch-window-ms 2
    """

    def body():
        apply(devices)  # before JAX starts
        parsed = [_parse(spec) for spec in artifacts]
        _distinct(parsed)
        with contextlib.ExitStack() as stack:
            opened = _opened(stack, parsed, function, dims)
            ports.check(host, http_port, grpc_port)  # before the minutes of compiling
            _serve(parsed, opened)

    def _serve(parsed, opened):
        try:
            from jaxport.serve import kserve_server
        except ImportError as e:
            raise UsageError(f"'jaxport serve' needs the optional extra jaxport[serve] (kserve), which is not "
                             f"installed ({e}): pip install 'jaxport[serve]'.") from None
        directory = cache_dir or default_cache_dir()
        models, described = [], []
        for (name, version, path), (art, fname) in zip(parsed, opened):
            start = time.perf_counter()
            with compilation_cache(directory):
                loaded = load(art, fname, allow_custom_calls=allow_custom_calls)
            for note in loaded.notes:  # a program older than this JAX's window, read by jaxport
                render.stderr().print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
            variables = contract.dimension_variables(loaded.function_record)
            batched = Batched(loaded, {k: v for k, v in dims.items() if k in variables}, cache_dir=directory)
            batched.warmup(directory)
            model = kserve_server.JaxportModel(name, version, batched, window_ms=batch_window_ms,
                                               max_rows=max_batch_rows)
            models.append(model)
            elapsed = time.perf_counter() - start
            plan = "; ".join(f"{v} in {', '.join(str(x) for x in sorted({b[v] for b in batched.buckets}))}"
                             for v in variables) or "static shapes"
            batching = ("batching up to " + str(model.max_rows) + " rows") if model.batching else \
                "no batching" if batch_window_ms == 0 else f"no batching ({batched.no_batch_reason})"
            _say(f"{name} version {version} ({path}, function {loaded.function}): {len(batched.buckets)} "
                 f"bucket{'s' if len(batched.buckets) != 1 else ''} compiled ({plan}), {batching}, in "
                 f"{elapsed:.1f} s")
            described.append({"name": name, "version": version, "artifact": path, "function": loaded.function,
                              "buckets": [dict(b) for b in batched.buckets], "batching": bool(model.batching),
                              "max_batch_rows": model.max_rows if model.batching else None,
                              "warmup_s": round(elapsed, 3)})
        server = kserve_server.Server(models, host=host, http_port=http_port, grpc_port=grpc_port)
        rest, grpc = f"http://{ports.address(host, http_port)}", ports.address(host, grpc_port)

        def listening():
            _say(f"listening on {rest} (REST) and {grpc} (gRPC), ready: every bucket is compiled")
            sys.stderr.flush()
            _event(as_json, "listening", host=host, http_port=http_port, grpc_port=grpc_port, rest=rest, grpc=grpc,
                   models=[{"name": m["name"], "version": m["version"]} for m in described])
            _event(as_json, "ready", models=described)

        stopped_by = server.serve(listening)
        if stopped_by is None:
            return
        _event(as_json, "stopped", signal=_SIGNALS.get(stopped_by, str(stopped_by)), exit_code=128 + stopped_by)
        sys.stdout.flush()
        if interrupts.installed():
            interrupts.stop(stopped_by)  # the line every command prints for it, exit 130 or 143
        sys.exit(128 + stopped_by)

    errors.run(body, debug=debug, as_json=as_json)
