"""jaxport: turn a JAX function into a versioned, portable, verifiable artifact.

The public API. Heavy modules (JAX) load lazily, so ``import jaxport`` and reading a manifest stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .container import Artifact, open_artifact
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
from .manifest import FORMAT_VERSION

if TYPE_CHECKING:
    from .diff import compare_manifests
    from .diff import diff as diff_artifacts
    from .importer import import_stablehlo
    from .iree_runtime import compile_artifact
    from .pipeline import ExportResult, export
    from .policy import check, load_policy
    from .runtime import Loaded, load
    from .spec import ShapeSpec, load_spec, parse_spec
    from .verify import verify as verify_artifact

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


def __getattr__(name: str) -> Any:
    if name in ("export", "ExportResult"):
        from . import pipeline

        return getattr(pipeline, name)
    if name in ("ShapeSpec", "load_spec", "parse_spec"):
        from . import spec

        return getattr(spec, name)
    if name in ("load", "Loaded"):
        from . import runtime

        return getattr(runtime, name)
    # verify and diff are also submodules: their functions are exported under names a submodule import cannot
    # shadow.
    renamed = {"verify_artifact": ("verify", "verify"), "diff_artifacts": ("diff", "diff")}
    if name in renamed:
        import importlib

        module, attr = renamed[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    lazy = {"compare_manifests": "diff", "check": "policy",
            "load_policy": "policy", "compile_artifact": "iree_runtime",
            "import_stablehlo": "importer"}
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(f".{lazy[name]}", __name__), name)
    raise AttributeError(f"module 'jaxport' has no attribute {name!r}")
