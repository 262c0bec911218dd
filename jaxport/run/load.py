"""Opening an artifact to run one of its functions: :func:`load` checks and deserializes it into a :class:`Loaded`.

Trust model: the artifact may be hostile or damaged. Opening it validates the manifest (``artifact.manifest``,
call tree included) and the members' digests. Before anything is compiled, ``load`` verifies the payload's sha256,
checks that the deserialized program takes and returns what the manifest says (or the input checks would lie),
repeats the custom-call allowlist check (JAX checks it only at export) with ``checks.check_runnable``: what may
run is JAX's guaranteed-stable targets plus what the caller allows (``allow_custom_calls``), never what the
artifact's manifest says it allows, and never a host callback; the program's stored derivatives are checked the
same way. It also checks that the local JAX backend is among the artifact's platforms. Bound weights are
copied from the artifact and their digest checked over the copy (``artifact.private_copy``), or memory-mapped
without a check when the caller trusts the file (``verify=False``).

With a required signature, the artifact is opened once and read only from that descriptor, whose bytes were hashed
and compared with the signed digest (``signing.check.open_signed``; an ``Artifact`` passed in is checked on its
own descriptor, ``verify_open``): its path is never opened again, so a file renamed over it meanwhile is never
read. Its weights then always run from the private copy whose digest is checked, whatever ``verify`` says: a memory
map would show a rewrite of the file in place after the check.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .. import usercache
from .._api_types import record_of
from ..artifact import summary
from ..artifact.calltree import argument_positions
from ..artifact.container import Artifact, open_artifact
from ..artifact.manifest import function_names
from ..artifact.model import Function, Manifest, Weights
from ..artifact.private_copy import DigestCheck, private_member
from ..artifact.signing.check import Verified, open_signed, verify_open, verify_signature
from ..artifact.tensors import tensor_views
from ..artifact.window.payload import check_readable, deserialize
from ..errors import FormatError, OutputError, PlatformError, UsageError
from ..isolation import isolate
from ..program.checks import check_runnable
from ..sharding import device_count_message
from . import vouching
from .backend import Backend
from .cache import CacheState, compilation_cache
from .gradients import explain_missing
from .iree import IreeBackend
from .jax_backend import JaxBackend
from .loaded import Loaded
from .options import LoadOptions


def select_function(manifest: Manifest, function: str | None, where: str) -> str:
    """The function to run: ``function``, or the only one of the artifact."""
    names = function_names(manifest, function)
    if len(names) > 1:
        raise UsageError(f"{where}: the artifact holds {len(names)} functions ({', '.join(names)}); choose one with "
                         f"--function NAME (function=NAME in Python).")
    return names[0]


def _typed(shape: Sequence[int | str], dtype: str) -> str:
    """``f32[batch, 784]``: an array type as messages show it."""
    return summary.type_text(dtype, shape)


def check_payload(exported: Any, f: Function, where: str, fname: str, weights: Weights | None = None) -> None:
    """The deserialized program must take and return what the manifest says, or the input checks would lie."""

    def dims(aval: Any) -> list[int | str]:
        return [d if isinstance(d, int) else str(d) for d in aval.shape]

    def bad(what: str) -> FormatError:
        return FormatError(f"{where}: function {fname!r}: the payload disagrees with the manifest ({what}); the "
                           f"artifact was edited or written by a faulty producer. Re-export it.")

    free, weight_positions = argument_positions(exported)
    names = list(f.weights)
    if len(free) != len(f.inputs) or len(weight_positions) != len(names):
        raise bad(f"{len(free)} inputs and {len(weight_positions)} bound tensors in the program, "
                  f"{len(f.inputs)} and {len(names)} in the manifest")
    tensors = weights.tensors if weights is not None else {}
    for pos, name in zip(weight_positions, names):
        t = tensors.get(name)
        aval = exported.in_avals[pos]
        if t is None or dims(aval) != list(t.shape) or str(aval.dtype) != t.dtype:
            raise bad(f"bound tensor {name!r} is {_typed(dims(aval), str(aval.dtype))} in the program, "
                      f"{'missing' if t is None else _typed(t.shape, t.dtype)} in the manifest")
    for aval, inp in zip([exported.in_avals[p] for p in free], f.inputs):
        if dims(aval) != list(inp.shape) or str(aval.dtype) != inp.dtype:
            raise bad(f"input {inp.name!r} is {_typed(dims(aval), str(aval.dtype))} in the program, "
                      f"{_typed(inp.shape, inp.dtype)} in the manifest")
    if len(exported.out_avals) != len(f.outputs):
        raise bad(f"{len(exported.out_avals)} outputs in the program, {len(f.outputs)} in the manifest")
    for aval, out in zip(exported.out_avals, f.outputs):
        if dims(aval) != list(out.shape) or str(aval.dtype) != out.dtype:
            raise bad(f"output {out.name!r} is {_typed(dims(aval), str(aval.dtype))} in the program, "
                      f"{_typed(out.shape, out.dtype)} in the manifest")
    if list(exported.platforms) != list(f.platforms):
        raise bad(f"platforms {', '.join(exported.platforms)} in the program, {', '.join(f.platforms)} in the "
                  f"manifest")


def map_weights(art: Artifact, f: Function, verify: bool, defer: bool = False
                ) -> tuple[list[Any], DigestCheck | None]:
    """The function's bound tensors as numpy views: of a private copy whose digest is checked
    (``artifact.private_copy``), before returning or, with ``defer``, in a thread (the returned ``DigestCheck``); of
    the artifact's memory map (no copy) when ``verify`` is false."""
    w = art.model.weights
    if w is None or w.member not in art.members:
        raise FormatError(f"{art.path}: the manifest lists bound tensors but no weights member.")
    pending = None
    if verify:  # checked over a private copy: the bytes that run are the bytes hashed (``artifact.private_copy``)
        buffer, pending = private_member(art, w.member, defer)
    else:
        buffer = art.view(w.member)
    views = tensor_views(buffer, w.tensors, str(art.path))
    missing = [n for n in f.weights if n not in views]
    if missing:
        raise FormatError(f"{art.path}: bound tensor(s) {', '.join(missing)} are not in the weights member.")
    return [views[n] for n in f.weights], pending


