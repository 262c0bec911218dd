"""``jaxport call``: run an artifact on inputs from files or generated from its signature."""

from __future__ import annotations

import contextlib

import click

from .. import errors, render
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
@isolate_options
@json_option
@debug_option
def command(artifact, items, use_random, dims, seed, function, output, print_values, benchmark,
            allow_platform_mismatch, cache_dir, no_cache, runtime_name, no_verify, isolate, memory_limit, time_limit,
            as_json, debug):
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
    if isolate:
        ctx = click.get_current_context()
        errors.run(lambda: run_isolated(ctx, str(artifact), memory_limit, time_limit), debug=debug, as_json=as_json)
        return

    def body():
        from jaxport import inputs, runtime

        con = render.stderr()

        def busy(text):
            return con.status(text, spinner="dots") if not as_json else contextlib.nullcontext()

        directory = None if no_cache else (cache_dir or runtime.default_cache_dir())
        with runtime.compilation_cache(directory) as cache:
            if cache.problem and not as_json:
                con.print(f"[yellow]warning:[/] {escape(cache.problem)}", soft_wrap=True)
            with busy(f"Loading {artifact}..."):
                from jaxport.iree_runtime import iree_cache_dir

                loaded = runtime.load(artifact, function, allow_platform_mismatch=allow_platform_mismatch,
                                      verify=not no_verify, runtime=runtime_name,
                                      cache_dir=iree_cache_dir(cache.directory))
            f = loaded.function_manifest
            if output:
                runtime.check_output_path(output, loaded.output_names)
            with busy("Generating inputs..." if use_random else "Reading inputs..."):
                if use_random:
                    env = inputs.resolve_dims(f, dims)
                    arrays = inputs.random_inputs(f, env, 0 if seed is None else seed)
                    sources = {n: f"random (seed {0 if seed is None else seed})" for n in arrays}
                else:
                    arrays, sources = inputs.gather(f, list(items))
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
    from jaxport import runtime

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
