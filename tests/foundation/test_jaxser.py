"""jaxport.program.jaxser: JAX's ``Exported`` serialization read without JAX.

Real serializations of the installed JAX are compared field by field with what ``jax.export.deserialize`` makes of
the same bytes; serializations written with JAX's own generated flatbuffer builders stand in for older writers'
layouts (per-argument avals and shardings, the 16-bit device count, HloSharding protos) and for hostile files, each
refused with its exact message. Golden serializations written by older JAX releases, when present under
``tests/golden/jaxexport/<version>/``, are read and compared with what that JAX printed (``cases.json``).

The suite runs under every supported JAX (0.9.1 to 0.12): what a real serialization stores and what JAX's reader
makes of a hand-built one are asserted as the running JAX writes and reads them (the release constants below), and
the builders of schema fields newer than the running JAX's generated code are written from their pinned slots
(``LATER_FIELDS``).
"""

from __future__ import annotations

import collections
import io
import itertools
import json
import os
import random
import re
import struct
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import flatbuffers
import flatbuffers.table
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax._src.export import serialization_generated as fb  # JAX's own writer of its schema

from jaxport.errors import FormatError
from jaxport.program import jaxser
from tests.support import REPO


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


WHERE = "f.jaxexport"
GOLDEN = REPO / "tests" / "golden" / "jaxexport"
MAGIC = b"ML\xefR"

#: The running JAX's release, and what it writes and reads by release (jaxser's module docstring).
JAX = _version(jax.__version__)
#: jax 0.10.0 and later write (and read first) the unique avals, meshes and named shardings, by index (schema
#: version 10), behind the per-argument tables that they keep writing for older readers.
UNIQUE_TABLES = JAX >= (0, 10, 0)
#: jax 0.11.1 and later refuse the 16-bit device count and HloSharding protos as older than their window.
REFUSES_EXPIRED = JAX >= (0, 11, 1)
NOT_READ_BEFORE_0_10 = "jax 0.9.x reads no unique avals or shardings (schema version 10, jax 0.10.0)"


def stored_version(writer: tuple[int, ...]) -> tuple[int, bool]:
    """The serialization_version that the JAX release WRITER stores, and whether it stores its jax_version: 2 up to
    jax 0.8.1, 3 up to 0.11.0, from 0.11.1 the schema version (12; 13 from 0.12.1) and the writer's version."""
    if writer < (0, 8, 2):
        return 2, False
    if writer < (0, 11, 1):
        return 3, False
    return (12 if writer < (0, 12, 1) else 13), True

Point = collections.namedtuple("Point", ["x", "y"])
POINT_NAME = "tests.foundation.test_jaxser.Point"
export.register_namedtuple_serialization(Point, serialized_name=POINT_NAME)
#: The custom pytree nodes of these tests, by serialized name (rebuilding a tree needs the Python type).
CUSTOM = {POINT_NAME: Point}


# -- comparing with jax.export.deserialize ---------------------------------------------------------------------------


def pytree(node: jaxser.TreeNode, leaves: Iterator[int]) -> Any:
    """A Python value with NODE's structure (the leaves numbered), for ``jax.tree_util.tree_structure``."""
    kids = [pytree(c, leaves) for c in node.children]
    if node.kind == "leaf":
        return next(leaves)
    if node.kind == "none":
        return None
    if node.kind == "tuple":
        return tuple(kids)
    if node.kind == "list":
        return kids
    if node.kind == "dict":
        return dict(zip(node.names, kids, strict=True))
    assert node.kind == "custom", node.kind
    cls = CUSTOM[node.custom_name]
    assert node.custom_auxdata is not None and json.loads(node.custom_auxdata) == list(cls._fields)
    return cls(*kids)


def treedef(node: jaxser.TreeNode) -> Any:
    return jax.tree_util.tree_structure(pytree(node, itertools.count()))


def jax_dtype(dtype: Any) -> str:
    return "float0" if dtype == jax.dtypes.float0 else dtype.name


def aval_of_jax(a: Any) -> tuple:
    return tuple(str(d) for d in a.shape), jax_dtype(a.dtype), a.memory_space.name.lower(), bool(a.weak_type)


def aval_of_record(a: jaxser.Aval) -> tuple:
    return a.shape, a.dtype, a.memory_space or "device", a.weak_type  # JAX reads a missing memory space as device


def sharding_of_jax(s: Any) -> tuple | None:
    if s is None:
        return None
    m = s.mesh
    spec = tuple(None if p is None else (p,) if isinstance(p, str) else tuple(p) for p in s.spec)
    return ("named", tuple(m.axis_names), tuple(m.axis_sizes), tuple(t.name.lower() for t in m.axis_types), spec,
            frozenset(s.spec.unreduced), frozenset(s.spec.reduced), s.memory_kind)


def sharding_of_record(s: jaxser.Sharding | None) -> tuple | None:
    if s is None:
        return None
    assert s.kind == "named" and s.hlo_proto is None and s.mesh is not None
    return ("named", s.mesh.axis_names, s.mesh.axis_sizes, s.mesh.axis_types, s.spec, frozenset(s.unreduced),
            frozenset(s.reduced), s.memory_kind)


def check_of_jax(c: Any) -> tuple[str, str | None]:
    if c.is_custom_call() is not None:
        return "custom_call", c.is_custom_call()
    assert c == export.DisabledSafetyCheck.platform(), c
    return "platform", None


def assert_same(rec: jaxser.Serialized, exp: Any, vjp_order: int) -> None:
    """Every field of REC is what JAX's reader made of the same bytes (EXP), down VJP_ORDER levels of VJPs."""
    assert rec.function_name == exp.fun_name
    for side in ("in", "out"):
        avals, tree = getattr(exp, f"{side}_avals"), getattr(exp, f"{side}_tree")
        assert [aval_of_record(a) for a in getattr(rec, f"{side}_avals")] == [aval_of_jax(a) for a in avals]
        assert getattr(rec, f"{side}_tree").num_leaves() == tree.num_leaves == len(avals)
        assert str(treedef(getattr(rec, f"{side}_tree"))) == str(tree)
        assert ([sharding_of_record(s) for s in getattr(rec, f"{side}_shardings")]
                == [sharding_of_jax(s) for s in getattr(exp, f"_{side}_named_shardings")])
    assert rec.nr_devices == exp.nr_devices and not rec.short_device_count
    assert rec.platforms == exp.platforms
    assert rec.ordered_effects == tuple(str(type(e)) for e in exp.ordered_effects)
    assert rec.unordered_effects == tuple(str(type(e)) for e in exp.unordered_effects)
    assert [(c.kind, c.target) for c in rec.disabled_checks] == [check_of_jax(c) for c in exp.disabled_safety_checks]
    assert rec.module == exp.mlir_module_serialized and rec.module[:4] == MAGIC
    assert rec.calling_convention == exp.calling_convention_version
    assert rec.kept_var_idx == exp.module_kept_var_idx
    assert rec.uses_global_constants == exp.uses_global_constants
    version, with_jax_version = stored_version(JAX)
    assert (rec.serialization_version, rec.jax_version) == (version, jax.__version__ if with_jax_version else None)
    assert rec.vjp_order() == vjp_order
    if vjp_order:
        assert rec.vjp is not None
        assert_same(rec.vjp, exp.vjp(), vjp_order - 1)


