"""Weights beside the program: flax, equinox and plain models bound from .npz, .safetensors and Python attributes
run as the model does; clear errors for what cannot be bound; the inspect view; aligned, checked, shared storage."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jaxport
from jaxport.artifact import container
from jaxport.artifact.container import ALIGNMENT, MANIFEST_NAME, open_artifact
from jaxport.errors import EntrypointError, ExportError, FormatError, InputError, IntegrityError, SpecError
from tests.support import EXAMPLES, load_module

# --- the bundled examples, bound three ways ---------------------------------------------------------------------

#: (example, spec, entry point function): every spec of every example that binds weights.
EXAMPLE_SPECS = [
    ("mlp", "spec-bound.yaml", "apply"),
    ("mlp", "spec-npz.yaml", "apply"),
    ("mlp", "spec-safetensors.yaml", "apply"),
    ("flax_linen", "spec.yaml", "apply"),
    ("flax_linen", "spec-npz.yaml", "apply"),
    ("flax_linen", "spec-safetensors.yaml", "apply"),
    ("flax_nnx", "spec.yaml", "apply"),
    ("flax_nnx", "spec-npz.yaml", "apply"),
    ("flax_nnx", "spec-safetensors.yaml", "apply"),
    ("equinox", "spec.yaml", "apply"),
    ("equinox", "spec-partitioned.yaml", "apply_partitioned"),
    ("equinox", "spec-npz.yaml", "apply_arrays"),
    ("equinox", "spec-safetensors.yaml", "apply_arrays"),
]
CASE_IDS = [f"{e}/{s}" for e, s, _ in EXAMPLE_SPECS]


@pytest.fixture(scope="module")
def example_models() -> dict[str, Any]:
    """Each example's model.py, imported on its own (not through jaxport)."""
    return {name: load_module(EXAMPLES / name / "model.py", f"weights_example_{name}")
            for name in ("mlp", "flax_linen", "flax_nnx", "equinox")}


def _reference(models: dict[str, Any], example: str, x: np.ndarray) -> np.ndarray:
    """The example's model run directly under jit, with the parameters of its model.py."""
    import equinox as eqx

    m = models[example]
    if example == "mlp":
        return np.asarray(jax.jit(m.apply)(m.PARAMS, x))
    if example == "flax_linen":
        return np.asarray(jax.jit(m.apply)(m.VARIABLES, x))
    if example == "flax_nnx":
        return np.asarray(jax.jit(m.apply)(m.STATE, x))
    return np.asarray(eqx.filter_jit(m.apply)(m.MODEL, x))


def _example_x(example: str) -> np.ndarray:
    return np.load(EXAMPLES / example / "x.npy", allow_pickle=False)


@pytest.fixture(scope="module")
def exported_examples(tmp_path_factory: pytest.TempPathFactory):
    """``get(example, spec, fn)``: the artifact of an example spec, exported once for the module."""
    out_dir = tmp_path_factory.mktemp("examples")
    done: dict[tuple[str, str], Path] = {}

    def get(example: str, spec: str, fn: str) -> Path:
        if (example, spec) not in done:
            out = out_dir / f"{example}-{spec.removesuffix('.yaml')}.jaxport"
            done[example, spec] = jaxport.export(f"{EXAMPLES}/{example}/model.py:{fn}", EXAMPLES / example / spec,
                                                 output=out).path
        return done[example, spec]

    return get


