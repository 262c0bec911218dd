"""Build what the TPU tier (``make test-tpu``, tests/tpu) runs on a TPU, on a machine without one.

Usage: ``python scripts/tpu_build.py OUT_DIR`` with a Python whose JAX is the one the TPU host runs (the artifacts
are exported by it, and executables are only used by the jaxlib and libtpu that built them) and libtpu installed
(``pip install 'jaxport[tpu]'``). ``make tpu-build`` does it with JAX 0.10.2, what the TPU machine of this project
has. It writes into OUT_DIR:

- the examples exported for ``[cpu, tpu]`` (``mlp.jaxport``, ``mlp-bound.jaxport``) and the Pallas examples for
  ``tpu`` (``pallas-add.jaxport``, ``flash-attention.jaxport`` with ``vjp_order: 1``, ``pallas-vmem.jaxport``, which
  does not fit the chip);
- ``cache/``: their executables compiled for ``tpu-v5e`` here, deviceless (``jaxport warmup --target``), which the
  TPU process loads instead of compiling;
- ``vmem-check.json``: ``jaxport check --target tpu-v5e --json`` of the kernel over the scoped VMEM (exit 14).

Each step is a ``jaxport`` command, printed before it runs; the first that fails ends the build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: (artifact, entry point, spec, extra export options, --dim values for the executables or None for none).
ARTIFACTS = [
    ("mlp", "mlp/model.py:predict", "mlp/spec.yaml", ["--platform", "cpu", "--platform", "tpu"], "batch=1,8,64"),
    ("mlp-bound", "mlp/model.py:apply", "mlp/spec-bound.yaml", ["--platform", "cpu", "--platform", "tpu"],
     "batch=8,64"),
    ("pallas-add", "pallas/model.py:add", "pallas/spec.yaml", [], ""),
    ("flash-attention", "pallas/flash_attention.py:attention", "pallas/spec-flash-attention.yaml", [], ""),
    ("pallas-vmem", "pallas/vmem.py:double", "pallas/spec-vmem.yaml", [], None),
]


def jaxport(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    command = [str(Path(sys.executable).with_name("jaxport")), *args]
    print("+", " ".join(command[1:]), flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE, cwd=ROOT)  # entry points recorded relative to the root
    if check and done.returncode != 0:
        sys.exit(f"tpu_build: the step above failed (exit {done.returncode})")
    return done


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1]).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cache = out / "cache"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # a CPU host: never try to open a TPU
    for name, entry, spec, extra, dims in ARTIFACTS:
        artifact = out / f"{name}.jaxport"
        jaxport("export", f"examples/{entry}", "--shapes", f"examples/{spec}", "-o", str(artifact), *extra)
        if dims is not None:
            jaxport("warmup", str(artifact), "--target", "tpu-v5e", "--cache-dir", str(cache),
                    *(["--dim", dims] if dims else []))
    done = jaxport("check", str(out / "pallas-vmem.jaxport"), "--target", "tpu-v5e", "--json", check=False)
    (out / "vmem-check.json").write_bytes(done.stdout)
    if done.returncode != 14:
        sys.exit(f"tpu_build: check --target tpu-v5e of the VMEM kernel exited {done.returncode}, not 14")
    print(f"tpu_build: built in {out}")


if __name__ == "__main__":
    main()