# -- real serializations of the installed JAX -----------------------------------------------------------------------


def _poly():
    x = jax.ShapeDtypeStruct(export.symbolic_shape("b, 2*b + 1"), jnp.float32)
    return jax.jit(lambda x: (jnp.concatenate([x, x]), x.reshape(-1), x[:, ::2])), (x,), {}, {}


def _pytree():
    b = export.symbolic_shape("b")[0]
    f32 = jax.ShapeDtypeStruct((b, 3), jnp.float32)

    def f(p, d, xs, *, mask, none=None):
        return {"s": p.x + p.y, "t": [d["a"] * 2, None]}, (xs[0] * mask,), Point(mask, d["a"])

    args = (Point(f32, f32), {"a": f32}, [f32, jax.ShapeDtypeStruct((), jnp.int32)])
    return jax.jit(f), args, {"mask": f32, "none": None}, {}


def _dtypes():
    types = [jnp.bfloat16, jnp.int4, jnp.uint4, jnp.bool_, jax.dtypes.float0, jnp.float8_e4m3fn, jnp.float8_e5m2,
             jnp.complex64, jnp.int8, jnp.uint32, jnp.float16, jnp.float4_e2m1fn]
    return jax.jit(lambda *xs: xs), tuple(jax.ShapeDtypeStruct((2, 3), t) for t in types), {}, {}


def _keys():
    key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)
    return jax.jit(lambda k: jax.random.split(k)), (key,), {}, {}


def _multiplatform():
    x = jax.ShapeDtypeStruct(export.symbolic_shape("n, 4"), jnp.float32)
    return jax.jit(jnp.tanh), (x,), {}, {"platforms": ["cpu", "cuda", "tpu"]}


def _checks():
    checks = [export.DisabledSafetyCheck.custom_call("x"), export.DisabledSafetyCheck.platform()]
    return jax.jit(lambda x: x * 2), (jax.ShapeDtypeStruct((3,), jnp.float32),), {}, {"disabled_checks": checks}


def _no_args():
    return jax.jit(lambda: jnp.arange(3.0)), (), {}, {}


def _unused_arg():
    return jax.jit(lambda x, y: y + 1), (jax.ShapeDtypeStruct((2,), jnp.float32),) * 2, {}, {}


CASES: dict[str, Callable[[], tuple]] = {"poly": _poly, "pytree": _pytree, "dtypes": _dtypes, "keys": _keys,
                                          "multiplatform": _multiplatform, "checks": _checks, "no_args": _no_args,
                                          "unused_arg": _unused_arg}


def exported(case: str) -> Any:
    fun, args, kwargs, options = CASES[case]()
    return export.export(fun, platforms=options.get("platforms", ["cpu"]),
                         disabled_checks=options.get("disabled_checks", ()))(*args, **kwargs)


@pytest.fixture(scope="module")
def mlp_blob() -> bytes:
    """A real serialization, to damage."""
    x = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), jnp.float32)
    return bytes(export.export(jax.jit(lambda x: jnp.tanh(x) @ jnp.ones((4, 2))))(x).serialize())


@pytest.mark.parametrize("case", sorted(CASES))
def test_reads_what_jax_reads(case):
    blob = bytes(exported(case).serialize())
    assert_same(jaxser.read(blob, WHERE), export.deserialize(bytearray(blob)), 0)


def test_the_cases_cover_what_they_are_for():
    """The cases above store what their names promise (so that test_reads_what_jax_reads compares it)."""
    poly = jaxser.read(bytes(exported("poly").serialize()), WHERE)
    assert [a.shape for a in poly.in_avals + poly.out_avals] == [
        ("b", "2*b + 1"), ("2*b", "2*b + 1"), ("2*b^2 + b",), ("b", "b + 1")]
    tree = jaxser.read(bytes(exported("pytree").serialize()), WHERE).in_tree
    point, d, xs = tree.children[0].children
    assert (point.kind, point.custom_name, point.custom_auxdata) == ("custom", POINT_NAME, b'["x", "y"]')
    assert (d.kind, d.names, xs.kind) == ("dict", ("a",), "list")
    assert tree.children[1].names == ("mask", "none") and tree.children[1].children[1].kind == "none"
    dtypes = jaxser.read(bytes(exported("dtypes").serialize()), WHERE)
    assert [a.dtype for a in dtypes.in_avals] == ["bfloat16", "int4", "uint4", "bool", "float0", "float8_e4m3fn",
                                                  "float8_e5m2", "complex64", "int8", "uint32", "float16",
                                                  "float4_e2m1fn"]
    assert jaxser.read(bytes(exported("keys").serialize()), WHERE).out_avals[0].dtype == "key<fry>"
    checks = jaxser.read(bytes(exported("checks").serialize()), WHERE).disabled_checks
    assert checks == (jaxser.DisabledCheck("custom_call", "x"), jaxser.DisabledCheck("platform", None))
    assert jaxser.read(bytes(exported("unused_arg").serialize()), WHERE).kept_var_idx == (1,)


@pytest.mark.parametrize("order", [1, 2])
def test_reads_the_vjps(order):
    x = jax.ShapeDtypeStruct(export.symbolic_shape("b, 3"), jnp.float32)
    blob = bytes(export.export(jax.jit(lambda x, y: jnp.sin(x) * y))(x, x).serialize(vjp_order=order))
    rec = jaxser.read(blob, WHERE)
    assert_same(rec, export.deserialize(bytearray(blob)), order)
    assert rec.vjp is not None and len(rec.vjp.in_avals) == 3  # the 2 primal inputs, the cotangent


