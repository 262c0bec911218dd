"""Artifacts are byte-identical across refactors: every bundled example exports to the recorded sha256.

The digests depend on the JAX that lowers the programs, so they are recorded with it; under another JAX the test is
skipped, saying so (regenerate with ``scripts/example_digests.py`` in a change that means to alter artifacts).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import jax
import jaxlib
import pytest

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "tests" / "golden" / "example-digests.txt"


def _recorded() -> tuple[str, str, dict[str, str]]:
    text = RECORDED.read_text()
    m = re.search(r"with jax (\S+) / jaxlib (\S+)\.", text)
    assert m, "the digest file names the JAX it was made with"
    rows = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, digest = line.rsplit(" ", 1)
            rows[name] = digest
    return m.group(1), m.group(2), rows


def _script():
    spec = importlib.util.spec_from_file_location("example_digests", REPO / "scripts" / "example_digests.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["example_digests"] = module
    spec.loader.exec_module(module)
    return module


def test_every_example_spec_is_covered():
    specs = {f"{p.parent.name}/{p.name}" for p in (REPO / "examples").glob("*/spec*.yaml")}
    assert specs == {f"{example}/{spec}" for example, spec, _ in _script().EXAMPLES}


@pytest.mark.slow
def test_examples_export_to_the_recorded_bytes():
    jax_version, jaxlib_version, recorded = _recorded()
    if (jax.__version__, jaxlib.__version__) != (jax_version, jaxlib_version):
        pytest.skip(f"digests were recorded with jax {jax_version} / jaxlib {jaxlib_version}; this is jax "
                    f"{jax.__version__} / jaxlib {jaxlib.__version__}")
    assert dict(_script().digests()) == recorded