def runnable_program(art: Artifact, fname: str, allow_custom_calls: Iterable[str] | None = None,
                     where: str | None = None, notes: list[str] | None = None) -> Any:
    """Function ``fname`` of an open artifact, deserialized and checked as ``load`` checks it before compiling (the
    payload against the manifest, the custom calls against the allowlist and the caller's allowances), without
    preparing it to run: ``verify`` refuses a program before it imports anything. ``where`` starts messages
    (default: the artifact's path); ``notes`` gets a line when jaxport, not JAX, read the payload (one older than
    this JAX's window: ``payload.deserialize``)."""
    where = str(art.path) if where is None else where
    f = art.model.functions[fname]
    payload = art.read(f.payload)
    writer = str(art.model.producer.jax)
    check_readable(payload, f.calling_convention_version, writer, where, fname)
    exported = deserialize(payload, where, fname, writer, f.calling_convention_version, notes)
    check_payload(exported, f, where, fname, art.model.weights)
    return check_runnable(exported, f"{where}: function {fname!r}", allow_custom_calls)


def check_signature(path: str | Path | Artifact, options: LoadOptions) -> Verified | None:
    """The signature check ``options`` asks for (``require_signature``, ``signature``): what verified, or None when
    no signature is required. Of an open ``Artifact``, on its own bytes (``verify_open``); of a path, a check of the
    file it names now, which reads nothing else of it (``verify_signature``): a command then reads the artifact
    through :func:`open_checked` (or ``load``), which checks the descriptor it reads, never by the path again."""
    if not options.require_signature:
        return None
    if isinstance(path, Artifact):
        verified = verify_open(path, options.require_signature, options.signature)
        vouching.register(path, verified, options.require_signature)  # its cache entries: used only when vouched for
        return verified
    return verify_signature(path, options.require_signature, options.signature)


