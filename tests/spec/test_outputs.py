"""Output names: a spec's ``outputs:`` names the arrays a function returns, for the manifest, ``inspect``, ``call -o``
files, ``call --expect`` and ``verify``; names that do not fit what the function returns are refused at the
``outputs`` line. Real exports; values compared with the function run directly."""

from __future__ import annotations

import json
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import jaxport
from jaxport.errors import SpecError

MODEL = '''
import jax.numpy as jnp


def step(x, w):
    logits = x @ w
    return logits, {"k": x * 2.0, "v": (x + 1.0, x - 1.0)}


def three(x):
    return x, x * 2.0, x * 3.0


def heads(x):
    return {"a": x * 2.0, "b": (x + 1.0, x.sum(axis=-1))}


def single(x):
    return jnp.tanh(x)


def with_none(x):
    return x * 2.0, None
'''

STEP_SPEC = '''jaxport: 1
dims: [b]
args: ["f32[b, 4]", "f32[4, 3]"]
outputs: {outputs}
'''


def _step(x, w):
    return x @ w, {"k": x * 2.0, "v": (x + 1.0, x - 1.0)}


@pytest.fixture
def model_dir(tmp_path, monkeypatch):
    """A directory holding model.py, as the current directory; inputs x.npy (2 x 4) and w.npy (4 x 3)."""
    (tmp_path / "model.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    np.save(tmp_path / "x.npy", rng.standard_normal((2, 4)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.standard_normal((4, 3)).astype(np.float32))
    yield tmp_path
    sys.modules.pop("model", None)


def _export(run_cli, entry: str, spec: str, out: str = "out.jaxport"):
    with open("spec.yaml", "w") as f:
        f.write(spec)
    return run_cli("export", entry, "-s", "spec.yaml", "-o", out)


def _outputs(path) -> list[str]:
    with jaxport.open_artifact(path) as art:
        return [o["name"] for o in art.manifest["functions"][next(iter(art.manifest["functions"]))]["outputs"]]


def test_tuple_outputs_named_through_the_spec(model_dir, run_cli):
    result = _export(run_cli, "model.py:step", STEP_SPEC.format(outputs="[logits, cache]"))
    assert result.exit_code == 0, result.stderr
    names = ["logits", "cache/k", "cache/v/0", "cache/v/1"]
    assert _outputs("out.jaxport") == names

    shown = json.loads(run_cli("inspect", "out.jaxport", "--json").stdout)
    assert [o["name"] for o in shown["functions"]["step"]["outputs"]] == names
    text = run_cli("inspect", "out.jaxport").stdout
    assert "cache/v/0" in text and "logits" in text

    called = run_cli("call", "out.jaxport", "--inputs", "x.npy", "--inputs", "w.npy", "-o", "out.npz")
    assert called.exit_code == 0, called.stderr
    x, w = np.load("x.npy"), np.load("w.npy")
    logits, cache = _step(jnp.asarray(x), jnp.asarray(w))
    expected = {"logits": logits, "cache/k": cache["k"], "cache/v/0": cache["v"][0], "cache/v/1": cache["v"][1]}
    with np.load("out.npz") as got:
        assert list(got.keys()) == names
        for name in names:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, atol=1e-6)

    checked = run_cli("call", "out.jaxport", "--inputs", "x.npy", "--inputs", "w.npy", "--expect", "out.npz", "--json")
    assert checked.exit_code == 0, checked.stderr
    assert [o["name"] for o in json.loads(checked.stdout)["expect"]["outputs"]] == names

    verified = run_cli("verify", "out.jaxport", "--json")
    assert verified.exit_code == 0, verified.stdout + verified.stderr
    rows = json.loads(verified.stdout)["cases"]
    assert rows and all([o["name"] for o in case["outputs"]] == names for case in rows)


