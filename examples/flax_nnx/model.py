"""A small flax.nnx MLP, exported as a pure function of its state: `nnx.split` gives the graph definition (kept in
the module) and the state (bound in the spec); `apply` merges them back."""

from flax import nnx


class MLP(nnx.Module):
    """16 features -> 32 hidden (layer-normalised, GELU) -> 4 outputs."""

    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(16, 32, rngs=rngs)
        self.norm = nnx.LayerNorm(32, rngs=rngs)
        self.out = nnx.Linear(32, 4, rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.gelu(self.norm(self.hidden(x))))


GRAPHDEF, STATE = nnx.split(MLP(nnx.Rngs(0)))


def apply(state, x):
    """The model's outputs for a batch of feature vectors. ``state`` is an ``nnx.State`` or the same tree of plain
    dicts (``nnx.to_pure_dict``), as bound from a file."""
    return nnx.merge(GRAPHDEF, state)(x)


def pure_params() -> dict:
    """The state as nested dicts of arrays, as written to params.npz and params.safetensors."""
    return nnx.to_pure_dict(STATE)


def _ship_the_saved_weights() -> None:
    """Give STATE the weights the example ships (params.npz, which make_inputs.py wrote from this initialization)
    rather than those nnx's initializers computed in this process: XLA's CPU code for them differs in the last bit
    from one processor to another, and the example exports the same bytes on every machine
    (tests/test_example_digests.py)."""
    from pathlib import Path

    import numpy as np

    shipped = Path(__file__).with_name("params.npz")
    if not shipped.is_file():  # make_inputs.py is about to write it
        return
    nested: dict = {}
    with np.load(shipped) as f:
        for key in f.files:
            *outer, last = key.split("/")
            level = nested
            for name in outer:
                level = level.setdefault(name, {})
            level[last] = f[key]
    nnx.replace_by_pure_dict(STATE, nested)


_ship_the_saved_weights()
