"""How ``jaxport serve`` and the batch engines' adapters load an artifact's function: by one
:class:`~jaxport.run.options.LoadOptions` record, through :func:`jaxport.run.load.load_by`, so that an option of how
to load reaches them without a keyword of its own here.

An adapter's constructor takes the record as ``load=`` and lists its fields as keywords too (``Engine(path,
cache_dir=...)``, the keywords it always took), building the record once (``_api_types.record_of``): the facade,
``scripts/check_layers.py`` rule 7. Serving compiles every shape bucket ahead, which only a runtime with the
``serving`` capability does (``run.options.RUNTIMES``): another is refused before anything loads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from ..artifact.container import Artifact
from ..errors import JaxportError, UsageError
from ..isolation.isolate import check_payload
from ..run.cache import CacheState, compilation_cache
from ..run.load import load_by
from ..run.loaded import Loaded
from ..run.options import RUNTIMES, LoadOptions


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
    with compilation_cache(cache_dir) if cache_dir is not None else contextlib.nullcontext(CacheState(None)) as held:
        return load_by(path, options, held=held)  # without cache_dir, the process's own cache: none set up here