@pytest.mark.parametrize(("example", "spec", "fn"), EXAMPLE_SPECS, ids=CASE_IDS)
def test_load_matches_the_model_run_directly(exported_examples, example_models, example, spec, fn):
    path = exported_examples(example, spec, fn)
    x = _example_x(example)
    loaded = jaxport.load(path)
    assert loaded.function_record.input_names == ["x"]  # only the free input is left
    out = np.asarray(loaded(x))
    np.testing.assert_allclose(out, _reference(example_models, example, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("example", "spec", "fn"), EXAMPLE_SPECS, ids=CASE_IDS)
def test_call_with_only_the_free_input_matches(exported_examples, example_models, run_cli, tmp_path, example, spec,
                                               fn):
    path = exported_examples(example, spec, fn)
    res = run_cli("call", path, "--inputs", EXAMPLES / example / "x.npy", "-o", tmp_path / "out.npz", "--no-cache")
    assert res.exit_code == 0, res.stderr
    with np.load(tmp_path / "out.npz", allow_pickle=False) as z:
        assert z.files == ["output"]
        out = z["output"]
    np.testing.assert_allclose(out, _reference(example_models, example, _example_x(example)), rtol=1e-6, atol=1e-6)


def _flat(tree: Any) -> dict[str, np.ndarray]:
    """``{"a/b": array}`` for the array leaves of a pytree, named as jaxport names them (below the prefix)."""
    from jaxport.export.weights.bind import flatten_bound

    _, tensors = flatten_bound(tree, "", "test")
    return {t.name.lstrip("/"): t.array for t in tensors}


@pytest.mark.parametrize(("example", "attribute", "prefix", "key_of"), [
    ("mlp", "PARAMS", "params", lambda name: name),
    ("flax_linen", "VARIABLES", "variables", lambda name: name),
    ("flax_nnx", "STATE", "state", lambda name: name.removesuffix("/value")),
    ("equinox", "PARAMS", "params", lambda name: name),
], ids=["mlp", "flax_linen", "flax_nnx", "equinox"])
def test_bundled_parameter_files_hold_the_models_parameters(example_models, example, attribute, prefix, key_of):
    """The .npz and .safetensors files of an example are its model.py's parameters (else run make_inputs.py).

    The files were written under jax 0.10.2; flax's initialisers under jax 0.12 round some values a few steps (units
    in the last place) the other way, so floats are compared to 4 ulp (measured: 2 for nnx under 0.12.0.1, 3 for
    linen under 0.12.1), everything else exactly."""
    from safetensors.numpy import load_file

    expected = {key_of(k): v for k, v in _flat(getattr(example_models[example], attribute)).items()}
    with np.load(EXAMPLES / example / "params.npz", allow_pickle=False) as z:
        npz = {k: z[k] for k in z.files}
    for found in (npz, load_file(str(EXAMPLES / example / "params.safetensors"))):
        assert sorted(found) == sorted(expected)
        for k, v in expected.items():
            assert found[k].dtype == v.dtype and found[k].shape == v.shape
            if np.issubdtype(v.dtype, np.floating):
                np.testing.assert_array_max_ulp(found[k], np.asarray(v), maxulp=4)
            else:
                np.testing.assert_array_equal(found[k], v)


EXAMPLE_SOURCES = {("flax_linen", "spec.yaml"): "model.py:VARIABLES", ("flax_nnx", "spec.yaml"): "model.py:STATE",
                   ("flax_nnx", "spec-npz.yaml"): "params.npz", ("equinox", "spec.yaml"): "model.py:MODEL"}


#: Every example spec that binds a file, and one that binds a Python attribute of plain dicts.
ROUND_TRIP = [c for c in EXAMPLE_SPECS if c[1] in ("spec-npz.yaml", "spec-safetensors.yaml")] + [
    ("mlp", "spec-bound.yaml", "apply")]


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize(("example", "spec", "fn"), ROUND_TRIP, ids=[f"{e}/{s}" for e, s, _ in ROUND_TRIP])
def test_extracted_weights_bind_again_to_the_same_tensors(exported_examples, example_models, run_cli, tmp_path,
                                                          monkeypatch, example, spec, fn, suffix):
    """extract --weights, then --bind the file to the same argument: the same tensor names, shapes, dtypes and
    bytes (never a doubled prefix), the same outputs, and diff sees only the new source."""
    path = exported_examples(example, spec, fn)
    monkeypatch.chdir(tmp_path)
    with open_artifact(path) as art:
        before = art.manifest["weights"]["tensors"]
        (argument,) = {n.split("/")[0] for n in before}
    assert run_cli("extract", path, "--weights", f"w{suffix}").exit_code == 0
    again = jaxport.export(f"{EXAMPLES}/{example}/model.py:{fn}", EXAMPLES / example / spec, output="again.jaxport",
                           bind={argument: f"w{suffix}"}).path
    with open_artifact(again) as art:
        assert art.manifest["weights"]["tensors"] == before
    x = _example_x(example)
    np.testing.assert_array_equal(np.asarray(jaxport.load(again)(x)), np.asarray(jaxport.load(path)(x)))
    res = run_cli("diff", path, again, "--fail-on", "breaking", "--json")
    assert res.exit_code == 0, res.stdout
    assert [c["kind"] for c in json.loads(res.stdout)["changes"]] == ["bound_source_changed"]


def test_tensors_are_named_after_the_argument_and_the_path(exported_examples):
    names = {
        ("flax_linen", "spec.yaml", "apply"): [
            "variables/batch_stats/BatchNorm_0/mean", "variables/batch_stats/BatchNorm_0/var",
            "variables/params/BatchNorm_0/bias", "variables/params/BatchNorm_0/scale",
            "variables/params/Conv_0/bias", "variables/params/Conv_0/kernel",
            "variables/params/Dense_0/bias", "variables/params/Dense_0/kernel"],
        ("flax_nnx", "spec.yaml", "apply"): [
            "state/hidden/bias/value", "state/hidden/kernel/value", "state/norm/bias/value",
            "state/norm/scale/value", "state/out/bias/value", "state/out/kernel/value"],
        ("flax_nnx", "spec-npz.yaml", "apply"): [
            "state/hidden/bias", "state/hidden/kernel", "state/norm/bias", "state/norm/scale", "state/out/bias",
            "state/out/kernel"],
        ("equinox", "spec.yaml", "apply"): ["model/conv/bias", "model/conv/weight", "model/head/bias",
                                            "model/head/weight"],
    }
    for case, expected in names.items():
        with open_artifact(exported_examples(*case)) as art:
            m = art.manifest
        assert sorted(m["weights"]["tensors"]) == expected
        (f,) = m["functions"].values()
        assert f["weights"] == expected
        assert f["signature"]["args"][0] == {"bound": EXAMPLE_SOURCES[case[:2]], "name": expected[0].split("/")[0]}


def test_equinox_non_array_fields_are_baked(exported_examples, example_models):
    """The module's activation function and static field are not tensors; the program still applies them."""
    with open_artifact(exported_examples("equinox", "spec.yaml", "apply")) as art:
        names = list(art.manifest["weights"]["tensors"])
    assert not any("activation" in n or "num_classes" in n for n in names)


@pytest.mark.parametrize(("example", "spec"), [("mlp", "spec-npz.yaml"), ("mlp", "spec-bound.yaml"),
                                               ("equinox", "spec.yaml"), ("flax_nnx", "spec-safetensors.yaml")])
def test_reexport_gives_identical_bytes(tmp_path, monkeypatch, example, spec):
    monkeypatch.chdir(tmp_path)
    entry = f"{EXAMPLES}/{example}/model.py:apply"
    a = jaxport.export(entry, EXAMPLES / example / spec, output="a.jaxport").path
    b = jaxport.export(entry, EXAMPLES / example / spec, output="b.jaxport").path
    assert a.read_bytes() == b.read_bytes()


# --- binding from Python: the shapes of values users bind ------------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh directory, made current: messages name files as written there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _export(d: Path, model: str, spec: str, entry: str = "model.py:f", **options: Any) -> Path:
    (d / "model.py").write_text(model)
    (d / "spec.yaml").write_text(spec)
    return jaxport.export(entry, d / "spec.yaml", output=d / "out.jaxport", **options).path


def _write(d: Path, model: str, spec: str) -> Path:
    (d / "model.py").write_text(model)
    (d / "spec.yaml").write_text(spec)
    return d / "spec.yaml"


def _spec(source: str, x: str = "f32[batch, 4]") -> str:
    return f"jaxport: 1\ndims: {{batch: {{max: 64}}}}\nargs:\n  - bind: {source}\n  - \"{x}\"\n"


def _manifest(path: Path) -> dict[str, Any]:
    with open_artifact(path) as art:
        return art.manifest


X4 = np.arange(12, dtype=np.float32).reshape(3, 4) / 10

PRNG_MODEL = """\
import jax
import jax.numpy as jnp
import numpy as np

PARAMS = {"key": jax.random.key(7), "w": np.ones((4, 4), np.float32)}


def f(params, x):
    noise = jax.random.normal(params["key"], (4,))
    return x @ params["w"] + noise
"""


def test_typed_prng_keys_are_stored_as_key_data_and_rewrapped(workdir):
    path = _export(workdir, PRNG_MODEL, _spec("model.py:PARAMS"))
    t = _manifest(path)["weights"]["tensors"]["params/key"]
    assert (t["dtype"], t["shape"]) == ("uint32", [2])
    ns: dict[str, Any] = {}
    exec(PRNG_MODEL, ns)
    np.testing.assert_allclose(jaxport.load(path)(X4), jax.jit(ns["f"])(ns["PARAMS"], X4), rtol=1e-6)


NNX_DROPOUT_MODEL = """\
from flax import nnx


class Net(nnx.Module):
    def __init__(self, rngs):
        self.dense = nnx.Linear(4, 3, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.bn = nnx.BatchNorm(3, rngs=rngs)

    def __call__(self, x):
        return self.bn(self.drop(self.dense(x)))


MODEL = Net(nnx.Rngs(0))
MODEL.eval()
GRAPHDEF, STATE = nnx.split(MODEL)


def f(state, x):
    return nnx.merge(GRAPHDEF, state)(x)


def g(model, x):
    return model(x)
"""


@pytest.mark.parametrize(("entry", "source"), [("model.py:f", "model.py:STATE"), ("model.py:g", "model.py:MODEL")],
                         ids=["state", "module"])
def test_nnx_model_with_dropout_rngs_and_batch_stats(workdir, entry, source):
    """An nnx model holding an Rngs stream (a typed PRNG key) binds as its state or as the module itself."""
    result = jaxport.export(entry, _write(workdir, NNX_DROPOUT_MODEL, _spec(source)), output="out.jaxport")
    ns = load_module(workdir / "model.py", "weights_nnx_dropout")
    direct = jax.jit(ns.f)(ns.STATE, X4)
    np.testing.assert_allclose(jaxport.load(result.path)(X4), direct, rtol=1e-6, atol=1e-6)
    prefix = "state" if source.endswith("STATE") else "model"
    tensors = result.manifest["weights"]["tensors"]
    assert tensors[f"{prefix}/drop/rngs/key/value"]["dtype"] == "uint32"
    assert tensors[f"{prefix}/bn/mean/value"]["shape"] == [3]
    assert tensors[f"{prefix}/drop/rngs/count/value"]["shape"] == []  # a scalar stays a scalar


MIXED_MODEL = """\
import numpy as np

PARAMS = {"w": np.full((4, 2), 0.5, np.float32), "scale": np.float32(3.0), "temperature": 2.0, "name": "mlp"}


def f(params, x):
    assert params["name"] == "mlp" and params["scale"].shape == ()
    return x @ params["w"] * params["scale"] / params["temperature"]
"""


def test_python_values_are_baked_and_scalars_keep_their_shape(workdir):
    path = _export(workdir, MIXED_MODEL, _spec("model.py:PARAMS"))
    tensors = _manifest(path)["weights"]["tensors"]
    assert {n: t["shape"] for n, t in tensors.items()} == {"params/scale": [], "params/w": [4, 2]}
    np.testing.assert_allclose(jaxport.load(path)(X4), X4 @ np.full((4, 2), 0.5, np.float32) * 3.0 / 2.0, rtol=1e-6)


CALLABLE_MODEL = """\
import numpy as np


def make_params():
    return {"w": np.eye(4, dtype=np.float32) * 2}


def f(params, x):
    return x @ params["w"]
"""


def test_zero_argument_callable_is_called(workdir):
    path = _export(workdir, CALLABLE_MODEL, _spec("model.py:make_params"))
    np.testing.assert_allclose(jaxport.load(path)(X4), X4 * 2, rtol=1e-6)


COUNTING_MODEL = """\
from pathlib import Path

import equinox as eqx
import jax

with open(Path(__file__).with_name("imports.log"), "a") as log:
    log.write("imported\\n")


class Net(eqx.Module):
    layer: eqx.nn.Linear

    def __init__(self, key):
        self.layer = eqx.nn.Linear(4, 2, key=key)

    def __call__(self, x):
        return self.layer(x)


PARAMS, STATIC = eqx.partition(Net(jax.random.key(0)), eqx.is_array)


def f(params, x):
    return jax.vmap(eqx.combine(params, STATIC))(x)
"""


def test_attribute_of_the_entry_points_file_is_read_from_the_same_module(workdir):
    """eqx.combine needs the bound half and the module's STATIC to be of one class: the file runs once."""
    import equinox as eqx

    path = _export(workdir, COUNTING_MODEL, _spec("model.py:PARAMS"))
    assert (workdir / "imports.log").read_text() == "imported\n"
    ns = load_module(workdir / "model.py", "weights_counting")
    np.testing.assert_allclose(jaxport.load(path)(X4), eqx.filter_jit(ns.f)(ns.PARAMS, X4), rtol=1e-6, atol=1e-6)


def test_verify_reads_the_bound_attribute_from_the_live_functions_module(workdir, run_cli):
    """verify's live function and its bound half share one import of the file too (a second import made a second
    Net class, and eqx.combine raised a pytree structure error: verify failed a correct artifact)."""
    path = _export(workdir, COUNTING_MODEL, _spec("model.py:PARAMS"))
    res = run_cli("verify", path)
    assert res.exit_code == 0, res.stdout + res.stderr
    assert res.stdout.rstrip().endswith("cases match.")


SEEDED_MODEL = """\
import numpy as np

PARAMS = {{"w": np.random.default_rng({seed}).normal(size=(4, 2)).astype(np.float32)}}


def f(params, x):
    return x @ params["w"]
"""


def test_verify_refuses_live_weights_other_than_the_stored_ones(workdir, run_cli):
    """Weights that a source makes anew (unseeded) or that changed since the export are named as such: comparing
    outputs from other weights would blame the program."""
    path = _export(workdir, SEEDED_MODEL.format(seed=0), _spec("model.py:PARAMS"))
    assert run_cli("verify", path).exit_code == 0
    (workdir / "model.py").write_text(SEEDED_MODEL.format(seed=1))
    res = run_cli("verify", path)
    assert (res.exit_code, res.stderr) == (12, (
        f"error[verification]: {path}: function 'f': params: the bound weights loaded again from model.py:PARAMS "
        f"are not those stored in the artifact (tensor 'params/w' differs), so the live function cannot be compared "
        f"with the artifact: the source makes other values on each import (seed its initialization) or has changed "
        f"since the export; give the live function the weights the artifact was exported with (--bind "
        f"NAME=SOURCE).\n"))
    np.savez(workdir / "exported.npz", w=np.random.default_rng(0).normal(size=(4, 2)).astype(np.float32))
    res = run_cli("verify", path, "--bind", "params=exported.npz")
    assert res.exit_code == 0, res.stdout + res.stderr


MASKED_MODEL = """\
import numpy as np

MASKED = {"w": np.ma.array(np.ones((4, 2), np.float32), mask=np.eye(4, 2, dtype=bool))}
MATRIX = {"w": np.asarray(np.arange(8, dtype=np.float32).reshape(4, 2)).view(np.memmap)}


def f(params, x):
    return x @ params["w"]
"""


def test_a_masked_array_is_refused_and_an_ndarray_subclass_bound_as_its_data(workdir):
    with pytest.raises(SpecError) as e:
        _export(workdir, MASKED_MODEL, _spec("model.py:MASKED"))
    assert str(e.value).endswith(": bound leaf 'params/w' is a masked array, whose mask the artifact cannot store "
                                 "(its data alone would be bound, masked values included). Bind leaf.filled(VALUE), "
                                 "or the data and the mask as two arrays.")
    path = _export(workdir, MASKED_MODEL, _spec("model.py:MATRIX"))
    np.testing.assert_array_equal(np.asarray(jaxport.load(path)(X4)), X4 @ np.arange(8, dtype=np.float32).reshape(4, 2))


def test_cli_bind_replaces_the_specs_source(exported_examples, run_cli, workdir):
    shutil.copy(EXAMPLES / "mlp" / "params.safetensors", workdir / "other.safetensors")
    res = run_cli("export", f"{EXAMPLES}/mlp/model.py:apply", "--shapes", EXAMPLES / "mlp" / "spec-bound.yaml",
                  "--bind", "params=other.safetensors", "-o", "cli.jaxport", "--no-manifest")
    assert res.exit_code == 0, res.stderr
    m = _manifest(workdir / "cli.jaxport")
    assert m["functions"]["apply"]["signature"]["args"][0] == {"bound": "other.safetensors", "name": "params"}
    with open_artifact(exported_examples("mlp", "spec-bound.yaml", "apply")) as art:
        assert m["weights"] == art.manifest["weights"]


def test_absolute_bound_paths_are_not_recorded(workdir):
    shutil.copy(EXAMPLES / "mlp" / "params.npz", workdir / "params.npz")
    (workdir / "spec.yaml").write_text(_spec("params.npz", "f32[batch, 784]"))
    result = jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", workdir / "spec.yaml", output="a.jaxport",
                            bind={"params": str(workdir / "params.npz")})
    assert result.manifest["functions"]["apply"]["signature"]["args"][0] == {"bound": "params.npz",
                                                                            "name": "params"}
    assert str(workdir) not in (workdir / "a.jaxport").read_bytes().decode("latin-1")


