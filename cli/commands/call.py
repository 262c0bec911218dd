"""``jaxport call``: run an artifact on inputs from files or generated from its signature."""

from __future__ import annotations

import contextlib

import click

from jaxport.artifact import contract

from .. import errors, render
from ..devices import apply, device_options
from ..options import (
    IsolatableCommand,
    debug_option,
    function_option,
    input_selection_options,
    isolate_options,
    json_option,
    run_isolated,
)
from ..render import escape

#: Outputs with at most this many values are printed by --print.
PRINT_LIMIT = 1000


@click.command("call", cls=IsolatableCommand)
@click.argument("artifact", type=click.Path(dir_okay=False))
@input_selection_options
@function_option
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the outputs: .npz keyed by output name, or .npy for a single output.")
@click.option("--print", "print_values", is_flag=True, help=f"Print the values of outputs of at most {PRINT_LIMIT} "
                                                             f"elements.")
@click.option("--benchmark", type=click.IntRange(min=1), metavar="N",
              help="Time N calls after a warm-up call; report load, compile and per-call latency.")
@click.option("--allow-platform-mismatch", is_flag=True,
              help="Try to run a function exported for other platforms than the local one.")
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
@click.option("--cotangents", type=click.Path(dir_okay=False), metavar="FILE",
              help="With --vjp: the output cotangents, an .npz keyed by output name (or an .npy for a single output).")
@click.option("--batch-size", type=click.IntRange(min=1), metavar="K",
              help="Stream the inputs through the artifact in chunks of K rows of axis 0 (a dimension variable shared "
                   "by every input and output); .npy inputs are read and outputs written chunk by chunk.")
@device_options
@isolate_options
@json_option
@debug_option
def command(artifact, items, use_random, dims, seed, function, output, print_values, benchmark,
            allow_platform_mismatch, cache_dir, no_cache, runtime_name, no_verify, vjp, cotangents, batch_size,
            devices, isolate, memory_limit, time_limit, as_json, debug):
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
        from jaxport.run import inputs
        from jaxport.run import loaded as runtime

        con = render.stderr()

        def busy(text):
            return con.status(text, spinner="dots") if not as_json else contextlib.nullcontext()

        directory = None if no_cache else (cache_dir or runtime.default_cache_dir())
        with runtime.compilation_cache(directory) as cache:
            if cache.problem and not as_json:
                con.print(f"[yellow]warning:[/] {escape(cache.problem)}", soft_wrap=True)
            with busy(f"Loading {artifact}..."):
                from jaxport.run.iree import iree_cache_dir

                loaded = runtime.load(artifact, function, allow_platform_mismatch=allow_platform_mismatch,
                                      verify=not no_verify, runtime=runtime_name,
                                      cache_dir=iree_cache_dir(cache.directory))
            f = loaded.function_manifest
            if batch_size:
                _stream(artifact, loaded, items, use_random, dims, seed, batch_size, output, cache, as_json)
                return
            if output and not vjp:
                runtime.check_output_path(output, loaded.output_names)
            with busy("Generating inputs..." if use_random else "Reading inputs..."):
                if use_random:
                    env = contract.resolve_dims(f, dims)
                    arrays = inputs.random_inputs(f, env, 0 if seed is None else seed)
                    sources = {n: f"random (seed {0 if seed is None else seed})" for n in arrays}
                else:
                    arrays, sources = inputs.gather(f, list(items))
            if vjp:
                with busy(f"Running {loaded.function} and its derivative on {loaded.platform}..."):
                    _derivative(artifact, loaded, arrays, sources, cotangents, output, cache, as_json)
                return
            with busy(f"Compiling and running {loaded.function} on {loaded.platform}..."):
                result = loaded.run(arrays, sources)
            bench = None
            if benchmark:
                with busy(f"Benchmarking {benchmark} calls..."):
                    bench = loaded.benchmark(arrays, benchmark)
        if output:
            runtime.save_outputs(output, result.leaves)
        stats = [runtime.stats(name, value) for name, value in result.leaves]
        if as_json:
            _print_json(artifact, loaded, arrays, sources, result, stats, bench, output, print_values, cache)
        else:
            _render(loaded, result, stats, bench, output, print_values)

    errors.run(body, debug=debug, as_json=as_json)


