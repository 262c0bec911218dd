"""The option groups of the commands that write a program into an artifact (``export``, ``import``): each gives its
command one parameter ``request``, the library's record of those options (``jaxport.ExportRequest``,
``jaxport.ImportRequest``), as Polygraphy's argument groups build library objects.

A field added to ``ExportRequest`` is added to :data:`EXPORT_REQUEST` (with its option: one shared by several commands
is declared in ``options``) and ``jaxport export`` takes it; the command itself names no option of the request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from .bounds import MAX_NUMBER
from .options import (
    F,
    RecordField,
    bind_option,
    for_jax_option,
    lowering_custom_call_option,
    name_option,
    no_manifest_option,
    platform_option,
    record_options,
    root_option,
    strip_locations_option,
    version_option,
)

#: The fields of ``jaxport.export.request.WriteOptions`` (every command that writes a program takes them) but
#: ``name``, whose help each command words.
_PLATFORMS: RecordField = ("platforms", platform_option, "platforms", lambda v: list(v) or None)
_CUSTOM_CALLS: RecordField = ("allow_custom_calls", lowering_custom_call_option, "allow_custom_calls", tuple)
_WRITING: tuple[RecordField, ...] = (
    ("version", version_option, "version", None),
    ("strip_locations", strip_locations_option, "strip_locations", bool),
    ("write_manifest", no_manifest_option, "no_manifest", lambda v: not v),
)
_FOR_JAX: RecordField = ("for_jax", for_jax_option, "for_jax", None)

#: The options of ``jaxport.ExportRequest``'s fields, in ``export --help``'s order.
EXPORT_REQUEST: tuple[RecordField, ...] = (
    _PLATFORMS, _CUSTOM_CALLS,
    ("name", name_option("; in a single-function export also the function's name when it is an identifier "
                         "(overrides the spec's name:)"), "name", None),
    *_WRITING,
    ("bind", bind_option("Bind argument NAME to weights from SOURCE (.npz, .safetensors, .npy or model.py:ATTR); "
                         "repeatable."), "binds", lambda v: v or None),
    ("root", root_option("Record the entry point, spec and bound sources relative to DIR (default: the spec's "
                         "directory)."), "root", None),
    ("vjp_order", click.option("--vjp-order", type=click.IntRange(0, 4), metavar="N",
                               help="Store N orders of derivatives (VJPs) with each function, so that jax.grad and "
                                    "'call --vjp' work on the artifact (overrides the spec's vjp_order)."),
     "vjp_order", None),
    _FOR_JAX,
)

#: The options of ``jaxport.ImportRequest``'s fields, in ``import --help``'s order.
IMPORT_REQUEST: tuple[RecordField, ...] = (
    ("calling_convention", click.option(
        "--calling-convention", "calling_convention", type=click.IntRange(0, MAX_NUMBER), metavar="N",
        help="JAX calling-convention version to record (default: the one this JAX's export writes)."),
     "calling_convention", None),
    _PLATFORMS, _CUSTOM_CALLS,
    ("function", click.option("--function", "function", metavar="NAME",
                              help="Name of the function in the artifact (default: the module file's name)."),
     "function", None),
    ("name", name_option(), "name", None),
    *_WRITING,
    _FOR_JAX,
)


def request_options(record: str, fields: tuple[RecordField, ...]) -> Callable[[F], F]:
    """The options of ``fields``, in that order, which the command receives as one parameter ``request``: the
    public record ``jaxport.<record>`` built from them (:func:`options.record_options`)."""

    def build(**values: Any) -> Any:
        import jaxport

        return getattr(jaxport, record)(**values)

    return record_options(fields, build, "request")
