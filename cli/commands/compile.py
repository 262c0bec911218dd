"""``jaxport compile``."""

from __future__ import annotations

import contextlib

import click

from jaxport.frontend import plural

from .. import errors, render
from ..files import OutputPath
from ..options import allow_custom_call_option, debug_option, dim_option, function_option, json_option
from ..progress import Stages
from ..progress import enabled as progress_lines


def _fixed_and_grid(dims: dict[str, list[int]]) -> tuple[dict[str, int], dict[str, list[int]]]:
    """``--dim`` as the library takes it: a variable given one size is fixed, one given several spans a grid."""
    fixed = {name: values[0] for name, values in dims.items() if len(values) == 1}
    return fixed, {name: values for name, values in dims.items() if len(values) > 1}


def _buckets(texts: tuple[str, ...]) -> list[dict[str, int]]:
    from jaxport.errors import UsageError
    from jaxport.run.buckets import parse_assignments

    buckets = []
    for text in texts:
        parsed = parse_assignments(text, "--bucket")
        several = [k for k, v in parsed.items() if len(v) != 1]
        if several:
            raise UsageError(f"--bucket {text}: a bucket gives one value per variable ({several[0]} has "
                             f"{len(parsed[several[0]])}); repeat --bucket for several buckets, or build a grid with "
                             f"--dim {several[0]}=N1,N2,...")
        buckets.append({k: v[0] for k, v in parsed.items()})
    return buckets


@click.command("compile")
@click.argument("artifact", type=click.Path())
@click.option("--target", type=click.Choice(["iree-llvm-cpu"]), default="iree-llvm-cpu", show_default=True,
              help="What to compile for.")
@click.option("-o", "--output", required=True, type=OutputPath(),
              help="The module (e.g. model.vmfb); beside it model.run.json (how to call it) and model.irpa (the "
                   "bound tensors).")
@function_option
@dim_option("Sizes of a dimension variable to build a function for (e.g. batch=1,8,32,128); repeat for several "
            "variables: one function per combination. A variable given one size is fixed (alone: one bucket, the "
            "other variables at their smallest valid values).", deprecated_alias="--dims")
@click.option("--bucket", "buckets", multiple=True, metavar="NAME=N,NAME=N",
              help="One bucket to build a function for (e.g. batch=8,seq=128); repeatable. --dim with one size "
                   "fills in the variables a bucket leaves out.")
@click.option("--cpu", type=click.Choice(["generic", "host"]), default="generic", show_default=True,
              help="generic: runs on any CPU of this architecture; host: fastest, for this machine's CPU only.")
@click.option("--print-command", is_flag=True,
              help="Print only the iree-run-module command line of each function, one per line.")
@allow_custom_call_option
@json_option
@debug_option
def command(artifact, target, output, function, dims, buckets, cpu, print_command, allow_custom_calls, as_json,
            debug):
    """Compile an artifact's function into an IREE module, for deployment without Python JAX.

    One function per shape bucket (--dim or --bucket; without them, buckets proposed from the spec's
    bounds), bound tensors in a parameter archive, and a run description (OUTPUT.run.json) with the bucket and
    padding rules and the iree-run-module command line of each function.

    \b
    Examples:
      jaxport compile mlp.jaxport -o mlp.vmfb --dim batch=1,8,32
      jaxport compile mlp.jaxport -o mlp.vmfb --bucket batch=8 --print-command
    """

    def body():
        from jaxport.run.compile.deploy import compile_artifact

        busy = render.stderr().status("Compiling with IREE...", spinner="dots") if not (as_json or print_command) \
            else contextlib.nullcontext()
        stages = Stages(progress_lines(as_json))
        fixed, grid = _fixed_and_grid(dims)
        with busy, stages:
            compiled = compile_artifact(artifact, output, function=function, dims=fixed or None, grid=grid or None,
                                        buckets=_buckets(buckets) or None, cpu=cpu,
                                        allow_custom_calls=allow_custom_calls, progress=stages)
        if as_json:
            render.print_json({
                "artifact": str(artifact), "module": str(compiled.module), "run": str(compiled.run),
                "parameters": str(compiled.parameters) if compiled.parameters else None,
                "function": compiled.function, "target": target, "cpu": cpu, "buckets": compiled.bucket_source,
                "functions": [{"name": f.name, "dims": f.dims, "inputs": [i.to_json() for i in f.inputs],
                               "outputs": [o.to_json() for o in f.outputs], "command": f.command}
                              for f in compiled.functions],
                "padding": {v: verdict.as_dict() for v, verdict in compiled.verdicts.items()},
                "notes": compiled.notes, "sizes": compiled.sizes})
            return
        out = render.stdout()
        if print_command:
            for line in compiled.commands():
                out.print(line, markup=False, highlight=False, soft_wrap=True)
            for note in compiled.notes:
                render.stderr().print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
            return
        out.print(f"[green]Compiled[/] {render.escape(str(compiled.module))} ({target}, cpu={cpu}): "
                  f"{plural(len(compiled.functions), 'function')} ({render.escape(compiled.bucket_source)})")
        for f in compiled.functions:
            ins = ", ".join(f"{i.name} {i.shape}" for i in f.inputs)
            outs = ", ".join(f"{o.name} {o.shape}" for o in f.outputs)
            out.print(f"  {f.name}: {ins} -> {outs}", markup=False, highlight=False)
        if compiled.parameters:
            out.print(f"  parameters: {compiled.parameters} ({plural(len(compiled.tensors), 'bound tensor')}, "
                      f"{compiled.sizes['parameters']:,} bytes)", markup=False, highlight=False)
        out.print(f"  run description: {compiled.run}", markup=False, highlight=False)
        for note in compiled.notes:
            out.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        out.print(f"run: {compiled.functions[0].command}", markup=False, highlight=False, soft_wrap=True)

    errors.run(body, debug=debug, as_json=as_json)
