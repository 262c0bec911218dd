"""How ``jaxport serve`` and the batch engines' adapters load an artifact's function: by one
:class:`~jaxport.run.options.LoadOptions` record, through :func:`jaxport.run.load.load_with`, so that an option of
how to load reaches them without a keyword of its own here.

An adapter takes the record as ``load=`` and its fields by keyword as well (``Engine(path, cache_dir=...)``, the
keywords it always took), as a request holding the record does (``run.options.holding_load_options``). Serving
compiles every shape bucket ahead, which only a runtime with the ``serving`` capability does
(``run.options.RUNTIMES``): another is refused before anything loads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..artifact.container import Artifact
from ..errors import JaxportError, UsageError
from ..isolation.isolate import check_payload
from ..run.cache import compilation_cache
from ..run.load import load_with
from ..run.loaded import Loaded
from ..run.options import LOAD_FIELDS, RUNTIMES, LoadOptions
from ..run.options import merged as with_fields


def merged(load: LoadOptions | None, given: Mapping[str, Any], where: str) -> LoadOptions:
    """``load`` (default: ``LoadOptions()``) with the fields given by keyword that are not None (None: not given,
    as the keywords' defaults are; ``run.options.merged``); a keyword that is no field is a ``TypeError`` naming
    ``where``, as Python's own."""
    unknown = [k for k in given if k not in LOAD_FIELDS]
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")
    return with_fields(load, {k: v for k, v in given.items() if v is not None})


def check_serving(options: LoadOptions) -> None:
    """Refuse a runtime that cannot serve (see the module docstring), before anything loads."""
    if not options.runs_on.serving:
        serving = [r.name for r in RUNTIMES.values() if r.serving]
        raise UsageError(f"runtime {options.runtime!r} cannot serve: serving compiles every shape bucket ahead, "
                         f"which the {' or '.join(map(repr, serving))} runtime does; load with that one.")


def check_programs(opened: Sequence[tuple[Artifact, str]]) -> None:
    """The program check (``isolation.isolate.check_payload``) of each function ``(artifact, name)``, all before
    any is loaded: loading or compiling one starts JAX's backends, after which a check can no longer run in a fork of
    this process and starts a fresh interpreter instead (0.5 s a model). A refusal is left to the load, which
    reports it with the artifact's message."""
    for art, fname in opened:
        with contextlib.suppress(JaxportError):
            check_payload(art.read(art.model.functions[fname].payload), str(art.path), fname)


def load_served(path: str | Path | Artifact, options: LoadOptions, cache_dir: str | Path | None) -> Loaded:
    """The function ``options`` chooses of the artifact at ``path`` (or open: ``run.load.load``), loaded with JAX's
    compilation cache in ``cache_dir`` when given, so that the program check's verdict is read from it (no checking
    child). The caller has refused a runtime that cannot serve (:func:`check_serving`), before anything else."""
    with compilation_cache(cache_dir) if cache_dir is not None else contextlib.nullcontext():
        return load_with(path, options, cache_dir=cache_dir)
