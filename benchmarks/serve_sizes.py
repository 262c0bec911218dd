"""The parts of benchmarks/bench_serve.py that issue 47 added: the sequence-model case (`--only sizes`) and the TPU
serving section (`--uds`). Imported by bench_serve.py; not run on its own.

`--only sizes`, on the shared CPU machine:
- ready time: `jaxport serve` of a sequence tagger (benchmarks/models/tagger.py: batch 1..64, seq 1..512, attention
  over seq, so padding seq is refused) and two MLP versions (the example's `predict`, and its `apply` with the weights
  bound from params.npz: two programs), from process start to `/v2/health/ready` answering 200; cold (an empty cache
  directory), warm (the cache the cold start left) and shipped (a cache holding only executables that
  `jaxport warmup --target cpu` stored); and the example MLP alone, cold, against the bare KServe model of the same
  function (serve_baselines.py: compiles nothing before it is ready).
- sizes served: one cold server of the tagger alone, sent a seeded sample of (batch, seq) requests (the corners
  included), each answer compared with `jax.jit` of the function in this process; the compilations /metrics counts
  against the buckets the requests needed that the warm-up had not compiled; the first and the second request of
  each size timed; and how many of the sizes the plan before issue 47 answered (the thinned proposal, seq in 2, 8,
  32, 128, 512, a size no bucket fits refused).

`--uds` (the TPU section; run it on the TPU host, which may open no TCP socket): every server on unix sockets, one
at a time (one process at a time may hold the chip), the bench process never touching the chip: for the example MLP,
the 4x1024 MLP and the tagger, exported there, the bare KServe model and `jaxport serve` (batching off, then on) are
each started, timed to ready, queried with one-row gRPC requests (tritonclient, `unix:PATH.grpc`) for p50/p99 and
for throughput at 1, 8 and 32 clients (after a first burst at 32, timed apart), and stopped; answers are compared
between the contenders, and the tagger gets the sizes sample. Needs only jaxport's wheels (../shared/tpu/wheels.sh)
and kserve's and tritonclient's (benchmarks/tpu_serve_wheels.sh).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import common

TAGGER = ("benchmarks/models/tagger.py:predict", "benchmarks/models/tagger.yaml")
MLP_V1 = ("examples/mlp/model.py:predict", "examples/mlp/spec.yaml")
MLP_V2 = ("examples/mlp/model.py:apply", "examples/mlp/spec-npz.yaml")
#: What `warmup --target cpu` ships per model for the shipped start (what each server's warm-up compiles and more).
SHIPPED_DIMS = {"tagger": ["--dim", "batch=1,2,3,4", "--dim", "seq=1,2,3,4"],
                "mlp1": ["--dim", "batch=1,2,3,4,5,6,7,8"], "mlp2": ["--dim", "batch=1,2,3,4,5,6,7,8"]}
#: Goals of issue 47 (seconds, ratio).
GOALS = {"cold": 10.0, "warm": 3.0, "mlp_cold": 2.0}


def export(ref: str, spec: str, out: Path, jaxport: str, env: dict[str, str] | None = None) -> Path:
    if not out.exists():
        subprocess.run([jaxport, "export", ref, "--shapes", spec, "--output", str(out)], cwd=common.REPO, env=env,
                       check=True, capture_output=True, timeout=600)
    return out


def ready_time(server, deadline_s: float) -> float:
    """Seconds from the server's process start to `/v2/health/ready` answering 200 (polled every 20 ms)."""
    start = time.monotonic()
    server.start()
    while time.monotonic() - start < deadline_s:
        if server.proc.poll() is not None:
            break
        try:
            if server.get("/v2/health/ready", timeout=2)[0] == 200:
                return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.02)
    tail = server.log.read_text(errors="replace")[-3000:]
    raise SystemExit(f"benchmarks: {server.label} did not become ready (exit {server.proc.poll()}):\n{tail}")


def sample_sizes(n: int, seed: int = 0) -> list[tuple[int, int]]:
    """``n`` seeded (batch, seq) pairs of the tagger's bounds, the four corners first."""
    rng = random.Random(seed)
    corners = [(1, 1), (64, 512), (1, 512), (64, 1)]
    return corners + [(rng.randint(1, 64), rng.randint(1, 512)) for _ in range(max(0, n - len(corners)))]