def _print_json(artifact, loaded, arrays, sources, result, stats, bench, output, print_values, cache):
    from jaxport.run import loaded as runtime

    outs = []
    for s, (_, value) in zip(stats, result.leaves):
        entry = dict(s)
        if print_values:
            entry["values"] = runtime.jsonable(value) if s["size"] <= PRINT_LIMIT else None
        outs.append(entry)
    render.print_json({
        "artifact": str(artifact),
        "function": loaded.function,
        "platform": loaded.platform,
        "runtime": loaded.runtime,
        "dims": result.dims,
        "inputs": [{"name": n, "shape": list(a.shape), "dtype": str(a.dtype), "source": sources.get(n)}
                   for n, a in arrays.items()],
        "outputs": outs,
        "output_file": str(output) if output else None,
        "timings": {"load_s": loaded.load_seconds, "lower_s": result.compilation.lower_seconds,
                    "compile_s": result.compilation.seconds,
                    "compile_cache_hit": result.compilation.cache_hit, "run_s": result.run_seconds},
        "compilation_cache": str(cache.directory) if cache.directory else None,
        "warnings": [cache.problem] if cache.problem else [],
        "benchmark": bench.as_dict() if bench else None,
        "devices": _placement(loaded),
    })


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


def _render(loaded, result, stats, bench, output, print_values):
    import numpy as np
    from rich.table import Table

    out = render.stdout()
    dims = ", ".join(f"{k}={v}" for k, v in result.dims.items())
    hit = result.compilation.cache_hit
    cached = " (from the compilation cache)" if hit else " (now cached)" if hit is False else ""
    via = " with IREE" if loaded.runtime == "iree" else ""
    out.print(f"[bold cyan]{escape(loaded.function)}[/] on {escape(loaded.platform)}{via}"
              + (f"  [dim]{escape(dims)}[/]" if dims else "")
              + f"  load {_seconds(loaded.load_seconds)}, lower {_seconds(result.compilation.lower_seconds)}, "
                f"compile {_seconds(result.compilation.seconds)}{cached}, run {_seconds(result.run_seconds)}")
    placement = _placement(loaded)
    if placement:
        out.print(f"sharded over {placement['devices']} devices ({placement['mesh']})"
                  + (f", process {placement['process_index']} of {placement['process_count']}"
                     if placement["process_count"] > 1 else ""), markup=False)
    t = Table(title="outputs", title_justify="left", show_edge=False)
    for col in ("name", "shape", "dtype", "min", "max", "mean", "NaN", "Inf"):
        t.add_column(col, justify="right" if col in ("min", "max", "mean", "NaN", "Inf") else "left")
    for s in stats:
        bad = "red" if s["nan"] or s["inf"] else None
        t.add_row(escape(s["name"]), escape(str(tuple(s["shape"]))), escape(s["dtype"]), _number(s["min"]),
                  _number(s["max"]), _number(s["mean"]), str(s["nan"]), str(s["inf"]), style=bad)
    out.print(t)
    if print_values:
        for s, (name, value) in zip(stats, result.leaves):
            if s["size"] <= PRINT_LIMIT:
                out.print(f"{name} =", markup=False)
                out.print(np.array2string(np.asarray(value), threshold=PRINT_LIMIT, max_line_width=120),
                          markup=False, highlight=False)
            else:
                out.print(f"{name}: {s['size']} values, more than --print shows ({PRINT_LIMIT}); write them with -o.",
                          markup=False)
    if bench:
        b = bench.as_dict()
        t = Table(title=f"benchmark ({b['n']} calls after {b['warmup']} warm-up)", title_justify="left",
                  show_edge=False)
        for col in ("load", "lower", "compile", "p50", "p90", "min"):
            t.add_column(col, justify="right")
        t.add_row(*(_seconds(b[k]) for k in ("load_s", "lower_s", "compile_s", "p50_s", "p90_s", "min_s")))
        out.print(t)
    if output:
        out.print(f"[green]Wrote[/] {escape(str(output))} ({len(result.leaves)} array"
                  f"{'s' if len(result.leaves) != 1 else ''})")


# --- --vjp, --batch-size and several processes --------------------------------------------------------------------


def _placement(loaded) -> dict | None:
    """Where a sharded function ran: devices, mesh, processes (None for an unsharded one)."""
    if loaded.mesh is None:
        return None
    import jax

    from jaxport.sharding import mesh_text

    mesh = loaded.function_manifest.get("mesh")
    return {"devices": int(loaded.mesh.size), "mesh": mesh_text(mesh), "process_index": jax.process_index(),
            "process_count": jax.process_count()}


