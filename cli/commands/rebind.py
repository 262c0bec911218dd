"""``jaxport rebind``."""

from __future__ import annotations

import click

from .. import errors, render
from ..files import OutputPath
from ..options import (
    artifact_write_options,
    bind_root_options,
    debug_option,
    for_jax_option,
    json_option,
    require_signature_option,
    signature_path_option,
)
from ..written import written_document


@click.command("rebind")
@click.argument("artifact", type=click.Path())
@bind_root_options(
    bind_help="Replace the weights bound to argument NAME with those of SOURCE (.npz, .safetensors, .npy or "
              "model.py:ATTR), of the same names, shapes and dtypes; repeatable.",
    root_help="Record SOURCE relative to DIR, the export root (default: the first of the current directory, "
              "ARTIFACT's and SOURCE's directories that holds the artifact's recorded spec), so that verify finds the "
              "new weights.",
    required=True, example="params=finetuned.npz")
@click.option("-o", "--output", required=True, type=OutputPath(),
              help="The new artifact (a directory puts ARTIFACT's file name in it); never ARTIFACT itself.")
@artifact_write_options(rebinding=True)
@for_jax_option
@require_signature_option("Rebind ARTIFACT only if it carries a signature (model signing, ARTIFACT.sig) by this "
                          "trusted public key (PEM; or a CA certificate), checked before anything reads it (exit 14 "
                          "otherwise); repeatable: any one of them. The new artifact is not signed.")
@signature_path_option("With --require-signature: where ARTIFACT's signature bundle is (default: ARTIFACT.sig).")
@json_option
@debug_option
def command(artifact, binds, output, root, version, no_manifest, for_jax, require_signature, signature_path,
            as_json, debug):
    """Replace an artifact's bound weights without re-exporting; the program stays byte-identical.

    The new weights must have the names, shapes and dtypes of the old: the first difference is refused (exit 9).

    \b
    Examples:
      jaxport rebind mlp-bound.jaxport --bind params=examples/mlp/params.safetensors -o tuned.jaxport
      jaxport rebind mlp-bound.jaxport --bind params=examples/mlp/params.npz --version 1.0.1 -o tuned.jaxport
    """

    def body():
        import jaxport

        if signature_path is not None and not require_signature:
            raise click.UsageError("--signature names the bundle to check: give the trusted key with "
                                   "--require-signature PUBLIC.pem.")
        from jaxport.artifact.signing.sign import carry_notes

        # a required signature is checked on the descriptor the artifact is then read from (never its path again)
        result = jaxport.rebind(artifact, binds, output, root=root, version=version,
                                write_manifest=not no_manifest, for_jax=for_jax,
                                require_signature=require_signature or None, signature=signature_path)
        unsigned = carry_notes(artifact, result.path)  # the new artifact is not signed: say so
        if as_json:
            render.print_json(written_document(
                result, source=artifact, warnings=[*result.warnings, *unsigned],
                rebound=[{"name": r.name, "source": r.source, "recorded": r.recorded, "tensors": r.tensors,
                          "changed": r.changed} for r in result.rebound],
                kept_members=result.kept_members))
            return
        from jaxport.artifact.summary import human_bytes

        con = render.stderr()
        for w in result.warnings:
            con.print(f"[yellow]warning:[/] {render.escape(w)}")
        for note in unsigned:
            con.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        out = render.stdout()
        out.print(f"[green]Rebound[/] {render.escape(str(result.path))} ({human_bytes(result.size)})")
        for r in result.rebound:
            out.print(f"  {render.plain(r.name)} <- {render.plain(r.source)}: {len(r.tensors)} tensor"
                      f"{'' if len(r.tensors) == 1 else 's'}, {len(r.changed)} changed", markup=False)
        if for_jax is not None:
            out.print(f"  programs written for jax {render.plain(for_jax)}", markup=False)
        else:
            out.print(f"  programs kept byte for byte: {render.plain(', '.join(result.kept_members))}", markup=False)
        if result.manifest_path:
            out.print(f"  manifest: {render.plain(result.manifest_path)}", markup=False)

    errors.run(body, debug=debug, as_json=as_json)
