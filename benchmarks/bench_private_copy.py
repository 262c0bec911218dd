"""What checking the weights over a private copy costs (issue 24: the bytes that run are the bytes hashed).

    python benchmarks/bench_private_copy.py [--mb 256] [--rounds 5]

Contenders, interleaved in one process over one artifact of MB megabytes of bound weights (page cache warm):

- ``mapped``: the weights as before issue 24: the sha256 read through the file descriptor (``Artifact.verify``), then
  numpy views of the file's memory map (what XLA then used, so a rewrite of the file after the check ran);
- ``private``: ``private_copy.private_member``: the weights read into anonymous memory and hashed from it;
- ``private, deferred``: the same, the hashing in a thread (``jaxport call``'s default): the time until the views
  exist, and the wait for the hash.

Each reports the median seconds and GB/s. Memory is not measured here (the allocator reuses freed blocks within
one process): the copy is, by construction, anonymous memory the size of the weights, where the mapping's pages
were the page cache's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jaxport  # noqa: E402
from jaxport.artifact.container import open_artifact  # noqa: E402
from jaxport.artifact.private_copy import private_member  # noqa: E402
from jaxport.artifact.tensors import tensor_views  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        n = args.mb * (1 << 20) // 4
        np.savez(d / "w.npz", w=np.random.default_rng(0).standard_normal(n, dtype=np.float32))
        (d / "model.py").write_text("def f(p, x):\n    return p['w'][:4] * x\n")
        (d / "spec.yaml").write_text("jaxport: 1\nargs:\n  - bind: w.npz\n  - f32[4]\n")
        os.chdir(d)
        path = jaxport.export("model.py:f", "spec.yaml", output="big.jaxport").path
        times: dict[str, list[float]] = {"mapped": [], "private": [], "private, deferred (views)": [],
                                         "private, deferred (hash waited)": []}
        for _ in range(args.rounds):
            for name in ("mapped", "private", "deferred"):
                with open_artifact(path) as art:
                    w = art.manifest["weights"]
                    t = time.perf_counter()
                    if name == "mapped":
                        art.verify(w["member"])
                        views = tensor_views(art.view(w["member"]), w["tensors"], str(path))
                        float(next(iter(views.values())).sum())  # XLA reads the pages at run time
                        times["mapped"].append(time.perf_counter() - t)
                    elif name == "private":
                        buf, _ = private_member(art, w["member"])
                        views = tensor_views(buf, w["tensors"], str(path))
                        float(next(iter(views.values())).sum())
                        times["private"].append(time.perf_counter() - t)
                    else:
                        buf, pending = private_member(art, w["member"], defer=True)
                        times["private, deferred (views)"].append(time.perf_counter() - t)
                        assert pending is not None
                        pending.wait()
                        times["private, deferred (hash waited)"].append(time.perf_counter() - t)
                        views = tensor_views(buf, w["tensors"], str(path))
                        float(next(iter(views.values())).sum())
                    del views
        size = args.mb * (1 << 20)
        print(f"{args.mb} MB of weights, {args.rounds} rounds, interleaved; median seconds, GB/s")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"  {name:<32} {med:8.3f} s  {size / med / 1e9:6.2f} GB/s")
        print(f"  private / mapped: {statistics.median(times['private']) / statistics.median(times['mapped']):.2f}x")


if __name__ == "__main__":
    main()
