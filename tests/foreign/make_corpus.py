"""Regenerate the foreign-module corpus: the modules JAX produces, and every case's inputs and expected outputs.

Run from anywhere: ``python tests/foreign/make_corpus.py``. The hand-written modules (``*.mlir`` without a
``jax_`` prefix) and the specs are edited by hand; this script writes the ``jax_*`` modules, ``cases.json`` and
``CASE.inputs.npz`` / ``CASE.expected.npz``, whose expected outputs are computed with numpy, not with JAX or
jaxport. The ``jax_*`` modules stand for what older JAX releases wrote: regenerate them only to add a case, since
the bytes committed are the point (a later JAX must keep importing them). No file records a source location.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RNG = np.random.default_rng(20261129)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _bare(module) -> object:
    """A module without locations, parsed again in its own context."""
    from jax.extend.mlir import ir

    text = module.operation.get_asm(enable_debug_info=False)
    return ir.Module.parse(text, context=module.context)


def _jax_modules() -> None:
    import jax
    import jax.numpy as jnp
    from jax import export
    from jax.extend.mlir.dialects import stablehlo

    from jaxport.jaxprivate.mlir import serialize_portable_artifact
    from jaxport.program.module_scan import strip_locations

    def mlp(x, w, b):
        y = jnp.tanh(x @ w + b)
        return y, y.sum()

    specs = (jax.ShapeDtypeStruct((2, 3), np.float32), jax.ShapeDtypeStruct((3, 4), np.float32),
             jax.ShapeDtypeStruct((4,), np.float32))
    lowered = jax.jit(mlp).lower(*specs)
    (HERE / "jax_jit_mlp.mlir").write_text(
        "// jax.jit(mlp).lower(...).as_text(): a lowering that was not exported (no wrapped main).\n"
        + lowered.as_text(debug_info=False))
    module = _bare(lowered.compiler_ir("stablehlo"))
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    (HERE / "jax_jit_mlp.mlirbc").write_bytes(buffer.getvalue())

    def normalize(x):
        return jnp.sin(x) * 2 + x.mean(axis=1, keepdims=True)

    b, = export.symbolic_shape("b")
    exp = export.export(jax.jit(normalize))(jax.ShapeDtypeStruct((b, 5), np.float32))
    (HERE / "jax_export_poly.mlirbc").write_bytes(strip_locations(exp.mlir_module_serialized))

    def affine(x):
        return x * 3 + 1

    multi = export.export(jax.jit(affine), platforms=["cpu", "tpu"])(jax.ShapeDtypeStruct((3,), np.float32))
    (HERE / "jax_export_multiplatform.mlirbc").write_bytes(strip_locations(multi.mlir_module_serialized))

    def old(x, y):
        return jnp.maximum(x, y) * x - y

    oldest = stablehlo.get_minimum_version()
    module = _bare(jax.jit(old).lower(*[jax.ShapeDtypeStruct((2, 2), np.float32)] * 2).compiler_ir("stablehlo"))
    (HERE / "jax_stablehlo_oldest.mlirbc").write_bytes(serialize_portable_artifact(module, oldest))


#: Every case: module, spec (or None: main's own types), how the module was produced, and numpy inputs/outputs.
def _cases() -> list[dict]:
    cases = []

    def case(name, module, spec, producer, inputs, expected, args=()):
        np.savez(HERE / f"{name}.inputs.npz", **inputs)
        np.savez(HERE / f"{name}.expected.npz", **expected)
        cases.append({"name": name, "module": module, "spec": spec, "args": list(args), "producer": producer,
                      "inputs": list(inputs), "outputs": list(expected)})

    a, b = _normal(4), _normal(4)
    case("add", "add.mlir", None, "hand-written", {"arg0": a, "arg1": b}, {"output": a + b})

    x, s = _normal(5, 3), _normal(3)
    case("scale_rows", "scale_rows.mlir", "scale_rows.yaml", "hand-written, dynamic batch",
         {"x": x, "scale": s}, {"output": x * s + 1})
    x4 = _normal(4, 3)
    case("scale_rows_static", "scale_rows.mlir", "scale_rows_static.yaml", "hand-written, specialized by the spec",
         {"x": x4, "scale": s}, {"output": x4 * s + 1})

    x = _normal(3, 2)
    case("stack_twice", "stack_twice.mlir", "stack_twice.yaml", "hand-written, dynamic output 2*n",
         {"arg0": x}, {"0": np.concatenate([x, x]), "1": x.sum(axis=0)})

    bias, weight, inp = _normal(3), _normal(3, 4), _normal(2, 4)
    case("torch_linear", "torch_linear.mlir", "torch_linear.yaml", "torch-xla style, tuple result",
         {"bias": bias, "weight": weight, "input": inp},
         {"output": (inp.astype(np.float64) @ weight.T.astype(np.float64) + bias).astype(np.float32)})

    i, j = RNG.integers(-2**40, 2**40, (2, 3)), RNG.integers(-2**40, 2**40, (2, 3))
    case("int_compare", "int_compare.mlir", None, "hand-written, int64 and bool",
         {"arg0": i, "arg1": j}, {"0": i + j, "1": i > j})

    x, w, bb = _normal(2, 3), _normal(3, 4), _normal(4)
    y = np.tanh(x.astype(np.float64) @ w + bb).astype(np.float32)
    for suffix in ("mlir", "mlirbc"):
        case(f"jax_jit_mlp_{suffix}", f"jax_jit_mlp.{suffix}", None, f"jax.jit(...).lower() ({suffix})",
             {"arg0": x, "arg1": w, "arg2": bb}, {"0": y, "1": np.float32(y.astype(np.float64).sum())})

    x = _normal(6, 5)
    case("jax_export_poly", "jax_export_poly.mlirbc", "jax_export_poly.yaml",
         "jax.export portable artifact, symbolic batch, shape assertions",
         {"arg0": x}, {"output": np.sin(x) * 2 + x.mean(axis=1, keepdims=True)})

    x = _normal(3)
    case("jax_export_multiplatform", "jax_export_multiplatform.mlirbc", "jax_export_multiplatform.yaml",
         "jax.export for cpu and tpu: main takes the platform index", {"arg0": x}, {"output": x * 3 + 1})

    x, y2 = _normal(2, 2), _normal(2, 2)
    case("jax_stablehlo_oldest", "jax_stablehlo_oldest.mlirbc", None,
         "portable artifact for the oldest StableHLO version this JAX writes", {"arg0": x, "arg1": y2},
         {"output": np.maximum(x, y2) * x - y2})

    x = _normal(2, 3)
    case("mhlo_tanh", "mhlo_tanh.mlir", None, "MHLO dialect, as JAX wrote before StableHLO", {"arg0": x},
         {"output": np.tanh(x * np.float32(0.5))})
    return cases


def main() -> None:
    _jax_modules()
    cases = _cases()
    (HERE / "cases.json").write_text(json.dumps(cases, indent=2) + "\n")
    print(f"wrote {len(cases)} cases to {HERE}")


if __name__ == "__main__":
    main()
