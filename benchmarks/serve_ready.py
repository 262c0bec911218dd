"""How soon `jaxport serve` is ready against a bare KServe model of the same function (issue 57), and where the time
goes: interleaved cold starts of both, each with an empty compilation cache of its own, timed from process start to
`/v2/health/ready` answering 200; and the import of what each needs before it listens, in a fresh process.

    .venv-serve/bin/python benchmarks/serve_ready.py [--runs N]

The example MLP (`examples/mlp` `predict`), default options (`jaxport serve mlp.jaxport`), against
benchmarks/serve_baselines.py's bare model (a `kserve.Model` whose `predict` runs a `jax.jit`, on kserve's own
`ModelServer`). Prints each run, the medians and their ratio (the goal: at most 2x), and the import times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_serve as bs  # noqa: E402
import common  # noqa: E402
from serve_sizes import MLP_V1, export, ready_time  # noqa: E402

#: What each server imports before it listens, timed in a fresh process (seconds from start to the import's end).
IMPORTS = {"kserve (the bare model's server)": "import kserve",
           "jaxport serve's transport": "import jaxport.serve.transport.kserve_server",
           "jax": "import jax"}


def import_seconds(statement: str, runs: int) -> float:
    def once() -> float:
        code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             cwd=common.REPO, env={**os.environ, "JAX_PLATFORMS": "cpu"}).stdout
        return float(out.split()[-1])

    return statistics.median(once() for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    jaxport = str(Path(sys.executable).with_name("jaxport"))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        art = export(*MLP_V1, tmp / "mlp.jaxport", jaxport)
        order = [("jaxport", [jaxport, "serve", f"mlp={art}", "--http-port", "{http}", "--grpc-port", "{grpc}"]),
                 ("bare", [sys.executable, str(bs.BASELINES), "bare", MLP_V1[0], "--name", "mlp", "--output",
                           "output", "--http-port", "{http}", "--grpc-port", "{grpc}"])]
        times: dict[str, list[float]] = {"jaxport": [], "bare": []}
        for r in range(args.runs):
            for key, argv in order if r % 2 == 0 else order[::-1]:
                srv = bs.Server(key, list(argv), tmp / f"{key}-cache-{r}", tmp / f"{key}-{r}.log")
                times[key].append(ready_time(srv, bs.READY_S))
                srv.stop()
            load = os.getloadavg()[0]
            print(f"run {r + 1}: jaxport {times['jaxport'][-1]:.2f} s, bare {times['bare'][-1]:.2f} s "
                  f"(load average {load:.1f})", flush=True)
    mine, bare = statistics.median(times["jaxport"]), statistics.median(times["bare"])
    ratio = statistics.median(a / b for a, b in zip(times["jaxport"], times["bare"]))
    print(f"ready, median of {args.runs}: jaxport serve {mine:.2f} s, bare KServe model {bare:.2f} s; "
          f"ratio {ratio:.2f}x (goal <= 2x)")
    for label, statement in IMPORTS.items():
        print(f"import, {label}: {import_seconds(statement, 3):.2f} s", flush=True)
    print(f"at {time.strftime('%Y-%m-%d %H:%M')}, load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