def old_plan_seq() -> list[int]:
    """The seq sizes the plan before issue 47 took for the tagger: `run.buckets.propose(f, 4, 64)` thinned two
    variables to 5 x 7 buckets, seq in 2, 8, 32, 128, 512 (padding seq refused: only those answered)."""
    return [2, 8, 32, 128, 512]


def sizes_served(server, sizes: list[tuple[int, int]], expected_of, warm: list[dict[str, int]],
                 ladder_batch: list[int]) -> dict:
    """Send each (batch, seq) twice to the tagger; compare with ``expected_of(ids)`` (None: not compared); count
    the compilations /metrics reports against the buckets these requests needed that were not warm."""
    import numpy as np

    client = server.client("tagger", "ids", "output", "grpc")
    rng = np.random.default_rng(7)
    first, second, wrong, needed = [], [], [], set()
    warm_keys = {(b["batch"], b["seq"]) for b in warm}
    before = server.metrics()
    for batch, seq in sizes:
        ids = rng.integers(0, 1000, (batch, seq)).astype(np.int32)
        t0 = time.perf_counter()
        got = client.infer(ids, datatype="INT32")
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        client.infer(ids, datatype="INT32")
        second.append(time.perf_counter() - t0)
        expected = expected_of(ids) if expected_of is not None else None
        if expected is not None and not np.allclose(got, expected, rtol=1e-4, atol=1e-4):
            wrong.append((batch, seq))
        bucket = (min(b for b in ladder_batch if b >= batch), seq)
        if bucket not in warm_keys:
            needed.add(bucket)
    client.close()
    after = server.metrics()
    compiles = after.get("jaxport_compilations_total", 0) - before.get("jaxport_compilations_total", 0)
    old = set(old_plan_seq())
    return {"sizes": len(sizes), "wrong": wrong, "compiled": compiles, "needed": len(needed),
            "first_p50": statistics.median(first), "first_max": max(first), "second_p50": statistics.median(second),
            "old_plan_answers": sum(1 for _, q in sizes if q in old)}


def tagger_expected():
    """The tagger's outputs by `jax.jit` in this process (CPU), for comparing the server's answers."""
    sys.path.insert(0, str(common.REPO / "benchmarks" / "models"))
    import jax
    import numpy as np
    import tagger

    fn = jax.jit(tagger.predict)
    return lambda ids: np.asarray(fn(ids))


# -- `--only sizes`: the sequence-model case ---------------------------------------------------------------------

def _summaries(log: Path) -> list[str]:
    return [line.split("jaxport serve: ", 1)[1] for line in log.read_text(errors="replace").splitlines()
            if "jaxport serve: " in line and " version " in line]


