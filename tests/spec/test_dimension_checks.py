"""What the spec reader refuses about dimension variables: a misspelt use of a declared one (reported at the use, with
"did you mean"), and a dimension-dependent range that is empty or leaves its dtype at a corner of the dimension
bounds; and what ``call --random`` says when such a range (an older artifact's, or a ``--range``) does not hold at
the call's dimension values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import SpecError

HEAD = "jaxport: 1\ndims: {n: {max: 64}, k: {max: 16}}\nargs:\n  - 'f32[n, 2]'\n"
GATHER = ("import jax.numpy as jnp\n\n\ndef f(table, idx):\n"
          "    return jnp.take(table, idx, axis=0, mode='fill', fill_value=-1.0)\n")
CORNER = "(a corner of the dimension bounds)"


def _refusal(text: str) -> str:
    with pytest.raises(SpecError) as e:
        jaxport.parse_spec(text, "spec.yaml")
    return str(e.value)


def test_a_misspelt_dimension_is_reported_at_its_use_with_did_you_mean():
    spec = "jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - 'f32[batch, 3]'\n  - 'f32[bacth, 784]'\n"
    assert _refusal(spec.replace("'f32[batch, 3]'", "'f32[7, 3]'")) == (
        "spec.yaml:6: args[1].shape[0]: dimension variable 'bacth' is not declared under 'dims'. Did you mean "
        "'batch'? (dims['batch'] at line 3 is used by no argument shape.)")
    # the declared name used elsewhere too: 'bacth' is then a variable of its own (as n1 and n2 are)
    assert set(jaxport.parse_spec(spec, "spec.yaml").functions[None].args[1].shape) == {"bacth", 784}


def test_a_misspelt_dimension_inside_an_expression_and_a_long_form_leaf():
    spec = ("jaxport: 1\ndims:\n  seq: {max: 512}\nargs:\n  - shape: [2, '2*sqe + 1']\n    dtype: f32\n")
    assert _refusal(spec) == (
        "spec.yaml:5: args[0].shape[1]: dimension variable 'sqe' is not declared under 'dims'. Did you mean 'seq'? "
        "(dims['seq'] at line 3 is used by no argument shape.)")


def test_an_unused_dimension_without_a_close_use_is_reported_at_the_use():
    """A declared name no shape uses beside a shape's name that is not declared: the use is where the spec is read
    wrong (a renamed dimension, a typo too far to guess), and the message names both and both fixes."""
    assert _refusal("jaxport: 1\ndims: {batch: {max: 4}}\nargs:\n  - 'f32[rows, 3]'\n") == (
        "spec.yaml:4: args[0].shape[0]: dimension variable 'rows' is not declared under 'dims', and dims['batch'] at "
        "line 2 is used by no argument shape. Write 'batch' here if that is the dimension meant; else declare 'rows' "
        "under 'dims' and use 'batch' in a shape or remove it (JAX derives a dimension variable only from an argument "
        "shape).")
    assert _refusal("jaxport: 1\ndims: {batch: {max: 4}}\nargs:\n  - 'f32[3, 2]'\n") == (
        "spec.yaml:2: dims['batch'] is declared but no argument shape uses it; JAX can only derive a dimension "
        "variable from an argument shape. Use it or remove it.")


def test_a_spec_from_python_names_no_line_of_its_generated_text():
    with pytest.raises(jaxport.SpecError) as e:
        jaxport.export(lambda x: x, jaxport.Spec(args=["f32[bacth, 4]"], dims={"batch": {"max": 64}}))
    assert str(e.value) == ("<jaxport.Spec>: args[0].shape[0]: dimension variable 'bacth' is not declared under "
                            "'dims'. Did you mean 'batch'? (dims['batch'] is used by no argument shape.)")


@pytest.mark.parametrize(("leaf", "message"), [
    ("{shape: [k], dtype: i32, range: [n, 0]}",
     f"[n, 0] is [1, 0) at n=1 {CORNER}: LO 1 is not below HI 0; the range is half-open [LO, HI), so give LO < HI "
     f"([0, 10] is 0..9)"),
    ("{shape: [k], dtype: i32, range: [0, n - 10]}",
     f"[0, n - 10] is [0, -9) at n=1 {CORNER}: LO 0 is not below HI -9; the range is half-open [LO, HI), so give "
     f"LO < HI ([0, 10] is 0..9)"),
    ("{shape: [k], dtype: i32, range: [0, n^6]}",
     f"[0, n^6] is [0, 68719476736) at n=64 {CORNER}: [0, 68719476736) does not fit int32, whose values are "
     f"-2147483648..2147483647; give LO >= -2147483648 and HI <= 2147483648"),
    ("{shape: [k], dtype: u8, range: [0, n*10]}",
     f"[0, n*10] is [0, 640) at n=64 {CORNER}: [0, 640) does not fit uint8, whose values are 0..255; give LO >= 0 "
     f"and HI <= 256"),
])
def test_a_range_that_fails_at_a_corner_of_the_bounds_is_refused(leaf, message):
    assert _refusal(HEAD + f"  - {leaf}\n") == (
        f"spec.yaml:5: args[1].range: {message}. Change the range, or the bounds under 'dims'.")


def test_a_range_that_holds_at_every_corner_is_kept():
    for given, kept in (("['-n', k]", ("-n", "k")), ("[n - 1, n]", ("n - 1", "n")), ("[0, 'n*k']", (0, "n*k"))):
        spec = HEAD + f"  - {{shape: [k], dtype: i16, range: {given}}}\n"
        assert jaxport.parse_spec(spec, "spec.yaml").functions[None].args[1].range == kept


def test_a_variable_without_a_max_is_checked_at_2_to_the_31_minus_1():
    spec = "jaxport: 1\ndims: [nodes, k]\nargs:\n  - 'f32[nodes, 2]'\n  - {shape: [k], dtype: DT, range: [0, HI]}\n"
    for dtype, hi in (("i32", "nodes"), ("i32", "nodes + 1"), ("i64", "2*nodes"), ("u32", "2*nodes")):
        parsed = jaxport.parse_spec(spec.replace("DT", dtype).replace("HI", hi), "spec.yaml")
        assert parsed.functions[None].args[1].range == (0, hi)
    assert _refusal(spec.replace("DT", "i16").replace("HI", "nodes")) == (
        "spec.yaml:5: args[1].range: [0, nodes] is [0, 2147483647) at nodes=2147483647 (a corner of the dimension "
        "bounds; nodes has no max under 'dims', so it is taken as 2**31 - 1): [0, 2147483647) does not fit int16, "
        "whose values are -32768..32767; give LO >= -32768 and HI <= 32768. Change the range, or the bounds under "
        "'dims'.")
    assert _refusal(spec.replace("DT", "i64").replace("HI", "nodes^3")) == (
        "spec.yaml:5: args[1].range: [0, nodes^3] at nodes=2147483647 (a corner of the dimension bounds; nodes has "
        "no max under 'dims', so it is taken as 2**31 - 1): the value of 'nodes^3' exceeds 2**62 in magnitude. Change "
        "the range, or the bounds under 'dims'.")


def test_corners_the_constraints_exclude_are_not_checked():
    spec = HEAD + "  - {shape: [k], dtype: i32, range: [0, n - k]}\n"
    assert _refusal(spec).startswith(f"spec.yaml:5: args[1].range: [0, n - k] is [0, 0) at k=1, n=1 {CORNER}: ")
    with_constraint = spec.replace("args:", "constraints: ['k <= n - 1']\nargs:")
    assert jaxport.parse_spec(with_constraint, "spec.yaml").functions[None].args[1].range == (0, "n - k")


def test_a_like_leaf_range_is_checked_at_the_corners_too(tmp_path):
    (tmp_path / "vals.py").write_text("import numpy as np\nEXAMPLE = {'idx': np.zeros(7, np.int32)}\n")
    spec = ("jaxport: 1\ndims: {n: {max: 64}, e: {max: 16}}\nargs:\n  - 'f32[n, 2]'\n  - like: vals.py:EXAMPLE\n"
            "    sizes: {7: e}\n    leaves:\n      idx: {shape: [e], dtype: u8, range: [0, 'n*8']}\n")
    with pytest.raises(SpecError) as e:
        jaxport.parse_spec(spec, "spec.yaml", tmp_path)
    assert str(e.value) == (
        f"spec.yaml:8: args[1].leaves['idx'].range: [0, n*8] is [0, 512) at n=64 {CORNER}: [0, 512) does not fit "
        f"uint8, whose values are 0..255; give LO >= 0 and HI <= 256. Change the range, or the bounds under 'dims'.")


@pytest.fixture
def unchecked_artifact(tmp_path, monkeypatch) -> Path:
    """An artifact whose manifest holds the range [n - 10, n] on a u8 input, exported with the corner check off (as
    an artifact written before it could be): its LO leaves uint8 for n < 10."""
    import jaxport.spec.parse as parse

    monkeypatch.setattr(parse, "check_corners", lambda *a, **k: None)
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text(GATHER)
    Path("spec.yaml").write_text(HEAD + "  - {shape: [k], dtype: u8, range: [n - 10, n]}\n")
    return jaxport.export("model.py:f", "spec.yaml", output=tmp_path / "g.jaxport").path


def test_call_random_refuses_a_manifest_range_that_does_not_hold_at_the_call_sizes(unchecked_artifact, run_cli):
    res = run_cli("call", unchecked_artifact, "--random", "--dim", "n=4", "--dim", "k=3", "--no-cache")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: the artifact's manifest: [n - 10, n] evaluated at n=4: the range -6:4 of input 'idx' leaves "
        "uint8, which holds 0..255; give a range within 0:256. Call it at other dimension values (--dim "
        "NAME=VALUE), or give the input's values with --range idx=LO:HI.\n"))
    res = run_cli("call", unchecked_artifact, "--random", "--dim", "n=12", "--dim", "k=3", "--no-cache", "-o",
                  "out.npz", "--save-inputs", "in.npz")
    assert res.exit_code == 0, res.stderr
    idx = np.load("in.npz")["idx"]
    assert 2 <= idx.min() and idx.max() < 12
    assert (np.load("out.npz")["output"] == np.load("in.npz")["table"][idx]).all()


def test_call_random_refuses_a_range_option_that_is_empty_at_the_call_sizes(unchecked_artifact, run_cli):
    res = run_cli("call", unchecked_artifact, "--random", "--dim", "n=5", "--dim", "k=3", "--range", "idx=n:5",
                  "--no-cache")
    assert (res.exit_code, res.stderr) == (2, (
        "error[usage]: --range: [n, 5] evaluated at n=5: the range 5:5 of input 'idx' is empty; LO must be less "
        "than HI (the range is half-open, [LO, HI)). Call it at other dimension values (--dim NAME=VALUE), or give "
        "the input's values with --range idx=LO:HI.\n"))
    res = run_cli("verify", unchecked_artifact, "--range", "idx=n:5")
    assert res.exit_code == 2 and res.stderr.startswith("error[usage]: --range: [n, 5] evaluated at n="), res.stderr
