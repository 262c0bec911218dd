"""``jaxport.arrayfiles.safetensors``: the one ``.safetensors`` reader and writer. Files it writes are read by the
safetensors library and the reverse, every dtype jaxport stores included; the hostile-input rules of the two readers
it replaced hold for every caller (bound weights, ``call``'s named arrays)."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from jaxport import dtypes
from jaxport.arrayfiles import safetensors as safetensors_io
from jaxport.arrayfiles import subbyte
from jaxport.errors import InputError, SpecError
from jaxport.export.weights import bind
from jaxport.run.values import npyio

safetensors = pytest.importorskip("safetensors")
from safetensors.numpy import load as st_load  # noqa: E402
from safetensors.numpy import save as st_save  # noqa: E402

#: One array of every dtype that has a safetensors tag, with values that show a wrong byte order or width.
ARRAYS = {d.name: np.arange(-3, 3).astype(dtypes.to_numpy(d.name)).reshape(2, 3) if d.kind != "bool" else
          np.array([[True, False, True], [False, False, True]]) for d in dtypes.TABLE if d.safetensors}
ARRAYS["scalar"] = np.array(2.5, np.float32)
ARRAYS["empty"] = np.zeros((0, 4), np.float16)
#: The dtypes ``safetensors.numpy`` can represent (numpy's own).
NUMPY_NATIVE = [n for n in ARRAYS if n not in dtypes.NOT_IN_NPY]
#: Those of ml_dtypes (bfloat16, float8, float4).
ML_DTYPES = [n for n in ARRAYS if n in dtypes.NOT_IN_NPY]


def _written(arrays) -> bytes:
    f = io.BytesIO()
    n = safetensors_io.write(f, arrays)
    assert n == len(f.getvalue())
    return f.getvalue()


def _read(tmp_path: Path, data: bytes, *, mmap: bool = False, name: str = "t.safetensors"):
    path = tmp_path / name
    path.write_bytes(data)
    return safetensors_io.read_file(path, name, InputError, mmap=mmap)


def test_every_safetensors_tag_is_a_dtype_entry():
    assert set(dtypes.BY_SAFETENSORS) == {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F16", "BF16",
                                          "F32", "F64", "C64", "F8_E4M3", "F8_E5M2", "F4"}
    assert safetensors_io.tag_of("complex128") is None and safetensors_io.tag_of("key<fry>") is None


@pytest.mark.parametrize("mmap", [False, True], ids=["copy", "mmap"])
def test_round_trip_every_dtype(tmp_path, mmap):
    got = _read(tmp_path, _written(ARRAYS), mmap=mmap)
    assert list(got) == list(ARRAYS)  # the header keeps the writer's order
    for name, want in ARRAYS.items():
        assert (got[name].dtype, got[name].shape) == (want.dtype, want.shape), name
        np.testing.assert_array_equal(got[name], want)
        assert got[name].flags.writeable is not mmap


def test_the_safetensors_library_reads_what_jaxport_writes():
    data = _written({n: ARRAYS[n] for n in NUMPY_NATIVE})
    got = st_load(data)
    assert sorted(got) == sorted(NUMPY_NATIVE)
    for name in NUMPY_NATIVE:
        assert got[name].dtype == ARRAYS[name].dtype
        np.testing.assert_array_equal(got[name], ARRAYS[name])
    # bfloat16, float8 and float4 (packed), which safetensors.numpy cannot represent, through the library's raw reader
    raw = dict(safetensors.deserialize(_written(ARRAYS)))
    for name in ML_DTYPES:
        assert raw[name]["dtype"] == dtypes.BY_NAME[name].safetensors and raw[name]["shape"] == [2, 3]
        stored = subbyte.pack(ARRAYS[name]) if dtypes.BY_NAME[name].packed else ARRAYS[name]
        assert bytes(raw[name]["data"]) == stored.tobytes()


def _library_serialize(arrays) -> bytes:
    """The safetensors library's own writer for any dtype, ml_dtypes' included (``safetensors.numpy.save`` takes
    numpy's only): ``TensorSpec`` from safetensors 0.7, raw bytes before."""
    if not hasattr(safetensors, "TensorSpec"):
        return safetensors.serialize({n: {"dtype": dtypes.BY_NAME[str(a.dtype)].safetensors, "shape": list(a.shape),
                                          "data": a.tobytes()} for n, a in arrays.items()}, metadata={"format": "np"})
    stored = {n: subbyte.pack(a) if dtypes.BY_NAME[str(a.dtype)].packed else a for n, a in arrays.items()}
    specs = {n: safetensors.TensorSpec(  # float4 as PyTorch's float4_e2m1fn_x2: its storage shape, two to a byte
        dtype="float4_e2m1fn_x2" if str(a.dtype) == "float4_e2m1fn" else str(a.dtype),
        shape=list(stored[n].shape), data_ptr=stored[n].ctypes.data, data_len=stored[n].nbytes)
        for n, a in arrays.items()}
    return safetensors.serialize(specs, metadata={"format": "np"})  # the arrays stay alive: ``stored`` holds them


def test_jaxport_reads_what_the_safetensors_library_writes(tmp_path):
    got = _read(tmp_path, st_save({n: ARRAYS[n] for n in NUMPY_NATIVE}))
    for name in NUMPY_NATIVE:
        assert got[name].dtype == ARRAYS[name].dtype
        np.testing.assert_array_equal(got[name], ARRAYS[name])
    got = _read(tmp_path, _library_serialize({n: ARRAYS[n] for n in ML_DTYPES}), name="raw.safetensors")
    for name in ML_DTYPES:
        assert got[name].dtype == dtypes.to_numpy(name)
        np.testing.assert_array_equal(got[name].reshape(-1), ARRAYS[name].reshape(-1))  # float4: the flat count


def test_layout_matches_the_safetensors_library():
    """The data is laid out as the library lays it out (by decreasing item size, then the given order), each tensor
    aligned to its item size; the header is compact JSON padded with spaces to 8 bytes."""
    arrays = {"a": ARRAYS["float16"], "b": ARRAYS["float64"], "c": ARRAYS["bool"], "d": ARRAYS["int32"]}
    ours, theirs = _written(arrays), st_save(arrays)
    assert len(ours) == len(theirs)
    n = struct.unpack("<Q", ours[:8])[0]
    assert n % 8 == 0 and ours[8 + n:] == theirs[8 + n:]
    header = json.loads(ours[8:8 + n])
    assert list(header) == ["a", "b", "c", "d"]
    assert {k: v["data_offsets"] for k, v in header.items()} == \
        {"b": [0, 48], "d": [48, 72], "a": [72, 84], "c": [84, 90]}
    assert ours[8:8 + n].rstrip(b" ") == json.dumps(header, separators=(",", ":")).encode()


def test_writer_refusals_and_byte_order():
    with pytest.raises(ValueError, match="cannot be named '__metadata__'"):
        _written({"__metadata__": np.zeros(1, np.float32)})
    with pytest.raises(ValueError, match="no dtype for complex128"):
        _written({"z": np.zeros(1, np.complex128)})
    big = np.arange(4, dtype=">i4")
    data = _written({"x": big, "t": np.arange(6, dtype=np.float32).reshape(2, 3).T})  # big-endian, not contiguous
    got = st_load(data)
    np.testing.assert_array_equal(got["x"], big)
    np.testing.assert_array_equal(got["t"], np.arange(6, dtype=np.float32).reshape(2, 3).T)


# --- the hostile-input rules: one reader for every caller ------------------------------------------------------


def _file(tensors: dict, size: int) -> bytes:
    raw = json.dumps({k: {"dtype": d, "shape": s, "data_offsets": o} for k, (d, s, o) in tensors.items()}).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"\0" * size


READERS = {
    "bind": lambda p: bind.load_bind_source(p.name, p.parent, "spec.yaml:4"),
    "named-arrays": lambda p: npyio.read_named_arrays(p),
}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize(("tensors", "size", "message"), [
    ({"w": ("F32", [1] * 65, [0, 4])}, 4, "tensor 'w': rank 65; at most 64 dimensions are allowed."),
    ({"w": ("F32", [2], [0, 8]), "v": ("F32", [1], [4, 8])}, 8,
     "tensor 'v' (bytes 4..8) overlaps tensor 'w', which ends at byte 8: each byte of the data section belongs to "
     "one tensor."),
    ({"w": ("X" * 100, [2], [0, 8])}, 8,
     f"tensor 'w': dtype {'X' * 40} is not one jaxport reads (it reads {', '.join(dtypes.BY_SAFETENSORS)})."),
], ids=["rank", "overlap", "dtype"])
def test_both_callers_apply_the_same_rules(tmp_path, reader, tensors, size, message):
    path = tmp_path / "w.safetensors"
    path.write_bytes(_file(tensors, size))
    error = SpecError if reader == "bind" else InputError
    prefix = "spec.yaml:4: bound file w.safetensors" if reader == "bind" else str(path)
    with pytest.raises(error) as e:
        READERS[reader](path)
    assert str(e.value) == f"{prefix}: {message}"


def test_the_header_must_start_with_a_brace_before_it_is_parsed(tmp_path):
    for reader, error, prefix in (("bind", SpecError, "spec.yaml:4: bound file w.safetensors"),
                                  ("named-arrays", InputError, str(tmp_path / "w.safetensors"))):
        path = tmp_path / "w.safetensors"
        path.write_bytes(struct.pack("<Q", 8) + b' {"a":1}')
        with pytest.raises(error) as e:
            READERS[reader](path)
        assert str(e.value) == f"{prefix}: the header must start with '{{' (safetensors' rule); it starts with b' '."


def test_copies_must_fit_memory_and_maps_need_not(tmp_path, monkeypatch):
    data = _written({"w": np.zeros(1024, np.float32)})
    monkeypatch.setattr(safetensors_io, "physical_memory", lambda: 1000)
    with pytest.raises(InputError) as e:
        _read(tmp_path, data)
    assert str(e.value) == ("t.safetensors: its tensors hold 4096 bytes, more than this machine's memory (1000 "
                            "bytes).")
    assert _read(tmp_path, data, mmap=True)["w"].shape == (1024,)


def test_bound_files_allow_more_tensors_than_call_inputs(tmp_path, monkeypatch):
    data = _written({f"t{i}": np.zeros(1, np.uint8) for i in range(3)})
    monkeypatch.setattr(safetensors_io, "MAX_TENSORS", 2)
    path = tmp_path / "w.safetensors"
    path.write_bytes(data)
    with pytest.raises(InputError) as e:
        safetensors_io.read_file(path, "w", InputError, max_tensors=safetensors_io.MAX_TENSORS)
    assert str(e.value) == "w: 3 tensors; at most 2 are allowed."
    assert sorted(bind.load_bind_source(path.name, path.parent, "spec.yaml:4")) == ["t0", "t1", "t2"]

