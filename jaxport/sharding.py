"""Shardings: a device mesh in the spec, PartitionSpecs per array, and placing inputs on local devices at a call.

A spec's ``mesh: {data: 4, model: 2}`` names the mesh axes and their sizes; an array leaf's ``sharding: [data, null]``
and a bound tree's ``sharding: {w1: [null, model]}`` give PartitionSpecs, one entry per leading axis: ``null`` (not
partitioned), an axis name, or a list of axis names (partitioned over their product). Export lowers the function
with ``jax.jit(..., in_shardings=NamedSharding(AbstractMesh(...), P(...)))``: an abstract mesh needs no devices, so
a one-device machine exports a program for eight. The manifest records the mesh and each array's PartitionSpec
(:func:`describe`); at a call, :func:`runtime_mesh` lays the recorded mesh over the devices JAX sees (every process's
devices, under ``jax.distributed``) and :func:`place` puts each input there.

The spec half of this module (parsing and checking PartitionSpecs) imports nothing heavy; the rest imports JAX when
called.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from . import dimexpr
from ._text import plural
from .errors import PlatformError, SpecError
from .jaxprivate.exported import hlo_sharding_text, named_shardings

#: One PartitionSpec entry: None, an axis name, or a tuple of axis names.
Entry = None | str | tuple[str, ...]
PartitionSpec = tuple[Entry, ...]
#: What the manifest records of an array's sharding: the HLO sharding's text and the PartitionSpec (each or None).
Recorded = tuple[str | None, PartitionSpec | None]


class RecordedMesh(Protocol):
    """A mesh as the manifest records it (``artifact.model.Mesh``): axis names and sizes, in order."""

    @property
    def axis_names(self) -> Sequence[str]: ...

    @property
    def axis_sizes(self) -> Sequence[int]: ...


_AXIS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The most devices a mesh may span (what a manifest's nr_devices may record).
MAX_DEVICES = 1 << 20


# --- the spec ---------------------------------------------------------------------------------------------------


def parse_mesh(raw: Any, fail: Callable[[str], Exception]) -> dict[str, int]:
    """``{axis name: size}`` in the written order, from a spec's ``mesh`` mapping."""
    if not isinstance(raw, dict) or not raw:
        raise fail("'mesh' must map each mesh axis name to its size, e.g. {data: 4, model: 2}.")
    mesh: dict[str, int] = {}
    total = 1
    for name, size in raw.items():
        if not _AXIS.match(str(name)):
            raise fail(f"mesh: {name!r} is not a valid axis name (letters, digits, '_').")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise fail(f"mesh[{name!r}]: the size must be an integer >= 1, found {size!r}.")
        total *= size
        if total > MAX_DEVICES:
            raise fail(f"mesh: the axes multiply to more than {MAX_DEVICES} devices.")
        mesh[str(name)] = size
    return mesh


def parse_partition_spec(raw: Any, mesh: Mapping[str, int] | None, rank: int | None, path: str,
                         fail: Callable[[str], Exception]) -> PartitionSpec:
    """A PartitionSpec from its YAML list, checked against the mesh's axes and the array's rank."""
    if mesh is None:
        raise fail(f"{path}: 'sharding' needs a device mesh: add 'mesh: {{AXIS: SIZE, ...}}' at the top of the "
                   f"spec.")
    if not isinstance(raw, list):
        raise fail(f"{path}: a sharding is a list with one entry per leading axis, each null, a mesh axis or a "
                   f"list of mesh axes, e.g. [data, null]; found {raw!r}.")
    if rank is not None and len(raw) > rank:
        raise fail(f"{path}: the sharding {_yaml(raw)} has {plural(len(raw), 'entry', 'entries')}, but the array has "
                   f"{plural(rank, 'axis', 'axes')}.")
    used: list[str] = []
    out: list[Entry] = []
    for entry in raw:
        names = entry if isinstance(entry, list) else [entry]
        if entry is None:
            out.append(None)
            continue
        for n in names:
            if not isinstance(n, str) or n not in mesh:
                raise fail(f"{path}: {n!r} in the sharding {_yaml(raw)} is not an axis of the mesh "
                           f"({', '.join(mesh)}).")
            if n in used:
                raise fail(f"{path}: mesh axis {n!r} appears twice in the sharding {_yaml(raw)}; an axis "
                           f"partitions at most one array axis.")
            used.append(n)
        out.append(tuple(names) if isinstance(entry, list) else entry)
    return tuple(out)


