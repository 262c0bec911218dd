"""A dtype is one ``DType`` entry in ``jaxport/dtypes.py``: every per-dtype table elsewhere is derived from
``dtypes.TABLE``, and no module but ``dtypes.py`` spells a table of dtypes, safetensors tags or MLIR element types."""

from __future__ import annotations

import ast
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from jaxport import dtypes, tolerance
from jaxport.arrayfiles import safetensors as safetensors_io
from jaxport.errors import InputError
from jaxport.importer import mlir
from jaxport.run.values import npyio, outputs

REPO = Path(__file__).resolve().parents[2]
ARRAY_TYPES = [d for d in dtypes.TABLE if d.kind != "key"]


def test_the_derived_tables_follow_the_entries():
    assert dtypes.BY_NAME == {d.name: d for d in dtypes.TABLE}
    assert {t: d.name for t, d in dtypes.BY_SAFETENSORS.items()} == \
        {d.safetensors: d.name for d in dtypes.TABLE if d.safetensors}
    assert {m: d.name for m, d in dtypes.BY_MLIR.items()} == {d.mlir: d.name for d in ARRAY_TYPES}
    assert dtypes.KEYS == {d.name: d.key for d in dtypes.TABLE if d.kind == "key"}
    assert outputs.NOT_IN_NPY == dtypes.NOT_IN_NPY == tuple(d.name for d in dtypes.TABLE if d.ml_dtypes)
    assert tolerance.TOLERANCES == {d.name: d.tolerance for d in ARRAY_TYPES if d.kind in ("float", "complex")}
    assert tolerance.COMPILER_TOLERANCES == {d.name: d.compiler_tolerance for d in ARRAY_TYPES
                                             if d.kind in ("float", "complex")}
    for d in dtypes.TABLE:
        assert tolerance.tolerance(d.name) == d.tolerance
        assert tolerance.tolerance(d.name, across_compilers=True) == d.compiler_tolerance
        assert safetensors_io.tag_of(d.name) == d.safetensors


@pytest.mark.parametrize("d", ARRAY_TYPES, ids=[d.name for d in ARRAY_TYPES])
def test_each_entry_states_facts_numpy_and_ml_dtypes_agree_with(d):
    np_dtype = dtypes.to_numpy(d.name)
    assert (np_dtype.name, np_dtype.itemsize) == (d.name, d.itemsize)
    assert d.ml_dtypes == (np_dtype.type.__module__ == "ml_dtypes")
    try:  # a .npy header names the type so that numpy reads it back as itself
        back = np.lib.format.descr_to_dtype(np.lib.format.dtype_to_descr(np_dtype))
    except (TypeError, ValueError):
        back = None
    assert d.npy == (back == np_dtype)
    if d.kind == "float":
        info = ml_dtypes.finfo(np_dtype) if d.ml_dtypes else np.finfo(np_dtype)
        assert d.precision == info.nmant + 1
        assert all(np.can_cast(np_dtype, dtypes.to_numpy(t), "safe") for t in d.safe_floats)
    if d.kind == "complex":
        assert dtypes.to_numpy(d.part).itemsize * 2 == d.itemsize and d.precision == dtypes.BY_NAME[d.part].precision
    if d.ml_dtypes:
        assert d.name in dtypes.raw_void(d.itemsize)
    assert d.x64 == (d.name in ("int64", "uint64", "float64", "complex128"))


def test_a_raw_void_array_names_its_candidates_in_the_message(tmp_path):
    np.save(tmp_path / "h.npy", np.ones(2, ml_dtypes.float8_e5m2).view("V1"))  # as older ml_dtypes saved it
    with pytest.raises(InputError) as e:
        npyio.read_npy(tmp_path / "h.npy", "float32", "x")
    assert str(e.value) == (f"{tmp_path / 'h.npy'}: the array has the raw void dtype '|V1' (how numpy saves "
                            f"float8_e4m3fn, float8_e5m2, int4, uint4 or float4_e2m1fn); jaxport reads it only for a "
                            f"float8_e4m3fn, float8_e5m2, int4, uint4 or float4_e2m1fn input, and input 'x' is "
                            f"float32.")


def test_mlir_names_every_array_type_in_its_message():
    assert ", ".join(dtypes.BY_MLIR).startswith("i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64, bf16, f16")
    assert not hasattr(mlir, "ELEMENT_TYPES")


def _names() -> set[str]:
    out = set()
    for d in dtypes.TABLE:
        out.update(n for n in (d.name, d.safetensors, d.mlir) if n)
    return out


def test_no_module_but_dtypes_spells_a_table_of_dtypes():
    """A grep over the source: a dict, list, tuple or set literal naming three or more dtypes (canonical names,
    safetensors tags or MLIR element types) outside ``dtypes.py`` is a side table to derive from ``DType``."""
    names = _names()
    found = []
    for path in sorted([*(REPO / "jaxport").rglob("*.py"), *(REPO / "cli").rglob("*.py")]):
        if path == REPO / "jaxport" / "dtypes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Dict):
                elements = [*node.keys, *node.values]
            elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                elements = node.elts
            else:
                continue
            hits = {e.value for e in elements if isinstance(e, ast.Constant) and e.value in names}
            if len(hits) >= 3:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {sorted(hits)}")
    assert found == []


@pytest.mark.parametrize("name", dtypes.NOT_IN_NPY)
@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_types_without_a_npy_name_round_trip_through_call_files(tmp_path, name, suffix):
    """``call -o`` writes them as numpy does (raw void bytes, or under ml_dtypes 0.7 ``'<f1'`` for float8_e5m2), and
    ``--expect``/``--inputs`` read them back as the type the artifact declares."""
    want = np.arange(-2, 2).astype(dtypes.to_numpy(name))
    path = tmp_path / f"o{suffix}"
    outputs.save_outputs(path, [("y", want)])
    got = npyio.read_named_arrays(path, single_name="y", declared={"y": name})["y"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
