"""Writing an artifact: the one step that turns lowered functions into a file, shared by export and import.

``artifact_metadata`` settles the artifact's name and metadata before anything is lowered (a bad name fails
first); ``write_artifact`` assembles the manifest of ``specs/FORMAT.md`` around the functions' entries, packs the
bound weights, writes the artifact and its sidecar manifest, and remembers the payloads as produced here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._fsio import atomic_write, check_output
from ..artifact import container, manifest, tensors
from ..artifact.tensors import Tensor
from ..isolate import trust
from ..spec import check_artifact_name
from .manifest import versions


@dataclass
class ExportResult:
    """What ``export`` and ``import_stablehlo`` wrote: the artifact, its manifest, and notes for the user."""

    path: Path
    manifest: dict[str, Any]
    size: int
    manifest_path: Path | None
    warnings: list[str] = field(default_factory=list)


def relative_path(path: Path) -> str:
    """``path`` relative to the current directory when under it, else its base name (never absolute)."""
    try:
        return Path(os.path.relpath(path.resolve(), Path.cwd().resolve())).as_posix() \
            if path.resolve().is_relative_to(Path.cwd().resolve()) else path.name
    except (OSError, ValueError):
        return path.name


def artifact_metadata(spec_metadata: Mapping[str, Any], name: str | None, version: str | None,
                      default_name: str) -> dict[str, Any]:
    """The manifest's ``metadata``: the spec's, with ``name`` (``--name``, else the spec's, else ``default_name``)
    and ``version`` (``--version``, else the spec's) settled and checked."""
    meta = dict(spec_metadata)
    meta.setdefault("labels", {})
    artifact_name = name or meta.get("name") or default_name
    check_artifact_name(artifact_name, "--name" if name else "metadata.name")
    meta["name"] = artifact_name
    if version is not None:
        meta["version"] = str(version)
    for k in ("version", "description"):
        meta.setdefault(k, None)
    return meta


def write_artifact(output: str | Path | None, metadata: dict[str, Any], spec_file: str | None,
                   functions: dict[str, Any], payloads: dict[str, bytes], bound: list[Tensor], *,
                   write_manifest: bool = True, warnings: list[str] | None = None) -> ExportResult:
    """Write an artifact of ``functions`` (manifest entries by name) and their ``payloads`` (member name ->
    serialized ``Exported``, produced by this process) with the ``bound`` tensors packed into the weights member.

    ``output`` is the artifact's path or a directory (default: ``<name>.jaxport`` in the current directory);
    ``spec_file`` is recorded relative to the current directory, unless it is a placeholder such as ``<no spec>``.
    With ``write_manifest``, the manifest is also written next to the artifact as ``<artifact>.manifest.json``.
    Both outputs are checked (``check_output``: never a device, FIFO or directory, never the spec or another file
    the export read) before either is written.
    """
    for payload in payloads.values():
        trust(payload)  # serialized by JAX in this process: no child check when it is loaded here
    recorded_spec = relative_path(Path(spec_file)) if spec_file and not spec_file.startswith("<") else None
    m: dict[str, Any] = {
        "format": manifest.FORMAT_NAME,
        "format_version": manifest.FORMAT_VERSION,
        "producer": versions(),
        "metadata": metadata,
        "source": {"spec": recorded_spec},
        "members": {},
        "functions": functions,
    }
    members: dict[str, Any] = dict(payloads)
    if bound:
        packed = tensors.pack(bound)
        m["weights"] = {"member": manifest.WEIGHTS_MEMBER, "tensors": packed.index}
        members[manifest.WEIGHTS_MEMBER] = packed
    artifact_name = metadata["name"]
    out = Path(output) if output is not None else Path(f"{artifact_name}.jaxport")
    if out.is_dir():
        out = out / f"{artifact_name}.jaxport"
    read = [spec_file] if spec_file and not spec_file.startswith("<") else []
    sidecar = out.with_name(out.name + ".manifest.json") if write_manifest else None
    for path in (out, sidecar):
        if path is not None:
            check_output(path, read)
    raw = container.write_artifact(out, m, members)
    if sidecar is not None:
        atomic_write(sidecar, lambda f: f.write(raw), inputs=read)
    return ExportResult(out, m, out.stat().st_size, sidecar, list(warnings or []))
