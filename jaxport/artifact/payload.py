"""Reading a function's payload (JAX's ``Exported`` serialization) from its verified bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..isolate import check_payload
from .compat import window


def check_calling_convention(version: int, writer_jax: str, where: Path | str, fname: str) -> None:
    """Refuse, before parsing, a program whose calling convention the installed JAX cannot call, and say which
    JAX to use instead."""
    import jax
    from jax import export

    lo, hi = export.minimum_supported_calling_convention_version, export.maximum_supported_calling_convention_version
    if lo <= version <= hi:
        return
    w = window(writer_jax)
    advice = f"install jax=={writer_jax}" + (f" (or a release from jax {w.oldest_jax} to {w.newest_jax})"
                                             if w.oldest_jax and w.newest_jax else "")
    raise FormatError(f"{where}: function {fname!r} uses calling convention {version}, but jax {jax.__version__} "
                      f"supports {lo}..{hi}. It was written with jax {writer_jax}: {advice}, or re-export it with "
                      f"this JAX.")


def deserialize(payload: bytes, where: Path | str, fname: str, writer_jax: str | None = None) -> Any:
    """``jax.export.deserialize`` with its failures reported as a damaged artifact.

    The bytes must already have passed the artifact's digest check (``Artifact.read``), so what reaches JAX's
    flatbuffer reader is what the artifact's writer stored. Because a hostile writer can store anything with a
    matching digest, a child process reads the bytes first (``isolate.check_payload``): a program that crashes JAX's
    native readers is refused without being read here.
    """
    from jax import export

    check_payload(payload, str(where), fname)
    try:
        return export.deserialize(bytearray(payload))
    except Exception as e:  # noqa: BLE001 - flatbuffer and MLIR readers raise many kinds
        import jax

        hint = f" It was written with jax {writer_jax}; if this JAX ({jax.__version__}) is too old or too new for " \
               f"it, install jax=={writer_jax}." if writer_jax and writer_jax != jax.__version__ else ""
        raise FormatError(f"{where}: function {fname!r}: the payload cannot be deserialized by this JAX "
                          f"({type(e).__name__}: {str(e)[:300]}).{hint}") from None


def module_bytes(payload: bytes, where: Path | str, fname: str) -> bytes:
    """The serialized StableHLO module inside a payload."""
    return deserialize(payload, where, fname).mlir_module_serialized
