"""jaxport: turn a JAX function into a versioned, portable, verifiable artifact.

The public API. Heavy modules (JAX) load lazily, so ``import jaxport`` and reading a manifest stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

# The ``export`` subpackage is imported first so that the ``export`` function defined below, not the subpackage,
# is what ``jaxport.export`` names (a submodule import binds its name in the parent package only when it first
# loads). The subpackage's ``__init__`` imports nothing.
from . import export as _export_package  # noqa: F401
from ._version import __version__
from .artifact.container import Artifact, open_artifact
from .artifact.manifest import FORMAT_VERSION
from .errors import (
    DiffError,
    EntrypointError,
    ExportError,
    FormatError,
    InputError,
    IntegrityError,
    JaxportError,
    OutputError,
    PlatformError,
    PolicyError,
    PolicyFileError,
    PolicyViolation,
    SpecError,
    UsageError,
    VerificationError,
)

if TYPE_CHECKING:
    from .artifact.diff import compare_manifests
    from .artifact.diff import diff as diff_artifacts
    from .artifact.policy import check, load_policy
    from .export.pipeline import ExportResult
    from .importer.build import import_stablehlo
    from .run.deploy import compile_artifact
    from .run.load import load
    from .run.loaded import Loaded
    from .spec import ShapeSpec, load_spec, parse_spec
    from .verify.runner import verify as verify_artifact

__all__ = [
    "FORMAT_VERSION",
    "Artifact",
    "DiffError",
    "EntrypointError",
    "ExportError",
    "ExportResult",
    "FormatError",
    "InputError",
    "IntegrityError",
    "JaxportError",
    "Loaded",
    "OutputError",
    "PlatformError",
    "PolicyError",
    "PolicyFileError",
    "PolicyViolation",
    "ShapeSpec",
    "SpecError",
    "UsageError",
    "VerificationError",
    "__version__",
    "check",
    "compare_manifests",
    "compile_artifact",
    "diff_artifacts",
    "export",
    "import_stablehlo",
    "load",
    "load_policy",
    "load_spec",
    "open_artifact",
    "parse_spec",
    "verify_artifact",
]


#: Public name -> (module, attribute), imported on first use so that ``import jaxport`` stays light.
_LAZY = {
    "ExportResult": ("jaxport.export.pipeline", "ExportResult"),
    "ShapeSpec": ("jaxport.spec", "ShapeSpec"),
    "load_spec": ("jaxport.spec", "load_spec"),
    "parse_spec": ("jaxport.spec", "parse_spec"),
    "load": ("jaxport.run.load", "load"),
    "Loaded": ("jaxport.run.loaded", "Loaded"),
    "verify_artifact": ("jaxport.verify.runner", "verify"),
    "diff_artifacts": ("jaxport.artifact.diff", "diff"),
    "compare_manifests": ("jaxport.artifact.diff", "compare_manifests"),
    "check": ("jaxport.artifact.policy", "check"),
    "load_policy": ("jaxport.artifact.policy", "load_policy"),
    "compile_artifact": ("jaxport.run.deploy", "compile_artifact"),
    "import_stablehlo": ("jaxport.importer", "import_stablehlo"),
}


def export(
    entrypoint: str | None,
    spec: ShapeSpec | str | Path,
    *,
    output: str | Path | None = None,
    platforms: list[str] | None = None,
    allow_custom_calls: list[str] | tuple[str, ...] = (),
    name: str | None = None,
    version: str | None = None,
    strip_locations: bool = False,
    write_manifest: bool = True,
    bind: dict[str, str] | None = None,
    vjp_order: int | None = None,
) -> ExportResult:
    """Export the function(s) of a spec into an artifact (see ``jaxport.export.pipeline.export``)."""
    from .export.pipeline import export as export_

    return export_(entrypoint, spec, output=output, platforms=platforms, allow_custom_calls=allow_custom_calls,
                   name=name, version=version, strip_locations=strip_locations, write_manifest=write_manifest,
                   bind=bind, vjp_order=vjp_order)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'jaxport' has no attribute {name!r}")
