"""``jaxport import``."""

from __future__ import annotations

import contextlib

import click

from .. import errors, render
from ..files import NamesFiles, OutputPath
from ..options import debug_option, json_option, shapes_option
from ..requests import IMPORT_REQUEST, request_options
from ..written import print_written, written_document


@click.command("import")
@click.argument("module", type=NamesFiles(), metavar="MODULE")
@shapes_option("YAML shape spec naming and shaping main's arguments (default: main's own static types).")
@click.option("-o", "--output", type=OutputPath(), help="Artifact path (default: <name>.jaxport).")
@request_options("ImportRequest", IMPORT_REQUEST)
@json_option
@debug_option
def command(module, spec_path, output, request, as_json, debug):
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
        from jaxport.importer import import_by

        con = render.stderr()
        with con.status("Importing...", spinner="dots") if not as_json else contextlib.nullcontext():
            result = import_by(module, spec_path, output, request)
        if as_json:
            render.print_json(written_document(result))
            return
        print_written("Imported", result, convention=True)

    errors.run(body, debug=debug, as_json=as_json)
