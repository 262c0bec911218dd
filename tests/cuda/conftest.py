"""Compiling for NVIDIA GPUs on this CPU-only machine (``make test-cuda-deviceless``): runs where JAX's CUDA plugin,
ptxas and libdevice are installed (the extra ``cuda``, in ``.venv-cuda``), and skips, saying so, everywhere else
(``make test`` in ``.venv``, which must never hold a CUDA plugin)."""

from __future__ import annotations

import os

import pytest


def _why_not() -> str | None:
    from jaxport.run.compile.targets import cuda_problem

    problem = cuda_problem("cuda-h200")
    if problem is not None:
        return f"{problem} (make test-cuda-deviceless installs it in .venv-cuda)"
    return None


def pytest_collection_modifyitems(config, items):
    mine = [i for i in items if "tests/cuda/" in str(i.fspath).replace(os.sep, "/")]
    if not mine:
        return
    why = _why_not()
    if why is not None:
        for item in mine:
            item.add_marker(pytest.mark.skip(reason=why))
