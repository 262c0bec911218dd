"""``export --for-jax VERSION``: an artifact whose payloads an older JAX reads (the calls under that JAX are in
``tests/test_cross_version.py``)."""

from __future__ import annotations

import json
import re

import jax
import numpy as np
import pytest

import jaxport
from jaxport.artifact.window.compat import serializer_version, version_key, window
from jaxport.artifact.window.payload import stablehlo_version
from jaxport.artifact.window.releases import STABLEHLO
from jaxport.export.writing.target import module_for, target
from tests.support import EXAMPLES

MLP = (f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml")


def _up_to_this_jax(*versions: str) -> list[str]:
    return [v for v in versions if version_key(v) <= version_key(jax.__version__)]


@pytest.mark.parametrize("version", _up_to_this_jax("0.9.1", "0.10.2"))
def test_an_artifact_for_an_older_jax_holds_its_stablehlo_and_is_dated_by_it(version, tmp_path):
    plain = jaxport.export(*MLP, output=tmp_path / "plain.jaxport")
    older = jaxport.export(*MLP, output=tmp_path / "older.jaxport", for_jax=version)
    f = older.model.functions["predict"]
    assert f.stablehlo_version == STABLEHLO[version]
    with jaxport.open_artifact(older.path) as art:
        assert stablehlo_version(art.read(f.payload)) == tuple(int(p) for p in STABLEHLO[version].split("."))
        assert art.model.producer.for_jax == version and art.model.producer.jax == jax.__version__
        assert serializer_version(art.model.producer) == version
    manifest = json.loads((tmp_path / "older.jaxport.manifest.json").read_text())
    assert manifest["producer"]["for_jax"] == version
    assert window(version).sentence(written=f"written by jax {jax.__version__} for") in jaxport_inspect(older.path)
    # The same program: the running JAX computes the same numbers from either payload.
    x = np.load(EXAMPLES / "mlp" / "x.npy")
    np.testing.assert_array_equal(jaxport.load(older.path)(x), jaxport.load(plain.path)(x))


def jaxport_inspect(path) -> str:
    from click.testing import CliRunner
    from jaxport_cli.main import cli

    return CliRunner().invoke(cli, ["inspect", str(path)], terminal_width=200).stdout


def test_a_plain_export_records_no_target(mlp_path):
    with jaxport.open_artifact(mlp_path) as art:
        assert art.model.producer.for_jax is None and "for_jax" not in json.dumps(art.model.to_json())


@pytest.mark.parametrize("version", ["0.8.3", "0.13.0", "latest", "0.9"])
def test_a_target_outside_the_supported_range_is_refused(version, tmp_path):
    with pytest.raises(jaxport.UsageError, match=re.escape(
            f"--for-jax {version}: not a JAX release from 0.9.1 (the oldest jaxport supports) up to "
            f"{jax.__version__} (the one running here).")):
        jaxport.export(*MLP, output=tmp_path / "x.jaxport", for_jax=version)
    assert not (tmp_path / "x.jaxport").exists()


def test_each_target_is_written_as_the_stablehlo_its_jax_reads():
    assert target("0.9.1").stablehlo == "1.13.8"
    if version_key(jax.__version__) >= (0, 10, 2):
        assert target("0.10.2").stablehlo == "1.17.0"


#: A StableHLO module with an operation StableHLO 1.13 and 1.14 cannot write: ``async_start`` with a future type
#: (VHLO 1.15, first read by jax 0.10.0).
_ASYNC = """
func.func public @main(%arg0: tensor<8x2xf32>) -> tensor<8x8xf32> {
  %0 = "stablehlo.async_start"(%arg0) ({
  ^bb0(%a: tensor<8x2xf32>):
    %1 = "stablehlo.all_gather"(%a) {all_gather_dim = 1 : i64,
                                        replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>}
      : (tensor<8x2xf32>) -> tensor<8x8xf32>
    "stablehlo.return"(%1) : (tensor<8x8xf32>) -> ()
  }) : (tensor<8x2xf32>) -> !stablehlo.future<tensor<8x8xf32>>
  %2 = "stablehlo.async_done"(%0) : (!stablehlo.future<tensor<8x8xf32>>) -> tensor<8x8xf32>
  return %2 : tensor<8x8xf32>
}
"""


@pytest.mark.skipif(version_key(jax.__version__) < (0, 10, 2), reason="needs a JAX from 0.10.2 on as a target")
def test_an_operation_the_target_lacks_is_refused_naming_it_and_the_oldest_jax_with_it():
    from jax.extend.mlir import ir

    from jaxport.errors import ExportError
    from jaxport.jaxprivate.mlir import make_ir_context, serialize_portable_artifact, serialize_with_sdy

    with make_ir_context():
        data = serialize_portable_artifact(ir.Module.parse(_ASYNC), "1.22.0", serialize_with_sdy())
    assert module_for(data, target("0.10.2"), "m.jaxport", "f")  # 1.17.0 has it
    with pytest.raises(ExportError) as e:
        module_for(data, target("0.9.1"), "m.jaxport", "f")
    assert str(e.value) == (
        "m.jaxport: function 'f' cannot be written for jax 0.9.1 (StableHLO 1.13.8): it uses the operation "
        "stablehlo.async_start, which that StableHLO lacks; the oldest JAX whose StableHLO has it is jax 0.10.0. "
        "Give --for-jax 0.10.0 or newer, or change the function.")
