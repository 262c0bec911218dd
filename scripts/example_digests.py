"""Export every bundled example and print the sha256 of each artifact (``path entry digest`` per line).

Used to prove that a refactor leaves artifacts byte-identical: run it before and after and compare, or run
``tests/test_example_digests.py``, which compares against ``tests/golden/example-digests/jax-<version>.txt``
(one file per JAX release).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The examples whose artifacts hold source locations inside a library (flax's layers, equinox's modules): their
#: bytes change with the library's release, so the digest file records the release each was exported with.
LIBRARIES = {"flax_linen": "flax", "flax_nnx": "flax", "equinox": "equinox"}

#: (example directory, spec file, entry point) for every example spec shipped in ``examples/``.
EXAMPLES = [
    ("equinox", "spec.yaml", "model.py:apply"),
    ("equinox", "spec-npz.yaml", "model.py:apply_arrays"),
    ("equinox", "spec-safetensors.yaml", "model.py:apply_arrays"),
    ("equinox", "spec-partitioned.yaml", "model.py:apply_partitioned"),
    ("flax_linen", "spec.yaml", "model.py:apply"),
    ("flax_linen", "spec-npz.yaml", "model.py:apply"),
    ("flax_linen", "spec-safetensors.yaml", "model.py:apply"),
    ("flax_nnx", "spec.yaml", "model.py:apply"),
    ("flax_nnx", "spec-npz.yaml", "model.py:apply"),
    ("flax_nnx", "spec-safetensors.yaml", "model.py:apply"),
    ("mlp", "spec.yaml", "model.py:predict"),
    ("mlp", "spec-bound.yaml", "model.py:apply"),
    ("mlp", "spec-npz.yaml", "model.py:apply"),
    ("mlp", "spec-safetensors.yaml", "model.py:apply"),
    ("mlp", "spec-multiplatform.yaml", "model.py:predict"),
    ("pallas", "spec.yaml", "model.py:add"),
    ("pallas", "spec-flash-attention.yaml", "flash_attention.py:attention"),
    ("pallas", "spec-vmem.yaml", "vmem.py:double"),
    ("pytree", "spec.yaml", "model.py:encode"),
    ("sharded", "spec.yaml", "model.py:predict"),
]


def library_versions() -> dict[str, str]:
    """The installed release of each library in :data:`LIBRARIES`."""
    import importlib.metadata

    return {lib: importlib.metadata.version(lib) for lib in sorted(set(LIBRARIES.values()))}


def digests() -> list[tuple[str, str]]:
    import jaxport

    rows = []
    cwd = os.getcwd()
    try:
        for example, spec, entry in EXAMPLES:
            os.chdir(REPO / "examples" / example)
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "a.jaxport"
                jaxport.export(entry, spec, output=out)
                rows.append((f"{example}/{spec} {entry}", hashlib.sha256(out.read_bytes()).hexdigest()))
    finally:
        os.chdir(cwd)
    return rows


if __name__ == "__main__":
    import jax
    import jaxlib

    print(f"# sha256 of every bundled example's artifact, exported by scripts/example_digests.py with jax "
          f"{jax.__version__} / jaxlib {jaxlib.__version__}.")
    print("# Regenerate (only when a change is meant to alter artifacts, with a CHANGELOG line): "
          "scripts/example_digests.py > tests/golden/example-digests/jax-VERSION.txt under that JAX")
    print("# libraries: " + ", ".join(f"{lib} {v}" for lib, v in library_versions().items()))
    for name, digest in digests():
        print(f"{name} {digest}")
    sys.stdout.flush()
