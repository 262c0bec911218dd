"""``jaxport target``: this machine's GPU captured as a compile target, for machines without it."""

from __future__ import annotations

import click

from .. import errors, render
from ..files import OutputPath
from ..options import debug_option, json_option
from ..render import plain


@click.command("target")
@click.option("-o", "--output", required=True, type=OutputPath(), metavar="FILE.json",
              help="Where to write the capture (JSON): give it to 'warmup' and 'check' as --target cuda-FILE.json.")
@json_option
@debug_option
def command(output, as_json, debug):
    """Capture this machine's GPU as a compile target: XLA's target config of its devices and the versions here.

    Run it once on the GPU host. On any machine, --target cuda-FILE.json then compiles for that GPU without it
    (warmup, check, a policy's compiles_on), with its real name, multiprocessors, memory and CUDA and cuDNN
    versions instead of XLA's spec (--target cuda-h200), so that the executables built match this machine. Exits
    10 where JAX sees no NVIDIA GPU ("no GPU here").

    \b
    Examples:
      jaxport target -o h200.json
      jaxport target -o h200.json --json
    """
    if not str(output).endswith(".json"):
        raise click.UsageError(f"-o {output}: a capture is JSON; give a file name ending in .json (--target "
                               f"cuda-FILE.json reads it by its suffix).")

    def body():
        from jaxport.run.compile.targets import capture_gpu, write_capture

        document = capture_gpu()
        write_capture(output, document)
        summary = {"output": str(output), "device": document["device"], "model": document["model"],
                   "compute_capability": document["compute_capability"], "devices": document["devices"],
                   "memory_limit": document["memory_limit"], "versions": document["versions"],
                   "target": f"cuda-{output}"}
        if as_json:
            render.print_json(summary)
            return
        versions = ", ".join(f"{k} {v}" for k, v in document["versions"].items() if v)
        out = render.Document()
        out.line("Captured ", (plain(document["device"]), "bold"), f" (compute capability "
                 f"{plain(document['compute_capability'])}, {document['devices']} on this host) in "
                 f"{plain(str(output))}: compile for it elsewhere with --target cuda-{plain(str(output))}")
        out.line(plain(versions))
        out.print()

    errors.run(body, debug=debug, as_json=as_json)
