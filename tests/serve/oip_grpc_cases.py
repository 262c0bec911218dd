"""The gRPC cases of the ``oip-requests`` class (``oip_corpus``): ``ModelInferRequest`` messages built with
tritonclient's ``service_pb2`` (typed contents, ``raw_input_contents``, ``InferParameter`` of every kind), metadata
and readiness of models that do not exist, and bytes that are no protobuf."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from tritonclient.grpc import service_pb2 as pb

from .oip_cases import GOOD_M, GOOD_T, Case, T, X

Tensor = pb.ModelInferRequest.InferInputTensor
Output = pb.ModelInferRequest.InferRequestedOutputTensor
#: Each datatype's typed contents field (FP16 has none).
CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
            "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
            "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
            "FP64": "fp64_contents"}
M_TYPES = {"x": "FP32", "n": "INT32", "b": "BOOL"}


def typed(name: str, array: Any, datatype: str, field: str | None = None, shape: list[int] | None = None,
          **kw: Any) -> Any:
    """An input tensor with its values in ``contents.FIELD`` (default: its datatype's)."""
    values = list(array) if isinstance(array, list) else np.asarray(array).ravel().tolist()
    field = field or CONTENTS[datatype]
    return Tensor(name=name, datatype=datatype, shape=[len(values)] if shape is None and isinstance(array, list) else
                  list(np.shape(array)) if shape is None else shape,
                  contents=pb.InferTensorContents(**{field: values}), **kw)


def bare(name: str, array: Any, datatype: str, shape: list[int] | None = None, **kw: Any) -> Any:
    return Tensor(name=name, datatype=datatype, shape=list(np.shape(array)) if shape is None else shape, **kw)


def m_typed(**replace: Any) -> list[Any]:
    tensors = {n: typed(n, GOOD_M[n], dt) for n, dt in M_TYPES.items()}
    tensors.update(replace)
    return [tensors[n] for n in ("x", "n", "b")]


def m_raw(arrays: dict[str, Any] | None = None) -> dict[str, Any]:
    arrays = arrays or GOOD_M
    return {"inputs": [bare(n, arrays[n], dt) for n, dt in M_TYPES.items()],
            "raw_input_contents": [np.ascontiguousarray(arrays[n]).tobytes() for n in M_TYPES]}


def t_raw(arrays: dict[str, Any] | None = None) -> dict[str, Any]:
    arrays = arrays or GOOD_T
    return {"inputs": [bare(n, arrays[n], dt) for n, dt, _ in T],
            "raw_input_contents": [arrays[n].tobytes() for n, _, _ in T]}


def grpc(group: str, name: str, fields: dict[str, Any], expect: str, mention: str = "", *, model: str = "m",
         inputs: dict[str, Any] | None = None, method: str = "ModelInfer") -> Case:
    """A gRPC case: ``method`` called with a message of ``fields`` (ModelInfer: a ``ModelInferRequest`` of
    ``model``)."""
    if method == "ModelInfer":
        message = pb.ModelInferRequest(**{"model_name": model, **fields})
    else:
        message = getattr(pb, f"{method}Request")(**fields)
    extra: dict[str, Any] = {}
    if expect == "answered":
        asked = tuple(o.name for o in message.outputs) or None
        extra = dict(inputs=inputs or (GOOD_M if model == "m" else GOOD_T), asked=asked, rid=message.id or None)
    return Case(f"grpc-{group}", name, "grpc", (method, message), expect, mention, model, **extra)


def _param(**kw: Any) -> Any:
    return pb.InferParameter(**kw)


def grpc_cases() -> Iterator[Case]:
    yield grpc("tensors", "typed", {"inputs": m_typed(), "id": "g1"}, "answered")
    yield grpc("tensors", "raw", m_raw(), "answered")
    yield grpc("tensors", "t-raw", t_raw(), "answered", model="t")
    odd = {**GOOD_M, "x": np.array([[np.nan, np.inf, -np.inf], [-0.0, -1.0, 0.0]], np.float32),
           "n": np.array([2 ** 31 - 1, -2 ** 31], np.int32)}
    yield grpc("tensors", "typed-nan-and-limits", {"inputs": [typed(n, odd[n], dt) for n, dt in M_TYPES.items()]},
               "answered", inputs=odd)
    yield grpc("tensors", "raw-nan-and-limits", m_raw(odd), "answered", inputs=odd)
    t_odd = {**GOOD_T, **{n: np.array([np.iinfo(d).min, np.iinfo(d).max], d) for n, _, d in T if "int" in d},
             "f16": np.array([np.nan, 65504], np.float16), "f32": np.array([-np.inf, 1e-45], np.float32),
             "f64": np.array([np.finfo(np.float64).max, np.nan])}
    yield grpc("tensors", "t-raw-limits", t_raw(t_odd), "answered", model="t", inputs=t_odd)
    both = m_raw()
    both["inputs"][0] = typed("x", X, "FP32")
    yield grpc("tensors", "contents-and-raw", both, "refused", "raw_input_contents[0]")
    for label, count in (("2-of-3", 2), ("4-of-3", 4)):
        fields = m_raw()
        fields["raw_input_contents"] = (fields["raw_input_contents"] * 2)[:count]
        yield grpc("tensors", f"raw-count-{label}", fields, "refused", "raw_input_contents")
    for label, k, data in (("short", 1, b"\0" * 4), ("long", 0, b"\0" * 28), ("empty", 0, b""),
                           ("bool-byte-2", 2, b"\x01\x02"), ("bool-byte-255", 2, b"\xff\x00")):
        fields = m_raw()
        fields["raw_input_contents"][k] = data
        yield grpc("tensors", f"raw-{label}", fields, "refused", f"raw_input_contents[{k}]")
    for datatype in ("", "int32", "BYTES", "BF16", "FP8", "INT32 ", "\u0000"):
        yield grpc("datatype", f"n:{datatype!r}", {"inputs": m_typed(n=Tensor(name="n", datatype=datatype, shape=[2]))},
                   "refused", "inputs[1].datatype")
    yield grpc("datatype", "n:served-but-INT64", {"inputs": m_typed(n=typed("n", GOOD_M["n"], "INT64"))}, "refused",
               "input 'n'")
    yield grpc("datatype", "x:FP16-raw", {**m_raw(), "inputs": [bare("x", X, "FP16"), *m_raw()["inputs"][1:]],
                                          "raw_input_contents": [X.astype(np.float16).tobytes(),
                                                                 *m_raw()["raw_input_contents"][1:]]},
               "refused", "input 'x'")
    for field in ("fp32_contents", "int64_contents", "bool_contents", "uint_contents", "bytes_contents",
                  "fp64_contents", "uint64_contents"):
        values = {"bool_contents": [True, False], "bytes_contents": [b"a", b"b"]}.get(field, [1, 2])
        n = Tensor(name="n", datatype="INT32", shape=[2], contents=pb.InferTensorContents(**{field: values}))
        yield grpc("contents", f"INT32-in-{field}", {"inputs": m_typed(n=n)}, "refused", "inputs[1].contents")
    two = Tensor(name="n", datatype="INT32", shape=[2], contents=pb.InferTensorContents(int_contents=[1, 2],
                                                                                      fp32_contents=[1, 2]))
    yield grpc("contents", "two-fields", {"inputs": m_typed(n=two)}, "refused", "inputs[1].contents")
    yield grpc("contents", "no-contents", {"inputs": m_typed(n=bare("n", GOOD_M["n"], "INT32"))}, "refused",
               "inputs[1].contents.int_contents")
    yield grpc("contents", "FP16-typed", {"inputs": m_typed(x=typed("x", X, "FP16", "fp32_contents"))}, "refused",
               "inputs[0].contents")
    for datatype, values, at in (("INT8", [128, 0], 0), ("INT8", [0, -129], 1), ("INT16", [32768, 0], 0),
                                 ("UINT8", [256, 0], 0), ("UINT16", [0, 65536], 1)):
        yield grpc("contents", f"{datatype}-{values}", {"inputs": m_typed(n=typed("n", values, datatype))}, "refused",
                   f"inputs[1].contents.{CONTENTS[datatype]}[{at}]")
    for datatype, values in (("INT8", [127, -128]), ("UINT16", [65535, 0]), ("UINT64", [2 ** 64 - 1, 0])):
        yield grpc("contents", f"{datatype}-in-range-not-the-inputs",
                   {"inputs": m_typed(n=typed("n", values, datatype))}, "refused", "input 'n'")
    for label, shape, mention in (("negative", [-2], "inputs[1].shape[0]"), ("2^62-squared", [1 << 62, 1 << 62],
                                  "inputs[1].shape"), ("65-axes", [1] * 65, "inputs[1].shape"),
                                  ("3-for-2-values", [3], "inputs[1].contents.int_contents"),
                                  ("rank-2", [2, 1], "input 'n'"), ("2^63-1", [2 ** 63 - 1], "inputs[1].shape")):
        yield grpc("shape", label, {"inputs": m_typed(n=typed("n", GOOD_M["n"], "INT32", shape=shape))}, "refused",
                   mention)
    yield from _parameter_cases()
    yield from _name_cases()


def _parameter_cases() -> Iterator[Case]:
    bds = "inputs[1].parameters.binary_data_size"
    for label, key, p, expect, mention in (
            ("bds-string", "binary_data_size", _param(string_param="8"), "refused", bds),
            ("bds-bool", "binary_data_size", _param(bool_param=True), "refused", bds),
            ("bds-negative", "binary_data_size", _param(int64_param=-1), "refused", bds),
            ("bds-double", "binary_data_size", _param(double_param=8.0), "refused", bds),
            ("bds-uint64", "binary_data_size", _param(uint64_param=8), "refused", bds),
            ("bds-8", "binary_data_size", _param(int64_param=8), "answered", ""),
            ("unset", "p", _param(), "refused", "inputs[1].parameters.p"),
            ("shared-memory", "shared_memory_region", _param(string_param="r"), "refused",
             "inputs[1].parameters.shared_memory_region"),
            ("classification", "classification", _param(int64_param=1), "refused",
             "inputs[1].parameters.classification"),
            ("long-key", "k" * 10_000, _param(), "refused", "inputs[1].parameters." + "k" * 64 + "..."),
            ("string", "note", _param(string_param="s" * 10_000), "answered", "")):
        n = typed("n", GOOD_M["n"], "INT32", parameters={key: p})
        yield grpc("parameters", f"input:{label}", {"inputs": m_typed(n=n)}, expect, mention)
    for label, key, p, expect, mention in (
            ("bdo-int", "binary_data_output", _param(int64_param=1), "refused", "parameters.binary_data_output"),
            ("bdo-string", "binary_data_output", _param(string_param="true"), "refused",
             "parameters.binary_data_output"),
            ("bdo-true", "binary_data_output", _param(bool_param=True), "answered", ""),
            ("unset", "p", _param(), "refused", "parameters.p"),
            ("double", "p", _param(double_param=float("nan")), "refused", "parameters.p"),
            ("priority", "priority", _param(int64_param=-(2 ** 63)), "answered", ""),
            ("shared-memory", "shared_memory_byte_size", _param(int64_param=8), "refused",
             "parameters.shared_memory_byte_size")):
        yield grpc("parameters", f"request:{label}", {"inputs": m_typed(), "parameters": {key: p}}, expect, mention)
    for label, params, mention in (
            ("binary_data-string", {"binary_data": _param(string_param="true")}, "outputs[0].parameters.binary_data"),
            ("binary_data-int", {"binary_data": _param(int64_param=1)}, "outputs[0].parameters.binary_data"),
            ("classification", {"classification": _param(int64_param=3)}, "outputs[0].parameters.classification"),
            ("unset", {"q": _param()}, "outputs[0].parameters.q")):
        yield grpc("outputs", label, {"inputs": m_typed(), "outputs": [Output(name="y", parameters=params)]},
                   "refused", mention)
    yield grpc("outputs", "binary_data-true", {"inputs": m_typed(), "outputs": [
        Output(name="y", parameters={"binary_data": _param(bool_param=True)})]}, "answered")
    for label, names, at in (("unknown", ["q"], 0), ("empty", [""], 0), ("long", ["y" * 10_000], 0),
                             ("duplicate", ["y", "y"], 1), ("unicode", ["\u00fd"], 0)):
        yield grpc("outputs", label, {"inputs": m_typed(), "outputs": [Output(name=o) for o in names]}, "refused",
                   f"outputs[{at}].name")
    yield grpc("outputs", "reversed", {"inputs": m_typed(), "outputs": [Output(name=o) for o in ("w", "nb", "k", "y")]},
               "answered")
    yield grpc("outputs", "t-some", {**t_raw(), "outputs": [Output(name=o) for o in ("ou64", "of16")]}, "answered",
               model="t")


def _name_cases() -> Iterator[Case]:
    for label, name in (("unknown", "zz"), ("empty", ""), ("long", "z" * 10_000), ("slash", "m/x"), ("dots", ".."),
                        ("upper", "M"), ("nul", "m\u0000"), ("unicode", "\u6a21\u578b")):
        yield grpc("names", f"model-{label}", {"model_name": name, "inputs": m_typed()}, "missing")
        yield grpc("names", f"metadata-{label}", {"name": name}, "missing", method="ModelMetadata")
    for version in ("2", "01", "-1", "9" * 10_000, "1.0"):
        yield grpc("names", f"version-{version[:8]}", {"model_version": version, "inputs": m_typed()}, "missing",
                   "version")
        yield grpc("names", f"ready-version-{version[:8]}", {"name": "m", "version": version}, "missing",
                   method="ModelReady")
    yield grpc("names", "version-1", {"model_version": "1", "inputs": m_typed()}, "answered")
    g = m_typed()
    yield grpc("inputs", "duplicate", {"inputs": [*g, typed("x", X, "FP32")]}, "refused", "inputs[3].name")
    yield grpc("inputs", "missing-b", {"inputs": g[:2]}, "refused", "'b'")
    yield grpc("inputs", "none", {}, "refused", "'x'")
    yield grpc("inputs", "extra", {"inputs": [*g, typed("z", [1], "INT32")]}, "refused", "inputs[3].name")
    yield grpc("inputs", "name-long", {"inputs": [typed("x" * 10_000, X, "FP32"), *g[1:]]}, "refused",
               "inputs[0].name")
    yield grpc("inputs", "shuffled", {"inputs": [g[2], g[0], g[1]]}, "answered")
    yield grpc("inputs", "t-raw-reversed", {"inputs": t_raw()["inputs"][::-1],
                                            "raw_input_contents": t_raw()["raw_input_contents"][::-1]},
               "answered", model="t")
    for label, rid in (("100k", "r" * 100_000), ("unicode", "\u0438\u0434-\U0001f600"), ("nul", "a\u0000b")):
        yield grpc("id", label, {"inputs": m_typed(), "id": rid}, "answered")
    good = pb.ModelInferRequest(model_name="m", inputs=m_typed()).SerializeToString()
    for label, data, expect in (("garbage", b"\xff\xff\xff", "refused"), ("truncated", good[:-7], "refused"),
                                ("wrong-wire-type", b"\x08\x01" + good, "answered"),  # an unknown field, to protobuf
                                ("length-past-the-end", b"\x0a\x7fm", "refused"),
                                ("unknown-field", good + b"\xf8\x06\x01", "answered"), ("empty", b"", "missing")):
        inputs = GOOD_M if expect == "answered" else None
        mention = "the request is not a ModelInferRequest message" if expect == "refused" else ""
        yield Case("grpc-bytes", label, "grpc-bytes", data, expect, mention, "m", inputs=inputs)
