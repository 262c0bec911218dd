"""The models ``jaxport serve`` serves, from its arguments: :func:`open_models` opens, checks, loads and compiles
them, :func:`serve_models` serves them over the Open Inference Protocol (v2) until a signal stops it.

Each model is one ``[NAME[@VERSION]=]ARTIFACT`` (:class:`ModelSpec`). Everything that can be refused without
compiling is refused before the first compilation, in this order: a runtime that cannot serve, a model given twice,
an artifact that cannot be read (as ``jaxport call`` refuses it), a ``--dim`` that no served function has or outside
a function's bounds (``run.buckets.sizes``, as every command refuses it), an address that cannot be listened on
(``ports``), and the optional extra ``jaxport[serve]`` missing: kserve, which takes seconds to import, is imported
only then (``kserve_server``).

Ready in seconds: before the server listens, each model compiles what it must (:func:`buckets.warmup_order`: its
smallest bucket and those of the sizes ``--dim`` lists; with ``compile_after_ready="never"`` every planned bucket),
then the next smallest buckets of every model in turn while the warm-up budget (``warmup_budget_s``, seconds of
compiling for the whole server) lasts. The rest compile after ready: when a request first needs one
(``"first-use"``, the default), or also in the background, smallest first, while no request has come for
:data:`QUIET_S` (``"background"``). JAX's persistent compilation cache in the cache directory is on for the
server's whole life (``run.cache.compilation_cache``), so every compile, before ready or after, fetches what
``jaxport warmup`` compiled and loads what ``warmup --target`` shipped.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..._api_types import record_of
from ...artifact.container import Artifact
from ...errors import OutputError, PlatformError, UsageError
from ...run.buckets import sizes
from ...run.buckets.served import warmup_order
from ...run.cache import compilation_cache, default_cache_dir
from ...run.compile.retune import retune
from ...run.load import open_checked, select_function
from ...run.options import LoadOptions
from .. import limits
from ..batching import Batched, Dims
from ..compiled import MAX_EXECUTABLES, describe_compile
from ..loading import check_programs, check_serving, load_served
from .ports import Listen

__all__ = ["Listen", "ModelSpec", "ServedModel", "Serving", "open_models", "serve_models", "unanswered"]

#: What compiles after ready (``--compile-after-ready``): what a request needs, when it first does (``first-use``);
#: that and the rest of the plan in the background (``background``); nothing, every planned bucket compiled before
#: ready and a size no planned bucket fits refused (``never``).
AFTER_READY = ("first-use", "background", "never")

#: Seconds of compiling a server spends before it is ready, beyond what each model must compile (its smallest bucket
#: and the sizes listed with --dim): the next smallest buckets of every model in turn.
WARMUP_BUDGET_S = 0.5

#: Seconds without a request before the background compiler compiles its next bucket.
QUIET_S = 0.5

_NAMED = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)(@(?P<version>[A-Za-z0-9][A-Za-z0-9_.-]*))?=(?P<path>.+)")


@dataclass(frozen=True)
class ModelSpec:
    """One served model as the command line names it: ``[NAME[@VERSION]=]ARTIFACT``."""

    name: str
    version: str
    path: str

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """``[NAME[@VERSION]=]ARTIFACT``; the name defaults to the file's stem, the version to 1 (an existing file
        whose name has ``=`` is that file)."""
        m = _NAMED.fullmatch(text)
        if m and not Path(text).exists():
            name, version, path = m.group("name", "version", "path")
            return cls(name, version or "1", path)
        stem = Path(text).name
        stem = stem[:-len(".jaxport")] if stem.endswith(".jaxport") and len(stem) > 8 else stem
        return cls(stem, "1", text)


def model_specs(artifacts: Sequence[str]) -> list[ModelSpec]:
    """Each ``[NAME[@VERSION]=]ARTIFACT`` parsed; a model name and version given twice is refused, before anything
    is loaded."""
    specs = [ModelSpec.parse(text) for text in artifacts]
    first: dict[tuple[str, str], str] = {}
    for s in specs:
        if (s.name, s.version) in first:
            raise UsageError(f"model {s.name!r} version {s.version} is given twice ({first[s.name, s.version]} and "
                             f"{s.path}); give each artifact its own name or version: NAME=ARTIFACT or "
                             f"NAME@VERSION=ARTIFACT.")
        first[s.name, s.version] = s.path
    return specs


@dataclass(frozen=True)
class ServedModel:
    """One model ready to serve: what named it, the kserve model over its buckets (``kserve_server.JaxportModel``),
    the seconds loading it and compiling its warm-up took, and what compiles after ready (:data:`AFTER_READY`)."""

    spec: ModelSpec
    model: Any
    warmup_s: float
    after_ready: str = "first-use"
    #: Set once the server listens (``serve_models``): the background compiler starts then.
    listening: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    @property
    def batched(self) -> Batched:
        return self.model.batched

    def as_dict(self) -> dict[str, Any]:
        """The model as ``jaxport serve --json``'s ``ready`` event describes it."""
        b = self.batched
        return {"name": self.spec.name, "version": self.spec.version, "artifact": self.spec.path,
                "function": b.loaded.function, "buckets": b.compiled.warm, "sizes": b.sizes,
                "planned": len(b.buckets), "compile_after_ready": self.after_ready,
                "batching": bool(self.model.batching), "max_batch_rows": self.model.max_rows if self.model.batching
                else None, "executables_shipped": sum(1 for c in b.loaded.compilations if c.shipped),
                "warmup_s": round(self.warmup_s, 3)}

    def summary(self) -> str:
        """One line: the model, its buckets compiled and planned, what compiles after ready, whether it batches
        (and why not), and the seconds it took."""
        batched, s = self.batched, self.spec
        plan = "; ".join(f"{v} in {_sizes(sizes)}" for v, sizes in batched.sizes.items()) or "static shapes"
        batching = f"batching up to {self.model.max_rows} rows" if self.model.batching else \
            "no batching" if self.model.batcher.window == 0 else f"no batching ({batched.split_reason})"
        done, planned = len(batched.compiled.warm), len(batched.buckets)
        count = f"{done} bucket{'s' if done != 1 else ''}" if done == planned else f"{done} of {planned} buckets"
        rest = "" if done >= planned and self.after_ready != "background" else \
            {"first-use": ", the rest on first use", "background": ", the rest in the background and on first use",
             "never": ""}[self.after_ready]
        shipped = sum(1 for c in batched.loaded.compilations if c.shipped)
        loaded = f", {shipped} shipped executable{'s' if shipped != 1 else ''} loaded" if shipped else ""
        return (f"{s.name} version {s.version} ({s.path}, function {batched.loaded.function}): {count} compiled "
                f"({plan}){rest}{loaded}, {batching}, in {self.warmup_s:.1f} s")


