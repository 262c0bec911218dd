"""``jaxport call``: run an artifact on inputs from files or generated from its signature."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import sys

import click

from jaxport import dtypes
from jaxport._fsio import check_output
from jaxport.artifact import contract
from jaxport.errors import UsageError

from .. import errors, render
from .. import expect as expectation
from ..devices import apply, device_options
from ..options import (
    IsolatableCommand,
    allow_custom_call_option,
    at_most,
    debug_option,
    finite_float,
    function_option,
    input_selection_options,
    isolate_options,
    json_option,
    range_option,
    run_isolated,
)
from ..render import escape, plain
from .call_iree import call_deployed, is_deployed

#: Outputs with at most this many values are printed by --print.
PRINT_LIMIT = 1000


@click.command("call", cls=IsolatableCommand)
@click.argument("artifact", type=click.Path())
@input_selection_options
@function_option
@range_option
@click.option("--cast", is_flag=True,
              help="Convert an input array whose dtype differs from the input's when every value is kept (e.g. "
                   "float16 -> float32, int8 -> int32); others are refused. The file is not changed.")
@click.option("--save-inputs", type=click.Path(), metavar="FILE.npz",
              help="Write the inputs actually used (read or generated), keyed by input name; --inputs FILE.npz "
                   "reads them back.")
@click.option("-o", "--output", type=click.Path(),
              help="Write the outputs: .npz or .safetensors keyed by output name (.safetensors keeps bfloat16 and "
                   "float8, which .npz stores as raw bytes), or .npy for a single output.")
@click.option("--output-dtype", type=click.Choice(["f32"]),
              help="Convert floating-point outputs to float32 before writing, printing and comparing them.")
@click.option("--expect", type=click.Path(), metavar="REF",
              help="Compare the outputs with reference outputs (.npz or .safetensors keyed by output name, as -o "
                   "writes them; .npy for a single output); exit 12 if one differs.")
@click.option("--atol", type=click.FloatRange(min=0), callback=finite_float,
              help="With --expect: absolute tolerance (default by output dtype, as verify).")
@click.option("--rtol", type=click.FloatRange(min=0), callback=finite_float,
              help="With --expect: relative tolerance (default by output dtype, as verify).")
@click.option("--allow-nonfinite", is_flag=True,
              help="With --expect: accept an output whose values are NaN/Inf everywhere, in both the output and "
                   "the reference (otherwise inconclusive, a failure).")
@click.option("--print", "print_values", is_flag=True, help=f"Print the values of outputs of at most {PRINT_LIMIT} "
                                                             f"elements.")
@click.option("--benchmark", type=click.IntRange(min=1), callback=at_most(1_000_000), metavar="N",
              help="Time N calls (at most 1000000) after a warm-up call; report load, compile and per-call latency.")
@click.option("--allow-platform-mismatch", is_flag=True,
              help="Try to run a function exported for other platforms than the local one.")
@allow_custom_call_option
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="XLA compilation cache (default: $JAXPORT_CACHE_DIR, else $XDG_CACHE_HOME/jaxport/xla or "
                   "~/.cache/jaxport/xla).")
@click.option("--no-cache", is_flag=True, help="Do not use the persistent compilation cache.")
@click.option("--runtime", "runtime_name", type=click.Choice(["jax", "iree"]), default="jax", show_default=True,
              help="Run with JAX (XLA) or with IREE's CPU backend (needs jaxport[iree]).")
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
def command(artifact, items, use_random, dims, seed, function, ranges, cast, save_inputs, output, output_dtype, expect,
            atol, rtol, allow_nonfinite, print_values, benchmark, allow_platform_mismatch, allow_custom_calls,
            cache_dir, no_cache, runtime_name, no_verify, vjp, cotangents, batch_size, devices, isolate, memory_limit,
            time_limit, as_json, debug):
    """Run an artifact on real inputs, checking them first.

    Every input is checked against the artifact's signature (structure, rank, dtype, dimensions, bounds and
    constraints) before anything is compiled.

    \b
    Examples:
      jaxport call mlp.jaxport --inputs examples/mlp/x.npy -o out.npy
      jaxport call mlp.jaxport --random --dim batch=32 --seed 1 --save-inputs in.npz -o out.npz
      jaxport call mlp.jaxport --inputs in.npz --expect out.npz
    """
    if use_random and items:
        raise click.UsageError("give inputs with --inputs or generate them with --random, not both.")
    if not use_random and (dims or seed is not None or ranges):
        raise click.UsageError("--dim, --seed and --range choose what --random generates; add --random.")
    if not expect and (atol is not None or rtol is not None or allow_nonfinite):
        raise click.UsageError("--atol, --rtol and --allow-nonfinite set how --expect compares; add --expect.")
    if cast and use_random:
        raise click.UsageError("--cast converts input files; --random generates every input with its own dtype.")
    for flag, value in (("--expect", expect), ("--output-dtype", output_dtype)):
        if value and vjp:
            raise click.UsageError(f"{flag} applies to a plain call's outputs; leave out --vjp.")
    for flag, value in (("--expect", expect), ("--output-dtype", output_dtype), ("--cast", cast),
                        ("--save-inputs", save_inputs)):
        if value and batch_size:
            raise click.UsageError(f"{flag} cannot be combined with --batch-size.")
    if save_inputs and not str(save_inputs).lower().endswith(".npz"):
        raise click.UsageError(f"--save-inputs {save_inputs}: inputs are saved as an .npz keyed by input name; give "
                               f"a name ending in .npz.")
    if save_inputs and output and os.path.abspath(save_inputs) == os.path.abspath(output):
        raise click.UsageError("--save-inputs and -o name the same file; give two files.")
    if no_cache and cache_dir:
        raise click.UsageError("--cache-dir and --no-cache contradict each other.")
    if cotangents and not vjp:
        raise click.UsageError("--cotangents gives the output cotangents of --vjp; add --vjp.")
    for flag, value in (("--vjp", vjp), ("--batch-size", batch_size)):
        if value and benchmark:
            raise click.UsageError(f"{flag} and --benchmark cannot be combined.")
        if value and runtime_name == "iree":
            raise click.UsageError(f"{flag} runs with JAX; leave out --runtime iree.")
    if vjp and batch_size:
        raise click.UsageError("--vjp and --batch-size cannot be combined.")
    if is_deployed(artifact):  # a module jaxport compile built: run with IREE through its run description
        ctx = click.get_current_context()
        errors.run(lambda: call_deployed(ctx, artifact), debug=debug, as_json=as_json)
        return
    if isolate:
        ctx = click.get_current_context()
        errors.run(lambda: run_isolated(ctx, str(artifact), memory_limit, time_limit), debug=debug, as_json=as_json)
        return

    def body():
        apply(devices)  # before JAX starts
        from jaxport.run import inputs, outputs
        from jaxport.run.cache import compilation_cache, default_cache_dir
        from jaxport.run.iree import iree_cache_dir
        from jaxport.run.load import load

        def busy(text):
            """A spinner showing ``text()`` (called only where a spinner shows: rich is not imported otherwise)."""
            if as_json or not render.is_terminal(sys.stderr):  # rich shows no spinner there
                return contextlib.nullcontext()
            return render.stderr().status(text(), spinner="dots")

        directory = None if no_cache else (cache_dir or default_cache_dir())
        with compilation_cache(directory) as cache:
            # JAX is imported now: what exists lives as long as the process, so later full collections of the
            # garbage collector need not walk it again (one took 40-50 ms of a first call's lowering).
            gc.freeze()
            if cache.problem and not as_json:
                render.stderr().print(f"[yellow]warning:[/] {escape(cache.problem)}", soft_wrap=True)
            with busy(lambda: f"Loading {escape(str(artifact))}..."):
                loaded = load(artifact, function, allow_platform_mismatch=allow_platform_mismatch,
                              verify=not no_verify, runtime=runtime_name, cache_dir=iree_cache_dir(cache.directory),
                              allow_custom_calls=allow_custom_calls, defer_verify=True)
            f = loaded.function_manifest
            if batch_size:
                keyed = [i["name"] for i in f["inputs"] if dtypes.is_key(i["dtype"])]
                if keyed:
                    raise UsageError(f"--batch-size streams plain arrays, but input {keyed[0]!r} is a PRNG key "
                                            f"array; call without --batch-size.")
                _stream(artifact, loaded, items, use_random, dims, seed, ranges, batch_size, output, cache, as_json)
                return
            written = [o["dtype"] if not output_dtype or dtypes.BY_NAME[o["dtype"]].kind != "float" else "float32"
                       for o in f["outputs"]]
            if output and not vjp:
                outputs.check_output_path(output, loaded.output_names, written, safetensors=True)
            if save_inputs:
                check_output(save_inputs)
            if ranges:
                inputs.check_ranges(f, ranges)
            refs = expectation.read_reference(expect, loaded.output_names, [o["dtype"] for o in f["outputs"]]) \
                if expect else None
            with busy(lambda: "Generating inputs..." if use_random else "Reading inputs..."):
                if use_random:
                    env = contract.resolve_dims(f, dims)
                    arrays = inputs.random_inputs(f, env, 0 if seed is None else seed, ranges=ranges)
                    sources = {n: f"random (seed {0 if seed is None else seed})" for n in arrays}
                else:
                    arrays, sources = inputs.gather(f, list(items))
                    if cast:
                        arrays, sources = inputs.cast_inputs(f, arrays, sources)
            if save_inputs:
                loaded.check(arrays)  # the saved inputs are ones the function accepts
                outputs.save_arrays(save_inputs, arrays)
            if vjp:
                with busy(lambda: f"Running {escape(loaded.function)} and its derivative on "
                                f"{escape(loaded.platform)}..."):
                    _derivative(artifact, loaded, arrays, sources, cotangents, output, cache, as_json)
                return
            with busy(lambda: f"Compiling and running {escape(loaded.function)} on {escape(loaded.platform)}..."):
                result = loaded.run(arrays, sources)
            bench = None
            if benchmark:
                with busy(lambda: f"Benchmarking {benchmark} calls..."):
                    bench = loaded.benchmark(arrays, benchmark)
        if output_dtype:
            result = dataclasses.replace(result, leaves=outputs.cast_outputs(result.leaves, "float32"))
        warnings = []
        if output:
            outputs.save_outputs(output, result.leaves)
            raw = outputs.raw_in_npy(result.leaves)
            if raw and not str(output).lower().endswith(".safetensors"):
                warnings.append(outputs.raw_warning(output, raw))
        checked = expectation.check(expect, result.leaves, [o["dtype"] for o in f["outputs"]], refs, atol=atol,
                                    rtol=rtol, allow_nonfinite=allow_nonfinite) if expect else None
        report = outputs.CallReport.of_run(artifact, loaded, arrays, sources, result, cache, output=output,
                                           benchmark=bench, values_up_to=PRINT_LIMIT if print_values and as_json
                                           else None)
        report.warnings += warnings
        if save_inputs:
            report.sections["saved_inputs"] = {"file": str(save_inputs)}
        if checked:
            report.sections["expect"] = checked.as_dict()
        if as_json:
            render.print_json(report.as_dict())
        else:
            for w in warnings:
                render.stderr().print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
            _render(report, result, print_values)
            if save_inputs:
                render.stdout().print(f"[green]Wrote[/] {escape(str(save_inputs))} ({len(arrays)} input"
                                      f"{'s' if len(arrays) != 1 else ''})")
            if checked:
                expectation.render_table(checked)
        if checked and not checked.passed:
            errors.fail_after_result(checked.error())

    errors.run(body, debug=debug, as_json=as_json)


def _seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} µs"


def _number(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.6g}"


def _timing_line(report):
    """The first line of a call's report, as spans: ``NAME on PLATFORM[ with IREE]  DIMS  load ..., run ...``."""
    dims = ", ".join(f"{k}={v}" for k, v in report.dims.items())
    t = report.timings
    hit = t["compile_cache_hit"]
    cached = " (from the compilation cache)" if hit else " (now cached)" if hit is False else ""
    via = " with IREE" if report.runtime == "iree" else ""
    spans = [(report.function, "bold cyan"), f" on {report.platform}{via}"]
    if dims:
        spans += ["  ", (dims, "dim")]
    spans.append(f"  load {_seconds(t['load_s'])}, lower {_seconds(t['lower_s'])}, compile {_seconds(t['compile_s'])}"
                 f"{cached}, run {_seconds(t['run_s'])}")
    return spans


