"""``jaxport call``: run an artifact on inputs from files or generated from its signature."""

from __future__ import annotations

import contextlib

import click

from jaxport.artifact import contract

from .. import errors, render
from ..devices import apply, device_options
from ..options import (
    IsolatableCommand,
    allow_custom_call_option,
    at_most,
    debug_option,
    function_option,
    input_selection_options,
    isolate_options,
    json_option,
    run_isolated,
)
from ..render import escape, plain

#: Outputs with at most this many values are printed by --print.
PRINT_LIMIT = 1000


@click.command("call", cls=IsolatableCommand)
@click.argument("artifact", type=click.Path())
@input_selection_options
@function_option
@click.option("-o", "--output", type=click.Path(),
              help="Write the outputs: .npz keyed by output name, or .npy for a single output.")
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
def command(artifact, items, use_random, dims, seed, function, output, print_values, benchmark,
            allow_platform_mismatch, allow_custom_calls, cache_dir, no_cache, runtime_name, no_verify, vjp, cotangents,
            batch_size, devices, isolate, memory_limit, time_limit, as_json, debug):
    """Run an artifact on real inputs, checking them first.

    Every input is checked against the artifact's signature (structure, rank, dtype, dimensions, bounds and
    constraints) before anything is compiled.
    """
    if use_random and items:
        raise click.UsageError("give inputs with --inputs or generate them with --random, not both.")
    if not use_random and (dims or seed is not None):
        raise click.UsageError("--dim and --seed choose what --random generates; add --random.")
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

        con = render.stderr()

        def busy(text):
            return con.status(text, spinner="dots") if not as_json else contextlib.nullcontext()

        directory = None if no_cache else (cache_dir or default_cache_dir())
        with compilation_cache(directory) as cache:
            if cache.problem and not as_json:
                con.print(f"[yellow]warning:[/] {escape(cache.problem)}", soft_wrap=True)
            with busy(f"Loading {escape(str(artifact))}..."):
                loaded = load(artifact, function, allow_platform_mismatch=allow_platform_mismatch,
                              verify=not no_verify, runtime=runtime_name, cache_dir=iree_cache_dir(cache.directory),
                              allow_custom_calls=allow_custom_calls)
            f = loaded.function_manifest
            if batch_size:
                _stream(artifact, loaded, items, use_random, dims, seed, batch_size, output, cache, as_json)
                return
            if output and not vjp:
                outputs.check_output_path(output, loaded.output_names)
            with busy("Generating inputs..." if use_random else "Reading inputs..."):
                if use_random:
                    env = contract.resolve_dims(f, dims)
                    arrays = inputs.random_inputs(f, env, 0 if seed is None else seed)
                    sources = {n: f"random (seed {0 if seed is None else seed})" for n in arrays}
                else:
                    arrays, sources = inputs.gather(f, list(items))
            if vjp:
                with busy(f"Running {escape(loaded.function)} and its derivative on {escape(loaded.platform)}..."):
                    _derivative(artifact, loaded, arrays, sources, cotangents, output, cache, as_json)
                return
            with busy(f"Compiling and running {escape(loaded.function)} on {escape(loaded.platform)}..."):
                result = loaded.run(arrays, sources)
            bench = None
            if benchmark:
                with busy(f"Benchmarking {benchmark} calls..."):
                    bench = loaded.benchmark(arrays, benchmark)
        if output:
            outputs.save_outputs(output, result.leaves)
        report = outputs.CallReport.of_run(artifact, loaded, arrays, sources, result, cache, output=output,
                                           benchmark=bench, values_up_to=PRINT_LIMIT if print_values and as_json
                                           else None)
        if as_json:
            render.print_json(report.as_dict())
        else:
            _render(report, result, print_values)

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


