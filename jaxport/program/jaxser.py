"""Reading JAX's ``Exported`` serialization (``jax.export.Exported.serialize()``) without JAX.

The serialization is a flatbuffer of JAX's schema (``jax/_src/export/serialization.fbs``): the function's name, its
input and output pytrees, avals and shardings, device count, platforms, effects, disabled safety checks, the StableHLO
module and the VJPs serialized with it. :func:`read` decodes it with :mod:`struct` alone (the flatbuffer's bytes and
tables: :mod:`.flatbuf`; what they mean: here), so that ``jaxport inspect`` describes a payload without importing JAX,
flatbuffers or numpy.

Every JAX from 0.4.30 writes that one schema, only ever appended to. Where a field is stored twice, the one JAX's
reader (``serialization._deserialize_exported``, jax 0.12) reads wins: ``unique_avals`` by ``in_avals_idxs`` /
``out_avals_idxs`` (schema version 10, jax 0.10.0) over the per-argument ``in_avals`` / ``out_avals``;
``unique_named_shardings`` by 1-based ``in_shardings_idxs`` / ``out_shardings_idxs`` (0 is None; version 10) over the
per-argument ``Sharding`` tables, in which a ``named_sharding`` (version 6, jax 0.9.0) beats the ``hlo_sharding_proto``
written up to version 8 (an XLA ``OpSharding``, kind ``"hlo"`` here; JAX 0.12 refuses it as expired) and neither is
None; ``unique_abstract_meshes[abstract_mesh_idx]`` (version 10) over a named sharding's own ``mesh``; the 32-bit
``nr_devices`` (version 5, jax 0.8.2) over the 16-bit ``nr_devices_short`` of versions 1 to 4
(:attr:`Serialized.short_device_count`: jax 0.11.1 and later refuse those as older than their window). The stored
``serialization_version`` is the schema version only from July 2026 (12, with ``jax_version``; 13 from jax 0.12.1,
with each abstract value's ``weak_type``): JAX stored 2 for versions 2 to 4 (jax 0.4.30 to 0.8.1) and 3 for versions
5 to 11 (jax 0.8.2 to 0.11.0).

Trust model: the bytes may be hostile (an artifact's digest only proves that its writer chose them). Every offset and
length is checked against the buffer before it is read, with Python integers (no wrap-around), and a table's fields
must lie inside the table; pytrees are walked without recursion, at most :data:`MAX_TREE_DEPTH` deep, and a table met
twice in one tree (shared or cyclic, which no JAX writes) is refused; VJPs nest at most :data:`MAX_VJP_ORDER` levels;
a file's vectors hold at most :data:`MAX_ITEMS` elements together, a string at most :data:`MAX_STRING_BYTES` bytes of
strict UTF-8, and a string or byte vector referenced twice is decoded once. Anything malformed raises one
:class:`~jaxport.errors.FormatError` naming the file and what is wrong; nothing else escapes.
"""

from __future__ import annotations

import itertools

from .._record import dataclass
from ..errors import FormatError
from .flatbuf import I8, I16, U8, U16, U32, Buffer, Table
from .flatbuf import MAX_ITEMS as MAX_ITEMS  # the reader's limits, re-exported: the trust model below names them
from .flatbuf import MAX_STRING_BYTES as MAX_STRING_BYTES

#: The deepest pytree read (levels below the root). JAX's are far shallower; the limit keeps the records' recursive
#: ``==`` and ``repr`` inside Python's recursion limit (3.11 counts C calls too: repr fails near 200 levels, == 250).
MAX_TREE_DEPTH = 128
#: The most nested VJP levels read (``serialize(vjp_order=N)`` stores N).
MAX_VJP_ORDER = 16
#: The first bytes of an MLIR bytecode file (the module of every serialization).
MLIR_BYTECODE_MAGIC = b"ML\xefR"


