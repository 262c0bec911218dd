"""Write x.npy (4 feature vectors) and the model's state as params.npz and params.safetensors, keyed by their paths
(`hidden/kernel`, `norm/scale`, ...: the keys of `nnx.to_pure_dict`), for the specs that bind them.

Run from this directory: python make_inputs.py
"""

from pathlib import Path

import numpy as np


def make_x(batch: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 16), dtype=np.float32)


def flat_params() -> dict[str, np.ndarray]:
    """The state as ``{"hidden/kernel": array, ...}``."""
    import jax
    from model import pure_params

    leaves = jax.tree_util.tree_flatten_with_path(pure_params())[0]
    return {"/".join(str(k.key) for k in path): np.asarray(leaf) for path, leaf in leaves}


if __name__ == "__main__":
    here = Path(__file__).parent
    from safetensors.numpy import save_file

    np.save(here / "x.npy", make_x(), allow_pickle=False)
    arrays = flat_params()
    np.savez(here / "params.npz", **arrays)
    save_file(arrays, str(here / "params.safetensors"))