def open_checked(path: str | Path, options: LoadOptions) -> Artifact:
    """The artifact at ``path``, open to be read (the caller closes it): when ``options`` require a signature, opened
    only once it verified on the bytes of the descriptor it is read from (``signing.check.open_signed``); a later
    ``load`` of it, with the same options, does not hash it again."""
    if not options.require_signature:
        return open_artifact(path)
    art, verified = open_signed(path, options.require_signature, options.signature)
    vouching.register(art, verified, options.require_signature)  # its cache entries: used only when vouched for
    return art


def load(path: str | Path | Artifact, function: str | None = None, *, runtime: str = "jax",
         allow_platform_mismatch: bool = False, allow_custom_calls: Iterable[str] | None = (),
         verify_weights: bool = True, cache_dir: str | Path | None = None, cache: bool = True,
         module_dir: str | Path | None = None, require_signature: str | Path | Iterable[str | Path] | None = (),
         signature: str | Path | None = None, check_ranges: bool = False, verify: bool = True,
         defer_verify: bool = False) -> Loaded:
    """Open an artifact and prepare one of its functions to run (see the module docstring for the checks).

    ``path`` may also be an ``Artifact`` the caller has open, to load several functions from one opening; the
    caller closes it, after the last call. ``function`` names the function when the artifact holds several. Bound
    weights are memory-mapped from the artifact; ``verify=False`` (or ``verify_weights=False``, the record's name)
    skips their sha256 check (one pass over the weight bytes, about a second per 1-2 GB), for artifacts whose origin
    is already trusted. With ``defer_verify`` (what ``jaxport call`` does), the weights' sha256 check runs in a thread
    while the program compiles, and the first run waits for it: a damaged weights member is then refused
    (``IntegrityError``) by the first call rather than by ``load``, and nothing runs on it either way.

    The other keywords are the fields of :class:`~jaxport.run.options.LoadOptions`, which this function builds and
    loads by (:func:`load_by`). With ``allow_platform_mismatch``, a function exported for other platforms is tried
    on the local one (JAX's ``DisabledSafetyCheck.platform()``). ``runtime="iree"`` compiles and runs the program
    with IREE on the CPU instead of XLA (see ``iree``). ``cache_dir``: JAX's compilation cache the function compiles
    with, as in every command, with jaxport's records beside it (the program check's verdict, executables ``warmup
    --target`` shipped), and IREE's compiled modules in a directory beside it (``module_dir`` names another); without
    it the function compiles with the cache the process has (``jax.config``), ``cache=False``: none.
    ``allow_custom_calls`` names the custom-call targets beyond JAX's guaranteed-stable ones that the program may
    call (kernels this process provides); the artifact's own ``allowed_custom_calls`` grants nothing, and host
    callbacks are refused whatever is allowed. With ``require_signature`` (a trusted public key's PEM path, or
    several), the artifact must carry a model-signing signature by one of them (the bundle ``ARTIFACT.sig``, or
    ``signature``), verified on the bytes of the descriptor the artifact is then read from before anything else
    reads it (an ``Artifact`` passed in, on its own), and its weights are checked whatever ``verify`` says:
    ``SignatureError`` otherwise (``artifact.signing.check``; needs ``jaxport[sign]``). With ``check_ranges``, every
    call refuses an input value outside the ``range`` its manifest entry declares (a spec's ``range:``), naming the
    input, the index and the value (``InputError``); without it a range only shapes random inputs
    (``random_inputs``, ``call --random``, ``verify``).
    """
    options = record_of(LoadOptions, None, {**locals(), "verify_weights": verify and verify_weights}, "load")
    return load_by(path, options, defer_verify=defer_verify)


