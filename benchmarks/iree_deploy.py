"""Deploying with IREE: compile time, steady per-call time and module size of `jaxport compile` against XLA on CPU.

    python benchmarks/iree_deploy.py [--quick | --repeats N]

For two models with bound weights, the demo MLP (examples/mlp, spec-bound.yaml) and a 12-layer pre-norm
transformer encoder with small dimensions (d=64, 4 heads, d_ff=256, polymorphic batch and sequence length; its
source is below), in one process:

- compile time: the artifact to something ready to call, for one shape. IREE:
  `jaxport.run.compile.deploy.compile_artifact` with `--dim` and `--cpu host`, as XLA compiles for this CPU (load,
  specialize, the padding analysis, IREE's compilation, writing the .vmfb/.irpa/.run.json); XLA: `jaxport.load` and
  the first call's lowering and XLA compilation (no persistent cache). Each `--repeats` times, alternating;
  medians; and the compilers alone. Also the IREE module with four buckets (`--dims`), once.
- steady per-call time: the module run by `jaxport.run.compile.iree_loader` (numpy in, numpy out) against the
  artifact run by `jaxport.load` on XLA (numpy in, `np.asarray` out), alternating call by call after a warm-up;
  medians, and the ratio IREE / XLA (below 1: IREE is faster). Also the module compiled with `--cpu generic`
  (compile's default, portable to any CPU of the architecture), timed against XLA again.
- size: the artifact's bytes against the .vmfb's (the program without weights) and the .irpa's (the weights).

Both runtimes must give the same numbers (checked with the two-compiler tolerance) or the script fails. Timings
never fail it.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

TRANSFORMER = '''
import jax
import jax.numpy as jnp
import numpy as np

D, HEADS, FF, LAYERS = 64, 4, 256, 12


def init_params(seed=0):
    rng = np.random.default_rng(seed)

    def dense(n_in, n_out):
        return (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)

    def norm():
        return {"scale": np.ones(D, np.float32), "bias": np.zeros(D, np.float32)}

    return {"layers": [{"ln1": norm(), "qkv": dense(D, 3 * D), "out": dense(D, D), "ln2": norm(),
                        "up": dense(D, FF), "down": dense(FF, D)} for _ in range(LAYERS)], "ln_f": norm()}


PARAMS = init_params()


def _norm(x, p):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def encode(params, x):
    b, t, _ = x.shape
    causal = jnp.tril(jnp.ones((t, t), bool))
    for layer in params["layers"]:
        h = _norm(x, layer["ln1"])
        q, k, v = jnp.split((h @ layer["qkv"]).reshape(b, t, 3, HEADS, D // HEADS), 3, axis=2)
        q, k, v = (a[:, :, 0].transpose(0, 2, 1, 3) for a in (q, k, v))
        s = jnp.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // HEADS), -1e9)
        a = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, D)
        x = x + a @ layer["out"]
        x = x + jax.nn.gelu(_norm(x, layer["ln2"]) @ layer["up"]) @ layer["down"]
    return _norm(x, params["ln_f"])
'''

TRANSFORMER_SPEC = '''jaxport: 1
dims:
  batch: {min: 1, max: 64}
  seq: {min: 1, max: 512}
args:
  - bind: model.py:PARAMS
  - "f32[batch, seq, 64]"
'''

#: name -> (shape of one call's input, dims of that shape, a four-bucket grid)
MODELS = {
    "mlp": ((8, 784), {"batch": 8}, {"batch": [1, 8, 32, 128]}),
    "transformer (12 layers)": ((1, 64, 64), {"batch": 1, "seq": 64}, {"batch": [1, 4], "seq": [64, 128]}),
}
CALLS = {"full": 200, "quick": 20}


def _artifacts(work: Path) -> dict[str, Path]:
    import jaxport

    shutil.copytree(common.REPO / "examples" / "mlp", work / "mlp")
    (work / "tr").mkdir()
    (work / "tr" / "model.py").write_text(TRANSFORMER)
    (work / "tr" / "spec.yaml").write_text(TRANSFORMER_SPEC)
    with contextlib.chdir(work / "mlp"):
        mlp = jaxport.export("model.py:apply", "spec-bound.yaml", output=work / "mlp.jaxport").path
    with contextlib.chdir(work / "tr"):
        tr = jaxport.export("model.py:encode", "spec.yaml", output=work / "transformer.jaxport").path
    return {"mlp": mlp, "transformer (12 layers)": tr}


def _xla_ready(art: Path, x) -> tuple[float, float]:
    """Seconds from the artifact to a compiled XLA executable for ``x`` (load, lower, compile: the first call less
    its run), and XLA's compilation alone."""
    import jaxport

    start = time.perf_counter()
    loaded = jaxport.load(art)
    run = loaded.run({"x": x})
    return time.perf_counter() - start - run.run_seconds, run.compilation.seconds


