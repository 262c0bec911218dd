"""``jaxport extract``."""

from __future__ import annotations

import click

from .. import errors, render
from ..files import OutputPath
from ..options import debug_option, json_option


@click.command("extract")
@click.argument("artifact", type=click.Path())
@click.option("--weights", "weights_out", type=OutputPath(), metavar="OUT.npz|OUT.safetensors|OUT.npy",
              help="Write the bound weights, named relative to their bound argument (w1 for params/w1), as "
                   "--bind NAME=OUT reads them; one array as .npy.")
@click.option("--arg", "argument", metavar="NAME",
              help="With --weights: the bound argument whose tensors to write (needed when several are bound).")
@click.option("--full-names", is_flag=True,
              help="With --weights: keep the artifact's tensor names (params/w1), as the program and 'compile' "
                   "name them; such a file does not bind again as is.")
@click.option("--payload", "payload_fn", metavar="FUNCTION",
              help="Write FUNCTION's JAX serialization as is (to -o, e.g. f.jaxexport).")
@click.option("--mlir", "mlir_fn", metavar="FUNCTION",
              help="Write FUNCTION's StableHLO to -o: text for .mlir, portable bytecode for .mlirbc.")
@click.option("-o", "--output", type=OutputPath(), help="Output file for --payload or --mlir.")
@json_option
@debug_option
def command(artifact, weights_out, argument, full_names, payload_fn, mlir_fn, output, as_json, debug):
    """Write parts of an artifact for other tools: weights, JAX payload, StableHLO.

    \b
    Examples:
      jaxport extract mlp-bound.jaxport --weights weights.npz
      jaxport extract mlp.jaxport --mlir predict -o predict.mlir
      jaxport extract mlp.jaxport --payload predict -o predict.jaxexport
    """
    chosen = [x for x in (weights_out, payload_fn, mlir_fn) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError("choose exactly one of --weights OUT, --payload FUNCTION or --mlir FUNCTION.")
    if (payload_fn or mlir_fn) and not output:
        raise click.UsageError("--payload and --mlir write to the file given with -o.")
    if (argument is not None or full_names) and not weights_out:
        raise click.UsageError("--arg and --full-names go with --weights.")

    def body():
        from jaxport.artifact import extract
        from jaxport.artifact.container import open_artifact

        with open_artifact(artifact) as art:
            note = ""
            if weights_out:
                path, kind = weights_out, "weights"
                written = extract.extract_weights(art, weights_out, argument, full_names)
                size = written.bytes
                count = f"{written.tensors} tensor{'s' if written.tensors != 1 else ''}"
                note = (f"; {count} of argument {written.argument!r}, named relative to it" if written.argument
                        else f"; {count}, full names")
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
            render.stdout().print(f"wrote {render.escape(str(path))} ({kind}, {size} bytes{render.escape(note)})")

    errors.run(body, debug=debug, as_json=as_json)
