"""The TPU tier (``make test-tpu``): runs only where JAX sees a TPU, and skips, saying so, everywhere else (CI).

It reads what ``scripts/tpu_build.py`` built on a machine without a TPU (``$JAXPORT_TPU_BUILD``, default
``build/tpu``): the examples exported there for ``[cpu, tpu]``, the Pallas examples, and their executables compiled
there for ``tpu-v5e``. One process holds the chip: run it without ``-n``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import REPO

BUILD = Path(os.environ.get("JAXPORT_TPU_BUILD", REPO / "build" / "tpu"))


def _tpu_here() -> str | None:
    """Why the tier cannot run here, or None on a TPU (JAX is started only where a TPU chip is attached: elsewhere
    collecting this directory leaves JAX unstarted, as the other tests need)."""
    from jaxport.run.compile.targets import has_tpu_chip

    if not has_tpu_chip():
        return "no TPU here; the TPU tier runs where one is (make test-tpu)"
    import warnings

    with warnings.catch_warnings():  # JAX's advice about the host's transparent huge pages, at start-up
        warnings.simplefilter("ignore", UserWarning)
        import jax

    try:
        platform = jax.devices()[0].platform
    except RuntimeError as e:
        return f"JAX starts no device here ({e})"
    if platform != "tpu":
        return f"no TPU here (JAX runs on {platform}); the TPU tier runs where one is (make test-tpu)"
    if not (BUILD / "cache").is_dir():
        return f"no build at {BUILD}: run scripts/tpu_build.py on a CPU host (make tpu-build) and copy it here"
    return None


def pytest_collection_modifyitems(config, items):
    mine = [i for i in items if "tests/tpu/" in str(i.fspath).replace(os.sep, "/")]
    if not mine:
        return
    why = _tpu_here()
    if why is not None:
        for item in mine:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def build() -> Path:
    return BUILD
