"""Write x.npy, the demo input of `jaxport call`: 4 flattened 28x28 "images" with pixel values in [0, 1).

Deterministic: running it again gives the same bytes. Run from this directory: python make_inputs.py
"""

from pathlib import Path

import numpy as np


def make_x(batch: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((batch, 784), dtype=np.float32)


if __name__ == "__main__":
    np.save(Path(__file__).with_name("x.npy"), make_x(), allow_pickle=False)
