"""Reading a function's payload (JAX's ``Exported`` serialization) from its verified bytes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...errors import FormatError
from ...isolation.isolate import check_payload
from ...jaxprivate.exported import read_exported
from ...jaxprivate.mlir import stablehlo_dialect
from .compat import window

#: How a StableHLO portable artifact names the StableHLO version it was written as (its bytecode producer string).
_STABLEHLO_VERSION = re.compile(rb"StableHLO_v(\d{1,4})\.(\d{1,4})\.(\d{1,4})")


def stablehlo_version(payload: bytes) -> tuple[int, int, int] | None:
    """The StableHLO version a payload's module was serialized as (``(1, 18, 0)``), or None when none is named."""
    m = _STABLEHLO_VERSION.search(payload)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def readable_stablehlo() -> tuple[int, int, int]:
    """The newest StableHLO version the installed jaxlib reads."""
    major, minor, patch, *_ = [int(p) for p in str(stablehlo_dialect().get_current_version()).split(".")] + [0, 0, 0]
    return major, minor, patch


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


def check_readable(payload: bytes, calling_convention: int, writer_jax: str, where: Path | str, fname: str,
                   failed: bool = False) -> None:
    """Refuse one program the installed JAX cannot read, before it is compiled: a calling convention outside its
    range (checked before parsing), or, once its reader failed (``failed``), StableHLO newer than its jaxlib reads
    (an artifact from a newer JAX, outside JAX's 3-week forward promise; a newer version alone is no refusal, as an
    older reader often reads it: jax 0.9.1, StableHLO 1.13, reads jax 0.10.2's 1.15). The one-line message names both
    JAX versions, both sides' StableHLO and calling-convention versions, the writer's window and the JAX to install.
    """
    import jax
    from jax import export

    lo, hi = export.minimum_supported_calling_convention_version, export.maximum_supported_calling_convention_version
    convention_ok = lo <= calling_convention <= hi
    if convention_ok and not failed:  # the common case: nothing more to read
        return
    written, readable = stablehlo_version(payload), readable_stablehlo()
    if convention_ok and not (written is not None and written > readable):
        return
    w = window(writer_jax)
    advice = f"install jax=={writer_jax}" + (f" (or a release from jax {w.oldest_jax} to {w.newest_jax})"
                                             if w.oldest_jax and w.newest_jax and w.oldest_jax != w.newest_jax
                                             else "")
    as_written = f"StableHLO {dotted(written)}, " if written else ""
    reason = (f"calling convention {calling_convention} is outside {lo}..{hi}" if not convention_ok
              else f"StableHLO {dotted(written or ())} is newer than the {dotted(readable)} it reads")
    span = (f"JAX guarantees loading by releases from {w.loadable_from} to {w.loadable_until}"
            if w.loadable_from and w.loadable_until else "JAX's compatibility window for it is unknown")
    raise FormatError(f"{where}: function {fname!r} was written with jax {writer_jax} ({as_written}calling "
                      f"convention {calling_convention}); this jax {jax.__version__} (StableHLO up to "
                      f"{dotted(readable)}, calling conventions {lo}..{hi}) cannot read it: {reason}. {span}; "
                      f"{advice}, or write it for jax {jax.__version__} where it was made: jaxport export --for-jax "
                      f"{jax.__version__}, or jaxport upgrade ARTIFACT --for-jax {jax.__version__} -o NEW.")


def deserialize(payload: bytes, where: Path | str, fname: str, writer_jax: str | None = None,
                calling_convention: int | None = None, notes: list[str] | None = None) -> Any:
    """``jax.export.deserialize`` with its failures reported as a damaged artifact.

    A payload the running JAX refuses as older than its window is read by jaxport from its StableHLO
    (``jaxprivate.exported.read_exported``), with the same checks after; ``notes``, when given, gets one line saying so.

    The bytes must already have passed the artifact's digest check (``Artifact.read``), so what reaches JAX's
    flatbuffer reader is what the artifact's writer stored. Because a hostile writer can store anything with a
    matching digest, a child process reads the bytes first (``isolate.check_payload``): a program that crashes JAX's
    native readers is refused without being read here.
    """
    def newer_than_this_jax() -> None:  # a reader failed: from a newer JAX? then say which to install
        if writer_jax and calling_convention is not None:
            check_readable(payload, calling_convention, writer_jax, where, fname, failed=True)

    try:
        check_payload(payload, str(where), fname)
    except FormatError as e:
        if "cannot be read by this JAX" in str(e):  # not a crash or limit of the checking child
            newer_than_this_jax()
        raise
    try:
        exported, note = read_exported(payload)
    except Exception as e:  # noqa: BLE001 - flatbuffer and MLIR readers raise many kinds
        import jax

        newer_than_this_jax()

        hint = f" It was written with jax {writer_jax}; if this JAX ({jax.__version__}) is too old or too new for " \
               f"it, install jax=={writer_jax}." if writer_jax and writer_jax != jax.__version__ else ""
        raise FormatError(f"{where}: function {fname!r}: the payload cannot be deserialized by this JAX "
                          f"({type(e).__name__}: {str(e)[:300]}).{hint}") from None
    if note is not None and notes is not None:
        notes.append(f"{where}: function {fname!r} was {note}; 'jaxport upgrade' re-serializes it with this JAX "
                     f"for a fresh window.")
    return exported


def module_bytes(payload: bytes, where: Path | str, fname: str) -> bytes:
    """The serialized StableHLO module inside a payload."""
    return deserialize(payload, where, fname).mlir_module_serialized
