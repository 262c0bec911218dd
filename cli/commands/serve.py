"""``jaxport serve``: artifacts behind the Open Inference Protocol (v2), over REST and gRPC, on kserve."""

from __future__ import annotations

import click

from .. import errors
from ..devices import device_options
from ..files import NamesFiles
from ..options import debug_option, dim_option, json_option, load_options
from ..serving import serve, server_options


@click.command("serve")
@click.argument("artifacts", nargs=-1, required=True, type=NamesFiles(), metavar="[NAME[@VERSION]=]ARTIFACT...")
@dim_option("Sizes of a dimension variable to pad to and compile before ready (e.g. batch=1,8,32); repeat for each "
            "variable (every combination). Default, for every variable: the powers of two inside the spec's bounds "
            "with three sizes between each (8, 10, 12, 14, 16, ...) and the upper bound.")
@server_options
@load_options(omit=("runtime", "allow_platform_mismatch", "verify_weights", "cache", "module_dir"), help={
    "cache_dir": "JAX's compilation cache to warm up into and fetch from (default: as 'jaxport warmup'); an image "
                 "that ran 'jaxport warmup' at build time starts without compiling."})
@device_options
@json_option
@debug_option
def command(artifacts, dims, server, load, devices, as_json, debug):
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
    errors.run(lambda: serve(artifacts, dims, load, server, devices, as_json), debug=debug, as_json=as_json)
