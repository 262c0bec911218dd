"""A function's program taken out of an artifact, for other tools: its JAX serialization as stored, or its
StableHLO (``.mlirbc`` bytecode, or text with source locations)."""

from __future__ import annotations

from pathlib import Path

from ..._fsio import atomic_write
from ...errors import UsageError
from ...program.module_scan import module_text
from ..container import Artifact
from ..manifest import function_names
from ..window.payload import module_bytes


def _payload(art: Artifact, function: str | None) -> tuple[str, bytes]:
    names = function_names(art.model, function)
    if len(names) > 1:
        raise UsageError(f"{art.path}: the artifact holds {len(names)} functions ({', '.join(names)}); name one.")
    return names[0], art.read(art.model.functions[names[0]].payload)


def extract_payload(art: Artifact, function: str | None, output: str | Path) -> int:
    """Write a function's JAX serialization as is (loadable with ``jax.export.deserialize``)."""
    _, payload = _payload(art, function)
    atomic_write(output, lambda f: f.write(payload), inputs=[art.path])
    return len(payload)


def extract_mlir(art: Artifact, function: str | None, output: str | Path) -> int:
    """Write a function's StableHLO: ``.mlirbc`` is the portable bytecode as stored, ``.mlir`` (or anything
    else) its text with source locations."""
    fname, payload = _payload(art, function)
    module = module_bytes(payload, art.path, fname)
    data = module if str(output).lower().endswith(".mlirbc") else \
        module_text(module, debug_info=True).encode("utf-8")
    atomic_write(output, lambda f: f.write(data), inputs=[art.path])
    return len(data)
