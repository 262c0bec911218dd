"""How to load an artifact's function, said once: the runtimes that can run one (:data:`RUNTIMES`, each with what
it can do) and :class:`LoadOptions`, the record ``call``, ``verify``, ``warmup``, ``serve`` and the batch engines'
adapters hold, which :func:`jaxport.run.load.load_by` opens a function by.

Inside the library the record travels whole. The public entry points that take its fields as keywords
(``jaxport.load``, ``CallRequest``, ``VerifyRequest``, the batch engines' adapters: the facade,
``scripts/check_layers.py`` rule 7) list each field as a parameter of their own and build the record once
(``_api_types.record_of``), so that an option of how to load is a field here, a parameter of each of them (which
``tests/test_facade.py`` holds to this record), an option in the command line's group, and the code that uses it.
No JAX at import.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

__all__ = ["RUNTIMES", "LoadOptions", "Runtime", "runtime"]


@dataclass(frozen=True)
class Runtime:
    """One runtime an artifact's program runs on, and what it can do."""

    name: str  # what ``--runtime`` and ``runtime=`` take
    title: str  # how reports and verify's sides name it ("XLA", "IREE")
    summary: str  # one line for help texts
    derivatives: bool  # runs the stored derivatives (``call --vjp``, verify's gradient checks)
    streaming: bool  # streams inputs in chunks (``call --batch-size``)
    serving: bool  # compiles shape buckets ahead and serves them (``jaxport serve``, the batch engines' adapters)
    platforms: tuple[str, ...] | None  # the platforms it runs on; None: JAX's own
    cache_subdir: str | None  # the compiled modules' directory beside JAX's compilation cache; None: JAX's cache

    def modules_beside(self, jax_cache_dir: str | Path | None) -> Path | None:
        """Where this runtime keeps the modules it compiles: a ``cache_subdir`` directory beside JAX's compilation
        cache (``~/.cache/jaxport/xla`` -> ``~/.cache/jaxport/iree``); None for JAX's own, or without a cache."""
        if self.cache_subdir is None or jax_cache_dir is None:
            return None
        path = Path(jax_cache_dir)
        return path.with_name(self.cache_subdir) if path.name == "xla" else path / self.cache_subdir


#: Every runtime, by name, in the order help texts list them.
RUNTIMES: dict[str, Runtime] = {
    "jax": Runtime("jax", "XLA", "JAX's own compiler (XLA), on JAX's platform", derivatives=True, streaming=True,
                   serving=True, platforms=None, cache_subdir=None),
    "iree": Runtime("iree", "IREE", "IREE, compiled for the CPU (the optional extra jaxport[iree])",
                    derivatives=False, streaming=False, serving=False, platforms=("cpu",), cache_subdir="iree"),
}


def runtime(name: str) -> Runtime:
    """The runtime called ``name``; ``UsageError`` (exit 2) for one there is not."""
    found = RUNTIMES.get(name) if isinstance(name, str) else None
    if found is None:
        raise UsageError(f"unknown runtime {name!r}: use {' or '.join(repr(n) for n in RUNTIMES)}.")
    return found


def _paths(value: str | Path | Iterable[str | Path] | None) -> tuple[str | Path, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, (str, os.PathLike)) else tuple(value)


def _names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class LoadOptions:
    """How to open an artifact's function to run it (the options ``call``, ``verify``, ``warmup`` and ``serve``
    share; :func:`jaxport.run.load.load` documents each).

    ``function``: the function to run, when the artifact holds several. ``runtime``: a name in :data:`RUNTIMES`.
    ``allow_platform_mismatch``: try a function exported for other platforms on the local one.
    ``allow_custom_calls``: custom-call targets beyond JAX's guaranteed-stable ones the program may call.
    ``verify_weights``: check the bound weights' sha256 (the default). ``cache_dir``: JAX's compilation cache, and
    jaxport's records beside it (check verdicts, padding verdicts, shipped executables; default: the commands'
    ``jaxport.run.cache.default_cache_dir()``, ``jaxport.load``'s the process's own); ``cache=False``: none.
    ``module_dir``: where a runtime that compiles on its own (IREE) keeps its modules (default: beside the
    compilation cache, :meth:`module_directory`). ``require_signature``: the trusted public
    keys (PEM paths) of which one must have signed the artifact, its bundle at ``signature`` (default
    ``ARTIFACT.sig``), checked before the artifact is read (``SignatureError``, exit 14, otherwise).
    ``check_ranges``: refuse an input value outside the ``range`` its manifest entry declares (``InputError``,
    exit 9), where otherwise a range only shapes random inputs.
    """

    function: str | None = None
    runtime: str = "jax"
    allow_platform_mismatch: bool = False
    #: kept as a tuple; the keyword takes any iterable of targets, or None
    allow_custom_calls: tuple[str, ...] = ()
    verify_weights: bool = True
    cache_dir: str | Path | None = None
    cache: bool = True
    #: IREE's compiled modules (``runtime="iree"``); default: beside ``cache_dir`` (``Runtime.modules_beside``)
    module_dir: str | Path | None = None
    #: the public keys (or CA certificates, PEM) one of which must have signed the artifact, checked before anything
    #: else reads it (``artifact.signing.bundle``); kept as a tuple of paths, the keyword takes one path or several
    require_signature: tuple[str | Path, ...] = ()
    #: where that signature is (default: ``ARTIFACT.sig`` beside the artifact)
    signature: str | Path | None = None
    #: the inputs' declared ranges (``range:``) as a contract: a value outside one is refused
    check_ranges: bool = False

    def __post_init__(self) -> None:
        runtime(self.runtime)
        object.__setattr__(self, "allow_custom_calls", _names(self.allow_custom_calls))  # frozen: normalised once
        object.__setattr__(self, "require_signature", _paths(self.require_signature))
        if self.signature is not None and not self.require_signature:
            raise UsageError("signature names the bundle to check, but no key is trusted: give the trusted public "
                             "key with --require-signature PUBLIC.pem (require_signature= in Python).")
        if self.module_dir is not None and self.runtime != "iree":
            raise UsageError(f"module_dir names where IREE keeps the modules it compiles, but the runtime is "
                             f"{self.runtime}, which compiles none: give --runtime iree (runtime='iree' in Python), "
                             f"or leave out --module-dir.")

    @property
    def runs_on(self) -> Runtime:
        """The runtime record of ``runtime``."""
        return RUNTIMES[self.runtime]

    def module_directory(self, in_use: str | Path | None = None) -> Path | None:
        """Where a runtime that compiles on its own (IREE) keeps its modules: ``module_dir``; else beside JAX's
        compilation cache (``cache_dir``, else ``in_use``, the one a command's block uses: ``Runtime.modules_beside``,
        ``~/.cache/jaxport/xla`` -> ``~/.cache/jaxport/iree``, ``DIR`` -> ``DIR/iree``); None without either, or
        with ``cache=False``."""
        if self.module_dir is not None:
            return Path(self.module_dir)
        if not self.cache:
            return None
        return self.runs_on.modules_beside(self.cache_dir if self.cache_dir is not None else in_use)