def test_bound_argument_is_not_passed_by_the_caller(exported_examples):
    loaded = jaxport.load(exported_examples("mlp", "spec-npz.yaml", "apply"))
    x = _example_x("mlp")
    with pytest.raises(InputError, match=re.escape(
            "argument 'params' is bound to weights stored in the artifact (from params.npz); leave it out.")):
        loaded(params={"w1": 0}, x=x)
    with pytest.raises(InputError, match=re.escape("apply() takes 1 positional array argument (x), but 3 were "
                                                   "given.")):
        loaded(x, x, x)


# --- errors ----------------------------------------------------------------------------------------------------

PLAIN_MODEL = """\
import jax


def f(params, x):
    return x @ params["w"] + params["b"]
"""


def _npz(path: Path, **arrays: np.ndarray) -> None:
    np.savez(path, **arrays)


def _export_error(run_cli, *args: str) -> tuple[int, str]:
    res = run_cli("export", "model.py:f", "--shapes", "spec.yaml", "-o", "out.jaxport", *args)
    assert res.stdout == ""
    return res.exit_code, res.stderr


def test_key_the_function_reads_is_missing(workdir, run_cli):
    _npz(workdir / "p.npz", w=np.ones((4, 2), np.float32), bias=np.ones(2, np.float32))
    _write(workdir, PLAIN_MODEL, _spec("p.npz"))
    message = ("the function reads key 'b' from a bound argument, and the bound value has no such key. Missing: 'b'. "
               "spec.yaml:4: 'params' is bound to p.npz with keys: bias, w. Make the bound file's keys match what "
               "the function reads.")
    with pytest.raises(SpecError) as e:
        jaxport.export("model.py:f", "spec.yaml", output="out.jaxport")
    assert str(e.value) == message
    assert _export_error(run_cli) == (3, f"error[spec]: {message}\n")