def test_jaxport_load_keeps_the_output_tree(model_dir):
    (model_dir / "spec.yaml").write_text(STEP_SPEC.format(outputs="[logits, {k: cache_k, v: [v0, v1]}]"))
    path = jaxport.export("model.py:step", "spec.yaml", output=model_dir / "out.jaxport").path
    f = jaxport.load(path)
    assert f.output_names == ["logits", "cache_k", "v0", "v1"]
    x, w = jnp.asarray(np.load("x.npy")), jnp.asarray(np.load("w.npy"))
    got, want = f(x, w), _step(x, w)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[1]["v"][1], want[1]["v"][1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("outputs", "names"), [
    ("[null, cache]", ["0", "cache/k", "cache/v/0", "cache/v/1"]),
    ("[logits, {k: null, v: vv}]", ["logits", "1/k", "vv/0", "vv/1"]),
    ("all", ["all/0", "all/1/k", "all/1/v/0", "all/1/v/1"]),
    ("null", ["0", "1/k", "1/v/0", "1/v/1"]),
])
def test_names_stand_for_subtrees_and_null_keeps_the_defaults(model_dir, outputs, names):
    (model_dir / "spec.yaml").write_text(STEP_SPEC.format(outputs=outputs))
    result = jaxport.export("model.py:step", "spec.yaml", output=model_dir / "out.jaxport")
    assert [o["name"] for o in result.manifest["functions"]["step"]["outputs"]] == names


def test_a_dict_output(model_dir, run_cli):
    spec = 'jaxport: 1\nargs: ["f32[2, 4]"]\noutputs: {b: [second, total], a: first}\n'
    assert _export(run_cli, "model.py:heads", spec).exit_code == 0
    assert _outputs("out.jaxport") == ["first", "second", "total"]
    called = run_cli("call", "out.jaxport", "--inputs", "x.npy", "-o", "out.npz")
    assert called.exit_code == 0, called.stderr
    x = np.load("x.npy")
    with np.load("out.npz") as got:
        assert list(got.keys()) == ["first", "second", "total"]
        np.testing.assert_allclose(got["first"], x * 2.0, rtol=1e-6)
        np.testing.assert_allclose(got["second"], x + 1.0, rtol=1e-6)
        np.testing.assert_allclose(got["total"], x.sum(axis=-1), rtol=1e-6)


@pytest.mark.parametrize("outputs", ["y", "[y]"])
def test_a_single_array_output(model_dir, run_cli, outputs):
    assert _export(run_cli, "model.py:single", f'jaxport: 1\nargs: ["f32[2, 4]"]\noutputs: {outputs}\n').exit_code == 0
    assert _outputs("out.jaxport") == ["y"]
    assert run_cli("call", "out.jaxport", "--inputs", "x.npy", "-o", "y.npy").exit_code == 0
    np.testing.assert_allclose(np.load("y.npy"), np.tanh(np.load("x.npy")), rtol=1e-6)


def test_each_function_of_a_multi_function_spec_names_its_outputs(model_dir):
    (model_dir / "spec.yaml").write_text('''jaxport: 1
functions:
  step:
    entrypoint: model.py:step
    args: ["f32[2, 4]", "f32[4, 3]"]
    outputs: [logits, cache]
  heads:
    entrypoint: model.py:heads
    args: ["f32[2, 4]"]
    outputs: {a: doubled, b: null}
  single:
    entrypoint: model.py:single
    args: ["f32[2, 4]"]
''')
    manifest = jaxport.export(None, "spec.yaml", output=model_dir / "suite.jaxport").manifest
    names = {f: [o["name"] for o in entry["outputs"]] for f, entry in manifest["functions"].items()}
    assert names == {"step": ["logits", "cache/k", "cache/v/0", "cache/v/1"], "heads": ["doubled", "b/0", "b/1"],
                     "single": ["output"]}


HINT = "Give one name per element (a name may stand for a whole subtree; null keeps an element's default name)."


