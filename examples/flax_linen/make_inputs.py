"""Write x.npy (4 images) and the model's variables as params.npz and params.safetensors, keyed by their paths
(`params/Conv_0/kernel`, `batch_stats/BatchNorm_0/mean`, ...), for the specs that bind them.

Run from this directory: python make_inputs.py
"""

from pathlib import Path

import numpy as np


def make_x(batch: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((batch, 8, 8, 1), dtype=np.float32)


def flat_variables() -> dict[str, np.ndarray]:
    """The variables as ``{"params/Conv_0/kernel": array, ...}``."""
    import jax
    from model import VARIABLES

    leaves = jax.tree_util.tree_flatten_with_path(VARIABLES)[0]
    return {"/".join(k.key for k in path): np.asarray(leaf) for path, leaf in leaves}


if __name__ == "__main__":
    here = Path(__file__).parent
    from safetensors.numpy import save_file

    np.save(here / "x.npy", make_x(), allow_pickle=False)
    arrays = flat_variables()
    np.savez(here / "params.npz", **arrays)
    save_file(arrays, str(here / "params.safetensors"))
