"""``jaxport call``: run an artifact, or a module ``jaxport compile`` built, on inputs from files or generated from
its signature.

The command parses its options into a ``jaxport.run.calls.calling.CallRequest`` (which refuses combinations that do not
fit; how to load the function comes whole from the option group ``load_options``), runs it with ``jaxport.call``
and shows the report (``call_view``)."""

from __future__ import annotations

import sys

import click

from jaxport.errors import UsageError

from .. import errors, render
from ..bounds import MAX_NUMBER
from ..call_view import PRINT_LIMIT, Busy, show
from ..devices import apply, device_options
from ..files import OutputPath
from ..options import (
    IsolatableCommand,
    debug_option,
    expect_option,
    input_selection_options,
    isolate_options,
    json_option,
    load_options,
    range_option,
    run_isolated,
    tolerance_options,
)


@click.command("call", cls=IsolatableCommand)
@click.argument("artifact", type=click.Path())
@input_selection_options
@range_option
@click.option("--cast", is_flag=True,
              help="Convert an input array whose dtype differs from the input's when every value in it is kept "
                   "exactly (always for float16 -> float32, int8 -> int32; int64 ids below 2**31 -> int32); "
                   "otherwise refused, naming the first value that would change. The file is not changed.")
@click.option("--save-inputs", type=OutputPath(), metavar="FILE.npz",
              help="Write the inputs actually used (read or generated), keyed by input name; --inputs FILE.npz "
                   "reads them back.")
@click.option("-o", "--output", type=OutputPath(),
              help="Write the outputs: .npz or .safetensors keyed by output name (.safetensors keeps bfloat16 and "
                   "float8, which .npz stores as raw bytes), or .npy for a single output.")
@click.option("--output-dtype", type=click.Choice(["f32"]),
              help="Convert floating-point outputs to float32 before writing, printing and comparing them.")
@expect_option("Compare the outputs with reference outputs (.npz or .safetensors keyed by output name, as -o writes "
               "them; .npy for a single output); exit 12 if one differs.")
@tolerance_options("With --expect: ")
@click.option("--print", "print_values", is_flag=True, help=f"Print the values of outputs of at most {PRINT_LIMIT} "
                                                             f"elements.")
@click.option("--benchmark", type=click.IntRange(1, 1_000_000), metavar="N",
              help="Time N calls (at most 1000000) after a warm-up call; report load, compile and per-call latency "
                   "(p50, p90, p99, min, max: each call waited for, inputs already on the device), and per call "
                   "with N calls pipelined.")
@click.option("--host-latency", is_flag=True,
              help="With --benchmark: also time N calls from the inputs in host memory to the outputs copied back "
                   "to it (p50, p99): what a serving client sees.")
@load_options()
@click.option("--vjp", is_flag=True,
              help="Also run the derivative: write the input cotangents (-o) for the output cotangents of "
                   "--cotangents (default: ones). Needs an artifact exported with --vjp-order 1 or more.")
@click.option("--cotangents", type=click.Path(), metavar="FILE",
              help="With --vjp: the output cotangents, an .npz keyed by output name (or an .npy for a single output).")
@click.option("--batch-size", type=click.IntRange(1, MAX_NUMBER), metavar="K",
              help="Stream the inputs through the artifact in chunks of K rows of axis 0 (a dimension variable shared "
                   "by every input and output); .npy inputs are read and outputs written chunk by chunk.")
@device_options
@isolate_options
@json_option
@debug_option
def command(artifact, print_values, devices, isolate, memory_limit, time_limit, as_json, debug, **options):
    """Run an artifact on real inputs, checking them first.

    Every input is checked against the artifact's signature (structure, rank, dtype, dimensions, bounds and
    constraints) before anything is compiled, and before JAX is imported when the inputs are files. A module that
    jaxport compile built (MODEL.run.json, or MODEL.vmfb beside it) runs with IREE, without JAX.

    \b
    Examples:
      jaxport call mlp.jaxport --inputs examples/mlp/x.npy -o out.npy
      jaxport call mlp.jaxport --random --dim batch=32 --seed 1 --save-inputs in.npz -o out.npz
      jaxport call mlp.jaxport --inputs in.npz --expect out.npz
    """
    request = _request(artifact, as_json and print_values, options)
    ctx = click.get_current_context()
    if isolate and not request.compiled:
        errors.run(lambda: run_isolated(ctx, str(artifact), memory_limit, time_limit), debug=debug, as_json=as_json)
    else:
        errors.run(lambda: _call(ctx, request, devices, print_values, as_json), debug=debug, as_json=as_json)


#: The options whose parameter is named otherwise in the request.
RENAMED = {"items": "inputs", "use_random": "random"}
#: The parameters of the options that run an artifact's program in a way a compiled module does not take (the
#: request refuses the others: ``CallRequest.module_problem``).
ARTIFACT_ONLY = ("host_devices", "coordinator", "num_processes", "process_id", "isolate", "memory_limit", "time_limit")


def _request(artifact, values, options):
    """The request of the parsed options (``load``, a ``LoadOptions``, among them); a combination it refuses is a
    command-line usage error (exit 2)."""
    from jaxport.run.calls.calling import CallRequest

    with errors.usage_errors():
        return CallRequest(artifact, values=values, **{RENAMED.get(k, k): v for k, v in options.items()})


def _given(ctx, name):
    """Whether the option of parameter ``name`` was given on the command line (or by the environment)."""
    return ctx.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT,
                                                  click.core.ParameterSource.DEFAULT_MAP, None)


def _refuse_for_module(ctx, request):
    """What a compiled module does not take (exit 2): the request's own refusals, then an explicit --runtime jax."""
    given = [max(p.opts, key=len) for p in ctx.command.params if p.name in ARTIFACT_ONLY and _given(ctx, p.name)]
    problem = request.module_problem(given)
    if problem:
        raise UsageError(problem)
    if request.load.runtime == "jax" and _given(ctx, "runtime_name"):
        raise UsageError(f"{request.artifact} is an IREE module; it runs with --runtime iree (leave out --runtime "
                         f"jax).")


def _call(ctx, request, devices, print_values, as_json):
    """Run the request and show its report; outputs that differ from ``--expect`` exit 12 after it is shown."""
    import jaxport

    if request.compiled:
        _refuse_for_module(ctx, request)
    else:
        apply(devices)  # before JAX starts
    failure = None
    with Busy(not as_json and render.is_terminal(sys.stderr), request.batch_size) as busy:
        try:
            report = jaxport.call(request, progress=busy.stage, rows=busy.rows)
        except jaxport.ReferenceMismatch as e:
            if e.report is None:
                raise
            report, failure = e.report, e
    if as_json:
        render.print_json(report.as_dict())
    else:
        show(report, print_values)
    if failure is not None:
        errors.fail_after_result(failure)
