"""What a bind source may be: an orbax checkpoint directory (an item, one step of a CheckpointManager; a manager's
root, a step of several items, a directory that is no checkpoint and orbax missing refused, naming what to do), and
never a value that holds no arrays (a generator, a number, a function that takes arguments); ``--bind`` of the only
input warns; the bound-values note of a failed export is a summary."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport.errors import SpecError
from jaxport.export.weights import bind
from jaxport.spec import BindLeaf, Where

MODEL = '''import jax.numpy as jnp


def gen():
    yield 1


GEN = gen()
N = 3


def predict(params, x):
    return jnp.tanh(x @ params["dense"]["kernel"] + params["dense"]["bias"]) * params["scale"]


def only(x):
    return jnp.tanh(x) * 2


def scaled(w, k):
    return w * k


def keras_like(trainable, non_trainable, x):  # a Keras model's stateless_call takes both lists, one maybe empty
    return x * trainable[0] + len(non_trainable)


TRAINABLE = [jnp.full(2, 3.0)]
NON_TRAINABLE = []
'''
SPEC = "jaxport: 1\ndims: {b: {max: 8}}\nargs: [\"f32[b, 2]\"]\n"
PARAMS = {"dense": {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3) / 10,
                    "bias": np.ones(3, np.float32)}, "scale": 2.0}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text(MODEL)
    Path("spec.yaml").write_text(SPEC)
    return tmp_path


def _live(params, x):
    import jax
    import jax.numpy as jnp

    return np.asarray(jax.jit(lambda p, v: jnp.tanh(v @ p["dense"]["kernel"] + p["dense"]["bias"]) * p["scale"])(
        params, x))


def _orbax():
    return pytest.importorskip("orbax.checkpoint")


def _export(run_cli, source: str):
    return run_cli("export", "m.py:predict", "-s", "spec.yaml", "--bind", f"params={source}", "-o", "p.jaxport")


def _called(run_cli) -> np.ndarray:
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
    np.save("x.npy", x)
    res = run_cli("call", "p.jaxport", "--inputs", "x.npy", "-o", "out.npy", "--no-cache")
    assert res.exit_code == 0, res.stderr
    return np.load("out.npy")


@pytest.mark.slow
def test_an_orbax_checkpoint_binds_as_the_live_value(workdir, run_cli):
    """StandardCheckpointer's directory, one step of a CheckpointManager and its root (the latest step): arrays
    restored as numpy without the target structure, the saved Python number baked as the live value's would be;
    outputs equal jax.jit's."""
    ocp = _orbax()
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(workdir / "ckpt", PARAMS)
    ckptr.wait_until_finished()
    restored = bind.load_bind_source("ckpt", workdir, "spec.yaml:3")
    assert restored["scale"] == 2.0 and type(restored["scale"]) is float
    assert isinstance(restored["dense"]["kernel"], np.ndarray)
    res = _export(run_cli, "ckpt")
    assert res.exit_code == 0, res.stderr
    assert "predict(x: f32[b, 2]) -> f32[b, 3]" in res.stdout
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_allclose(_called(run_cli), _live(PARAMS, x), rtol=1e-6)
    manifest = json.loads(Path("p.jaxport.manifest.json").read_text())
    assert manifest["source"]["binds"] == {"params": "ckpt"}

    manager = ocp.CheckpointManager(workdir / "run")
    manager.save(5, args=ocp.args.StandardSave(PARAMS))
    manager.save(10, args=ocp.args.StandardSave(PARAMS))
    manager.wait_until_finished()
    res = _export(run_cli, "run/10")
    assert res.exit_code == 0, res.stderr
    np.testing.assert_allclose(_called(run_cli), _live(PARAMS, x), rtol=1e-6)
    # the manager's root: its latest step
    later = {**PARAMS, "scale": 3.0}
    manager.save(12, args=ocp.args.StandardSave(later))
    manager.wait_until_finished()
    res = _export(run_cli, "run")
    assert res.exit_code == 0, res.stderr
    np.testing.assert_allclose(_called(run_cli), _live(later, x), rtol=1e-6)
    shutil.copytree(workdir / "run" / "10" / "default", workdir / "run" / "10" / "extra")
    res = _export(run_cli, "run/10")
    assert (res.exit_code, res.stderr) == (3, (
        "error[spec]: --bind params: bound directory run/10 is an orbax checkpoint step of 2 items (default, "
        "extra); bind the one that holds the weights, e.g. run/10/default.\n"))
    shutil.copytree(workdir / "run" / "12" / "default", workdir / "run" / "12" / "extra")
    res = _export(run_cli, "run")
    assert (res.exit_code, res.stderr) == (3, (
        "error[spec]: --bind params: bound directory run/12 is an orbax checkpoint step of 2 items (default, "
        "extra); bind the one that holds the weights, e.g. run/12/default.\n"))


