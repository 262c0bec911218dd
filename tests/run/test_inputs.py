"""Input files and checks, without JAX: safe .npy/.npz reading, matching files to inputs, the manifest checks and
the random-input generator."""

from __future__ import annotations

import io
import os
import pickle
import re
import struct
import zipfile

import ml_dtypes
import numpy as np
import pytest

from jaxport.artifact import contract
from jaxport.errors import InputError
from jaxport.run.values import inputs, npyio
from tests.support import function_record

# A function entry as the manifest holds it: x: f32[b, 4], y: i32[b], constraint b >= 16.
SIMPLE = function_record({
    "inputs": [{"name": "x", "shape": ["b", 4], "dtype": "float32"},
               {"name": "y", "shape": ["b"], "dtype": "int32"}],
    "dims": {"b": {"min": 1, "max": 64, "derived_from": {"input": "x", "axis": 0, "expression": "b"}}},
    "constraints": ["b >= 16"],
})

# The examples/pytree manifest entry (what export writes for it).
ENCODE = function_record({
    "inputs": [{"name": "x", "shape": ["batch", "2*h"], "dtype": "float32"},
               {"name": "mask", "shape": ["batch", 16], "dtype": "bfloat16"},
               {"name": "params/b", "shape": [10], "dtype": "float32"},
               {"name": "params/w", "shape": ["h", 10], "dtype": "float32"}],
    "dims": {"batch": {"min": 1, "max": 4096}, "h": {"min": 2, "max": None}},
    "constraints": ["batch <= 8 * h"],
})


def _infos(fn, arrays):
    return [contract.ArrayInfo(i.name, tuple(arrays[i.name].shape), str(arrays[i.name].dtype)) for i in fn.inputs]


def _check(fn, **arrays):
    return contract.check(fn, _infos(fn, {k.replace("__", "/"): v for k, v in arrays.items()}))


def _enc(batch, h, **over):
    arrays = {"x": np.zeros((batch, 2 * h), np.float32), "mask": np.zeros((batch, 16), ml_dtypes.bfloat16),
              "params__b": np.zeros(10, np.float32), "params__w": np.zeros((h, 10), np.float32)}
    arrays.update(over)
    return arrays


def _npy_bytes(header: bytes, data: bytes = b"", version: tuple[int, int] = (1, 0)) -> bytes:
    pad = (-(10 + len(header) + 1)) % 64
    text = header + b" " * pad + b"\n"
    length = struct.pack("<H", len(text)) if version == (1, 0) else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes(version) + length + text + data


# --- .npy ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.arange(6, dtype=np.int8),
    np.array([True, False, True]),
    np.array([1 + 2j, 3 - 4j], np.complex64),
    np.float32(2.5).reshape(()),
    np.zeros((0, 3), np.float32),
    np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
    np.arange(5, dtype=">i4"),
])
def test_npy_round_trip(tmp_path, array):
    path = tmp_path / "a.npy"
    np.save(path, array, allow_pickle=False)
    got = npyio.read_npy(path)
    np.testing.assert_array_equal(got, array)
    assert got.shape == array.shape
    assert got.dtype == array.dtype.newbyteorder("=")
    assert got.dtype.isnative


def test_bfloat16_npy_is_read_as_bfloat16_only_for_a_bfloat16_input(tmp_path):
    path = tmp_path / "mask.npy"
    values = np.array([[1.5, -2.0], [0.25, 3.0]], ml_dtypes.bfloat16)
    np.save(path, values, allow_pickle=False)  # numpy writes the raw void dtype '<V2'
    got = npyio.read_npy(path, "bfloat16")
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), values.astype(np.float32))
    with pytest.raises(InputError, match=re.escape(
            f"{path}: the array has the raw void dtype '|V2' (how numpy saves bfloat16); jaxport reads it only for a "
            f"bfloat16 input, and input 'mask' is float16.")):
        npyio.read_npy(path, "float16", "mask")


