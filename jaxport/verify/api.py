"""``jaxport.verify_artifact`` and ``jaxport.localize``: verification from Python by keywords (the facade,
``scripts/check_layers.py`` rule 7).

Each takes a :class:`~.request.VerifyRequest`, or the artifact's path, and the request's fields as keywords (those of
how to load, :class:`~jaxport.run.options.LoadOptions`, too), each with the field's default, builds the request
once, and runs it with :func:`.runner.verify_by`, which the command line calls with the request it builds. A keyword
left at its default leaves the value of a request given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._api_types import changed, record_of
from ..run.options import LoadOptions
from .localize import DEFAULT_TAP_BYTES
from .localize.report import LocalizeReport
from .plan import DEFAULT_BUDGET_BYTES
from .report import VerifyReport
from .request import VerifyRequest
from .runner import verify_by

__all__ = ["localize", "verify"]


def verify(artifact: str | Path | VerifyRequest, against: str | None = None, spec: Any = None, *,
           progress: Callable[[int, int, str], None] | None = None, dims: Mapping[str, list[int]] | None = None,
           platforms: list[str] | None = None, atol: float | None = None, rtol: float | None = None,
           seed: int = 0, budget_bytes: int = DEFAULT_BUDGET_BYTES, root: str | Path | None = None,
           binds: Mapping[str, str] | None = None, inputs: Sequence[str] | Mapping[str, Any] | None = None,
           expect: str | Path | None = None, ranges: Mapping[str, tuple[float, float]] | None = None,
           allow_nonfinite: bool = False, against_artifact: str | Path | None = None,
           against_platform: str | None = None, localize: bool = False, localize_out: str | Path | None = None,
           localize_budget: int = DEFAULT_TAP_BYTES, load: LoadOptions | None = None, function: str | None = None,
           runtime: str = "jax", allow_platform_mismatch: bool = False,
           allow_custom_calls: Iterable[str] | None = (), verify_weights: bool = True,
           cache_dir: str | Path | None = None, cache: bool = True, module_dir: str | Path | None = None,
           require_signature: str | Path | Iterable[str | Path] | None = (), signature: str | Path | None = None,
           check_ranges: bool = False) -> VerifyReport:
    """Verify an artifact against the live function(s) it was exported from (``jaxport verify``; see
    :mod:`jaxport.verify.runner`).

    ``artifact``: a :class:`VerifyRequest`, or the artifact's path; the other arguments are the request's fields
    (``against``, ``spec``, ``dims``, ``inputs``, ``expect``, ``runtime``, ...; the request documents each), which
    replace a given request's. ``progress(done, total, description)`` is called before and after each case.
    Returns the report; raises only for problems that stop verification (options, artifact, entry point, spec,
    platform, inputs, reference file).
    """
    return verify_by(_request(artifact, locals()), progress=progress)


def localize(artifact: str | Path | VerifyRequest, against: str | None = None, spec: Any = None, *,
             progress: Callable[[int, int, str], None] | None = None, dims: Mapping[str, list[int]] | None = None,
             platforms: list[str] | None = None, atol: float | None = None, rtol: float | None = None,
             seed: int = 0, budget_bytes: int = DEFAULT_BUDGET_BYTES, root: str | Path | None = None,
             binds: Mapping[str, str] | None = None, inputs: Sequence[str] | Mapping[str, Any] | None = None,
             expect: str | Path | None = None, ranges: Mapping[str, tuple[float, float]] | None = None,
             allow_nonfinite: bool = False, against_artifact: str | Path | None = None,
             against_platform: str | None = None, localize_out: str | Path | None = None,
             localize_budget: int = DEFAULT_TAP_BYTES, load: LoadOptions | None = None, function: str | None = None,
             runtime: str = "jax", allow_platform_mismatch: bool = False,
             allow_custom_calls: Iterable[str] | None = (), verify_weights: bool = True,
             cache_dir: str | Path | None = None, cache: bool = True, module_dir: str | Path | None = None,
             require_signature: str | Path | Iterable[str | Path] | None = (),
             signature: str | Path | None = None, check_ranges: bool = False) -> LocalizeReport:
    """Where an artifact and what it is compared with part: the first operation whose results leave the tolerance
    while its operands are within it, with its source line (``jaxport verify --localize``).

    The arguments are :func:`verify`'s (``jaxport.verify_artifact``; ``localize`` is always on): the comparison is
    the live function (default, or ``against``), another artifact (``against_artifact``), IREE (``runtime="iree"``)
    or another platform (``against_platform``); ``localize_out`` writes the blamed operation alone as an artifact
    with its inputs and both sides' outputs. Verification runs as usual and the first case whose outputs differ is
    localized. Returns the :class:`LocalizeReport` (``report.to_json()``; ``report.verify`` is the verification's
    report, whose ``passed`` is the verdict).
    """
    report = verify_by(_request(artifact, {**locals(), "localize": True}), progress=progress)
    found: LocalizeReport = report.localized
    found.verify = report
    return found


#: The request's fields a facade function takes as its own keywords (the load's are picked by ``record_of``).
_FIELDS = tuple(f.name for f in dataclasses.fields(VerifyRequest) if f.name not in ("artifact", "load"))


def _request(artifact: str | Path | VerifyRequest, arguments: Mapping[str, Any]) -> VerifyRequest:
    """The request the facade's ``arguments`` (its parameters by name) make, built once: the one given
    (``artifact``), or one of the artifact's path, with each field given (not at its default:
    ``_api_types.changed``) replacing its value, and how to load (``load``, else the given request's) with the
    load's fields given."""
    given = artifact if isinstance(artifact, VerifyRequest) else None
    own = {k: arguments[k] for k in _FIELDS}
    load = arguments["load"] or (given.load if given is not None else None)
    replaced = {**changed(VerifyRequest, own), "load": record_of(LoadOptions, load, arguments, "load")}
    if isinstance(artifact, VerifyRequest):
        return dataclasses.replace(artifact, **replaced)
    return VerifyRequest(artifact, **replaced)