SHARDED = textwrap.dedent("""\
    import sys
    import jax, jax.numpy as jnp, numpy as np
    from jax import export
    from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:2]).reshape(2, 1), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))
    rows, both = NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P(("x", "y")))
    f = jax.jit(lambda a, b: (a * 2, b + 1, a.sum()), in_shardings=(rows, both), out_shardings=(rows, both, None))
    exp = export.export(f, platforms=["cpu"])(jax.ShapeDtypeStruct((4, 4), jnp.float32),
                                              jax.ShapeDtypeStruct((6,), jnp.float32))
    assert exp.nr_devices == 2
    open(sys.argv[1], "wb").write(exp.serialize())
""")


@pytest.mark.slow
def test_reads_a_two_device_sharded_export(tmp_path):
    path = tmp_path / "sharded.jaxexport"
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", SHARDED, str(path)], env=env, check=True, timeout=300)
    blob = path.read_bytes()
    rec = jaxser.read(blob, WHERE)
    assert_same(rec, export.deserialize(bytearray(blob)), 0)
    mesh = jaxser.Mesh(("x", "y"), (2, 1), ("auto", "auto"))
    assert rec.nr_devices == 2 and rec.in_shardings == (
        jaxser.Sharding("named", None, mesh, (("x",), None), (), (), "device"),
        jaxser.Sharding("named", None, mesh, (("x", "y"),), (), (), "device"))
    assert rec.out_shardings[2] is None


