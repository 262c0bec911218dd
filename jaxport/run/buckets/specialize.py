"""A program specialized to concrete input shapes (one shape bucket): what IREE compiles and what the padding proof
(``rowwise``) compares, with static shapes only, and refused as a platform error when custom calls are left in it
(IREE has no kernels for them; JAX's shape checks and its dynamic-shape calls are gone by then)."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import PlatformError
from ...jaxprivate.mlir import make_ir_context

if TYPE_CHECKING:  # a type only: the buckets sit below the run core, which hands them its JAX backend
    from ..jax_backend import JaxBackend

#: What makes a custom call vanish once the program has static shapes: JAX's shape checks and its calls that exist
#: only for dynamic shapes (``stablehlo.dynamic_top_k``, ``stablehlo.dynamic_reduce_window``, ...).
GONE_WHEN_STATIC = ("shape_assertion",)
DYNAMIC_PREFIX = "stablehlo.dynamic_"
#: Shardy's operations that do nothing on one device, which IREE (without the dialect) cannot read: JAX 0.12 puts a
#: sharding constraint on a typed PRNG key's data, with an empty mesh, even in a one-device program.
SINGLE_DEVICE_NO_OPS = ("sdy.sharding_constraint", "sdy.mesh")
#: What IREE is told to do when the caller gives no other flags.
RUN_WITH_JAX = "run it with the JAX runtime (--runtime jax)"


def custom_call_error(where: str, counts: Mapping[str, int]) -> PlatformError:
    """IREE provides no custom-call kernels: the error naming the program's custom calls (with how often each is
    called) and what to do."""
    shown = ", ".join(f"{t} ({n}x)" for t, n in sorted(counts.items()))
    hint = (" (on CPU, jnp.linalg decompositions and solvers lower to LAPACK custom calls)"
            if any(t.startswith("lapack_") for t in counts) else "")
    several = len(counts) > 1
    return PlatformError(f"{where}: IREE cannot run this program: it calls the custom call{'s' if several else ''} "
                         f"{shown}, for which IREE has no kernel{hint}; {RUN_WITH_JAX}, or export the function "
                         f"without the operation that lowers to {'them' if several else 'it'}.")


def static_module(backend: JaxBackend, structs: list[Any], *, fast: bool = False) -> bytes:
    """The program specialized to concrete input shapes, as MLIR bytecode of this JAX's MLIR, static shapes only.

    Its arguments are the function's bound tensors (in the manifest's order), then its free inputs; unused ones are
    kept, so every caller passes the same list. Bound tensors are lowered as abstract arguments: their values are
    not read. ``fast``: the lowered module goes to the refinement as bytecode, locations kept, rather than as text
    without them (the same program then gives the same bytes): a program with large constants (weights closed over)
    prints them in hex, 0.1-0.2 s per 16 MB each way.
    """
    import jax
    from jax.extend import mlir as jmlir

    weights = [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in backend.weights]
    with backend.x64():
        lowered = jax.jit(backend.program, keep_unused=True).lower(weights, *structs)
    if fast:
        buffer = io.BytesIO()
        module = lowered.compiler_ir("stablehlo")
        assert module is not None
        module.operation.write_bytecode(buffer)
        source = buffer.getvalue()
    else:
        source = lowered.as_text(debug_info=False).encode("utf-8")  # without locations: the same bytes
    try:
        return bytes(jmlir.refine_polymorphic_shapes(source))
    except Exception as e:  # noqa: BLE001 - the refinement reports shape-assertion failures as errors
        raise PlatformError(f"{backend.where}: cannot specialize the program to these shapes for IREE: "
                            f"{str(e).strip().splitlines()[0][:300]}") from None


def specialize(backend: JaxBackend, structs: list[Any], *, fast: bool = False) -> str | bytes:
    """The program specialized to concrete shapes as MLIR text without locations, which IREE reads (``fast``: as
    bytecode, for a reader of this JAX's MLIR, see :func:`static_module`); refused (a platform error) when custom
    calls are left in it."""
    refined = static_module(backend, structs, fast=fast)
    with make_ir_context():
        from jax.extend.mlir import ir
        from jax.extend.mlir.dialects import stablehlo

        module = ir.Module.parse(refined)
        targets: list[str] = []
        shardy: list[Any] = []

        def visit(op: Any) -> Any:
            view = op.opview
            if isinstance(view, stablehlo.CustomCallOp):
                targets.append(view.call_target_name.value)
            elif op.name in SINGLE_DEVICE_NO_OPS:
                shardy.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        if targets:
            raise custom_call_error(backend.where, Counter(targets))
        for op in shardy:  # one device: a sharding constraint is its operand, a mesh names nothing
            if op.name == "sdy.sharding_constraint":
                op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
        if fast:
            buffer = io.BytesIO()
            module.operation.write_bytecode(buffer)
            return buffer.getvalue()
        return str(module.operation.get_asm(enable_debug_info=False))
