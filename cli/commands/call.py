"""``jaxport call``: run an artifact on inputs from files or generated from its signature.

The command parses its options into a ``jaxport.run.calling.CallRequest`` (which refuses combinations that do not
fit), runs it with ``jaxport.call`` and shows the report (``call_view``); a compiled module goes to ``call_iree``."""

from __future__ import annotations

import sys

import click

from jaxport.errors import UsageError

from .. import errors, render
from ..call_view import PRINT_LIMIT, Busy, show
from ..devices import apply, device_options
from ..options import (
    IsolatableCommand,
    allow_custom_call_option,
    allow_platform_mismatch_option,
    at_most,
    cache_dir_option,
    debug_option,
    expect_option,
    function_option,
    input_selection_options,
    isolate_options,
    json_option,
    range_option,
    run_isolated,
    runtime_option,
    tolerance_options,
)
from .call_iree import call_deployed, is_deployed


@click.command("call", cls=IsolatableCommand)
@click.argument("artifact", type=click.Path())
@input_selection_options
@function_option
@range_option
@click.option("--cast", is_flag=True,
              help="Convert an input array whose dtype differs from the input's when every value in it is kept "
                   "exactly (always for float16 -> float32, int8 -> int32; int64 ids below 2**31 -> int32); "
                   "otherwise refused, naming the first value that would change. The file is not changed.")
@click.option("--save-inputs", type=click.Path(), metavar="FILE.npz",
              help="Write the inputs actually used (read or generated), keyed by input name; --inputs FILE.npz "
                   "reads them back.")
@click.option("-o", "--output", type=click.Path(),
              help="Write the outputs: .npz or .safetensors keyed by output name (.safetensors keeps bfloat16 and "
                   "float8, which .npz stores as raw bytes), or .npy for a single output.")
@click.option("--output-dtype", type=click.Choice(["f32"]),
              help="Convert floating-point outputs to float32 before writing, printing and comparing them.")
@expect_option("Compare the outputs with reference outputs (.npz or .safetensors keyed by output name, as -o writes "
               "them; .npy for a single output); exit 12 if one differs.")
@tolerance_options("With --expect: ")
@click.option("--print", "print_values", is_flag=True, help=f"Print the values of outputs of at most {PRINT_LIMIT} "
                                                             f"elements.")
@click.option("--benchmark", type=click.IntRange(min=1), callback=at_most(1_000_000), metavar="N",
              help="Time N calls (at most 1000000) after a warm-up call; report load, compile and per-call latency "
                   "(p50, p90, p99, min, max).")
@allow_platform_mismatch_option("run")
@allow_custom_call_option
@cache_dir_option()
@click.option("--no-cache", is_flag=True, help="Do not use the persistent compilation cache.")
@runtime_option("Run with JAX (XLA) or with IREE's CPU backend (needs jaxport[iree]).")
@click.option("--no-verify", is_flag=True,
              help="Skip the sha256 check of bound weights (one pass over their bytes) for a trusted artifact.")
@click.option("--vjp", is_flag=True,
              help="Also run the derivative: write the input cotangents (-o) for the output cotangents of "
                   "--cotangents (default: ones). Needs an artifact exported with --vjp-order 1 or more.")
@click.option("--cotangents", type=click.Path(), metavar="FILE",
              help="With --vjp: the output cotangents, an .npz keyed by output name (or an .npy for a single output).")
@click.option("--batch-size", type=click.IntRange(min=1), metavar="K",
              help="Stream the inputs through the artifact in chunks of K rows of axis 0 (a dimension variable shared "
                   "by every input and output); .npy inputs are read and outputs written chunk by chunk.")
@device_options
@isolate_options
@json_option
@debug_option
def command(artifact, print_values, devices, isolate, memory_limit, time_limit, as_json, debug, **options):
    """Run an artifact on real inputs, checking them first.

    Every input is checked against the artifact's signature (structure, rank, dtype, dimensions, bounds and
    constraints) before anything is compiled, and before JAX is imported when the inputs are files.

    \b
    Examples:
      jaxport call mlp.jaxport --inputs examples/mlp/x.npy -o out.npy
      jaxport call mlp.jaxport --random --dim batch=32 --seed 1 --save-inputs in.npz -o out.npz
      jaxport call mlp.jaxport --inputs in.npz --expect out.npz
    """
    request = _request(artifact, as_json and print_values, options)
    ctx = click.get_current_context()
    if is_deployed(artifact):  # a module jaxport compile built: run with IREE through its run description
        errors.run(lambda: call_deployed(ctx, artifact), debug=debug, as_json=as_json)
    elif isolate:
        errors.run(lambda: run_isolated(ctx, str(artifact), memory_limit, time_limit), debug=debug, as_json=as_json)
    else:
        errors.run(lambda: _call(request, devices, print_values, as_json), debug=debug, as_json=as_json)


#: The options whose parameter is named otherwise in the request, and those that say the opposite of its field.
RENAMED = {"items": "inputs", "use_random": "random", "runtime_name": "runtime"}
NEGATED = {"no_cache": "cache", "no_verify": "verify_weights"}


def _request(artifact, values, options):
    """The request of the parsed options; a combination it refuses is a command-line usage error (exit 2)."""
    from jaxport.run.calling import CallRequest

    fields = {NEGATED[k]: not v for k, v in options.items() if k in NEGATED}
    fields.update((RENAMED.get(k, k), v) for k, v in options.items() if k not in NEGATED)
    try:
        return CallRequest(artifact, values=values, **fields)
    except UsageError as e:
        raise click.UsageError(str(e)) from None


def _call(request, devices, print_values, as_json):
    """Run the request and show its report; outputs that differ from ``--expect`` exit 12 after it is shown."""
    import jaxport
    from jaxport.verify.reference import ReferenceMismatch

    apply(devices)  # before JAX starts
    failure = None
    with Busy(not as_json and render.is_terminal(sys.stderr), request.batch_size) as busy:
        try:
            report = jaxport.call(request, progress=busy.stage, rows=busy.rows)
        except ReferenceMismatch as e:
            if e.report is None:
                raise
            report, failure = e.report, e
    if as_json:
        render.print_json(report.as_dict())
    else:
        show(report, print_values)
    if failure is not None:
        errors.fail_after_result(failure)
