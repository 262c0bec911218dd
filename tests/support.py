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