LINEN_MODEL = """\
import flax.linen as nn


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2, name="out")(nn.relu(nn.Dense(8, name="hidden")(x)))


def f(variables, x):
    return MLP().apply(variables, x)
"""


def test_flax_linen_parameter_missing_from_the_bound_file(workdir, run_cli):
    _npz(workdir / "p.npz", **{"params/hidden/kernel": np.ones((4, 8), np.float32),
                               "params/hidden/bias": np.ones(8, np.float32),
                               "params/out/kernel": np.ones((8, 2), np.float32),
                               "params/out/bais": np.ones(2, np.float32)})
    _write(workdir, LINEN_MODEL, _spec("p.npz"))
    message = ("the function reads key 'params/out/bias' from a bound argument, and the bound value has no such key. "
               "Missing: 'params/out/bias'. spec.yaml:4: 'variables' is bound to p.npz with keys: "
               "params/hidden/bias, params/hidden/kernel, params/out/bais, params/out/kernel (did you mean "
               "'params/out/bais'?). Make the bound file's keys match what the function reads.")
    assert _export_error(run_cli) == (3, f"error[spec]: {message}\n")


def test_bound_dtype_the_function_cannot_take(workdir, run_cli):
    """A float16 bias where the function adds it to float32 with lax.add (no promotion): the export fails, and
    the message shows what was bound, with its dtypes."""
    model = "from jax import lax\n\n\ndef f(params, x):\n    return lax.add(x.sum(0), params['b'])\n"
    _npz(workdir / "p.npz", b=np.ones(4, np.float16))
    _write(workdir, model, _spec("p.npz"))
    with pytest.raises(ExportError) as e:
        jaxport.export("model.py:f", "spec.yaml", output="out.jaxport")
    first = str(e.value).splitlines()[0]
    assert first == ("model.py:f: exporting with the spec's shapes failed: TypeError: lax.add requires arguments to "
                     "have the same dtypes, got float32, float16. (Tip: jnp.add is a similar function that does "
                     "automatic type promotion on inputs). [bound values: spec.yaml:4: 'params' is bound to p.npz "
                     "(b: f16[4])]")
    code, err = _export_error(run_cli)
    assert code == 5 and err.startswith(f"error[export]: {first}")


