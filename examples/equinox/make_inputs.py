"""Write x.npy (4 images) and the model's arrays as params.npz and params.safetensors, keyed by their paths
(`conv/weight`, `head/bias`, ...), for the specs that bind them.

Run from this directory: python make_inputs.py
"""

from pathlib import Path

import numpy as np


def make_x(batch: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((batch, 1, 8, 8), dtype=np.float32)


def flat_params() -> dict[str, np.ndarray]:
    """The model's arrays as ``{"conv/weight": array, ...}``."""
    import jax
    from model import PARAMS

    leaves = jax.tree_util.tree_flatten_with_path(PARAMS)[0]
    return {"/".join(k.name for k in path): np.asarray(leaf) for path, leaf in leaves}


if __name__ == "__main__":
    here = Path(__file__).parent
    from safetensors.numpy import save_file

    np.save(here / "x.npy", make_x(), allow_pickle=False)
    arrays = flat_params()
    np.savez(here / "params.npz", **arrays)
    save_file(arrays, str(here / "params.safetensors"))
