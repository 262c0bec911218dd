"""jaxport: turn a JAX function into a versioned, portable, verifiable artifact.

The public API. Heavy modules (JAX) load lazily, so ``import jaxport`` and reading a manifest stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .container import Artifact, open_artifact
from .errors import (
    EntrypointError,
    ExportError,
    FormatError,
    InputError,
    IntegrityError,
    JaxportError,
    OutputError,
    PlatformError,
    PolicyError,
    SpecError,
    UsageError,
)
from .manifest import FORMAT_VERSION

if TYPE_CHECKING:
    from .pipeline import ExportResult, export
    from .runtime import Loaded, load
    from .spec import ShapeSpec, load_spec, parse_spec

__all__ = [
    "FORMAT_VERSION",
    "Artifact",
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
    "ShapeSpec",
    "SpecError",
    "UsageError",
    "__version__",
    "export",
    "load",
    "load_spec",
    "open_artifact",
    "parse_spec",
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
    raise AttributeError(f"module 'jaxport' has no attribute {name!r}")
