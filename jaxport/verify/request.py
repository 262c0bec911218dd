"""What to verify and how, as one record: :class:`VerifyRequest` holds the options of ``jaxport verify`` (and of
``jaxport.verify_artifact``), and refuses the combinations that mean nothing when it is built, with the messages of
the command line (``UsageError``, exit 2), so that the command and a Python caller share one set of rules.

How the artifact's functions are loaded is a :class:`~jaxport.run.options.LoadOptions` (``load``), whose fields
the constructor also takes by keyword (``VerifyRequest(path, runtime="iree")``), building the record once. No JAX at
import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._api_types import record_of
from ..errors import UsageError
from ..run.options import RUNTIMES, LoadOptions
from .localize import DEFAULT_TAP_BYTES
from .plan import DEFAULT_BUDGET_BYTES

__all__ = ["JAX_RUNTIME", "JAX_SIDE", "VerifyRequest"]

#: The runtime every other one is compared with: JAX's own (XLA), which runs the artifact as it was exported.
JAX_RUNTIME = RUNTIMES["jax"]
#: How results name the side of the artifact run by JAX, named by its compiler: ``xla``.
JAX_SIDE = JAX_RUNTIME.title.lower()


@dataclass(frozen=True, init=False)
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

    ``against_artifact``: another artifact of the same signature (an older version, or the original of an
    ``upgrade``d one), whose function of the same name is compared too, as side ``other``, instead of the live
    function (unless ``against`` is given). ``against_platform``: compare with the same artifact run on that platform
    (side named by it, e.g. ``cpu``), with the tolerances for two compilers. ``localize``: on the first case whose
    outputs differ, find the first operation whose results depart while its operands agree
    (:mod:`jaxport.verify.localize`), tapping at most ``localize_budget`` bytes of intermediate values per run on each
    side; ``localize_out``: a directory to write that operation into, alone, as a small artifact with its recorded
    inputs and both sides' outputs.

    ``load`` (or its fields by keyword, which replace its own where not at their defaults): ``function`` chooses one
    function of several; ``allow_custom_calls`` the custom-call targets beyond JAX's guaranteed-stable ones the artifact
    (and an imported artifact's module) may use, as for ``load``; with ``runtime="iree"``, the artifact run by IREE is
    compared with the same artifact run by JAX (``xla``) instead of the live function (no entry point needed), and
    ``module_dir`` is where IREE keeps its compiled modules (default: beside ``cache_dir``, JAX's compilation cache, as
    in ``jaxport.load``; none without either, nor with ``cache=False``: ``LoadOptions.module_directory``);
    ``verify_weights=False`` skips the sha256 check of the bound weights; ``allow_platform_mismatch`` verifies a
    function exported for no platform JAX here has on the local one.
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
    against_artifact: str | Path | None = None
    against_platform: str | None = None
    localize: bool = False
    localize_out: str | Path | None = None
    localize_budget: int = DEFAULT_TAP_BYTES
    load: LoadOptions = field(default_factory=LoadOptions)

    def __init__(self, artifact: str | Path, against: str | None = None, spec: Any = None, *,
                 dims: Mapping[str, list[int]] | None = None, platforms: list[str] | None = None,
                 atol: float | None = None, rtol: float | None = None, seed: int = 0,
                 budget_bytes: int = DEFAULT_BUDGET_BYTES, root: str | Path | None = None,
                 binds: Mapping[str, str] | None = None, inputs: Sequence[str] | Mapping[str, Any] | None = None,
                 expect: str | Path | None = None, ranges: Mapping[str, tuple[float, float]] | None = None,
                 allow_nonfinite: bool = False, against_artifact: str | Path | None = None,
                 against_platform: str | None = None, localize: bool = False, localize_out: str | Path | None = None,
                 localize_budget: int = DEFAULT_TAP_BYTES, load: LoadOptions | None = None,
                 function: str | None = None, runtime: str = "jax",
                 allow_platform_mismatch: bool = False, allow_custom_calls: Iterable[str] | None = (),
                 verify_weights: bool = True, cache_dir: str | Path | None = None, cache: bool = True,
                 module_dir: str | Path | None = None,
                 require_signature: str | Path | Iterable[str | Path] | None = (),
                 signature: str | Path | None = None, check_ranges: bool = False) -> None:
        own = {"artifact": artifact, "against": against, "spec": spec, "dims": _read_only(dims),
               "platforms": None if platforms is None else list(platforms), "atol": atol, "rtol": rtol, "seed": seed,
               "budget_bytes": budget_bytes, "root": root, "binds": _read_only(binds), "inputs": inputs,
               "expect": expect, "ranges": _read_only(ranges), "allow_nonfinite": allow_nonfinite,
               "against_artifact": against_artifact, "against_platform": against_platform, "localize": localize,
               "localize_out": localize_out, "localize_budget": localize_budget,
               "load": record_of(LoadOptions, load, locals(), "load")}
        for name, value in own.items():
            object.__setattr__(self, name, value)  # frozen: set once, here
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
        other = "--runtime iree" if self.across_compilers else None
        for flag, value in (("--against-artifact", self.against_artifact), ("--against-platform",
                                                                             self.against_platform)):
            if value is not None and other is not None:
                yield (f"{flag} and {other} are two comparisons; verify makes one at a time with them. Give one of "
                       f"them.")
            if value is not None:
                other = flag
        if self.localize_out is not None and not self.localize:
            yield "--localize-out writes the operation --localize blames; give --localize too."
        if self.localize and self.expect is not None and self.against is None and not self.across_compilers and \
                self.against_artifact is None and self.against_platform is None:
            yield ("--localize looks inside two programs, and stored reference outputs (--expect) have none: localize "
                   "against the live function (--against FILE.py:NAME), another artifact (--against-artifact OLD), "
                   "IREE (--runtime iree) or another platform (--against-platform NAME).")
        if self.localize_budget < 1:
            yield f"--localize-budget must be a positive number of bytes, not {self.localize_budget}."

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
    def two_compilers(self) -> bool:
        """Whether outputs are compared with the tolerances for two compilers (another runtime, or another
        platform)."""
        return self.across_compilers or self.against_platform is not None


def _read_only(mapping: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A read-only copy of ``mapping`` (None stays None): a frozen request's containers cannot change under it."""
    return None if mapping is None else MappingProxyType(dict(mapping))