def test_pickled_object_npy_is_refused_and_never_unpickled(tmp_path):
    canary = tmp_path / "canary"

    class Payload:
        def __reduce__(self):
            return (open, (str(canary), "w"))

    arr = np.empty(1, dtype=object)
    arr[0] = Payload()
    path = tmp_path / "evil.npy"
    np.save(path, arr, allow_pickle=True)
    assert not canary.exists()
    with pytest.raises(InputError, match=re.escape(
            f"{path}: the array holds Python objects (dtype '|O'), which could only be read by unpickling; jaxport "
            f"refuses them. Save a numeric array instead.")):
        npyio.read_npy(path, "float32")
    assert not canary.exists()


def test_a_plain_pickle_named_npy_is_not_a_npy_file(tmp_path):
    canary = tmp_path / "canary"
    path = tmp_path / "evil.npy"
    path.write_bytes(pickle.dumps(canary))
    with pytest.raises(InputError, match=re.escape(
            f"{path}: not a .npy file (it does not start with the \\x93NUMPY magic). Save arrays with numpy.save.")):
        npyio.read_npy(path)


def test_header_code_is_never_evaluated(tmp_path):
    canary = tmp_path / "canary"
    path = tmp_path / "evil.npy"
    path.write_bytes(_npy_bytes(f"{{'descr': __import__('os').mkdir({str(canary)!r}), "
                                f"'fortran_order': False, 'shape': (1,)}}".encode()))
    with pytest.raises(InputError, match=re.escape(
            f"{path}: the .npy header is not a Python literal; the file is damaged.")):
        npyio.read_npy(path)
    assert not canary.exists()


def test_truncated_npy(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((4, 784), np.float32))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(InputError, match=re.escape(
            f"{path}: truncated .npy file: the header declares shape (4, 784) of float32 = 12544 bytes, but only "
            f"872 bytes follow it.")):
        npyio.read_npy(path, "float32")


def test_huge_declared_shape_without_data_is_refused_before_allocating(tmp_path):
    path = tmp_path / "huge.npy"
    path.write_bytes(_npy_bytes(b"{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 784), }"))
    with pytest.raises(InputError, match=re.escape(
            f"{path}: truncated .npy file: the header declares shape (100000000000, 784) of float32 = "
            f"313600000000000 bytes, but only 0 bytes follow it.")):
        npyio.read_npy(path, "float32")


def test_trailing_bytes_are_refused(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros(3, np.float32))
    path.write_bytes(path.read_bytes() + b"\0" * 5)
    with pytest.raises(InputError, match=re.escape(
            f"{path}: damaged .npy file: 5 bytes follow the array data (shape (3,) of float32 = 12 bytes).")):
        npyio.read_npy(path)


@pytest.mark.parametrize("array,message", [
    (np.array(["a", "bc"]), "the array has dtype <U2 ('<U2'); jaxport reads numeric and bool arrays only."),
    (np.array([b"ab"]), "the array has dtype |S2 ('|S2'); jaxport reads numeric and bool arrays only."),
    (np.array(["2020-01-01"], "datetime64[D]"),
     "the array has dtype datetime64[D] ('<M8[D]'); jaxport reads numeric and bool arrays only."),
    (np.zeros(2, [("a", "<f4"), ("b", "<i4")]),
     "the array has a structured dtype ([('a', '<f4'), ('b', '<i4')]); jaxport reads plain numeric arrays only."),
    (np.zeros(2, "V3"), "the array has the raw void dtype '|V3', which jaxport does not read."),
])
def test_unsupported_dtypes_are_refused(tmp_path, array, message):
    path = tmp_path / "a.npy"
    np.save(path, array, allow_pickle=False)
    with pytest.raises(InputError, match=re.escape(f"{path}: {message}")):
        npyio.read_npy(path, "float32")


