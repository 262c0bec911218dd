"""The edges a new user meets first (issue 57): a misspelt file name gets the name that is there, a spec that leaves
out a model's weights says how to bind them. Each message asserted as printed."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support import EXAMPLES

MODEL = """\
import jax.numpy as jnp


def apply(params, x):
    return jnp.tanh(x @ params["w"])


def f(x, y):
    return x + y
"""


@pytest.fixture
def project(tmp_path, monkeypatch, run_cli):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "spec.yaml").write_text("jaxport: 1\nargs: ['f32[2]', 'f32[2]']\n")
    (tmp_path / "apply.yaml").write_text("jaxport: 1\ndims: {b: {max: 8}}\nargs: ['f32[b, 3]']\n")
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    monkeypatch.chdir(tmp_path)
    assert run_cli("export", "model.py:f", "-s", "spec.yaml", "-o", "model.jaxport").exit_code == 0
    return tmp_path


@pytest.mark.parametrize(("args", "code", "message"), [
    (["inspect", "modle.jaxport"], 7, "error[format]: modle.jaxport: file not found. Did you mean 'model.jaxport'?"),
    (["call", "model.jaxport", "-i", "x.nyp", "-i", "x.npy"], 9,
     "error[input]: x.nyp: file not found. Did you mean 'x.npy'?"),
    (["export", "model.py:f", "-s", "spce.yaml", "-o", "b.jaxport"], 3,
     "error[spec]: spce.yaml: spec file not found. Did you mean 'spec.yaml'?"),
    (["export", "mdoel.py:f", "-s", "spec.yaml", "-o", "b.jaxport"], 4,
     "error[entrypoint]: entry point 'mdoel.py:f': file mdoel.py not found. Did you mean 'model.py'?"),
    (["inspect", "nothere.jaxport"], 7, "error[format]: nothere.jaxport: file not found."),  # nothing close
])
def test_a_misspelt_file_name_gets_the_name_that_is_there(project, run_cli, args, code, message):
    res = run_cli(*args)
    assert (res.exit_code, res.stderr) == (code, message + "\n")


def test_a_spec_without_the_weights_says_how_to_bind_them(project, run_cli):
    res = run_cli("export", "model.py:apply", "-s", "apply.yaml", "-o", "a.jaxport")
    assert res.exit_code == 3
    assert res.stderr == (
        "error[spec]: apply.yaml:1: the spec gives 1 positional argument, which does not fit apply(params, x): "
        "missing a required argument: 'x'. Make 'args' and 'kwargs' match the function's parameters; if 'params' "
        "holds weights the artifact should store, bind it: a '- bind: SOURCE' entry (model.py:PARAMS, a .npz, "
        ".safetensors or checkpoint directory) in its place in 'args', or export --bind params=SOURCE "
        "(bind={'params': ...} from Python), and the spec lists the other arguments.\n")
    np.savez(project / "w.npz", w=np.ones((3, 2), np.float32))
    res = run_cli("export", "model.py:apply", "-s", "apply.yaml", "--bind", "params=w.npz", "-o", "a.jaxport")
    assert res.exit_code == 0, res.stderr  # what the hint says works


def test_an_input_of_numpys_default_float64_names_cast(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_cli("export", f"{EXAMPLES}/mlp/model.py:predict", "-s", EXAMPLES / "mlp" / "spec.yaml", "-o",
                   "mlp.jaxport").exit_code == 0
    np.save("x.npy", np.full((2, 784), 0.5))  # float64, every value a float32
    res = run_cli("call", "mlp.jaxport", "-i", "x.npy", "--no-cache")
    assert res.exit_code == 9
    assert res.stderr.endswith("Or let 'jaxport call --cast' convert it on reading: it does when every value is kept "
                               "as float32.\n")
    res = run_cli("call", "mlp.jaxport", "-i", "x.npy", "--cast", "--no-cache", "-o", "out.npy")
    assert res.exit_code == 0, res.stderr
