"""Dimension-dependent ranges of the hostile corpus (``tests/hostile/spec_classes.py``, class ``dimension-ranges``),
checked where the corpus cannot: the values ``call --random`` draws at each size the case calls lie in ``[LO, HI)``
evaluated at that size by the case's own ground truth (Python integers), and the export's verdict is the ground
truth's for every case (refused iff some size within the bounds gives an empty range or one outside the dtype).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.hostile import spec_classes as sc

CASES = {c.name: c for c in sc.range_cases()}


def _export(run_cli, case: sc.RangeCase) -> tuple[int, str]:
    Path("model.py").write_text(sc.RANGE_MODEL)
    Path("spec.yaml").write_text(sc.range_spec(case))
    res = run_cli("export", "model.py:f", "-s", "spec.yaml", "-o", "art.jaxport")
    return res.exit_code, res.stderr


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c.known])
def test_the_export_refuses_a_range_iff_some_size_breaks_it(tmp_path, monkeypatch, run_cli, name):
    monkeypatch.chdir(tmp_path)
    case = CASES[name]
    truth = sc.range_truth(case)
    code, stderr = _export(run_cli, case)
    lines = [line for line in stderr.splitlines() if not line.startswith("jaxport: ")]
    if truth:
        assert code == 3, (truth, stderr)
        assert len(lines) == 1 and lines[0].startswith("error[spec]: spec.yaml:") and "range" in lines[0], stderr
    elif case.other:
        assert code == case.other[0] and case.other[1] in lines[0], stderr
    else:
        assert code == 0, stderr


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c.known and not c.other
                                  and not sc.range_truth(c)])
def test_random_values_lie_in_the_range_at_each_size(tmp_path, monkeypatch, run_cli, name):
    monkeypatch.chdir(tmp_path)
    case = CASES[name]
    assert _export(run_cli, case)[0] == 0
    sizes = sc.call_sizes(case)
    assert sizes, "every accepted case is called at some size"
    for env in sizes:
        dims = [a for k, v in env.items() for a in ("--dim", f"{k}={v}")]
        for seed in (0, 1):
            res = run_cli("call", "art.jaxport", "--random", "--seed", str(seed), "--no-cache", "-o", "out.npz",
                          *dims)
            assert res.exit_code == 0, (env, res.stderr)
            x = np.load("out.npz")["output"]
            lo, hi = sc._python(case.lo, env), sc._python(case.hi, env)
            shape = tuple(int(sc._python(s, env)) for s in case.shape)
            assert x.shape == shape and x.dtype == np.dtype(_numpy(case.dtype))
            assert x.size == 0 or (int(x.min()) >= lo and int(x.max()) < hi), (env, lo, hi, x.min(), x.max())
            if x.size >= 64 and hi - lo >= 2:  # drawn across the range, not one value
                assert len(np.unique(x)) > 1, (env, x[:8])


def test_a_range_between_the_corners_of_a_large_box_is_refused_when_called(tmp_path, monkeypatch, run_cli):
    """The known gap (``mod-dips-in-a-large-box``): above ``values.MAX_RANGE_SIZES`` sizes the export checks the
    corners only; the call at a size where the range is empty is then refused, exit 2, naming the range."""
    monkeypatch.chdir(tmp_path)
    case = CASES["mod-dips-in-a-large-box"]
    assert _export(run_cli, case)[0] == 0
    res = run_cli("call", "art.jaxport", "--random", "--no-cache", "--dim", "n=4")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1].startswith("error[usage]: ") and "mod(n, 4)" in res.stderr
    assert run_cli("call", "art.jaxport", "--random", "--no-cache", "--dim", "n=5").exit_code == 0


def _numpy(dtype: str) -> str:
    return {"i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32", "u32": "uint32"}[dtype]


def test_a_dimension_max_beyond_int32_is_a_spec_error_without_64_bit_inputs(tmp_path, monkeypatch, run_cli):
    """JAX checks a dimension's bounds as 32-bit integers unless the program has 64-bit values: a max of 2**31 is
    refused naming the dims entry (before: exit 5 with JAX's OverflowError); with an f64 input it exports."""
    monkeypatch.chdir(tmp_path)
    Path("model.py").write_text("def f(x):\n    return x * 2\n")
    for dtype, code in (("f32", 3), ("f64", 0)):
        Path("spec.yaml").write_text(f"jaxport: 1\ndims:\n  n: {{min: 1, max: 2147483648}}\n"
                                     f"args:\n  - {{shape: [n], dtype: {dtype}}}\n")
        res = run_cli("export", "model.py:f", "-s", "spec.yaml", "-o", f"{dtype}.jaxport")
        assert res.exit_code == code, res.stderr
        assert Path(f"{dtype}.jaxport").exists() == (code == 0)
        if code:
            assert res.stderr.splitlines()[-1] == (
                "error[spec]: spec.yaml:3: dims['n'].max: 2147483648 is above 2**31 - 1, and a program without 64-bit "
                "inputs checks its dimension sizes as 32-bit integers. Lower the max, or leave it out (no upper "
                "bound).")