def test_reading_imports_neither_jax_nor_numpy_nor_flatbuffers(mlp_blob, tmp_path):
    path = tmp_path / "f.jaxexport"
    path.write_bytes(mlp_blob)
    code = ("import sys; from jaxport.program import jaxser; "
            "r = jaxser.read(open(sys.argv[1], 'rb').read(), 'f'); assert jaxser.looks_like_serialization(r.module)"
            " is False; print(sorted(m for m in ('jax', 'numpy', 'flatbuffers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         cwd=REPO)
    assert out.stdout.strip() == "[]"


# -- serializations written with JAX's generated builders: older layouts, and what JAX never writes --------------


def camel(name: str) -> str:
    return "".join(p.title() for p in name.split("_"))


Build = Callable[[flatbuffers.Builder], Any]

#: The fields of JAX's schema that the generated builders of jax 0.9.1 (schema version 6) lack, by table: each
#: field's vtable slot and the flatbuffers.Builder method that writes it, as serialization_generated writes it from
#: jax 0.10.0 (jax_version: 0.11.1). ``table`` writes them so where the running JAX has no builder for them;
#: test_the_later_fields_are_written_as_jax_writes_them compares them with the running JAX's builders where it has
#: them.
LATER_FIELDS: dict[str, dict[str, tuple[int, str]]] = {
    "Exported": {name: (slot, "PrependUOffsetTRelativeSlot") for slot, name in enumerate(
        "unique_avals unique_abstract_meshes unique_named_shardings in_avals_idxs out_avals_idxs in_shardings_idxs "
        "out_shardings_idxs jax_version".split(), start=19)},
    "NamedSharding": {"abstract_mesh_idx": (3, "PrependUint32Slot")},
}


def has_builder(type_name: str, name: str) -> bool:
    """Whether the running JAX's generated code writes field NAME of table TYPE_NAME."""
    return hasattr(fb, f"{type_name}Add{camel(name)}")


def table(b: flatbuffers.Builder, type_name: str, /, **fields: Any) -> int:
    """A table of JAX's schema (``Exported``, ``PyTreeDef``, ...) with FIELDS, each a number or an already written
    offset: with JAX's generated builders, those of the LATER_FIELDS the running JAX lacks from their pinned
    slots."""
    later = [name for name in fields if not has_builder(type_name, name)]
    if later:  # the later fields' slots follow the older ones: a vtable this long holds both
        b.StartObject(1 + max(LATER_FIELDS[type_name][name][0] for name in later))
    else:
        getattr(fb, f"{type_name}Start")(b)
    for name, value in fields.items():
        if name in later:
            slot, prepend = LATER_FIELDS[type_name][name]
            getattr(b, prepend)(slot, value, 0)
        else:
            getattr(fb, f"{type_name}Add{camel(name)}")(b, value)
    return b.EndObject()  # what every generated ...End does


@pytest.mark.skipif(not any(has_builder(t, n) for t, names in LATER_FIELDS.items() for n in names),
                    reason=f"jax {jax.__version__}'s generated builders have none of the later fields")
@pytest.mark.parametrize(("type_name", "name"), [(t, n) for t, names in LATER_FIELDS.items() for n in names])
def test_the_later_fields_are_written_as_jax_writes_them(type_name, name):
    if not has_builder(type_name, name):
        pytest.skip(f"jax {jax.__version__}'s generated builders lack {type_name}.{name}")
    written = []
    for pinned in (False, True):
        b = flatbuffers.Builder(64)
        value = 7 if LATER_FIELDS[type_name][name][1] == "PrependUint32Slot" else b.CreateString("v")
        if pinned:
            slot, prepend = LATER_FIELDS[type_name][name]
            b.StartObject(slot + 1)
            getattr(b, prepend)(slot, value, 0)
            at = b.EndObject()
        else:
            at = table(b, type_name, **{name: value})
        b.Finish(at)
        written.append(bytes(b.Output()))
    assert written[0] == written[1]


def offsets(b: flatbuffers.Builder, items: list[int]) -> int:
    b.StartVector(4, len(items), 4)
    for item in reversed(items):
        b.PrependUOffsetTRelative(item)
    return b.EndVector()


def strings(b: flatbuffers.Builder, items: list[str | bytes]) -> int:
    return offsets(b, [b.CreateString(s) for s in items])


def numbers(b: flatbuffers.Builder, items: list[int], dtype: Any = np.uint32) -> int:
    return b.CreateNumpyVector(np.array(items, dtype=dtype))


def aval(b: flatbuffers.Builder, shape: list[str], dtype: int = fb.DType.f32, **fields: Any) -> int:
    return table(b, "AbstractValue", shape=strings(b, shape), dtype=dtype, **fields)


def node(b: flatbuffers.Builder, kind: int = fb.PyTreeDefKind.leaf, children: list[int] | None = None,
         names: list[str] | None = None) -> int:
    fields: dict[str, Any] = {"kind": kind}
    if children is not None:
        fields["children"] = offsets(b, children)
    if names is not None:
        fields["children_names"] = strings(b, names)
    return table(b, "PyTreeDef", **fields)


def exported_table(b: flatbuffers.Builder, **overrides: Build | None) -> int:
    """An Exported table of one f32[3] input and output (unique avals and shardings, as JAX 0.12 writes them), with
    OVERRIDES: a field's builder (b -> value), or None to leave the field out."""
    parts: dict[str, Build | None] = {
        "serialization_version": lambda b: 12,
        "function_name": lambda b: b.CreateString("f"),
        "in_tree": lambda b: node(b),
        "out_tree": lambda b: node(b),
        "unique_avals": lambda b: offsets(b, [aval(b, ["3"])]),
        "in_avals_idxs": lambda b: numbers(b, [0]),
        "out_avals_idxs": lambda b: numbers(b, [0]),
        "in_shardings_idxs": lambda b: numbers(b, [0]),
        "out_shardings_idxs": lambda b: numbers(b, [0]),
        "nr_devices": lambda b: 1,
        "platforms": lambda b: strings(b, ["cpu"]),
        "mlir_module_serialized": lambda b: b.CreateByteVector(MAGIC + bytes(12)),
        "calling_convention_version": lambda b: 10,
        "module_kept_var_idx": lambda b: numbers(b, [0], np.uint16),
        "jax_version": lambda b: b.CreateString("0.12.0.1"),
        **overrides}
    values = {name: build(b) for name, build in parts.items() if build is not None}  # children before the table
    return table(b, "Exported", **values)


def blob(**overrides: Build | None) -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(exported_table(b, **overrides))
    return bytes(b.Output())


#: The per-argument avals and shardings of blob()'s input and output, which writers from jax 0.10.0 keep next to the
#: unique tables for older readers.
PER_ARGUMENT: dict[str, Build] = {
    "in_avals": lambda b: offsets(b, [aval(b, ["3"])]), "out_avals": lambda b: offsets(b, [aval(b, ["3"])]),
    "in_shardings": lambda b: offsets(b, [table(b, "Sharding")]),
    "out_shardings": lambda b: offsets(b, [table(b, "Sharding")])}


@pytest.mark.parametrize("layout", [
    pytest.param("unique", marks=pytest.mark.skipif(not UNIQUE_TABLES, reason=NOT_READ_BEFORE_0_10)), "both"])
def test_the_builder_writes_what_jax_reads(layout):
    """The hand-built serialization these tests vary is one JAX reads, and so does jaxser: as they are (the unique
    tables only), and with the per-argument tables that every JAX reads (jax 0.9.x only those)."""
    data = blob() if layout == "unique" else blob(**PER_ARGUMENT)
    exp = export.deserialize(bytearray(data))
    rec = jaxser.read(data, WHERE)
    assert rec == jaxser.read(blob(), WHERE)
    assert [aval_of_record(a) for a in rec.in_avals] == [aval_of_jax(a) for a in exp.in_avals] == [
        (("3",), "float32", "device", False)]
    assert rec.in_shardings == (None,) and exp._in_named_shardings == (None,)
    assert (rec.function_name, rec.nr_devices, rec.platforms, rec.kept_var_idx) == ("f", 1, ("cpu",), (0,))


def old_layout(**overrides: Build | None) -> bytes:
    """A serialization as JAX up to 0.8.1 wrote it (schema versions 2 to 4): stored version 2, per-argument avals
    without a memory space and per-argument Sharding tables, the device count in the 16-bit field only."""
    parts: dict[str, Build | None] = {
        "serialization_version": lambda b: 2, "jax_version": None, "nr_devices": None,
        "nr_devices_short": lambda b: 2,
        "unique_avals": None, "in_avals_idxs": None, "out_avals_idxs": None, "in_shardings_idxs": None,
        "out_shardings_idxs": None,
        "in_tree": lambda b: node(b, fb.PyTreeDefKind.tuple, [node(b), node(b, fb.PyTreeDefKind.none)]),
        "in_avals": lambda b: offsets(b, [aval(b, ["b", "2*b"], fb.DType.bf16)]),
        "out_avals": lambda b: offsets(b, [aval(b, [], fb.DType.i32)]),
        "in_shardings": lambda b: offsets(b, [table(b, "Sharding", kind=fb.ShardingKind.unspecified)]),
        "out_shardings": lambda b: offsets(b, [table(b, "Sharding", kind=fb.ShardingKind.unspecified)]),
        **overrides}
    return blob(**parts)


def test_reads_the_old_per_argument_layout_as_jax_does():
    data = old_layout()
    rec = jaxser.read(data, WHERE)
    assert (rec.serialization_version, rec.jax_version, rec.nr_devices, rec.short_device_count) == (2, None, 2, True)
    assert rec.in_avals == (jaxser.Aval(("b", "2*b"), "bfloat16", None),)
    assert rec.out_avals == (jaxser.Aval((), "int32", None),) and rec.in_shardings == rec.out_shardings == (None,)
    if REFUSES_EXPIRED:
        with pytest.raises(ValueError, match=re.escape("older than the 6-month backward-compatibility window")):
            export.deserialize(bytearray(data))  # with its escape hatch, this JAX reads what jaxser reads
        jax.config.update("jax_export_deserialize_expired_versions", True)
        try:
            with pytest.warns(DeprecationWarning, match="serialization version 2"):
                exp = export.deserialize(bytearray(data))
        finally:
            jax.config.update("jax_export_deserialize_expired_versions", False)
    else:  # jax <= 0.11.0 read the 16-bit device count as it is
        exp = export.deserialize(bytearray(data))
    assert exp.nr_devices == 2 and [aval_of_jax(a) for a in exp.in_avals] == [(("b", "2*b"), "bfloat16", "device",
                                                                                        False)]
    assert str(treedef(rec.in_tree)) == str(exp.in_tree) == "PyTreeDef((*, None))"


def test_an_hlo_sharding_is_read_as_its_proto():
    proto = b"\x08\x03\x1a\x02\x02\x01J\x01\x02R\x01\x00"  # {devices=[2,1]<=[2]}, as jax 0.4.30 wrote it
    data = old_layout(in_shardings=lambda b: offsets(b, [table(
        b, "Sharding", kind=fb.ShardingKind.hlo_sharding, hlo_sharding_proto=b.CreateByteVector(proto))]))
    assert jaxser.read(data, WHERE).in_shardings == (jaxser.Sharding("hlo", proto, None, (), (), (), None),)
    assert hlo_sharding_text(proto) == "{devices=[2,1]<=[2]}"
    if REFUSES_EXPIRED:
        with pytest.raises(ValueError, match=re.escape("older than the 6-month backward-compatibility window")):
            export.deserialize(bytearray(data))  # it refuses an HloSharding proto, whatever the device count
    else:  # jax <= 0.11.0 read it as an HloSharding, and then no named shardings
        exp = export.deserialize(bytearray(data))
        assert [str(s) for s in exp.in_shardings_hlo] == ["{devices=[2,1]<=[2]}"]
        assert exp.out_shardings_hlo == (None,) and not exp._has_named_shardings
        assert exp._in_named_shardings == exp._out_named_shardings == (None,)


def mesh(b: flatbuffers.Builder, axis: str = "x", axis_type: int = fb.AxisType.Auto) -> int:
    return table(b, "AbstractMesh", axis_sizes=numbers(b, [2]), axis_names=strings(b, [axis]),
                 axis_types=numbers(b, [axis_type], np.int8))


def named_sharding(b: flatbuffers.Builder, axis: str = "x", mesh_idx: int | None = None,
                   axis_type: int = fb.AxisType.Explicit, spec_axis: str | None = None,
                   memory_kind: str = "device") -> int:
    own_mesh = mesh(b, axis, axis_type)
    partitions = offsets(b, [table(b, "PartitionSpecOneAxis", axes=strings(b, [spec_axis or axis])),
                             table(b, "PartitionSpecOneAxis", axes=strings(b, []))])
    spec = table(b, "PartitionSpec", partitions=partitions, reduced=strings(b, []), unreduced=strings(b, []))
    fields = {"mesh": own_mesh, "spec": spec, "memory_kind": b.CreateString(memory_kind)}
    return table(b, "NamedSharding", **fields, **({} if mesh_idx is None else {"abstract_mesh_idx": mesh_idx}))


def test_the_fields_jax_reads_first_win():
    """Where a serialization stores a field twice (newer writers keep the old one for older readers), jaxser reads
    the one JAX reads: the unique avals and shardings by index, the 32-bit device count, a Sharding's named
    sharding over its HloSharding proto, the unique mesh over a named sharding's own copy, and a named sharding's
    memory kind over its aval's memory space."""
    data = blob(
        in_avals=lambda b: offsets(b, [aval(b, ["7"], fb.DType.f64)]),  # loses to unique_avals[in_avals_idxs]
        unique_avals=lambda b: offsets(b, [aval(b, ["3"], fb.DType.i8, memory_space=fb.MemorySpace.Host)]),
        nr_devices=lambda b: 2, nr_devices_short=lambda b: 5,
        in_shardings_idxs=None,  # in: the per-argument Sharding, whose named sharding beats its proto
        in_shardings=lambda b: offsets(b, [table(b, "Sharding", kind=fb.ShardingKind.hlo_sharding,
                                                 hlo_sharding_proto=b.CreateByteVector(b"\x08\x01"),
                                                 named_sharding=named_sharding(b, "u", mesh_idx=0,
                                                                               memory_kind="pinned_host"))]),
        unique_abstract_meshes=lambda b: offsets(b, [mesh(b, "u")]),
        unique_named_shardings=lambda b: offsets(b, [named_sharding(b, "u", mesh_idx=0)]),
        out_shardings_idxs=lambda b: numbers(b, [1]),
        out_shardings=lambda b: offsets(b, [table(b, "Sharding")]))
    rec = jaxser.read(data, WHERE)
    assert rec.nr_devices == 2 and not rec.short_device_count
    assert [aval_of_record(a) for a in rec.in_avals + rec.out_avals] == [
        (("3",), "int8", "host", False), (("3",), "int8", "device", False)]
    unique = jaxser.Mesh(("u",), (2,), ("auto",))  # the unique mesh, not the sharding's own (explicit) copy
    assert rec.in_shardings == (jaxser.Sharding("named", None, unique, (("u",), None), (), (), "pinned_host"),)
    assert rec.out_shardings == (jaxser.Sharding("named", None, unique, (("u",), None), (), (), "device"),)
    if not UNIQUE_TABLES:  # it would read the per-argument f64[7] (which the 2-way sharding does not divide), no
        # out_avals at all
        pytest.skip(f"{NOT_READ_BEFORE_0_10}: jaxser's reading is not this JAX's")
    exp = export.deserialize(bytearray(data))
    assert exp.nr_devices == 2
    assert [aval_of_jax(a) for a in exp.in_avals + exp.out_avals] == [aval_of_record(a) for a in
                                                                     rec.in_avals + rec.out_avals]
    assert [sharding_of_record(s) for s in rec.in_shardings + rec.out_shardings] == [
        sharding_of_jax(s) for s in exp._in_named_shardings + exp._out_named_shardings]


def test_the_per_argument_fields_jax_reads_first_win():
    """Without the unique tables (as jax 0.9.x writes and reads it), of the fields stored twice: the 32-bit device
    count, a Sharding's named sharding over its HloSharding proto, its memory kind over its aval's memory space."""
    def sharding(memory_kind):
        return lambda b: offsets(b, [table(b, "Sharding", kind=fb.ShardingKind.hlo_sharding,
                                           hlo_sharding_proto=b.CreateByteVector(b"\x08\x01"),
                                           named_sharding=named_sharding(b, "u", memory_kind=memory_kind))])

    data = blob(
        unique_avals=None, in_avals_idxs=None, out_avals_idxs=None, in_shardings_idxs=None, out_shardings_idxs=None,
        in_avals=lambda b: offsets(b, [aval(b, ["4", "2"], fb.DType.i8, memory_space=fb.MemorySpace.Device)]),
        out_avals=lambda b: offsets(b, [aval(b, ["4", "2"], fb.DType.i8, memory_space=fb.MemorySpace.Host)]),
        nr_devices=lambda b: 2, nr_devices_short=lambda b: 5,
        in_shardings=sharding("pinned_host"), out_shardings=sharding("device"))
    rec = jaxser.read(data, WHERE)
    exp = export.deserialize(bytearray(data))
    assert rec.nr_devices == exp.nr_devices == 2 and not rec.short_device_count
    assert [aval_of_record(a) for a in rec.in_avals + rec.out_avals] == [
        aval_of_jax(a) for a in exp.in_avals + exp.out_avals] == [(("4", "2"), "int8", "host", False),
                                                                  (("4", "2"), "int8", "device", False)]
    own = jaxser.Mesh(("u",), (2,), ("explicit",))  # the sharding's own mesh, there being no unique one
    assert rec.in_shardings + rec.out_shardings == (
        jaxser.Sharding("named", None, own, (("u",), None), (), (), "pinned_host"),
        jaxser.Sharding("named", None, own, (("u",), None), (), (), "device"))
    assert [sharding_of_record(s) for s in rec.in_shardings + rec.out_shardings] == [
        sharding_of_jax(s) for s in exp._in_named_shardings + exp._out_named_shardings]


# -- refusals ---------------------------------------------------------------------------------------------------------


def refused(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=f"^{re.escape(f'{WHERE}: {message}')}$"):
        jaxser.read(data, WHERE)


def not_one(detail: str) -> str:
    return f"not a JAX serialization: {detail}."


def root_of(data: bytes) -> int:
    return struct.unpack_from("<I", data, 0)[0]


def field_at(data: bytes, slot: int) -> int:
    """Where the root table's field in SLOT lies, read with the flatbuffers library."""
    root = root_of(data)
    offset = flatbuffers.table.Table(bytearray(data), root).Offset(slot)
    assert offset
    return root + offset


def target_of(data: bytes, slot: int) -> int:
    at = field_at(data, slot)
    return at + struct.unpack_from("<I", data, at)[0]


def patched(data: bytes, at: int, layout: str, value: int) -> bytes:
    return data[:at] + struct.pack(layout, value) + data[at + struct.calcsize(layout):]


def test_refuses_an_empty_or_tiny_file():
    refused(b"", not_one("the file is empty"))
    refused(b"abc", not_one("the file is 3 bytes, shorter than the smallest flatbuffer (12 bytes)"))
    refused(b"\0", not_one("the file is 1 byte, shorter than the smallest flatbuffer (12 bytes)"))


@pytest.mark.parametrize("seed", range(5))
def test_refuses_random_bytes(seed):
    data = random.Random(seed).randbytes(200)
    root = root_of(data)
    assert root >= len(data)  # what these seeds give: the message says so
    refused(data, not_one(f"the root table (offset {root}) is past the end of the 200-byte file"))


def test_refuses_a_truncated_serialization(mlp_blob):
    data, root = mlp_blob, root_of(mlp_blob)
    vtable = root - struct.unpack_from("<i", data, root)[0]
    size = struct.unpack_from("<H", data, vtable + 2)[0]
    refused(data[:8], not_one("the file is 8 bytes, shorter than the smallest flatbuffer (12 bytes)"))
    refused(data[:root + 2], not_one(f"the root table (4 bytes at offset {root}) runs past the end of the "
                                     f"{root + 2}-byte file"))
    cut = root + size - 1
    refused(data[:cut], not_one(f"the root table ({size} bytes at offset {root}) runs past the end of the "
                                f"{cut}-byte file"))
    # The root table alone: the first field jaxser reads (JAX too) is the unique avals, where this JAX writes them
    # (jax 0.9.x writes none, and the function name is the first one stored).
    cut = root + size
    first = f"unique_avals (offset {target_of(data, 42)})" if UNIQUE_TABLES else \
        f"function_name (offset {target_of(data, 6)})"
    refused(data[:cut], not_one(f"{first} is past the end of the {cut}-byte file"))
    # Half the module: what was written before it lies after it (a flatbuffer is written back to front): the
    # function name, written first, and with jax 0.9.x the first thing read; the vtable of the first unique aval
    # too (the writer shares a vtable between tables of one layout, the per-argument avals' written first).
    module = target_of(data, 30)
    cut = module + 4 + struct.unpack_from("<I", data, module)[0] // 2
    if not UNIQUE_TABLES:
        name = target_of(data, 6)
        assert name > cut
        refused(data[:cut], not_one(f"function_name (offset {name}) is past the end of the {cut}-byte file"))
        return
    avals = target_of(data, 42) + 4
    first = avals + struct.unpack_from("<I", data, avals)[0]
    vtable = first - struct.unpack_from("<i", data, first)[0]
    assert vtable > cut
    refused(data[:cut], not_one(f"unique_avals[0] (offset {first}) points to a vtable at offset {vtable}, outside "
                                f"the {cut}-byte file"))


def test_refuses_offsets_past_the_end(mlp_blob):
    data, n = mlp_blob, len(mlp_blob)
    at = field_at(data, 6)
    refused(patched(data, at, "<I", 0xFFFFFFF0), not_one(f"function_name (offset {at + 0xFFFFFFF0}) is past the end "
                                                          f"of the {n}-byte file"))
    # An offset that a reader computing modulo 2**32 would follow back to the root table: a cycle, refused here.
    at, root = field_at(data, 8), root_of(data)
    refused(patched(data, at, "<I", (root - at) % 2**32),
            not_one(f"the in_tree's node at depth 0 (offset {root + 2**32}) is past the end of the {n}-byte file"))
    refused(patched(data, root, "<i", root + 100),
            not_one(f"the root table (offset {root}) points to a vtable at offset -100, outside the {n}-byte file"))
    module = target_of(data, 30)
    refused(patched(data, module, "<I", n), not_one(f"mlir_module_serialized (offset {module}) claims {n} items of "
                                                    f"1 byte, past the end of the {n}-byte file"))


def chain(b: flatbuffers.Builder, depth: int) -> int:
    """A leaf nested DEPTH tuples deep."""
    at = node(b)
    for _ in range(depth):
        at = node(b, fb.PyTreeDefKind.tuple, [at])
    return at


def vjps_of(b: flatbuffers.Builder, levels: int, depth: int = 0) -> int:
    """An Exported table whose VJPs nest LEVELS more levels, each with an in_tree DEPTH tuples deep."""
    return exported_table(b, in_tree=lambda b: chain(b, depth),
                          vjp=(lambda b: vjps_of(b, levels - 1, depth)) if levels else None)


def test_reads_a_tree_as_deep_as_the_limit_and_refuses_a_deeper_one():
    rec = jaxser.read(blob(in_tree=lambda b: chain(b, jaxser.MAX_TREE_DEPTH)), WHERE)
    assert rec.in_tree.num_leaves() == 1 and rec == jaxser.read(blob(in_tree=lambda b: chain(b, 128)), WHERE)
    assert repr(rec).count("TreeNode(kind='tuple'") == jaxser.MAX_TREE_DEPTH  # repr and == stay within recursion
    vjps = blob(in_tree=lambda b: chain(b, 128), vjp=lambda b: vjps_of(b, jaxser.MAX_VJP_ORDER - 1, 128))
    deepest = jaxser.read(vjps, WHERE)  # each of the 16 VJP levels with the deepest tree: Python 3.11 too
    assert deepest.vjp_order() == 16 and deepest == jaxser.read(vjps, WHERE) and len(repr(deepest)) > len(repr(rec))
    refused(blob(in_tree=lambda b: chain(b, jaxser.MAX_TREE_DEPTH + 1)),
            not_one("the in_tree nests deeper than 128 levels, this reader's limit"))


def test_refuses_a_tree_that_shares_a_table():
    """Two children pointing at one table: JAX never writes it, and a tree of such nodes would be exponentially
    larger than its file."""
    where = {}

    def shared(b):
        leaf = node(b)
        where["leaf"] = leaf
        return node(b, fb.PyTreeDefKind.tuple, [leaf, leaf])

    b = flatbuffers.Builder(1024)
    two = lambda b: offsets(b, [aval(b, ["3"]), aval(b, ["3"])])  # noqa: E731
    b.Finish(exported_table(b, in_tree=shared, in_avals_idxs=None, in_avals=two, in_shardings_idxs=None,
                            in_shardings=lambda b: offsets(b, [table(b, "Sharding"), table(b, "Sharding")])))
    data = bytes(b.Output())
    leaf = len(data) - where["leaf"]
    refused(data, not_one(f"the in_tree's node at depth 1 (offset {leaf}) is a table already read as another node "
                          f"of the tree (a shared or cyclic tree, which JAX never writes)"))


def test_refuses_a_leaf_count_that_does_not_match_the_avals():
    refused(blob(in_tree=lambda b: node(b, fb.PyTreeDefKind.tuple, [node(b), node(b)])),
            not_one("the in_tree has 2 leaves but 1 in_avals are stored (one per leaf)"))
    refused(blob(out_tree=lambda b: node(b, fb.PyTreeDefKind.none)),
            not_one("the out_tree has 0 leaves but 1 out_avals are stored (one per leaf)"))


def test_refuses_malformed_trees():
    def tree_refused(in_tree: Build, problem: str) -> None:
        data = blob(in_tree=in_tree)
        refused(data, not_one(f"the in_tree's node at depth 0 (offset {target_of(data, 8)}) {problem}"))

    tree_refused(lambda b: node(b, fb.PyTreeDefKind.dict, [node(b)], ["a", "b"]),
                 "is a dict of 1 children with 2 children_names (one each)")
    tree_refused(lambda b: node(b, fb.PyTreeDefKind.dict, [node(b), node(b)], ["a", "a"]),
                 "is a dict whose key 'a' appears twice")
    tree_refused(lambda b: node(b, fb.PyTreeDefKind.leaf, [node(b)]), "is a leaf node with 1 children")
    tree_refused(lambda b: node(b, fb.PyTreeDefKind.none, [node(b)]), "is a none node with 1 children")
    tree_refused(lambda b: node(b, fb.PyTreeDefKind.custom, [node(b)]), "is a custom node without its custom_name")
    refused(blob(in_tree=None), not_one("it stores no in_tree"))


def test_refuses_unknown_enum_values_naming_them():
    newer = "the serialization may come from a newer JAX: upgrade jaxport to read it."
    refused(blob(unique_avals=lambda b: offsets(b, [aval(b, ["3"], 42)])),
            f"unique_avals[0].dtype is 42, an unknown dtype (this jaxport knows 0 to 29); {newer}")
    refused(blob(in_tree=lambda b: node(b, 9)),
            f"the in_tree's node at depth 0: its kind is 9, an unknown pytree node kind (this jaxport knows 0 to 5); "
            f"{newer}")
    refused(blob(disabled_checks=lambda b: offsets(b, [table(b, "DisabledSafetyCheck", kind=7)])),
            f"disabled_checks[0].kind is 7, an unknown disabled safety check kind (this jaxport knows 0 to 2); "
            f"{newer}")
    refused(blob(unique_avals=lambda b: offsets(b, [aval(b, ["3"], memory_space=-1)])),
            f"unique_avals[0].memory_space is -1, an unknown memory space (this jaxport knows 0 to 3); {newer}")


def test_refuses_what_jax_could_not_read():
    data = blob(function_name=lambda b: b.CreateString(b"\xff"))
    refused(data, not_one(f"function_name (offset {target_of(data, 6)}) is not UTF-8 (byte 0 of the string: invalid "
                          f"start byte)"))
    refused(blob(function_name=None), not_one("it stores no function_name"))
    refused(blob(mlir_module_serialized=None), not_one("it stores no mlir_module_serialized (the StableHLO module)"))
    refused(blob(nr_devices=None), not_one("it stores no device count (nr_devices is 0 and nr_devices_short is 0)"))
    refused(blob(in_avals_idxs=lambda b: numbers(b, [3])),
            not_one("in_avals_idxs[0] is 3, but 1 unique_avals are stored"))
    refused(blob(out_shardings_idxs=lambda b: numbers(b, [2])),
            not_one("out_shardings_idxs[0] is 2, but 0 unique_named_shardings are stored (the indices count from 1; "
                    "0 is None)"))
    refused(blob(in_shardings_idxs=None), not_one("it stores 0 in_shardings for 1 in_avals (one each)"))
    refused(blob(module_kept_var_idx=lambda b: numbers(b, [1], np.uint16)),
            not_one("module_kept_var_idx [1] is not an increasing list of indices below the 1 in_avals"))
    refused(blob(disabled_checks=lambda b: offsets(b, [table(b, "DisabledSafetyCheck", kind=1)])),
            not_one("disabled_checks[0] disables a custom-call check without naming its custom_call_target"))
    refused(blob(unique_avals=lambda b: offsets(b, [aval(b, ["3", ""])])),
            not_one("unique_avals[0].shape[1] is an empty string"))
    refused(blob(unique_avals=lambda b: offsets(b, [aval(b, [], kind=fb.AbstractValueKind.abstractToken)])),
            not_one("unique_avals[0] is an abstract token, which JAX never serializes"))

    def sharded(**options: Any) -> dict[str, Build]:
        return {"unique_named_shardings": lambda b: offsets(b, [named_sharding(b, **options)]),
                "in_shardings_idxs": lambda b: numbers(b, [1])}

    refused(blob(**sharded(axis_type=fb.AxisType.Missing)),
            not_one("unique_named_shardings[0].mesh.axis_types[0] is 0 (Missing), which JAX never writes"))
    refused(blob(**sharded(spec_axis="z")),
            not_one("unique_named_shardings[0].spec names the mesh axis 'z', which its mesh (axes ['x']) does not "
                    "have"))
    refused(blob(**sharded(mesh_idx=1), unique_abstract_meshes=lambda b: offsets(b, [mesh(b)])),
            not_one("unique_named_shardings[0].abstract_mesh_idx is 1, but 1 unique_abstract_meshes are stored"))


def test_refuses_files_beyond_its_limits():
    data = blob(function_name=lambda b: b.CreateString("f" * (jaxser.MAX_STRING_BYTES + 1)))
    refused(data, not_one(f"function_name (offset {target_of(data, 6)}) is {jaxser.MAX_STRING_BYTES + 1} bytes long, "
                          f"over this reader's limit of {jaxser.MAX_STRING_BYTES}"))
    refused(blob(module_kept_var_idx=lambda b: numbers(b, [0] * (jaxser.MAX_ITEMS + 1), np.uint16)),
            "the JAX serialization is too large for this reader: with module_kept_var_idx it holds more than "
            "1,000,000 tree nodes, avals, dimensions, shardings and names.")

    assert jaxser.read(blob(vjp=lambda b: vjps_of(b, jaxser.MAX_VJP_ORDER - 1)), WHERE).vjp_order() == 16
    refused(blob(vjp=lambda b: vjps_of(b, jaxser.MAX_VJP_ORDER)),
            not_one("it nests more than 16 vjp levels, this reader's limit"))


def test_damage_raises_format_errors_only(mlp_blob):
    """Seeded random damage to a real serialization: each read succeeds or raises FormatError, nothing else."""
    rng = random.Random(1234)
    refusals = 0
    for _ in range(3000):
        data = bytearray(mlp_blob)
        for _ in range(rng.choice([1, 2, 8])):
            at = rng.randrange(len(data))
            data[at] = rng.randrange(256) if rng.random() < 0.7 else data[at] ^ 0x80
        if rng.random() < 0.2:
            data = data[:rng.randrange(len(data))]
        try:
            jaxser.read(bytes(data), WHERE)
        except FormatError as e:
            assert str(e).startswith(f"{WHERE}: ")
            refusals += 1
    assert refusals > 100


# -- looks_like_serialization ---------------------------------------------------------------------------------------


def test_looks_like_serialization_tells_serializations_from_other_files(mlp_blob, tmp_path):
    exp = exported("pytree")
    assert jaxser.looks_like_serialization(mlp_blob)
    assert jaxser.looks_like_serialization(bytes(exp.serialize()))
    assert jaxser.looks_like_serialization(bytearray(exp.serialize(vjp_order=1)))
    assert jaxser.looks_like_serialization(blob()) and jaxser.looks_like_serialization(old_layout())
    npy = io.BytesIO()
    np.save(npy, np.zeros(3))
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("f.jaxexport", mlp_blob)
    others = {"MLIR text": exp.mlir_module().encode(), "MLIR bytecode": exp.mlir_module_serialized,
              "zip": zipped.getvalue(), "npy": npy.getvalue(), "empty": b"", "random": random.Random(0).randbytes(999),
              "a root without a module": blob(mlir_module_serialized=None),
              "a module that is not bytecode": blob(mlir_module_serialized=lambda b: b.CreateByteVector(b"module")),
              "truncated": mlp_blob[:100], "text": "not bytes"}
    assert {name: jaxser.looks_like_serialization(data) for name, data in others.items()} == dict.fromkeys(
        others, False)


# -- golden serializations of older JAX releases ------------------------------------------------------------------


def golden_cases() -> list[tuple[str, str]]:
    return [(d.name, name) for d in sorted(GOLDEN.glob("*/")) if (d / "cases.json").is_file()
            for name, case in json.loads((d / "cases.json").read_text())["cases"].items() if case["status"] == "ok"]


def hlo_sharding_text(proto: bytes) -> str:
    from jax._src.lib import xla_client

    op = xla_client.OpSharding()
    op.ParseFromString(proto)
    return str(xla_client.HloSharding.from_proto(op))


def assert_matches_case(rec: jaxser.Serialized, case: dict, writer: str) -> None:
    """REC is what the JAX release WRITER printed of its Exported (a case of ``make_goldens.py``'s cases.json)."""
    assert rec.function_name == case["fun_name"]
    for side in ("in", "out"):
        avals = getattr(rec, f"{side}_avals")
        printed = case[f"{side}_avals"]
        assert [f"({', '.join(a.shape)}{',' if len(a.shape) == 1 else ''})" for a in avals] == [
            p["shape"] for p in printed]
        assert [a.dtype for a in avals] == [p["dtype"] for p in printed]
        assert str(treedef(getattr(rec, f"{side}_tree"))) == case[f"{side}_tree"]
        specs = case.get(f"{side}_partition_specs") or [None] * len(avals)  # the sharded case's, as made
        for s, hlo, spec in zip(getattr(rec, f"{side}_shardings"), case[f"{side}_shardings_hlo"], specs, strict=True):
            if s is None:
                assert hlo is None and spec is None, (hlo, spec)
            elif s.kind == "hlo":  # up to jax 0.8.x
                assert s.hlo_proto is not None and hlo_sharding_text(s.hlo_proto) == hlo
            else:  # jax 0.9.0 and later store a named sharding; the goldens' Exported printed its HloSharding up
                # to jax 0.9.1, none from 0.10.2 on
                assert s.kind == "named" and s.mesh is not None
                assert (list(s.mesh.axis_names), list(s.mesh.axis_sizes)) == (case["mesh"]["axis_names"],
                                                                             case["mesh"]["shape"])
                assert [None if p is None else p[0] if len(p) == 1 else list(p) for p in s.spec] == spec
                assert (hlo is None) == (_version(writer) >= (0, 10, 0)), hlo
    assert rec.platforms == tuple(case["platforms"])
    assert rec.nr_devices == case["nr_devices"]
    assert rec.calling_convention == case["calling_convention_version"]
    assert list(rec.kept_var_idx) == case["module_kept_var_idx"]
    assert rec.uses_global_constants == case["uses_global_constants"]
    assert [f"custom_call:{c.target}" if c.kind == "custom_call" else c.kind for c in rec.disabled_checks] == case[
        "disabled_safety_checks"]
    assert rec.vjp_order() == case["vjp_order"] and rec.module[:4] == MAGIC
    # What each generation stored (jaxser's module docstring): not the schema version, and the 16-bit device count.
    assert rec.short_device_count == (_version(writer) < (0, 8, 2))
    version, with_jax_version = stored_version(_version(writer))
    assert (rec.serialization_version, rec.jax_version) == (version, writer if with_jax_version else None)


@pytest.mark.skipif(not golden_cases(), reason=f"no golden serializations under {GOLDEN.relative_to(REPO)}/<version>/")
@pytest.mark.parametrize(("version", "name"), golden_cases() or [("", "")])
def test_reads_golden_serializations_of_older_jax(version, name):
    meta = json.loads((GOLDEN / version / "cases.json").read_text())
    case = meta["cases"][name]
    data = (GOLDEN / version / case["files"]["serialized"]).read_bytes()
    if "serialized_sha256" in case:
        import hashlib

        assert hashlib.sha256(data).hexdigest() == case["serialized_sha256"]
    assert jaxser.looks_like_serialization(data)
    assert_matches_case(jaxser.read(data, f"{version}/{name}"), case, meta["jax_version"])
