"""The export pipeline: entry point -> spec -> symbolic shapes -> jax.export -> checks -> artifact.

Each stage lives in its own module; this one runs them in order and decides names and paths.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._text import human_bytes
from ..artifact.model import Function, Source, replace
from ..errors import ExportError, SpecError, UsageError
from ..program.checks import check_custom_calls, check_effects
from ..spec import ShapeSpec, check_platform
from ..spec.build import as_shape_spec, like_values
from . import gradients, lower
from .binding import apply_binds
from .entrypoint import in_memory_values, load_entrypoint
from .live import live_entry
from .manifest import build_function_entry, versions
from .paths import IN_MEMORY, RootPaths
from .target import Target, for_target, target
from .write import ExportResult, artifact_metadata, build_result

#: Embedded constants above this many bytes in total draw a warning.
LARGE_CONSTANTS_BYTES = 1 << 20


def export(
    fn: Any,
    spec: Any,
    output: str | Path | None = None,
    *,
    platforms: list[str] | None = None,
    allow_custom_calls: list[str] | tuple[str, ...] = (),
    name: str | None = None,
    version: str | None = None,
    strip_locations: bool = False,
    write_manifest: bool = True,
    bind: dict[str, Any] | None = None,
    vjp_order: int | None = None,
    root: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    for_jax: str | None = None,
) -> ExportResult:
    """Export the function(s) of a spec into an artifact; write it to ``output`` when given.

    ``fn`` is the function of a single-function spec: a callable (a function, a ``jax.jit`` of one, a bound method,
    a ``functools.partial``, a callable model; see ``live`` for what the manifest records of it), or an entry point
    ``model.py:NAME`` / ``package.module:NAME`` (relative to the current directory). A multi-function spec names
    each function's entry point itself (relative to the spec file); ``fn`` is then None, or the callable for the
    functions that name none. ``spec`` is a spec file's path, YAML text, a dict with the YAML's structure, a
    ``jaxport.Spec`` or a ``ShapeSpec`` (see ``specbuild``). Options given here override the spec's.

    ``bind`` maps a parameter name to a bound value, as ``--bind NAME=SOURCE`` does (see ``binding``: the spec need
    not list the parameter): a source string (a file relative to the current directory, or ``model.py:NAME``) or an
    in-memory pytree (dicts of numpy or JAX arrays, flax variables, an nnx module or state, an equinox module), whose
    source the manifest records as ``<in-memory>``. ``name`` names the artifact (``metadata.name``) and, in a
    single-function export when it is an identifier, the function too (replacing the spec's ``name:`` and the
    Python name). ``vjp_order`` (default: the spec's ``vjp_order``) stores that many orders of derivatives (VJPs)
    with each function, so that ``jax.grad`` works through ``jaxport.load``. ``root`` (default: the spec file's
    directory; the current directory for a spec given as text, a dict or a ``Spec``) is the directory the manifest
    records paths relative to (see ``paths``): the same inputs give the same bytes from any current directory.
    ``progress``, when given, is called with the text of each stage as it starts (``lowering predict``).
    ``for_jax`` writes the artifact for that older JAX (``target``): its payloads' StableHLO at the version that JAX
    reads, the window dated by it (``producer.for_jax``); a program it cannot hold is an ``ExportError``.

    Returns an ``ExportResult``: without ``output`` nothing is written, and ``save``, ``to_bytes`` and ``load`` give
    the artifact.
    """
    likes = like_values(spec)  # the values of jaxport.like(...) arguments, by their in-memory names
    spec = as_shape_spec(spec)
    spec_dir = spec.base_dir or Path.cwd()
    paths = RootPaths(_export_root(root, spec_dir))
    plats = [check_platform(p, "--platform") for p in platforms] if platforms else spec.platforms
    allowed = sorted(set(spec.allow_custom_calls) | set(allow_custom_calls))
    sources, in_memory = _bind_sources(bind)
    written_for = target(for_jax) if for_jax is not None else None
    with in_memory_values({**likes, **in_memory}):
        return _export(fn, spec, output, spec_dir, paths, plats, allowed, name, version, strip_locations,
                       write_manifest, sources, vjp_order, progress or (lambda text: None), written_for)


def _export(fn: Any, spec: ShapeSpec, output: str | Path | None, spec_dir: Path, paths: RootPaths,
            plats: list[str] | None, allowed: list[str], name: str | None, version: str | None,
            strip_locations: bool, write_manifest: bool, bind: dict[str, str], vjp_order: int | None,
            progress: Callable[[str], None], written_for: Target | None = None) -> ExportResult:
    jobs: list[tuple[str, Any, Any, str]] = []  # (function name, FunctionSpec, Entrypoint, recorded entry)
    warnings: list[str] = []
    for fname, fspec in spec.functions.items():
        given = fn if fname is None else (fspec.entrypoint or fn)
        if given is None:
            raise SpecError(f"{fspec.where}: no entry point for function {fname!r}: give 'entrypoint: "
                            f"model.py:NAME' in the spec or on the command line.")
        progress(f"loading {given if isinstance(given, str) else 'the function'}")
        if isinstance(given, str):
            base = Path.cwd() if (fname is None or fspec.entrypoint is None) else spec_dir
            entry, live = load_entrypoint(given, base), None
        else:
            live = live_entry(given, paths)
            entry = live.entry
        if bind:
            fspec = apply_binds(fspec, entry.function, bind, entry.attribute)
        if fname is None:
            fname = name if name is not None and _IDENTIFIER.match(name) else (spec.name or entry.name)
        if live is None:
            recorded = paths.entrypoint(given, base)
        else:
            recorded = live.recorded_entry(fname)
            warnings += [w for w in [live.warning(fname)] if w]
        jobs.append((fname, fspec, entry, recorded))

    meta = artifact_metadata(spec.metadata, name, version, jobs[0][0])
    source = _source(spec, paths, bind)

    functions: dict[str, Function] = {}
    payloads: dict[str, bytes] = {}
    all_tensors: list[Any] = []
    for fname, fspec, entry, recorded in jobs:
        progress(f"lowering {fname}")
        low = lower.lower(entry, fspec, spec, name=fname, platforms=plats, allow_custom_calls=allowed,
                          strip_locations=strip_locations,
                          record_source=lambda leaf: paths.source(leaf.source, leaf.base_dir or spec_dir,
                                                                  f"the bound source {leaf.source} ({leaf.where})"))

        check_custom_calls(entry.spec, low.scan, set(allowed))
        if written_for is not None:
            progress(f"writing {fname} for jax {written_for.jax}")
            low = dataclasses.replace(low, exported=for_target(low.exported, written_for, entry.spec, fname))
        payload_name = f"functions/{fname}.jaxexport"
        order = spec.vjp_order if vjp_order is None else vjp_order
        check_effects(low.exported, entry.spec, fname)
        progress(f"serializing {fname}")
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
        functions[fname] = build_function_entry(low, spec, recorded, payload_name, allowed, vjp_order=order)
        all_tensors.extend(low.tensors)
        wide = [t.name for t in low.tensors if str(t.array.dtype) in ("float64", "complex128")]
        if wide:
            shown = ", ".join(wide[:5]) + (", ..." if len(wide) > 5 else "")
            warnings.append(f"function {fname!r} binds 64-bit float tensors ({shown}), so its program runs with "
                            f"jax_enable_x64 and may compute and return float64 where the model gives float32 "
                            f"under plain JAX. Convert them (e.g. astype(np.float32)) unless that is intended.")
        seeds = [n for n in low.unused_weights if n.endswith(_KERAS_SEED_STATE)]
        if seeds:  # every Keras model with dropout has them: one short line, whatever their number
            warnings.append(f"function {fname!r} never reads the {len(seeds)} Keras seed-generator state tensor(s) "
                            f"bound with it (dropout's random state, read only in training, e.g. {seeds[0]}); they "
                            f"are stored anyway (a few bytes each).")
        unused = [n for n in low.unused_weights if not n.endswith(_KERAS_SEED_STATE)]
        if unused:
            shown = ", ".join(unused[:10]) + (", ..." if len(unused) > 10 else "")
            warnings.append(f"function {fname!r} never reads {len(unused)} bound tensor(s): {shown}. "
                            f"They are stored anyway; remove them from the bound value to save space.")
        total = low.scan.constant_bytes()
        if total > LARGE_CONSTANTS_BYTES:
            largest = functions[fname].embedded_constants.largest[0]
            at = "" if largest.location == "unknown location" else f", at {largest.location}"
            warnings.append(
                f"function {fname!r} embeds {human_bytes(total)} of constants in its program (largest: "
                f"{largest.type}, {human_bytes(largest.bytes or 0)}{at}). Closed-over arrays bloat the artifact and "
                f"slow export: pass them as arguments instead.")

    producer = None if written_for is None else replace(versions(), for_jax=written_for.jax)
    result = build_result(meta, spec.file, functions, payloads, all_tensors, write_manifest=write_manifest,
                          warnings=paths.warnings() + warnings, source=source, wait=output is None,
                          producer=producer)
    if output is not None:
        progress("writing the artifact")
        result.save(output)
    return result


#: A function's name in an artifact (``--name`` names the function only when it is one).
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _export_root(root: str | Path | None, spec_dir: Path) -> Path:
    """``--root`` (an existing directory), else the spec file's directory."""
    if root is None:
        return spec_dir
    if not Path(root).is_dir():
        raise UsageError(f"--root {root}: not a directory; give the directory the artifact's recorded paths (entry "
                         f"point, spec, bound sources) are to be relative to, or leave --root out to use the spec's "
                         f"directory.")
    return Path(root)


def _source(spec: ShapeSpec, paths: RootPaths, bind: dict[str, str] | None) -> Source:
    """The manifest's ``source``: the spec file relative to the root and its sha256 (``verify`` finds the root by
    it), and the command-line binds (``verify`` applies them to the recorded spec, as export did)."""
    recorded, digest = None, None
    if not spec.file.startswith("<"):
        recorded = paths.path(Path(spec.file).name, spec.base_dir, f"the spec {spec.file}") \
            if spec.base_dir is not None else paths.path(spec.file, Path.cwd(), f"the spec {spec.file}")
        digest = spec.sha256
    binds = {k: paths.source(v, Path.cwd(), f"the bound source {v} (--bind {k})") for k, v in bind.items()} \
        if bind else None
    return Source(recorded, digest, binds)


def _bind_sources(bind: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any]]:
    """Each bind's source (a path or ``model.py:NAME`` as given; ``<in-memory>:NAME`` for a value), and the values
    given in memory by name."""
    sources: dict[str, str] = {}
    values: dict[str, Any] = {}
    for key, value in (bind or {}).items():
        if not isinstance(key, str) or not _IDENTIFIER.match(key):
            raise UsageError(f"--bind {key}: not a parameter name; a bind names the function's parameter (a Python "
                             f"identifier) it gives the value of, e.g. params=weights.npz (bind={{'params': tree}}).")
        if isinstance(value, (str, os.PathLike)):
            sources[key] = os.fspath(value)
        else:
            sources[key], values[key] = f"{IN_MEMORY}:{key}", value
    return sources, values


#: How the state of a Keras ``SeedGenerator`` is named (its variable path's last part).
_KERAS_SEED_STATE = "/seed_generator_state"