@dataclass(frozen=True)
class TreeNode:
    """A node of a serialized pytree (JAX's ``PyTreeDef`` table)."""

    kind: str  # "leaf" | "none" | "tuple" | "list" | "dict" | "custom"
    children: tuple[TreeNode, ...]
    names: tuple[str, ...]  # a dict's keys, in stored order; empty for the other kinds
    custom_name: str | None  # a custom node's registered serialization name (a namedtuple's too)
    custom_auxdata: bytes | None  # a custom node's serialized auxiliary data

    def num_leaves(self) -> int:
        """How many leaves (arrays) the tree below this node holds."""
        count, todo = 0, [self]
        while todo:
            node = todo.pop()
            count += node.kind == "leaf"
            todo.extend(node.children)
        return count


@dataclass(frozen=True)
class Aval:
    """The abstract value of one input or output: its shape and element type."""

    shape: tuple[str, ...]  # each dimension as JAX wrote it: "4", "b", "2*b + 1"
    dtype: str  # numpy / ml_dtypes name ("float32", "bfloat16", "int4", "float0"); keys as JAX names them ("key<fry>")
    #: "device" | "host" | "any"; None when not stored (before jax 0.8.2: the device). With a named sharding, the
    #: sharding's memory kind decides, as JAX reads it: "host" for "pinned_host", else "device".
    memory_space: str | None
    #: Whether the value is weakly typed (a Python number's type): stored from schema version 13 (jax 0.12.1),
    #: False before, as JAX reads a missing field.
    weak_type: bool = False


@dataclass(frozen=True)
class Mesh:
    """The abstract mesh of a named sharding."""

    axis_names: tuple[str, ...]
    axis_sizes: tuple[int, ...]
    axis_types: tuple[str, ...]  # "auto" | "explicit" | "manual", one per axis


@dataclass(frozen=True)
class Sharding:
    """How one input or output is sharded (None in its place when unspecified)."""

    kind: str  # "hlo" (an XLA OpSharding proto, written up to schema version 8) | "named"
    hlo_proto: bytes | None  # the serialized OpSharding, for kind "hlo"
    mesh: Mesh | None  # for kind "named"
    spec: tuple[tuple[str, ...] | None, ...]  # per array axis: None = not sharded, else the mesh axes it is split over
    unreduced: tuple[str, ...]
    reduced: tuple[str, ...]
    memory_kind: str | None


@dataclass(frozen=True)
class DisabledCheck:
    """A safety check disabled at export (``jax.export.DisabledSafetyCheck``)."""

    kind: str  # "platform" | "custom_call" | "shape_assertions"
    target: str | None  # the custom-call target, for kind "custom_call"


@dataclass(frozen=True)
class Serialized:
    """What a JAX ``Exported`` serialization stores: one function, and the VJPs serialized with it."""

    serialization_version: int  # as stored (see the module docstring: not the schema version before July 2026)
    jax_version: str | None  # the writer's JAX, stored from July 2026 (schema version 12)
    function_name: str
    in_tree: TreeNode
    in_avals: tuple[Aval, ...]
    in_shardings: tuple[Sharding | None, ...]
    out_tree: TreeNode
    out_avals: tuple[Aval, ...]
    out_shardings: tuple[Sharding | None, ...]
    nr_devices: int
    #: nr_devices came from the 16-bit field of schema versions 1 to 4: jax >= 0.11.1 refuses such a serialization as
    #: older than its compatibility window.
    short_device_count: bool
    platforms: tuple[str, ...]
    ordered_effects: tuple[str, ...]  # effect type names (str of the effect's class)
    unordered_effects: tuple[str, ...]
    disabled_checks: tuple[DisabledCheck, ...]
    module: bytes  # mlir_module_serialized: a StableHLO portable artifact (MLIR bytecode)
    calling_convention: int
    kept_var_idx: tuple[int, ...]  # the in_avals the module takes, in increasing order (the others are unused)
    uses_global_constants: bool
    vjp: Serialized | None

    def vjp_order(self) -> int:
        """How many nested VJP levels are stored (``serialize(vjp_order=N)``)."""
        order, level = 0, self.vjp
        while level is not None:
            order, level = order + 1, level.vjp
        return order


