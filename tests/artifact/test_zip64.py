"""Artifacts over 4 GB use zip64 records. Writing 4 GB in a test is too slow, so the zip64 threshold is lowered:
the same code paths (zip64 extra fields in local and central headers, zip64 end records) then run on small files."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

import jaxport
from jaxport.artifact.container import ALIGNMENT, open_artifact
from tests.support import EXAMPLES, example


@pytest.fixture
def small_zip64_limit(monkeypatch):
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 4096)
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)


def test_zip64_artifact_round_trip(tmp_path, small_zip64_limit):
    out = tmp_path / "big.jaxport"
    jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", EXAMPLES / "mlp" / "spec-npz.yaml", output=out)
    data = out.read_bytes()
    assert b"PK\x06\x06" in data  # a zip64 end-of-central-directory record was written
    with open_artifact(out) as art:
        art.verify_all()
        for name, member in art.members.items():
            if name != "manifest.json":
                assert member.offset % ALIGNMENT == 0, name
    x = np.load(EXAMPLES / "mlp" / "x.npy")
    params = dict(np.load(EXAMPLES / "mlp" / "params.npz"))
    model = example("mlp")
    np.testing.assert_allclose(jaxport.load(out)(x), model.apply(params, x), rtol=1e-6, atol=1e-6)
