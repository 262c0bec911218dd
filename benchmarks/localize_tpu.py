"""Localizing CPU against TPU: where an MLP's f32 matmuls part, on the chip and on its host's CPU.

    python benchmarks/localize_tpu.py OUT.json [--keep DIR]

Run on a TPU machine (JAX there, jaxport's wheel on PYTHONPATH; ../shared/TPU.md): exports a 3-layer MLP whose weights
are inputs (f32, 512 wide, batch 256) for platforms cpu and tpu with the JAX of the machine, then runs
``jaxport.localize(ARTIFACT, platforms=["tpu"], against_platform="cpu", inputs=...)``: the artifact on the TPU
against the same artifact on the CPU, with the tolerances for two compilers. A TPU multiplies f32 matrices in bf16
passes by default, so the first matmul departs, by itself: the report says where, by how much, and that it departs
alone; ``--keep DIR`` keeps the operation written alone (``--localize-out``). The same model with
``jax.default_matmul_precision("highest")`` in its source is localized too: its first departure, if any, is smaller.

Without a TPU the script says so and compares the CPU with itself (the outputs agree; nothing is blamed), which
checks the script and jaxport's wheel on any machine. Writes one JSON object to OUT.json: the machine, JAX, each
run's time, and each localization's report (``LocalizeReport.to_json()``).
"""

from __future__ import annotations

import contextlib
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

MODEL = '''import jax
import jax.numpy as jnp


def mlp(x, w1, w2, w3):
    h = jax.nn.relu(x @ w1)
    h = jax.nn.relu(h @ w2)
    return h @ w3


def mlp_highest(x, w1, w2, w3):
    with jax.default_matmul_precision("highest"):
        h = jax.nn.relu(x @ w1)
        h = jax.nn.relu(h @ w2)
        return h @ w3
'''

SPEC = '''jaxport: 1
args:
  - "f32[256, 512]"
  - "f32[512, 512]"
  - "f32[512, 512]"
  - "f32[512, 128]"
'''


def _inputs():
    import numpy as np

    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((256, 512), dtype=np.float32),
            **{name: (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[0])).astype(np.float32)
               for name, shape in (("w1", (512, 512)), ("w2", (512, 512)), ("w3", (512, 128)))}}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    out = Path(sys.argv[1]).resolve()
    keep = Path(sys.argv[sys.argv.index("--keep") + 1]).resolve() if "--keep" in sys.argv else None
    started = time.perf_counter()
    import jax

    import jaxport

    devices = jax.devices()
    tpu = any(d.platform == "tpu" for d in devices)
    result: dict = {"python": platform.python_version(), "jax": jax.__version__, "jaxport": jaxport.__version__,
                    "devices": [f"{d.platform}: {getattr(d, 'device_kind', '')}" for d in devices], "tpu": tpu,
                    "runs": []}
    if not tpu:
        result["note"] = ("no TPU: JAX here has no TPU device, so the artifact on the CPU is compared with itself "
                          "(the outputs agree and nothing is blamed); run this on a TPU machine for the figures")
        print(result["note"])
    with tempfile.TemporaryDirectory() as tmp_name, contextlib.chdir(tmp_name):
        tmp = Path(tmp_name)
        (tmp / "model.py").write_text(MODEL)
        (tmp / "spec.yaml").write_text(SPEC)
        arrays = _inputs()
        for fn in ("mlp", "mlp_highest"):
            start = time.perf_counter()
            jaxport.export(f"model.py:{fn}", "spec.yaml", output=f"{fn}.jaxport", platforms=["cpu", "tpu"])
            exported = time.perf_counter() - start
            start = time.perf_counter()
            written = (keep / fn) if keep is not None else None
            report = jaxport.localize(f"{fn}.jaxport", platforms=["tpu" if tpu else "cpu"], against_platform="cpu",
                                      inputs=arrays, localize_out=str(written) if written else None)
            seconds = time.perf_counter() - start
            doc = report.to_json()
            run = {"function": fn, "export_seconds": round(exported, 3), "localize_seconds": round(seconds, 3),
                   "verify_passed": report.verify.passed, "summary": report.summary(), "report": doc}
            result["runs"].append(run)
            print(f"{fn}: {seconds:.1f} s; {report.summary()}")
            if report.blame is not None:
                for m in report.blame.results:
                    print(f"  error at the operation: {m.error_text()}")
                if report.blame.alone is not None:
                    print(f"  alone: {report.blame.alone.verdict}; "
                          + "; ".join(m.error_text() for m in report.blame.alone.results))
                for g in report.growth:
                    print(f"  {g.label:12s} {g.where:24s} {g.measured.error_text()}")
    result["seconds"] = round(time.perf_counter() - started, 3)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