def test_a_directory_that_is_no_checkpoint(workdir, run_cli):
    Path("weights").mkdir()
    (workdir / "weights" / "w.npz").write_bytes(b"")
    res = _export(run_cli, "weights")
    assert (res.exit_code, res.stderr) == (3, (
        "error[spec]: --bind params: bound directory weights is not an orbax checkpoint (it has no _METADATA or "
        "_CHECKPOINT_METADATA); a bind source is an .npz, .safetensors or .npy file, an orbax checkpoint directory "
        "(what StandardCheckpointer, PyTreeCheckpointer or one step of a CheckpointManager writes), or a Python "
        "attribute 'model.py:NAME'.\n"))


#: Step folders whose names are no step number as a CheckpointManager writes one (``str(step)``): a leading zero or
#: sign, an exponent, letters, a non-ASCII digit (a digit to ``str.isdigit``), more digits than a step has.
NOT_STEPS = ("00", "-1", "1e3", "abc", "+5", "\u0663", "\u00b2", "99999999999999999999", "007")


def test_only_canonical_step_numbers_are_a_managers_steps(workdir, run_cli):
    """Before: '00' counted as step 0 and was read as ckpt/0, which does not exist: error[internal]
    (FileNotFoundError), exit 1."""
    for name in NOT_STEPS:
        (workdir / "ckpt" / name).mkdir(parents=True)
        (workdir / "ckpt" / name / "_CHECKPOINT_METADATA").write_text("{}")
    res = _export(run_cli, "ckpt")
    assert (res.exit_code, res.stderr) == (3, (
        "error[spec]: --bind params: bound directory ckpt is not an orbax checkpoint (it has no _METADATA or "
        "_CHECKPOINT_METADATA); a bind source is an .npz, .safetensors or .npy file, an orbax checkpoint directory "
        "(what StandardCheckpointer, PyTreeCheckpointer or one step of a CheckpointManager writes), or a Python "
        "attribute 'model.py:NAME'.\n"))
    from jaxport.export.weights.orbax_source import item_directory

    for step in ("7", "0"):  # a canonical step beside them is the latest (the highest number), whatever they say
        (workdir / "ckpt" / step / "default").mkdir(parents=True)
        (workdir / "ckpt" / step / "_CHECKPOINT_METADATA").write_text("{}")
        (workdir / "ckpt" / step / "default" / "_METADATA").write_text("{}")
    assert item_directory(workdir / "ckpt", "ckpt", "--bind params") == workdir / "ckpt" / "7" / "default"


def test_orbax_missing_names_the_extra(workdir, run_cli, monkeypatch):
    Path("ckpt").mkdir()
    (workdir / "ckpt" / "_METADATA").write_text("{}")
    monkeypatch.setitem(sys.modules, "orbax", None)
    monkeypatch.setitem(sys.modules, "orbax.checkpoint", None)
    res = _export(run_cli, "ckpt")
    assert (res.exit_code, res.stderr) == (10, (  # a missing extra is exit 10, as every one is
        "error[platform]: --bind params: bound directory ckpt looks like an orbax checkpoint, which needs "
        "orbax-checkpoint to read: pip install 'jaxport[orbax]' (or convert it to .safetensors or .npz).\n"))


@pytest.mark.slow
def test_a_damaged_checkpoint_is_a_spec_error(workdir, run_cli):
    _orbax()
    Path("ckpt").mkdir()
    (workdir / "ckpt" / "_METADATA").write_text("{not json")
    res = _export(run_cli, "ckpt")
    assert res.exit_code == 3
    assert res.stderr.startswith("error[spec]: --bind params: cannot read the orbax checkpoint ckpt: ")
    assert len(res.stderr.splitlines()) == 1


def test_a_checkpoint_declaring_more_than_memory_is_refused_before_reading(workdir, run_cli, monkeypatch):
    """The declared sizes are multiplied as Python integers: a shape whose product wraps around as an int64 (2**40 x
    2**40 x 4 bytes) is refused, not restored."""
    from types import SimpleNamespace

    ocp = _orbax()
    ckptr = ocp.StandardCheckpointer()
    ckptr.save(workdir / "ckpt", PARAMS)
    ckptr.wait_until_finished()
    huge = SimpleNamespace(shape=(2**40, 2**40), dtype=np.dtype("float32"))
    monkeypatch.setattr(ocp.PyTreeCheckpointHandler, "metadata", lambda self, item: {"w": huge})
    monkeypatch.setattr(ocp.PyTreeCheckpointHandler, "restore", lambda *a, **k: pytest.fail("restored"))
    res = _export(run_cli, "ckpt")
    assert res.exit_code == 3
    assert res.stderr.startswith(f"error[spec]: --bind params: bound directory ckpt: the checkpoint's arrays take "
                                 f"{2**80 * 4} bytes, more than this machine's memory (")


MORE = ("A bind stores weights: an .npz, .safetensors or .npy file, an orbax checkpoint directory (what "
        "StandardCheckpointer, PyTreeCheckpointer or one step of a CheckpointManager writes), or a Python attribute "
        "'model.py:NAME' holding a pytree of arrays (or a zero-argument function returning one).")


