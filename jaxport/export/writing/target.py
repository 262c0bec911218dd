"""Artifacts for an older JAX: ``export --for-jax VERSION`` (and ``upgrade --for-jax``, ``rebind --for-jax``).

A JAX reads the StableHLO its jaxlib knows, up to one version (``releases.STABLEHLO``): jax 0.10.2 reads up to
1.17.0, while jax 0.12.0.1 writes 1.18.0. StableHLO writes a portable artifact for any older reader down to its
minimum (``serialize_portable_artifact(module, "1.13.8")``), so the running JAX's program is re-serialized at the
version the target reads; the rest of the payload is read by every supported JAX (calling conventions 9 and 10,
the flatbuffer fields that jax 0.9.1 reads are still written; ``make test-cross`` calls such artifacts under
0.9.1 and 0.10.2). The manifest records the target (``producer.for_jax``), which dates the artifact's window.

A program that uses an operation or type the target's StableHLO lacks cannot be written for it: the export is
refused (``ExportError``, exit 5) naming the operation and the oldest supported JAX whose StableHLO has it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ...artifact.window.compat import version_key
from ...artifact.window.releases import STABLEHLO
from ...errors import ExportError, UsageError
from ...jaxprivate.exported import vjp_getter, with_vjp_getter
from ...jaxprivate.mlir import (
    deserialize_portable_artifact,
    make_ir_context,
    serialize_portable_artifact,
    serialize_with_sdy,
)

#: What StableHLO's serializer says about an operation or type it cannot write for the target version.
_FAILED_OP = re.compile(r"(?:failed to legalize operation|failed to convert|op|operation) '([\w.]+)'")
_FAILED_TYPE = re.compile(r"(type|attribute) '?([^'\n]+?)'? (?:is not|cannot be|was not)")


@dataclasses.dataclass(frozen=True)
class Target:
    """The JAX an artifact is written for, and the StableHLO version its payloads are serialized as."""

    jax: str
    stablehlo: str

    def written(self, exported: Any, where: str, fname: str) -> Any:
        """``exported`` written for this JAX (:func:`for_target`): what the export pipeline writes, which holds a
        target only when one is named (``ExportRequest.written_for``) and so imports this module only then."""
        return for_target(exported, self, where, fname)


def target(version: str, option: str = "--for-jax") -> Target:
    """The target of ``--for-jax VERSION``: a JAX release from the oldest jaxport supports up to the running one.
    A release the table has no StableHLO version for reads at least what the newest older listed release reads."""
    import jax

    key = version_key(version)
    listed = sorted(STABLEHLO, key=version_key)
    oldest, running = listed[0], jax.__version__
    if not key or key < version_key(oldest) or key > version_key(running):
        raise UsageError(f"{option} {version}: not a JAX release from {oldest} (the oldest jaxport supports) up to "
                         f"{running} (the one running here). Give the version of the JAX the artifact's consumers "
                         f"have installed, e.g. {option} {oldest}.")
    older = [v for v in listed if version_key(v) <= key]
    return Target(version, STABLEHLO[older[-1]])


def _oldest_with(module: Any, since: str) -> str | None:
    """The oldest supported JAX whose StableHLO can hold ``module``, trying each listed release newer than
    ``since``; None when none can (the running JAX's own export is the only one)."""
    for version in sorted(STABLEHLO, key=version_key):
        if version_key(version) <= version_key(since):
            continue
        try:
            serialize_portable_artifact(module, STABLEHLO[version], serialize_with_sdy())
            return version
        except Exception:  # noqa: BLE001 - that release's StableHLO cannot write it either
            continue
    return None


def _what_fails(message: str) -> str:
    m = _FAILED_OP.search(message)
    if m:
        op = re.sub(r"^vhlo\.(\w+?)(?:_v\d+)?$", r"stablehlo.\1", m.group(1))  # vhlo.composite_v2: stablehlo.composite
        return f"the operation {op}"
    m = _FAILED_TYPE.search(message)
    if m:
        return f"the {m.group(1)} {m.group(2)}"
    first = message.strip().splitlines()[0] if message.strip() else "an operation"
    return f"what StableHLO reports as: {first[:200]}"


def module_for(module_bytes: bytes, t: Target, where: str, fname: str) -> bytes:
    """A payload's StableHLO module re-serialized as version ``t.stablehlo``, for jax ``t.jax``."""
    import jax

    ctx = make_ir_context()
    with ctx:
        module = deserialize_portable_artifact(module_bytes)
        diagnostics: list[str] = []

        def keep(d: Any) -> bool:
            diagnostics.append(str(d.message))
            return True

        handler = ctx.attach_diagnostic_handler(keep)
        try:
            return serialize_portable_artifact(module, t.stablehlo, serialize_with_sdy())
        except Exception as e:  # noqa: BLE001 - StableHLO reports an op it cannot write in its own words
            message = "\n".join(diagnostics + [str(e)])
            oldest = _oldest_with(module, t.jax)
            has = f"the oldest JAX whose StableHLO has it is jax {oldest}" if oldest else \
                f"no JAX older than this jax {jax.__version__} has it"
            raise ExportError(f"{where}: function {fname!r} cannot be written for jax {t.jax} (StableHLO "
                              f"{t.stablehlo}): it uses {_what_fails(message)}, which that StableHLO lacks; {has}. "
                              f"Give --for-jax {oldest or jax.__version__} or newer, or change the function.") from None
        finally:
            handler.detach()


def for_target(exported: Any, t: Target, where: str, fname: str) -> Any:
    """``exported`` (a ``jax.export.Exported`` of the running JAX) with its module, and those of its VJPs, written
    for ``t``."""
    new = dataclasses.replace(exported, mlir_module_serialized=module_for(exported.mlir_module_serialized, t,
                                                                          where, fname))
    get_vjp = vjp_getter(exported)
    if get_vjp is None:
        return new
    return with_vjp_getter(new, lambda *a: for_target(get_vjp(*a), t, where, f"{fname} (its VJP)"))