def load_by(path: str | Path | Artifact, options: LoadOptions, *, defer_verify: bool = False,
            held: CacheState | None = None) -> Loaded:
    """The one loader: :func:`load` by a :class:`~jaxport.run.options.LoadOptions` record (what every command, the
    server and the batch engines' adapters load by).

    ``held``: the compilation cache the caller has set up for the load (the state of its ``cache.compilation_cache``
    block, a command's), beside whose directory a runtime that compiles on its own keeps its modules unless
    ``options.module_dir`` says where (``LoadOptions.module_directory``); the loader then sets up none. Without it,
    with ``options.cache_dir`` (or ``cache=False``) the function is loaded, and compiles, with JAX's compilation
    cache there (or none); else with the cache the process has. ``defer_verify``: as :func:`load`'s."""
    if held is not None:
        return _prepared(path, options, options.module_directory(held.directory), defer_verify)
    if options.cache and options.cache_dir is None:  # the compilation cache the process has
        return _prepared(path, options, options.module_directory(), defer_verify)
    directory = Path(options.cache_dir).expanduser() if options.cache and options.cache_dir is not None else None
    with compilation_cache(directory) as state:
        if state.reason:
            raise OutputError(f"{path.path if isinstance(path, Artifact) else path}: {state.reason}; give a directory "
                              f"this user can write (cache_dir=DIR).")
        loaded = _prepared(path, options, options.module_directory(directory), defer_verify)
    loaded.compile_in(directory)
    member = loaded.model.members.get(loaded.function_record.payload)
    if directory is not None and member is not None:  # the check's verdict there too, if this process checked it
        isolate.remember(member.sha256, directory)
    return loaded


def _prepared(path: str | Path | Artifact, options: LoadOptions, module_dir: Path | None,
              defer_verify: bool) -> Loaded:
    """The function ``options`` chooses, checked and prepared to run (:func:`load_by`'s work, in the cache it set
    up), IREE's modules in ``module_dir``."""
    signed = bool(options.require_signature)
    opened: Artifact | None = None
    if isinstance(path, Artifact):
        check_signature(path, options)
    elif signed:
        opened = open_checked(path, options)  # refused before JAX is imported
    import jax
    from jax import export

    start = time.perf_counter()
    borrowed = isinstance(path, Artifact)
    art = path if isinstance(path, Artifact) else opened or open_artifact(path)
    path = art.path if isinstance(path, Artifact) else path
    where = str(path)
    pending: DigestCheck | None = None
    try:
        fname = select_function(art.model, options.function, where)
        record = art.model.functions[fname]
        notes: list[str] = []
        exported = runnable_program(art, fname, options.allow_custom_calls, where, notes)
        notes.extend(n for n in usercache.vouching_notes(art.model.members[record.payload].sha256) if n not in notes)
        deferred = defer_verify and options.runtime == "jax"
        weights, pending = map_weights(art, record, options.verify_weights or signed, defer=deferred) \
            if record.weights else ([], None)
        local = export.default_export_platform()
        mismatch = local not in exported.platforms
        if mismatch:
            if not options.allow_platform_mismatch:
                raise PlatformError(
                    f"{where}: function {fname!r} was exported for {', '.join(exported.platforms)}, but JAX here "
                    f"runs on {local}. Run it where {' or '.join(exported.platforms)} is available, or re-export it "
                    f"with --platform {local} (repeat --platform to cover several); --allow-platform-mismatch tries "
                    f"anyway.")
            exported = dataclasses.replace(exported, disabled_safety_checks=(
                *exported.disabled_safety_checks, export.DisabledSafetyCheck.platform()))
        if exported.nr_devices > jax.device_count():
            raise PlatformError(device_count_message(f"{where}: function {fname!r}", exported.nr_devices,
                                                     jax.device_count(), record.mesh))
        exported = explain_missing(exported, where, fname)
        jax_backend = JaxBackend(exported, weights, record, where=f"{Path(path)}: function {fname!r}", fname=fname,
                                 platform=local, platform_mismatch=mismatch,
                                 weights_check=pending.wait if pending is not None else None,
                                 program=art.model.members[record.payload].sha256)
        backend: Backend = IreeBackend(jax_backend, record, module_dir) if options.runtime == "iree" else jax_backend
    except BaseException:
        if pending is not None:
            pending.join()  # its thread reads the file: never close it under that thread
        if not borrowed:
            art.close()
        raise
    if not weights and not borrowed:  # nothing maps the artifact's bytes any more
        art.close()
    return Loaded(Path(path), fname, art.model, backend, local, time.perf_counter() - start, art if weights else None,
                  notes, check_ranges=options.check_ranges)
