"""Write the golden artifacts of the current format version into tests/golden/<FORMAT_VERSION>/.

Run from the repository root, once per released format version, and commit the result:

    .venv/bin/python -m tests.golden.make_golden

It refuses to overwrite an existing version directory: golden artifacts of a released format are never
regenerated, since their point is to prove that what an older jaxport wrote keeps loading and running.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

import jaxport

HERE = Path(__file__).parent
EXAMPLES = HERE.parent.parent / "examples"

#: format version -> name -> (entry point, spec, dims of the golden inputs, export's other options): the cases of
#: each version are artifacts that version's fields describe (a writer labels an artifact with the oldest version
#: that has every field it holds, so a version's cases use what it added).
CASES = {
    "1.0": {
        "mlp": ("mlp/model.py:predict", "mlp/spec.yaml", {"batch": 3}, {}),
        "mlp-bound": ("mlp/model.py:apply", "mlp/spec-npz.yaml", {"batch": 5}, {}),
        "mlp-multiplatform": ("mlp/model.py:predict", "mlp/spec-multiplatform.yaml", {"batch": 2}, {}),
        "encoder": ("pytree/model.py:encode", "pytree/spec.yaml", {"batch": 4, "h": 3}, {}),
    },
    "1.1": {
        "mlp-for-jax-0.9.1": ("mlp/model.py:predict", "mlp/spec.yaml", {"batch": 3}, {"for_jax": "0.9.1"}),
    },
    "1.2": {  # a namedtuple and a PRNG key returned (outputs by path, key data), written for the oldest JAX
        "state-for-jax-0.9.1": ("../tests/golden/models/state.py:sample", "../tests/golden/models/state.yaml",
                                {"batch": 2}, {"for_jax": "0.9.1"}),
    },
    "1.3": {  # int4 weights (stored packed), a uint4 input, int4 and float4 outputs, for the oldest JAX
        "int4-for-jax-0.9.1": ("../tests/golden/models/int4.py:apply", "../tests/golden/models/int4.yaml",
                               {"batch": 3}, {"for_jax": "0.9.1"}),
    },
}


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"golden_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(name: str, arrays: dict[str, np.ndarray]):
    """The outputs of the original function, run directly (not through the artifact)."""
    if name.startswith("state"):
        model = _module(HERE / "models" / "state.py")
        step, key = jax.jit(model.sample)(arrays["x"], jax.random.wrap_key_data(arrays["key"]))
        return {"0/energy": np.asarray(step.energy), "0/position": np.asarray(step.position),
                "1": np.asarray(jax.random.key_data(key))}
    if name.startswith("int4"):
        model = _module(HERE / "models" / "int4.py")
        y, shifted, f4 = jax.jit(model.apply)(model.PARAMS, arrays["x"], arrays["levels"])
        return {"y": np.asarray(y), "shifted": np.asarray(shifted), "f4": np.asarray(f4)}
    if name.startswith("mlp"):
        model = _module(EXAMPLES / "mlp" / "model.py")
        return {"output": np.asarray(jax.jit(model.predict)(arrays["x"]))}
    model = _module(EXAMPLES / "pytree" / "model.py")
    params = {"w": arrays["params/w"], "b": arrays["params/b"]}
    out = jax.jit(model.encode, static_argnums=2)(arrays["x"], arrays["mask"], 3, params=params)
    return {k: np.asarray(v) for k, v in out.items()}


def main() -> int:
    target = HERE / jaxport.FORMAT_VERSION
    if target.exists():
        print(f"{target} exists: golden artifacts of a released format are never regenerated.", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / jaxport.FORMAT_VERSION
        work.mkdir()
        for name, (entry, spec, dims, options) in CASES[jaxport.FORMAT_VERSION].items():
            path = work / f"{name}.jaxport"
            jaxport.export(f"{EXAMPLES}/{entry}", EXAMPLES / spec, output=path, write_manifest=False, **options)
            with jaxport.open_artifact(path) as art:
                assert art.model.format_version == jaxport.FORMAT_VERSION, (name, art.model.format_version)
            loaded = jaxport.load(path)
            arrays = {k: np.asarray(jax.random.key_data(v)) if jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key)
                      else v for k, v in loaded.random_inputs(dims, seed=0).items()}  # keys as their key data
            np.savez(work / f"{name}.inputs.npz", **arrays)
            np.savez(work / f"{name}.expected.npz", **_reference(name, arrays))
        shutil.copytree(work, target)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
