"""jaxport: turn a JAX function into a versioned, portable, verifiable artifact.

The public API. Heavy modules (JAX) load lazily, so ``import jaxport`` and reading a manifest stay fast.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

# The ``export`` subpackage is imported first so that the ``export`` function defined below, not the subpackage,
# is what ``jaxport.export`` names (a submodule import binds its name in the parent package only when it first
# loads). The subpackage's ``__init__`` imports nothing.
from . import export as _export_package  # noqa: F401
from ._version import __version__
from .artifact.container import Artifact
from .artifact.container import open_artifact as _open_artifact
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
    SignatureError,
    SpecError,
    UsageError,
    VerificationError,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy honours the name)
if TYPE_CHECKING:
    from typing import Any

    from .artifact.diff import compare_manifests
    from .artifact.diff import diff as diff_artifacts
    from .artifact.policy import check, load_policy
    from .artifact.signing.check import verify_signature
    from .artifact.signing.sign import sign
    from .export.pipeline import ExportResult
    from .export.rebind import rebind
    from .export.request import ExportRequest
    from .importer.build import import_stablehlo
    from .importer.request import ImportRequest
    from .run.calls.calling import CallReport, CallRequest
    from .run.calls.calling import call as call
    from .run.calls.report import ReferenceMismatch
    from .run.compile.deploy import compile_artifact
    from .run.load import load
    from .run.loaded import Loaded
    from .run.options import LoadOptions
    from .run.values.treefiles import save_inputs
    from .run.vouching import vouch as vouch_cache
    from .spec.build import Like, Spec, like
    from .spec.model import ShapeSpec
    from .spec.parse import load_spec, parse_spec
    from .verify.api import localize
    from .verify.api import verify as verify_artifact
    from .verify.request import VerifyRequest

__all__ = [
    "FORMAT_VERSION",
    "Artifact",
    "CallReport",
    "CallRequest",
    "DiffError",
    "EntrypointError",
    "ExportError",
    "ExportRequest",
    "ExportResult",
    "FormatError",
    "ImportRequest",
    "InputError",
    "IntegrityError",
    "JaxportError",
    "Like",
    "LoadOptions",
    "Loaded",
    "OutputError",
    "PlatformError",
    "PolicyError",
    "PolicyFileError",
    "PolicyViolation",
    "ReferenceMismatch",
    "ShapeSpec",
    "SignatureError",
    "Spec",
    "SpecError",
    "UsageError",
    "VerificationError",
    "VerifyRequest",
    "__version__",
    "call",
    "check",
    "compare_manifests",
    "compile_artifact",
    "diff_artifacts",
    "export",
    "import_stablehlo",
    "like",
    "load",
    "load_policy",
    "load_spec",
    "localize",
    "open_artifact",
    "parse_spec",
    "rebind",
    "save_inputs",
    "sign",
    "upgrade",
    "verify_artifact",
    "verify_signature",
    "vouch_cache",
]


#: Public name -> (module, attribute), imported on first use so that ``import jaxport`` stays light.
_LAZY = {
    "ExportResult": ("jaxport.export.pipeline", "ExportResult"),
    "ExportRequest": ("jaxport.export.request", "ExportRequest"),
    "ImportRequest": ("jaxport.importer.request", "ImportRequest"),
    "ShapeSpec": ("jaxport.spec.model", "ShapeSpec"),
    "Spec": ("jaxport.spec.build", "Spec"),
    "Like": ("jaxport.spec.build", "Like"),
    "like": ("jaxport.spec.build", "like"),
    "load_spec": ("jaxport.spec.parse", "load_spec"),
    "parse_spec": ("jaxport.spec.parse", "parse_spec"),
    "load": ("jaxport.run.load", "load"),
    "Loaded": ("jaxport.run.loaded", "Loaded"),
    "LoadOptions": ("jaxport.run.options", "LoadOptions"),
    "call": ("jaxport.run.calls.calling", "call"),
    "CallRequest": ("jaxport.run.calls.calling", "CallRequest"),
    "CallReport": ("jaxport.run.calls.calling", "CallReport"),
    "ReferenceMismatch": ("jaxport.run.calls.report", "ReferenceMismatch"),
    "verify_artifact": ("jaxport.verify.api", "verify"),
    "localize": ("jaxport.verify.api", "localize"),
    "VerifyRequest": ("jaxport.verify.request", "VerifyRequest"),
    "diff_artifacts": ("jaxport.artifact.diff", "diff"),
    "compare_manifests": ("jaxport.artifact.diff", "compare_manifests"),
    "check": ("jaxport.artifact.policy", "check"),
    "load_policy": ("jaxport.artifact.policy", "load_policy"),
    "compile_artifact": ("jaxport.run.compile.deploy", "compile_artifact"),
    "import_stablehlo": ("jaxport.importer", "import_stablehlo"),
    "rebind": ("jaxport.export.rebind", "rebind"),
    "save_inputs": ("jaxport.run.values.treefiles", "save_inputs"),
    "upgrade": ("jaxport.verify.upgrade", "upgrade"),
    "sign": ("jaxport.artifact.signing.sign", "sign"),
    "verify_signature": ("jaxport.artifact.signing.check", "verify_signature"),
    "vouch_cache": ("jaxport.run.vouching", "vouch"),
}


def _export(
    fn: Callable[..., Any] | str | None,
    spec: ShapeSpec | Spec | Mapping[str, Any] | str | Path,
    output: str | Path | None = None,
    *,
    request: ExportRequest | None = None,
    progress: Callable[[str], None] | None = None,
    bind: Mapping[str, Any] | None = None,
    name: str | None = None,
    version: str | None = None,
    platforms: list[str] | None = None,
    allow_custom_calls: list[str] | tuple[str, ...] = (),
    strip_locations: bool = False,
    write_manifest: bool = True,
    vjp_order: int | None = None,
    root: str | Path | None = None,
    for_jax: str | None = None,
) -> ExportResult:
    """Export ``fn`` with the argument shapes of ``spec`` into an artifact; write it to ``output`` when given.

    ``fn``: a callable (a function, ``jax.jit`` of one, a bound method, a ``functools.partial``, a callable model) or
    an entry point ``"model.py:NAME"`` / ``"package.module:NAME"``; None for a spec that names its functions.
    ``spec``: a spec file's path, YAML text (a string with a line break, or starting with ``jaxport:``), a dict with
    the YAML's structure (``{"jaxport": 1, "dims": {...}, "args": [...]}``), a ``jaxport.Spec`` or a parsed
    ``ShapeSpec``. The options are the fields of ``jaxport.ExportRequest``, given as ``request=`` or as keywords
    (which replace the request's where not at their defaults): ``bind``, ``name``, ``version``, ``platforms``,
    ``allow_custom_calls``, ``strip_locations``, ``write_manifest``, ``vjp_order``, ``root``, ``for_jax``. ``bind``:
    ``{parameter name: value}``, a value being an in-memory pytree of arrays (dicts of arrays, flax variables, an nnx
    module or state, an equinox module) or a source string (``params.npz``, ``model.py:PARAMS``); the spec need not
    list a bound parameter. ``for_jax``: write the artifact for that older JAX (``"0.10.2"``): its payloads as that
    JAX reads them, its window dated by it. Returns an ``ExportResult``: without ``output`` nothing is written, and
    ``result.save(path)``, ``result.to_bytes()`` and ``result.load()`` give the artifact. ``progress``: called with
    the text of each stage as it starts (``lowering predict``). See ``jaxport.export.pipeline.export``.
    """
    from .export.pipeline import export as export_

    record = _lazy("ExportRequest").given(request, {
        "bind": bind, "name": name, "version": version, "platforms": platforms,
        "allow_custom_calls": allow_custom_calls, "strip_locations": strip_locations,
        "write_manifest": write_manifest, "vjp_order": vjp_order, "root": root, "for_jax": for_jax})
    result = export_(fn, spec, output, record, progress=progress)
    result.loader = _load_exported  # the export layer does not import the run layer: the facade connects them
    return result


def _load_exported(*args: Any, **kwargs: Any) -> Loaded:
    """``jaxport.load``, imported when an export's ``result.load()`` first needs it (not with every export)."""
    return __getattr__("load")(*args, **kwargs)


#: The classes the public functions' annotations name, for their argument checks (``_api_types``), by where each
#: lives: imported only when a checked function's signature names it (an export's checks import no ``run`` layer).
_CLASS_HOMES = {"ShapeSpec": ("jaxport.spec.model", "ShapeSpec"), "Spec": ("jaxport.spec.build", "Spec"),
                "Policy": ("jaxport.artifact.policy", "Policy"), "date": ("datetime", "date"),
                "CallRequest": ("jaxport.run.calls.calling", "CallRequest"),
                "VerifyRequest": ("jaxport.verify.request", "VerifyRequest"),
                "ExportRequest": ("jaxport.export.request", "ExportRequest"),
                "ImportRequest": ("jaxport.importer.request", "ImportRequest"),
                "LoadOptions": ("jaxport.run.options", "LoadOptions")}


class _Classes(Mapping[str, type]):
    """:data:`_CLASS_HOMES` (and ``Artifact``) as a mapping whose classes are imported when first looked up."""

    def __init__(self) -> None:
        self._found: dict[str, type] = {"Artifact": Artifact}

    def __getitem__(self, name: str) -> type:
        if name not in self._found:
            import importlib

            module, attr = _CLASS_HOMES[name]
            self._found[name] = getattr(importlib.import_module(module), attr)
        return self._found[name]

    def __iter__(self) -> Iterator[str]:
        return iter(["Artifact", *_CLASS_HOMES])

    def __len__(self) -> int:
        return 1 + len(_CLASS_HOMES)


_CLASSES = _Classes()


def _classes() -> Mapping[str, type]:
    """The classes the public functions' annotations name, for their argument checks (``_api_types``)."""
    return _CLASSES


_CHECKED: dict[str, Any] = {}  # public name -> the function with its arguments checked


def _checked(name: str, fn: Any) -> Any:
    from ._api_types import checked

    if getattr(_CHECKED.get(name), "__wrapped__", None) is not fn:
        _CHECKED[name] = checked(name, fn, _classes)
    return _CHECKED[name]


def _lazy(name: str) -> Any:
    """The public name ``name`` of ``_LAZY``, imported."""
    import importlib

    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)


