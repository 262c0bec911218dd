"""Localizing a difference at model scale: `verify --localize` on the 12-layer, d=768 transformer against a copy
that differs in one operation, time and peak memory beside a plain `jaxport call` of the same artifact.

    python benchmarks/bench_localize.py [--quick | --repeats N] [--json OUT.json]

Goals (issue 56): the localization finishes within 60 s on 2 CPU cores, and its peak RSS stays within 2x that of a
plain call (`jaxport call ARTIFACT --inputs x.npy -o out.npy`) of the same artifact and input.

The model is models/transformer.py with deterministic weights bound from an .npz (seed 0), exported as `old.jaxport`.
`new.jaxport` is the same weights exported from a copy of the model in which one operation differs, deep in the
program: the final layer norm's epsilon (1e-5 -> 1e-3), so that the search must pass every layer before it finds it;
and, as a second case, the feed-forward's GELU switched to its exact form in every layer (a departure in the first
layer). Each is localized twice: the two artifacts against each other (`verify new.jaxport --against-artifact
old.jaxport`), and `old.jaxport` against the changed source as its live function (`verify old.jaxport --against
changed.py:encode`). The input is one sequence of 128 tokens. `--quick` uses a 2-layer model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
import fixtures  # noqa: E402

GOAL_SECONDS = 60.0
GOAL_RSS = 2.0
X_SHAPE = (1, 128)  # batch, seq
#: The changes: (name, what, old text, new text) in models/transformer.py.
CHANGES = [
    ("late", "final layer norm's epsilon 1e-5 -> 1e-3 (last operations of the program)",
     "    return _layer_norm(x, params[\"ln_f\"])",
     "    return _layer_norm(x, params[\"ln_f\"], eps=1e-3)"),
    ("early", "exact GELU instead of its tanh approximation, in every layer (first layer departs)",
     "jax.nn.gelu(h @ layer[\"mlp\"][\"up\"] + layer[\"mlp\"][\"up_bias\"])",
     "jax.nn.gelu(h @ layer[\"mlp\"][\"up\"] + layer[\"mlp\"][\"up_bias\"], approximate=False)"),
]
EPS_PARAM = ("def _layer_norm(x, p):", "def _layer_norm(x, p, eps=1e-5):",
             "jax.lax.rsqrt(var + 1e-5)", "jax.lax.rsqrt(var + eps)")


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2-layer model and one repetition (a smoke run)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per measurement (default 3; 1 with --quick)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args()
    args.repeats = args.repeats or (1 if args.quick else 3)
    return args


def _measure(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, int, str]:
    """Seconds from start to exit, peak RSS in bytes (GNU time -v, else getrusage of a fresh parent) and stdout."""
    start = time.perf_counter()
    if os.access(common.TIME_V, os.X_OK):
        proc = subprocess.run([common.TIME_V, "-v", *argv], cwd=cwd, env=common.CHILD_ENV, capture_output=True)
        elapsed = time.perf_counter() - start
        err = proc.stderr.decode(errors="replace")
        rss = next(int(line.rsplit(":", 1)[1]) * 1024 for line in err.splitlines()
                   if "Maximum resident set size" in line)
        code, out = proc.returncode, proc.stdout.decode()
    else:
        parent = ("import resource, subprocess, sys\n"
                  "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
                  "sys.stdout.write(p.stdout.decode())\n"
                  "sys.stderr.write(p.stderr.decode())\n"
                  "print('\\n', p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
        proc = subprocess.run([sys.executable, "-c", parent, *argv], cwd=cwd, env=common.CHILD_ENV,
                              capture_output=True)
        elapsed = time.perf_counter() - start
        text, _, last = proc.stdout.decode().rstrip().rpartition("\n")
        rc, kilobytes = last.split()
        code, out, rss, err = int(rc), text, int(kilobytes) * 1024, proc.stderr.decode(errors="replace")
    if code not in ok:
        sys.exit(f"benchmarks: `{' '.join(argv)}` exited with {code}:\n{err[-3000:]}")
    return elapsed, rss, out


def _changed_model(directory: Path, name: str, old: str, new: str) -> Path:
    source = fixtures.MODEL.read_text()
    for before, after in zip(EPS_PARAM[::2], EPS_PARAM[1::2]):
        assert before in source, before
        source = source.replace(before, after)
    assert old in source, old
    path = directory / f"transformer_{name}.py"
    path.write_text(source.replace(old, new))
    return path


def _export(jaxport: str, entry: str, spec: Path, output: Path) -> None:
    subprocess.run([jaxport, "export", entry, "--shapes", str(spec), "-o", str(output), "--no-manifest"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    args = _parse()
    jaxport = common.jaxport_command()
    common.print_machine()
    results: dict = {"machine": common.machine(), "x_shape": [*X_SHAPE, fixtures.D_MODEL], "runs": []}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model = fixtures.write_transformer(tmp, layers=2 if args.quick else 12)
        results["layers"], results["parameters"] = model.layers, model.n_params
        old = tmp / "old.jaxport"
        fixtures.export_bound(jaxport, model, old)
        import numpy as np

        np.save(tmp / "x.npy", fixtures.make_x(*X_SHAPE))
        call = [jaxport, "call", str(old), "--inputs", "x.npy", "-o", "out.npy", "--no-cache"]
        plain = [_measure(call, tmp) for _ in range(args.repeats)]
        plain_s = statistics.median(p[0] for p in plain)
        plain_rss = max(p[1] for p in plain)
        results["plain_call"] = {"seconds": plain_s, "peak_rss": plain_rss, "argv": " ".join(call[1:])}
        print(f"plain call: {plain_s:.1f} s, peak RSS {plain_rss / 2**20:.0f} MiB")
        rows = []
        for name, what, before, after in CHANGES:
            changed = _changed_model(tmp, name, before, after)
            new = tmp / f"new_{name}.jaxport"
            spec = tmp / f"spec_{name}.yaml"
            spec.write_text(fixtures.SPEC.format(source="weights.npz"))
            _export(jaxport, f"{changed}:encode", spec, new)
            for mode, argv in (
                ("two artifacts", [jaxport, "verify", new.name, "--against-artifact", old.name]),
                ("artifact vs live", [jaxport, "verify", old.name, "--against", f"{changed.name}:encode"]),
            ):
                command = [*argv, "--inputs", "x.npy", "--localize", "--json"]
                runs = [_measure(command, tmp, ok=(12,)) for _ in range(args.repeats)]
                seconds = statistics.median(r[0] for r in runs)
                rss = max(r[1] for r in runs)
                report = json.loads(runs[-1][2])["localize"]
                blamed = report["blamed"]
                where = blamed["location"]["shown"] if blamed else "-"
                row = {"change": name, "what": what, "mode": mode, "seconds": seconds, "peak_rss": rss,
                       "rss_ratio": rss / plain_rss, "localize_seconds": report["seconds"], "runs": report["runs"],
                       "largest_tap_bytes": report["largest_tap_bytes"], "blamed": where,
                       "operation": blamed["operation"] if blamed else None, "summary": report["summary"],
                       "argv": " ".join(command[1:])}
                results["runs"].append(row)
                rows.append([name, mode, f"{seconds:.1f} s", f"{report['seconds']:.1f} s", str(report["runs"]),
                             f"{rss / 2**20:.0f} MiB", f"{rss / plain_rss:.2f}x", where,
                             blamed["operation"].split(".")[-1] if blamed else "-"])
                print(f"{name} / {mode}: {seconds:.1f} s ({report['seconds']:.1f} s localizing, {report['runs']} "
                      f"runs), peak RSS {rss / 2**20:.0f} MiB = {rss / plain_rss:.2f}x the plain call; {where}")
    print()
    print(common.table(["change", "comparison", "whole verify", "localizing", "runs", "peak RSS", "vs call",
                        "blamed", "operation"], rows))
    worst_s = max(r["seconds"] for r in results["runs"])
    worst_rss = max(r["rss_ratio"] for r in results["runs"])
    print(f"\nGoals: within {GOAL_SECONDS:.0f} s (worst {worst_s:.1f} s) and within {GOAL_RSS:.0f}x a plain call's "
          f"peak RSS (worst {worst_rss:.2f}x); RSS by {common.rss_method()}.")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
