"""Write raw ``jax.export`` golden serializations with the JAX that runs this script.

    python make_goldens.py OUTDIR

writes OUTDIR/<jax.__version__>/ with, per case:

* ``<case>.jaxexport``: the bytes of ``exported.serialize()`` (``serialize(vjp_order=1)`` for ``vjp``);
* ``<case>.npz``: inputs and the producer's outputs at two sizes of the symbolic dimensions, keys
  ``s<i>_in_<k>`` / ``s<i>_out_<k>`` (``s<i>_vjp_<k>`` for the VJP), i in {0, 1}, k the flat leaf index in
  ``jax.tree_util.tree_leaves`` order of ``(args, kwargs)`` resp. of the outputs. bfloat16 arrays are stored as
  their uint16 bit patterns under the key with ``_bf16bits`` appended (numpy cannot save bfloat16);

and one ``cases.json`` describing every case (or why it was skipped). The outputs are those of the original
function run directly with ``jax.jit`` (not through the serialization); ``cases.json`` records whether
``export.deserialize(blob).call`` on the producer gave bit-identical results.

Meant to run under old JAX releases (0.4.35 ... 0.8.3): it uses the public ``jax.export`` API only (plus
``jax._src.export.serialization._SERIALIZATION_VERSION``, read if present, for the record). The ``sharded2``
case runs in a child process with ``XLA_FLAGS=--xla_force_host_platform_device_count=2``. Source file names in
the MLIR debug locations are reduced to their base name (``jax_hlo_source_file_canonicalization_regex``), so no
absolute path is written. See README.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax import export, lax

F32 = np.float32
SHARDED_CHILD_FLAG = "--xla_force_host_platform_device_count=2"

# MLIR debug locations in the blobs name the source file of each traced frame. Strip every directory from those
# names (".*/" -> "make_goldens.py") so that no path of the generating machine lands in the output and the bytes
# do not depend on where the checkout lives. Module level, so the --child process gets it too (its environment
# also carries it, see _run_in_child).
SOURCE_FILE_CANONICALIZATION_REGEX = r".*/"
jax.config.update("jax_hlo_source_file_canonicalization_regex", SOURCE_FILE_CANONICALIZATION_REGEX)


# ----------------------------------------------------------------------------------------------------------- cases
# Each case: description, fun (a jax.jit), args/kwargs specs, platforms, two dims dicts (s0, s1), an input maker
# make(rng, dims) -> (args, kwargs), and optional extras (vjp_order, devices, notes).

def _mlp_params():
    rng = np.random.RandomState(0)
    w1 = (rng.standard_normal((8, 6)) * 0.5).astype(F32)
    b1 = (rng.standard_normal((6,)) * 0.1).astype(F32)
    w2 = (rng.standard_normal((6, 4)) * 0.5).astype(F32)
    b2 = (rng.standard_normal((4,)) * 0.1).astype(F32)
    return w1, b1, w2, b2


def _mlp(x):
    w1, b1, w2, b2 = _mlp_params()
    h = jnp.tanh(x @ w1 + b1)
    return jnp.tanh(h @ w2 + b2)


def _normal(rng, shape):
    return rng.standard_normal(shape).astype(F32)


def case_mlp():
    return dict(
        description="MLP f(x): two dense layers (8->6->4) with weights baked in as constants "
                    "(numpy RandomState(0)), tanh after each; x f32[b, 8], symbolic b.",
        fun=jax.jit(_mlp),
        args=(jax.ShapeDtypeStruct(export.symbolic_shape("b, 8"), F32),), kwargs={},
        platforms=["cpu"], sizes=[{"b": 3}, {"b": 5}],
        make=lambda rng, d: ((_normal(rng, (d["b"], 8)),), {}))


def case_multiplatform():
    c = case_mlp()
    c.update(description="The mlp case exported with platforms=['cpu', 'cuda'] (lowered for both on a CPU "
                         "machine); the module takes a leading platform-index argument.",
             platforms=["cpu", "cuda"])
    return c


def _scan(xs):
    def step(carry, x):
        carry = carry + x
        return carry, carry
    return lax.scan(step, jnp.zeros((4,), xs.dtype), xs)


def case_scan():
    return dict(
        description="lax.scan cumulative sum over xs f32[n, 4] with a f32[4] carry starting at zeros; "
                    "returns (final carry f32[4], ys f32[n, 4]); symbolic n.",
        fun=jax.jit(_scan),
        args=(jax.ShapeDtypeStruct(export.symbolic_shape("n, 4"), F32),), kwargs={},
        platforms=["cpu"], sizes=[{"n": 3}, {"n": 6}],
        make=lambda rng, d: ((_normal(rng, (d["n"], 4)),), {}))


def _dict_io(d, *, scale):
    return {"sum": (d["a"] + d["b"]) * scale, "prod": d["a"] * d["b"] * scale}


def case_dict_io():
    shape = export.symbolic_shape("b, 3")
    spec = jax.ShapeDtypeStruct(shape, F32)
    return dict(
        description="Pytree I/O: f(d, *, scale) with d = {'a': f32[b, 3], 'b': f32[b, 3]} and keyword-only "
                    "scale f32[], returns {'sum': (a + b) * scale, 'prod': a * b * scale}; symbolic b. "
                    "Exported as export(jax.jit(f))(d_spec, scale=scale_spec).",
        fun=jax.jit(_dict_io),
        args=({"a": spec, "b": spec},), kwargs={"scale": jax.ShapeDtypeStruct((), F32)},
        platforms=["cpu"], sizes=[{"b": 2}, {"b": 4}],
        make=lambda rng, d: (({"a": _normal(rng, (d["b"], 3)), "b": _normal(rng, (d["b"], 3))},),
                             {"scale": np.asarray(rng.uniform(0.5, 2.0), F32)}))


def _gather(table, idx):
    return table[idx]


def case_gather():
    return dict(
        description="int32 gather f(table f32[10, 4], idx int32[k]) = table[idx] (in-range indices); symbolic k.",
        fun=jax.jit(_gather),
        args=(jax.ShapeDtypeStruct((10, 4), F32),
              jax.ShapeDtypeStruct(export.symbolic_shape("k"), np.int32)), kwargs={},
        platforms=["cpu"], sizes=[{"k": 3}, {"k": 7}],
        make=lambda rng, d: ((_normal(rng, (10, 4)), rng.randint(0, 10, size=(d["k"],)).astype(np.int32)), {}))


def _bf16(x):
    y = x.astype(jnp.bfloat16) * 2
    return y.astype(jnp.float32), y


def case_bf16():
    return dict(
        description="bfloat16: f(x f32[b, 4]) = ((x.astype(bf16) * 2).astype(f32), x.astype(bf16) * 2); "
                    "symbolic b. The bf16 output is stored in the npz as uint16 bits (key suffix _bf16bits).",
        fun=jax.jit(_bf16),
        args=(jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), F32),), kwargs={},
        platforms=["cpu"], sizes=[{"b": 2}, {"b": 5}],
        make=lambda rng, d: ((_normal(rng, (d["b"], 4)),), {}))


def case_constrained():
    return dict(
        description="Symbolic shape with a constraint: x f32[b, 4] from symbolic_shape('b, 4', "
                    "constraints=['b >= 2']), f(x) = x * 3.",
        fun=jax.jit(lambda x: x * 3),
        args=(jax.ShapeDtypeStruct(export.symbolic_shape("b, 4", constraints=["b >= 2"]), F32),), kwargs={},
        platforms=["cpu"], sizes=[{"b": 2}, {"b": 6}],
        make=lambda rng, d: ((_normal(rng, (d["b"], 4)),), {}),
        extra={"constraints": ["b >= 2"]})


def case_vjp():
    return dict(
        description="f(x) = sin(x) * x, x f32[b, 3], symbolic b, serialized with serialize(vjp_order=1); the npz "
                    "also holds the VJP for a cotangent of ones (s<i>_vjp_<k>, k over the primal inputs).",
        fun=jax.jit(lambda x: jnp.sin(x) * x),
        args=(jax.ShapeDtypeStruct(export.symbolic_shape("b, 3"), F32),), kwargs={},
        platforms=["cpu"], sizes=[{"b": 2}, {"b": 4}],
        make=lambda rng, d: ((_normal(rng, (d["b"], 3)),), {}),
        vjp_order=1)


def _chlo(x):
    return (jax.scipy.special.erf(x), jnp.arcsinh(x), jnp.arccos(x * 0.25), jnp.sinh(x),
            jax.lax.top_k(x, 2)[0])


def case_chlo():
    return dict(
        description="CHLO operations that older StableHLO writes as mhlo.* custom calls (erf and top_k in every "
                    "version, asinh, acos and sinh from jax 0.8): f(x f32[b, 6]) = (erf(x), asinh(x), "
                    "acos(x / 4), sinh(x), top_k(x, 2) values); symbolic b.",
        fun=jax.jit(_chlo),
        args=(jax.ShapeDtypeStruct(export.symbolic_shape("b, 6"), F32),), kwargs={},
        platforms=["cpu"], sizes=[{"b": 2}, {"b": 3}],
        make=lambda rng, d: ((_normal(rng, (d["b"], 6)),), {}))


def _linalg(a, b):
    spd = a @ a.T + 4 * jnp.eye(4, dtype=a.dtype)
    return jnp.linalg.cholesky(spd), jnp.linalg.solve(spd, b)


def case_linalg():
    return dict(
        description="LAPACK through jnp.linalg: f(a f32[4, 4], b f32[4, k]) = (cholesky(a a^T + 4 I), "
                    "solve(a a^T + 4 I, b)); symbolic k. jax 0.4.35 calls the legacy kernels (lapack_spotrf, "
                    "blas_strsm), later releases their FFI forms.",
        fun=jax.jit(_linalg),
        args=(jax.ShapeDtypeStruct((4, 4), F32), jax.ShapeDtypeStruct(export.symbolic_shape("4, k"), F32)),
        kwargs={},
        platforms=["cpu"], sizes=[{"k": 2}, {"k": 3}],
        make=lambda rng, d: ((_normal(rng, (4, 4)), _normal(rng, (4, d["k"]))), {}))


def _sharding():
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
    return NamedSharding(mesh, P("x", None))


def case_sharded2():
    s = _sharding()
    return dict(
        description="jit with in_shardings/out_shardings NamedSharding(Mesh(2 CPU devices, ('x',)), "
                    "P('x', None)) of f(x f32[4, 4]) = x * 2; static shapes (s0 and s1 differ in values only). "
                    "Produced with XLA_FLAGS=--xla_force_host_platform_device_count=2.",
        fun=jax.jit(lambda x: x * 2, in_shardings=(s,), out_shardings=s),
        args=(jax.ShapeDtypeStruct((4, 4), F32),), kwargs={},
        platforms=["cpu"], sizes=[{}, {}],
        make=lambda rng, d: ((_normal(rng, (4, 4)),), {}),
        place=lambda x: jax.device_put(x, s),
        extra={"mesh": {"axis_names": ["x"], "shape": [2]}, "in_partition_specs": [["x", None]],
               "out_partition_specs": [["x", None]]})


CASES = {
    "mlp": case_mlp,
    "scan": case_scan,
    "dict_io": case_dict_io,
    "gather": case_gather,
    "bf16": case_bf16,
    "multiplatform": case_multiplatform,
    "constrained": case_constrained,
    "vjp": case_vjp,
    "chlo": case_chlo,
    "linalg": case_linalg,
    "sharded2": case_sharded2,
}


# ---------------------------------------------------------------------------------------------------------- driver

def _store(arrays: dict, key: str, value) -> list:
    """Put VALUE into ARRAYS under KEY (bfloat16: its uint16 bits under KEY_bf16bits); [npz key, dtype, shape]."""
    a = np.asarray(value)
    if a.dtype.name == "bfloat16":
        key += "_bf16bits"
        arrays[key] = a.view(np.uint16)
    else:
        arrays[key] = a
    return [key, a.dtype.name, list(a.shape)]


def _bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _max_abs_diff(a, b) -> float:
    a, b = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def _avals(avals):
    return [{"shape": str(a.shape), "dtype": a.dtype.name} for a in avals]


def _legacy_attr(exp, name: str):
    with warnings.catch_warnings():  # 0.4.35: "mlir_module_serialization_version is deprecated"
        warnings.simplefilter("ignore")
        return getattr(exp, name, None)


def _blob_serialization_version(blob: bytes):
    """The SerializationVersion field written into the flatbuffer (not always _SERIALIZATION_VERSION)."""
    try:
        from jax._src.export import serialization_generated as fb
        return fb.Exported.GetRootAsExported(bytearray(blob), 0).SerializationVersion()
    except Exception:
        return None


def run_case(name: str, outdir: Path) -> dict:
    spec = CASES[name]()
    fun = spec["fun"]
    vjp_order = spec.get("vjp_order", 0)
    exp = export.export(fun, platforms=spec["platforms"])(*spec["args"], **spec["kwargs"])
    blob = bytes(exp.serialize(vjp_order=vjp_order))
    (outdir / f"{name}.jaxexport").write_bytes(blob)
    back = export.deserialize(bytearray(blob))
    place = spec.get("place", lambda x: x)

    arrays: dict = {}
    sizes = []
    seed = zlib.crc32(name.encode())
    for si, dims in enumerate(spec["sizes"]):
        rng = np.random.RandomState((seed + si) % (2**31))
        args, kwargs = spec["make"](rng, dims)
        in_leaves = jax.tree_util.tree_leaves((args, kwargs))
        want = jax.tree_util.tree_leaves(fun(*args, **kwargs))
        placed_args = jax.tree_util.tree_map(place, args)
        got = jax.tree_util.tree_leaves(back.call(*placed_args, **kwargs))
        entry = {"in": [], "out": []}
        for k, leaf in enumerate(in_leaves):
            entry["in"].append(_store(arrays, f"s{si}_in_{k}", leaf))
        for k, leaf in enumerate(want):
            entry["out"].append(_store(arrays, f"s{si}_out_{k}", leaf))
        entry["deserialized_call_bit_identical"] = all(_bits_equal(w, g) for w, g in zip(want, got))
        entry["deserialized_call_max_abs_diff"] = max(_max_abs_diff(w, g) for w, g in zip(want, got))
        if vjp_order:
            primal, pullback = jax.vjp(fun, *args)
            cts = pullback(jax.tree_util.tree_map(jnp.ones_like, primal))
            cts_back = jax.vjp(back.call, *args)[1](jax.tree_util.tree_map(jnp.ones_like, primal))
            cts, cts_back = jax.tree_util.tree_leaves(cts), jax.tree_util.tree_leaves(cts_back)
            entry["vjp"] = [_store(arrays, f"s{si}_vjp_{k}", c) for k, c in enumerate(cts)]
            entry["vjp_cotangent"] = "ones_like(outputs)"
            entry["deserialized_vjp_bit_identical"] = all(_bits_equal(w, g) for w, g in zip(cts, cts_back))
            entry["deserialized_vjp_max_abs_diff"] = max(_max_abs_diff(w, g) for w, g in zip(cts, cts_back))
        sizes.append(entry)
    np.savez_compressed(outdir / f"{name}.npz", **arrays)

    record = {
        "status": "ok",
        "description": spec["description"],
        "files": {"serialized": f"{name}.jaxexport", "arrays": f"{name}.npz"},
        "serialized_bytes": len(blob),
        "serialized_sha256": hashlib.sha256(blob).hexdigest(),
        "serialization_version_in_blob": _blob_serialization_version(blob),
        "vjp_order": vjp_order,
        "fun_name": exp.fun_name,
        "in_avals": _avals(exp.in_avals),
        "out_avals": _avals(exp.out_avals),
        "in_tree": str(exp.in_tree),
        "out_tree": str(exp.out_tree),
        "platforms": list(exp.platforms),
        "nr_devices": exp.nr_devices,
        "calling_convention_version": exp.calling_convention_version,
        "mlir_module_serialization_version": _legacy_attr(exp, "mlir_module_serialization_version"),
        "in_shardings_hlo": [None if s is None else str(s) for s in exp.in_shardings_hlo],
        "out_shardings_hlo": [None if s is None else str(s) for s in exp.out_shardings_hlo],
        "ordered_effects": [str(e) for e in exp.ordered_effects],
        "unordered_effects": [str(e) for e in exp.unordered_effects],
        "disabled_safety_checks": [str(c) for c in exp.disabled_safety_checks],
        "module_kept_var_idx": list(exp.module_kept_var_idx),
        "uses_global_constants": exp.uses_global_constants,
        "symbolic_dims": {"s0": spec["sizes"][0], "s1": spec["sizes"][1]},
        "sizes": sizes,
    }
    record.update(spec.get("extra", {}))
    return record


def _run_in_child(name: str, outdir: Path) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + SHARDED_CHILD_FLAG).strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_HLO_SOURCE_FILE_CANONICALIZATION_REGEX"] = SOURCE_FILE_CANONICALIZATION_REGEX
    res = subprocess.run([sys.executable, __file__, str(outdir), "--child", name], env=env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        return {"status": "skipped", "reason": f"child process failed (rc {res.returncode}): "
                                               f"{res.stderr.strip().splitlines()[-1:] or res.stdout[-500:]}"}
    return json.loads(res.stdout.strip().splitlines()[-1])


def _safe(name: str, outdir: Path) -> dict:
    try:
        return run_case(name, outdir)
    except Exception as e:  # record, do not fake: the case is skipped on this version
        for suffix in (".jaxexport", ".npz"):
            (outdir / f"{name}{suffix}").unlink(missing_ok=True)
        return {"status": "skipped", "reason": f"{type(e).__name__}: {e}".strip()[:2000]}


def _dump(meta: dict) -> str:
    """JSON with one line per top-level key and per case field (compact, but diffable)."""
    def one(v):
        return json.dumps(v, separators=(",", ":"))
    lines = []
    for key, value in meta.items():
        if key != "cases":
            lines.append(f" {one(key)}: {one(value)}")
    cases = []
    for name, rec in meta["cases"].items():
        fields = ",\n".join(f"   {one(k)}: {one(v)}" for k, v in rec.items())
        cases.append(f"  {one(name)}: {{\n{fields}\n  }}")
    lines.append(' "cases": {\n' + ",\n".join(cases) + "\n }")
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    assert json.loads(text) == json.loads(json.dumps(meta))
    return text


def _serialization_version():
    try:
        from jax._src.export import serialization
        return getattr(serialization, "_SERIALIZATION_VERSION", None)
    except Exception:
        return None


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--child":
        rec = _safe(argv[2], Path(argv[0]))
        print(json.dumps(rec))
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    outdir = Path(argv[0]) / jax.__version__
    outdir.mkdir(parents=True, exist_ok=True)
    cases = {}
    for name in CASES:
        if name == "sharded2" and jax.device_count() < 2:
            cases[name] = _run_in_child(name, outdir)
        else:
            cases[name] = _safe(name, outdir)
        print(f"{name}: {cases[name]['status']} {cases[name].get('reason', '')}", file=sys.stderr)
    meta = {
        "what": "raw jax.export serializations (Exported.serialize() bytes) with inputs and outputs",
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "serialization_version": _serialization_version(),
        "serialization_version_source": "jax._src.export.serialization._SERIALIZATION_VERSION",
        "minimum_supported_calling_convention_version": export.minimum_supported_calling_convention_version,
        "maximum_supported_calling_convention_version": export.maximum_supported_calling_convention_version,
        "default_export_platform": export.default_export_platform(),
        "npz_keys": "s<i>_in_<k>, s<i>_out_<k>, s<i>_vjp_<k>; i in {0, 1} (sizes s0, s1), k = flat leaf index "
                    "(jax.tree_util.tree_leaves order) of (args, kwargs) / outputs / input cotangents; "
                    "'_bf16bits' suffix: bfloat16 stored as uint16 bit patterns",
        "sizes_in_out": "sizes[i] (dims: symbolic_dims['s<i>']): [npz key, dtype, shape] of every input / output "
                        "/ VJP leaf; deserialized_*: export.deserialize(blob).call on the producer vs the stored "
                        "outputs",
        "outputs_source": "jax.jit(f) called directly on the inputs (not through the serialization)",
        "generated_by": "make_goldens.py OUTDIR",
        "cases": cases,
    }
    (outdir / "cases.json").write_text(_dump(meta))
    print(f"wrote {outdir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
