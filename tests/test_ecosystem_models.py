"""Models built by the libraries themselves, without downloading weights: keras-hub's ViT and Gemma backbones (tiny
configs, random weights) with their variables bound, a flax linen autoencoder restored from an orbax checkpoint (and
``--bind params=CKPT_DIR``), and a penzai MLP, as a bound and as a free input. Each is exported, inspected, called at
two sizes of its symbolic dimension (values compared with ``jax.jit`` of the live function), verified and, with IREE
installed, compiled and called by IREE."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import jaxport
from tests.support import assert_iree_matches, exported_manifest, module_writer, verified

os.environ.setdefault("KERAS_BACKEND", "jax")

#: Real models from keras-hub, flax with orbax, penzai: each exports, calls at two sizes and verifies.
pytestmark = pytest.mark.slow


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    return module_writer(tmp_path, monkeypatch)


def _close(got, want, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# --- keras-hub -------------------------------------------------------------------------------------------------------

HUB = '''import os
os.environ.setdefault("KERAS_BACKEND", "jax")
import keras, keras_hub

keras.utils.set_random_seed(0)
VIT = keras_hub.models.ViTBackbone(image_shape=(16, 16, 3), patch_size=4, num_layers=2, num_heads=2, hidden_dim=8,
                                   mlp_dim=16)
GEMMA = keras_hub.models.GemmaBackbone(vocabulary_size=64, num_layers=2, num_query_heads=2, num_key_value_heads=1,
                                       hidden_dim=16, intermediate_dim=32, head_dim=8)
VIT_WEIGHTS = VIT.trainable_variables
GEMMA_WEIGHTS = GEMMA.trainable_variables


def vit(trainable, images):
    out, _ = VIT.stateless_call(trainable, [], images)  # no dropout: no non-trainable variables
    return out


def gemma(trainable, token_ids, padding_mask):
    out, _ = GEMMA.stateless_call(trainable, [], {"token_ids": token_ids, "padding_mask": padding_mask})
    return out
'''


@pytest.fixture
def hub(workdir):
    pytest.importorskip("keras_hub")
    return workdir("ecosystem_keras_hub_models", {"hub.py": HUB})


def test_keras_hub_vit_backbone(hub, run_cli, tmp_path):
    Path("spec.yaml").write_text("jaxport: 1\ndims: {b: {max: 8}}\nargs: ['f32[b, 16, 16, 3]']\n")
    manifest = exported_manifest(run_cli, "hub.py:vit", "-s", "spec.yaml", "--bind", "trainable=hub.py:VIT_WEIGHTS",
                                   "-o", "vit.jaxport")
    assert [(i["name"], i["shape"]) for i in manifest["functions"]["vit"]["inputs"]] == [("images", ["b", 16, 16, 3])]
    weights = [np.asarray(v.value) for v in hub.VIT_WEIGHTS]
    loaded = jaxport.load("vit.jaxport")
    import jax

    for b in (1, 6):
        images = np.random.default_rng(b).normal(size=(b, 16, 16, 3)).astype(np.float32)
        _close(loaded(images), jax.jit(hub.vit)(weights, images))
    verified(run_cli, "vit.jaxport")
    assert_iree_matches("vit.jaxport", (np.ones((2, 16, 16, 3), np.float32),), tmp_path / "iree")


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis:UserWarning")  # Keras, at t = 1
def test_keras_hub_gemma_backbone(hub, run_cli, tmp_path):
    """Batch and sequence length both symbolic (RoPE over a symbolic length), token ids kept in the vocabulary."""
    Path("spec.yaml").write_text("jaxport: 1\ndims: {b: {max: 4}, t: {max: 32}}\nargs:\n"
                                 "  - {shape: 'b, t', dtype: i32, range: [0, 64]}\n  - 'bool[b, t]'\n")
    manifest = exported_manifest(run_cli, "hub.py:gemma", "-s", "spec.yaml",
                                   "--bind", "trainable=hub.py:GEMMA_WEIGHTS", "-o", "gemma.jaxport")
    inputs = manifest["functions"]["gemma"]["inputs"]
    assert [(i["name"], i["dtype"], i["shape"]) for i in inputs] == [("token_ids", "int32", ["b", "t"]),
                                                                     ("padding_mask", "bool", ["b", "t"])]
    weights = [np.asarray(v.value) for v in hub.GEMMA_WEIGHTS]
    loaded = jaxport.load("gemma.jaxport")
    import jax

    rng = np.random.default_rng(0)
    for b, t in ((1, 3), (4, 29)):
        ids = rng.integers(0, 64, (b, t)).astype(np.int32)
        mask = np.arange(t)[None, :] < rng.integers(1, t + 1, (b, 1))
        _close(loaded(ids, mask), jax.jit(hub.gemma)(weights, ids, mask), rtol=1e-4, atol=1e-4)
    verified(run_cli, "gemma.jaxport")
    assert_iree_matches("gemma.jaxport", (rng.integers(0, 64, (2, 7)).astype(np.int32), np.ones((2, 7), bool)),
                        tmp_path / "iree", rtol=1e-4, atol=1e-4)


# --- orbax -----------------------------------------------------------------------------------------------------------

AUTOENCODER = '''import jax, numpy as np
from flax import linen as nn


class AutoEncoder(nn.Module):
    @nn.compact
    def __call__(self, x):
        z = nn.relu(nn.Dense(4, name="encoder")(x))
        return nn.Dense(12, name="decoder")(z)


MODEL = AutoEncoder()
PARAMS = MODEL.init(jax.random.key(0), np.zeros((1, 12), np.float32))["params"]


def reconstruct(params, x):
    return MODEL.apply({"params": params}, x)
'''


def test_a_linen_autoencoder_restored_from_an_orbax_checkpoint(workdir, run_cli, tmp_path):
    import jax

    ocp = pytest.importorskip("orbax.checkpoint")
    live = workdir("ecosystem_orbax_autoencoder", {"ae.py": AUTOENCODER})
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(tmp_path / "ckpt", live.PARAMS)  # what a training job writes
    ckptr.wait_until_finished()
    restored = ocp.StandardCheckpointer().restore(tmp_path / "ckpt")
    spec = jaxport.Spec(args=["f32[b, 12]"], dims={"b": {"max": 64}})
    # Python: the restored pytree bound from memory; the command line: the checkpoint directory itself
    api = jaxport.export(live.reconstruct, spec, "api.jaxport", bind={"params": restored})
    Path("spec.yaml").write_text(spec.to_yaml())
    manifest = exported_manifest(run_cli, "ae.py:reconstruct", "-s", "spec.yaml", "--bind", "params=ckpt",
                                   "-o", "ae.jaxport")
    assert sorted(manifest["weights"]["tensors"]) == sorted(api.manifest["weights"]["tensors"]) == [
        "params/decoder/bias", "params/decoder/kernel", "params/encoder/bias", "params/encoder/kernel"]
    for loaded in (api.load(), jaxport.load("ae.jaxport")):
        for b in (1, 50):
            x = np.random.default_rng(b).normal(size=(b, 12)).astype(np.float32)
            _close(loaded(x), jax.jit(live.reconstruct)(live.PARAMS, x), rtol=1e-6, atol=1e-6)
    verified(run_cli, "ae.jaxport")
    assert_iree_matches("ae.jaxport", (np.ones((3, 12), np.float32),), tmp_path / "iree")


# --- penzai ----------------------------------------------------------------------------------------------------------

PENZAI = '''import jax
from penzai import pz
from penzai.models import simple_mlp

MODEL = pz.freeze_params(simple_mlp.MLP.from_config(name="mlp", init_base_rng=jax.random.key(0),
                                                    feature_sizes=[4, 8, 2]))


def apply(model, x):
    # penzai's named axes take int sizes only: the symbolic batch stays outside them, under jax.vmap
    return jax.vmap(lambda row: model(pz.nx.wrap(row).tag("features")).unwrap("features"))(x)
'''


def test_a_penzai_mlp_bound_and_as_a_free_input(workdir, run_cli, tmp_path):
    import jax

    pytest.importorskip("penzai")
    live = workdir("ecosystem_penzai_mlp", {"pz_mlp.py": PENZAI})
    Path("spec.yaml").write_text("jaxport: 1\ndims: {b: {max: 16}}\nargs: ['f32[b, 4]']\n")
    manifest = exported_manifest(run_cli, "pz_mlp.py:apply", "-s", "spec.yaml", "--bind", "model=pz_mlp.py:MODEL",
                                   "-o", "bound.jaxport")
    assert "model/sublayers/0/sublayers/0/weights/value/data_array" in manifest["weights"]["tensors"]
    free = jaxport.export(live.apply, jaxport.Spec(args=[jaxport.like(live.MODEL), "f32[b, 4]"],
                                                   dims={"b": {"max": 16}}), "free.jaxport").load()
    bound = jaxport.load("bound.jaxport")
    other = jax.tree_util.tree_map(lambda a: a * 2, live.MODEL)  # other weights through the free input
    for b in (1, 16):
        x = np.random.default_rng(b).normal(size=(b, 4)).astype(np.float32)
        _close(bound(x), jax.jit(live.apply)(live.MODEL, x), rtol=1e-6, atol=1e-6)
        _close(free(other, x), jax.jit(live.apply)(other, x), rtol=1e-6, atol=1e-6)
    verified(run_cli, "bound.jaxport")
    assert_iree_matches("bound.jaxport", (np.ones((3, 4), np.float32),), tmp_path / "iree")
