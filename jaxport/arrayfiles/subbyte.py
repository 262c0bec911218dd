"""Sub-byte types (``int4``, ``uint4``, ``float4_e2m1fn``) packed several elements to a byte, as jaxport stores them:
the weights of an artifact (specs/FORMAT.md, "Sub-byte types"), a safetensors ``F4`` tensor, an IREE buffer or
parameter. numpy is imported inside the functions; ``ml_dtypes`` holds such an array one element per byte.

The layout: the elements in C order, element ``i``'s ``bits``-bit code in byte ``i * bits // 8``, the first element
of a byte in its lowest bits (for 4 bits: an even ``i`` in the low nibble, an odd one in the high nibble), and the
unused bits of the last byte zero. It is ONNX's ``int4`` layout, and the one IREE's runtime and safetensors'
``F4`` read.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes


def codes(arr: Any) -> Any:
    """Each element's code of a sub-byte array, flat (``uint8``, one per element, in its low bits): what the element
    holds as ml_dtypes reads it. ml_dtypes reads an ``int4``/``uint4`` byte by its low nibble, so the high one is
    cleared; a ``float4_e2m1fn`` byte with high bits set (never made by ml_dtypes, possible in a file's raw bytes)
    is first converted through ``float32`` to the code of the value ml_dtypes reads."""
    import numpy as np

    d = dtypes.BY_NAME[str(arr.dtype)]
    mask = (1 << d.width) - 1
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    if d.kind == "float" and (raw & ~np.uint8(mask)).any():
        raw = raw.view(arr.dtype).astype(np.float32).astype(arr.dtype).view(np.uint8)
    return raw & np.uint8(mask)


def canonical(arr: Any) -> Any:
    """A sub-byte array whose bytes are its elements' codes (the unused high bits zero), of ``arr``'s shape: what a
    raw-void file's bytes read as one of these types become before anything compares or packs them."""
    return codes(arr).view(arr.dtype).reshape(arr.shape)


def pack(arr: Any) -> Any:
    """A sub-byte array's stored bytes (``uint8``, flat): its codes, ``8 // bits`` to a byte, first in the low bits."""
    import numpy as np

    d = dtypes.BY_NAME[str(arr.dtype)]
    per_byte = 8 // d.width
    flat = codes(arr)
    pad = (-flat.size) % per_byte
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, np.uint8)])
    lanes = flat.reshape(-1, per_byte)
    out = lanes[:, 0].copy()
    for j in range(1, per_byte):
        out |= lanes[:, j] << np.uint8(j * d.width)
    return out


def unpack(data: Any, name: str, count: int) -> Any:
    """``count`` elements of the sub-byte dtype ``name`` from their stored bytes ``data`` (a buffer of at least
    ``dtypes.stored_nbytes(name, count)`` bytes): a new flat array, one element per byte."""
    import numpy as np

    d = dtypes.BY_NAME[name]
    per_byte = 8 // d.width
    stored = np.frombuffer(data, np.uint8, count=dtypes.stored_nbytes(name, count))
    out = np.empty((stored.size, per_byte), np.uint8)
    mask = np.uint8((1 << d.width) - 1)
    for j in range(per_byte):
        out[:, j] = (stored >> np.uint8(j * d.width)) & mask
    return out.reshape(-1)[:count].view(dtypes.to_numpy(name))