def sizes_case(bs, s: dict, tmp: Path, jaxport: str) -> dict:
    """Ready times (cold, warm, shipped; the example MLP alone against the bare model) and sizes served (see the
    module docstring); ``bs`` is bench_serve (its Server)."""
    arts = {"tagger": export(*TAGGER, tmp / "tagger.jaxport", jaxport),
            "mlp1": export(*MLP_V1, tmp / "mlp1.jaxport", jaxport),
            "mlp2": export(*MLP_V2, tmp / "mlp2.jaxport", jaxport)}
    three = [str(arts["tagger"]), f"mlp@1={arts['mlp1']}", f"mlp@2={arts['mlp2']}"]
    ports = ["--http-port", "{http}", "--grpc-port", "{grpc}"]
    runs: list[dict] = []
    for r in range(s["runs"]):
        run: dict = {}
        cache = tmp / f"sizes-cache-{r}"
        for key in ("cold", "warm"):  # the same cache: empty, then what the cold start left
            srv = bs.Server(f"jaxport serve, 3 models, {key}", [jaxport, "serve", *three, *ports], cache,
                            tmp / f"sizes-{key}-{r}.log")
            run[key] = ready_time(srv, bs.READY_S)
            srv.stop()
            run[f"{key}_lines"] = _summaries(srv.log)
        shipped = tmp / f"sizes-shipped-{r}"
        for name, path in arts.items():  # not timed: what a CPU build machine ships
            subprocess.run([jaxport, "warmup", str(path), "--target", "cpu", *SHIPPED_DIMS[name], "--cache-dir",
                            str(shipped)], cwd=common.REPO, env=bs._env(shipped), check=True, capture_output=True,
                           timeout=900)
        srv = bs.Server("jaxport serve, 3 models, shipped", [jaxport, "serve", *three, "--cache-dir", str(shipped),
                                                            *ports], shipped, tmp / f"sizes-shipped-{r}.log")
        run["shipped"] = ready_time(srv, bs.READY_S)
        srv.stop()
        run["shipped_lines"] = _summaries(srv.log)
        order = [("mlp", [jaxport, "serve", f"mlp={arts['mlp1']}", *ports]),
                 ("bare", [sys.executable, str(bs.BASELINES), "bare", MLP_V1[0], "--name", "mlp", "--output",
                           "output", "--http-port", "{http}", "--grpc-port", "{grpc}"])]
        for key, argv in order if r % 2 == 0 else order[::-1]:
            srv = bs.Server(key, argv, tmp / f"sizes-{key}-cache-{r}", tmp / f"sizes-{key}-{r}.log")
            run[f"{key}_cold"] = ready_time(srv, bs.READY_S)
            srv.stop()
        runs.append(run)
        print(f"[sizes] run {r + 1}: 3 models cold {run['cold']:.1f} s, warm {run['warm']:.1f} s, shipped "
              f"{run['shipped']:.1f} s; mlp cold {run['mlp_cold']:.2f} s, bare {run['bare_cold']:.2f} s", flush=True)
    # sizes served: a cold server of the tagger alone, default options
    srv = bs.Server("jaxport serve tagger", [jaxport, "serve", f"tagger={arts['tagger']}", *ports],
                    tmp / "sizes-served-cache", tmp / "sizes-served.log")
    ready = ready_time(srv, bs.READY_S)
    try:
        params = json.loads(srv.get("/v2/models/tagger")[1])["parameters"]
        served = sizes_served(srv, sample_sizes(s["sizes_n"]), tagger_expected(), params["buckets"],
                              params["sizes"]["batch"])
        served.update(ready_s=ready, warm=len(params["buckets"]), planned=params["planned"])
        served["log"] = [line for line in _summaries(srv.log) if "compiled on first use" not in line]
    finally:
        srv.stop()
    return {"runs": runs, "served": served}


def report_sizes(res: dict, summary: list[list[str]]) -> None:
    runs, med = res["runs"], statistics.median
    print(f"\n### Ready in seconds: a sequence tagger and two MLP versions (median of {len(runs)} run(s))\n")
    cold, warm, shipped = (med([r[k] for r in runs]) for k in ("cold", "warm", "shipped"))
    mlp, bare = med([r["mlp_cold"] for r in runs]), med([r["bare_cold"] for r in runs])
    ratio = med([r["mlp_cold"] / r["bare_cold"] for r in runs])
    rows = [["3 models, cold (empty cache)", f"{cold:.2f} s", f"<= {GOALS['cold']:.0f} s"],
            ["3 models, warm cache", f"{warm:.2f} s", f"<= {GOALS['warm']:.0f} s"],
            ["3 models, shipped executables (warmup --target cpu)", f"{shipped:.2f} s", f"<= {GOALS['warm']:.0f} s"],
            ["example MLP alone, cold", f"{mlp:.2f} s", f"<= {GOALS['mlp_cold']:.0f}x the bare model"],
            ["bare KServe model of the example MLP, cold", f"{bare:.2f} s", "-"]]
    print(common.table(["start", "to /v2/health/ready", "goal"], rows))
    print("\nWarm-up lines of the last cold start:\n" + "\n".join(f"    {line}" for line in runs[-1]["cold_lines"]))
    summary.append(["3 models ready, cold", f"<= {GOALS['cold']:.0f} s", f"{cold:.2f} s",
                    "yes" if cold <= GOALS["cold"] else "no"])
    summary.append(["3 models ready, warm cache / shipped", f"<= {GOALS['warm']:.0f} s",
                    f"{warm:.2f} s / {shipped:.2f} s", "yes" if max(warm, shipped) <= GOALS["warm"] else "no"])
    summary.append(["example MLP ready cold, jaxport / bare", f"<= {GOALS['mlp_cold']:.1f}x", f"{ratio:.2f}x "
                    f"({mlp:.2f} / {bare:.2f} s)", "yes" if ratio <= GOALS["mlp_cold"] else "no"])
    sv = res["served"]
    right = sv["sizes"] - len(sv["wrong"])
    print(f"\nSizes served by the tagger (batch 1..64, seq 1..512; {sv['planned']} planned buckets, {sv['warm']} "
          f"compiled before ready in {sv['ready_s']:.1f} s): {right} of {sv['sizes']} sampled sizes answered right "
          f"(the plan before issue 47: {sv['old_plan_answers']}); {sv['compiled']:.0f} compilations after ready for "
          f"{sv['needed']} buckets not warmed; a size's first request p50 {sv['first_p50'] * 1e3:.0f} ms (max "
          f"{sv['first_max'] * 1e3:.0f} ms, its one compile), its second {sv['second_p50'] * 1e3:.1f} ms.")
    summary.append(["tagger: sampled (batch, seq) sizes answered right", "all", f"{right} of {sv['sizes']} "
                    f"(before: {sv['old_plan_answers']})", "yes" if right == sv["sizes"] else "no"])
    summary.append(["tagger: compilations after ready = buckets needed, not warmed", "equal",
                    f"{sv['compiled']:.0f} = {sv['needed']}", "yes" if sv["compiled"] == sv["needed"] else "no"])


