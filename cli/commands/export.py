"""``jaxport export``."""

from __future__ import annotations

from pathlib import Path

import click

from .. import errors, render
from ..files import NamesFiles, OutputPath
from ..options import debug_option, json_option, shapes_option
from ..progress import Stages
from ..progress import enabled as progress_lines
from ..requests import EXPORT_REQUEST, request_options
from ..written import print_written, written_document


@click.command("export")
@click.argument("entrypoint", required=False, type=NamesFiles(), metavar="ENTRYPOINT")
@shapes_option("YAML shape spec (see specs/SPEC.md).", required=True)
@click.option("-o", "--output", type=OutputPath(), help="Artifact path (default: <name>.jaxport).")
@request_options("ExportRequest", EXPORT_REQUEST)
@json_option
@debug_option
def command(entrypoint, spec_path, output, request, as_json, debug):
    """Export a JAX function into an artifact, from a YAML shape spec.

    ENTRYPOINT is path/to/model.py:NAME or package.module:NAME (optional when the spec names its functions).

    \b
    Examples:
      jaxport export examples/mlp/model.py:predict --shapes examples/mlp/spec.yaml -o mlp.jaxport
      jaxport export examples/mlp/model.py:apply --shapes examples/mlp/spec-npz.yaml -o mlp-bound.jaxport
      jaxport export examples/mlp/model.py:predict -s examples/mlp/spec.yaml --for-jax 0.9.1 -o mlp-0.9.jaxport
    """

    def body():
        import sys

        import jaxport

        stages = Stages(progress_lines(as_json))
        # the spinner draws only on a terminal; elsewhere (a CI log) the stage lines say it, and rich is not loaded
        spinner = not as_json and getattr(sys.stderr, "isatty", lambda: False)()
        with render.stderr().status("Exporting...", spinner="dots") if spinner else _null(), stages:
            # without -o: <name>.jaxport in the current directory
            result = jaxport.export(entrypoint, spec_path, output if output else Path("."), request=request,
                                    progress=stages)
        if as_json:
            render.print_json(written_document(result))
            return
        print_written("Exported", result)

    errors.run(body, debug=debug, as_json=as_json)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