if TYPE_CHECKING:  # what a type checker and an IDE read: the functions themselves, with their parameters
    export = _export
    open_artifact = _open_artifact
else:  # the same functions with their arguments checked (``inspect.signature`` and ``help`` show theirs)
    @functools.wraps(_export)
    def export(*args: Any, **kwargs: Any) -> ExportResult:
        return _checked("export", _export)(*args, **kwargs)

    @functools.wraps(_open_artifact)
    def open_artifact(*args: Any, **kwargs: Any) -> Artifact:
        return _checked("open_artifact", _open_artifact)(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import inspect

        value = _lazy(name)
        return _checked(name, value) if inspect.isfunction(value) else value
    raise AttributeError(f"module 'jaxport' has no attribute {name!r}")


def _quiet_libtpu() -> None:
    """Where libtpu is installed (``jaxport[tpu]``, to compile for a TPU here) and no TPU is attached, keep libtpu's
    start-up lines (``could not determine TPU accelerator type``, ``unexpected worker hostname``...) off stderr
    whenever JAX starts in this process, as the command line does: ``_machine.quiet_libtpu`` sets libtpu's own
    variables, each only where neither ``TPU_ACCELERATOR_TYPE`` nor ``TPU_WORKER_HOSTNAMES`` is set, and only on a
    machine without a TPU, where JAX's TPU backend fails to start either way and JAX runs on the CPU. Nothing else of
    JAX's configuration is touched. Without libtpu, only its absence is looked up (``_machine`` is not imported)."""
    import importlib.util
    import os

    if "TPU_ACCELERATOR_TYPE" in os.environ or "TPU_WORKER_HOSTNAMES" in os.environ:
        return
    try:
        if importlib.util.find_spec("libtpu") is None:
            return
    except (ImportError, ValueError):
        return
    from ._machine import quiet_libtpu

    quiet_libtpu()


_quiet_libtpu()  # at import, before the user's JAX (or jaxport's) starts its backends