# -- `--uds`: serving on the TPU host ----------------------------------------------------------------------------

#: The TPU section's models: (export reference, spec, input name, one request's input maker).
TPU_MODELS = {
    "mlp": (*MLP_V1, "x"),
    "mlp4x1024": ("benchmarks/models/mlp4x1024.py:predict", "benchmarks/models/mlp4x1024.yaml", "x"),
    "tagger": (*TAGGER, "ids"),
}


def _one_request(name: str, rng):
    import numpy as np

    if name == "tagger":
        return rng.integers(0, 1000, (1, 32)).astype(np.int32), "INT32"
    width = 784 if name == "mlp" else 1024
    return rng.standard_normal((1, width), dtype=np.float32), "FP32"


def tpu_section(bs, s: dict, tmp: Path, jaxport: str, models: list[str] | None = None) -> dict:
    """Each model's (of ``models``, default all of ``TPU_MODELS``) three contenders one at a time on unix sockets,
    ``s["runs"]`` rounds (each server cold: a cache directory of its own), the tagger's sizes in the first (see the
    module docstring)."""
    import numpy as np

    bs.PLATFORMS.clear()  # the host's own platform: the TPU
    out: dict = {}
    unknown = sorted(set(models or []) - set(TPU_MODELS))
    if unknown:
        sys.exit(f"benchmarks: no TPU model {', '.join(unknown)}; choose among {', '.join(TPU_MODELS)}")
    for name, (ref, spec, input_name) in TPU_MODELS.items():
        if models is not None and name not in models:
            continue
        artifact = export(ref, spec, tmp / f"{name}.jaxport", jaxport, env=bs._env(tmp / "export-cache"))
        contenders = {
            "bare": [sys.executable, str(bs.BASELINES), "bare", ref, "--name", name, "--output", "output",
                     "--http-port", "1", "--grpc-port", "2", "--uds", "{uds}"],
            "off": [jaxport, "serve", f"{name}={artifact}", "--uds", "{uds}"],
            "on": [jaxport, "serve", f"{name}={artifact}", "--uds", "{uds}", "--batch-window-ms", str(bs.WINDOW_MS)],
        }
        result: dict = {key: [] for key in contenders}
        reference, bare_answers = None, None
        for r in range(s["runs"]):
            order = list(contenders) if r % 2 == 0 else list(contenders)[::-1]
            for key in order:
                uds = tmp / f"{name}-{key}-{r}.sock"
                srv = bs.Server(f"{name} {key}", list(contenders[key]), tmp / f"{name}-{key}-cache-{r}",
                                tmp / f"{name}-{key}-{r}.log", uds=uds)
                one: dict = {"ready_s": ready_time(srv, bs.READY_S)}
                try:
                    x, datatype = _one_request(name, np.random.default_rng(0))
                    client = srv.client(name, input_name, "output", "grpc")
                    got = client.infer(x, datatype=datatype)
                    reference = got if reference is None else reference
                    one["max_abs_diff"] = float(np.max(np.abs(got - reference)))
                    for _ in range(s["warm_n"]):
                        client.infer(x, datatype=datatype)
                    times = []
                    deadline = time.monotonic() + s["latency_s"]
                    for _ in range(s["latency_n"]):
                        if time.monotonic() > deadline:
                            break
                        t0 = time.perf_counter()
                        client.infer(x, datatype=datatype)
                        times.append(time.perf_counter() - t0)
                    client.close()
                    one["p50"], one["p99"] = bs._pct(times, 0.5), bs._pct(times, 0.99)
                    if name != "tagger":
                        def make(srv=srv, name=name, input_name=input_name):
                            return srv.client(name, input_name, "output")

                        one["first_burst"] = bs.throughput(make, x, max(bs.CLIENTS), s["tput_n"], s["tput_warm_s"])
                        one["throughput"] = {str(c): bs.throughput(make, x, c, s["tput_n"], s["tput_s"])
                                             for c in bs.CLIENTS}
                    if name == "tagger" and r == 0 and key in ("bare", "off"):
                        # the bare model's answers are the reference for jaxport's (one process holds the chip)
                        sizes = sample_sizes(s["tpu_sizes_n"])
                        if key == "bare":
                            bare_answers = _answers(srv, sizes)
                        else:
                            warm = json.loads(srv.get("/v2/models/tagger")[1])["parameters"]
                            served = sizes_served(srv, sizes, None, warm["buckets"], warm["sizes"]["batch"])
                            mine = _answers(srv, sizes)
                            served["max_abs_diff_vs_bare"] = None if bare_answers is None else max(
                                float(np.max(np.abs(a - b))) for a, b in zip(mine, bare_answers))
                            out["tagger_sizes"] = served
                    one["rss"] = srv.rss()
                finally:
                    srv.stop()
                result[key].append(one)
                print(f"[tpu] {name} {key} run {r + 1}: ready {one['ready_s']:.1f} s, gRPC p50 "
                      f"{one['p50'] * 1e3:.2f} ms", flush=True)
        out[name] = result
    return out