def looks_like_serialization(data: bytes) -> bool:
    """Whether DATA looks like a JAX serialization: a flatbuffer whose root table holds a function name and a module
    that starts as MLIR bytecode does. Cheap (reads a few fields, not the trees); never raises."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return False
    try:
        buf = Buffer(bytes(data), "")
        root = buf.root()
        name, module = root.string("function_name"), root.ref("mlir_module_serialized")
        start, length = buf.vector(module, 1, "mlir_module_serialized") if module else (0, 0)
        return name is not None and length >= 4 and buf.data[start:start + 4] == MLIR_BYTECODE_MAGIC
    except FormatError:
        return False


def read(data: bytes, where: str) -> Serialized:
    """The function a JAX serialization stores, read without JAX; FormatError naming WHERE if it is malformed."""
    buf = Buffer(bytes(data), where)
    return _exported(buf, buf.root(), 0)


_TREE_KINDS = ("leaf", "none", "tuple", "list", "dict", "custom")
_AVAL_KINDS = ("shapedArray", "abstractToken")
# JAX's DType enum in value order (0 = bool ... 29 = key_unsafe_rbg), by the names this reader gives them: numpy /
# ml_dtypes names, and JAX's for typed PRNG keys. One string rather than a literal table: these are the schema's
# codes, not facts about dtypes (jaxport.dtypes holds those), and it names types jaxport does not otherwise handle.
_DTYPES = tuple("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 complex64 complex128 "
                "bfloat16 int4 uint4 float8_e4m3b11fnuz float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz "
                "float0 float8_e4m3 float8_e3m4 float8_e8m0fnu float4_e2m1fn key<fry> key<rbg> key<urbg>".split())
_MEMORY_SPACES = ("missing", "device", "host", "any")  # 0: not stored
_AXIS_TYPES = ("missing", "auto", "explicit", "manual")  # 0: never written
_SHARDING_KINDS = ("unspecified", "hlo_sharding", "named_sharding")
_CHECK_KINDS = ("platform", "custom_call", "shape_assertions")

# -- the records ----------------------------------------------------------------------------------------------------


def _exported(buf: Buffer, t: Table, level: int) -> Serialized:
    """One level of the serialization (the function, or its level-th VJP), read as JAX's reader reads it."""
    p = t.path
    unique_avals = tuple(_aval(a) for a in t.tables("unique_avals", "AbstractValue"))
    meshes = tuple(_mesh(m) for m in t.tables("unique_abstract_meshes", "AbstractMesh"))
    unique_shardings = tuple(_named_sharding(s, meshes) for s in t.tables("unique_named_shardings", "NamedSharding"))

    function_name = t.string("function_name")
    if function_name is None:
        raise buf.fail(f"it stores no {p}function_name")

    nr_devices, short = t.scalar("nr_devices", U32), False
    if nr_devices == 0:
        nr_devices, short = t.scalar("nr_devices_short", I16), True
        if nr_devices <= 0:
            raise buf.fail(f"it stores no device count ({p}nr_devices is 0 and {p}nr_devices_short is {nr_devices})")

    sides = {}
    for side in ("in", "out"):
        shardings = _shardings(t, side, unique_shardings, meshes)
        avals = _avals(t, side, unique_avals)
        if len(shardings) != len(avals):
            raise buf.fail(f"it stores {len(shardings)} {p}{side}_shardings for {len(avals)} {p}{side}_avals "
                           f"(one each)")
        avals = tuple(a if s is None or s.kind != "named" else _placed(a, s) for a, s in zip(avals, shardings))
        sides[side] = (_tree(buf, t, f"{side}_tree", len(avals)), avals, shardings)

    platforms = t.strings("platforms")
    effects = [tuple(_effect(e) for e in t.tables(f"{kind}_effects", "Effect")) for kind in ("ordered", "unordered")]
    checks = tuple(_disabled_check(c) for c in t.tables("disabled_checks", "DisabledSafetyCheck"))
    module = t.blob("mlir_module_serialized")
    if module is None:
        raise buf.fail(f"it stores no {p}mlir_module_serialized (the StableHLO module)")
    kept = t.numbers("module_kept_var_idx", "H")
    n_in = len(sides["in"][1])
    if any(k >= n_in or (i and k <= kept[i - 1]) for i, k in enumerate(kept)):
        raise buf.fail(f"{p}module_kept_var_idx {list(kept)[:20]} is not an increasing list of indices below the "
                       f"{n_in} {p}in_avals")

    vjp, vjp_table = None, t.table("vjp", "Exported")
    if vjp_table is not None:
        if level + 1 > MAX_VJP_ORDER:
            raise buf.fail(f"it nests more than {MAX_VJP_ORDER} vjp levels, this reader's limit")
        vjp = _exported(buf, vjp_table, level + 1)

    return Serialized(
        serialization_version=t.scalar("serialization_version", U16), jax_version=t.string("jax_version"),
        function_name=function_name,
        in_tree=sides["in"][0], in_avals=sides["in"][1], in_shardings=sides["in"][2],
        out_tree=sides["out"][0], out_avals=sides["out"][1], out_shardings=sides["out"][2],
        nr_devices=nr_devices, short_device_count=short, platforms=platforms,
        ordered_effects=effects[0], unordered_effects=effects[1], disabled_checks=checks, module=module,
        calling_convention=t.scalar("calling_convention_version", U16), kept_var_idx=kept,
        uses_global_constants=bool(t.scalar("uses_global_constants", I8)), vjp=vjp)


