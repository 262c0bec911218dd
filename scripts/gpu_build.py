"""Build what the GPU tier (``make test-gpu``, tests/gpu) runs on an NVIDIA GPU, on a machine without one.

Usage: ``python scripts/gpu_build.py OUT_DIR`` with a Python whose JAX is the one the GPU host runs (artifacts are
exported by it, and executables are used only by the jaxlib and CUDA plugin that built them), with the extra
``jaxport[cuda]`` (JAX's CUDA plugin of that release, ptxas and libdevice). ``make gpu-build`` does it with JAX 0.11.2,
what the H200 machine of this project has (../shared/GPU.md). It writes into OUT_DIR:

- the examples exported for ``[cpu, cuda]``: ``mlp.jaxport`` (predict), ``mlp-bound.jaxport`` (apply, weights
  bound), ``transformer.jaxport`` (bf16, weights bound), ``linalg.jaxport`` (Cholesky, QR, eigenvalues: cuSOLVER on
  the GPU); and the Pallas GPU kernels for ``cuda``: ``triton.jaxport`` (allowed at export) and ``mosaic.jaxport``
  (JAX cannot export a Pallas kernel for the CPU as well);
- ``goldens/``: for each artifact and shape, the inputs and the outputs this CPU computes (the artifact itself where
  it runs on the CPU, the kernels' plain-JAX references where it does not), as ``NAME-KEY.npz``;
- ``cache/``: their executables compiled here for ``cuda-h200``, deviceless (``jaxport warmup --target``), which the
  GPU process loads instead of compiling;
- ``build.json``: the versions and every bucket's compile time and memory; ``over-memory.json``: ``jaxport check
  --target cuda-h200 --json`` of a program larger than the GPU (exit 14).

Each step is a ``jaxport`` command, printed before it runs; the first that fails ends the build.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TRITON = "__gpu$xla.gpu.triton"
#: (artifact, entry point, spec, extra export options, --dim values of the shipped executables and goldens, the
#: reference of a kernel the CPU cannot run: module and function).
ARTIFACTS = [
    ("mlp", "mlp/model.py:predict", "mlp/spec.yaml", ["--platform", "cpu", "--platform", "cuda"], "batch=1,8,64",
     None),
    ("mlp-bound", "mlp/model.py:apply", "mlp/spec-bound.yaml", ["--platform", "cpu", "--platform", "cuda"],
     "batch=1,64", None),
    ("transformer", "gpu/transformer.py:apply", "gpu/transformer.yaml", [], "batch=1,8", None),
    ("linalg", "gpu/linalg.py:solve", "gpu/linalg.yaml", [], "batch=1,16", None),
    ("triton", "pallas_gpu/triton.py:scaled_add", "pallas_gpu/triton.yaml", [], "",
     ("pallas_gpu/triton.py", "reference")),
    ("mosaic", "pallas_gpu/mosaic.py:scaled_add", "pallas_gpu/mosaic.yaml", [], "",
     ("pallas_gpu/mosaic.py", "reference")),
]


def jaxport(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    command = [str(Path(sys.executable).with_name("jaxport")), *args]
    print("+", " ".join(command[1:]), flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE, cwd=ROOT)  # entry points recorded relative to the root
    if check and done.returncode != 0:
        sys.exit(f"gpu_build: the step above failed (exit {done.returncode})")
    return done


def _reference(relative: str, name: str):
    directory = str((EXAMPLES / relative).parent)
    sys.path.insert(0, directory)  # the kernels import gpu.py beside them
    try:
        spec = importlib.util.spec_from_file_location(f"ref_{Path(relative).stem}", EXAMPLES / relative)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(directory)
    return getattr(module, name)


def goldens(out: Path) -> None:
    """Inputs and this CPU's outputs for every artifact at every shape the tier calls."""
    import jax
    import numpy as np

    import jaxport

    where = out / "goldens"
    where.mkdir()
    for name, _, _, _, dims, reference in ARTIFACTS:
        loaded = jaxport.load(out / f"{name}.jaxport", allow_platform_mismatch=reference is not None,
                              allow_custom_calls=[TRITON] if name == "triton" else None)
        sizes = [int(v) for v in dims.split("=", 1)[1].split(",")] if dims else [None]
        for size in sizes:
            shape = {dims.split("=", 1)[0]: size} if size is not None else {}
            inputs = loaded.random_inputs(shape, seed=7)
            if reference is None:
                outputs = {n: np.asarray(v) for n, v in loaded.run(inputs).leaves}
            else:
                fn = jax.jit(_reference(*reference))
                outputs = {loaded.output_names[0]: np.asarray(fn(*(inputs[n] for n in loaded.input_names)))}
            key = f"{size}" if size is not None else "static"
            np.savez(where / f"{name}-{key}.npz", **{f"in/{k}": np.asarray(v) for k, v in inputs.items()},
                     **{f"out/{k}": v for k, v in outputs.items()})


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1]).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cache = out / "cache"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # a CPU host: never try to open a GPU
    warnings.filterwarnings("ignore", "The Pallas Triton backend is deprecated", DeprecationWarning)
    reports = []
    for name, entry, spec, extra, dims, _ in ARTIFACTS:
        artifact = out / f"{name}.jaxport"
        jaxport("export", f"examples/{entry}", "--shapes", f"examples/{spec}", "-o", str(artifact), *extra)
        allow = ["--allow-custom-call", TRITON] if name == "triton" else []
        done = jaxport("warmup", str(artifact), "--target", "cuda-h200", "--cache-dir", str(cache), "--json",
                       *allow, *(["--dim", dims] if dims else []))
        reports.append(json.loads(done.stdout)["targets"][0])
    import jax
    import jaxlib

    (out / "build.json").write_text(json.dumps({"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                                                "targets": reports}, indent=1))
    goldens(out)
    big = out / "over-memory"
    big.mkdir()
    (big / "model.py").write_text("def f(x):\n    return x * 2\n")
    (big / "spec.yaml").write_text('jaxport: 1\nargs:\n  - "f32[131072, 131072]"\nplatforms: [cuda]\n')
    jaxport("export", str(big / "model.py:f"), "--shapes", str(big / "spec.yaml"), "-o", str(big / "big.jaxport"))
    done = jaxport("check", str(big / "big.jaxport"), "--target", "cuda-h200", "--json", check=False)
    (out / "over-memory.json").write_bytes(done.stdout)
    if done.returncode != 14:
        sys.exit(f"gpu_build: check --target cuda-h200 of the program over the GPU's memory exited "
                 f"{done.returncode}, not 14")
    print(f"gpu_build: built in {out}")


if __name__ == "__main__":
    main()
