"""The export pipeline: entry point -> spec -> symbolic shapes -> jax.export -> checks -> artifact.

Each stage lives in a room of ``export`` (``entry``, ``weights``, ``lowering``, ``writing``); this one runs them in
order and decides names and paths.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import collection
from .._text import human_bytes
from ..artifact import typed
from ..artifact.model import Function, Source, replace
from ..errors import ExportError, SpecError
from ..program.checks import check_custom_calls, check_effects
from ..spec import ShapeSpec
from ..spec.build import as_shape_spec, like_values
from .entry.entrypoint import in_memory_values, load_entrypoint
from .entry.live import live_entry
from .entry.paths import RootPaths
from .lowering import gradients, lower
from .request import IDENTIFIER, ExportRequest
from .weights.binding import apply_binds, bound_only_warning
from .writing.manifest import build_function_entry, versions
from .writing.write import Contents, ExportResult, artifact_metadata, build_result

if TYPE_CHECKING:
    from .writing.target import Target

#: Embedded constants above this many bytes in total draw a warning.
LARGE_CONSTANTS_BYTES = 1 << 20


@dataclass(frozen=True)
class _Settled:
    """What the pipeline settles from the request and the spec before it loads anything."""

    spec_dir: Path  # the spec file's directory (the current one for a spec given in memory)
    paths: RootPaths  # how the manifest records paths, relative to the root
    platforms: list[str] | None
    allowed: list[str]  # the custom-call targets the program may call
    binds: dict[str, str]  # each bind's recorded source
    written_for: Target | None


def export(fn: Any, spec: Any, output: str | Path | None = None, request: ExportRequest | None = None, *,
           progress: Callable[[str], None] | None = None) -> ExportResult:
    """Export the function(s) of a spec into an artifact, with the options of ``request`` (an ``ExportRequest``,
    default: every option's default); write it to ``output`` when given.

    ``fn`` is the function of a single-function spec: a callable (a function, a ``jax.jit`` of one, a bound method,
    a ``functools.partial``, a callable model; see ``entry.live`` for what the manifest records of it), or an entry
    point ``model.py:NAME`` / ``package.module:NAME`` (relative to the current directory). A multi-function spec names
    each function's entry point itself (relative to the spec file); ``fn`` is then None, or the callable for the
    functions that name none. ``spec`` is a spec file's path, YAML text, a dict with the YAML's structure, a
    ``jaxport.Spec`` or a ``ShapeSpec`` (see ``jaxport.spec.build``). The request's options override the spec's.

    ``request.bind`` maps a parameter name to a bound value, as ``--bind NAME=SOURCE`` does (see ``weights.binding``:
    the spec need not list the parameter): a source string (a file relative to the current directory, or
    ``model.py:NAME``) or an in-memory pytree (dicts of numpy or JAX arrays, flax variables, an nnx module or state,
    an equinox module), whose source the manifest records as ``<in-memory>``. ``name`` names the artifact
    (``metadata.name``) and, in a single-function export when it is an identifier, the function too (replacing the
    spec's ``name:`` and the Python name). ``vjp_order`` (default: the spec's ``vjp_order``) stores that many orders
    of derivatives (VJPs) with each function, so that ``jax.grad`` works through ``jaxport.load``. ``root``
    (default: the spec file's directory; the current directory for a spec given as text, a dict or a ``Spec``) is
    the directory the manifest records paths relative to (see ``entry.paths``): the same inputs give the same bytes
    from any current directory. ``for_jax`` writes the artifact for that older JAX (``writing.target``): its payloads'
    StableHLO at the version that JAX reads, the window dated by it (``producer.for_jax``); a program it cannot hold is
    an ``ExportError``. ``progress``, when given, is called with the text of each stage as it starts (``lowering
    predict``).

    Returns an ``ExportResult``: without ``output`` nothing is written, and ``save``, ``to_bytes`` and ``load`` give
    the artifact.
    """
    request = request if request is not None else ExportRequest()
    likes = like_values(spec)  # the values of jaxport.like(...) arguments, by their in-memory names
    spec = as_shape_spec(spec)
    spec_dir = spec.base_dir or Path.cwd()
    paths = RootPaths(request.root_dir(spec_dir))
    plats = request.chosen_platforms(spec.platforms)
    allowed = request.allowed(spec)
    sources, in_memory = request.bind_sources()
    settled = _Settled(spec_dir, paths, plats, allowed, sources, request.written_for())
    with in_memory_values({**likes, **in_memory}):
        return _export(fn, spec, output, request, settled, progress or (lambda text: None))


def _export(fn: Any, spec: ShapeSpec, output: str | Path | None, request: ExportRequest, settled: _Settled,
            progress: Callable[[str], None]) -> ExportResult:
    warnings: list[str] = []
    jobs = _jobs(fn, spec, request.name, settled, progress, warnings)
    collection.resume()  # tracing runs with the collector on (already, if a user's module was imported)
    meta = artifact_metadata(spec.metadata, request.name, request.version, jobs[0][0])
    source = _source(spec, settled.paths, settled.binds)

    functions: dict[str, Function] = {}
    payloads: dict[str, bytes] = {}
    all_tensors: list[Any] = []
    paths, spec_dir, written_for = settled.paths, settled.spec_dir, settled.written_for
    for fname, fspec, entry, recorded in jobs:
        progress(f"lowering {fname}")
        low = lower.lower(entry, fspec, spec, name=fname, platforms=settled.platforms,
                          allow_custom_calls=settled.allowed, strip_locations=request.strip_locations,
                          record_source=lambda leaf: paths.source(leaf.source, leaf.base_dir or spec_dir,
                                                                  f"the bound source {leaf.source} ({leaf.where})"))

        check_custom_calls(entry.spec, low.scan, set(settled.allowed))
        if written_for is not None:
            progress(f"writing {fname} for jax {written_for.jax}")
            low = dataclasses.replace(low, exported=written_for.written(low.exported, entry.spec, fname))
        payload_name = f"functions/{fname}.jaxexport"
        order = spec.vjp_order if request.vjp_order is None else request.vjp_order
        check_effects(low.exported, entry.spec, fname)
        progress(f"serializing {fname}")
        payloads[payload_name] = _serialized(low.exported, order, entry, fname, request.strip_locations)
        if low.returned is not None and low.returned.treedef is not None:
            typed.remember(hashlib.sha256(payloads[payload_name]).hexdigest(), low.returned.treedef,
                           low.returned.order)
        functions[fname] = build_function_entry(low, spec, recorded, payload_name, settled.allowed, vjp_order=order)
        all_tensors.extend(low.tensors)
        warnings += _function_warnings(fname, low, functions[fname])
        warnings += [w for w in [bound_only_warning(fname, functions[fname], settled.binds)] if w]

    producer = None if written_for is None else replace(versions(), for_jax=written_for.jax)
    contents = Contents(meta, functions, payloads, all_tensors, spec.file, source, producer)
    result = build_result(contents, write_manifest=request.write_manifest, warnings=paths.warnings() + warnings,
                          wait=output is None)
    if output is not None:
        progress("writing the artifact")
        result.save(output)
    return result


def _jobs(fn: Any, spec: ShapeSpec, name: str | None, settled: _Settled, progress: Callable[[str], None],
          warnings: list[str]) -> list[tuple[str, Any, Any, str]]:
    """Each function of the spec, loaded, with its binds applied: (function name, ``FunctionSpec``, ``Entrypoint``,
    the entry point as recorded). A live callable's warnings go to ``warnings``."""
    jobs: list[tuple[str, Any, Any, str]] = []
    for fname, fspec in spec.functions.items():
        given = fn if fname is None else (fspec.entrypoint or fn)
        if given is None:
            raise SpecError(f"{fspec.where}: no entry point for function {fname!r}: give 'entrypoint: "
                            f"model.py:NAME' in the spec or on the command line.")
        progress(f"loading {given if isinstance(given, str) else 'the function'}")
        if isinstance(given, str):
            base = Path.cwd() if (fname is None or fspec.entrypoint is None) else settled.spec_dir
            entry, live = load_entrypoint(given, base), None
        else:
            live = live_entry(given, settled.paths)
            entry = live.entry
        if settled.binds:
            fspec = apply_binds(fspec, entry.function, settled.binds, entry.attribute)
        if fname is None:
            fname = name if name is not None and IDENTIFIER.match(name) else (spec.name or entry.name)
        if live is None:
            recorded = settled.paths.entrypoint(given, base)
        else:
            recorded = live.recorded_entry(fname)
            warnings += [w for w in [live.warning(fname)] if w]
        jobs.append((fname, fspec, entry, recorded))
    return jobs


def _serialized(exported: Any, order: int, entry: Any, fname: str, strip: bool) -> bytes:
    """The payload of one function: its program with ``order`` orders of derivatives, serialized."""
    try:
        return gradients.serialize(exported, order, entry.spec, fname, root=entry.root, strip=strip)
    except (ValueError, TypeError) as e:  # JAX refuses what it cannot serialize (the outputs are plain: returns)
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        raise ExportError(f"{entry.spec}: function {fname!r} cannot be serialized: {first.rstrip('.')}.") from None


def _function_warnings(fname: str, low: lower.Lowered, entry: Function) -> list[str]:
    """What the user is told about one lowered function: 64-bit tensors, bound tensors its program never reads,
    large embedded constants."""
    warnings: list[str] = []
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
        largest = entry.embedded_constants.largest[0]
        at = "" if largest.location == "unknown location" else f", at {largest.location}"
        warnings.append(
            f"function {fname!r} embeds {human_bytes(total)} of constants in its program (largest: "
            f"{largest.type}, {human_bytes(largest.bytes or 0)}{at}). Closed-over arrays bloat the artifact and "
            f"slow export: make them arguments of the function and bind them (--bind NAME=params.npz, or "
            f"'bind: params.npz' in the spec), which stores them beside the program (README, \"Weights beside the "
            f"program\").")
    return warnings


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


#: How the state of a Keras ``SeedGenerator`` is named (its variable path's last part).
_KERAS_SEED_STATE = "/seed_generator_state"