def _sizes(sizes: Sequence[int]) -> str:
    """A variable's planned sizes as a line shows them: all of them, or the first and last few of many."""
    shown = [str(x) for x in sizes]
    return ", ".join(shown) if len(shown) <= 12 else f"{', '.join(shown[:6])}, ..., {', '.join(shown[-3:])} " \
                                                     f"({len(shown)} sizes)"


def _opened(stack: contextlib.ExitStack, specs: Sequence[ModelSpec], options: LoadOptions,
            dims: Mapping[str, Any]) -> list[tuple[Artifact, dict[str, list[int]]]]:
    """Every artifact opened and checked (its signature when ``options`` require one, on the descriptor it is then
    loaded from; the manifest, without JAX), with one function to serve, and the ``--dim`` sizes of that function
    (``run.buckets.sizes``: a name that no served function has, a size outside a function's bounds, are refused
    here, before anything compiles)."""
    opened, functions = [], []
    for s in specs:
        art = stack.enter_context(open_checked(s.path, options))
        functions.append(art.model.functions[select_function(art.model, options.function, s.path)])
        opened.append(art)
    sizes.check_names(dims, functions)
    return [(art, sizes.given(f, {k: v for k, v in dims.items() if k in sizes.names_of(f)}))
            for art, f in zip(opened, functions)]


def _kserve_server() -> ModuleType:
    """The kserve transport (``kserve_server``), imported once every argument is checked (see the module
    docstring); a ``PlatformError`` (exit 10, as every missing extra) saying how to install it when the extra is
    missing."""
    try:
        from . import kserve_server
    except ImportError as e:
        raise PlatformError(f"'jaxport serve' needs the optional extra jaxport[serve] (kserve), which is not "
                            f"installed ({e}): pip install 'jaxport[serve]'.") from None
    return kserve_server


