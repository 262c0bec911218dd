"""Derivatives stored at export: the VJP programs serialized with a function.

``vjp_order: N`` (``--vjp-order N``) serializes each function with N orders of its VJP
(``Exported.serialize(vjp_order=N)``): the program, the program that maps (inputs, output cotangents) to input
cotangents, and so on N times. JAX's ``Exported.call`` is differentiable through those stored programs, so
``jax.grad(jaxport.load(...))`` works up to order N without the source code (see ``run.gradients``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ...errors import ExportError
from ...jaxprivate.exported import vjp_getter, with_vjp_getter
from ...program.module_scan import strip_locations
from .tracing import jax_config, location_regex, on_fresh_stack


def serialize(exported: Any, order: int, where: str, fname: str, *, root: Path | None = None,
              strip: bool = False) -> bytes:
    """``exported.serialize(vjp_order=order)``, with the VJP programs exported as the primal was: source locations
    relative to ``root`` (or stripped), on a fresh stack so that the bytes do not depend on the caller."""
    if order == 0:
        return bytes(exported.serialize())
    if strip:
        exported = _stripping(exported)

    def run() -> bytes:
        settings: dict[str, Any] = {
            "jax_include_full_tracebacks_in_locations": False,
            **({"jax_hlo_source_file_canonicalization_regex": location_regex(root)} if root is not None else {})}
        with jax_config(**settings):
            return bytes(exported.serialize(vjp_order=order))

    try:
        return on_fresh_stack(run)
    except Exception as e:  # noqa: BLE001 - JAX's own errors for a derivative it cannot export
        text = str(e).strip().splitlines()[0][:400] if str(e).strip() else type(e).__name__
        raise ExportError(f"{where}: function {fname!r}: its derivatives cannot be exported (vjp_order {order}): "
                          f"{type(e).__name__}: {text}. Export it with a lower --vjp-order, or make the function "
                          f"differentiable (jax.custom_vjp for the parts JAX cannot differentiate).") from None


def _stripping(exported: Any) -> Any:
    """``exported`` whose VJPs, at every order, have their source locations stripped."""
    get = vjp_getter(exported)
    if get is None:
        return exported

    def stripped(primal: Any) -> Any:
        v = get(primal)
        return _stripping(dataclasses.replace(v, mlir_module_serialized=strip_locations(v.mlir_module_serialized)))

    return with_vjp_getter(exported, stripped)