@pytest.mark.parametrize(("arrays", "message"), [
    ({"w": np.array(["a", "b"])},
     "spec.yaml:4: bound leaf 'params/w' has dtype <U1, which jaxport does not store. Convert it, e.g. to float32."),
    ({"w": np.ones(3, ml_dtypes.bfloat16)},  # numpy writes ml_dtypes' types to .npy as raw void bytes
     "spec.yaml:4: bound leaf 'params/w' has the raw void dtype '|V2', as numpy saves bfloat16, which does not say "
     "which. Bind a .safetensors file (it records bfloat16, float8_e4m3fn, float8_e5m2, float4_e2m1fn by name), an "
     "orbax checkpoint or a Python attribute 'model.py:NAME' instead."),
    ({"w": np.array([{}, 1], dtype=object)},
     "spec.yaml:4: bound file p.npz: member 'w.npy': the array holds Python objects (dtype '|O'), which could "
     "only be read by unpickling; jaxport refuses them. Save a numeric array instead."),
], ids=["unicode", "void", "object"])
def test_unsupported_dtype_in_a_bound_file(workdir, run_cli, arrays, message):
    _npz(workdir / "p.npz", **arrays)
    _write(workdir, PLAIN_MODEL, _spec("p.npz"))
    assert _export_error(run_cli) == (3, f"error[spec]: {message}\n")


@pytest.mark.parametrize(("source", "content", "message"), [
    ("missing.npz", None,
     "spec.yaml:4: bound file missing.npz not found (paths are relative to the spec file's directory)."),
    ("p.txt", b"1 2 3",
     "spec.yaml:4: bound file p.txt has an unsupported extension '.txt': use .npz, .safetensors or .npy, or a "
     "Python attribute 'model.py:NAME'."),
    ("p.npz", b"not a zip",
     "spec.yaml:4: bound file p.npz is not an .npz file (a zip archive of .npy arrays)."),
    ("p.npy", b"\x80\x04pickle",
     "spec.yaml:4: bound file p.npy is not a .npy file (it does not start with numpy's magic bytes)."),
    ("p.safetensors", b"\x05\x00",
     "spec.yaml:4: bound file p.safetensors: too short for a .safetensors file (2 bytes)."),
    ("p.safetensors", struct.pack("<Q", 1 << 40) + b"{}",
     "spec.yaml:4: bound file p.safetensors: the header claims 1099511627776 bytes, more than the file holds or "
     "104857600 allowed; the file is damaged or not .safetensors."),
    ("p.safetensors", struct.pack("<Q", 2) + b"[]",
     "spec.yaml:4: bound file p.safetensors: the header must start with '{' (safetensors' rule); it starts with "
     "b'['."),
    ("p.safetensors",
     struct.pack("<Q", 62) + b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 32]}}' + bytes(16),
     "spec.yaml:4: bound file p.safetensors: tensor 'w': bytes 0..32 do not hold shape [4] of F32 inside the "
     "16-byte data section."),
    ("p.safetensors",
     struct.pack("<Q", 62) + b'{"w": {"dtype": "F4X", "shape": [4], "data_offsets": [0, 16]}}' + bytes(16),
     "spec.yaml:4: bound file p.safetensors: tensor 'w': dtype F4X is not one jaxport reads (it reads BOOL, I8, "
     "I16, I32, I64, U8, U16, U32, U64, BF16, F16, F32, F64, C64, F8_E4M3, F8_E5M2, F4)."),
    ("nowhere.py:PARAMS", None,
     "spec.yaml:4: bound module nowhere.py not found (paths are relative to the spec file's directory)."),
], ids=["missing", "extension", "npz-not-zip", "npy-pickle", "st-short", "st-huge-header", "st-not-object",
        "st-past-end", "st-dtype", "missing-module"])
def test_bound_file_errors(workdir, run_cli, source, content, message):
    if content is not None:
        (workdir / source).write_bytes(content)
    _write(workdir, PLAIN_MODEL, _spec(source))
    assert _export_error(run_cli) == (3, f"error[spec]: {message}\n")