def _render(report, result, print_values):
    import numpy as np
    from rich.table import Table

    out = render.stdout()
    dims = ", ".join(f"{k}={v}" for k, v in report.dims.items())
    t = report.timings
    hit = t["compile_cache_hit"]
    cached = " (from the compilation cache)" if hit else " (now cached)" if hit is False else ""
    via = " with IREE" if report.runtime == "iree" else ""
    out.print(f"[bold cyan]{escape(report.function)}[/] on {escape(report.platform)}{via}"
              + (f"  [dim]{escape(dims)}[/]" if dims else "")
              + f"  load {_seconds(t['load_s'])}, lower {_seconds(t['lower_s'])}, "
                f"compile {_seconds(t['compile_s'])}{cached}, run {_seconds(t['run_s'])}")
    _devices(out, report.devices)
    _stats_table(out, "outputs", report.outputs)
    if print_values:
        for s, (name, value) in zip(report.outputs, result.leaves):
            if s["size"] <= PRINT_LIMIT:
                out.print(f"{plain(name)} =", markup=False)
                out.print(np.array2string(np.asarray(value), threshold=PRINT_LIMIT, max_line_width=120),
                          markup=False, highlight=False)
            else:
                out.print(f"{plain(name)}: {s['size']} values, more than --print shows ({PRINT_LIMIT}); write them "
                          f"with -o.", markup=False)
    if report.benchmark:
        b = report.benchmark
        t = Table(title=f"benchmark ({b['n']} calls after {b['warmup']} warm-up)", title_justify="left",
                  show_edge=False)
        for col in ("load", "lower", "compile", "p50", "p90", "min"):
            t.add_column(col, justify="right")
        t.add_row(*(_seconds(b[k]) for k in ("load_s", "lower_s", "compile_s", "p50_s", "p90_s", "min_s")))
        out.print(t)
    if report.output_file:
        out.print(f"[green]Wrote[/] {escape(report.output_file)} ({len(result.leaves)} array"
                  f"{'s' if len(result.leaves) != 1 else ''})")


def _devices(out, placement):
    """Where a sharded function ran (nothing for an unsharded one)."""
    if placement:
        out.print(f"sharded over {placement['devices']} devices ({plain(placement['mesh'])})"
                  + (f", process {placement['process_index']} of {placement['process_count']}"
                     if placement["process_count"] > 1 else ""), markup=False)


# --- --vjp, --batch-size and several processes --------------------------------------------------------------------


def _derivative(artifact, loaded, arrays, sources, cotangents, output, cache, as_json):
    """``call --vjp``: the outputs and the input cotangents, written to -o."""
    import time

    from jaxport.run import gradients, outputs

    f = loaded.function_manifest
    if output:
        outputs.check_output_path(output, [i["name"] for i in f["inputs"] if gradients.differentiable(i["dtype"])])
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


def _stream(artifact, loaded, items, use_random, dims, seed, batch_size, output, cache, as_json):
    """``call --batch-size``: chunks of axis 0 through the artifact, with a progress bar and throughput."""
    from jaxport.run import inputs, outputs, streaming

    f = loaded.function_manifest
    streaming.streamed_axis(f, loaded.function)
    if use_random:
        arrays = inputs.random_inputs(f, contract.resolve_dims(f, dims), 0 if seed is None else seed)
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
    if as_json:
        render.print_json(outputs.CallReport.of_stream(artifact, loaded, arrays, sources, result, cache).as_dict())
        return
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
    from rich.table import Table

    t = Table(title=title, title_justify="left", show_edge=False)
    for col in ("name", "shape", "dtype", "min", "max", "mean", "NaN", "Inf"):
        t.add_column(col, justify="right" if col in ("min", "max", "mean", "NaN", "Inf") else "left")
    for s in stats:
        bad = "red" if s["nan"] or s["inf"] else None
        t.add_row(escape(s["name"]), escape(str(tuple(s["shape"]))), escape(s["dtype"]), _number(s["min"]),
                  _number(s["max"]), _number(s["mean"]), str(s["nan"]), str(s["inf"]), style=bad)
    out.print(t)