@pytest.mark.parametrize("header,message", [
    (b"{'descr': '<f4', 'shape': (1,)}",
     "the .npy header must be a dict with keys 'descr', 'fortran_order' and 'shape'."),
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
     "the .npy header's shape (-1,) is not a tuple of at most 64 non-negative integers."),
    (b"{'descr': '<f4', 'fortran_order': False, 'shape': (True,)}",
     "the .npy header's shape (True,) is not a tuple of at most 64 non-negative integers."),
    (b"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "the .npy header's fortran_order 0 is not a bool."),
    (b"{'descr': 'nonsense', 'fortran_order': False, 'shape': (1,)}",
     "the .npy header's dtype 'nonsense' is not a numpy dtype."),
    (b"[1, 2]", "the .npy header must be a dict with keys 'descr', 'fortran_order' and 'shape'."),
])
def test_malformed_headers(tmp_path, header, message):
    path = tmp_path / "a.npy"
    path.write_bytes(_npy_bytes(header, b"\0" * 4))
    with pytest.raises(InputError, match=re.escape(f"{path}: {message}")):
        npyio.read_npy(path)


def test_oversized_header_and_unknown_version(tmp_path):
    path = tmp_path / "a.npy"
    path.write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", 1 << 30))
    with pytest.raises(InputError, match=re.escape(
            f"{path}: the .npy header is {1 << 30} bytes; at most 10000 are allowed.")):
        npyio.read_npy(path)
    path.write_bytes(b"\x93NUMPY\x09\x00\x00\x00")
    with pytest.raises(InputError, match=re.escape(
            f"{path}: .npy format version 9.0 is not supported (1.0, 2.0, 3.0 are).")):
        npyio.read_npy(path)
    path.write_bytes(b"\x93NUMPY\x01\x00\x50\x00{'descr'")
    with pytest.raises(InputError, match=re.escape(f"{path}: truncated .npy file: it ends inside the header.")):
        npyio.read_npy(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match=re.escape(f"{tmp_path / 'nope.npy'}: file not found.")):
        npyio.read_npy(tmp_path / "nope.npy")
    with pytest.raises(InputError, match=re.escape(f"{tmp_path}: is a directory, not a .npy file.")):
        npyio.read_npy(tmp_path)


# --- .npz ------------------------------------------------------------------------------------------------------

DECLARED = {"x": "float32", "mask": "bfloat16", "params/w": "float32"}


def test_npz_round_trip_with_pytree_names_and_bfloat16(tmp_path):
    path = tmp_path / "in.npz"
    arrays = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "mask": np.ones((2, 16), ml_dtypes.bfloat16),
              "params/w": np.full((3, 10), 2.0, np.float32)}
    np.savez(path, **arrays)
    got = npyio.read_npz(path, DECLARED)
    assert list(got) == ["x", "mask", "params/w"]
    for name, value in arrays.items():
        assert got[name].dtype == value.dtype
        np.testing.assert_array_equal(got[name], value)
    compressed = tmp_path / "c.npz"
    np.savez_compressed(compressed, **arrays)
    np.testing.assert_array_equal(npyio.read_npz(compressed, DECLARED)["params/w"], arrays["params/w"])


