"""What a user writes to ship weights inside a `jax.export` artifact without jaxport: close over them.

    python benchmarks/baseline_export_constants.py {WEIGHTS.npz | python:N_LAYERS} OUTPUT

Loads the transformer's weights from the .npz (every array, nested by its "/"-separated name) or builds them in
Python as `fixtures.SOURCE_MODULE` does, closes `encode` over them (they become constants of the program), exports
with the same symbolic batch and sequence as the jaxport spec, serializes and writes the bytes.
"""

import sys
from pathlib import Path

import jax
import numpy as np
from jax import export

MODELS = Path(__file__).resolve().parent / "models"


def nest(flat):
    root = {}
    for key, value in flat.items():
        *parents, leaf = key.split("/")
        node = root
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return root


def main() -> None:
    source, output = sys.argv[1], sys.argv[2]
    sys.path.insert(0, str(MODELS))
    from transformer import encode, init_params

    if source.startswith("python:"):
        params = init_params(seed=0, n_layers=int(source.split(":", 1)[1]))
    else:
        with np.load(source) as z:
            params = nest({k: z[k] for k in z.files})
    batch, seq = export.symbolic_shape(
        "batch, seq", constraints=["batch >= 1", "batch <= 256", "seq >= 1", "seq <= 2048"])
    exported = export.export(jax.jit(lambda x: encode(x, params=params)))(
        jax.ShapeDtypeStruct((batch, seq, 768), "float32"))
    Path(output).write_bytes(exported.serialize())


if __name__ == "__main__":
    main()