def _derivative(artifact, loaded, arrays, sources, cotangents, output, cache, as_json):
    """``call --vjp``: the outputs and the input cotangents, written to -o."""
    import time

    from jaxport.run import gradients, inputs
    from jaxport.run import loaded as runtime

    f = loaded.function_manifest
    wanted = [i["name"] for i in f["inputs"] if gradients.differentiable(i["dtype"])]
    if output:
        runtime.check_output_path(output, wanted)
    cts = None
    if cotangents:
        declared = {o["name"]: o["dtype"] for o in f["outputs"]}
        if str(cotangents).lower().endswith(".npz"):
            cts = inputs.read_npz(cotangents, declared)
        elif len(declared) == 1:
            (name, dtype), = declared.items()
            cts = {name: inputs.read_npy(cotangents, dtype, name)}
        else:
            from jaxport.errors import InputError

            raise InputError(f"{cotangents}: the function has {len(declared)} outputs ({', '.join(declared)}); give "
                             f"their cotangents in one .npz keyed by output name.")
    start = time.perf_counter()
    res = gradients.vjp(loaded, arrays, cts)
    seconds = time.perf_counter() - start
    if output:
        runtime.save_outputs(output, res.cotangents)
    out_stats = [runtime.stats(n, v) for n, v in res.outputs]
    ct_stats = [runtime.stats(n, v) for n, v in res.cotangents]
    if as_json:
        render.print_json({
            "artifact": str(artifact), "function": loaded.function, "platform": loaded.platform,
            "runtime": loaded.runtime, "dims": loaded.check(arrays),
            "inputs": [{"name": n, "shape": list(a.shape), "dtype": str(a.dtype), "source": sources.get(n)}
                       for n, a in arrays.items()],
            "outputs": out_stats, "output_file": str(output) if output else None,
            "timings": {"load_s": loaded.load_seconds, "lower_s": 0.0, "compile_s": 0.0, "compile_cache_hit": None,
                        "run_s": seconds},
            "compilation_cache": str(cache.directory) if cache.directory else None,
            "warnings": [cache.problem] if cache.problem else [], "benchmark": None,
            "vjp": {"cotangents": ct_stats, "not_differentiable": res.skipped,
                    "cotangents_of_outputs": str(cotangents) if cotangents else "ones"},
            "devices": _placement(loaded),
        })
        return
    out = render.stdout()
    out.print(f"[bold cyan]{escape(loaded.function)}[/] on {escape(loaded.platform)} with its derivative "
              f"(output cotangents: {escape(str(cotangents)) if cotangents else 'ones'}), "
              f"{_seconds(seconds)}")
    _stats_table(out, "outputs", out_stats)
    _stats_table(out, "input cotangents", ct_stats)
    if res.skipped:
        out.print(f"no cotangent for {', '.join(res.skipped)} (not floating point)", markup=False)
    if output:
        out.print(f"[green]Wrote[/] {escape(str(output))} ({len(res.cotangents)} cotangent"
                  f"{'s' if len(res.cotangents) != 1 else ''})")


def _stream(artifact, loaded, items, use_random, dims, seed, batch_size, output, cache, as_json):
    """``call --batch-size``: chunks of axis 0 through the artifact, with a progress bar and throughput."""
    from jaxport.run import inputs, streaming

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
            task = bar.add_task(f"{loaded.function} in chunks of {batch_size}", total=None, rate="-")
            import time

            start = time.perf_counter()

            def progress(done, total):
                elapsed = time.perf_counter() - start
                bar.update(task, completed=done, total=total,
                           rate=f"{done / elapsed:,.0f} rows/s" if elapsed > 0 else "-")

            result = streaming.call(loaded, arrays, batch_size, target, progress=progress)
    if as_json:
        render.print_json({
            "artifact": str(artifact), "function": loaded.function, "platform": loaded.platform,
            "runtime": loaded.runtime, "dims": result.dims,
            "inputs": [{"name": n, "shape": [int(d) for d in a.shape], "dtype": str(a.dtype),
                        "source": sources.get(n)} for n, a in arrays.items()],
            "outputs": result.stats, "output_file": result.output_file,
            "timings": {"load_s": loaded.load_seconds, "lower_s": 0.0, "compile_s": 0.0, "compile_cache_hit": None,
                        "run_s": result.seconds},
            "compilation_cache": str(cache.directory) if cache.directory else None,
            "warnings": [cache.problem] if cache.problem else [], "benchmark": None,
            "streaming": result.as_dict(),
            "devices": _placement(loaded),
        })
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
