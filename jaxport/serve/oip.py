"""An artifact's signature in the Open Inference Protocol (v2, KServe's and Triton's): datatypes, tensor and model
metadata, and tensors decoded from a request. No server here, and no kserve: ``kserve_server`` uses it.

Metadata follows the protocol: each tensor's ``name``, ``datatype`` (``FP32``, ``INT64``, ...) and ``shape`` with
``-1`` for every axis sized by a dimension variable; what the protocol has no field for goes in ``parameters``:
each tensor's declared shape (``["batch", 784]``), and for the model the function, its dimension variables' bounds,
the spec's constraints, the compiled buckets and the padding verdicts. Datatypes the protocol lacks (bfloat16,
float8, complex, PRNG keys) cannot be served: :func:`datatype` says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .. import dtypes
from ..artifact import contract
from ..artifact.model import Function, Input, Output
from ..errors import InputError, UsageError

#: The protocol's datatype for each dtype it can carry (jaxport's canonical dtype names).
DATATYPES = {d.name: d.oip for d in dtypes.TABLE if d.oip is not None}
DTYPES = {v: k for k, v in DATATYPES.items()}


def datatype(dtype: str, what: str) -> str:
    """The protocol's datatype of ``dtype``; UsageError naming ``what`` when it has none."""
    if dtype not in DATATYPES:
        raise UsageError(f"{what} is {dtype}, which the Open Inference Protocol has no datatype for (it carries "
                         f"{', '.join(DATATYPES)}); it cannot be served. Export a function whose inputs and outputs "
                         f"use those dtypes.")
    return DATATYPES[dtype]


class Tensor(NamedTuple):
    """One input's or output's metadata: name, datatype, shape (-1 for symbolic axes), declared shape."""

    name: str
    datatype: str
    shape: list[int]
    declared: list[int | str]

    @classmethod
    def of(cls, entry: Input | Output, kind: str) -> Tensor:
        """The metadata of ``entry``, an input or output (``kind``); UsageError for a dtype the protocol lacks."""
        return cls(entry.name, datatype(entry.dtype, f"{kind} {entry.name!r}"),
                   [d if isinstance(d, int) else -1 for d in entry.shape], list(entry.shape))

    def types(self) -> dict[str, Any]:
        """The protocol's fields: name, datatype and shape (gRPC metadata has these only)."""
        return {"name": self.name, "datatype": self.datatype, "shape": self.shape}

    def to_json(self) -> dict[str, Any]:
        """The protocol's fields, and the declared shape in ``parameters``."""
        return {**self.types(), "parameters": {"shape": self.declared}}


def tensor(entry: Input | Output, kind: str) -> dict[str, Any]:
    """One input's or output's metadata (:class:`Tensor`) as JSON."""
    return Tensor.of(entry, kind).to_json()


def model(f: Function, name: str, versions: Sequence[str], function: str,
          plan: Mapping[str, Any]) -> dict[str, Any]:
    """A model's metadata (``GET /v2/models/NAME``): the protocol's fields, and the rest in ``parameters``, with the
    buckets, batch variable, most rows and padding verdicts of the serving ``plan`` (``Batched.describe()``)."""
    dims = {v: f.bounds_of(v).to_manifest() for v in contract.dimension_variables(f)}
    return {"name": name, "versions": list(versions), "platform": "jaxport",
            "inputs": [tensor(i, "input") for i in f.inputs],
            "outputs": [tensor(o, "output") for o in f.outputs],
            "parameters": {"function": function, "dims": dims, "constraints": list(f.constraints),
                           **{k: plan[k] for k in ("buckets", "batch", "max_rows", "padding")}}}


def decode(name: str, dtype_name: str, shape: Sequence[Any], raw: bytes | None = None,
           data: Any = None) -> Any:
    """A request's tensor as a numpy array, from its raw bytes (binary REST, gRPC) or its JSON ``data``; InputError
    when the datatype is unknown or the data does not fill the shape."""
    import numpy as np

    if dtype_name not in DTYPES:
        raise InputError(f"input {name!r}: datatype {dtype_name!r} is not one jaxport serves "
                         f"({', '.join(DTYPES)}).")
    if not isinstance(shape, Sequence) or not all(type(d) is int and d >= 0 for d in shape):  # noqa: E721
        raise InputError(f"input {name!r}: shape {list(shape) if isinstance(shape, Sequence) else shape!r} is not a "
                         f"list of sizes.")
    dtype = np.dtype(DTYPES[dtype_name])
    count = 1
    for d in shape:
        count *= d
    if raw is not None:
        if len(raw) != count * dtype.itemsize:
            raise InputError(f"input {name!r}: {len(raw)} bytes of data for shape {list(shape)} of {dtype_name}, "
                             f"which takes {count * dtype.itemsize}.")
        return np.frombuffer(raw, dtype=dtype).reshape(tuple(shape))
    try:
        flat = np.asarray(data, dtype=dtype).reshape(-1)
    except (TypeError, ValueError) as e:
        raise InputError(f"input {name!r}: its data is not {dtype_name} values ({e}).") from None
    if flat.size != count:
        raise InputError(f"input {name!r}: {flat.size} values of data for shape {list(shape)}, which takes "
                         f"{count}.")
    return flat.reshape(tuple(shape))
