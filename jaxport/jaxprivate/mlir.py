"""JAX's MLIR: a context with every dialect its programs use, jaxlib's MLIR helpers without importing
``jax.extend``, and the StableHLO portable-artifact reader and writer across the jaxlib releases jaxport supports.

``jaxport import`` needs an MLIR context that knows the ``func`` dialect, which no public API gives
(:func:`make_ir_context`); ``import jax.extend.mlir`` costs every process that reads a program 40-70 ms
(:func:`_jaxlib_mlir`); and the portable-artifact functions of ``jax.extend.mlir`` changed their signatures in
jaxlib 0.10 (:func:`deserialize_portable_artifact`, :func:`serialize_portable_artifact`).
"""

from __future__ import annotations

import io

TYPE_CHECKING = False  # typing's constant, without importing typing
if TYPE_CHECKING:
    from typing import Any


def mlir_ir() -> Any:
    """JAX's MLIR Python bindings, ``jax.extend.mlir.ir``, without importing ``jax.extend`` (see
    :func:`_jaxlib_mlir`)."""
    from jaxlib.mlir import ir  # what jax.extend.mlir.ir re-exports

    return ir


def stablehlo_dialect() -> Any:
    """``jax.extend.mlir.dialects.stablehlo``, imported without ``jax.extend`` (see :func:`_jaxlib_mlir`)."""
    from jaxlib.mlir.dialects import stablehlo  # what jax.extend.mlir.dialects.stablehlo re-exports

    return stablehlo


def _jaxlib_mlir() -> Any:
    """jaxlib's MLIR helpers that ``jax.extend.mlir`` re-exports (``deserialize_portable_artifact`` and
    ``serialize_portable_artifact``).

    ``import jax.extend.mlir`` first runs ``jax/extend/__init__.py``, which imports every ``jax.extend`` module, Pallas
    included: 40-70 ms of every ``jaxport call`` process that reads a program (BENCHMARKS.md, issue 16), where a
    native script imports none of it. These are the same objects (``tests/foundation/test_checks.py`` compares them).
    """
    from jax._src.lib import _jax  # no public API: see the docstring

    return _jax.mlir


def make_ir_context() -> Any:
    """An MLIR context with every dialect JAX's programs use (func, stablehlo, chlo, mhlo, sdy, ...).

    ``jax.extend.mlir`` registers stablehlo, chlo and sdy, but not the upstream ``func`` dialect in which every
    module's ``main`` is written, so parsing a module's text or plain bytecode (``jaxport import``) needs the context
    JAX builds for its own lowerings. No public API gives it.
    """
    from jax._src.interpreters import mlir  # no public API: see the docstring

    return mlir.make_ir_context()


# --- the older JAX releases jaxport supports (measured with jax 0.9.1, 0.9.2, 0.10.0, 0.10.1 and 0.10.2) -----------


def _load_jax_dialects(ctx: Any) -> None:
    """Load into ``ctx`` every dialect JAX's programs use, as :func:`make_ir_context` does for a new context."""
    from jax._src.interpreters import mlir  # no public API: see make_ir_context
    from jax._src.lib.mlir import dialects

    ctx.append_dialect_registry(mlir.upstream_dialects)
    ctx.load_all_available_dialects()
    dialects.sdy.register_dialect(ctx)
    dialects.chlo.register_dialect(ctx)
    dialects.hlo.register_dialect(ctx)


def deserialize_portable_artifact(data: bytes) -> Any:
    """A StableHLO portable artifact as an ``ir.Module`` of the current MLIR context (``with ctx:``).

    ``jax.extend.mlir.deserialize_portable_artifact`` returns the module from jaxlib 0.10.0 on, but its text (with
    locations) in jaxlib 0.9.x: that text is parsed here, in the current context with JAX's dialects loaded (the
    newer reader loads them itself).
    """
    ir = mlir_ir()
    result = _jaxlib_mlir().deserialize_portable_artifact(data)
    if isinstance(result, str):  # jaxlib 0.9.x
        _load_jax_dialects(ir.Context.current)
        return ir.Module.parse(result)
    return result


def serialize_portable_artifact(module: Any, target: str, use_mixed_serialization: bool = False) -> bytes:
    """``module`` (an ``ir.Module``) as a StableHLO portable artifact for StableHLO version ``target``.

    ``jax.extend.mlir.serialize_portable_artifact`` takes the module from jaxlib 0.10.1 on, but only MLIR bytecode
    or text in jaxlib 0.9.x and 0.10.0, which refuse the module with a TypeError before reading anything: they are
    given the module's bytecode (which keeps its locations; the same bytes as from the module, measured with 0.9.x).
    """
    jmlir = _jaxlib_mlir()
    try:
        return bytes(jmlir.serialize_portable_artifact(module, target, use_mixed_serialization))
    except TypeError:  # jaxlib 0.9.x and 0.10.0: "incompatible function arguments"
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
        return bytes(jmlir.serialize_portable_artifact(buffer.getvalue(), target, use_mixed_serialization))


def serialize_with_sdy() -> bool:
    """Whether JAX's export writes Shardy sharding ops as they are when it serializes a module (the third argument
    of ``serialize_portable_artifact``, which JAX reads from its backend); a module re-serialized without it has
    its sharding annotations turned into custom calls that no JAX guarantees."""
    from jax._src import xla_bridge  # no public API

    return bool(getattr(xla_bridge.get_backend(), "serialize_with_sdy", False))
