"""``jaxport upgrade``: an artifact re-serialized by the running JAX, checked to compute what the old one computes.

Each function's program is read as ``load`` reads it (every check: digests, the payload against the manifest, the
custom-call allowlist, the program rules; a payload older than the running JAX's window is read by jaxport,
``payload.deserialize``) and exported again through ``jax.export``, calling the old program as the running JAX
calls it: the new payload has this JAX's calling convention, StableHLO and serialization, and a fresh window
(``--for-jax`` writes it for an older JAX instead, ``export.writing.target``). The signature, names, bounds, weights and
metadata are the old manifest's; ``producer.upgraded_from`` records the old producer and the sha256 of the old file.
The old artifact is opened once: its members, its sha256 and the old side of the comparison are all read from that
descriptor, so a file renamed over its path meanwhile is neither upgraded nor compared with.

Before anything is written, old and new are loaded and called on the inputs ``verify`` draws (the smallest sizes,
one that is not a power of two and the upper bounds, under a memory budget) and their outputs compared: any
difference refuses the upgrade (``VerificationError``). The artifact is written like every other one: atomically,
reproducible bytes. An artifact already written by the running JAX (for the same target) is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifact import container
from ..artifact.container import Artifact, open_artifact
from ..artifact.model import Function, Manifest, UpgradedFrom, replace
from ..artifact.output import artifact_output
from ..artifact.signing.bundle import drop_stale
from ..errors import VerificationError
from ..export.lowering import gradients
from ..export.lowering.relower import reexport
from ..export.writing.manifest import program_fields, versions
from ..export.writing.target import Target, for_target, target
from ..program.module_scan import scan_module
from ..run import load as load_mod
from ..run.options import LoadOptions
from ..run.values.inputs import random_inputs
from .plan import plan_cases


@dataclass
class UpgradeResult:
    """What ``upgrade`` did: the artifact written (None when there was nothing to do), the old and new producers'
    JAX, and each function's comparison (cases run, outputs compared)."""

    path: Path | None
    source: Path
    old_jax: str
    new_jax: str
    for_jax: str | None
    nothing_to_do: bool
    #: What the old artifact was written for (its ``producer.for_jax``), None when for its own JAX.
    old_for_jax: str | None = None
    compared: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    manifest: dict[str, Any] | None = field(default=None, repr=False)  # a repr shows what was done, not all of it
    size: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"artifact": str(self.path) if self.path else None, "source": str(self.source),
                "old_jax": self.old_jax, "new_jax": self.new_jax, "for_jax": self.for_jax,
                "old_for_jax": self.old_for_jax, "nothing_to_do": self.nothing_to_do,
                "compared": dict(self.compared), "notes": list(self.notes), "size": self.size}


def _upgraded_function(f: Function, new: Any) -> Function:
    """The manifest entry of the old function for its new program: the fields the program determines re-read."""
    return replace(f, **program_fields(new, scan_module(new.mlir_module_serialized)))


def _compare(old_art: Artifact, new_path: Path, f: Function, fname: str, allowed: list[str] | None) -> int:
    """Call the old (open) and the new artifact's function on the inputs ``verify`` draws; raise on any
    difference. Returns the number of cases compared."""
    import numpy as np

    old_path = old_art.path
    options = LoadOptions(function=fname, allow_custom_calls=tuple(allowed or ()))
    old = load_mod.load_by(old_art, options)
    new = load_mod.load_by(new_path, options)
    cases = plan_cases(f)
    for k, case in enumerate(cases):
        arrays = random_inputs(f, case.dims, seed=k)
        a = old.run(arrays, {})
        b = new.run(arrays, {})
        for (name, x), (_, y) in zip(a.leaves, b.leaves):
            x, y = np.asarray(x), np.asarray(y)
            same = x.shape == y.shape and x.dtype == y.dtype and (
                np.array_equal(x, y, equal_nan=True) if x.dtype.kind in "fc" else np.array_equal(x, y))
            if not same:
                dims = ", ".join(f"{v}={n}" for v, n in case.dims.items()) or "static shapes"
                raise VerificationError(
                    f"{old_path}: function {fname!r}: the upgraded program's output {name!r} differs from the old "
                    f"program's at {dims}; nothing was written. Keep the old artifact, or export the function "
                    f"again with this JAX.")
    return len(cases)


