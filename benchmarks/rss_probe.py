"""One process whose peak memory bench_weights.py measures; prints what its resident set holds at each step.

    python benchmarks/rss_probe.py jax                                   # the JAX runtime alone
    python benchmarks/rss_probe.py load ARTIFACT X.npy OUT.npy {verify|no-verify} CACHE_DIR
    python benchmarks/rss_probe.py native WEIGHTS.npz X.npy OUT.npy      # np.load + jax.jit(encode), no jaxport

Every mode first runs a tiny `jax.jit` so that the JAX runtime is up. `load` does what `jaxport call` does
(compilation cache, `jaxport.load`, a call, the output written), with the weights' sha256 checked or not.
Prints one JSON object: VmRSS, RssAnon (heap: numpy arrays, device buffers, XLA), RssFile (pages of mapped files:
shared libraries, the artifact's weights) in bytes after each step, and VmHWM (the peak) at the end. Linux only.
"""

import json
import sys
from pathlib import Path

KEYS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")


def status() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in KEYS:
            out[key] = int(value.split()[0]) * 1024
    return out


def main() -> None:
    mode = sys.argv[1]
    import jax
    import numpy as np

    jax.block_until_ready(jax.jit(lambda v: v + 1)(np.ones(3, np.float32)))
    steps = {"jax": status()}
    if mode == "load":
        import jaxport
        from jaxport.run.cache import compilation_cache

        artifact, x_path, out_path, verify, cache = sys.argv[2:7]
        with compilation_cache(cache):
            fn = jaxport.load(artifact, verify=verify == "verify")
            steps["load"] = status()
            y = jax.block_until_ready(fn(np.load(x_path)))
            steps["call"] = status()
            np.save(out_path, np.asarray(y))
    elif mode == "native":
        npz, x_path, out_path = sys.argv[2:5]
        sys.path.insert(0, str(Path(__file__).resolve().parent / "models"))
        from transformer import encode

        with np.load(npz) as z:
            flat = {k: z[k] for k in z.files}
        params: dict = {}
        for key, value in flat.items():
            *parents, leaf = key.split("/")
            node = params
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
        steps["load"] = status()
        y = jax.block_until_ready(jax.jit(encode)(np.load(x_path), params=params))
        steps["call"] = status()
        np.save(out_path, np.asarray(y))
    elif mode != "jax":
        sys.exit(f"unknown mode {mode!r}")
    steps["end"] = status()
    print(json.dumps(steps))


if __name__ == "__main__":
    main()
