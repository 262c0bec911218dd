"""The GPU tier (``make test-gpu``): runs only where JAX sees an NVIDIA GPU, and skips, saying so, everywhere else (CI).

It reads what ``scripts/gpu_build.py`` built on a machine without a GPU (``$JAXPORT_GPU_BUILD``, default
``build/gpu``): the examples exported there for ``[cpu, cuda]`` and the Pallas GPU kernels for ``cuda``, their CPU
goldens, and their executables compiled there for ``cuda-h200``. Figures a test reads on the GPU (the device's own
facts, its captured target config, the notes of a record not used) go to ``$JAXPORT_GPU_REPORT`` when it is set
(scripts/gpu_run.sh sets it under ``$OUT``). Run it in one process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import REPO

BUILD = Path(os.environ.get("JAXPORT_GPU_BUILD", REPO / "build" / "gpu"))


def _gpu_here() -> str | None:
    """Why the tier cannot run here, or None on an NVIDIA GPU (JAX is started only where one is attached)."""
    from jaxport.run.compile.targets import has_nvidia_gpu

    if not has_nvidia_gpu():
        return "no GPU here; the GPU tier runs where one is (make test-gpu)"
    import jax

    try:
        platform = jax.devices()[0].platform
    except RuntimeError as e:
        return f"JAX starts no device here ({e})"
    if platform != "gpu":
        return f"no GPU here (JAX runs on {platform}); the GPU tier runs where one is (make test-gpu)"
    if not (BUILD / "cache").is_dir():
        return f"no build at {BUILD}: run scripts/gpu_build.py on a CPU host (make gpu-build) and copy it here"
    return None


def pytest_collection_modifyitems(config, items):
    mine = [i for i in items if "tests/gpu/" in str(i.fspath).replace(os.sep, "/")]
    if not mine:
        return
    why = _gpu_here()
    if why is not None:
        for item in mine:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def build() -> Path:
    return BUILD


@pytest.fixture(scope="session")
def report():
    """``report(name, data)``: write ``data`` as JSON to ``$JAXPORT_GPU_REPORT/NAME.json`` (when it is set)."""
    import json

    directory = os.environ.get("JAXPORT_GPU_REPORT")

    def write(name: str, data) -> None:
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
            (Path(directory) / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))

    return write
