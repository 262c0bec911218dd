"""jaxport's own `.safetensors` reader and writer (`jaxport.arrayfiles.safetensors`) against the safetensors
library's numpy API.

    python benchmarks/bench_safetensors.py [--quick | --repeats N]

Question (issue 23): once jaxport reads and writes `.safetensors` itself, does the `safetensors` package stay a
runtime dependency? It does only if the library is clearly faster at what jaxport does with the files: writing
outputs and extracted weights, reading them back as copies (`call --inputs`, `--expect`), and mapping bound weights
(export). Per operation, in one process, the contenders alternate round by round on the same arrays and the same
files (in a temporary directory, so both hit the page cache alike):

- write: `safetensors_io.write` into a file against `safetensors.numpy.save_file`;
- read (copy): `safetensors_io.read_file(..., mmap=False)` against `safetensors.numpy.load_file`;
- read (map): `safetensors_io.read_file(..., mmap=True)` plus one byte of every tensor touched, against
  `safe_open(..., framework="numpy")` and `get_tensor` of every tensor (the library's lazy reader, which copies);

and, as whole processes, what importing each reader costs. Every file each side writes is read by the other side
and compared with the arrays, or the benchmark stops. Ratio = safetensors / jaxport (above 1: jaxport is faster).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import numpy as np  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

from jaxport.arrayfiles import safetensors as safetensors_io  # noqa: E402
from jaxport.errors import InputError  # noqa: E402

#: (case, tensor count, elements per tensor): many small tensors (a checkpoint's biases and norms) and a few large.
CASES = [("200 x 256 kB", 200, 64 << 10), ("4 x 64 MB", 4, 16 << 20)]
QUICK_CASES = [("20 x 256 kB", 20, 64 << 10), ("2 x 4 MB", 2, 1 << 20)]


def arrays(count: int, size: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {f"layer{i}/w": rng.standard_normal(size, dtype=np.float32) for i in range(count)}


def check(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> None:
    if sorted(got) != sorted(want) or any(not np.array_equal(got[k], v) for k, v in want.items()):
        sys.exit(f"bench_safetensors: {what} does not give back the arrays written")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def jaxport_write(path: Path, data: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        safetensors_io.write(f, data)


def jaxport_map(path: Path) -> int:
    tensors = safetensors_io.read_file(path, str(path), InputError, mmap=True)
    return sum(int(a.reshape(-1)[:1].view(np.uint8)[0]) for a in tensors.values())


def library_lazy(path: Path) -> dict[str, np.ndarray]:
    with safe_open(str(path), framework="numpy") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def import_seconds(before: str, modules: list[str], repeats: int) -> float:
    """What importing ``modules`` costs once ``before`` is imported: the sum of their cumulative ``-X importtime``
    figures, best of ``repeats`` processes."""
    best = float("inf")
    for _ in range(repeats):
        res = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {before}; import {modules[-1]}"],
                             capture_output=True, text=True, check=True, env=common.CHILD_ENV)
        rows = [line.split("|") for line in res.stderr.splitlines()]
        best = min(best, sum(int(r[1]) for r in rows if len(r) == 3 and r[2].strip() in modules) / 1e6)
    return best


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0], full=7, quick=1)
    common.print_machine()
    import safetensors

    print(f"safetensors {safetensors.__version__}, numpy {np.__version__}; {args.repeats} alternating rounds per "
          f"operation; medians.\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs = Path(tmp) / "ours.safetensors", Path(tmp) / "theirs.safetensors"
        for case, count, size in QUICK_CASES if args.quick else CASES:
            data = arrays(count, size)
            jaxport_write(ours, data)
            save_file(data, str(theirs))
            check(load_file(str(ours)), data, "safetensors.numpy.load_file of jaxport's file")
            check(safetensors_io.read_file(theirs, "theirs", InputError), data,
                  "jaxport's reader of the library's file")
            ops = {
                "write": (lambda d=data: jaxport_write(ours, d), lambda d=data: save_file(d, str(theirs))),
                "read (copy)": (lambda: safetensors_io.read_file(ours, "ours", InputError),
                                lambda: load_file(str(theirs))),
                "read (map)": (lambda: jaxport_map(ours), lambda: library_lazy(theirs)),
            }
            for op, (mine, library) in ops.items():
                a, b = [], []
                mine(), library()  # warm-up: page cache, first-call costs
                for _ in range(args.repeats):
                    a.append(timed(mine))
                    b.append(timed(library))
                ma, mb = statistics.median(a), statistics.median(b)
                rows.append([case, op, f"{ma * 1e3:.1f} ms", f"{mb * 1e3:.1f} ms", f"{mb / ma:.2f}x"])
    print(common.table(["case", "operation", "jaxport", "safetensors", "safetensors / jaxport"], rows))
    repeats = max(args.repeats, 3)
    mine = import_seconds("numpy, jaxport", ["jaxport.arrayfiles.safetensors"], repeats)
    library = import_seconds("numpy, jaxport", ["safetensors", "safetensors.numpy"], repeats)
    print(f"\nImport in a process that has numpy and jaxport (-X importtime, cumulative, best of {repeats}): "
          f"jaxport.arrayfiles.safetensors {mine * 1e3:.1f} ms, safetensors.numpy {library * 1e3:.1f} ms.")

if __name__ == "__main__":
    main()
