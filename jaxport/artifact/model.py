"""The format as records: what a manifest holds (specs/FORMAT.md, "The manifest"), one frozen record per object.

``manifest.validate`` is the only parser: it checks an untrusted ``manifest.json`` and returns a ``Manifest``;
readers take attributes (``m.functions["apply"].inputs[0].shape``), never string keys. The writer builds the same
records (``export.writing.manifest``) and ``Manifest.to_json()`` gives the JSON document, key for key in the order
jaxport has always written it, so that the artifact's bytes do not depend on this module (``container.manifest_bytes``).

Conventions: a JSON array is a tuple, a JSON object keyed by names a dict (read-only by agreement: records are
frozen, their dicts are not copied); a field the format makes optional is None when absent, unless the format
gives it a default (``nr_devices`` 1, ``vjp_order`` 0, empty lists and objects), which the record then holds.
Static values of the call tree stay JSON values (lists, not tuples): they are what the function received at export.
No JAX, no numpy: ``jaxport inspect`` reads an artifact through this module.
"""

from __future__ import annotations

from types import MappingProxyType

from .._record import dataclass
from .bounds import Bounds

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any, TypeVar

    R = TypeVar("R")
    #: One entry of a PartitionSpec: None (not partitioned), a mesh axis, or several (partitioned over them).
    PartitionEntry = str | tuple[str, ...] | None

#: The empty mapping, as a default: a record's dicts are read-only.
EMPTY: Mapping[str, Any] = MappingProxyType({})

#: The key order of ``metadata`` when a writer gives none (a spec's ``metadata`` keys come in the spec's order).
METADATA_KEYS = ("name", "version", "description", "labels")


def replace(record: R, **changes: Any) -> R:
    """A copy of a record with some fields changed (``dataclasses.replace``, for ``_record`` records)."""
    names = type(record).__match_args__  # type: ignore[attr-defined]
    return type(record)(**{**{n: getattr(record, n) for n in names}, **changes})


def _given(**entries: Any) -> dict[str, Any]:
    """The entries whose value is not None, in their order: the optional keys of a JSON object, which the format
    leaves out when they have no value (a ``None`` it writes as ``null`` is given in the object itself)."""
    return {k: v for k, v in entries.items() if v is not None}


def _partition_json(spec: tuple[PartitionEntry, ...] | None) -> list[Any] | None:
    if spec is None:
        return None
    return [list(e) if isinstance(e, tuple) else e for e in spec]


# --- top level ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpgradedFrom:
    """What an upgraded artifact was upgraded from (``jaxport upgrade``): the old artifact's producer and the sha256
    of its file."""

    jaxport: str
    jax: str
    jaxlib: str
    sha256: str
    #: The old artifact's ``producer.for_jax``, when it had one.
    for_jax: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"jaxport": self.jaxport, "jax": self.jax, "jaxlib": self.jaxlib,
                **_given(for_jax=self.for_jax), "sha256": self.sha256}


@dataclass(frozen=True)
class Producer:
    """The software that wrote the artifact."""

    jaxport: str
    jax: str
    jaxlib: str
    #: The oldest and newest calling convention versions the exporting JAX could run; None when not recorded.
    calling_convention_range: tuple[int, int] | None = None
    #: ``export --for-jax``: the older JAX the payloads were written for (their StableHLO version and calling
    #: convention are that JAX's), which dates the window; None for an artifact written for its own JAX.
    for_jax: str | None = None
    #: ``jaxport upgrade``: the artifact this one was upgraded from; None when it was not.
    upgraded_from: UpgradedFrom | None = None

    def to_json(self) -> dict[str, Any]:
        ccr = self.calling_convention_range
        return {"jaxport": self.jaxport, "jax": self.jax, "jaxlib": self.jaxlib,
                **_given(calling_convention_range=list(ccr) if ccr is not None else None, for_jax=self.for_jax,
                         upgraded_from=self.upgraded_from.to_json() if self.upgraded_from is not None else None)}


@dataclass(frozen=True)
class Metadata:
    """The artifact's name, version, description and labels (a missing key reads as None, labels as ``{}``)."""

    name: str | None = None
    version: str | None = None
    description: str | None = None
    labels: Mapping[str, str] = EMPTY
    #: The keys as written, in their order (a spec's metadata keys come in the spec's order, and the order is part
    #: of the artifact's bytes); not a field of the format.
    key_order: tuple[str, ...] = METADATA_KEYS

    def to_json(self) -> dict[str, Any]:
        values = {"name": self.name, "version": self.version, "description": self.description,
                  "labels": dict(self.labels)}
        return {k: values[k] for k in self.key_order}


