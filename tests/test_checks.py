"""The custom-call allowlist: the installed JAX's guarantees, reviewed, and enforced again at load."""

from __future__ import annotations

import shutil

import jax
import pytest

import jaxport
from jaxport._jax_internals import REVIEWED_JAX_VERSION, REVIEWED_STABLE_TARGETS, guaranteed_stable_custom_calls
from jaxport.artifact.container import open_artifact
from jaxport.checks import check_custom_calls, unstable_targets
from jaxport.module_scan import CustomCall, ModuleScan

from .conftest import EXAMPLES


def test_allowlist_matches_the_reviewed_copy():
    installed = guaranteed_stable_custom_calls()
    added, removed = sorted(installed - REVIEWED_STABLE_TARGETS), sorted(REVIEWED_STABLE_TARGETS - installed)
    assert not added and not removed, (
        f"jax {jax.__version__} changed the custom-call targets it guarantees stable (reviewed for "
        f"{REVIEWED_JAX_VERSION}): added {added}, removed {removed}. Review the change in JAX's export code, then "
        f"update REVIEWED_STABLE_TARGETS in jaxport/_jax_internals.py.")


def test_unstable_targets_ignores_stable_and_allowed_ones():
    scan = ModuleScan(custom_calls=[CustomCall("shape_assertion", "loc(unknown)"),
                                    CustomCall("lapack_sgetrf_ffi", "loc(unknown)"),
                                    CustomCall("mine", 'loc("model.py":3:4)'),
                                    CustomCall("theirs", "loc(unknown)")])
    assert unstable_targets(scan, {"theirs"}) == ["mine"]
    with pytest.raises(jaxport.PolicyError) as e:
        check_custom_calls("model.py:f", scan, set())
    assert str(e.value) == (
        "model.py:f: the program uses custom-call targets that JAX does not guarantee to keep stable:\n"
        "  mine (used 1x, first at model.py:3:4)\n"
        "  theirs (used 1x, first at unknown location)\n"
        "An artifact using them may stop loading with another jaxlib. If you ship the kernels yourself, allow them "
        "with 'allow_custom_calls: [mine, theirs]' in the spec or --allow-custom-call mine --allow-custom-call "
        "theirs.")


def test_load_rechecks_custom_calls_against_the_manifest(tmp_path, make_artifact):
    """An artifact whose manifest was edited to drop an allowance is refused at load, not just at export."""
    src = ("import jax\n\ndef f(x):\n    return jax.ffi.ffi_call('my_target', "
           "jax.ShapeDtypeStruct(x.shape, x.dtype))(x)\n")
    path = make_artifact(src, "jaxport: 1\nargs: ['f32[4]']\nallow_custom_calls: [my_target]\n")
    art = open_artifact(path)
    manifest = art.manifest
    manifest["functions"]["f"]["allowed_custom_calls"] = []
    members = {name: art.read(name) for name in art.members if name != "manifest.json"}
    art.close()
    from jaxport.artifact.container import write_artifact

    edited = tmp_path / "edited.jaxport"
    write_artifact(edited, manifest, members)
    with pytest.raises(jaxport.PolicyError, match="my_target"):
        jaxport.load(edited)


def test_pallas_kernel_is_allowed_by_jax_guarantee(tmp_path):
    shutil.copytree(EXAMPLES / "pallas", tmp_path / "pallas")
    r = jaxport.export(f"{tmp_path}/pallas/model.py:add", tmp_path / "pallas" / "spec.yaml",
                       output=tmp_path / "p.jaxport")
    assert r.manifest["functions"]["add"]["custom_calls"] == [
        {"target": "tpu_custom_call", "count": 1, "stability": "guaranteed"}]