def test_bound_attribute_errors(workdir, run_cli):
    model = PLAIN_MODEL + "\n\ndef broken():\n    raise ValueError('no weights here')\n"
    _write(workdir, model, _spec("model.py:PARAMZ"))
    assert _export_error(run_cli) == (4, "error[entrypoint]: spec.yaml:4: bound value model.py:PARAMZ: model.py "
                                         "has no attribute 'PARAMZ'. It defines: broken, f.\n")
    _write(workdir, model, _spec("model.py:broken"))
    with pytest.raises(EntrypointError) as e:
        jaxport.export("model.py:f", "spec.yaml", output="out.jaxport")
    assert str(e.value) == ("spec.yaml:4: bound value model.py:broken: calling broken() raised ValueError: no "
                            "weights here")


def test_cli_bind_of_a_missing_file(workdir, run_cli):
    _write(workdir, PLAIN_MODEL, "jaxport: 1\ndims: {batch: {max: 64}}\nkwargs:\n  x: \"f32[batch, 4]\"\n")
    assert _export_error(run_cli, "--bind", "params=gone.npz") == (
        3, "error[spec]: --bind params: bound file gone.npz not found (paths are relative to the spec file's "
           "directory).\n")


# --- several functions sharing weights ------------------------------------------------------------------------

MULTI_MODEL = """\
import jax


def logprobs(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jax.nn.log_softmax(h @ params["w2"] + params["b2"])


def features(params, x):
    return jax.nn.relu(x @ params["w1"] + params["b1"])
"""

MULTI_SPEC = """\
jaxport: 1
dims: {batch: {min: 1, max: 64}}
functions:
  logprobs:
    entrypoint: model.py:logprobs
    args: [{bind: params.npz}, "f32[batch, 784]"]
  features:
    entrypoint: model.py:features
    args: [{bind: params.npz}, "f32[batch, 784]"]
metadata: {name: shared}
"""


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory):
    """An artifact of two functions binding the same parameters, with its export result and directory."""
    d = tmp_path_factory.mktemp("shared")
    shutil.copy(EXAMPLES / "mlp" / "params.npz", d / "params.npz")
    (d / "model.py").write_text(MULTI_MODEL)
    (d / "spec.yaml").write_text(MULTI_SPEC)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        result = jaxport.export(None, "spec.yaml", output=d / "shared.jaxport")
    return result, d


MLP_NAMES = ["params/b1", "params/b2", "params/w1", "params/w2"]


def test_shared_weights_are_stored_once(shared):
    result, _ = shared
    m = result.manifest
    assert list(m["weights"]["tensors"]) == MLP_NAMES
    assert m["functions"]["logprobs"]["weights"] == MLP_NAMES
    assert m["functions"]["features"]["weights"] == MLP_NAMES
    size = sum(t["nbytes"] for t in m["weights"]["tensors"].values())
    assert m["members"]["weights.bin"]["size"] == (784 * 32 + 32 + 32 * 10) * 4 + 10 * 4 + 24  # padding: 24 B
    assert size == (784 * 32 + 32 + 32 * 10 + 10) * 4
    assert result.warnings == ["function 'features' never reads 2 bound tensor(s): params/b2, params/w2. They are "
                               "stored anyway; remove them from the bound value to save space."]


