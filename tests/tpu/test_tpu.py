"""On a TPU: the README's workflow, artifacts and executables built on a machine without one, Pallas kernels with
their gradients, and the refusals that belong to the chip (see conftest.py for where the build comes from)."""

from __future__ import annotations

import importlib.util
import json
import shutil

import numpy as np
import pytest

import jaxport
from jaxport.run.cache import compilation_cache
from jaxport.run.executables import read_record
from tests.support import EXAMPLES


def _module(relative: str):
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_").removesuffix(".py"), EXAMPLES / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_workflow_runs_on_the_tpu(run_cli, tmp_path, monkeypatch):
    import jax

    monkeypatch.chdir(tmp_path)
    r = run_cli("export", EXAMPLES / "mlp/model.py:predict", "--shapes", EXAMPLES / "mlp/spec.yaml",
                "-o", "mlp.jaxport")
    assert r.exit_code == 0, r.stderr
    shown = json.loads(run_cli("inspect", "mlp.jaxport", "--json").stdout)
    assert shown["functions"]["predict"]["platforms"] == ["tpu"]
    r = run_cli("call", "mlp.jaxport", "--inputs", EXAMPLES / "mlp/x.npy", "-o", "out.npy", "--no-cache")
    assert r.exit_code == 0, r.stderr
    x = np.load(EXAMPLES / "mlp/x.npy")
    live = np.asarray(jax.jit(_module("mlp/model.py").predict)(x))
    np.testing.assert_allclose(np.load("out.npy"), live, rtol=1e-5, atol=1e-5)
    r = run_cli("verify", "mlp.jaxport", "--root", EXAMPLES / "mlp")
    assert r.exit_code == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["mlp", "mlp-bound"])
def test_cpu_host_artifacts_verify_on_both_platforms(build, run_cli, name):
    # the entry point and bound source are recorded relative to the spec's directory
    r = run_cli("verify", build / f"{name}.jaxport", "--platform", "cpu", "--platform", "tpu", "--json",
                "--root", EXAMPLES / "mlp")
    assert r.exit_code == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["passed"] is True
    assert {c["platform"] for c in report["cases"]} == {"cpu", "tpu"}


#: (artifact, dimension values of the call): every one has shipped executables in the build's cache.
SHIPPED = [("mlp", {"batch": 8}), ("mlp", {"batch": 64}), ("mlp-bound", {"batch": 64}), ("pallas-add", {}),
           ("flash-attention", {})]


@pytest.mark.parametrize("name,dims", SHIPPED)
def test_executables_built_without_a_tpu_run_with_no_compile(build, name, dims, tmp_path):
    path = build / f"{name}.jaxport"
    with compilation_cache(None):  # compiled here, nothing cached
        compiled = jaxport.load(path)
        inputs = compiled.random_inputs(dims, seed=3)
        expected = compiled.run(inputs)
    assert not expected.compilation.shipped
    cache = tmp_path / "cache"
    shutil.copytree(build / "cache", cache)
    cache.chmod(0o700)
    with compilation_cache(cache):
        loaded = jaxport.load(path)
        got = loaded.run(inputs)
    assert got.compilation.shipped, loaded.notes
    assert got.compilation.source == "shipped"
    assert loaded.notes == []
    for (n1, a), (n2, b) in zip(expected.leaves, got.leaves):
        assert n1 == n2
        np.testing.assert_array_equal(a, b)


def test_an_executable_built_for_another_jaxlib_falls_back_with_its_note(build, tmp_path):
    """A record whose key names another jaxlib (as one built by another JAX is) is not used: compiled, one note."""
    path = build / "mlp.jaxport"
    with jaxport.open_artifact(path) as art:
        program = art.model.members[art.model.functions["predict"].payload].sha256
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    for record in (build / "cache").iterdir():
        found, _ = read_record(record)
        if found is None or found.header["program"] != program:
            continue
        header = dict(found.header)
        header["facts"] = {**header["facts"], "jaxlib": "0.0.1"}
        raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        data = record.read_bytes()
        start = len(b"JAXPORT-EXECUTABLE/1\n") + 8
        length = int.from_bytes(data[start - 8:start], "little")
        out = data[:start - 8] + len(raw).to_bytes(8, "little") + raw + data[start + length:]
        (cache / record.name).write_bytes(out)
        (cache / record.name).chmod(0o644)
    with compilation_cache(cache):
        loaded = jaxport.load(path)
        run = loaded.run(loaded.random_inputs({"batch": 8}))
    assert not run.compilation.shipped
    assert len(loaded.notes) == 1
    assert "jaxlib 0.0.1 (here: " in loaded.notes[0]
    assert loaded.notes[0].endswith("compiling here instead (jaxport warmup --target builds one for this machine).")


def test_flash_attention_gradients_run_the_pallas_backward_kernels(build):
    import jax
    import jax.numpy as jnp

    loaded = jaxport.load(build / "flash-attention.jaxport")
    live = _module("pallas/flash_attention.py").attention
    keys = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(key, (1, 2, 256, 128), jnp.float32) for key in keys)
    np.testing.assert_allclose(np.asarray(loaded(q, k, v)), np.asarray(jax.jit(live)(q, k, v)), rtol=1e-5, atol=1e-5)
    grad = jax.grad(lambda *a: jnp.sum(loaded(*a) ** 2), argnums=(0, 1, 2))(q, k, v)
    expected = jax.grad(lambda *a: jnp.sum(live(*a) ** 2), argnums=(0, 1, 2))(q, k, v)
    for g, e in zip(grad, expected):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4)


def test_a_kernel_over_the_scoped_vmem_is_refused_with_the_sizes_here_and_where_it_was_built(build, run_cli):
    built = json.loads((build / "vmem-check.json").read_text())
    assert built["passed"] is False
    assert "Scoped allocation with size 64.00M and limit 16.00M" in built["violations"][0]["message"]
    r = run_cli("call", build / "pallas-vmem.jaxport", "--random", "--no-cache")
    assert r.exit_code == 10
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error[platform]: ")
    assert "Scoped allocation with size 64.00M and limit 16.00M exceeded scoped vmem limit by 48.00M" in r.stderr


def test_warmup_and_call_use_the_shipped_executables(build, run_cli, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(build / "cache", cache)
    cache.chmod(0o700)
    r = run_cli("warmup", build / "mlp.jaxport", "--dim", "batch=1,8,64", "--cache-dir", cache, "--json")
    assert r.exit_code == 0, r.stderr
    assert [s["executable"] for s in json.loads(r.stdout)["signatures"]] == ["shipped"] * 3
    r = run_cli("call", build / "mlp.jaxport", "--random", "--dim", "batch=8", "--cache-dir", cache, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["timings"]["executable"] == "shipped"
