"""What a user writes to export without jaxport: import the model file, `jax.export`, serialize, write the bytes.

    python benchmarks/baseline_export.py {mlp,transformer} OUTPUT [--freeze]

With ``--freeze`` it skips the interpreter's garbage collection at exit (``gc.freeze()``, as ``jaxport``'s command
line freezes what JAX's import made; the user's module and the work are collected there): a lower floor.

The shapes are those of the case's jaxport spec (same dimension variables and bounds), so both contenders of
bench_export.py lower the same program.
"""

import importlib.util
import sys
from pathlib import Path

import jax
from jax import export

REPO = Path(__file__).resolve().parent.parent


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def mlp():
    fn = load(REPO / "examples" / "mlp" / "model.py", "predict")
    (batch,) = export.symbolic_shape("batch", constraints=["batch >= 1", "batch <= 4096"])
    return fn, (jax.ShapeDtypeStruct((batch, 784), "float32"),), {}


def transformer():
    fn = load(REPO / "benchmarks" / "models" / "transformer.py", "encode")
    batch, seq = export.symbolic_shape(
        "batch, seq", constraints=["batch >= 1", "batch <= 256", "seq >= 1", "seq <= 2048"])

    def f32(*shape):
        return jax.ShapeDtypeStruct(shape, "float32")

    def norm():
        return {"scale": f32(768), "bias": f32(768)}

    layer = {
        "ln1": norm(),
        "attn": {"qkv": f32(768, 2304), "qkv_bias": f32(2304), "out": f32(768, 768), "out_bias": f32(768)},
        "ln2": norm(),
        "mlp": {"up": f32(768, 3072), "up_bias": f32(3072), "down": f32(3072, 768), "down_bias": f32(768)},
    }
    params = {"layers": [layer] * 12, "ln_f": norm()}
    return fn, (f32(batch, seq, 768),), {"params": params}


def main() -> None:
    case, output = sys.argv[1], sys.argv[2]
    fn, args, kwargs = {"mlp": mlp, "transformer": transformer}[case]()
    exported = export.export(jax.jit(fn))(*args, **kwargs)
    Path(output).write_bytes(exported.serialize())
    if "--freeze" in sys.argv[3:]:
        import gc

        gc.freeze()


if __name__ == "__main__":
    main()
