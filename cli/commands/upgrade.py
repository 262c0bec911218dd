"""``jaxport upgrade``."""

from __future__ import annotations

import click

from .. import errors, render
from ..devices import apply, device_options
from ..files import OutputPath
from ..options import allow_custom_call_option, debug_option, for_jax_option, json_option


@click.command("upgrade")
@click.argument("artifact", type=click.Path())
@click.option("-o", "--output", required=True, type=OutputPath(),
              help="The new artifact (a directory puts ARTIFACT's file name in it); never ARTIFACT itself.")
@for_jax_option
@allow_custom_call_option
@click.option("--no-manifest", is_flag=True, help="Do not write the manifest next to the artifact.")
@device_options
@json_option
@debug_option
def command(artifact, output, for_jax, allow_custom_calls, no_manifest, devices, as_json, debug):
    """Re-serialize an artifact with this JAX (or for an older one), checked to compute the same.

    The same program and weights, exported again by this JAX: its calling convention, its StableHLO and
    serialization, a fresh compatibility window. Old and new are called on the inputs verify draws and must give the
    same outputs, or nothing is written (exit 12). An artifact this JAX wrote has nothing to upgrade: it is copied
    as it is to OUTPUT (exit 0), so that what comes next finds OUTPUT either way.

    \b
    Examples:
      jaxport upgrade mlp-0.9.jaxport -o mlp-upgraded.jaxport
      jaxport upgrade mlp.jaxport --for-jax 0.9.1 -o mlp-for-0.9.jaxport
    """

    def body():
        apply(devices)  # before JAX starts: a sharded program is compared on its devices
        import jaxport

        con = render.stderr()
        with con.status("Upgrading...", spinner="dots") if not as_json else _null():
            result = jaxport.upgrade(artifact, output, for_jax=for_jax,
                                     allow_custom_calls=list(allow_custom_calls) or None,
                                     write_manifest=not no_manifest)
        from jaxport.artifact.signing.sign import carry_notes

        unsigned = carry_notes(artifact, result.path)  # the new one (or the copy) is not signed
        if as_json:
            render.print_json({**result.to_json(), "notes": [*result.notes, *unsigned], "manifest": result.manifest})
            return
        for note in result.notes:
            con.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        out = render.stdout()
        target = f" for jax {result.for_jax}" if result.for_jax else ""
        if result.nothing_to_do:
            out.print(f"Nothing to upgrade: {render.plain(str(artifact))} was written by jax {result.old_jax}{target}, "
                      f"the JAX running here, which reads it itself; copied it as it is to "
                      f"{render.plain(str(result.path))}.", markup=False, highlight=False)
            for note in unsigned:
                con.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
            return
        from jaxport.artifact.summary import human_bytes

        out.print(f"[green]Upgraded[/] {render.escape(str(result.path))} ({human_bytes(result.size or 0)}): "
                  f"written by jax {render.escape(result.new_jax)}{render.escape(target)}, was jax "
                  f"{render.escape(result.old_jax)}"
                  + (f" for jax {render.escape(result.old_for_jax)}" if result.old_for_jax else ""))
        for fname, cases in result.compared.items():
            out.print(f"  {render.plain(fname)}: same outputs as the old program in {cases} case"
                      f"{'' if cases == 1 else 's'}", markup=False, highlight=False)
        for note in unsigned:
            con.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)

    errors.run(body, debug=debug, as_json=as_json)


def _null():
    import contextlib

    return contextlib.nullcontext()
