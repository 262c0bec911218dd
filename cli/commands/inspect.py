"""``jaxport inspect``: reads the manifest without importing JAX (except for ``--mlir``)."""

from __future__ import annotations

import click

from .. import errors, render
from ..inspect_view import document
from ..options import (
    IsolatableCommand,
    debug_option,
    function_option,
    isolate_options,
    json_option,
    run_isolated,
    signature_key_option,
    signature_path_option,
)
from ..render import plain, plain_lines


@click.command("inspect", cls=IsolatableCommand)
@click.argument("artifact", type=click.Path())
@json_option
@click.option("--mlir", is_flag=True, help="Print the StableHLO text of the function(s) (imports JAX).")
@click.option("--debug-info", is_flag=True, help="With --mlir: keep source locations in the text.")
@function_option
@signature_key_option("Verify the artifact's signature (model signing, ARTIFACT.sig) with this trusted public key "
                      "(PEM; or a CA certificate) before showing it, exit 14 if it does not verify; repeatable. "
                      "Without it, inspect says what signature sits beside the artifact, unverified.")
@signature_path_option("The signature bundle to show or verify (default: ARTIFACT.sig beside the artifact).")
@isolate_options
@debug_option
def command(artifact, as_json, mlir, debug_info, function, signature_keys, signature_path, isolate, memory_limit,
            time_limit, debug):
    """Show what an artifact holds, without importing JAX.

    \b
    Examples:
      jaxport inspect mlp.jaxport
      jaxport inspect mlp.jaxport --json
      jaxport inspect mlp.jaxport --mlir --function predict
    """
    if isolate:
        ctx = click.get_current_context()
        errors.run(lambda: run_isolated(ctx, str(artifact), memory_limit, time_limit), debug=debug, as_json=as_json)
        return

    def body():
        from jaxport.artifact.container import open_artifact
        from jaxport.artifact.manifest import function_names

        verified = None
        if signature_keys:  # checked before the artifact is read, on the descriptor it is then read from
            from jaxport.artifact.signing.check import Trust, open_signed
            from jaxport.run.vouching import register

            trusted = Trust(tuple(signature_keys), source="--signature-key")
            opened, verified = open_signed(artifact, trusted, signature_path)
            register(opened, verified, trusted)  # the program check's verdict is read only when vouched for
        else:
            opened = open_artifact(artifact)
        with opened as art:
            art.verify_all()
            m = art.manifest
            names = function_names(art.model, function)
            if mlir:
                from jaxport.artifact.window.payload import module_bytes
                from jaxport.program.module_scan import module_text

                for fname in names:
                    payload = art.read(art.model.functions[fname].payload)
                    if len(names) > 1:
                        print(f"// function {plain(fname)}")
                    # Source locations and string attributes in the text come from the artifact.
                    print(plain_lines(module_text(module_bytes(payload, art.path, fname), debug_info=debug_info)))
                return
            if as_json:
                render.print_json(m)
                return
            document(art, function, signature_path, verified).print()

    errors.run(body, debug=debug, as_json=as_json)