def upgrade(artifact: str | Path, output: str | Path, *, for_jax: str | None = None,
            allow_custom_calls: Iterable[str] | None = None, write_manifest: bool = True) -> UpgradeResult:
    """Write ``output``: ``artifact`` re-serialized by the running JAX (see the module docstring).

    ``for_jax`` writes it for that older JAX instead (``export --for-jax``). ``allow_custom_calls`` are the
    custom-call targets beyond JAX's guaranteed-stable ones that the programs may call (as for ``load``). An
    artifact already written by the running JAX (and for the same ``for_jax``) has nothing to upgrade: it is
    written to ``output`` as it is (its manifest and members, each checked against its digest), so that a script
    that uploads ``output`` next finds it, and the result says ``nothing_to_do``.
    """
    import jax

    source = Path(artifact)
    allowed = list(allow_custom_calls) if allow_custom_calls is not None else None
    t: Target | None = target(for_jax) if for_jax is not None else None
    now = versions()
    with open_artifact(source) as art:
        old: Manifest = art.model
        wanted = t.jax if t is not None else None
        notes: list[str] = []
        programs = {fname: load_mod.runnable_program(art, fname, allowed, str(source), notes)
                    for fname in old.functions}
        current = (old.producer.jax == now.jax and old.producer.jaxlib == now.jaxlib and
                   old.producer.for_jax == wanted and not notes)  # written here, every payload read by this JAX
        outputs = artifact_output(output, source.name, manifest=write_manifest, source=source, command="upgrade")
        outputs.check([source])
        out = outputs.path
        functions: dict[str, Function] = {}
        members: dict[str, Any] = {n: art.read(n) for n in old.members}
        if current:  # nothing to upgrade: its copy, as it is
            raw = container.write_artifact(out, old, members)
            notes += [stale] if (stale := drop_stale(out)) is not None else []
            outputs.write_sidecar(raw, [source])
            return UpgradeResult(out, source, old.producer.jax, now.jax, wanted, True, old_for_jax=wanted,
                                 notes=notes, manifest=container.with_members(old, members).to_json(),
                                 size=out.stat().st_size)
        for fname, f in old.functions.items():
            new = reexport(programs[fname], f, f"{source}: function {fname!r}")
            if t is not None:
                new = for_target(new, t, str(source), fname)
            payload = gradients.serialize(new, f.vjp_order, str(source), fname)
            members[f.payload] = payload
            functions[fname] = _upgraded_function(f, new)
        digest = art.file_sha256()  # of the file these members were read from, not of whatever the path names now
        p = old.producer
        producer = replace(now, for_jax=wanted,
                           upgraded_from=UpgradedFrom(p.jaxport, p.jax, p.jaxlib, digest, p.for_jax))
        manifest = replace(old, producer=producer, functions=functions)
        tmp = out.with_name(f".{out.name}.upgrading-{os.getpid()}")
        compared: dict[str, int] = {}
        try:
            container.write_artifact(tmp, manifest, members)
            for fname, f in functions.items():
                compared[fname] = _compare(art, tmp, f, fname, allowed)
            raw = container.write_artifact(out, manifest, members)
        finally:
            tmp.unlink(missing_ok=True)
    stale = drop_stale(out)  # a signature of the file this one replaced: removed, and said
    notes += [stale] if stale is not None else []
    outputs.write_sidecar(raw, [source])
    written = container.with_members(manifest, members).to_json()
    return UpgradeResult(out, source, old.producer.jax, jax.__version__, wanted, False, p.for_jax, compared, notes,
                         written, out.stat().st_size)