def _avals(t: Table, side: str, unique: tuple[Aval, ...]) -> tuple[Aval, ...]:
    """The in or out avals: by index into unique_avals when stored, else the per-argument tables."""
    indices = t.numbers(f"{side}_avals_idxs", "I")
    for i, k in enumerate(indices):
        if k >= len(unique):
            raise t.buf.fail(f"{t.path}{side}_avals_idxs[{i}] is {k}, but {len(unique)} {t.path}unique_avals are "
                             f"stored")
    if indices:
        return tuple(unique[k] for k in indices)
    return tuple(_aval(a) for a in t.tables(f"{side}_avals", "AbstractValue"))


def _shardings(t: Table, side: str, unique: tuple[Sharding, ...],
               meshes: tuple[Mesh, ...]) -> tuple[Sharding | None, ...]:
    """The in or out shardings: by 1-based index into unique_named_shardings when stored, else the per-argument
    tables."""
    indices = t.numbers(f"{side}_shardings_idxs", "I")
    for i, k in enumerate(indices):
        if k > len(unique):
            raise t.buf.fail(f"{t.path}{side}_shardings_idxs[{i}] is {k}, but {len(unique)} "
                             f"{t.path}unique_named_shardings are stored (the indices count from 1; 0 is None)")
    if indices:
        return tuple(unique[k - 1] if k else None for k in indices)
    return tuple(_per_argument_sharding(s, meshes) for s in t.tables(f"{side}_shardings", "Sharding"))


def _placed(aval: Aval, sharding: Sharding) -> Aval:
    """AVAL as JAX reads it with its named SHARDING (``core.update_aval_with_sharding``): the sharding's memory kind
    sets the memory space (``pinned_host`` is the host, any other kind the device)."""
    space = "host" if sharding.memory_kind == "pinned_host" else "device"
    return aval if aval.memory_space == space else Aval(aval.shape, aval.dtype, space, aval.weak_type)