def _report(report, result, print_values):
    """A call's report as a ``render.Document``: plain text where that is what rich would print (the common case:
    rich is not imported), else drawn by rich (a row in red for NaN or Inf, a table wider than the terminal)."""
    doc = render.Document()
    doc.line(*_timing_line(report))
    if report.devices:
        doc.line(_devices_text(report.devices))
    doc.table(_stats("outputs", report.outputs))
    if print_values:
        import numpy as np

        for s, (name, value) in zip(report.outputs, result.leaves):
            if s["size"] <= PRINT_LIMIT:
                doc.line(f"{name} =")
                doc.line(np.array2string(np.asarray(value), threshold=PRINT_LIMIT, max_line_width=120))
            else:
                doc.line(f"{name}: {s['size']} values, more than --print shows ({PRINT_LIMIT}); write them with -o.")
    if report.benchmark:
        b = report.benchmark
        columns = ("load", "lower", "compile", "p50", "p90", "min")
        table = render.Table(f"benchmark ({b['n']} calls after {b['warmup']} warm-up)", columns, right=columns)
        table.add_row(*(_seconds(b[k]) for k in ("load_s", "lower_s", "compile_s", "p50_s", "p90_s", "min_s")))
        doc.table(table)
    if report.output_file:
        n = len(result.leaves)
        doc.line(("Wrote", "green"), f" {report.output_file} ({n} array{'s' if n != 1 else ''})")
    return doc


