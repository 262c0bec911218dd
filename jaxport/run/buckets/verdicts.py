"""Whether calls of a loaded function may be padded, split and merged along each dimension variable: the row-wise
proof (``rowwise``, the one ``jaxport compile`` records), decided once per program and remembered in the cache
directory, and the *batch variable* that serving and the batch engines (``serve.batching``) pad, split and merge
along. The loaded function and its JAX backend are types here: the run core hands them over.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ... import usercache
from ...artifact import contract
from ...artifact.model import Function, Input, Output
from ...jaxprivate.runtime import lapack_left_alone, lapack_targets
from ...program.checks import checked_targets
from .padding import padding_verdicts, specializer
from .rowwise import Verdict, exact_axes

if TYPE_CHECKING:  # types only: the buckets sit below the run core
    from ..jax_backend import JaxBackend
    from ..loaded import Loaded


def verdicts_of(loaded: Loaded, cache_dir: str | Path | None = None) -> dict[str, Verdict]:
    """Whether calls may pad each dimension variable of a loaded function (``rowwise``, as ``jaxport compile``
    decides it): the program specialized at two sizes of each variable and compared. The verdicts are remembered in
    ``cache_dir`` (default: the loaded function's, ``load(cache_dir=)``, else the active cache directory), keyed by
    the program and the function's record, so that the next worker of a batch job, or the next start of a server,
    does not specialize it again."""

    f = loaded.function_record
    variables = contract.dimension_variables(f)
    if loaded.runtime != "jax":
        return {v: Verdict(v, False, f"the {loaded.runtime} runtime offers no program to check it on")
                for v in variables}
    backend = cast("JaxBackend", loaded.backend)
    member = loaded.model.members.get(f.payload)
    directory = Path(cache_dir).expanduser() if cache_dir is not None else \
        loaded.cache_dir or usercache.active_cache_dir()
    digest = None
    if member is not None:
        digest = padding_digest(member.sha256, f)
        found = usercache.read_record(directory, PADDING_RECORD, digest, member.sha256)
        loaded.notes.extend(n for n in usercache.vouching_notes(member.sha256) if n not in loaded.notes)
        remembered = _remembered(found, f, variables)
        if remembered is not None:
            return remembered
        if found is not None:
            loaded.notes.append(f"ignored the padding verdicts in the cache {directory}: they do not fit function "
                                f"{loaded.function!r} (damaged, or written for another program); proving them "
                                f"again.")
    specialized = specializer(backend, f, fast=True)
    # Lowering a call of the exported program initializes jaxlib's LAPACK kernels (importing scipy.linalg: 0.3-0.4 s
    # of a batch worker's start) unless told not to; a program the allowlist check found no LAPACK call in does not
    # need them, as ``JaxBackend.compile`` decides for its own lowering.
    targets = checked_targets(backend.exported.mlir_module_serialized)
    quiet = targets is not None and not targets & lapack_targets()
    with lapack_left_alone() if quiet else contextlib.nullcontext():
        try:  # the payload's portable artifact read as is (its text prints every constant in hex)
            verdicts = padding_verdicts(f, len(f.weights), specialized,
                                        bytes(backend.exported.mlir_module_serialized))
        except Exception:  # noqa: BLE001 - an MLIR that cannot read it so: the text, as JAX gives it
            verdicts = padding_verdicts(f, len(f.weights), specialized, backend.exported.mlir_module())
    if digest is not None:
        usercache.write_record(directory, PADDING_RECORD, digest,
                               {v: {"allowed": d.allowed, "reason": d.reason, "inputs": d.inputs,
                                    "outputs": d.outputs, "split": d.split, "split_reason": d.split_reason}
                                for v, d in verdicts.items()})
    return verdicts


#: The kind of the remembered padding verdicts (``usercache.read_record``); a new proof rule takes a new one (2: the
#: splitting and merging verdict; 3: unused operations dropped before the two sizes are compared; 4: a variable whose
#: value the program computes with is refused, ``dimvalues``; 5: that refusal only where the two sizes agree).
PADDING_RECORD = "padding-verdicts-5"


def padding_digest(program: str, f: Function) -> str:
    """The key of a function's remembered padding verdicts: its program's sha256 and its manifest record."""
    record = json.dumps([program, f.to_json(), len(f.weights)], sort_keys=True, default=str)
    return hashlib.sha256(record.encode()).hexdigest()


def _remembered(value: Any, f: Function, variables: Sequence[str]) -> dict[str, Verdict] | None:
    """Verdicts read back from their record, or None for anything that is not exactly one per variable, each with
    the axes the manifest sizes by it (``rowwise.exact_axes``) where it allows padding."""
    if not isinstance(value, dict) or sorted(value) != sorted(variables):
        return None
    out = {}
    for v in variables:
        d = value[v]
        if not isinstance(d, dict) or type(d.get("allowed")) is not bool or not isinstance(d.get("reason"), str) \
                or type(d.get("split")) is not bool or not isinstance(d.get("split_reason"), str):
            return None
        axes: list[dict[str, list[int]]] = []
        for a in (d.get("inputs"), d.get("outputs")):
            if not isinstance(a, dict) or not all(isinstance(k, str) and isinstance(x, list) and
                                                  all(type(i) is int for i in x) for k, x in a.items()):
                return None
            axes.append(dict(a))
        if d["allowed"] and (axes[0] != exact_axes(f.inputs, v, "input")[0] or
                             axes[1] != {o.name: exact_axes(f.outputs, v, "output")[0].get(o.name, [])
                                         for o in f.outputs}):
            return None  # axes no call of this function has: padding there would fail every call
        out[v] = Verdict(v, d["allowed"], d["reason"], axes[0], axes[1], d["split"], d["split_reason"])
    return out


def batch_variable(f: Function, verdicts: Mapping[str, Verdict]) -> tuple[str | None, str]:
    """The variable that sizes axis 0 of every input and output, exactly, and may be padded; or None and why not."""
    entries: list[tuple[str, Input | Output]] = [("input", e) for e in f.inputs] + [("output", e) for e in f.outputs]
    if not f.inputs:
        return None, "the function takes no inputs"
    first: str | None = None
    for kind, e in entries:
        shape = e.shape
        axis0 = shape[0].strip() if shape and isinstance(shape[0], str) else None
        if axis0 is None or axis0 not in verdicts:
            what = "is a scalar" if not shape else f"has axis 0 = {shape[0]}, not a dimension variable"
            return None, f"{kind} {e.name!r} {what}"
        if first is None:
            first = axis0
        elif axis0 != first:
            return None, f"{kind} {e.name!r} has axis 0 = {axis0}, but {entries[0][0]} " \
                         f"{entries[0][1].name!r} has {first}"
    assert first is not None
    verdict = verdicts[first]
    if not verdict.allowed:
        return None, f"padding {first} is not proven safe: {verdict.reason}"
    return first, ""
