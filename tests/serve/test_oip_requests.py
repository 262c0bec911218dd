"""The Open Inference Protocol's request decoding and response encoding (``jaxport.serve.transport.oip``), without a
server or kserve: every field of a request checked, each refusal one exact message naming the field, every value
decoded exactly, and responses that never change a value. ``test_serve_requests.py`` sends the same kinds of request to
a real server."""

from __future__ import annotations

import re

import numpy as np
import pytest

from jaxport.errors import InputError
from jaxport.serve.transport import oip

INPUTS, OUTPUTS = ["x", "n"], ["y", "k"]
INT32 = "INT32 takes integers from -2147483648 to 2147483647."


def _x(**fields):
    return {"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1.0, 2.0], **fields}


def _n(**fields):
    return {"name": "n", "shape": [1], "datatype": "INT32", "data": [3], **fields}


def _raw_n(size):
    return {"name": "n", "shape": [1], "datatype": "INT32", "parameters": {"binary_data_size": size}}


def _read(header, body=b""):
    return oip.read_request(header, body, 0, INPUTS, OUTPUTS)


REFUSED = [
    ([1, 2], b"", 'the request is a list of 2 items; give a JSON object: {"inputs": [...]}.'),
    ("s", b"", 'the request is \'s\'; give a JSON object: {"inputs": [...]}.'),
    ({}, b"", 'the request has no "inputs"; give a list of tensors, each {"name", "shape", "datatype", "data"}.'),
    ({"inputs": {}}, b"", 'inputs is an object; give a list of tensors, each {"name", "shape", "datatype", "data"}.'),
    ({"inputs": [_x(), _n()], "id": 5}, b"", "id is 5; an id is a string."),
    ({"inputs": [_x(), _n()], "parameters": [1]}, b"",
     'parameters is a list of 1 item; give an object of parameters ({"NAME": value, ...}).'),
    ({"inputs": [_x(), _n()], "parameters": {"binary_data_output": "yes"}}, b"",
     "parameters.binary_data_output is 'yes'; it takes true or false."),
    ({"inputs": [_x(), _n()], "parameters": {"a": [1]}}, b"",
     "parameters.a is a list of 1 item; a parameter is a boolean, a number or a string."),
    ({"inputs": [_x(), _n()], "parameters": {"a": None}}, b"",
     "parameters.a is null; a parameter is a boolean, a number or a string."),
    ({"inputs": [5]}, b"", 'inputs[0] is 5; give a tensor: {"name", "shape", "datatype", "data"}.'),
    ({"inputs": [_x(name=5)]}, b"", "inputs[0].name is 5; give the input's name, a string."),
    ({"inputs": [_x(name=[1])]}, b"", "inputs[0].name is a list of 1 item; give the input's name, a string."),
    ({"inputs": [_x(name={"a": 1})]}, b"", "inputs[0].name is an object; give the input's name, a string."),
    ({"inputs": [_x(name=True)]}, b"", "inputs[0].name is true; give the input's name, a string."),
    ({"inputs": [_x(name="q" * 10000)]}, b"",
     f"inputs[0].name: unknown input name '{'q' * 64}...'; the inputs are: x, n."),
    ({"inputs": [_x(), _x()]}, b"", "inputs[1].name: input 'x' is given twice (inputs[0] and inputs[1])."),
    ({"inputs": [_x(datatype=3), _n()]}, b"",
     "inputs[0].datatype is 3; jaxport serves BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FP16, "
     "FP32, FP64."),
    ({"inputs": [_x(datatype="BF16"), _n()]}, b"",
     "inputs[0].datatype is 'BF16'; jaxport serves BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, "
     "FP16, FP32, FP64."),
    ({"inputs": [_x(shape=[1, -2]), _n()]}, b"", "inputs[0].shape[1] is -2; a size is a non-negative integer."),
    ({"inputs": [_x(shape=[1, 2.0]), _n()]}, b"", "inputs[0].shape[1] is 2.0; a size is a non-negative integer."),
    ({"inputs": [_x(shape=[True, 2]), _n()]}, b"", "inputs[0].shape[0] is true; a size is a non-negative integer."),
    ({"inputs": [_x(shape=None), _n()]}, b"", "inputs[0].shape is null; give a list of sizes (non-negative integers)."),
    ({"inputs": [_x(shape=[1] * 65), _n()]}, b"", "inputs[0].shape has 65 axes; a tensor has at most 64."),
    ({"inputs": [_x(shape=[0, 1 << 62], data=[]), _n()]}, b"",
     "inputs[0].shape is [0, 4611686018427387904]: larger than any array can be."),
    ({"inputs": [_x(shape=[1 << 40, 1 << 40], data=[1.0]), _n()]}, b"",
     "inputs[0].shape is [1099511627776, 1099511627776]: larger than any array can be."),
    ({"inputs": [_x(shape=[1 << 20, 1 << 20], data=[1.0]), _n()]}, b"",
     "inputs[0].data has 1 value, but shape [1048576, 1048576] takes 1099511627776."),
    ({"inputs": [_x(data=[1.0]), _n()]}, b"", "inputs[0].data has 1 value, but shape [1, 2] takes 2."),
    ({"inputs": [_x(), _n(data=[2 ** 33])]}, b"", f"inputs[1].data[0] is 8589934592, which INT32 cannot hold: {INT32}"),
    ({"inputs": [_x(), _n(data=[1.5])]}, b"", f"inputs[1].data[0] is 1.5, which INT32 cannot hold: {INT32}"),
    ({"inputs": [_x(), _n(data=[True])]}, b"", f"inputs[1].data[0] is true, which INT32 cannot hold: {INT32}"),
    ({"inputs": [_x(), _n(data=[None])]}, b"", f"inputs[1].data[0] is null, which INT32 cannot hold: {INT32}"),
    ({"inputs": [_x(data=[1.0, False]), _n()]}, b"",
     "inputs[0].data[1] is false, which FP32 cannot hold: FP32 takes numbers from -3.40282e+38 to 3.40282e+38."),
    ({"inputs": [_x(data=[1.0, 1e39]), _n()]}, b"",
     "inputs[0].data[1] is 1e+39, which FP32 cannot hold: FP32 takes numbers from -3.40282e+38 to 3.40282e+38."),
    ({"inputs": [_x(), _n(data="3")]}, b"",
     "inputs[1].data is '3'; give a list of the tensor's values (flat, or nested as the shape)."),
    ({"inputs": [_x(), _n(data=["3"])]}, b"", f"inputs[1].data[0] is '3', which INT32 cannot hold: {INT32}"),
    ({"inputs": [_x(data=[[1.0, 2.0, 3.0]]), _n()]}, b"",
     "inputs[0].data[0] is a list of 3 items, where shape [1, 2] takes a list of 2 (axis 1); give the data flat, or "
     "nested as the shape."),
    ({"inputs": [_x(data=[[1.0], [2.0]]), _n()]}, b"",
     "inputs[0].data is a list of 2 items, where shape [1, 2] takes a list of 1 (axis 0); give the data flat, or "
     "nested as the shape."),
    ({"inputs": [_x(data=[[1.0, [2.0]]]), _n()]}, b"",
     "inputs[0].data[0][1] is a list of 1 item, which FP32 cannot hold: FP32 takes numbers from -3.40282e+38 to "
     "3.40282e+38."),
    ({"inputs": [_x(data=[1.0, [2.0]]), _n()]}, b"",
     "inputs[0].data[1] is a list of 1 item, which FP32 cannot hold: FP32 takes numbers from -3.40282e+38 to "
     "3.40282e+38."),
    ({"inputs": [_x(), _n(parameters={"binary_data_size": 4})]}, b"\0\0\0\0",
     'inputs[1] has both "data" and a binary_data_size parameter; give one.'),
    ({"inputs": [_x(), _raw_n(8)]}, b"\0\0\0\0",
     "inputs[1].parameters.binary_data_size is 8, but 4 bytes of the request are left after the JSON and the tensors "
     "before it."),
    ({"inputs": [_x(), _raw_n(2)]}, b"\0\0\0\0",
     "inputs[1].parameters.binary_data_size: 2 bytes of data for shape [1] of INT32, which takes 4."),
    ({"inputs": [_x(), _raw_n(-1)]}, b"\0\0\0\0",
     "inputs[1].parameters.binary_data_size is -1; it takes a non-negative integer."),
    ({"inputs": [_x(), _raw_n(True)]}, b"\0\0\0\0",
     "inputs[1].parameters.binary_data_size is true; it takes a non-negative integer."),
    ({"inputs": [_x(), _raw_n(4.0)]}, b"\0\0\0\0",
     "inputs[1].parameters.binary_data_size is 4.0; it takes a non-negative integer."),
    ({"inputs": [_x(), {"name": "n", "shape": [1], "datatype": "INT32"}]}, b"",
     'inputs[1] has neither "data" nor a binary_data_size parameter; give one.'),
    ({"inputs": [_x(), _n()]}, b"\0",
     "the request has 1 byte after its JSON that no input's binary_data_size covers; send the JSON, then each binary "
     "tensor, nothing else."),
    ({"inputs": [_x(), _raw_n(4)]}, b"\0\0\0\0\0",
     "the request has 1 byte after its JSON that no input's binary_data_size covers; send the JSON, then each binary "
     "tensor, nothing else."),
    ({"inputs": [{"name": "n", "shape": [2], "datatype": "BOOL", "parameters": {"binary_data_size": 2}}]},
     b"\x01\x02", "inputs[0].parameters.binary_data_size: byte 1 is 2; a BOOL is one byte, 0 or 1."),
    ({"inputs": [_x(), _n(parameters={"shared_memory_region": "r"})]}, b"",
     'inputs[1].parameters.shared_memory_region: jaxport does not serve the shared-memory extension; send the '
     'tensors in the request ("data", or binary data after the JSON).'),
    ({"inputs": [_x(), _n()], "outputs": {}}, b"",
     'outputs is an object; give a list of outputs, each {"name": NAME}.'),
    ({"inputs": [_x(), _n()], "outputs": ["y"]}, b"",
     'outputs[0] is \'y\'; give an output: {"name": NAME, "parameters": {"binary_data": true}}.'),
    ({"inputs": [_x(), _n()], "outputs": [{"name": "zz"}]}, b"",
     "outputs[0].name: unknown output name 'zz'; the outputs are: y, k."),
    ({"inputs": [_x(), _n()], "outputs": [{"name": "y"}, {"name": "y"}]}, b"",
     "outputs[1].name: output 'y' is given twice (outputs[0] and outputs[1])."),
    ({"inputs": [_x(), _n()], "outputs": [{"name": "y", "parameters": {"binary_data": 1}}]}, b"",
     "outputs[0].parameters.binary_data is 1; it takes true or false."),
    ({"inputs": [_x(), _n()], "outputs": [{"name": "y", "parameters": {"classification": 2}}]}, b"",
     "outputs[0].parameters.classification: jaxport does not serve the classification extension; ask for the "
     "output itself."),
]


@pytest.mark.parametrize(("header", "body", "message"), REFUSED)
def test_every_wrong_field_is_refused_by_name(header, body, message):
    with pytest.raises(InputError) as e:
        _read(header, body)
    assert str(e.value) == message


def test_a_request_decoded():
    """Flat and nested data give the same array; binary tensors come from the bytes after the JSON, in order; the
    outputs asked for, the id and binary_data_output come through."""
    raw = np.array([7], np.int32).tobytes()
    got = _read({"inputs": [_x(data=[[1.0, 2.0]]), _raw_n(4)], "id": "r1",
                 "outputs": [{"name": "k"}, {"name": "y", "parameters": {"binary_data": False}}],
                 "parameters": {"binary_data_output": True, "priority": 1, "note": "any"}}, raw)
    assert {k: (v.tolist(), str(v.dtype)) for k, v in got.inputs.items()} == {"x": ([[1.0, 2.0]], "float32"),
                                                                                "n": ([7], "int32")}
    assert got.outputs == [oip.Requested("k", None), oip.Requested("y", False)]
    assert (got.id, got.binary) == ("r1", True)
    flat = _read({"inputs": [_x(), _n()]})
    assert flat.inputs["x"].tolist() == [[1.0, 2.0]] and (flat.outputs, flat.id, flat.binary) == (None, None, False)


@pytest.mark.parametrize(("datatype", "given", "kept"), [
    ("INT64", [-(2 ** 63), 2 ** 63 - 1, 3.0], [-(2 ** 63), 2 ** 63 - 1, 3]),
    ("UINT64", [2 ** 64 - 1, 0], [2 ** 64 - 1, 0]),
    ("INT8", [-128, 127], [-128, 127]),
    ("BOOL", [True, False], [True, False]),
    ("FP16", [65504, 65519.0, 0.1], [65504.0, 65504.0, float(np.float16(0.1))]),
    ("FP32", [0.1, 2 ** 70], [float(np.float32(0.1)), float(np.float32(2.0 ** 70))]),
    ("FP64", [0.1, -0.0], [0.1, -0.0]),
])
def test_values_are_kept_or_rounded_to_the_nearest_float(datatype, given, kept):
    """Integers and booleans exactly (a whole float is its integer); a float datatype's values rounded to the
    nearest, within the type's range."""
    got = oip.decode("inputs[0]", datatype, [len(given)], data=given)
    assert got.tolist() == kept and str(got.dtype) == oip.DTYPES[datatype]


@pytest.mark.parametrize(("datatype", "given", "message"), [
    ("INT64", [2.0 ** 63], "9.223372036854776e+18, which INT64 cannot hold: INT64 takes integers from "
                           "-9223372036854775808 to 9223372036854775807."),
    ("UINT8", [-1], "-1, which UINT8 cannot hold: UINT8 takes integers from 0 to 255."),
    ("INT8", [128], "128, which INT8 cannot hold: INT8 takes integers from -128 to 127."),
    ("BOOL", [1], "1, which BOOL cannot hold: BOOL takes true or false."),
    ("FP16", [65520.0], "65520.0, which FP16 cannot hold: FP16 takes numbers from -65504 to 65504."),
    ("FP64", [2 ** 1100], f"{str(2 ** 1100)[:64]}..., which FP64 cannot hold: FP64 takes numbers from "
                          f"-1.79769e+308 to 1.79769e+308."),
])
def test_a_value_the_datatype_cannot_hold_is_refused(datatype, given, message):
    with pytest.raises(InputError) as e:
        oip.decode("inputs[0]", datatype, [1], data=given)
    assert str(e.value) == f"inputs[0].data[0] is {message}"


TENSORS = [oip.Tensor("y", "FP32", [-1], ["batch"]), oip.Tensor("k", "INT32", [-1], ["batch"])]


def test_a_response_never_changes_a_value():
    """JSON where asked for, NaN and infinities (which JSON has no number for) as the strings "NaN", "Infinity",
    "-Infinity", which numpy reads back as those values; the outputs asked for, in their order."""
    y, k = np.array([1.5, np.nan, -np.inf], np.float32), np.array([1, 2, 3], np.int32)
    body, raw = oip.response("m", "1", "r", TENSORS, {"y": y, "k": k}, None, False)
    assert body == {"id": "r", "model_name": "m", "model_version": "1", "outputs": [
        {"name": "y", "datatype": "FP32", "shape": [3], "data": [1.5, "NaN", "-Infinity"]},
        {"name": "k", "datatype": "INT32", "shape": [3], "data": [1, 2, 3]}]}
    assert raw == []
    np.testing.assert_array_equal(np.array(body["outputs"][0]["data"], np.float32), y)  # as tritonclient reads it
    got = oip.decode("inputs[0]", "FP32", [3], data=["Infinity", "NaN", 2])  # and a request sends them so
    np.testing.assert_array_equal(got, np.array([np.inf, np.nan, 2], np.float32))
    with pytest.raises(InputError, match=re.escape("inputs[0].data[0] is 'nan', which FP32 cannot hold")):
        oip.decode("inputs[0]", "FP32", [1], data=["nan"])
    with pytest.raises(InputError, match=re.escape("inputs[0].data[0] is 'NaN', which INT32 cannot hold")):
        oip.decode("inputs[0]", "INT32", [1], data=["NaN"])
    body, raw = oip.response("m", "1", "r", TENSORS, {"y": y[:1], "k": k},
                             [oip.Requested("k", True), oip.Requested("y", None)], False)
    assert [o["name"] for o in body["outputs"]] == ["k", "y"] and raw == [k.tobytes()]
    assert body["outputs"][1]["data"] == [1.5]
    _, raw = oip.response("m", "1", "r", TENSORS, {"y": y[:1], "k": k}, None, True)
    assert raw == [y[:1].tobytes(), k.tobytes()]


def test_names_are_echoed_shortened():
    assert oip.shorten("m" * 10_000) == "m" * 64 + "..."
    assert oip.shorten("m" * 64) == "m" * 64


@pytest.mark.parametrize(("datatype", "given"), [("INT64", -(2.0 ** 63)), ("INT64", 2.0 ** 53), ("UINT64", 2.0 ** 63),
                                                 ("INT64", -(2.0 ** 53))])
def test_a_whole_float_from_2_53_on_is_not_taken_as_an_integer(datatype, given):
    """A JSON parser holds an integer past 64 bits as a float (-2**63 - 1 arrives as -2**63.0): an integer datatype
    takes a whole float only below 2**53, where a float is exactly one integer (the oip-requests corpus found
    -9223372036854775809 decoded as -2**63)."""
    with pytest.raises(InputError) as e:
        oip.decode("inputs[0]", datatype, [1], data=[given])
    takes = "integers from -9223372036854775808 to 9223372036854775807" if datatype == "INT64" else \
        "integers from 0 to 18446744073709551615"
    assert str(e.value) == (f"inputs[0].data[0] is {given!r}, a whole number of 2**53 or more held as a float (an "
                            f"integer past 64 bits, or one written with a fraction or an exponent), which may not be "
                            f"the integer sent: {datatype} takes {takes}, written as integers.")
    assert oip.decode("inputs[0]", datatype, [1], data=[2.0 ** 53 - 1]).tolist() == [2 ** 53 - 1]


def test_an_empty_list_of_outputs_asks_for_all_as_over_grpc():
    assert _read({"inputs": [_x(), _n()], "outputs": []}).outputs is None