def _ignore(_: Any) -> None:
    """What a callback not given does."""


@dataclass(frozen=True)
class Serving:
    """How a server batches its requests and compiles its buckets (``jaxport serve``'s options): ``window_ms`` and
    ``max_rows``, how requests are batched (``kserve_server.JaxportModel``); ``warmup_budget_s``,
    ``compile_after_ready`` (:data:`AFTER_READY`) and ``max_executables``, what compiles before and after ready, and
    how many buckets compiled after warm-up each model keeps (see the module docstring)."""

    window_ms: float = 0.0
    max_rows: int | None = None
    warmup_budget_s: float = WARMUP_BUDGET_S
    compile_after_ready: str = "first-use"
    max_executables: int = MAX_EXECUTABLES
    #: Once listening, compile again, autotuned, what runs from executables compiled without the GPU, and swap it in
    #: (``run.compile.retune``).
    retune: bool = False

    def check(self) -> None:
        """Refuse a malformed value (``UsageError``): each number must be finite and within its bound (``limits``),
        as ``jaxport serve``'s options are."""
        if self.compile_after_ready not in AFTER_READY:
            raise UsageError(f"compile_after_ready={self.compile_after_ready!r}: give one of "
                             f"{', '.join(AFTER_READY)}.")
        limits.check_number("window_ms", self.window_ms, 0, limits.MAX_WINDOW_MS)
        if self.max_rows is not None:
            limits.check_number("max_rows", self.max_rows, 1, limits.MAX_BATCH_ROWS, whole=True)
        limits.check_number("warmup_budget_s", self.warmup_budget_s, 0, limits.MAX_WARMUP_BUDGET_S)
        limits.check_number("max_executables", self.max_executables, 1, limits.MOST_EXECUTABLES, whole=True)


