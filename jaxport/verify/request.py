"""What to verify and how, as one record: :class:`VerifyRequest` holds the options of ``jaxport verify`` (and of
``jaxport.verify_artifact``), and refuses the combinations that mean nothing when it is built, with the messages of
the command line (``UsageError``, exit 2), so that the command and a Python caller share one set of rules.

How the artifact's functions are loaded is a :class:`~jaxport.run.options.LoadOptions` (``load``), whose fields
the request also takes by keyword (``VerifyRequest(path, runtime="iree")``). No JAX at import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import UsageError
from ..run.options import RUNTIMES, LoadOptions, holding_load_options
from .plan import DEFAULT_BUDGET_BYTES

__all__ = ["JAX_RUNTIME", "JAX_SIDE", "VerifyRequest"]

#: The runtime every other one is compared with: JAX's own (XLA), which runs the artifact as it was exported.
JAX_RUNTIME = RUNTIMES["jax"]
#: How results name the side of the artifact run by JAX, named by its compiler: ``xla``.
JAX_SIDE = JAX_RUNTIME.title.lower()


@holding_load_options
@dataclass(frozen=True)
class VerifyRequest:
    """What to verify against what (see :mod:`jaxport.verify.runner` for what verification does).

    ``artifact``: the ``.jaxport`` file. ``against`` (``model.py:NAME``) and ``spec`` default to the entry point and
    spec the manifest records, relative to ``root`` (default: the current directory) and refused when they are not
    files under it (see :mod:`.recorded`); a recorded spec that is not found is skipped with a note; ``spec`` may also
    be a ``jaxport.Spec`` or a spec dict (its ``jaxport.like`` values are read from it). ``binds`` maps bound
    arguments to sources the user names (``--bind NAME=SOURCE``), replacing the recorded ones. ``dims`` maps
    dimension variables to the values to try; ``ranges`` (input name -> ``(LO, HI)``) the values of random inputs, as
    ``run.values.inputs.random_inputs`` takes them, drawn from ``seed`` (case ``i`` from ``seed + i``); each planned
    case is kept under ``budget_bytes`` of inputs and outputs. ``inputs`` replaces the planned random cases by one case
    on the given inputs: ``--inputs`` values as ``call`` takes them, or arrays by name. ``expect`` (with ``inputs``): a
    file of reference outputs keyed by output name (as ``call -o`` writes them) to compare with; the live function is
    then compared too only when ``against`` is given. ``atol``/``rtol`` replace the tolerances by output dtype;
    ``allow_nonfinite``: an output that is NaN/Inf everywhere on both sides passes instead of failing as
    inconclusive. ``platforms``: the platforms to verify on (default: every one the function was exported for that
    JAX here has).

    ``load`` (or its fields by keyword): ``function`` chooses one function of several; ``allow_custom_calls`` the
    custom-call targets beyond JAX's guaranteed-stable ones the artifact (and an imported artifact's module) may use,
    as for ``load``; with ``runtime="iree"``, the artifact run by IREE is compared with the same artifact run by JAX
    (``xla``) instead of the live function (no entry point needed), and ``module_dir`` is where IREE keeps its
    compiled modules (default: beside ``cache_dir``, JAX's compilation cache, as in ``jaxport.load``; none without
    either, nor with ``cache=False``); ``verify_weights=False`` skips the sha256 check of
    the bound weights; ``allow_platform_mismatch`` verifies a function exported for no platform JAX here has on the
    local one.
    """

    artifact: str | Path
    against: str | None = None
    spec: Any = None
    _: KW_ONLY
    dims: Mapping[str, list[int]] | None = None
    platforms: list[str] | None = None
    atol: float | None = None
    rtol: float | None = None
    seed: int = 0
    budget_bytes: int = DEFAULT_BUDGET_BYTES
    root: str | Path | None = None
    binds: Mapping[str, str] | None = None
    inputs: Sequence[str] | Mapping[str, Any] | None = None
    expect: str | Path | None = None
    ranges: Mapping[str, tuple[float, float]] | None = None
    allow_nonfinite: bool = False
    load: LoadOptions = field(default_factory=LoadOptions)

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: the containers copied once, here, read-only where they are mappings
        for name in ("dims", "binds", "ranges"):
            value = getattr(self, name)
            set_(self, name, None if value is None else MappingProxyType(dict(value)))
        if self.platforms is not None:
            set_(self, "platforms", list(self.platforms))
        for problem in self._combination_problems():
            raise UsageError(problem)

    def _combination_problems(self) -> Iterable[str]:
        """The rules of ``jaxport verify`` on options given together, in its order."""
        if self.expect is not None and self.inputs is None:
            yield ("--expect compares the outputs for given inputs with reference outputs; give those inputs with "
                   "--inputs (e.g. the file 'jaxport call --save-inputs FILE.npz' wrote).")
        if self.inputs is not None and self.dims:
            yield ("--dim chooses the cases of random inputs; with --inputs the dimensions come from the inputs' "
                   "shapes. Leave out --dim.")
        if self.inputs is not None and self.ranges:
            yield "--range chooses the values of random inputs; with --inputs they are given. Leave out --range."

    def check_functions(self, names: list[str]) -> None:
        """The rules on the artifact's functions ``names`` that are verified: ``against`` and ``inputs`` are those
        of one function."""
        several = f"but the artifact holds {len(names)} ({', '.join(names)}); choose one with --function NAME."
        if self.against is not None and len(names) > 1:
            raise UsageError(f"{self.artifact}: --against names one function, {several}")
        if self.inputs is not None and len(names) > 1:
            raise UsageError(f"{self.artifact}: --inputs gives the inputs of one function, {several}")

    @property
    def across_compilers(self) -> bool:
        """Whether the artifact runs on another runtime than JAX's, and is compared with itself run by JAX (with the
        tolerances for two compilers) instead of with the live function."""
        return self.load.runs_on is not JAX_RUNTIME

    @property
    def module_cache(self) -> Path | None:
        """Where a runtime that compiles on its own (IREE) keeps its compiled modules (``LoadOptions.module_dir``, else
        beside ``cache_dir``); None: nowhere."""
        return self.load.module_directory()
