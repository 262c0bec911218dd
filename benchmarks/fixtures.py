"""What the call and weights benchmarks build at run time, in a temporary directory (large files are never committed).

The transformer of ``models/transformer.py`` with deterministic weights (seed 0), written as ``weights.npz`` (keys
``layers/0/ln1/scale``, ...) and as a Python module attribute ``weights_source.py:PARAMS``, each with a spec that
binds ``params`` to it, so that callers pass only ``x``.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import common

MODELS = common.BENCH_DIR / "models"
MODEL = MODELS / "transformer.py"
ENTRYPOINT = f"{MODEL}:encode"
D_MODEL = 768

SPEC = """\
# The transformer with its weights bound from {source}: callers pass only x.
jaxport: 1
dims:
  batch: {{min: 1, max: 256}}
  seq: {{min: 1, max: 2048}}
args:
  - "f32[batch, seq, 768]"
kwargs:
  params: {{bind: "{source}"}}
metadata: {{name: transformer-bound, version: "1.0.0"}}
"""

# What a user writes to bind weights built in Python: a module whose attribute holds the pytree.
SOURCE_MODULE = """\
import sys

sys.path.insert(0, {models!r})
from transformer import init_params  # noqa: E402

PARAMS = init_params(seed=0, n_layers={layers})
"""


@dataclass(frozen=True)
class BoundTransformer:
    directory: Path
    layers: int
    npz: Path  # the weights, one array per "/"-separated name
    source_module: Path  # weights_source.py, whose PARAMS builds the same weights
    spec_npz: Path  # params bound from weights.npz
    spec_attr: Path  # params bound from weights_source.py:PARAMS
    n_params: int
    weight_bytes: int


def _flatten(tree: object, prefix: str = "") -> dict[str, object]:
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, list):
        items = ((str(i), v) for i, v in enumerate(tree))
    else:
        return {prefix: tree}
    out: dict[str, object] = {}
    for k, v in items:
        out.update(_flatten(v, f"{prefix}/{k}" if prefix else k))
    return out


def nest(flat: dict[str, object]) -> dict[str, object]:
    """``{"a/b": x}`` -> ``{"a": {"b": x}}``: the pytree an .npz of "/"-separated names stands for."""
    root: dict[str, object] = {}
    for key, value in flat.items():
        *parents, leaf = key.split("/")
        node = root
        for p in parents:
            node = node.setdefault(p, {})  # type: ignore[assignment]
        node[leaf] = value
    return root


def write_transformer(directory: Path, layers: int) -> BoundTransformer:
    """Write the weights (seed 0) and the two specs that bind them into ``directory``."""
    import sys

    import numpy as np

    sys.path.insert(0, str(MODELS))
    try:
        from transformer import init_params
    finally:
        sys.path.remove(str(MODELS))
    flat = _flatten(init_params(seed=0, n_layers=layers))
    npz = directory / "weights.npz"
    np.savez(npz, **flat)
    module = directory / "weights_source.py"
    module.write_text(SOURCE_MODULE.format(models=str(MODELS), layers=layers))
    spec_npz, spec_attr = directory / "bound-npz.yaml", directory / "bound-attr.yaml"
    spec_npz.write_text(SPEC.format(source="weights.npz"))
    spec_attr.write_text(SPEC.format(source="weights_source.py:PARAMS"))
    arrays = list(flat.values())
    return BoundTransformer(directory, layers, npz, module, spec_npz, spec_attr,
                            sum(a.size for a in arrays), sum(a.nbytes for a in arrays))  # type: ignore[attr-defined]


def export_bound(jaxport: str, model: BoundTransformer, output: Path, from_npz: bool = True) -> Path:
    """Export the transformer with its weights bound (from the .npz, or from the Python attribute)."""
    spec = model.spec_npz if from_npz else model.spec_attr
    subprocess.run([jaxport, "export", ENTRYPOINT, "--shapes", str(spec), "-o", str(output), "--no-manifest"],
                   check=True, stdout=subprocess.DEVNULL)
    return output


def make_x(batch: int, seq: int, seed: int = 1):
    import numpy as np

    return np.random.default_rng(seed).standard_normal((batch, seq, D_MODEL), dtype=np.float32)
