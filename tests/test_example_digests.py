"""Artifacts are byte-identical across refactors: every bundled example exports to the recorded sha256.

The digests depend on the JAX that lowers the programs, so they are pinned per JAX release, one file each in
``tests/golden/example-digests/jax-<version>.txt``, for every JAX that ``make test`` and ``make test-compat`` run
(the newest and the oldest supported) and jax 0.10.2 (the newest for Python 3.11). Regenerate a file with
``scripts/example_digests.py > tests/golden/example-digests/jax-$(python -c 'import jax; print(jax.__version__)').txt``
under that JAX, in a change that means to alter artifacts.
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
DIGESTS = REPO / "tests" / "golden" / "example-digests"
#: The JAX releases CI runs (make test: the newest, 0.12.1; make test-compat: the oldest), the newest for Python 3.11,
#: and 0.12.0.1 (the newest with a libtpu on PyPI: make test-tpu-deviceless's).
PINNED = ("0.9.1", "0.10.2", "0.12.0.1", "0.12.1")


def _recorded(path: Path) -> tuple[str, str, dict[str, str]]:
    text = path.read_text()
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


def test_digests_are_pinned_for_every_jax_ci_runs():
    for version in PINNED:
        path = DIGESTS / f"jax-{version}.txt"
        assert path.is_file(), path
        jax_version, jaxlib_version, rows = _recorded(path)
        assert (jax_version, jaxlib_version) == (version, version)
        assert set(rows) == {f"{example}/{spec} {entry}" for example, spec, entry in _script().EXAMPLES}


@pytest.mark.slow
def test_examples_export_to_the_recorded_bytes():
    path = DIGESTS / f"jax-{jax.__version__}.txt"
    if not path.is_file():
        pytest.skip(f"no digests are pinned for jax {jax.__version__} (pinned: "
                    f"{', '.join(sorted(p.stem for p in DIGESTS.glob('jax-*.txt')))}); see this file's docstring")
    jax_version, jaxlib_version, recorded = _recorded(path)
    if jaxlib.__version__ != jaxlib_version:
        pytest.skip(f"digests for jax {jax_version} were recorded with jaxlib {jaxlib_version}; this is jaxlib "
                    f"{jaxlib.__version__}")
    script = _script()
    # An example holding a library's source locations is compared only under the library release it was recorded
    # with (a new flax moves the lines its layers are at); the others always.
    libraries = _libraries(path)
    other = {lib for lib, v in script.library_versions().items() if libraries.get(lib) != v}
    keep = {name for name in recorded if script.LIBRARIES.get(name.split("/")[0]) not in other}
    assert keep, "every example depends on a library release other than the recorded one"
    assert {k: v for k, v in script.digests() if k in keep} == {k: recorded[k] for k in keep}


def _libraries(path: Path) -> dict[str, str]:
    """The library releases a digest file was recorded with (its ``# libraries:`` line)."""
    m = re.search(r"^# libraries: (.*)$", path.read_text(), re.M)
    return dict(item.rsplit(" ", 1) for item in m.group(1).split(", ")) if m else {}