@dataclass(frozen=True)
class Source:
    """Where the artifact came from: for information and ``verify``; a reader never opens what it names."""

    spec: str | None = None
    #: The sha256 of the spec file's bytes; None without a spec file.
    spec_sha256: str | None = None
    #: ``export --bind NAME=SOURCE``: NAME to SOURCE as recorded; None when none was given.
    binds: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, **_given(spec_sha256=self.spec_sha256,
                                            binds=dict(self.binds) if self.binds is not None else None)}


@dataclass(frozen=True)
class MemberInfo:
    """A member other than ``manifest.json``, as the manifest lists it."""

    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class StoredTensor:
    """One bound tensor of the ``weights.bin`` member: where its bytes are, and their digest."""

    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "offset": self.offset, "nbytes": self.nbytes,
                "sha256": self.sha256}


@dataclass(frozen=True)
class Weights:
    """The index of the ``weights.bin`` member: every stored tensor, by name, in the order of the names."""

    member: str
    tensors: Mapping[str, StoredTensor]

    def to_json(self) -> dict[str, Any]:
        return {"member": self.member, "tensors": {n: t.to_json() for n, t in self.tensors.items()}}


# --- a function's arrays -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    """One free array input of a function's program (specs/FORMAT.md, "Arrays")."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    #: Where the leaf is in the spec (``args[1]``, ``kwargs['params']['w']``).
    spec_path: str | None = None
    #: The HLO sharding JAX recorded, as text; None when unspecified.
    sharding: str | None = None
    #: Sharded functions only: the PartitionSpec over the function's mesh (None when unspecified).
    partition_spec: tuple[PartitionEntry, ...] | None = None
    #: The half-open range [LO, HI) of the values, when the spec declares it; an integer input's bound may be a
    #: dimension expression (``[0, "nodes"]``), evaluated at each call's dimensions.
    range: tuple[float | str, float | str] | None = None
    #: Format 1.3: traced weakly typed, as ``jax.jit`` takes a Python number (a ``like:`` value's ``int``/``float``
    #: leaf), so a call may give it any integer or float array whose values it keeps exactly.
    weak: bool = False
    #: Format 1.3: ``range`` was taken from an example value (a ``like:`` leaf), not declared by the spec: it shapes
    #: random inputs only, and a call that checks ranges (``check_ranges``) is not held to it.
    range_example: bool = False

    def to_json(self, sharded: bool = False) -> dict[str, Any]:
        return {"name": self.name, "spec_path": self.spec_path, "shape": list(self.shape), "dtype": self.dtype,
                "sharding": self.sharding,
                **({"partition_spec": _partition_json(self.partition_spec)} if sharded else {}),
                **_given(range=list(self.range) if self.range is not None else None,
                         range_example=True if self.range_example else None, weak=True if self.weak else None)}