def _answers(srv, sizes: list[tuple[int, int]]) -> list:
    import numpy as np

    rng = np.random.default_rng(11)
    client = srv.client("tagger", "ids", "output", "grpc")
    got = [client.infer(rng.integers(0, 1000, (b, q)).astype(np.int32), datatype="INT32") for b, q in sizes]
    client.close()
    return got


def report_tpu(res: dict, summary: list[list[str]]) -> None:
    med = statistics.median
    served = [name for name in TPU_MODELS if name in res]
    runs = len(res[served[0]]["bare"])
    print(f"\n### Serving on the TPU host (unix sockets, one server at a time; median of {runs} run(s))\n")
    rows = []
    for name in served:
        r = res[name]
        for key in ("bare", "off", "on"):
            ones = r[key]
            tput = {c: med([o["throughput"][c]["rps"] for o in ones]) for c in ("1", "8", "32")
                    if "throughput" in ones[0]}
            rows.append([name, {"bare": "bare KServe", "off": "jaxport", "on": "jaxport, batching"}[key],
                         f"{med([o['ready_s'] for o in ones]):.1f} s",
                         f"{med([o['p50'] for o in ones]) * 1e3:.2f} / {med([o['p99'] for o in ones]) * 1e3:.2f} ms",
                         " / ".join(f"{v:.0f}" for v in tput.values()) or "-",
                         f"{max(o['max_abs_diff'] for o in ones):.1e}"])
        ratio = med([o["p50"] / b["p50"] for o, b in zip(r["off"], r["bare"])])
        summary.append([f"TPU {name}: gRPC one-row p50, jaxport / bare", "<= 1.10x", f"{ratio:.2f}x",
                        "yes" if ratio <= 1.10 else "no"])
        if name != "tagger":
            t32 = med([o["throughput"]["32"]["rps"] / b["throughput"]["32"]["rps"] for o, b in zip(r["on"],
                                                                                               r["bare"])])
            summary.append([f"TPU {name}: 32 clients, batching on / bare (req/s)", "-", f"{t32:.2f}x", "-"])
    print(common.table(["model", "server", "ready", "gRPC p50 / p99", "req/s at 1 / 8 / 32 clients",
                        "max abs diff vs bare"], rows))
    sv = res.get("tagger_sizes")
    if sv:
        diff = "not compared" if sv["max_abs_diff_vs_bare"] is None else f"{sv['max_abs_diff_vs_bare']:.1e}"
        print(f"\nTPU tagger: {sv['sizes']} sampled (batch, seq) sizes answered (max abs difference from the bare "
              f"model's answers {diff}); {sv['compiled']:.0f} compilations after ready for {sv['needed']} buckets "
              f"not warmed; a size's first request p50 {sv['first_p50'] * 1e3:.0f} ms, its second "
              f"{sv['second_p50'] * 1e3:.1f} ms.")
