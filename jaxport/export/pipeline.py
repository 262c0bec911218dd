"""The export pipeline: entry point -> spec -> symbolic shapes -> jax.export -> checks -> artifact.

Each stage lives in its own module; this one runs them in order and decides names and paths.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from ..checks import check_custom_calls, check_effects
from ..errors import ExportError, SpecError
from ..spec import BindLeaf, ShapeSpec, Where, check_platform, load_spec
from . import gradients, lower
from .entrypoint import load_entrypoint
from .manifest import build_function_entry
from .write import ExportResult, artifact_metadata, relative_path, write_artifact

#: Embedded constants above this many bytes in total draw a warning.
LARGE_CONSTANTS_BYTES = 1 << 20


def _record_entrypoint(text: str, base: Path) -> str:
    """The entry point as the manifest records it: a file path relative to the current directory."""
    target, _, attr = text.rpartition(":")
    if target.endswith(".py") or "/" in target or os.sep in target:
        return f"{relative_path(base / target)}:{attr}"
    return text


def export(
    entrypoint: str | None,
    spec: ShapeSpec | str | Path,
    *,
    output: str | Path | None = None,
    platforms: list[str] | None = None,
    allow_custom_calls: list[str] | tuple[str, ...] = (),
    name: str | None = None,
    version: str | None = None,
    strip_locations: bool = False,
    write_manifest: bool = True,
    bind: dict[str, str] | None = None,
    vjp_order: int | None = None,
) -> ExportResult:
    """Export the function(s) of a spec into an artifact.

    ``entrypoint`` (``model.py:NAME`` or ``package.module:NAME``, relative to the current directory) names the
    function of a single-function spec; a multi-function spec names each function's entry point itself (relative
    to the spec file). Options given here override the spec's; ``bind`` maps a top-level argument name to a bound
    source (a file relative to the current directory, or ``model.py:NAME``), as ``--bind NAME=SOURCE`` does.
    ``vjp_order`` (default: the spec's ``vjp_order``) stores that many orders of derivatives (VJPs) with each
    function, so that ``jax.grad`` works through ``jaxport.load``.
    """
    if not isinstance(spec, ShapeSpec):
        spec = load_spec(spec)
    spec_dir = spec.base_dir or Path.cwd()
    plats = [check_platform(p, "--platform") for p in platforms] if platforms else spec.platforms
    allowed = sorted(set(spec.allow_custom_calls) | set(allow_custom_calls))

    jobs: list[tuple[str, Any, Any, str]] = []  # (function name, FunctionSpec, Entrypoint, recorded entry)
    for fname, fspec in spec.functions.items():
        text = entrypoint if fname is None else (fspec.entrypoint or entrypoint)
        if text is None:
            raise SpecError(f"{fspec.where}: no entry point for function {fname!r}: give 'entrypoint: "
                            f"model.py:NAME' in the spec or on the command line.")
        base = Path.cwd() if (fname is None or fspec.entrypoint is None) else spec_dir
        entry = load_entrypoint(text, base)
        if bind:
            fspec = _apply_binds(fspec, entry.function, bind)
        jobs.append((fname or entry.name, fspec, entry, _record_entrypoint(text, base)))

    meta = artifact_metadata(spec.metadata, name, version, jobs[0][0])

    warnings: list[str] = []
    functions: dict[str, Any] = {}
    payloads: dict[str, bytes] = {}
    all_tensors: list[Any] = []
    for fname, fspec, entry, recorded in jobs:
        low = lower.lower(entry, fspec, spec, name=fname, platforms=plats, allow_custom_calls=allowed,
                          strip_locations=strip_locations)

        check_custom_calls(entry.spec, low.scan, set(allowed))
        payload_name = f"functions/{fname}.jaxexport"
        order = spec.vjp_order if vjp_order is None else vjp_order
        check_effects(low.exported, entry.spec, fname)
        try:
            payloads[payload_name] = gradients.serialize(low.exported, order, entry.spec, fname, root=entry.root,
                                                         strip=strip_locations)
        except (ValueError, TypeError) as e:  # JAX refuses output pytrees it cannot serialize
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            raise ExportError(f"{entry.spec}: function {fname!r} cannot be serialized: {first.rstrip('.')}. JAX "
                              f"serializes "
                              f"dicts, lists, tuples and None; return one of those, or register the type with "
                              f"jax.export.register_namedtuple_serialization (or register_pytree_node_serialization) "
                              f"before exporting and before loading.") from None
        functions[fname] = build_function_entry(low, spec, recorded, payload_name, allowed)
        functions[fname]["vjp_order"] = order
        all_tensors.extend(low.tensors)
        wide = [t.name for t in low.tensors if str(t.array.dtype) in ("float64", "complex128")]
        if wide:
            shown = ", ".join(wide[:5]) + (", ..." if len(wide) > 5 else "")
            warnings.append(f"function {fname!r} binds 64-bit float tensors ({shown}), so its program runs with "
                            f"jax_enable_x64 and may compute and return float64 where the model gives float32 "
                            f"under plain JAX. Convert them (e.g. astype(np.float32)) unless that is intended.")
        if low.unused_weights:
            shown = ", ".join(low.unused_weights[:10]) + (", ..." if len(low.unused_weights) > 10 else "")
            warnings.append(f"function {fname!r} never reads {len(low.unused_weights)} bound tensor(s): {shown}. "
                            f"They are stored anyway; remove them from the bound value to save space.")
        total = low.scan.constant_bytes()
        if total > LARGE_CONSTANTS_BYTES:
            largest = functions[fname]["embedded_constants"]["largest"][0]
            at = "" if largest["location"] == "unknown location" else f", at {largest['location']}"
            warnings.append(
                f"function {fname!r} embeds {_mb(total)} of constants in its program (largest: {largest['type']}, "
                f"{_mb(largest['bytes'])}{at}). Closed-over arrays bloat the artifact and slow export: pass them "
                f"as arguments instead.")

    return write_artifact(output, meta, spec.file, functions, payloads, all_tensors, write_manifest=write_manifest,
                          warnings=warnings)


def _apply_binds(fspec: Any, fn: Any, bind: dict[str, str]) -> Any:
    """A copy of ``fspec`` where each named top-level argument is bound to its source."""
    args, kwargs = list(fspec.args), dict(fspec.kwargs)
    names = lower.param_names(fn, len(args))
    for name, source in bind.items():
        leaf = BindLeaf(source, Where(f"--bind {name}", 0), Path.cwd())
        if name in names:
            args[names.index(name)] = leaf
        else:
            kwargs[name] = leaf
    return dataclasses.replace(fspec, args=args, kwargs=kwargs)


def _mb(n: int) -> str:
    """A byte count in kB or MB, for warnings."""
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"
