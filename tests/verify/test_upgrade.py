"""``jaxport upgrade``: the same program and weights re-serialized by the running JAX, checked before it is written.

Upgrades of artifacts that jax 0.9.1 and 0.10.2 wrote are in ``tests/test_cross_version.py``; here the artifacts are
made by this JAX for an older one (``--for-jax``), or hold a payload that an old JAX serialized (the golden
serializations of ``tests/golden/jaxexport``), which this JAX refuses to read and jaxport reads itself.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxport
from jaxport.artifact import container
from jaxport.artifact.container import open_artifact
from jaxport.artifact.model import replace
from jaxport.artifact.window.compat import window
from jaxport.errors import VerificationError
from jaxport.verify import upgrade as upgrade_mod
from tests.support import EXAMPLES

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "jaxexport"
MLP = (f"{EXAMPLES}/mlp/model.py:predict", EXAMPLES / "mlp" / "spec.yaml")
#: Serializations whose layout jax >= 0.11.1 refuses as older than its window.
REFUSED = tuple(int(p) for p in jax.__version__.split(".")[:3]) >= (0, 11, 1)


@pytest.fixture
def today(monkeypatch):
    """Today is the running JAX's release day: its fresh window has six months left, whenever the test runs."""
    released = window(jax.__version__).dating.released
    if released is None:
        pytest.skip(f"jax {jax.__version__} is not in the release table")
    monkeypatch.setenv("JAXPORT_TODAY", released.isoformat())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_artifact_for_an_older_jax_is_upgraded_to_this_one(tmp_path, run_cli, today):
    old = jaxport.export(*MLP, output=tmp_path / "old.jaxport", for_jax="0.9.1").path
    res = run_cli("upgrade", str(old), "-o", str(tmp_path / "new.jaxport"))
    assert res.exit_code == 0, res.stderr
    assert res.stdout.splitlines()[0].startswith(f"Upgraded {tmp_path / 'new.jaxport'} (")
    assert res.stdout.splitlines()[0].endswith(f": written by jax {jax.__version__}, was jax {jax.__version__} "
                                               f"for jax 0.9.1")
    assert res.stdout.splitlines()[1] == "  predict: same outputs as the old program in 3 cases"
    with open_artifact(tmp_path / "new.jaxport") as art:
        p = art.model.producer
        assert (p.jax, p.for_jax) == (jax.__version__, None)
        assert p.upgraded_from is not None
        assert (p.upgraded_from.jax, p.upgraded_from.for_jax, p.upgraded_from.sha256) == \
            (jax.__version__, "0.9.1", _sha256(old))
        f, was = art.model.functions["predict"], jaxport.open_artifact(old).model.functions["predict"]
        assert (f.inputs, f.outputs, f.dims, f.signature) == (was.inputs, was.outputs, was.dims, was.signature)
        assert was.stablehlo_version == "1.13.8"
    x = np.load(EXAMPLES / "mlp" / "x.npy")
    np.testing.assert_array_equal(jaxport.load(tmp_path / "new.jaxport")(x), jaxport.load(old)(x))
    check = run_cli("check", str(tmp_path / "new.jaxport"), "--min-days-left", "90")
    assert check.exit_code == 0, check.stdout + check.stderr


def test_upgrading_twice_gives_the_same_bytes(tmp_path):
    old = jaxport.export(*MLP, output=tmp_path / "old.jaxport", for_jax="0.9.1").path
    a = jaxport.upgrade(old, tmp_path / "a.jaxport")
    b = jaxport.upgrade(old, tmp_path / "b.jaxport")
    assert a.path is not None and b.path is not None
    assert a.path.read_bytes() == b.path.read_bytes()


def test_an_artifact_this_jax_wrote_has_nothing_to_upgrade_and_is_copied(mlp_path, tmp_path, run_cli):
    """A script that uploads -o next finds it: the artifact as it is (the same bytes, as jaxport writes it)."""
    res = run_cli("upgrade", str(mlp_path), "-o", str(tmp_path / "new.jaxport"))
    assert res.exit_code == 0, res.stderr
    assert res.stdout == (f"Nothing to upgrade: {mlp_path} was written by jax {jax.__version__}, the JAX running "
                          f"here, which reads it itself; copied it as it is to {tmp_path / 'new.jaxport'}.\n")
    assert (tmp_path / "new.jaxport").read_bytes() == mlp_path.read_bytes()
    assert (tmp_path / "new.jaxport.manifest.json").is_file()


def test_upgrade_never_writes_over_its_input(tmp_path, run_cli):
    old = jaxport.export(*MLP, output=tmp_path / "old.jaxport", for_jax="0.9.1").path
    before = old.read_bytes()
    res = run_cli("upgrade", str(old), "-o", str(old))
    assert res.exit_code == 11
    assert res.stderr == (f"error[output]: {old}: is the artifact being upgraded; upgrade writes a new artifact and "
                          f"never replaces its input. Choose another output path (and rename it over the old "
                          f"artifact afterwards if you mean to replace it).\n")
    assert old.read_bytes() == before


