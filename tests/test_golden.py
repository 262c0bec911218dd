"""Artifacts written by every released format version keep loading and running (see tests/golden/README.md)."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

import jaxport
from jaxport import dtypes
from jaxport.artifact.container import open_artifact

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*/*.jaxport"))


def test_every_released_format_has_golden_artifacts():
    assert {p.parent.name for p in CASES} >= {"1.0", "1.1", "1.2", "1.3"}


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_artifact_loads_and_runs(path: Path):
    base = path.with_suffix("")
    inputs = dict(np.load(f"{base}.inputs.npz"))
    expected = dict(np.load(f"{base}.expected.npz"))
    with open_artifact(path) as art:
        art.verify_all()
    loaded = jaxport.load(path)
    for inp in loaded.function_record.inputs:  # a key input's file holds its key data, as for jaxport call
        if dtypes.is_key(inp.dtype):
            inputs[inp.name] = jax.random.wrap_key_data(inputs[inp.name], impl=dtypes.KEYS[inp.dtype].impl)
    got = dict(loaded.run(inputs).leaves)
    assert set(got) == set(expected)
    for out in loaded.function_record.outputs:  # int4 and float4 outputs were saved as numpy does: raw void bytes
        if expected[out.name].dtype.kind == "V" and dtypes.from_numpy(expected[out.name].dtype) is None:
            expected[out.name] = expected[out.name].view(dtypes.to_numpy(out.dtype))
            np.testing.assert_array_equal(np.asarray(got[out.name]).view(np.uint8),
                                          expected[out.name].view(np.uint8), err_msg=out.name)  # bit for bit
    for name, want in expected.items():
        np.testing.assert_allclose(np.asarray(got[name], np.float32), np.asarray(want, np.float32), rtol=1e-5,
                                   atol=1e-5, err_msg=name)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_artifact_inspects(path: Path, run_cli):
    res = run_cli("inspect", path)
    assert res.exit_code == 0, res.stderr
    assert "sha256 verified" in res.stdout