def _aval(t: Table) -> Aval:
    if t.enum("kind", "aval kind", _AVAL_KINDS) != "shapedArray":
        raise t.buf.fail(f"{t.path[:-1]} is an abstract token, which JAX never serializes")
    shape = t.strings("shape")
    if "" in shape:
        raise t.buf.fail(f"{t.path}shape[{shape.index('')}] is an empty string")
    memory_space = t.enum("memory_space", "memory space", _MEMORY_SPACES)
    weak = t.scalar("weak_type", U8)
    if weak > 1:
        raise t.buf.fail(f"{t.path}weak_type is {weak}, not a boolean")
    return Aval(shape, t.enum("dtype", "dtype", _DTYPES), None if memory_space == "missing" else memory_space,
                bool(weak))


def _mesh(t: Table) -> Mesh:
    what = t.path[:-1]
    names, sizes, codes = t.strings("axis_names"), t.numbers("axis_sizes", "I"), t.numbers("axis_types", "b")
    if not len(names) == len(sizes) == len(codes):
        raise t.buf.fail(f"{what} has {len(names)} axis_names, {len(sizes)} axis_sizes and {len(codes)} axis_types "
                         f"(one each per axis)")
    if len(set(names)) != len(names) or 0 in sizes:
        raise t.buf.fail(f"{what} has axes {list(names)[:20]} of sizes {list(sizes)[:20]} (distinct names, sizes of "
                         f"at least 1)")
    for i, code in enumerate(codes):
        if code == 0:
            raise t.buf.fail(f"{what}.axis_types[{i}] is 0 (Missing), which JAX never writes")
        if not 0 < code < len(_AXIS_TYPES):
            raise t.buf.unknown(f"{what}.axis_types[{i}]", code, "mesh axis type", _AXIS_TYPES)
    return Mesh(names, sizes, tuple(_AXIS_TYPES[c] for c in codes))


def _named_sharding(t: Table, meshes: tuple[Mesh, ...]) -> Sharding:
    what = t.path[:-1]
    if meshes:  # JAX reads the index then, not the copy of the mesh that writers keep for older readers
        k = t.scalar("abstract_mesh_idx", U32)
        if k >= len(meshes):
            raise t.buf.fail(f"{what}.abstract_mesh_idx is {k}, but {len(meshes)} unique_abstract_meshes are stored")
        mesh = meshes[k]
    else:
        mesh_table = t.table("mesh", "AbstractMesh")
        if mesh_table is None:
            raise t.buf.fail(f"{what} has no mesh")
        mesh = _mesh(mesh_table)
    spec = t.table("spec", "PartitionSpec")
    if spec is None:
        raise t.buf.fail(f"{what} has no spec")
    partitions = tuple(p.strings("axes") or None for p in spec.tables("partitions", "PartitionSpecOneAxis"))
    reduced, unreduced = spec.strings("reduced"), spec.strings("unreduced")
    for axis in (*(a for axes in partitions if axes for a in axes), *reduced, *unreduced):
        if axis not in mesh.axis_names:
            raise t.buf.fail(f"{what}.spec names the mesh axis {axis[:80]!r}, which its mesh (axes "
                             f"{list(mesh.axis_names)[:20]}) does not have")
    return Sharding("named", None, mesh, partitions, unreduced, reduced, t.string("memory_kind"))


def _per_argument_sharding(t: Table, meshes: tuple[Mesh, ...]) -> Sharding | None:
    t.enum("kind", "sharding kind", _SHARDING_KINDS)  # checked, not used: JAX reads which fields are stored
    named = t.table("named_sharding", "NamedSharding")
    if named is not None:
        return _named_sharding(named, meshes)
    proto = t.blob("hlo_sharding_proto")
    return None if proto is None else Sharding("hlo", proto, None, (), (), (), None)