@dataclass(frozen=True)
class Output:
    """One array output of a function's program."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    sharding: str | None = None
    partition_spec: tuple[PartitionEntry, ...] | None = None
    #: Format 1.2: the output is the key data (``uint32``, ``dtype``/``shape``) of a typed PRNG key array of this
    #: key dtype (``key<fry>``), which ``jaxport.load`` gives back as keys; None for an array output.
    key: str | None = None

    def to_json(self, sharded: bool = False) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "sharding": self.sharding,
                **({"partition_spec": _partition_json(self.partition_spec)} if sharded else {}),
                **_given(key=self.key)}


@dataclass(frozen=True)
class Derivation:
    """The first input axis a dimension variable can be solved from."""

    input: str
    axis: int
    #: That axis's dimension expression, linear in the variable once earlier variables are known.
    expression: str

    def to_json(self) -> dict[str, Any]:
        return {"input": self.input, "axis": self.axis, "expression": self.expression}


@dataclass(frozen=True)
class DimVar:
    """A dimension variable: its bounds (``bounds.Bounds``, the one rule for ``min`` and ``max``) and where it is
    solved from."""

    bounds: Bounds
    derived_from: Derivation | None = None

    def to_json(self) -> dict[str, Any]:
        derived = self.derived_from
        return {**self.bounds.to_manifest(), **_given(derived_from=derived.to_json() if derived is not None else None)}


# --- the call tree and the output tree ---------------------------------------------------------------------------

#: The kinds of a call-tree node (specs/FORMAT.md, "Call trees"), in the order a reader tests them.
NODE_KINDS = ("input", "static", "list", "dict", "bound")


@dataclass(frozen=True)
class CallNode:
    """A node of the call tree: ``kind`` is one of ``NODE_KINDS`` and ``value`` its content: the input's index
    (``input``), the value baked in at export (``static``, a JSON value), the bind source (``bound``), a tuple of
    nodes (``list``) or a dict of nodes (``dict``). ``name``: the parameter's name, on a positional argument."""

    kind: str
    value: Any
    name: str | None = None

    @property
    def children(self) -> Iterator[tuple[str, CallNode]]:
        """``(key, node)`` of a container's children: dict keys, or list indexes as strings; none for a leaf."""
        if self.kind == "dict":
            yield from self.value.items()
        elif self.kind == "list":
            yield from ((str(i), c) for i, c in enumerate(self.value))

    @property
    def is_free(self) -> bool:
        """Whether a caller passes this argument (it is neither static nor bound)."""
        return self.kind not in ("static", "bound")

    def to_json(self) -> dict[str, Any]:
        if self.kind == "list":
            value: Any = [c.to_json() for c in self.value]
        elif self.kind == "dict":
            value = {k: c.to_json() for k, c in self.value.items()}
        else:
            value = self.value
        return {self.kind: value, **_given(name=self.name)}


@dataclass(frozen=True)
class Signature:
    """How a Python call maps to the program's inputs: one node per positional argument (each with its ``name``)
    and one per keyword argument."""

    args: tuple[CallNode, ...] = ()
    kwargs: Mapping[str, CallNode] = EMPTY

    def to_json(self) -> dict[str, Any]:
        return {"args": [a.to_json() for a in self.args], "kwargs": {k: c.to_json() for k, c in self.kwargs.items()}}


#: The kinds of an output-tree node.
OUTPUT_KINDS = ("output", "none", "list", "tuple", "dict", "node")


@dataclass(frozen=True)
class OutputNode:
    """A node of the output tree: ``kind`` one of ``OUTPUT_KINDS``; ``value`` the output's index (``output``), a
    tuple of nodes (``list``, ``tuple``, ``node``: the children in JAX's flattening order) or a dict of nodes
    (``dict``); ``type_name`` the ``__qualname__`` of a ``node``'s pytree type. Format 1.2: a ``node``'s
    ``module`` (its type's ``__module__``) and ``keys`` (each child's key: a field, attribute or dict key name, or
    an index), from which ``jaxport.load`` rebuilds the user's type."""

    kind: str
    value: Any = None
    type_name: str | None = None
    module: str | None = None
    keys: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        if self.kind == "output":
            return {"output": self.value}
        if self.kind == "none":
            return {"none": True}
        if self.kind == "dict":
            return {"dict": {k: c.to_json() for k, c in self.value.items()}}
        children = [c.to_json() for c in self.value]
        if self.kind == "node":
            return {"node": self.type_name, "children": children,
                    **_given(module=self.module, keys=list(self.keys) if self.keys is not None else None)}
        return {self.kind: children}


# --- the rest of a function --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CustomCall:
    """A custom-call target the program uses: how often, and whether JAX guarantees it (``guaranteed``) or the
    export allowed it (``allowed``)."""

    target: str
    count: int | None = None
    stability: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, **_given(count=self.count, stability=self.stability)}


@dataclass(frozen=True)
class Effects:
    """JAX's effects of the program, as it prints them."""

    ordered: tuple[str, ...] = ()
    unordered: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"ordered": list(self.ordered), "unordered": list(self.unordered)}


@dataclass(frozen=True)
class Constant:
    """One of the largest constants baked into the program."""

    type: str | None = None
    bytes: int | None = None
    location: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "bytes": self.bytes, "location": self.location}


@dataclass(frozen=True)
class EmbeddedConstants:
    """Constants baked into the program: how many, their total size, the largest few."""

    count: int | None = None
    bytes: int | None = None
    largest: tuple[Constant, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {**_given(count=self.count, bytes=self.bytes), "largest": [c.to_json() for c in self.largest]}


@dataclass(frozen=True)
class Mesh:
    """A sharded function's device mesh: axis names and sizes, in order; the sizes multiply to ``nr_devices``."""

    axis_names: tuple[str, ...]
    axis_sizes: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"axis_names": list(self.axis_names), "axis_sizes": list(self.axis_sizes)}