@contextlib.contextmanager
def open_models(artifacts: Sequence[str], *, dims: Dims | None = None, load: LoadOptions | None = None,
                listen: Listen | None = None, serving: Serving | None = None,
                on_note: Callable[[str], None] | None = None, on_line: Callable[[str], None] | None = None,
                on_stage: Callable[[str], None] | None = None, window_ms: float = 0.0,
                max_rows: int | None = None, warmup_budget_s: float = WARMUP_BUDGET_S,
                compile_after_ready: str = "first-use", max_executables: int = MAX_EXECUTABLES,
                retune: bool = False) -> Iterator[list[ServedModel]]:
    """The models of ``artifacts`` (each ``[NAME[@VERSION]=]ARTIFACT``), warmed up, for the block; the artifacts,
    whose weights the models map, are closed after it, and JAX's compilation cache is the cache directory's
    throughout it.

    ``dims``: the planned sizes by dimension variable (``jaxport serve --dim``; default: the spec's bounds' ladder); the
    sizes it lists are compiled before ready. ``serving`` (or its fields by keyword, which replace its own where not at
    their defaults: ``window_ms``, ``max_rows``, ``warmup_budget_s``, ``compile_after_ready``, ``max_executables``,
    ``retune``): how requests are batched and what compiles before and after ready (:class:`Serving`, built once).
    ``load``: how to load each function (``LoadOptions``; ``cache_dir``: the compilation cache to compile into and fetch
    from, default ``run.cache.default_cache_dir()``). ``listen``: the address the server will listen on, checked before
    anything compiles. ``on_note`` gets each note of a load (a program older than this JAX's window, read by jaxport),
    ``on_line`` each model's :meth:`ServedModel.summary` once it is warmed up, and a line for each compile after ready;
    ``on_stage`` the text of each stage of the start-up as it begins (``importing kserve``, ``loading mlp version 1 and
    compiling its warm-up``). Refusals are ``UsageError``s, in the module docstring's order; an artifact that cannot be
    read is refused as ``jaxport.load`` refuses it."""
    options = load or LoadOptions()
    serving = record_of(Serving, serving, {
        "window_ms": window_ms, "max_rows": max_rows, "warmup_budget_s": warmup_budget_s,
        "compile_after_ready": compile_after_ready, "max_executables": max_executables, "retune": retune}, "serving")
    check_serving(options)
    if not options.cache:
        raise UsageError("a server compiles into JAX's compilation cache and fetches from it: give cache_dir=DIR "
                         "rather than cache=False.")
    serving.check()
    specs = model_specs(artifacts)
    given = dict(dims or {})
    strict = serving.compile_after_ready == "never"
    with contextlib.ExitStack() as stack:
        opened = _opened(stack, specs, options, given)  # loaded from these descriptors: never a path again
        if listen is not None:
            listen.check()  # before the seconds of compiling
        stage = on_stage or _ignore
        stage("importing kserve")
        transport = _kserve_server()
        directory = options.cache_dir or default_cache_dir()
        state = stack.enter_context(compilation_cache(directory))
        if state.reason:
            raise OutputError(f"{state.reason}; serve with a directory this user can write (--cache-dir DIR).")
        stage("checking the programs")
        check_programs([(art, select_function(art.model, options.function, s.path))
                        for s, (art, _) in zip(specs, opened)])
        models: list[tuple[ModelSpec, Batched, list[dict[str, int]], float]] = []
        for spec, (art, listed) in zip(specs, opened):
            stage(f"loading {spec.name} version {spec.version} and compiling its warm-up")
            start = time.perf_counter()
            loaded = load_served(art, options, directory)
            for note in loaded.notes:
                (on_note or _ignore)(note)
            batched = Batched(loaded, listed, cache_dir=directory, strict=strict, most=serving.max_executables)
            must, rest = warmup_order(loaded.function_record, batched.buckets, listed, strict)
            batched.warmup(directory, buckets=must)
            models.append((spec, batched, rest, time.perf_counter() - start))
        stage(f"compiling more buckets for up to {serving.warmup_budget_s:g} s (--warmup-budget-s)")
        spent = _spend(models, serving.warmup_budget_s)
        served, listening = [], threading.Event()
        for (spec, batched, _, seconds), extra in zip(models, spent):
            model = transport.JaxportModel(spec.name, spec.version, batched, window_ms=serving.window_ms,
                                           max_rows=serving.max_rows)
            served.append(ServedModel(spec, model, seconds + extra, serving.compile_after_ready, listening))
            (on_line or _ignore)(served[-1].summary())
        for m in served:
            name = f"{m.spec.name} version {m.spec.version}"
            m.batched.compiled.on_compile = lambda bucket, phase, seconds, source, name=name, c=m.batched.compiled: \
                (on_line or _ignore)(describe_compile(name, bucket, phase, seconds, source, c))
            m.model.batcher.on_failure = lambda text, name=name: (on_line or _ignore)(f"{name}: {text}")
        background = _Background([m.batched for m in served], listening) \
            if serving.compile_after_ready == "background" else None
        if serving.retune:
            _retune_when_listening(served, listening, Path(directory), on_line or _ignore)
        try:
            yield served
        finally:
            if background is not None:
                background.stop()


def _retune_when_listening(served: Sequence[ServedModel], listening: threading.Event, directory: Path,
                           say: Callable[[str], None]) -> None:
    """``serve --retune``: once the server listens, each model's buckets that run from executables compiled without
    the GPU are compiled again, autotuned, one model after the other on a daemon thread, and swapped in as each is
    done (the model's calls rebuilt: ``Compiled.refresh``); a line says what was swapped."""

    def work() -> None:
        listening.wait()
        for m in served:
            compiled = m.batched.compiled
            done = retune(m.batched.loaded, directory, on_swap=compiled.refresh)
            for note in done.notes:
                say(f"{m.spec.name} version {m.spec.version}: {note}")
            if done.retuned:
                seconds = sum(r.seconds for r in done.retuned)
                say(f"{m.spec.name} version {m.spec.version}: {len(done.retuned)} executable"
                    f"{'s' if len(done.retuned) != 1 else ''} compiled without the GPU replaced, autotuned here in "
                    f"{seconds:.1f} s, while serving")

    threading.Thread(target=work, name="jaxport-retune", daemon=True).start()


