"""One home for dimension sizes (``jaxport.run.buckets.sizes``): the same ``--dim`` mistake gets the same line and
exit code (2, a usage error) from every command that takes ``--dim``, and the same message (a ``UsageError``) from
the Python API."""

from __future__ import annotations

import re

import pytest

import jaxport
from jaxport.errors import UsageError
from jaxport.serve.batching import Batched

#: Each command that takes --dim, as it is run on the MLP example (batch: 1..4096), before its --dim.
COMMANDS = {
    "call --random": ["call", "{mlp}", "--random", "--no-cache"],
    "warmup": ["warmup", "{mlp}", "--cache-dir", "{tmp}/cache"],
    "warmup --target": ["warmup", "{mlp}", "--target", "cpu", "--cache-dir", "{tmp}/cache"],
    "compile": ["compile", "{mlp}", "-o", "{tmp}/m.vmfb"],
    "serve": ["serve", "{mlp}", "--uds", "{tmp}/s.sock"],  # refused before it needs jaxport[serve] or listens
    "verify": ["verify", "{mlp}"],
    "check --target": ["check", "{mlp}", "--target", "cpu"],
}

#: The mistakes, and the message every command gives for each.
MISTAKES = {
    "an unknown name": ("bach=3", "--dim bach: the function has no dimension variable 'bach'; it has batch. Did you "
                                  "mean 'batch'?"),
    "a name in the wrong case": ("BATCH=3", "--dim BATCH: the function has no dimension variable 'BATCH'; it has "
                                            "batch. Did you mean 'batch'?"),
    "a size outside the bounds": ("batch=0", "--dim batch=0: 0 is outside the spec bound 1 <= batch <= 4096."),
    "one size of several outside the bounds": ("batch=8,5000", "--dim batch=8,5000: 5000 is outside the spec bound "
                                                               "1 <= batch <= 4096."),
    "a malformed text": ("batch=x", "Invalid value for '--dim': 'batch=x': 'x' is not an integer. See 'jaxport "
                                    "{command} --help'."),
}


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("command", COMMANDS)
def test_the_same_dim_mistake_gets_the_same_line_and_exit_code(run_cli, mlp_path, tmp_path, monkeypatch, command,
                                                               mistake):
    monkeypatch.chdir(tmp_path)
    text, message = MISTAKES[mistake]
    if command == "call --random" and "," in text:
        text, message = "batch=5000", "--dim batch=5000: 5000 is outside the spec bound 1 <= batch <= 4096."
    args = [a.format(mlp=mlp_path, tmp=tmp_path) for a in COMMANDS[command]]
    res = run_cli(*args, "--dim", text)
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {message.format(command=args[0])}\n")
    assert res.stdout == ""
    assert [p.name for p in tmp_path.iterdir() if p.name != "cache"] == []  # no output written, no socket


def test_a_name_no_served_function_has_names_them_all(run_cli, mlp_path, pytree_path, tmp_path):
    res = run_cli("serve", mlp_path, pytree_path, "--uds", tmp_path / "s.sock", "--dim", "batc=3")
    assert (res.exit_code, res.stderr) == (2, "error[usage]: --dim batc: no function has a dimension variable 'batc'; "
                                              "they have batch, h. Did you mean 'batch'?\n")


@pytest.mark.parametrize("dims,message", [
    ({"bach": 3}, MISTAKES["an unknown name"][1]),
    ({"batch": 0}, MISTAKES["a size outside the bounds"][1]),
    ({"batch": 2.5}, "--dim batch=2.5: 2.5 is not a size (an integer from 0 to 2**62)."),
    ({"batch": True}, "--dim batch=True: True is not a size (an integer from 0 to 2**62)."),
])
def test_the_python_api_gives_the_same_messages(mlp_path, tmp_path, dims, message):
    loaded = jaxport.load(mlp_path)
    listed = {k: [v] for k, v in dims.items()}
    attempts = [
        lambda: loaded.random_inputs(dims),
        lambda: loaded.warmup(dims, cache_dir=tmp_path / "cache"),
        lambda: jaxport.call(jaxport.CallRequest(mlp_path, random=True, dims=dims, cache=False)),
        lambda: jaxport.verify_artifact(mlp_path, dims=listed),
        lambda: jaxport.compile_artifact(mlp_path, tmp_path / "m.vmfb", dims=dims),
        lambda: Batched(loaded, listed),
    ]
    for attempt in attempts:
        with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
            attempt()


def test_numpy_integers_are_sizes(mlp_path):
    import numpy as np

    loaded = jaxport.load(mlp_path)
    assert loaded.random_inputs({"batch": np.int64(3)})["x"].shape == (3, 784)