@dataclass(frozen=True)
class Function:
    """One exported function (specs/FORMAT.md, "functions")."""

    payload: str
    calling_convention_version: int
    platforms: tuple[str, ...]
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    signature: Signature
    entrypoint: str | None = None
    stablehlo_version: str | None = None
    x64: bool = False
    #: The bound tensors the program takes (keys of the top-level ``weights.tensors``), in the program's order.
    weights: tuple[str, ...] = ()
    output_tree: OutputNode | None = None
    #: Each dimension variable, in solving order.
    dims: Mapping[str, DimVar] = EMPTY
    constraints: tuple[str, ...] = ()
    shape_assertions: tuple[str, ...] = ()
    custom_calls: tuple[CustomCall, ...] = ()
    allowed_custom_calls: tuple[str, ...] = ()
    disabled_safety_checks: tuple[str, ...] = ()
    kept_inputs: tuple[int, ...] | None = None
    effects: Effects = Effects()
    nr_devices: int = 1
    vjp_order: int = 0
    embedded_constants: EmbeddedConstants = EmbeddedConstants()
    #: Sharded functions only: the mesh, and each bound tensor's PartitionSpec by name.
    mesh: Mesh | None = None
    weights_partition_specs: Mapping[str, tuple[PartitionEntry, ...] | None] | None = None

    @property
    def bounds(self) -> dict[str, Bounds]:
        """Each dimension variable's bounds."""
        return {v: d.bounds for v, d in self.dims.items()}

    def bounds_of(self, variable: str) -> Bounds:
        """One dimension variable's bounds: the default rule (``Bounds()``) for one ``dims`` does not declare."""
        d = self.dims.get(variable)
        return Bounds() if d is None else d.bounds

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.outputs]

    def to_json(self) -> dict[str, Any]:
        sharded = self.mesh is not None
        tree, kept, mesh = self.output_tree, self.kept_inputs, self.mesh
        return {
            "entrypoint": self.entrypoint,
            "payload": self.payload,
            "calling_convention_version": self.calling_convention_version,
            "stablehlo_version": self.stablehlo_version,
            "platforms": list(self.platforms),
            "x64": self.x64,
            "signature": self.signature.to_json(),
            "inputs": [i.to_json(sharded) for i in self.inputs],
            "weights": list(self.weights),
            "outputs": [o.to_json(sharded) for o in self.outputs],
            **_given(output_tree=tree.to_json() if tree is not None else None),
            "dims": {v: d.to_json() for v, d in self.dims.items()},
            "constraints": list(self.constraints),
            "shape_assertions": list(self.shape_assertions),
            "custom_calls": [c.to_json() for c in self.custom_calls],
            "allowed_custom_calls": list(self.allowed_custom_calls),
            "disabled_safety_checks": list(self.disabled_safety_checks),
            **_given(kept_inputs=list(kept) if kept is not None else None),
            "effects": self.effects.to_json(),
            "nr_devices": self.nr_devices,
            "vjp_order": self.vjp_order,
            "embedded_constants": self.embedded_constants.to_json(),
            **({"mesh": mesh.to_json(),
                "weights_partition_specs": {n: _partition_json(s)
                                            for n, s in (self.weights_partition_specs or {}).items()}}
               if mesh is not None else {}),
        }


@dataclass(frozen=True)
class Manifest:
    """A whole manifest: the artifact's ``manifest.json`` member (and its sidecar)."""

    format_version: str
    producer: Producer
    members: Mapping[str, MemberInfo]
    functions: Mapping[str, Function]
    metadata: Metadata = Metadata()
    source: Source = Source()
    #: Only when something is bound: the index of the ``weights.bin`` member.
    weights: Weights | None = None
    format: str = "jaxport"

    @property
    def tensors(self) -> Mapping[str, StoredTensor]:
        """The stored tensors by name (none when nothing is bound)."""
        return self.weights.tensors if self.weights is not None else {}

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "format_version": self.format_version,
            "producer": self.producer.to_json(),
            "metadata": self.metadata.to_json(),
            "source": self.source.to_json(),
            "members": {n: i.to_json() for n, i in self.members.items()},
            "functions": {n: f.to_json() for n, f in self.functions.items()},
            **_given(weights=self.weights.to_json() if self.weights is not None else None),
        }
