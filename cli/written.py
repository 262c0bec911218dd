"""What a command that writes an artifact says about it: the ``--json`` document (export, import, rebind) and the
human lines (export, import)."""

from __future__ import annotations

from . import render

TYPE_CHECKING = False  # typing's constant, without importing typing (as render does)
if TYPE_CHECKING:
    from typing import Any


def written_document(result: Any, *, source: object = None, warnings: list[str] | None = None,
                     **fields: Any) -> dict[str, Any]:
    """The ``--json`` document of a written artifact (an ``ExportResult`` or a ``RebindResult``): its path (and the
    ``source`` artifact it was written from, as ``input``), size and sidecar manifest's path, then ``fields``, then
    its warnings (``warnings``, default the result's) and manifest."""
    doc: dict[str, Any] = {"artifact": str(result.path)}
    if source is not None:
        doc["input"] = str(source)
    doc["size"] = result.size
    doc["manifest_file"] = str(result.manifest_path) if result.manifest_path else None
    doc.update(fields)
    doc["warnings"] = result.warnings if warnings is None else warnings
    doc["manifest"] = result.manifest
    return doc


def print_written(verb: str, result: Any, *, convention: bool = False) -> None:
    """Say what export or import wrote: the result's warnings on stderr; then ``verb``, the artifact's path and size,
    each function's signature and platforms (and, with ``convention``, its calling convention) and the sidecar
    manifest's path on stdout."""
    from jaxport.artifact.summary import human_bytes, signature

    if result.warnings:
        said = render.Document()
        for w in result.warnings:
            said.line(("warning:", "yellow"), " ", render.plain(w))
        said.print(err=True)
    out = render.Document()
    out.line((verb, "green"), f" {render.plain(str(result.path))} ({human_bytes(result.size)})")
    for fname, f in result.model.functions.items():
        out.line(f"  {render.plain(signature(fname, f))}")
        called = f"; calling convention {f.calling_convention_version}" if convention else ""
        out.line(f"  platforms: {render.plain(', '.join(f.platforms))}{called}")
    if result.manifest_path:
        out.line(f"  manifest: {render.plain(result.manifest_path)}")
    out.print()