def _spend(models: Sequence[tuple[ModelSpec, Batched, list[dict[str, int]], float]], budget_s: float) -> list[float]:
    """Compile the next smallest planned bucket of every model in turn while ``budget_s`` seconds last (a compile
    is not started where the model's slowest so far would overrun them); each model's seconds spent."""
    spent = [0.0] * len(models)
    slowest = [0.0] * len(models)
    left = [list(rest) for _, _, rest, _ in models]
    total = 0.0
    while any(left):
        progressed = False
        for k, (_, batched, _, _) in enumerate(models):
            if not left[k] or total + slowest[k] >= budget_s:
                continue
            start = time.perf_counter()
            batched.warmup(buckets=[left[k].pop(0)])
            took = time.perf_counter() - start
            spent[k] += took
            total += took
            slowest[k] = max(slowest[k], took)
            progressed = True
        if not progressed:
            break
    return spent


class _Background:
    """Compiles the planned buckets not compiled yet, smallest first, each model in turn, one at a time on a thread
    of its own, after ready, and only when no request came for :data:`QUIET_S` (a request's own compile goes
    first); it stops at each model's bound of executables kept, and when told."""

    def __init__(self, models: Sequence[Batched], listening: threading.Event):
        self.models = list(models)
        self._listening = listening
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jaxport-background-compile", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._listening.wait(0.1):
            if self._stop.is_set():
                return
        queues = [[b for b in m.ordered if not m.compiled.has(m.compiled.key(b))][:m.compiled.most]
                  for m in self.models]
        while any(queues) and not self._stop.is_set():
            quiet = time.monotonic() - max(m.last_admitted for m in self.models)
            if quiet < QUIET_S:
                self._stop.wait(QUIET_S - quiet)
                continue
            for m, queue in zip(self.models, queues):
                while queue and m.compiled.has(m.compiled.key(queue[0])):
                    queue.pop(0)
                if queue and not self._stop.is_set():
                    try:
                        m.compiled.compile(queue.pop(0), "background")
                    except Exception:  # noqa: BLE001 - a bucket that does not compile is compiled for no request
                        pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def unanswered(models: Sequence[ServedModel]) -> int:
    """How many requests the workers of ``models`` hold without an answer (``Batcher.unanswered``): once
    :func:`serve_models` has returned, those the server stopped before it answered them (a call still running when
    the requests in flight had had their time)."""
    return sum(m.model.batcher.unanswered() for m in models)


#: The names of the signals that stop a server, as its ``stopped`` event gives them.
_SIGNALS = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


def serve_models(models: Sequence[ServedModel], listen: Listen | None = None, *,
                 on_event: Callable[[dict[str, Any]], None] | None = None,
                 on_line: Callable[[str], None] | None = None) -> int | None:
    """Serve ``models`` (from :func:`open_models`) on ``listen`` (default: ``Listen()``, 127.0.0.1:8080 and 8081)
    until SIGINT or SIGTERM; the requests in flight are answered, then the signal that stopped it is returned (None
    if none did). ``on_event`` gets the events of ``jaxport serve --json`` (specs/schemas/cli/serve.schema.json):
    ``listening`` and ``ready`` once REST and gRPC both listen (after ``on_line`` gets a line saying so), ``stopped``
    after a signal stopped it."""
    where, emit = listen or Listen(), on_event or _ignore
    server = _kserve_server().Server([m.model for m in models], host=where.host, http_port=where.http_port,
                                     grpc_port=where.grpc_port, max_request_bytes=where.max_request_bytes,
                                     uds=where.uds, uds_mode=where.uds_mode)

    def listening() -> None:
        for m in models:
            m.listening.set()
        whole = all(len(m.batched.compiled.warm) == len(m.batched.buckets) for m in models)
        (on_line or _ignore)(f"listening on {where.rest} (REST) and {where.grpc} (gRPC), ready"
                             f"{': every bucket is compiled' if whole else ''}")
        emit({"event": "listening", **where.as_dict(),
              "models": [{"name": m.spec.name, "version": m.spec.version} for m in models]})
        emit({"event": "ready", "models": [m.as_dict() for m in models]})

    stopped_by = server.serve(listening)
    if stopped_by is not None:
        emit({"event": "stopped", "signal": _SIGNALS.get(stopped_by, str(stopped_by)), "exit_code": 128 + stopped_by})
    return stopped_by
