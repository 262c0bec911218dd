"""`--dim d=...` for a name the spec's constraints define (`d == 64*heads`): JAX rewrites `d` as `64*heads`, so the
program has no `d`; a value for it is a value for `heads` (issue 17)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxport.artifact import contract
from jaxport.errors import InputError

SPEC = """jaxport: 1
dims:
  heads: {max: 16}
  d: {max: 1024}
constraints:
  - "d == 64*heads"
args:
  - "f32[b, d]"
  - "f32[heads]"
"""


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    import jaxport

    d = tmp_path_factory.mktemp("alias")
    (d / "m.py").write_text("def f(x, h):\n    return x * 2, h + 1\n")
    (d / "s.yaml").write_text(SPEC)
    return jaxport.export(str(d / "m.py") + ":f", d / "s.yaml", output=d / "a.jaxport").path


def _fn(artifact):
    import jaxport

    with jaxport.open_artifact(artifact) as art:
        return art.model.functions["f"]


def test_the_program_has_no_d_and_the_constraint_defines_it(artifact):
    fn = _fn(artifact)
    assert contract.dimension_variables(fn) == ["b", "heads"]
    assert set(contract.aliases(fn, ["b", "heads"])) == {"d"}
    assert contract.resolve_dims(fn, {"d": 128, "b": 3}) == {"b": 3, "heads": 2}


@pytest.mark.parametrize(("given", "message"), [
    ({"d": 100}, "dimension 'd' = 100 (given), but d == 64*heads (spec constraint) needs a value of the form "
                 "64*heads with heads an integer."),
    ({"d": 128, "heads": 3}, "dimension 'd' = 128 (given), but d == 64*heads (spec constraint) makes it 192 with "
                             "heads=3."),
    ({"d": 64 * 17}, "dimension 'heads' = 17 (given), but it must satisfy 1 <= heads <= 16 (spec bound)."),
])
def test_a_value_no_variable_fits_names_the_constraint(artifact, given, message):
    with pytest.raises(InputError) as e:
        contract.resolve_dims(_fn(artifact), given)
    assert str(e.value) == message


def test_call_verify_and_warmup_take_the_defined_name(artifact, run_cli, tmp_path):
    out = tmp_path / "out.npz"
    res = run_cli("call", artifact, "--random", "--dim", "d=128", "--dim", "b=2", "-o", out, "--no-cache")
    assert res.exit_code == 0, res.stderr
    with np.load(out) as z:
        assert z["0"].shape == (2, 128) and z["1"].shape == (2,)
    res = run_cli("verify", artifact, "--dim", "d=128,256", "--root", artifact.parent, "--json")
    assert res.exit_code == 0, res.stderr
    res = run_cli("warmup", artifact, "--dim", "d=128", "--dim", "b=2", "--cache-dir", tmp_path / "c")
    assert res.exit_code == 0, res.stderr
    assert "heads=2" in res.stdout


def test_every_command_s_sizes_take_the_defined_name(artifact):
    from jaxport.run import buckets
    from jaxport.run.buckets import sizes
    from jaxport.run.buckets.served import plan_served

    fn = _fn(artifact)
    assert sizes.given(fn, {"d": [128, 256], "b": 2}) == {"b": [2], "heads": [2, 4]}
    assert buckets.plan(fn, fixed={"b": 2}, grid={"d": [128, 256]}).buckets == [{"b": 2, "heads": 2},
                                                                              {"b": 2, "heads": 4}]
    assert plan_served(fn, {"d": [128], "b": [2]}).buckets == [{"b": 2, "heads": 2}]


@pytest.mark.parametrize(("given", "message"), [
    ({"d": 100}, "--dim d=100: dimension 'd' = 100 (given), but d == 64*heads (spec constraint) needs a value of the "
                 "form 64*heads with heads an integer."),
    ({"d": 128, "heads": 3}, "--dim d=128: dimension 'd' = 128 (given), but d == 64*heads (spec constraint) makes it "
                             "192 with heads=3."),
    ({"d": 64 * 17}, "--dim d=1088: d == 64*heads (spec constraint) makes heads 17, outside the spec bound 1 <= heads "
                     "<= 16."),
])
def test_a_defined_name_no_variable_fits_is_a_usage_error(artifact, given, message):
    from jaxport.errors import UsageError
    from jaxport.run.buckets import sizes

    with pytest.raises(UsageError) as e:
        sizes.resolved(_fn(artifact), given)
    assert str(e.value) == message