def _zip(path, members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def test_npz_unknown_key(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, x=np.zeros(2, np.float32), z=np.zeros(2, np.float32))
    with pytest.raises(InputError, match=re.escape(
            f"unknown input name 'z' (a key of {path}); the inputs are: x, mask, params/w.")):
        npyio.read_npz(path, DECLARED)


@pytest.mark.parametrize("name", ["../x.npy", "/x.npy", "a/../../x.npy", "C:/x.npy", "a\\x.npy"])
def test_npz_traversal_names_are_refused(tmp_path, name):
    path = tmp_path / "in.npz"
    _zip(path, {name: _npy(np.zeros(2, np.float32))})
    with pytest.raises(InputError, match=re.escape(
            f"{path}: member {name!r} has an unsafe name (absolute, an empty, '.' or '..' component, a drive, a "
            f"backslash or NUL); refusing the file.")):
        npyio.read_npz(path, DECLARED)


def test_npz_member_that_is_not_an_array(tmp_path):
    path = tmp_path / "in.npz"
    _zip(path, {"x.npy": _npy(np.zeros(2, np.float32)), "notes.txt": b"hi"})
    with pytest.raises(InputError, match=re.escape(
            f"{path}: member 'notes.txt' is not a .npy array; an .npz for jaxport holds only arrays named after "
            f"inputs.")):
        npyio.read_npz(path, DECLARED)


def test_npz_member_count_is_capped_from_the_directory(tmp_path, monkeypatch):
    path = tmp_path / "in.npz"
    _zip(path, {f"x{i}.npy": b"" for i in range(5)})
    monkeypatch.setattr(npyio, "MAX_NPZ_MEMBERS", 3)
    with pytest.raises(InputError, match=re.escape(f"{path}: the .npz declares 5 members; at most 3 are allowed.")):
        npyio.read_npz(path, DECLARED)


def test_npz_zip_bomb_is_refused_from_declared_sizes(tmp_path, monkeypatch):
    path = tmp_path / "bomb.npz"
    _zip(path, {"x.npy": _npy(np.zeros(4 << 20, np.uint8))}, zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < 50_000
    monkeypatch.setattr(npyio, "MAX_NPZ_BYTES", 1 << 20)
    with pytest.raises(InputError, match=re.escape(
            f"{path}: the .npz members declare {(4 << 20) + 128} bytes in all; at most {1 << 20} are allowed.")):
        npyio.read_npz(path, {"x": "uint8"})


def test_npz_member_lying_about_its_size(tmp_path):
    path = tmp_path / "in.npz"
    _zip(path, {"x.npy": _npy(np.zeros(4, np.float32))[:-8]})
    with pytest.raises(InputError, match=re.escape(
            f"{path}: member 'x.npy': truncated array: the header declares shape (4,) of float32 = 16 bytes, but "
            f"only 8 bytes follow it.")):
        npyio.read_npz(path, DECLARED)


def test_npz_damaged_data_fails_its_crc(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, x=np.zeros(64, np.float32))
    data = bytearray(path.read_bytes())
    at = data.index(b"\n" + b"\0" * 64) + 8  # inside the array data of the stored member
    data[at] = 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=re.escape(f"{path}: member 'x.npy': cannot be read (Bad CRC-32 for file "
                                                   f"'x.npy'); the file is damaged.")):
        npyio.read_npz(path, DECLARED)


def test_not_a_zip(tmp_path):
    path = tmp_path / "in.npz"
    path.write_bytes(b"not a zip at all")
    with pytest.raises(InputError, match=re.escape(
            f"{path}: not a .npz file (no zip end-of-directory record). Save arrays with numpy.savez.")):
        npyio.read_npz(path, DECLARED)


# --- matching --inputs values to inputs ------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.zeros((16, 4), np.float32))
    np.save("y.npy", np.zeros(16, np.int32))
    np.savez("both.npz", x=np.zeros((16, 4), np.float32), y=np.zeros(16, np.int32))
    return tmp_path


def test_gather_positional_named_and_npz(files):
    for items in (["x.npy", "y.npy"], ["y=y.npy", "x=x.npy"], ["both.npz"]):
        arrays, sources = inputs.gather(SIMPLE, items)
        assert list(arrays) == ["x", "y"]
        assert arrays["x"].shape == (16, 4) and arrays["y"].dtype == np.int32
    np.savez("only_x.npz", x=np.zeros((16, 4), np.float32))
    arrays, sources = inputs.gather(SIMPLE, ["only_x.npz", "y=y.npy"])
    assert sources == {"x": "only_x.npz[x]", "y": "y.npy"}


@pytest.mark.parametrize("items,message", [
    (["x.npy"], "missing input 'y' (i32[b]): give it with --inputs y=FILE.npy, or use --random."),
    ([], "missing inputs 'x' (f32[b, 4]), 'y' (i32[b]): give each with --inputs NAME=FILE.npy (or all in one .npz), "
         "or use --random."),
    (["z=x.npy"], "unknown input name 'z' (in --inputs z=x.npy); the inputs are: x, y."),
    (["xx=x.npy"], "unknown input name 'xx' (in --inputs xx=x.npy); the inputs are: x, y. Did you mean 'x'?"),
    (["x.npy", "y.npy", "x.npy"], "too many inputs: 3 files given, but the function takes 2 inputs (x, y); 'x.npy' "
                                  "has no input to go to."),
    (["x=x.npy", "x=y.npy"], "input 'x' is given twice: x.npy and y.npy."),
    (["both.npz", "x=x.npy"], "input 'x' is given twice: both.npz[x] and x.npy."),
    (["x.npy", "y=y.npy"], "give --inputs either all by position (FILE.npy, in the order 'inspect' lists the "
                           "inputs) or all by name (NAME=FILE.npy, or an .npz keyed by input names), not both."),
])
def test_gather_errors(files, items, message):
    with pytest.raises(InputError, match=re.escape(message)):
        inputs.gather(SIMPLE, items)


def test_a_file_name_with_an_equals_sign_is_positional(files):
    np.save("a=b.npy", np.zeros((16, 4), np.float32))
    arrays, _ = inputs.gather(SIMPLE, ["a=b.npy", "y.npy"])
    assert arrays["x"].shape == (16, 4)


# --- checks ----------------------------------------------------------------------------------------------------


def test_check_returns_the_solved_dimensions():
    assert _check(SIMPLE, x=np.zeros((16, 4), np.float32), y=np.zeros(16, np.int32)) == {"b": 16}
    assert _check(ENCODE, **_enc(5, 3)) == {"batch": 5, "h": 3}


@pytest.mark.parametrize("arrays,message", [
    ({"x": np.zeros((8, 4), np.float32), "y": np.zeros(8, np.int32)},
     "input 'x': shape[0] = 8, but dimension 'b' must satisfy b >= 16 (spec constraint)."),
    ({"x": np.zeros((80, 4), np.float32), "y": np.zeros(80, np.int32)},
     "input 'x': shape[0] = 80, but dimension 'b' must satisfy 1 <= b <= 64 (spec bound)."),
    ({"x": np.zeros((16, 4), np.float32), "y": np.zeros(17, np.int32)},
     "dimension 'b' is 16 from input 'x' (shape[0]) but 17 from input 'y' (shape[0])."),
    ({"x": np.zeros((16, 4, 1), np.float32), "y": np.zeros(16, np.int32)},
     "input 'x' has rank 3 (shape (16, 4, 1)), but the artifact expects rank 2: f32[b, 4]."),
    ({"x": np.zeros((16, 5), np.float32), "y": np.zeros(16, np.int32)},
     "input 'x': shape[1] = 5, but the artifact expects 4 (f32[b, 4])."),
    ({"x": np.zeros((16, 4), np.float64), "y": np.zeros(16, np.int32)},
     "input 'x' has dtype float64, but the artifact expects float32. Convert it with x.astype(np.float32) (import "
     "numpy as np)."),
])
def test_check_errors(arrays, message):
    with pytest.raises(InputError, match=re.escape(message)):
        contract.check(SIMPLE, _infos(SIMPLE, arrays))


@pytest.mark.parametrize("arrays,message", [
    (_enc(40, 4), "input 'x': shape[0] = 40, but dimension 'batch' must satisfy batch <= 8 * h (spec constraint); "
                  "h = 4 from input 'x' (shape[1] = 2*h)."),
    (_enc(4, 1), "input 'x': shape[1] = 2, but dimension 'h' must satisfy h >= 2 (spec bound); shape[1] is 2*h, so "
                 "h = 1."),
    (_enc(4, 3, x=np.zeros((4, 7), np.float32)), "input 'x': shape[1] = 7 cannot be written as 2*h for an integer h."),
    (_enc(4, 3, params__w=np.zeros((5, 10), np.float32)),
     "dimension 'h' is 3 from input 'x' (shape[1] = 2*h) but 5 from input 'params/w' (shape[0])."),
    (_enc(4, 3, mask=np.zeros((4, 16), np.float32)),
     "input 'mask' has dtype float32, but the artifact expects bfloat16. Convert it with mask.astype("
     "ml_dtypes.bfloat16) (import numpy as np; import ml_dtypes)."),
    (_enc(4, 3, params__b=np.zeros(11, np.float32)), "input 'params/b': shape[0] = 11, but the artifact expects 10 "
                                                     "(f32[10])."),
])
def test_check_errors_on_the_pytree_signature(arrays, message):
    with pytest.raises(InputError, match=re.escape(message)):
        _check(ENCODE, **arrays)


def test_dtype_hint_names_the_file_to_convert():
    infos = [contract.ArrayInfo("x", (16, 4), "float64", "data/x.npy"), contract.ArrayInfo("y", (16,), "int32")]
    with pytest.raises(InputError, match=re.escape(
            "input 'x' has dtype float64, but the artifact expects float32. Convert it into a new file with: python -c "
            "\"import numpy as np; np.save('data/x.float32.npy', np.load('data/x.npy').astype(np.float32))\" and give "
            "data/x.float32.npy. Or let 'jaxport call --cast' convert it on reading: it does when every value is kept "
            "as float32.")):
        contract.check(SIMPLE, infos)


def test_expression_dimension_mismatch_without_a_solution():
    fn = function_record({"inputs": [{"name": "a", "shape": ["n"], "dtype": "float32"},
                                      {"name": "b", "shape": ["n + 1"], "dtype": "float32"},
                                      {"name": "c", "shape": ["max(n, 3)"], "dtype": "float32"}]})
    good = [contract.ArrayInfo("a", (5,), "float32"), contract.ArrayInfo("b", (6,), "float32"),
            contract.ArrayInfo("c", (5,), "float32")]
    assert contract.check(fn, good) == {"n": 5}
    with pytest.raises(InputError, match=re.escape(
            "dimension 'n' is 5 from input 'a' (shape[0]) but 6 from input 'b' (shape[0] = n + 1).")):
        contract.check(fn, [good[0], contract.ArrayInfo("b", (7,), "float32"), good[2]])
    with pytest.raises(InputError, match=re.escape(
            "input 'c': shape[0] = 4, but it must equal max(n, 3) = 5 (n = 5 from input 'a' (shape[0])).")):
        contract.check(fn, [good[0], good[1], contract.ArrayInfo("c", (4,), "float32")])


# --- random inputs ---------------------------------------------------------------------------------------------


def test_resolve_dims_takes_the_smallest_values_that_satisfy_bounds_and_constraints():
    assert contract.resolve_dims(ENCODE, {}) == {"batch": 1, "h": 2}
    assert contract.resolve_dims(ENCODE, {"batch": 100}) == {"batch": 100, "h": 13}
    assert contract.resolve_dims(ENCODE, {"h": 5}) == {"batch": 1, "h": 5}
    assert contract.resolve_dims(SIMPLE, {}) == {"b": 16}
    fn = function_record({"inputs": [{"name": "a", "shape": ["m", "n"], "dtype": "float32"}],
                          "constraints": ["m >= 2 * n + 3", "n >= 4"]})
    assert contract.resolve_dims(fn, {}) == {"m": 11, "n": 4}


@pytest.mark.parametrize("given,message", [
    ({"bacth": 4}, "unknown dimension variable 'bacth'; the function has batch, h. Did you mean 'batch'?"),
    ({"batch": 5000}, "dimension 'batch' = 5000 (given), but it must satisfy 1 <= batch <= 4096 (spec bound)."),
    ({"batch": 100, "h": 2}, "--dim batch=100 --dim h=2 violate batch <= 8 * h (spec constraint); choose values "
                             "that satisfy it."),
])
def test_resolve_dims_errors(given, message):
    with pytest.raises(InputError, match=re.escape(message)):
        contract.resolve_dims(ENCODE, given)


def test_resolve_dims_when_no_free_value_fits():
    fn = function_record({"inputs": [{"name": "a", "shape": ["m", "n"], "dtype": "float32"}],
                          "dims": {"n": {"min": 1, "max": 4}}, "constraints": ["n >= m"]})
    with pytest.raises(InputError, match=re.escape(
            "no value of n satisfies n >= m (spec constraint) with m=9 (given), n=1; give the dimensions with --dim "
            "NAME=VALUE.")):
        contract.resolve_dims(fn, {"m": 9})


def test_random_inputs_are_deterministic_and_typed():
    dims = contract.resolve_dims(ENCODE, {"batch": 3})
    a = inputs.random_inputs(ENCODE, dims, seed=7)
    b = inputs.random_inputs(ENCODE, dims, seed=7)
    c = inputs.random_inputs(ENCODE, dims, seed=8)
    assert {n: (v.shape, str(v.dtype)) for n, v in a.items()} == {
        "x": ((3, 4), "float32"), "mask": ((3, 16), "bfloat16"), "params/b": ((10,), "float32"),
        "params/w": ((2, 10), "float32")}
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert not np.array_equal(a["x"], c["x"])
    assert _check(ENCODE, **{k.replace("/", "__"): v for k, v in a.items()}) == dims
    ints = function_record({"inputs": [{"name": "i", "shape": [100], "dtype": "int8"},
                                       {"name": "u", "shape": [100], "dtype": "uint8"},
                                       {"name": "f", "shape": [4], "dtype": "bool"}]})
    got = inputs.random_inputs(ints, {}, seed=0)
    assert got["i"].dtype == np.int8 and got["i"].min() == 0 and got["i"].max() == 7  # never negative
    assert got["u"].dtype == np.uint8 and got["u"].max() < 8
    assert got["f"].dtype == np.bool_


def test_reading_never_imports_jax(tmp_path):
    import subprocess
    import sys

    np.save(tmp_path / "x.npy", np.zeros((16, 4), np.float32))
    code = ("import sys, jaxport.run.values.npyio as i; i.read_npy(sys.argv[1], 'float32'); "
            "assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.npy")], check=True, env={**os.environ})


# --- any damage gives an InputError, never another exception --------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_VALID_NPY = _npy(np.arange(12, dtype=np.float32).reshape(3, 4))
_NPZ_BUF = io.BytesIO()
np.savez_compressed(_NPZ_BUF, x=np.arange(12, dtype=np.float32).reshape(3, 4), mask=np.ones(3, ml_dtypes.bfloat16))
_VALID_NPZ = _NPZ_BUF.getvalue()


def _damage(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for at, value in edits:
        out[at % len(out)] = value
    return bytes(out[:cut] if cut is not None else out)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4),
       cut=st.one_of(st.none(), st.integers(0, 400)))
def test_damaged_files_give_input_errors_only(tmp_path, edits, cut):
    npy = tmp_path / "a.npy"
    npy.write_bytes(_damage(_VALID_NPY, edits, cut))
    try:
        npyio.read_npy(npy, "float32", "x")
    except InputError:
        pass
    npz = tmp_path / "a.npz"
    npz.write_bytes(_damage(_VALID_NPZ, edits, None if cut is None else cut * 3))
    try:
        npyio.read_npz(npz, {"x": "float32", "mask": "bfloat16"})
    except InputError:
        pass
