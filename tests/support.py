"""Plain helpers shared by the tests, imported absolutely (``from tests.support import EXAMPLES``)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def load_module(path: Path, name: str | None = None) -> ModuleType:
    """The Python file at PATH as a module, executed from its file (not put in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name or f"loaded_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def example(name: str) -> ModuleType:
    """``examples/NAME/model.py``, loaded once per test run (its functions keep their identity, so ``jax.jit``
    compiles each of them once)."""
    return load_module(EXAMPLES / name / "model.py", f"example_{name}")


def npz_arrays(path: Path | str) -> dict:
    """Every array of the ``.npz`` at PATH, by name (read without pickle)."""
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


GOLDEN_MLP = REPO / "tests" / "golden" / "1.0" / "mlp.jaxport"


def function_record(entry: dict, name: str = "f"):
    """The ``jaxport.artifact.model.Function`` for a partial manifest function entry (``inputs``, ``dims``,
    ``constraints``, ...): the golden MLP's entry with ENTRY's fields in its place (no outputs unless given), read
    through ``manifest.validate``, the one parser, as every library reader gets it."""
    import copy
    import json
    import zipfile

    from jaxport.artifact import manifest

    with zipfile.ZipFile(GOLDEN_MLP) as z:
        raw = json.loads(z.read("manifest.json"))
    base = raw["functions"]["predict"]
    inputs = [{"sharding": None, **i} for i in entry["inputs"]]
    f = {**base, "outputs": [], "output_tree": {"tuple": []}, "dims": {}, "constraints": [], "shape_assertions": [],
         "custom_calls": [], **copy.deepcopy(entry), "inputs": inputs,
         "signature": {"args": [{"input": k, "name": i["name"]} for k, i in enumerate(inputs)], "kwargs": {}},
         "kept_inputs": list(range(len(inputs)))}
    raw["functions"] = {name: f}
    return manifest.validate(raw).functions[name]