@pytest.mark.parametrize(("source", "what"), [
    ("m.py:GEN", "a generator (its values are produced one at a time and cannot be stored)"),
    ("m.py:gen", "a generator (its values are produced one at a time and cannot be stored)"),
    ("m.py:N", "the int 3"),
    ("m.py:predict", "the callable predict, which takes arguments (only a zero-argument one is called)"),
])
def test_a_source_that_holds_no_arrays(workdir, run_cli, source, what):
    res = _export(run_cli, source)
    assert (res.exit_code, res.stderr) == (3, f"error[spec]: --bind params: bound value {source} holds no arrays: "
                                              f"it is {what}. {MORE}\n")


def test_a_file_of_no_arrays(workdir, run_cli):
    np.savez("empty.npz")
    res = _export(run_cli, "empty.npz")
    assert (res.exit_code, res.stderr) == (3, "error[spec]: --bind params: bound value empty.npz holds no arrays: it "
                                              f"is a dict with no array leaves. {MORE}\n")


def test_an_empty_python_list_binds_as_itself(workdir, run_cli):
    """A Keras model without non-trainable variables has ``non_trainable_variables == []``: the README's snippet
    binds it, from the command line or the Python API, where an empty file is refused (above)."""
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    res = run_cli("export", "m.py:keras_like", "-s", "spec.yaml", "--bind", "trainable=m.py:TRAINABLE",
                  "--bind", "non_trainable=m.py:NON_TRAINABLE", "-o", "k.jaxport")
    assert res.exit_code == 0, res.stderr
    np.testing.assert_array_equal(np.asarray(jaxport.load("k.jaxport")(x)), x * 3)
    import jax.numpy as jnp

    result = jaxport.export("m.py:keras_like", SPEC, "k2.jaxport",
                            bind={"trainable": [jnp.full(2, 2.0)], "non_trainable": []})
    np.testing.assert_array_equal(np.asarray(result.load()(x)), x * 2)


def test_a_spec_bind_of_no_arrays(workdir):
    spec = "jaxport: 1\nargs:\n  - {bind: m.py:N}\n  - \"f32[2]\"\n"
    with pytest.raises(SpecError) as e:
        jaxport.export("m.py:predict", spec)
    assert str(e.value) == f"<spec text>:3: bound value m.py:N holds no arrays: it is the int 3. {MORE}"


ONLY_WARNING = ("function 'only' takes no inputs once --bind x=x.npy is applied: only() -> f32[4, 2], so every call "
                "returns the same value, fixed at export. --bind stores weights in the artifact; to feed x at call "
                "time instead, leave x out of --bind, give it a shape in the spec's 'args' and call the artifact "
                "with 'jaxport call ART --inputs x.npy'.")


def test_binding_the_only_input_warns(workdir, run_cli):
    np.save("x.npy", np.ones((4, 2), np.float32))
    Path("none.yaml").write_text("jaxport: 1\nargs: []\n")
    res = run_cli("export", "m.py:only", "-s", "none.yaml", "--bind", "x=x.npy", "-o", "o.jaxport", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["warnings"] == [ONLY_WARNING]
    res = run_cli("export", "m.py:only", "-s", "none.yaml", "--bind", "x=x.npy", "-o", "o.jaxport")
    assert res.exit_code == 0 and f"warning: {ONLY_WARNING}" in res.stderr.replace("\n", " ")


def test_a_spec_bind_beside_static_arguments_draws_no_warning(workdir):
    """Weights bound in the spec of a function whose other arguments are static: legitimate, no warning."""
    np.save("w.npy", np.arange(3, dtype=np.float32))
    spec = "jaxport: 1\nargs:\n  - {bind: w.npy}\n  - {static: 2.0}\n"
    result = jaxport.export("m.py:scaled", spec)
    assert result.warnings == []
    np.testing.assert_array_equal(np.asarray(result.load()()), np.arange(3, dtype=np.float32) * 2)


def _bound(prefix: str, n: int, where: int) -> bind.BoundArgument:
    keys = [f"layer{i}/kernel" for i in range(n)]
    return bind.BoundArgument(BindLeaf(f"{prefix}.npz", Where("spec.yaml", where)), prefix, keys,
                              [f"{k}: f32[64, 64]" for k in keys], n * 64 * 64 * 4)


def test_the_bound_values_note_is_a_summary():
    assert bind.bound_note([]) == ""
    assert bind.bound_note([_bound("params", 2, 4)]) == (
        " [bound values: spec.yaml:4: 'params' is bound to params.npz (layer0/kernel: f32[64, 64], layer1/kernel: "
        "f32[64, 64])]")
    assert bind.bound_note([_bound("params", 40, 4)]) == (
        " [bound values: spec.yaml:4: 'params' is bound to params.npz (40 tensors, 655.4 kB; e.g. layer0/kernel: "
        "f32[64, 64], layer1/kernel: f32[64, 64], layer2/kernel: f32[64, 64], ...)]")
    note = bind.bound_note([_bound(f"p{i}", 1, i) for i in range(5)])
    assert note.endswith("; and 2 more bound values]") and note.count("is bound to") == 3
