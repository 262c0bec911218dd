"""``jaxport call MODEL.run.json`` (or ``MODEL.vmfb``): run a module that ``jaxport compile`` built, through
``jaxport.run.iree_loader`` (the smallest bucket that fits, padding where the program allows it), after the
artifact's input checks, which the run description carries. No JAX is imported."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import click

from .. import render
from ..render import escape, plain

#: What ``call`` takes for a compiled module rather than an artifact.
SUFFIXES = (".run.json", ".vmfb")

#: ``call``'s parameters that apply to a compiled module; any other option given is refused.
_SUPPORTED = {"artifact", "items", "use_random", "dims", "seed", "ranges", "output", "print_values", "benchmark",
              "as_json", "debug", "runtime_name"}


def is_deployed(path: str | Path) -> bool:
    """Whether ``call``'s ARTIFACT is a compiled module (its run description, or the module beside one)."""
    return str(path).lower().endswith(SUFFIXES)


def call_deployed(ctx: click.Context, path: str | Path) -> None:
    """``call``'s body for a compiled module; reads its options from ``ctx``."""
    from jaxport.artifact import contract
    from jaxport.errors import FormatError, InputError, PlatformError, UsageError
    from jaxport.run import inputs, outputs
    from jaxport.run import iree_loader as loader
    from jaxport.run.deploy import output_paths, signature_function

    p = SimpleNamespace(**ctx.params)  # the parsed options, as attributes
    defaults = (click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP, None)
    for param in ctx.command.params:
        if param.name not in _SUPPORTED and ctx.get_parameter_source(param.name) not in defaults:
            flag = max(param.opts, key=len) if param.opts else param.name
            raise UsageError(f"{flag} applies to artifacts; {path} is a module jaxport compile built.")
    if p.runtime_name == "jax" and ctx.get_parameter_source("runtime_name") != click.core.ParameterSource.DEFAULT:
        raise UsageError(f"{path} is an IREE module; it runs with --runtime iree (leave out --runtime jax).")
    run_json = output_paths(path)[1] if str(path).lower().endswith(".vmfb") else Path(path)
    start = time.perf_counter()
    try:
        module = loader.load(run_json)
    except loader.DescriptionError as e:
        raise FormatError(str(e)) from None
    fn = signature_function(module.parsed)
    if p.output:
        outputs.check_output_path(p.output, module.output_names, [o.dtype for o in fn.outputs], safetensors=True)
    if p.ranges:
        inputs.check_ranges(fn, p.ranges)
    if p.use_random:
        seed = 0 if p.seed is None else p.seed
        arrays = inputs.random_inputs(fn, contract.resolve_dims(fn, p.dims), seed, ranges=p.ranges)
        sources = {n: f"random (seed {seed})" for n in arrays}
    else:
        arrays, sources = inputs.gather(fn, list(p.items))
    dims = contract.check(fn, [contract.ArrayInfo(n, tuple(arrays[n].shape), str(arrays[n].dtype), sources.get(n))
                               for n in fn.input_names])
    try:
        choice = module.choose({n: a.shape for n, a in arrays.items()})
        module.start()
        load_s = time.perf_counter() - start
        start = time.perf_counter()
        result = module.run(arrays)
        run_s = time.perf_counter() - start
        bench = _benchmark(module, arrays, p.benchmark, load_s) if p.benchmark else None
    except loader.CallError as e:
        raise InputError(f"{run_json}: {e}") from None
    except loader.DescriptionError as e:
        raise FormatError(str(e)) from None
    except loader.DeployError as e:
        raise PlatformError(str(e)) from None
    leaves = [(n, result[n]) for n in module.output_names]
    if p.output:
        outputs.save_outputs(p.output, leaves)
    stats = [outputs.Stats.of(n, v) for n, v in leaves]
    if p.as_json:
        entries = [{**s.to_json(), **({"values": outputs.jsonable(v) if s.size <= 1000 else None}
                                      if p.print_values else {})} for s, (_, v) in zip(stats, leaves)]
        render.print_json({
            "artifact": str(path), "function": choice.function, "platform": "cpu", "runtime": "iree", "dims": dims,
            "inputs": [{"name": n, "shape": list(arrays[n].shape), "dtype": str(arrays[n].dtype),
                        "source": sources.get(n)} for n in module.input_names],
            "outputs": entries, "output_file": str(p.output) if p.output else None,
            "timings": outputs.Timings(load_s, 0.0, 0.0, None, run_s).to_json(),
            "compilation_cache": None, "warnings": [], "benchmark": bench.to_json() if bench else None})
        return
    out = render.stdout()
    padded = "; ".join(f"{v} padded from {choice.sizes[v]} to {choice.dims[v]}" for v in choice.padded)
    shown = ", ".join(f"{k}={v}" for k, v in dims.items())
    out.print(f"[bold cyan]{escape(choice.function)}[/] of {escape(Path(module.module_path).name)} with IREE"
              + (f"  [dim]{escape(shown)}[/]" if shown else "")
              + (f"  ({escape(padded)})" if padded else "") + f"  load {load_s * 1e3:.2f} ms, run {run_s * 1e3:.2f} ms")
    for s, (name, value) in zip(stats, leaves):
        shown_stats = f"min {_number(s.min)}  max {_number(s.max)}  mean {_number(s.mean)}"
        out.print(f"  {plain(name)} {tuple(s.shape)} {s.dtype}  {shown_stats}  NaN {s.nan}  Inf {s.inf}",
                  markup=False, highlight=False)
        if p.print_values and s.size <= 1000:
            import numpy as np

            out.print(np.array2string(np.asarray(value), threshold=1000, max_line_width=120), markup=False,
                      highlight=False)
    if bench:
        shown_times = ", ".join(f"{k} {t * 1e3:.3f} ms" for k, t in (("p50", bench.p50_s), ("p90", bench.p90_s),
                                                                     ("p99", bench.p99_s), ("min", bench.min_s),
                                                                     ("max", bench.max_s)))
        out.print(f"  benchmark ({bench.n} call{'s' if bench.n != 1 else ''}): {shown_times}", markup=False)
    if p.output:
        out.print(f"[green]Wrote[/] {escape(str(p.output))} ({len(leaves)} array{'s' if len(leaves) != 1 else ''})")


def _number(v) -> str:
    return "-" if v is None else str(v) if isinstance(v, int) else f"{v:.6g}"


def _benchmark(module, arrays, n: int, load_s: float):
    """The latencies of ``n`` calls after one untimed call, summed up as ``call`` with JAX sums them up."""
    from jaxport.run.backend import Compilation
    from jaxport.run.loaded import Benchmark
    from jaxport.run.outputs import Latencies

    module.run(arrays)  # warm-up
    bench = Benchmark(load_s, Compilation(0.0, 0.0, None), 1)
    for _ in range(n):
        start = time.perf_counter()
        module.run(arrays)
        bench.calls.append(time.perf_counter() - start)
    return Latencies.of(bench)
