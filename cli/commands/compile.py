"""``jaxport compile``."""

from __future__ import annotations

import contextlib

import click

from .. import errors, render
from ..options import allow_custom_call_option, debug_option, dim_option, function_option, json_option


@click.command("compile")
@click.argument("artifact", type=click.Path())
@click.option("--target", type=click.Choice(["iree-llvm-cpu"]), default="iree-llvm-cpu", show_default=True,
              help="What to compile for.")
@click.option("-o", "--output", required=True, type=click.Path(),
              help="The compiled module (e.g. model.vmfb); its description goes to OUTPUT.json.")
@function_option
@dim_option
@click.option("--cpu", type=click.Choice(["generic", "host"]), default="generic", show_default=True,
              help="generic: runs on any CPU of this architecture; host: fastest, for this machine's CPU only.")
@allow_custom_call_option
@json_option
@debug_option
def command(artifact, target, output, function, dims, cpu, allow_custom_calls, as_json, debug):
    """Compile an artifact's function into an IREE module, for deployment without Python JAX.

    Without --dim the shape-polymorphic program is compiled as is (IREE supports many, not all, such programs);
    with --dim it is specialized to those sizes. The module's arguments are described in OUTPUT.json: the
    platform index for multi-platform artifacts, then bound tensors (write them with 'jaxport extract
    --weights'), then inputs.
    """

    def body():
        from jaxport.run.deploy import compile_artifact

        busy = render.stderr().status("Compiling with IREE...", spinner="dots") if not as_json else \
            contextlib.nullcontext()
        with busy:
            description = compile_artifact(artifact, output, function=function, dims=dims or None, cpu=cpu,
                                           allow_custom_calls=allow_custom_calls)
        if as_json:
            render.print_json({"artifact": str(artifact), "module": str(output), "description": f"{output}.json",
                               **{k: description[k] for k in ("function", "target", "cpu", "dims", "arguments",
                                                              "outputs")}})
            return
        out = render.stdout()
        shapes = "static shapes " + ", ".join(f"{k}={v}" for k, v in description["dims"].items()) \
            if description["dims"] else "shape-polymorphic"
        out.print(f"[green]Compiled[/] {render.escape(str(output))} ({target}, cpu={cpu}, {render.escape(shapes)})")
        out.print("  arguments: " + render.plain(", ".join(a.get("name", a["kind"]) for a in description["arguments"])),
                  markup=False)
        out.print(f"  described in {render.plain(output)}.json", markup=False)

    errors.run(body, debug=debug, as_json=as_json)

