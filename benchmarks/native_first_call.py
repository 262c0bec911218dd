"""The native way to run a model once, for `bench_first_call.py`: import the model, load its weights, jit it and
run it, with JAX's persistent compilation cache in CACHE_DIR (as `jaxport call --cache-dir` has it).

    python benchmarks/native_first_call.py CACHE_DIR transformer X.npy OUT.npy WEIGHTS.npz
    python benchmarks/native_first_call.py CACHE_DIR mlp X.npy OUT.npy
"""

import sys
from pathlib import Path

import jax
import numpy as np

HERE = Path(__file__).resolve().parent
cache, model, x_path, out = sys.argv[1:5]
jax.config.update("jax_compilation_cache_dir", cache)
jax.config.update("jax_enable_compilation_cache", True)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
if model == "transformer":
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE / "models"))
    from fixtures import nest
    from transformer import encode

    with np.load(sys.argv[5]) as z:
        params = nest({k: z[k] for k in z.files})
    y = jax.jit(encode)(np.load(x_path), params=params)
else:  # the MLP of examples/mlp, whose module builds its weights
    sys.path.insert(0, str(HERE.parent / "examples" / "mlp"))
    from model import predict

    y = jax.jit(predict)(np.load(x_path))
np.save(out, np.asarray(y))
