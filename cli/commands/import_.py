"""``jaxport import``."""

from __future__ import annotations

import contextlib

import click

from .. import errors, render
from ..options import (
    artifact_write_options,
    debug_option,
    for_jax_option,
    json_option,
    lowering_custom_call_option,
    platform_option,
    shapes_option,
)


@click.command("import")
@click.argument("module", metavar="MODULE")
@shapes_option("YAML shape spec naming and shaping main's arguments (default: main's own static types).")
@click.option("-o", "--output", type=click.Path(), help="Artifact path (default: <name>.jaxport).")
@click.option("--calling-convention", "calling_convention", type=int, metavar="N",
              help="JAX calling-convention version to record (default: the one this JAX's export writes).")
@platform_option
@lowering_custom_call_option
@click.option("--function", "function", metavar="NAME",
              help="Name of the function in the artifact (default: the module file's name).")
@artifact_write_options()
@for_jax_option
@json_option
@debug_option
def command(module, spec_path, output, calling_convention, platforms, allow_custom_calls, function, name, version,
            strip_locations, no_manifest, for_jax, as_json, debug):
    """Import a StableHLO module written by another producer into an artifact.

    MODULE is MLIR text (.mlir), MLIR bytecode or a StableHLO portable artifact (.mlirbc); its public function
    main becomes the artifact's function. A JAX serialization (Exported.serialize() bytes, from any JAX since
    0.4.30; .jaxexport) imports with the signature it records. See specs/IMPORT.md.

    \b
    Examples:
      jaxport import predict.mlir --shapes examples/mlp/spec.yaml -o imported.jaxport
      jaxport import predict.mlir -s examples/mlp/spec.yaml --name mlp --version 2.0.0 -o imported.jaxport
    """

    def body():
        from jaxport.importer import import_stablehlo

        con = render.stderr()
        with con.status("Importing...", spinner="dots") if not as_json else contextlib.nullcontext():
            result = import_stablehlo(module, spec_path, output=output, calling_convention=calling_convention,
                                      platforms=list(platforms) or None, allow_custom_calls=list(allow_custom_calls),
                                      name=name, version=version, function=function,
                                      strip_locations=strip_locations, write_manifest=not no_manifest,
                                      for_jax=for_jax)
        if as_json:
            render.print_json({"artifact": str(result.path), "size": result.size,
                               "manifest_file": str(result.manifest_path) if result.manifest_path else None,
                               "warnings": result.warnings, "manifest": result.manifest})
            return
        from jaxport.artifact.summary import human_bytes, signature

        for w in result.warnings:
            con.print(f"[yellow]warning:[/] {render.escape(w)}")
        out = render.stdout()
        out.print(f"[green]Imported[/] {render.escape(str(result.path))} ({human_bytes(result.size)})")
        for fname, f in result.model.functions.items():
            out.print(f"  {render.plain(signature(fname, f))}", markup=False)
            out.print(f"  platforms: {render.plain(', '.join(f.platforms))}; calling convention "
                      f"{f.calling_convention_version}", markup=False)
        if result.manifest_path:
            out.print(f"  manifest: {render.plain(result.manifest_path)}", markup=False)

    errors.run(body, debug=debug, as_json=as_json)
