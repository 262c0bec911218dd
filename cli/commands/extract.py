"""``jaxport extract``."""

from __future__ import annotations

import click

from .. import errors, render
from ..options import debug_option, json_option


@click.command("extract")
@click.argument("artifact", type=click.Path())
@click.option("--weights", "weights_out", type=click.Path(), metavar="OUT.npz|OUT.safetensors",
              help="Write the bound weights.")
@click.option("--payload", "payload_fn", metavar="FUNCTION",
              help="Write FUNCTION's JAX serialization as is (to -o, e.g. f.jaxexport).")
@click.option("--mlir", "mlir_fn", metavar="FUNCTION",
              help="Write FUNCTION's StableHLO to -o: text for .mlir, portable bytecode for .mlirbc.")
@click.option("-o", "--output", type=click.Path(), help="Output file for --payload or --mlir.")
@json_option
@debug_option
def command(artifact, weights_out, payload_fn, mlir_fn, output, as_json, debug):
    """Write parts of an artifact for other tools: weights, JAX payload, StableHLO."""
    chosen = [x for x in (weights_out, payload_fn, mlir_fn) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError("choose exactly one of --weights OUT, --payload FUNCTION or --mlir FUNCTION.")
    if (payload_fn or mlir_fn) and not output:
        raise click.UsageError("--payload and --mlir write to the file given with -o.")

    def body():
        from jaxport.artifact import extract
        from jaxport.artifact.container import open_artifact

        with open_artifact(artifact) as art:
            if weights_out:
                path, kind = weights_out, "weights"
                size = extract.extract_weights(art, weights_out)
            elif payload_fn:
                path, kind = output, "payload"
                size = extract.extract_payload(art, payload_fn, output)
            else:
                path, kind = output, "mlirbc" if output.lower().endswith(".mlirbc") else "mlir"
                size = extract.extract_mlir(art, mlir_fn, output)
        if as_json:
            render.print_json({"artifact": str(artifact), "written": [{"path": str(path), "kind": kind,
                                                                       "bytes": size}]})
        else:
            render.stdout().print(f"wrote {render.escape(str(path))} ({kind}, {size} bytes)")

    errors.run(body, debug=debug, as_json=as_json)
