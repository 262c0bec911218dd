"""Ray Data (local, num_cpus=2) over a function whose output rows depend on their positions (``x +
arange(rows)``): Ray cuts the dataset into batches of its own choosing, which would number each batch's rows from 0,
so the actor refuses the function at start with the proof's reason instead of answering. Skips when Ray (the extra
jaxport[ray]) is not installed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import jaxport

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray Data needs the extra jaxport[ray] (pip install 'jaxport[ray]')", allow_module_level=True)

NUMBERED = "import jax.numpy as jnp\n\n\ndef f(x):\n    return x + jnp.arange(x.shape[0], dtype=x.dtype)[:, None]\n"
SPEC = "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - \"f32[batch, 3]\"\n"


def test_ray_refuses_a_function_whose_rows_depend_on_their_positions(tmp_path, monkeypatch):
    import ray

    from jaxport.ray import Predictor

    (tmp_path / "model.py").write_text(NUMBERED)
    (tmp_path / "spec.yaml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    path = jaxport.export("model.py:f", "spec.yaml", output=tmp_path / "numbered.jaxport").path
    monkeypatch.setenv("JAXPORT_CACHE_DIR", str(tmp_path / "cache"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ds = ray.data.from_items([{"x": np.full(3, i, np.float32)} for i in range(20)])
        with pytest.raises(Exception) as e:
            ds.map_batches(Predictor, fn_constructor_args=(str(path),), batch_size=8, concurrency=1).take_all()
    finally:
        ray.shutdown()
    assert (f"jaxport.errors.UsageError: {path}: function 'f': a batch engine cuts the dataset into batches of rows "
            f"along batch, which would change the answers: splitting or merging batch is not proven safe: output "
            f"'output' depends on the rows' positions along batch (stablehlo.iota: an arange over batch). Call the "
            f"function on the whole input (jaxport call, jaxport.load), or export one whose output rows each depend "
            f"on their own input row only.") in str(e.value)