def _effect(t: Table) -> str:
    if (name := t.string("type_name")) is None:
        raise t.buf.fail(f"{t.path[:-1]} has no type_name")
    return name


def _disabled_check(t: Table) -> DisabledCheck:
    kind = t.enum("kind", "disabled safety check kind", _CHECK_KINDS)
    target = t.string("custom_call_target") if kind == "custom_call" else None
    if kind == "custom_call" and target is None:
        raise t.buf.fail(f"{t.path[:-1]} disables a custom-call check without naming its custom_call_target")
    return DisabledCheck(kind, target)


def _tree(buf: Buffer, exported: Table, name: str, n_avals: int) -> TreeNode:
    """The in or out tree, walked without recursion (parents before children), then built from its leaves up."""
    tree = exported.path + name
    root = exported.ref(name)
    if not root:
        raise buf.fail(f"it stores no {tree}")
    nodes: list[tuple[str, tuple[str, ...], str | None, bytes | None]] = []
    children: list[list[int]] = []
    seen: set[int] = set()
    leaves = 0
    labels = [f"the {tree}'s node at depth {d}" for d in range(MAX_TREE_DEPTH + 1)]  # what to call a node, by depth
    todo = [(root, 0, -1)]  # (table position, depth, parent's index in nodes)
    while todo:
        pos, depth, parent = todo.pop()
        if depth > MAX_TREE_DEPTH:
            raise buf.fail(f"the {tree} nests deeper than {MAX_TREE_DEPTH} levels, this reader's limit")
        what = labels[depth]
        if pos in seen:
            raise buf.fail(f"{what} (offset {pos}) is a table already read as another node of the tree (a shared or "
                           f"cyclic tree, which JAX never writes)")
        seen.add(pos)
        t = buf.table(pos, "PyTreeDef", what, what + ": its ")
        kind = t.enum("kind", "pytree node kind", _TREE_KINDS)
        at = t.ref("children")
        kids = buf.references(at, f"{what}: its children") if at else []
        names: tuple[str, ...] = ()
        custom_name, custom_auxdata = None, None
        if kind in ("leaf", "none") and kids:
            raise buf.fail(f"{what} (offset {pos}) is a {kind} node with {len(kids)} children")
        if kind == "dict":
            names = t.strings("children_names")
            if len(names) != len(kids):
                raise buf.fail(f"{what} (offset {pos}) is a dict of {len(kids)} children with {len(names)} "
                               f"children_names (one each)")
            if len(set(names)) != len(names):
                key = next(a for a, b in itertools.pairwise(sorted(names)) if a == b)
                raise buf.fail(f"{what} (offset {pos}) is a dict whose key {key[:80]!r} appears twice")
        elif kind == "custom":
            custom_name, custom_auxdata = t.string("custom_name"), t.blob("custom_auxdata")
            if custom_name is None or custom_auxdata is None:
                raise buf.fail(f"{what} (offset {pos}) is a custom node without its "
                               f"{'custom_name' if custom_name is None else 'custom_auxdata'}")
        leaves += kind == "leaf"
        if parent >= 0:  # a node's index is len(nodes) until it is appended
            children[parent].append(len(nodes))
        todo += [(k, depth + 1, len(nodes)) for k in reversed(kids)]
        nodes.append((kind, names, custom_name, custom_auxdata))
        children.append([])
    if leaves != n_avals:
        side = name.split("_")[0]
        raise buf.fail(f"the {tree} has {leaves} lea{'f' if leaves == 1 else 'ves'} but {n_avals} "
                       f"{exported.path}{side}_avals are stored (one per leaf)")
    built: dict[int, TreeNode] = {}  # each node's children come after it in nodes, so are built before it
    for i in reversed(range(len(nodes))):
        kind, names, custom_name, custom_auxdata = nodes[i]
        built[i] = TreeNode(kind, tuple(built.pop(c) for c in children[i]), names, custom_name, custom_auxdata)
    return built[0]
