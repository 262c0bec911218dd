"""The custom-call allowlist: the installed JAX's guarantees, reviewed, and enforced again at load."""

from __future__ import annotations

import shutil

import jax
import pytest

import jaxport
from jaxport.artifact.container import open_artifact
from jaxport.jaxprivate.exported import export_allowing_every_custom_call
from jaxport.jaxprivate.stable import (
    REVIEWED_JAX_VERSION,
    REVIEWED_STABLE_TARGETS,
    STABLE_TARGETS_ADDED_IN,
    guaranteed_stable_custom_calls,
    reviewed_stable_targets,
)
from jaxport.program.checks import check_custom_calls, unstable_targets
from jaxport.program.module_scan import CustomCall, ModuleScan
from tests.support import EXAMPLES


def test_allowlist_matches_the_reviewed_copy():
    """The installed JAX's set is the reviewed one, less the targets a later supported release added (an older
    supported JAX, as under ``make test-compat``)."""
    installed, reviewed = guaranteed_stable_custom_calls(), reviewed_stable_targets(jax.__version__)
    added, removed = sorted(installed - reviewed), sorted(reviewed - installed)
    assert not added and not removed, (
        f"jax {jax.__version__} changed the custom-call targets it guarantees stable (reviewed for "
        f"{REVIEWED_JAX_VERSION}, with the targets STABLE_TARGETS_ADDED_IN later releases): added {added}, removed "
        f"{removed}. Review the change in JAX's export code, then update REVIEWED_STABLE_TARGETS (or "
        f"STABLE_TARGETS_ADDED_IN) in jaxport/jaxprivate/stable.py.")


def test_reviewed_set_per_supported_release():
    """The per-release delta, as read from each supported release's jax/_src/export/_export.py: jax 0.9.1 and 0.9.2
    lack hipsolver_gesdd_ffi, which 0.10.0 added; releases before 0.12.1 lack lgamma's and digamma's kernels."""
    gamma = {"cpu_digamma_ffi", "cpu_lgamma_ffi", "cu_digamma_ffi", "cu_lgamma_ffi", "hip_digamma_ffi",
             "hip_lgamma_ffi"}
    assert STABLE_TARGETS_ADDED_IN == {"0.10.0": {"hipsolver_gesdd_ffi"}, "0.12.1": gamma}
    assert "hipsolver_gesdd_ffi" in REVIEWED_STABLE_TARGETS and gamma <= REVIEWED_STABLE_TARGETS
    for version in ("0.9.1", "0.9.2"):
        assert reviewed_stable_targets(version) == REVIEWED_STABLE_TARGETS - {"hipsolver_gesdd_ffi"} - gamma
    for version in ("0.10.0", "0.10.1", "0.10.2+cuda12", "0.12.0.1"):
        assert reviewed_stable_targets(version) == REVIEWED_STABLE_TARGETS - gamma
    assert reviewed_stable_targets(REVIEWED_JAX_VERSION) == REVIEWED_STABLE_TARGETS == reviewed_stable_targets("0.12.1")



def _refusal(targets: list[str]) -> ValueError:
    """JAX's refusal of custom calls (jax/_src/export/_export.py), naming each op as MLIR prints it."""
    ops = "\n".join(f"%0 = stablehlo.custom_call @{t}(%arg0) : (tensor<4xf32>) -> tensor<4xf32> at "
                    f'loc("model.py":3:4)' for t in targets)
    return ValueError("Cannot serialize code with custom calls whose targets have no compatibility guarantees. See "
                      "https://docs.jax.dev/en/latest/export/export.html#compatibility-guarantees-for-custom-calls. "
                      f"Examples are:\n{ops}.\n")


def test_every_custom_call_allowed_without_the_wildcard():
    """Before jax 0.10.2, "ALL" is one more target name: the targets each refusal names are allowed in turn (bare
    and quoted names), until the export passes; a refusal naming nothing new is raised as it is."""
    rounds = []

    def run_export(checks):
        allowed = {c.is_custom_call() for c in checks}
        rounds.append(sorted(allowed))
        refused = [t for t in ("my_target", "ns.other_1", '"with space"') if t.strip('"') not in allowed]
        if refused:
            raise _refusal(refused if len(rounds) > 1 else refused[:2])  # the second round finds one more
        return "exported"

    assert export_allowing_every_custom_call(run_export) == "exported"
    assert rounds == [["ALL"], ["ALL", "my_target", "ns.other_1"], ["ALL", "my_target", "ns.other_1", "with space"]]

    tries = []

    def stuck(checks):  # refuses a target however often it is allowed
        tries.append(len(checks))
        raise _refusal(["stuck"])

    with pytest.raises(ValueError, match="stuck"):
        export_allowing_every_custom_call(stuck)
    assert tries == [1, 2]

    def other(checks):
        raise ValueError("something else")

    with pytest.raises(ValueError, match="something else"):
        export_allowing_every_custom_call(other)


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


def test_the_installed_jaxlibs_host_callbacks_are_refused():
    """Tripwire per JAX version: every host callback the installed jaxlib registers is refused, and the reviewed
    floor holds the ones this JAX registers on the CPU."""
    import jax  # noqa: F401 - the registry is read from an imported JAX

    from jaxport.jaxprivate.stable import registered_host_callbacks
    from jaxport.program.checks import HOST_CALLBACK_TARGETS, host_callback_targets, refused_target

    installed = registered_host_callbacks()
    assert "xla_ffi_python_cpu_callback" in installed
    new = sorted(installed - HOST_CALLBACK_TARGETS)
    assert not new, f"review the new host callbacks {new}, then add them to HOST_CALLBACK_TARGETS"
    for name in installed:
        assert name.casefold() in host_callback_targets() and refused_target(name) == "host callback"
