"""Write params.npz and x.npy (32 rows) for spec.yaml.

Run from this directory: python make_inputs.py
"""

from pathlib import Path

import numpy as np
from model import init_params

if __name__ == "__main__":
    here = Path(__file__).parent
    np.savez(here / "params.npz", **init_params())
    np.save(here / "x.npy", np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32), allow_pickle=False)
