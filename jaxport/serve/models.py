"""The models ``jaxport serve`` serves, from its arguments: :func:`open_models` opens, checks, loads and compiles
them, :func:`serve_models` serves them over the Open Inference Protocol (v2) until a signal stops it.

Each model is one ``[NAME[@VERSION]=]ARTIFACT`` (:class:`ModelSpec`). Everything that can be refused without
compiling is refused before the first compilation, in this order: a runtime that cannot serve, a model given twice,
an artifact that cannot be read (as ``jaxport call`` refuses it), a ``--dim`` that no served function has, an
address that cannot be listened on (``ports``), and the optional extra ``jaxport[serve]`` missing: kserve, which
takes seconds to import, is imported only then (``kserve_server``). Every bucket of every model is compiled before
the server listens (:class:`batching.Batched`), into JAX's compilation cache, which an image warmed up at build time
(``jaxport warmup``) fetches from instead.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ..artifact import contract
from ..artifact.container import Artifact
from ..errors import UsageError
from ..run.cache import default_cache_dir
from ..run.load import open_checked, select_function
from ..run.options import LoadOptions
from .batching import Batched, Dims
from .loading import check_serving, load_served
from .ports import Listen

__all__ = ["Listen", "ModelSpec", "ServedModel", "open_models", "serve_models"]

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
    """One model ready to serve: what named it, the kserve model over its compiled buckets
    (``kserve_server.JaxportModel``), and the seconds loading and compiling them took."""

    spec: ModelSpec
    model: Any
    warmup_s: float

    @property
    def batched(self) -> Batched:
        return self.model.batched

    def as_dict(self) -> dict[str, Any]:
        """The model as ``jaxport serve --json``'s ``ready`` event describes it."""
        return {"name": self.spec.name, "version": self.spec.version, "artifact": self.spec.path,
                "function": self.batched.loaded.function, "buckets": [dict(b) for b in self.batched.buckets],
                "batching": bool(self.model.batching),
                "max_batch_rows": self.model.max_rows if self.model.batching else None,
                "warmup_s": round(self.warmup_s, 3)}

    def summary(self) -> str:
        """One line: the model, its buckets, whether it batches (and why not), and the seconds they took."""
        batched, s = self.batched, self.spec
        variables = contract.dimension_variables(batched.function_record)
        plan = "; ".join(f"{v} in {', '.join(str(x) for x in sorted({b[v] for b in batched.buckets}))}"
                         for v in variables) or "static shapes"
        batching = f"batching up to {self.model.max_rows} rows" if self.model.batching else \
            "no batching" if self.model.batcher.window == 0 else f"no batching ({batched.split_reason})"
        count = len(batched.buckets)
        return (f"{s.name} version {s.version} ({s.path}, function {batched.loaded.function}): {count} "
                f"bucket{'s' if count != 1 else ''} compiled ({plan}), {batching}, in {self.warmup_s:.1f} s")


def _opened(stack: contextlib.ExitStack, specs: Sequence[ModelSpec], options: LoadOptions,
            dims: Mapping[str, Any]) -> list[Artifact]:
    """Every artifact opened and checked (its signature when ``options`` require one, on the descriptor it is then
    loaded from; the manifest, without JAX), with one function to serve; a ``--dim`` that no served function has is
    refused here, before anything compiles."""
    opened, seen = [], set()
    for s in specs:
        art = stack.enter_context(open_checked(s.path, options))
        fname = select_function(art.model, options.function, s.path)
        seen.update(contract.dimension_variables(art.model.functions[fname]))
        opened.append(art)
    unused = [v for v in dims if v not in seen]
    if unused:
        raise UsageError(f"--dim {unused[0]}: no served function has a dimension variable {unused[0]!r}.")
    return opened


def _kserve_server() -> ModuleType:
    """The kserve transport (``kserve_server``), imported once every argument is checked (see the module
    docstring); a ``UsageError`` saying how to install it when the extra is missing."""
    try:
        from . import kserve_server
    except ImportError as e:
        raise UsageError(f"'jaxport serve' needs the optional extra jaxport[serve] (kserve), which is not "
                         f"installed ({e}): pip install 'jaxport[serve]'.") from None
    return kserve_server


def _ignore(_: Any) -> None:
    """What a callback not given does."""


@contextlib.contextmanager
def open_models(artifacts: Sequence[str], *, dims: Dims | None = None, load: LoadOptions | None = None,
                window_ms: float = 0.0, max_rows: int | None = None, listen: Listen | None = None,
                on_note: Callable[[str], None] | None = None,
                on_line: Callable[[str], None] | None = None) -> Iterator[list[ServedModel]]:
    """The models of ``artifacts`` (each ``[NAME[@VERSION]=]ARTIFACT``), every bucket compiled, for the block; the
    artifacts, whose weights the models map, are closed after it.

    ``dims``: the bucket sizes by dimension variable (``jaxport serve --dim``; default: the spec's bounds'). ``load``:
    how to load each function (``LoadOptions``; ``cache_dir``: the compilation cache to warm up into and fetch from,
    default ``run.cache.default_cache_dir()``). ``window_ms`` and ``max_rows``: how requests are batched
    (``kserve_server.JaxportModel``). ``listen``: the address the server will listen on, checked before anything
    compiles. ``on_note`` gets each note of a load (a program older than this JAX's window, read by jaxport),
    ``on_line`` each model's :meth:`ServedModel.summary` once its buckets are compiled. Refusals are
    ``UsageError``s, in the module docstring's order; an artifact that cannot be read is refused as ``jaxport.load``
    refuses it."""
    options = load or LoadOptions()
    check_serving(options)
    if not options.cache:
        raise UsageError("a server compiles every bucket into JAX's compilation cache before it listens: give "
                         "cache_dir=DIR rather than cache=False.")
    specs = model_specs(artifacts)
    given = dict(dims or {})
    with contextlib.ExitStack() as stack:
        opened = _opened(stack, specs, options, given)  # loaded from these descriptors: never a path again
        if listen is not None:
            listen.check()  # before the minutes of compiling
        transport = _kserve_server()
        directory = options.cache_dir or default_cache_dir()
        served = []
        for spec, art in zip(specs, opened):
            start = time.perf_counter()
            loaded = load_served(art, options, directory)
            for note in loaded.notes:
                (on_note or _ignore)(note)
            variables = contract.dimension_variables(loaded.function_record)
            batched = Batched(loaded, {k: v for k, v in given.items() if k in variables}, cache_dir=directory)
            batched.warmup(directory)
            model = transport.JaxportModel(spec.name, spec.version, batched, window_ms=window_ms, max_rows=max_rows)
            served.append(ServedModel(spec, model, time.perf_counter() - start))
            (on_line or _ignore)(served[-1].summary())
        yield served


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
                                     grpc_port=where.grpc_port, max_request_bytes=where.max_request_bytes)

    def listening() -> None:
        (on_line or _ignore)(f"listening on {where.rest} (REST) and {where.grpc} (gRPC), ready: every bucket is "
                             f"compiled")
        emit({"event": "listening", **where.as_dict(),
              "models": [{"name": m.spec.name, "version": m.spec.version} for m in models]})
        emit({"event": "ready", "models": [m.as_dict() for m in models]})

    stopped_by = server.serve(listening)
    if stopped_by is not None:
        emit({"event": "stopped", "signal": _SIGNALS.get(stopped_by, str(stopped_by)), "exit_code": 128 + stopped_by})
    return stopped_by