#: Most assignments of a symbolic dimension's variables tried when checking that a sharding divides it.
MAX_DIVISIBILITY_TRIALS = 4096


def indivisible(shape: Sequence[int | str], spec: PartitionSpec, mesh: Mapping[str, int], where: str,
                fail: Callable[[str], Exception]) -> None:
    """Refuse a ``spec`` that splits an axis of ``shape`` into a number of parts that does not divide its size
    (JAX refuses it at export with its own text, or, for a symbolic size, at the first call that does not fit).

    A symbolic size is tried at each variable's values 1..parts (sums and products of variables are periodic in each
    with that period, so this decides them; with ``//`` or ``%`` it is a check of those values only)."""
    for axis, entry in enumerate(spec):
        if entry is None:
            continue
        names = list(entry) if isinstance(entry, tuple) else [entry]
        parts = 1
        for n in names:
            parts *= mesh[n]
        over = " x ".join(f"{n} ({mesh[n]})" for n in names)
        others = [n for n, k in mesh.items() if n not in names]
        d = shape[axis]
        if isinstance(d, int):
            if d % parts:
                fits = [f"{n} ({mesh[n]})" for n in others if d % mesh[n] == 0]
                fix = f"Shard it over {' or '.join(fits)}, replicate it" if fits else "Replicate it"
                raise fail(f"{where}: axis {axis} has size {d}, which {parts} does not divide, but it is split over "
                           f"{over}. {fix} (null), or change the mesh.")
            continue
        expr = dimexpr.parse(d)
        variables = sorted(dimexpr.variables(expr))
        if parts ** len(variables) > MAX_DIVISIBILITY_TRIALS:
            continue
        env: dict[str, int] = {}
        for i in range(parts ** len(variables)):
            env = {v: 1 + (i // parts ** j) % parts for j, v in enumerate(variables)}
            try:
                value = dimexpr.evaluate(expr, env)
            except dimexpr.DimExprError:
                continue
            if value % parts:
                example = ", ".join(f"{k}={v}" for k, v in env.items())
                raise fail(f"{where}: axis {axis} has size {d}, which is not always a multiple of {parts} "
                           f"(with {example} it is {value}), but it is split over {over}. Write the size as a multiple "
                           f"of {parts} (e.g. {parts}*{variables[0]}), shard the axis over another mesh axis, or "
                           f"replicate it (null).")


def _yaml(raw: Any) -> str:
    if isinstance(raw, list):
        return "[" + ", ".join(_yaml(v) for v in raw) + "]"
    return "null" if raw is None else str(raw)


def text(spec: Any) -> str:
    """``P('data', None)`` for a recorded PartitionSpec (a record's tuple, or JSON), ``P()`` for replicated, ``-`` for
    none."""
    if spec is None:
        return "-"

    def entry(e: Any) -> str:
        if isinstance(e, (list, tuple)):
            return "(" + ", ".join(repr(x) for x in e) + ("," if len(e) == 1 else "") + ")"
        return "None" if e is None else repr(e)

    return "P(" + ", ".join(entry(e) for e in spec) + ")"


def mesh_text(mesh: RecordedMesh | None) -> str:
    """``data=4 x model=2`` for a manifest's ``mesh``."""
    if not mesh:
        return "-"
    return " x ".join(f"{n}={s}" for n, s in zip(mesh.axis_names, mesh.axis_sizes))


def mesh_devices(mesh: RecordedMesh) -> int:
    n = 1
    for s in mesh.axis_sizes:
        n *= int(s)
    return n


# --- export -------------------------------------------------------------------------------------------------------


def auto_axes(n: int) -> tuple[Any, ...]:
    """``Auto`` axis types for a mesh of ``n`` axes.

    jax 0.9.1 - 0.11.0 default a mesh's axes to Auto, 0.11.1 and later to Explicit, under which JAX's own export of a
    sharded function's VJP fails (``ShardingTypeError``) and a payload's Auto mesh no longer matches a default one.
    jaxport names the types on every mesh it builds, at export and at call, so that a sharded artifact and its VJP
    mean the same on every supported JAX.
    """
    from jax.sharding import AxisType

    return (AxisType.Auto,) * n


def abstract_mesh(mesh: Mapping[str, int]) -> Any:
    from jax.sharding import AbstractMesh

    return AbstractMesh(tuple(mesh.values()), tuple(mesh), axis_types=auto_axes(len(mesh)))


def named(mesh: Any, spec: PartitionSpec | None) -> Any:
    """A NamedSharding over ``mesh`` (abstract or concrete); None (not given) is replicated."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    return NamedSharding(mesh, P(*(spec or ())))


def describe(exported: Any) -> tuple[tuple[list[str], list[int]] | None, list[Recorded], list[Recorded]]:
    """What the manifest records of an Exported's shardings: the mesh (axis names and sizes, or None) and, per flat
    input and output, ``(HLO sharding text or None, PartitionSpec or None)``."""
    ins, outs = named_shardings(exported)
    in_hlo = list(getattr(exported, "in_shardings_hlo", None) or [None] * len(exported.in_avals))
    out_hlo = list(getattr(exported, "out_shardings_hlo", None) or [None] * len(exported.out_avals))
    mesh = None
    for s in ins + outs:
        m = getattr(s, "mesh", None)
        if m is not None and tuple(m.axis_names):
            mesh = [str(n) for n in m.axis_names], [int(n) for n in m.axis_sizes]
            break

    def one(s: Any, hlo: Any, aval: Any) -> Recorded:
        if s is None:
            return (None if hlo is None else str(hlo)), None
        spec = tuple(tuple(e) if isinstance(e, tuple) else e for e in s.spec)
        return hlo_sharding_text(s, len(aval.shape)), spec

    return (mesh, [one(s, h, a) for s, h, a in zip(ins, in_hlo, exported.in_avals)],
            [one(s, h, a) for s, h, a in zip(outs, out_hlo, exported.out_avals)])


def jit_sharded(program: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], mesh: Mapping[str, int],
                arg_specs: Sequence[Any], kwarg_specs: Mapping[str, Any],
                out_specs: Sequence[PartitionSpec | None] | None, where: str) -> tuple[Any, tuple[Any, Any]]:
    """``jax.jit`` of ``program(*args, **kwargs)`` with in (and out) shardings over an abstract mesh, traced under
    that mesh, taking ``(args, kwargs)`` as two positional arguments (``jax.jit`` shards positional arguments
    only).

    ``arg_specs``/``kwarg_specs`` mirror ``args``/``kwargs`` with a PartitionSpec (or None) per array leaf;
    ``out_specs`` gives one per output leaf, in flattening order. Returns the jitted function and its arguments.
    """
    import jax

    amesh = abstract_mesh(mesh)
    is_spec = _is_spec_leaf

    def shardings(tree: Any) -> Any:
        return jax.tree_util.tree_map(lambda s: named(amesh, s), tree, is_leaf=is_spec)

    def positional(a: Any, k: Any) -> Any:
        # traced under the spec's mesh, so that with_sharding_constraint(x, P("data")) and get_abstract_mesh() in
        # the function see it, as under jax.set_mesh (no devices needed: the mesh is abstract)
        with jax.sharding.use_abstract_mesh(amesh):
            return program(*a, **k)

    positional.__name__ = getattr(program, "__name__", "program")
    in_shardings = (shardings(tuple(arg_specs)), shardings(dict(kwarg_specs)))
    out_shardings: Any = None
    if out_specs is not None:
        out = jax.eval_shape(positional, tuple(args), dict(kwargs))
        leaves, tree = jax.tree_util.tree_flatten(out)
        if len(out_specs) != len(leaves):
            raise SpecError(f"{where}: 'outputs_sharding' gives {len(out_specs)} sharding"
                            f"{'s' if len(out_specs) != 1 else ''}, but the function returns {len(leaves)} array"
                            f"{'s' if len(leaves) != 1 else ''}; give one per output, in the order 'inspect' lists "
                            f"them (null for unspecified).")
        for i, (s, leaf) in enumerate(zip(out_specs, leaves)):
            if s is not None and len(s) > len(leaf.shape):
                raise SpecError(f"{where}: outputs_sharding[{i}] has {plural(len(s), 'entry', 'entries')}, but "
                                f"output {i} has {plural(len(leaf.shape), 'axis', 'axes')}.")
        out_shardings = jax.tree_util.tree_unflatten(tree, [None if s is None else named(amesh, s)
                                                            for s in out_specs])
    jitted = jax.jit(positional, in_shardings=in_shardings,
                     **({"out_shardings": out_shardings} if out_specs is not None else {}))
    return jitted, (tuple(args), dict(kwargs))


class _Spec(tuple):
    """A PartitionSpec inside a pytree of specs (a plain tuple would be taken for a pytree node)."""


def _is_spec_leaf(x: Any) -> bool:
    return isinstance(x, _Spec)


def spec_leaf(spec: PartitionSpec | None) -> Any:
    """Wrap a PartitionSpec (or None: replicated) as one leaf of a tree given to :func:`jit_sharded`."""
    return _Spec(spec or ())


# --- calling -------------------------------------------------------------------------------------------------------


def runtime_mesh(mesh: RecordedMesh, where: str, devices: Sequence[Any] | None = None) -> Any:
    """The recorded mesh (``model.Mesh``) laid over the devices JAX sees, in device order (all processes'
    devices), or over ``devices`` (a target's, compiled for without them: ``run.compile.aot``)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    needed = mesh_devices(mesh)
    devices = jax.devices() if devices is None else list(devices)
    if len(devices) < needed:
        raise PlatformError(device_count_message(where, needed, len(devices), mesh))
    names, sizes = mesh.axis_names, mesh.axis_sizes
    return Mesh(np.array(devices[:needed]).reshape(tuple(sizes)), tuple(names), axis_types=auto_axes(len(names)))


def device_count_message(where: str, needed: int, have: int, mesh: RecordedMesh | None) -> str:
    """Why a sharded program cannot run here, and the options that make it run."""
    import jax

    on = f" over the mesh {mesh_text(mesh)}" if mesh else ""
    local = jax.default_backend()
    hint = (f" On a CPU-only machine, simulate them with --host-devices {needed} (call and verify; or set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={needed} before JAX starts)") if local == "cpu" else ""
    multi = (" or run it with 'jaxport call' in several processes with --coordinator, --num-processes and "
             f"--process-id so that they hold {needed} devices together")
    return (f"{where} is sharded across {needed} devices{on}, but JAX here has {have} {local} "
            f"device{'s' if have != 1 else ''}.{hint}{';' if hint else ''}{multi}.")


def place(value: Any, sharding: Any) -> Any:
    """``value`` (a numpy array or a memory map) as a global jax.Array laid out by ``sharding``. In a multi-process
    run each device reads only its own slice, so a process reads only the parts it holds."""
    import jax
    import numpy as np

    if isinstance(value, jax.Array) and value.sharding == sharding:
        return value
    if sharding.is_fully_addressable:  # one process holds every device: JAX's own transfer is fastest
        return jax.device_put(value if isinstance(value, (jax.Array, np.ndarray)) else np.asarray(value), sharding)
    arr = value if hasattr(value, "__getitem__") and hasattr(value, "shape") else np.asarray(value)
    if isinstance(arr, jax.Array) and arr.is_fully_addressable:
        arr = np.asarray(arr)
    return jax.make_array_from_callback(tuple(arr.shape), sharding, lambda index: np.asarray(arr[index]))


def gather(value: Any) -> Any:
    """A (possibly multi-process) jax.Array as one numpy array on this process."""
    import numpy as np

    if getattr(value, "is_fully_addressable", True):
        return np.asarray(value)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(value, tiled=True))
