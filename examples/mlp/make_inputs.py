"""Write x.npy, the demo input of `jaxport call` (4 flattened 28x28 "images" with pixel values in [0, 1)), and the
model's parameters as params.npz and params.safetensors, for the specs that bind them.

Deterministic: running it again gives the same bytes. Run from this directory: python make_inputs.py
"""

from pathlib import Path

import numpy as np


def make_x(batch: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((batch, 784), dtype=np.float32)


if __name__ == "__main__":
    here = Path(__file__).parent
    np.save(here / "x.npy", make_x(), allow_pickle=False)

    from model import init_params
    from safetensors.numpy import save_file

    params = init_params()
    np.savez(here / "params.npz", **params)
    save_file(params, str(here / "params.safetensors"))