def _stats(title, stats):
    """The statistics of arrays (outputs, cotangents) as a table; a row with NaN or Inf is red."""
    right = ("min", "max", "mean", "NaN", "Inf")
    table = render.Table(title, ("name", "shape", "dtype", *right), right=right)
    for s in stats:
        table.add_row(s["name"], str(tuple(s["shape"])), s["dtype"], _number(s["min"]), _number(s["max"]),
                      _number(s["mean"]), str(s["nan"]), str(s["inf"]), style="red" if s["nan"] or s["inf"] else "")
    return table


def _render(report, result, print_values):
    _report(report, result, print_values).print()


def _devices_text(placement):
    return (f"sharded over {placement['devices']} devices ({plain(placement['mesh'])})"
            + (f", process {placement['process_index']} of {placement['process_count']}"
               if placement["process_count"] > 1 else ""))


def _devices(out, placement):
    """Where a sharded function ran (nothing for an unsharded one)."""
    if placement:
        out.print(_devices_text(placement), markup=False)


# --- --vjp, --batch-size and several processes --------------------------------------------------------------------


def _derivative(artifact, loaded, arrays, sources, cotangents, output, cache, as_json):
    """``call --vjp``: the outputs and the input cotangents, written to -o."""
    import time

    from jaxport.run import gradients, outputs

    f = loaded.function_manifest
    if output:
        outputs.check_output_path(output, [i["name"] for i in f["inputs"] if gradients.differentiable(i["dtype"])],
                                  [i["dtype"] for i in f["inputs"] if gradients.differentiable(i["dtype"])],
                                  safetensors=True)
    cts = gradients.read_cotangents(f, cotangents) if cotangents else None
    start = time.perf_counter()
    res = gradients.vjp(loaded, arrays, cts)
    seconds = time.perf_counter() - start
    if output:
        outputs.save_outputs(output, res.cotangents)
    report = outputs.CallReport.of_vjp(artifact, loaded, arrays, sources, res, seconds, cache, output=output,
                                       cotangents=cotangents)
    if as_json:
        render.print_json(report.as_dict())
        return
    out = render.stdout()
    out.print(f"[bold cyan]{escape(loaded.function)}[/] on {escape(loaded.platform)} with its derivative "
              f"(output cotangents: {escape(str(cotangents)) if cotangents else 'ones'}), "
              f"{_seconds(seconds)}")
    _stats_table(out, "outputs", report.outputs)
    _stats_table(out, "input cotangents", report.sections["vjp"]["cotangents"])
    if res.skipped:
        out.print(f"no cotangent for {plain(', '.join(res.skipped))} (not floating point)", markup=False)
    if output:
        out.print(f"[green]Wrote[/] {escape(str(output))} ({len(res.cotangents)} cotangent"
                  f"{'s' if len(res.cotangents) != 1 else ''})")


