"""Reading a function's payload (JAX's ``Exported`` serialization) from its verified bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import FormatError


def deserialize(payload: bytes, where: Path | str, fname: str) -> Any:
    """``jax.export.deserialize`` with its failures reported as a damaged artifact.

    The bytes must already have passed the artifact's digest check (``Artifact.read``), so what reaches JAX's
    flatbuffer reader is what jaxport wrote.
    """
    from jax import export

    try:
        return export.deserialize(bytearray(payload))
    except Exception as e:  # noqa: BLE001 - flatbuffer and MLIR readers raise many kinds
        raise FormatError(f"{where}: function {fname!r}: the payload cannot be deserialized by this JAX "
                          f"({type(e).__name__}: {str(e)[:300]}).") from None


def module_bytes(payload: bytes, where: Path | str, fname: str) -> bytes:
    """The serialized StableHLO module inside a payload."""
    return deserialize(payload, where, fname).mlir_module_serialized