def test_call_function_picks_one(shared, run_cli, tmp_path):
    result, d = shared
    params = dict(np.load(d / "params.npz"))
    x = _example_x("mlp")
    np.save(tmp_path / "x.npy", x)
    ns: dict[str, Any] = {}
    exec(MULTI_MODEL, ns)
    for fn in ("logprobs", "features"):
        res = run_cli("call", result.path, "--function", fn, "--inputs", tmp_path / "x.npy", "-o",
                      tmp_path / f"{fn}.npz", "--no-cache")
        assert res.exit_code == 0, res.stderr
        expected = np.asarray(jax.jit(ns[fn])(params, x))
        with np.load(tmp_path / f"{fn}.npz") as z:
            np.testing.assert_allclose(z["output"], expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(jaxport.load(result.path, fn)(x), expected, rtol=1e-6, atol=1e-6)
    res = run_cli("call", result.path, "--inputs", tmp_path / "x.npy", "--no-cache")
    assert res.exit_code == 2
    assert "the artifact holds 2 functions (logprobs, features); choose one with --function NAME" in res.stderr


def test_inspect_lists_shared_weights_and_their_users(shared, run_cli):
    result, _ = shared
    out = run_cli("inspect", result.path).stdout
    assert "weights: 4 tensors, 101.8 kB (float32 101.8 kB)" in out
    rows = [re.sub(r"\s+", " ", line).strip() for line in out.splitlines() if line.lstrip().startswith("params/")]
    assert rows == ["params/w1 │ f32[784, 32] │ 100.4 kB │ logprobs, features",
                    "params/w2 │ f32[32, 10] │ 1.3 kB │ logprobs, features",
                    "params/b1 │ f32[32] │ 128 B │ logprobs, features",
                    "params/b2 │ f32[10] │ 40 B │ logprobs, features"]
    assert out.count("bound weights: 4 tensors, 101.8 kB (supplied by the artifact)") == 2


def test_two_values_bound_under_one_name_must_agree(workdir):
    (workdir / "model.py").write_text(MULTI_MODEL)
    _npz(workdir / "a.npz", **dict(np.load(EXAMPLES / "mlp" / "params.npz")))
    other = dict(np.load(EXAMPLES / "mlp" / "params.npz"))
    other["b1"] = other["b1"] + 1
    _npz(workdir / "b.npz", **other)
    (workdir / "spec.yaml").write_text(MULTI_SPEC.replace("params.npz}", "a.npz}", 1).replace("params.npz}", "b.npz}"))
    with pytest.raises(SpecError, match=re.escape(
            "two bound values are both named 'params/b1' but differ; rename one argument.")):
        jaxport.export(None, "spec.yaml", output="out.jaxport")


# --- inspect ---------------------------------------------------------------------------------------------------

DTYPES_MODEL = """\
import jax.numpy as jnp
import ml_dtypes
import numpy as np

PARAMS = {
    "emb": np.arange(64 * 8, dtype=np.float32).reshape(64, 8).astype(ml_dtypes.bfloat16),
    "proj": np.linspace(-1, 1, 8 * 4, dtype=np.float32).reshape(8, 4),
    "ids": np.arange(5, dtype=np.int32),
    "mask": np.array([True, False, True]),
    "half": np.array([1.5, -2.25], np.float16),
    "f8": np.array([0.5, -1.0, 448.0], ml_dtypes.float8_e4m3fn),
}


def f(params, x):
    return {"y": x @ params["proj"], **{k: v for k, v in params.items() if k != "proj"}}
"""


@pytest.fixture(scope="module")
def dtypes_artifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """Bound tensors of six dtypes, which the function returns as they are."""
    d = tmp_path_factory.mktemp("dtypes")
    (d / "model.py").write_text(DTYPES_MODEL)
    (d / "spec.yaml").write_text(_spec("model.py:PARAMS", "f32[batch, 8]"))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        path = jaxport.export("model.py:f", "spec.yaml", output=d / "dtypes.jaxport").path
    return path, load_module(d / "model.py", "weights_dtypes_model").PARAMS


def test_inspect_shows_counts_bytes_per_dtype_and_the_largest(dtypes_artifact, run_cli):
    path, _ = dtypes_artifact
    out = run_cli("inspect", path).stdout
    assert "weights: 6 tensors, 1.2 kB (bfloat16 1.0 kB, float32 128 B, int32 20 B, float16 4 B, " \
           "float8_e4m3fn 3 B, bool 3 B)" in out
    rows = [re.sub(r"\s+", " ", line).strip() for line in out.splitlines() if line.lstrip().startswith("params/")]
    assert rows == ["params/emb │ bf16[64, 8] │ 1.0 kB │ f", "params/proj │ f32[8, 4] │ 128 B │ f",
                    "params/ids │ i32[5] │ 20 B │ f", "params/half │ f16[2] │ 4 B │ f",
                    "params/f8 │ f8e4m3fn[3] │ 3 B │ f", "params/mask │ bool[3] │ 3 B │ f"]


def test_inspect_cuts_the_table_at_ten_tensors(workdir, run_cli):
    model = "import numpy as np\n\nPARAMS = {f'w{i:02d}': np.ones(i + 1, np.float32) for i in range(12)}\n\n\n" \
            "def f(params, x):\n    return x * sum(v.sum() for v in params.values())\n"
    path = _export(workdir, model, _spec("model.py:PARAMS"))
    out = run_cli("inspect", path).stdout
    assert "weights: 12 tensors, 312 B (float32 312 B)" in out
    rows = [line.split()[0] for line in out.splitlines() if line.lstrip().startswith("params/")]
    assert rows == [f"params/w{i:02d}" for i in range(11, 1, -1)]
    assert "  ... and 2 more (inspect --json lists them all)" in out


# --- storage -----------------------------------------------------------------------------------------------------


def _data_offset(data: bytes, member: str) -> int:
    """Where ``member``'s data starts in the zip ``data``, read from its local header."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        info = z.getinfo(member)
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    return info.header_offset + 30 + name_len + extra_len


def test_every_tensor_starts_at_a_multiple_of_64_in_the_file(dtypes_artifact, shared, exported_examples):
    for path in (dtypes_artifact[0], shared[0].path, exported_examples("flax_linen", "spec.yaml", "apply")):
        data = path.read_bytes()
        start = _data_offset(data, "weights.bin")
        m = json.loads(zipfile.ZipFile(io.BytesIO(data)).read(MANIFEST_NAME))
        tensors = m["weights"]["tensors"]
        assert len(tensors) >= 4
        for name, t in tensors.items():
            assert (start + t["offset"]) % ALIGNMENT == 0, name
            raw = data[start + t["offset"]:start + t["offset"] + t["nbytes"]]
            assert hashlib.sha256(raw).hexdigest() == t["sha256"]


def test_tensors_of_every_dtype_round_trip_bit_for_bit(dtypes_artifact):
    path, params = dtypes_artifact
    out = jaxport.load(path)(X4[:, :2].repeat(4, axis=1))
    for name, value in params.items():
        if name == "proj":
            continue
        assert out[name].dtype == value.dtype, name
        assert np.asarray(out[name]).tobytes() == value.tobytes(), name
    with open_artifact(path) as art:
        from jaxport.artifact.extract import weight_arrays

        for name, array in weight_arrays(art).items():
            assert array.dtype == params[name.split("/")[1]].dtype
            assert array.tobytes() == params[name.split("/")[1]].tobytes()


def test_safetensors_with_bfloat16_binds(workdir):
    """safetensors.numpy cannot read BF16; jaxport's own reader does."""
    from safetensors.numpy import save_file

    w = (np.arange(8, dtype=np.float32).reshape(4, 2) / 4).astype(ml_dtypes.bfloat16)
    save_file({"w": w, "b": np.ones(2, np.float32)}, str(workdir / "p.safetensors"))
    model = "import jax.numpy as jnp\n\n\ndef f(params, x):\n" \
            "    return (x.astype(jnp.bfloat16) @ params['w']).astype(jnp.float32) + params['b']\n"
    path = _export(workdir, model, _spec("p.safetensors"))
    assert _manifest(path)["weights"]["tensors"]["params/w"]["dtype"] == "bfloat16"
    ns = load_module(workdir / "model.py", "weights_bf16_safetensors")
    expected = jax.jit(ns.f)({"w": jnp.asarray(w), "b": jnp.ones(2, jnp.float32)}, X4)
    np.testing.assert_array_equal(jaxport.load(path)(X4), np.asarray(expected))


@pytest.fixture(scope="module")
def small_bound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP example bound from params.npz: a valid artifact to damage."""
    out = tmp_path_factory.mktemp("small") / "mlp.jaxport"
    return jaxport.export(f"{EXAMPLES}/mlp/model.py:apply", EXAMPLES / "mlp" / "spec-npz.yaml", output=out).path


def test_one_flipped_byte_in_the_weights_is_an_integrity_error(small_bound, tmp_path, run_cli, example_models):
    data = bytearray(small_bound.read_bytes())
    m = json.loads(zipfile.ZipFile(io.BytesIO(bytes(data))).read(MANIFEST_NAME))
    b2 = m["weights"]["tensors"]["params/b2"]
    data[_data_offset(bytes(data), "weights.bin") + b2["offset"] + 3] ^= 0x40  # b2[0]: 0.0 becomes 2.0
    bad = tmp_path / "bad.jaxport"
    bad.write_bytes(bytes(data))
    digest = hashlib.sha256(data[_data_offset(bytes(data), "weights.bin"):][:m["members"]["weights.bin"]["size"]])
    message = f"{bad}: member 'weights.bin' is damaged: its sha256 is {digest.hexdigest()[:16]}..., the manifest " \
              f"says {m['members']['weights.bin']['sha256'][:16]}.... Re-download or re-export the artifact."
    with pytest.raises(IntegrityError) as e:
        jaxport.load(bad)
    assert str(e.value) == message
    res = run_cli("call", bad, "--inputs", EXAMPLES / "mlp" / "x.npy", "--no-cache")
    assert (res.exit_code, res.stderr) == (8, f"error[integrity]: {message}\n")
    # verify=False trusts the file: it loads and runs on the modified weights.
    x = _example_x("mlp")
    out = np.asarray(jaxport.load(bad, verify=False)(x))
    assert not np.allclose(out, _reference(example_models, "mlp", x), rtol=1e-6, atol=1e-6)
    res = run_cli("call", bad, "--inputs", EXAMPLES / "mlp" / "x.npy", "--no-cache", "--no-verify")
    assert res.exit_code == 0, res.stderr


def _rewrite(src: Path, dst: Path, edit) -> Path:
    """``src`` with its manifest edited by ``edit`` and every member as it was (only the listing is recomputed)."""
    with zipfile.ZipFile(src) as z:
        m = json.loads(z.read(MANIFEST_NAME))
        members = {n: z.read(n) for n in z.namelist() if n != MANIFEST_NAME}
    edit(m)
    container.write_artifact(dst, m, members)
    return dst


def _past_end(t: dict[str, Any]) -> None:
    t["params/w2"]["offset"] += 1024


#: Edits of a valid tensor table (b1, b2, w1, w2 at offsets 0, 128, 192, 100544 of a 101824-byte member), and the
#: reader's refusal.
HOSTILE_TABLES = {
    "overlap": (lambda t: t["params/w1"].update(offset=128),
                "weights.tensors: tensors 'params/b2' and 'params/w1' overlap"),
    "past-end": (_past_end, "weights.tensors['params/w2']: bytes 101568..102848 lie past the end of the 101824-byte "
                            "weights member"),
    "nbytes": (lambda t: t["params/b1"].update(nbytes=64),
               "weights.tensors['params/b1'].nbytes: 64 bytes, but shape [32] of float32 takes 128"),
    "shape": (lambda t: t["params/b1"].update(shape=[16]),
              "weights.tensors['params/b1'].nbytes: 128 bytes, but shape [16] of float32 takes 64"),
    "misaligned": (lambda t: t["params/b2"].update(offset=132),
                   "weights.tensors['params/b2'].offset: 132 is not a multiple of 64"),
    "dtype": (lambda t: t["params/b2"].update(dtype="float128"),
              "weights.tensors['params/b2'].dtype: 'float128' is not a dtype jaxport supports"),
    "key-dtype": (lambda t: t["params/b2"].update(dtype="key<fry>"),
                  "weights.tensors['params/b2'].dtype: 'key<fry>' is a PRNG key type, which weights are never stored "
                  "as"),
}


@pytest.mark.parametrize("case", list(HOSTILE_TABLES))
def test_manifest_validator_refuses_hostile_tensor_tables(small_bound, tmp_path, case):
    edit, message = HOSTILE_TABLES[case]
    with open_artifact(small_bound) as art:
        table = art.manifest["weights"]["tensors"]
        assert [(n, t["offset"], t["nbytes"]) for n, t in table.items()] == [
            ("params/b1", 0, 128), ("params/b2", 128, 40), ("params/w1", 192, 100352), ("params/w2", 100544, 1280)]
        assert art.members["weights.bin"].size == 101824
    bad = _rewrite(small_bound, tmp_path / "bad.jaxport", lambda m: edit(m["weights"]["tensors"]))
    with pytest.raises(FormatError) as e:
        open_artifact(bad)
    assert type(e.value) is FormatError
    assert str(e.value) == f"{bad}: manifest.json: {message}"


def test_manifest_validator_refuses_unknown_and_missing_weights(small_bound, tmp_path):
    def unknown(m):
        m["functions"]["apply"]["weights"].append("params/w9")

    def no_member(m):
        m["weights"]["member"] = "functions/apply.jaxexport"

    for edit, message in [(unknown, "functions['apply'].weights[4]: 'params/w9' is not a tensor of the top-level "
                                    "'weights'"),
                          (no_member, "weights.member: must be 'weights.bin' and listed under 'members'")]:
        bad = _rewrite(small_bound, tmp_path / "bad.jaxport", edit)
        with pytest.raises(FormatError) as e:
            open_artifact(bad)
        assert message in str(e.value)


def test_unedited_rewrite_is_accepted(small_bound, tmp_path, example_models):
    """The hostile-manifest helper itself produces a valid artifact when it edits nothing."""
    good = _rewrite(small_bound, tmp_path / "good.jaxport", lambda m: None)
    x = _example_x("mlp")
    np.testing.assert_allclose(jaxport.load(good)(x), _reference(example_models, "mlp", x), rtol=1e-6, atol=1e-6)