def _stream(artifact, loaded, items, use_random, dims, seed, ranges, batch_size, output, cache, as_json):
    """``call --batch-size``: chunks of axis 0 through the artifact, with a progress bar and throughput."""
    from jaxport.run import inputs, outputs, streaming

    f = loaded.function_manifest
    streaming.streamed_axis(f, loaded.function)
    if use_random:
        env = contract.resolve_dims(f, dims)
        arrays = inputs.random_inputs(f, env, 0 if seed is None else seed, ranges=ranges)
        sources = {n: f"random (seed {0 if seed is None else seed})" for n in arrays}
    else:
        arrays, sources = streaming.open_inputs(f, list(items))
    target = output or None
    if as_json:
        result = streaming.call(loaded, arrays, batch_size, target)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("rows, {task.fields[rate]}"), TimeRemainingColumn()]
        with Progress(*columns, console=render.stderr(), transient=True) as bar:
            task = bar.add_task(f"{escape(loaded.function)} in chunks of {batch_size}", total=None, rate="-")
            import time

            start = time.perf_counter()

            def progress(done, total):
                elapsed = time.perf_counter() - start
                bar.update(task, completed=done, total=total,
                           rate=f"{done / elapsed:,.0f} rows/s" if elapsed > 0 else "-")

            result = streaming.call(loaded, arrays, batch_size, target, progress=progress)
    raw = [(o["name"], o["dtype"]) for o in f["outputs"] if o["dtype"] in outputs.NOT_IN_NPY]
    warnings = [outputs.raw_warning(output, raw, streamed=True)] if output and raw else []
    if as_json:
        report = outputs.CallReport.of_stream(artifact, loaded, arrays, sources, result, cache)
        report.warnings += warnings
        render.print_json(report.as_dict())
        return
    for w in warnings:
        render.stderr().print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
    out = render.stdout()
    out.print(f"[bold cyan]{escape(loaded.function)}[/] on {escape(loaded.platform)}: {result.rows} rows in "
              f"{result.chunks} chunk{'s' if result.chunks != 1 else ''} of {batch_size} "
              f"({result.compilations} compilation{'s' if result.compilations != 1 else ''}), "
              f"{_seconds(result.seconds)}, {result.rows_per_second:,.0f} rows/s")
    _stats_table(out, "outputs", result.stats)
    if result.output_file:
        out.print(f"[green]Wrote[/] {escape(result.output_file)} ({len(result.stats)} array"
                  f"{'s' if len(result.stats) != 1 else ''})")


def _stats_table(out, title, stats):
    doc = render.Document()
    doc.table(_stats(title, stats))
    doc.render_rich(console=out)