@pytest.mark.parametrize(("entry", "outputs", "message"), [
    ("three", "[logits, cache]",
     f"spec.yaml:3: outputs: the function returns a tuple of 3 arrays, but 'outputs' gives 2 names. {HINT}"),
    ("step", "[a, b, c]",
     f"spec.yaml:3: outputs: the function returns a tuple of 2 elements, but 'outputs' gives 3 names. {HINT}"),
    ("step", "{logits: a}",
     "spec.yaml:3: outputs: the function returns a tuple of 2 elements, but 'outputs' gives a mapping. Write a list "
     "of 2 names."),
    ("step", "[logits, [k, v]]",
     "spec.yaml:3: outputs[1]: the function returns a dict with keys 'k', 'v' there, but 'outputs' gives a list of "
     "2 names. Write a mapping with the same keys."),
    ("step", "[logits, {k: kk, v: [v0]}]",
     f"spec.yaml:3: outputs[1]['v']: the function returns a tuple of 2 arrays there, but 'outputs' gives 1 name. "
     f"{HINT}"),
    ("step", "[logits, {k: kk}]",
     "spec.yaml:3: outputs[1]: no name for the function's key 'v'; give one (or null to keep its default name)."),
    ("step", "[logits, {k: kk, v: vv, w: ww}]",
     "spec.yaml:3: outputs[1]: the function's dict there has no key 'w' (its keys: 'k', 'v')."),
    ("step", "[logits, {k: kk, v: {a: b}}]",
     "spec.yaml:3: outputs[1]['v']: the function returns a tuple of 2 arrays there, but 'outputs' gives a mapping. "
     "Write a list of 2 names."),
    ("single", "[a, b]",
     "spec.yaml:3: outputs: the function returns an array, but 'outputs' gives a list of 2 names. Write one name."),
    ("with_none", "[doubled, nothing]",
     "spec.yaml:3: outputs[1]: 'nothing' names no array: the function returns None there. Write null in its place."),
    ("heads", "{a: null, b: [a, c]}",
     "spec.yaml:3: outputs: two outputs get the name 'a' (outputs 0 and 1, named 'a' and 'b/0' by default). "
     "Rename one."),
])
def test_names_that_do_not_fit_the_outputs_are_refused(model_dir, run_cli, entry, outputs, message):
    result = _export(run_cli, f"model.py:{entry}", f'jaxport: 1\nargs: ["f32[2, 4]"]\noutputs: {outputs}\n'
                     if entry != "step" else f'jaxport: 1\nargs: ["f32[2, 4]", "f32[4, 3]"]\noutputs: {outputs}\n')
    assert (result.exit_code, result.stderr) == (3, f"error[spec]: {message}\n")
    assert not (model_dir / "out.jaxport").exists()


@pytest.mark.parametrize(("text", "message"), [
    ("jaxport: 1\nargs: ['f32[3]']\noutputs: [logits, 2x]\n",
     "spec.yaml:3: outputs[1]: '2x' is not a valid output name: use letters, digits and '_', not starting with a "
     "digit (at most 128 characters)."),
    ("jaxport: 1\nargs: ['f32[3]']\noutputs: [cache/k]\n",
     "spec.yaml:3: outputs[0]: 'cache/k' is not a valid output name: use letters, digits and '_', not starting with "
     "a digit (at most 128 characters)."),
    ("jaxport: 1\nargs: ['f32[3]']\noutputs: [a, {k: a}]\n",
     "spec.yaml:3: outputs[1]['k']: the name 'a' is given twice (also at outputs[0]); give each output its own "
     "name."),
    ("jaxport: 1\nargs: ['f32[3]']\noutputs: [a, 3]\n",
     "spec.yaml:3: outputs[1]: 3 is not an output name. Write a name such as 'logits', a list of names ([logits, "
     "cache]), a mapping for a dict output, or null to keep the default name."),
    ("jaxport: 1\nargs: ['f32[3]']\noutputs: 3\n",
     "spec.yaml:3: 'outputs' names the function's outputs: a name, a list ([logits, cache]) or a mapping for a dict "
     "output, found 3."),
    ("jaxport: 1\noutputs: [a]\nfunctions: {f: {args: ['f32[3]']}}\n",
     "spec.yaml:2: with 'functions:', give 'outputs' inside each function's entry."),
])
def test_output_name_errors_when_the_spec_is_read(text, message):
    with pytest.raises(SpecError) as e:
        jaxport.parse_spec(text, "spec.yaml")
    assert str(e.value) == message


def test_the_spec_records_the_names_and_their_line():
    spec = jaxport.parse_spec("jaxport: 1\nfunctions:\n  f:\n    args: ['f32[3]']\n    outputs: [a, {k: null}]\n",
                              "spec.yaml")
    f = spec.functions["f"]
    assert (f.outputs, str(f.outputs_where)) == (["a", {"k": None}], "spec.yaml:5")
    assert jaxport.parse_spec("jaxport: 1\nargs: ['f32[3]']\n", "s.yaml").functions[None].outputs is None