def _alternating(a, b, calls: int) -> tuple[float, float]:
    """Median seconds per call of ``a()`` and ``b()``, called alternately (which goes first alternates too)."""
    ta: list[float] = []
    tb: list[float] = []
    for i in range(calls):
        order = ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta))
        for fn, times in order:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(ta), statistics.median(tb)


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0], full=3, quick=1)
    import numpy as np

    import jaxport
    from jaxport.run.compile import iree_loader
    from jaxport.run.compile.deploy import compile_artifact

    common.print_machine()
    from importlib.metadata import version

    print(f"IREE: iree-base-compiler {version('iree-base-compiler')}, iree-base-runtime {version('iree-base-runtime')}"
          f"; command: {' '.join(['python', 'benchmarks/iree_deploy.py', *sys.argv[1:]])}")
    calls = CALLS["quick" if args.quick else "full"]
    rows_compile, rows_call, rows_size = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        arts = _artifacts(work)
        for name, (shape, dims, grid) in MODELS.items():
            art = arts[name]
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            iree_times, xla_times, iree_compiler, xla_compiler = [], [], [], []
            for r in range(args.repeats):
                out = work / f"{name[:3]}-{r}"
                out.mkdir()
                start = time.perf_counter()
                compiled = compile_artifact(art, out / "m.vmfb", dims=dims, cpu="host")
                iree_times.append(time.perf_counter() - start)
                iree_compiler.append(compiled.seconds["compile"])
                total, xla_only = _xla_ready(art, x)
                xla_times.append(total)
                xla_compiler.append(xla_only)
            out = work / f"{name[:3]}-grid"
            out.mkdir()
            start = time.perf_counter()
            grid_module = compile_artifact(art, out / "m.vmfb", grid=grid, cpu="host")
            grid_seconds = time.perf_counter() - start
            med = statistics.median
            rows_compile.append([name, f"{med(iree_times):.2f} s", f"{med(xla_times):.2f} s",
                                 f"{med(iree_times) / med(xla_times):.2f}x", f"{med(iree_compiler):.2f} s",
                                 f"{med(xla_compiler):.2f} s", f"{med(iree_compiler) / med(xla_compiler):.2f}x",
                                 f"{len(grid_module.description['functions'])} buckets: {grid_seconds:.2f} s"])

            module = iree_loader.load(compiled.run)
            loaded = jaxport.load(art)
            want = np.asarray(loaded(x))
            got = module(x)["output"]
            if not np.allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(want).max()))):
                sys.exit(f"benchmarks: {name}: IREE and XLA differ by {np.abs(got - want).max()}")
            for _ in range(10):
                module(x)
                np.asarray(loaded(x))
            mi, mx = _alternating(lambda m=module, v=x: m(v), lambda f=loaded, v=x: np.asarray(f(v)), calls)
            out = work / f"{name[:3]}-generic"
            out.mkdir()
            generic = iree_loader.load(compile_artifact(art, out / "m.vmfb", dims=dims, cpu="generic").run)
            for _ in range(10):
                generic(x)
            mg, _ = _alternating(lambda m=generic, v=x: m(v), lambda f=loaded, v=x: np.asarray(f(v)), calls)
            rows_call.append([name, f"{'x'.join(map(str, shape))}", f"{mi * 1e3:.3f} ms", f"{mx * 1e3:.3f} ms",
                              f"{mi / mx:.2f}x", f"{mg * 1e3:.3f} ms", str(calls)])
            sizes = compiled.sizes
            rows_size.append([name, f"{sizes['artifact']:,}", f"{sizes['module']:,}",
                              f"{sizes.get('parameters', 0):,}",
                              f"{sizes['artifact'] / sizes['module']:.2f}x",
                              f"{(sizes['module'] + sizes.get('parameters', 0)) / sizes['artifact']:.3f}"])
    print(f"\nCompile time, artifact to a callable for one shape (median of {args.repeats}):")
    print(common.table(["model", "IREE (compile_artifact)", "XLA (load+lower+compile)", "IREE / XLA",
                        "iree-compile alone", "XLA compile alone", "IREE / XLA", "IREE, bucketed module"],
                       rows_compile))
    print("\nSteady per-call time, numpy in and out (median, calls alternating):")
    print(common.table(["model", "input", "IREE --cpu host", "XLA (jaxport.load)", "IREE / XLA",
                        "IREE --cpu generic", "calls each"], rows_call))
    print("\nSize (bytes), the one-shape module:")
    print(common.table(["model", "artifact", ".vmfb", ".irpa", "artifact / .vmfb", "(.vmfb + .irpa) / artifact"],
                       rows_size))


if __name__ == "__main__":
    main()