def test_a_different_new_program_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    old = jaxport.export(*MLP, output=tmp_path / "old.jaxport", for_jax="0.9.1").path
    real = upgrade_mod.reexport

    def off_by_one(exported, f, where):
        new = real(exported, f, where)
        from jax import export

        return export.export(jax.jit(lambda x: new.call(x) + 1.0), platforms=new.platforms)(*new.in_avals)

    monkeypatch.setattr(upgrade_mod, "reexport", off_by_one)
    with pytest.raises(VerificationError, match=re.escape(
            f"{old}: function 'predict': the upgraded program's output 'output' differs from the old program's at "
            f"batch=1; nothing was written.")):
        jaxport.upgrade(old, tmp_path / "new.jaxport")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.jaxport", "old.jaxport.manifest.json"]


def _with_old_payload(tmp_path: Path, case: str = "mlp", version: str = "0.4.35") -> Path:
    """An artifact whose payload is the golden serialization an old JAX wrote, its manifest jaxport's."""
    blob = GOLDEN / version / f"{case}.jaxexport"
    jaxport.import_stablehlo(blob, output=tmp_path / "imported.jaxport")
    with open_artifact(tmp_path / "imported.jaxport") as art:
        members = {n: art.read(n) for n in art.model.members}
        (fname, f), = art.model.functions.items()
        members[f.payload] = blob.read_bytes()
        producer = replace(art.model.producer, jax=version, jaxlib=version)
        manifest = replace(art.model, producer=producer,
                           functions={fname: replace(f, calling_convention_version=9)})
    container.write_artifact(tmp_path / "old.jaxport", manifest, members)
    return tmp_path / "old.jaxport"


@pytest.mark.skipif(not REFUSED, reason="this JAX reads serialization version 2 itself")
def test_a_payload_older_than_jaxs_window_runs_from_its_stablehlo_with_one_note(tmp_path, run_cli):
    old = _with_old_payload(tmp_path)
    loaded = jaxport.load(old)
    assert loaded.notes == [
        f"{old}: function 'mlp' was written by an older JAX (serialization version 2), older than this JAX's window: "
        f"jaxport read it and runs its StableHLO; 'jaxport upgrade' re-serializes it with this JAX for a fresh "
        f"window."]
    with np.load(GOLDEN / "0.4.35" / "mlp.npz") as z:
        for size in ("s0", "s1"):
            np.testing.assert_allclose(loaded(z[f"{size}_in_0"]), z[f"{size}_out_0"], rtol=2e-6, atol=2e-7)
        np.save(tmp_path / "x.npy", z["s1_in_0"])
    res = run_cli("call", str(old), "--inputs", str(tmp_path / "x.npy"), "--no-cache", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["warnings"] == loaded.notes


@pytest.mark.skipif(not REFUSED, reason="this JAX reads serialization version 2 itself")
def test_an_artifact_with_a_payload_older_than_jaxs_window_is_upgraded(tmp_path, today):
    old = _with_old_payload(tmp_path, "dict_io")
    result = jaxport.upgrade(old, tmp_path / "new.jaxport")
    assert result.compared == {"dict_io": 3} and len(result.notes) == 1
    new = jaxport.load(tmp_path / "new.jaxport")
    assert new.notes == []
    with np.load(GOLDEN / "0.4.35" / "dict_io.npz") as z:
        out = new({"a": z["s1_in_0"], "b": z["s1_in_1"]}, scale=z["s1_in_2"])
        np.testing.assert_array_equal(out["prod"], z["s1_out_0"])
        np.testing.assert_array_equal(out["sum"], z["s1_out_1"])
    with open_artifact(tmp_path / "new.jaxport") as art:
        assert art.model.producer.upgraded_from.jax == "0.4.35"
        assert art.model.functions["dict_io"].calling_convention_version == \
            jax.config.jax_export_calling_convention_version  # type: ignore[attr-defined]


def test_upgrade_into_a_directory_writes_the_input_file_name_there_and_refuses_a_link_to_its_input(mlp_path, tmp_path,
                                                                                                  run_cli):
    (tmp_path / "out").mkdir()
    res = run_cli("upgrade", str(mlp_path), "-o", str(tmp_path / "out"))
    assert res.exit_code == 0, res.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["mlp.jaxport", "mlp.jaxport.manifest.json"]
    assert (tmp_path / "out" / "mlp.jaxport").read_bytes() == mlp_path.read_bytes()
    (tmp_path / "link.jaxport").symlink_to(mlp_path)
    res = run_cli("upgrade", str(mlp_path), "-o", str(tmp_path / "link.jaxport"))
    assert res.exit_code == 11
    assert res.stderr == (f"error[output]: {tmp_path / 'link.jaxport'}: is the artifact being upgraded; upgrade writes "
                          f"a new artifact and never replaces its input. Choose another output path (and rename it "
                          f"over the old artifact afterwards if you mean to replace it).\n")
