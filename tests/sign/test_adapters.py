"""The batch engines' adapters take require_signature as every holder of LoadOptions does: jaxport.ray.Predictor,
jaxport.beam.ModelHandler and jaxport.spark.predict_udf refuse an artifact signed by an untrusted key before they read
it (`make test-serve` runs this in the environment with Ray, Beam and Spark)."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

pytest.importorskip("model_signing", reason="the signature tests need the extra jaxport[sign] (pip install "
                                            "'jaxport[sign]'; make test installs it)")

import jaxport  # noqa: E402

from .keys import key_pair  # noqa: E402

GOLDEN = Path(__file__).parents[1] / "golden" / "1.0"


@pytest.fixture
def signed(tmp_path):
    ci, other = key_pair(tmp_path, "ci"), key_pair(tmp_path, "other")
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    jaxport.sign(art, ci[0])
    return art, ci[1], other[1]


@pytest.mark.parametrize(("module", "build"), [
    ("ray", lambda m, art, key: m.Predictor(str(art), require_signature=key)),
    ("beam", lambda m, art, key: m.ModelHandler(str(art), require_signature=key)),
    ("spark", lambda m, art, key: m.predict_udf(str(art), require_signature=key, ship=False)),
])
def test_an_adapter_refuses_an_untrusted_signature(module, build, signed):
    engine = {"ray": "ray", "beam": "apache_beam", "spark": "pyspark"}[module]
    pytest.importorskip(engine, reason=f"jaxport.{module} needs {engine} (jaxport[{module}]; make test-serve)")
    adapter = importlib.import_module(f"jaxport.{module}")
    art, pub, other = signed
    with pytest.raises(jaxport.SignatureError, match=r"which is not trusted \(--require-signature: "):
        build(adapter, art, other)
    build(adapter, art, pub)
