"""The artifact format's versions: the version this jaxport writes and reads, its history, and the version an
artifact is labelled with (``written_version``). ``manifest`` re-exports the names. No JAX."""

from __future__ import annotations

from .. import dtypes
from . import model

#: The artifact format version, "MAJOR.MINOR". A reader accepts any minor of its major and refuses a newer major.
#: History:
#:   1.0 (2026-11-29): first version: zip container, manifest.json first, one JAX serialization per function.
#:        Before 1.0 was released it gained, additively, the weights section and member, vjp_order values above 0,
#:        and, for sharded functions, mesh, weights_partition_specs and each array's partition_spec; then an input's
#:        range, source.spec_sha256 and source.binds, with recorded paths relative to the export root.
#:   1.1 (2026-12-03): producer.for_jax (export --for-jax) and producer.upgraded_from (jaxport upgrade), optional.
#:   1.2 (2026-12-03): an output tree's node records its type's module and its children's keys, and an output may
#:        be the key data of PRNG keys (outputs[].key), optional.
#:   1.3 (2026-12-06): the sub-byte dtypes int4, uint4 and float4_e2m1fn for inputs, outputs and bound tensors, whose
#:        tensors are stored packed, two elements per byte; an input's weak (a Python number's weak type) and
#:        range_example (a range taken from a like: value), optional. Only an artifact using one is 1.3; a 1.2 reader
#:        refuses a sub-byte dtype it does not know rather than misreading it, and ignores the two fields.
#: A writer labels an artifact with the oldest version that has every field it holds (``written_version``): one that
#: uses no field a later minor added is the 1.0 it always was, byte for byte.
FORMAT_VERSION = "1.3"
FORMAT_MAJOR = 1


def written_version(m: model.Manifest) -> str:
    """The format version an artifact is written as: the oldest that has every field ``m`` holds (1.3 for a sub-byte
    dtype or a weakly typed input, 1.2 for a typed output tree or key outputs, 1.1 for ``producer.for_jax`` and
    ``producer.upgraded_from``, else 1.0), so that an older jaxport's reader and a policy's ``format_version`` range
    see what the artifact needs, not which jaxport wrote it."""
    if _uses_1_3(m):
        return "1.3"
    if any(_uses_1_2(f) for f in m.functions.values()):
        return "1.2"
    p = m.producer
    return "1.1" if p.for_jax is not None or p.upgraded_from is not None else "1.0"


def _uses_1_2(f: model.Function) -> bool:
    """Whether a function holds a 1.2 field: an output of key data, or an output node with its type's module."""

    def typed(node: model.OutputNode | None) -> bool:
        if node is None or node.kind in ("output", "none"):
            return False
        if node.kind == "node" and (node.module is not None or node.keys is not None):
            return True
        return any(typed(c) for c in (node.value.values() if node.kind == "dict" else node.value))

    return any(o.key is not None for o in f.outputs) or typed(f.output_tree)


def _uses_1_3(m: model.Manifest) -> bool:
    """Whether an input, an output or a bound tensor has a sub-byte dtype (stored packed), or an input is weak or
    has a range taken from an example."""
    if any(i.weak or i.range_example for f in m.functions.values() for i in f.inputs):
        return True
    names = [i.dtype for f in m.functions.values() for i in f.inputs]
    names += [o.dtype for f in m.functions.values() for o in f.outputs]
    if m.weights is not None:
        names += [t.dtype for t in m.weights.tensors.values()]
    return any(n in dtypes.PACKED for n in names)
