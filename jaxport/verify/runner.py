"""Verification: run an artifact and compare its outputs with a reference on the same inputs.

What to verify and how is a :class:`~.request.VerifyRequest`. The reference is the live function it was exported
from, stored reference outputs (``expect``, golden data written by ``call -o``), or both; with ``runtime="iree"``,
the same artifact run by JAX (the sides are then named ``iree`` and ``xla``, and compared with the tolerances for
two compilers, :data:`jaxport.tolerance.COMPILER_TOLERANCES`).

For each function, :func:`.plan.plan_cases` picks assignments of the dimension variables from the manifest's bounds
and constraints, each kept under a memory budget; ``dims`` replaces the plan with the product of the values given.
Inputs are seeded random arrays (``run.values.inputs.random_inputs``: the ``ranges`` given, else the ranges the manifest
declares, else small non-negative integers, which index safely, and standard normal floats), or the one set of
inputs ``inputs`` names (one case, its dimensions solved from their shapes). The artifact runs through
``run.load.load``, and the live function (:class:`.live.LiveFunction`) is called as the export called it. Every
output is compared with :func:`jaxport.tolerance.compare` against per-dtype tolerances; an output that is NaN/Inf
everywhere on both sides is inconclusive and fails unless ``allow_nonfinite``. When the artifact carries derivatives
(``vjp_order >= 1``), each case also compares the input cotangents of the artifact's stored VJP with ``jax.vjp`` of
the live function, for the same seeded output cotangents, as outputs named ``vjp(INPUT)`` (:mod:`.gradients`).

An imported artifact (its entry point a StableHLO module) has no Python function to compare with: comparing the
module with itself proves nothing, so it is verified against ``expect`` or a Python function named with ``against``.

When a spec is given (or the one the manifest records is found), :func:`.spec_check.spec_differences` checks that
it describes the artifact's signature: arguments, dtypes, shapes, static values, bounds and constraints.

What the manifest records (entry points, the spec, bound sources, an imported module) is followed only under a root
the user controls, the current directory by default (:mod:`.recorded`); what the user names is taken as given. The
artifact runs under the same custom-call rule as ``call`` (``checks.check_runnable``): JAX's guaranteed-stable
targets plus ``allow_custom_calls``, whatever the artifact says it allows.

Everything here imports JAX only when it runs something.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import dtypes
from ..artifact import calltree
from ..artifact.container import Artifact
from ..artifact.manifest import function_names
from ..artifact.model import Function, Manifest
from ..artifact.window.payload import module_bytes
from ..errors import JaxportError, PlatformError, UsageError
from ..export.entry.entrypoint import in_memory_values
from ..program.checks import caller_allowances
from ..program.module_scan import element_types
from ..run import load as runtime_mod
from ..run.buckets import sizes
from ..run.options import RUNTIMES, LoadOptions
from ..run.values import inputs as inputs_mod
from ..spec import ShapeSpec, as_shape_spec, like_values, load_spec
from ..tolerance import OutputResult, compare, lowest_float
from . import recorded
from .gradients import compare_with_live
from .live import LiveFunction, Sources, load_live
from .localize.case import Options, SideSource, agreeing, localize_case
from .plan import Case, chosen_for, plan_cases
from .report import CaseResult, FunctionPlan, VerifyReport
from .request import JAX_RUNTIME, JAX_SIDE, VerifyRequest
from .sides import NONFINITE_FIX, Side, given_inputs, nonfinite_fix, reference_side
from .spec_check import spec_differences

#: What the artifact's outputs are compared with: a function of the named inputs returning ``(name, array)`` pairs
#: (a :class:`LiveFunction`, or with ``runtime="iree"`` the artifact run by JAX).
Reference = Callable[[Mapping[str, Any]], list[tuple[str, Any]]]

def verify_by(request: VerifyRequest, *, progress: Callable[[int, int, str], None] | None = None) -> VerifyReport:
    """Verify an artifact against the live function(s) it was exported from, as ``request`` says (see the module
    docstring). ``progress(done, total, description)`` is called before and after each case. ``jaxport
    .verify_artifact`` (``verify.api``) builds the request from keywords.

    Returns the report; raises only for problems that stop verification (options, artifact, entry point, spec,
    platform, inputs, reference file).
    """
    recorded.find_root(request.root, None, None, [])  # a --root that is not a directory, refused first
    # opened once, a required signature checked on its descriptor: every function and platform below loads from it
    with contextlib.ExitStack() as stack:
        art = stack.enter_context(runtime_mod.open_checked(request.artifact, request.load))
        other = None if request.against_artifact is None else \
            stack.enter_context(runtime_mod.open_checked(request.against_artifact, request.load))
        setting = _setting(request, art)
        setting.other = other
        prepared = [_prepare(setting, fname) for fname in setting.names]
        report = VerifyReport(setting.where, request.seed, request.budget_bytes, setting.spec_shown,
                              setting.differences, [p.plan for p in prepared], notes=setting.notes)
        _run(setting, prepared, report, progress)
        return report


@dataclass
class _Setting:
    """What every verified function shares: the request, the artifact open, the functions verified, the root the
    recorded paths are followed under, the spec found (with the signature's differences from it), where live
    functions come from, the custom-call targets allowed, and the notes for the report."""

    request: VerifyRequest
    art: Artifact
    names: list[str]
    spec: ShapeSpec | None
    spec_shown: str | None
    differences: list[str]
    sources: Sources
    likes: dict[str, Any]
    ranges: dict[str, dict[str, tuple[float, float]]]
    notes: list[str]
    #: The artifact compared with (``against_artifact``), open.
    other: Artifact | None = None

    @property
    def where(self) -> str:
        return str(self.request.artifact)

    @property
    def manifest(self) -> Manifest:
        return self.art.model


def _setting(request: VerifyRequest, art: Artifact) -> _Setting:
    """Read what the request asks of this artifact, refusing what does not apply to it, in the order ``verify``
    reports problems: the functions, the spec, ``--bind``, ``--dim`` and ``--range``."""
    manifest, where = art.model, str(request.artifact)
    names = function_names(manifest, request.load.function)
    request.check_functions(names)
    notes: list[str] = []
    spec = request.spec
    given_path = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else None  # else a Spec, a dict or none
    likes = like_values(spec)  # a spec given from Python holds its jaxport.like values
    root = recorded.find_root(request.root, manifest, given_path, notes)
    found, shown = _spec(spec, given_path, manifest, root, notes)
    _check_binds(request.binds or {}, manifest, names, where)
    differences: list[str] = []
    if found is not None:
        found = recorded.as_exported(found, manifest, root)  # with the export's command-line binds
        for fname in names:
            differences += spec_differences(found, fname, manifest.functions[fname], len(manifest.functions))
    _check_dims(request.dims, manifest, names)
    # Recorded bound sources stay under the root, or under the directory of a spec the user named.
    roots = [root] + ([Path(given_path).parent] if given_path is not None else [])
    sources = Sources(root, roots, request.binds or {}, caller_allowances(request.load.allow_custom_calls),
                      {name: t.sha256 for name, t in manifest.tensors.items()})
    return _Setting(request, art, names, found, shown, differences, sources, likes,
                    _ranges_by_function(request.ranges, manifest, names), notes)


def _spec(spec: Any, given_path: str | None, manifest: Manifest, root: Path,
          notes: list[str]) -> tuple[ShapeSpec | None, str | None]:
    """The spec the signature is compared with, and how the report names it: one given from Python (a
    ``jaxport.Spec`` or a dict, which also holds its ``jaxport.like`` values), the file given, or the one the
    manifest records when it is found under ``root`` (else a note)."""
    if spec is not None and given_path is None:
        built = as_shape_spec(spec)
        return built, built.file
    if given_path is not None:
        return load_spec(given_path), given_path
    recorded_spec = manifest.source.spec
    if recorded_spec is None:
        return None, None
    spec_file = recorded.spec_path(recorded_spec, root)
    if spec_file.is_file():
        return load_spec(spec_file), recorded_spec
    notes.append(f"the spec the artifact records ({recorded_spec}) is not in {recorded.shown_root(root)}; the "
                 f"signature was not compared with a spec (give one with --shapes)")
    return None, None


def _check_binds(binds: Mapping[str, str], manifest: Manifest, names: list[str], where: str) -> None:
    """Every ``--bind NAME`` must name a bound argument of a verified function."""
    bound = sorted({s.name for fname in names for s in calltree.walk(manifest.functions[fname].signature)
                    if s.kind == "bound"})
    for name in binds:
        if name not in bound:
            raise UsageError(f"--bind {name}: {where} has no bound argument {name!r}; its bound arguments are "
                             f"{', '.join(bound) or 'none'}.")


def _check_dims(dims: Mapping[str, list[int]] | None, manifest: Manifest, names: list[str]) -> None:
    """Every ``--dim NAME`` must name a dimension variable of a verified function (``run.buckets.sizes``, as every
    command checks it); each function checks its sizes (``plan.plan_cases``)."""
    sizes.check_names(dims or {}, [manifest.functions[fname] for fname in names])


def _ranges_by_function(ranges: Mapping[str, tuple[float, float]] | None, manifest: Manifest,
                        names: list[str]) -> dict[str, dict[str, tuple[float, float]]]:
    """The ``--range`` values that apply to each verified function: all of them for the only function (checked by
    ``check_ranges``), else those of its inputs (an input no function has is refused)."""
    fns = {n: manifest.functions[n] for n in names}
    if len(names) > 1:
        known = {i for f in fns.values() for i in f.input_names}
        for name in ranges or {}:
            if name not in known:
                raise UsageError(f"--range: no function of the artifact has an input {name!r}; their inputs are: "
                                 f"{', '.join(sorted(known)) or '(none)'}.")
    out = {}
    for n, f in fns.items():
        have = set(f.input_names)
        out[n] = dict(ranges or {}) if len(names) == 1 else {k: v for k, v in (ranges or {}).items() if k in have}
        inputs_mod.check_ranges(f, out[n])
    return out


@dataclass(frozen=True)
class _Prepared:
    """One function made ready: its plan, the sides its outputs are compared with, and the inputs given
    (``--inputs``; None: random inputs for each case)."""

    function: Function
    plan: FunctionPlan
    sides: list[Side]
    given: dict[str, Any] | None
    #: With two compilers (``two_compilers``: IREE, or another platform): the program's lowest-precision float type,
    #: whose compiler tolerances its float outputs of higher precision take (``tolerance.tolerance``); None otherwise.
    computed_in: str | None = None


def _prepare(s: _Setting, fname: str) -> _Prepared:
    """Plan one function's cases and find its sides, refusing what cannot run before anything does."""
    r, f = s.request, s.manifest.functions[fname]
    given = None
    if r.inputs is not None:
        given, case = given_inputs(f, r.inputs, r.load.check_ranges)
        cases = [case]
    else:
        cases = plan_cases(f, chosen_for(f, r.dims, len(s.names) > 1), r.budget_bytes)
    sides: list[Side] = []
    stored = reference_side(r.expect, f) if r.expect is not None else None  # refused before any import
    computed_in = _computed_in(s, fname, f) if r.two_compilers else None
    if r.across_compilers:
        reference = runtime_mod.load_by(s.art, LoadOptions(  # JAX's own run of it, with the load's signature check
            function=fname, allow_custom_calls=tuple(s.sources.allowed), require_signature=r.load.require_signature,
            signature=r.load.signature))
        sides.append(Side(JAX_SIDE, "the JAX runtime", _outputs_of(reference), source=reference))
        platforms = [_local_platform()]
    else:
        platforms = _platforms(fname, f, r.platforms, s.where, r.load.allow_platform_mismatch,
                               without=r.against_platform)
        runtime_mod.runnable_program(s.art, fname, s.sources.allowed, s.where, s.notes)  # refused before it runs
    if r.against_artifact is not None:
        sides.append(_other_side(s, fname, f))
    if r.against_platform is not None:
        sides.append(_platform_side(s, fname, f, r.against_platform))
    if r.against is not None or (r.expect is None and not r.across_compilers and r.against_artifact is None and
                                 r.against_platform is None):
        sides.append(_live_side(s, fname, f))
    if stored is not None:
        sides.append(stored)
    plan = FunctionPlan(fname, " and ".join(side.shown for side in sides), platforms, cases,
                        actual=r.load.runtime if r.across_compilers else "artifact",
                        sides=[side.label for side in sides])
    return _Prepared(f, plan, sides, given, computed_in)


def _computed_in(s: _Setting, fname: str, f: Function) -> str | None:
    """The lowest-precision float type ``fname``'s program computes in, when it is below a float output's (then a
    note says that those outputs take its two-compiler tolerances); else None."""
    program = module_bytes(s.art.read(f.payload), s.where, fname)
    low = lowest_float(element_types(program))
    if low is None:
        return None
    precision = dtypes.BY_NAME[low].precision or 0
    above = [o.name for o in f.outputs if dtypes.BY_NAME[o.dtype].kind in ("float", "complex")
             and (dtypes.BY_NAME[o.dtype].precision or 0) > precision]
    if not above:
        return None
    if s.request.atol is None or s.request.rtol is None:
        atol, rtol = dtypes.BY_NAME[low].compiler_tolerance
        shown = ", ".join(repr(n) for n in above[:3]) + (f" and {len(above) - 3} more" if len(above) > 3 else "")
        s.notes.append(f"function {fname!r} computes in {low}: its output{'s' if len(above) > 1 else ''} {shown} "
                       f"{'take' if len(above) > 1 else 'takes'} {low}'s tolerances for two compilers (atol {atol:g}, "
                       f"rtol {rtol:g}), which round its intermediates apart")
    return low


def _live_side(s: _Setting, fname: str, f: Function) -> Side:
    """The live function of ``fname``: ``--against``, else the entry point the artifact records."""
    against = s.request.against
    text = against if against is not None else f.entrypoint
    if not isinstance(text, str):
        raise UsageError(f"{s.where}: function {fname!r} records no entry point; give it with --against.")
    if against is None and text.rpartition(":")[0].lower().endswith(recorded.MODULE_SUFFIXES):
        raise UsageError(_imported_message(s.where, fname, text))
    spec = s.spec
    fspec = None if spec is None else spec.functions.get(
        fname, spec.functions.get(None) if len(s.manifest.functions) == 1 else None)
    with in_memory_values(s.likes):
        live = load_live(text, against is None, f, f"{s.where}: function {fname!r}", s.sources, spec=spec,
                         fspec=fspec)
    return Side("live", text, live, source=live)


#: How results name the side of another artifact (``--against-artifact``).
OTHER_SIDE = "other"


def _other_side(s: _Setting, fname: str, f: Function) -> Side:
    """The function of the same name (or the only one) of the artifact ``against_artifact`` names, which must take
    the same inputs."""
    other, path = s.other, str(s.request.against_artifact)
    assert other is not None
    names = list(other.model.functions)
    gname = fname if fname in other.model.functions else names[0] if len(names) == 1 else None
    if gname is None:
        raise UsageError(f"--against-artifact {path}: it has no function {fname!r} (it has {', '.join(names)}).")
    g = other.model.functions[gname]
    mine = [(i.name, i.dtype) for i in f.inputs]
    theirs = [(i.name, i.dtype) for i in g.inputs]
    if mine != theirs:
        shown = lambda items: ", ".join(f"{n}: {d}" for n, d in items) or "(none)"  # noqa: E731
        raise UsageError(f"--against-artifact {path}: function {gname!r} takes inputs {shown(theirs)}, and "
                         f"{s.where}'s {fname!r} takes {shown(mine)}; compare artifacts of the same signature.")
    loaded = runtime_mod.load_by(other, dataclasses.replace(
        s.request.load, function=gname, allow_custom_calls=tuple(sorted(s.sources.allowed))))
    return Side(OTHER_SIDE, path, _outputs_of(loaded), source=loaded)


def _platform_side(s: _Setting, fname: str, f: Function, platform: str) -> Side:
    """The artifact itself run on ``platform`` (``against_platform``): one of its platforms, available here."""
    import jax

    if platform not in f.platforms:
        raise PlatformError(f"--against-platform {platform}: function {fname!r} of {s.where} was exported for "
                            f"{', '.join(f.platforms)}; compare with one of those.")
    devices = _devices(platform)
    if not devices:
        raise PlatformError(f"--against-platform {platform}: JAX here has no {platform} device. Compare on a "
                            f"machine with one.")
    loaded = runtime_mod.load_by(s.art, dataclasses.replace(
        s.request.load, function=fname, allow_platform_mismatch=platform != _local_platform(),
        allow_custom_calls=tuple(sorted(s.sources.allowed))))
    device = devices[0]

    def outputs(arrays: Mapping[str, Any]) -> list[tuple[str, Any]]:
        with jax.default_device(device):
            return loaded.run(arrays).leaves

    return Side(platform, f"the artifact on {platform}", outputs, source=loaded, platform=platform)


def _imported_message(where: str, fname: str, text: str) -> str:
    return (f"{where}: function {fname!r} was imported from the StableHLO module {text.rpartition(':')[0]}, and "
            f"comparing the module with itself proves nothing. Compare its outputs with reference outputs (--inputs "
            f"IN.npz --expect OUT.npz, e.g. from the producer that wrote the module) or with a Python reference "
            f"function (--against model.py:NAME).")


def _devices(platform: str) -> list[Any]:
    import jax

    try:
        return list(jax.devices(platform))
    except RuntimeError:
        return []


def _platforms(fname: str, f: Function, requested: list[str] | None, where: str, mismatch: bool,
               without: str | None = None) -> list[str]:
    """The platforms ``fname`` is verified on: those ``requested``, else every platform it was exported for that
    JAX here has (the local one first), else with ``mismatch`` (``allow_platform_mismatch``) the local one;
    ``without``: the platform compared with (``against_platform``), left out of the default."""
    from jax import export

    exported_for = [p for p in f.platforms if p != without or requested]
    if without is not None and not requested and not exported_for:
        raise PlatformError(f"{where}: function {fname!r} was exported for {without} only; --against-platform "
                            f"{without} compares it with another of its platforms.")
    if requested:
        for p in requested:
            if p not in exported_for:
                raise PlatformError(f"{where}: function {fname!r} was exported for {', '.join(exported_for)}, not "
                                    f"{p}; verify it on one of those.")
            if not _devices(p):
                raise PlatformError(f"{where}: --platform {p}: JAX here has no {p} device. Verify on a machine "
                                    f"with one, or leave --platform out to verify on every platform available here.")
        return list(dict.fromkeys(requested))
    local = export.default_export_platform()
    order = [local] + [p for p in exported_for if p != local]
    found = [p for p in order if p in exported_for and (p == local or _devices(p))]
    if not found and mismatch:
        return [local]
    if not found:
        raise PlatformError(f"{where}: function {fname!r} was exported for {', '.join(exported_for)}, and JAX here "
                            f"runs on {local}. Verify it on a machine with one of its platforms.")
    return found


def _local_platform() -> str:
    from jax import export

    return export.default_export_platform()


def _outputs_of(loaded: Any) -> Reference:
    """An artifact's function as a reference: its outputs ``(name, array)`` for named inputs."""

    def outputs(arrays: Mapping[str, Any]) -> list[tuple[str, Any]]:
        return loaded.run(arrays).leaves

    return outputs


# --- running the cases ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Target:
    """One function loaded on one platform (its device), with what it is compared with and how."""

    loaded: Any
    prepared: _Prepared
    platform: str
    device: Any
    request: VerifyRequest
    #: What an inconclusive output's message tells the user to do (:func:`.sides.nonfinite_fix`).
    nonfinite_fix: str = NONFINITE_FIX


def _run(s: _Setting, prepared: list[_Prepared], report: VerifyReport,
         progress: Callable[[int, int, str], None] | None) -> None:
    """Run every case of every function on each of its platforms, adding the results to ``report``."""
    r = s.request
    total = sum(len(p.plan.cases) * len(p.plan.platforms) for p in prepared)
    done = 0
    local = _local_platform()
    for p in prepared:
        for platform in p.plan.platforms:
            loaded = runtime_mod.load_by(s.art, dataclasses.replace(
                r.load, function=p.plan.name, allow_platform_mismatch=platform != local,
                allow_custom_calls=tuple(sorted(s.sources.allowed))))
            fix = NONFINITE_FIX if p.given is not None else nonfinite_fix(p.function, s.ranges[p.plan.name])
            target = _Target(loaded, p, platform, _devices(platform)[0], r, fix)
            for i, case in enumerate(p.plan.cases):
                shown = _shown_case(p.plan.name, platform, case)
                if progress:
                    progress(done, total, shown)
                arrays = p.given if p.given is not None else inputs_mod.random_inputs(
                    p.function, case.dims, r.seed + i, ranges=s.ranges[p.plan.name])
                result = _run_case(target, case, arrays, r.seed + i)
                report.cases.append(result)
                if r.localize and report.localized is None and _differs(result):
                    report.localized = _localize(s, target, case, arrays, progress, done, total)
                done += 1
                if progress:
                    progress(done, total, shown)
    if r.localize and report.localized is None:
        p = prepared[0]
        plan = p.plan
        report.localized = agreeing(plan.actual, plan.sides[0], plan.name, plan.platforms[0],
                                    "no case's outputs differ" if all(c.passed for c in report.cases) else
                                    "the cases that failed did so without outputs to compare (an error, or "
                                    "outputs NaN/Inf everywhere)")


def _differs(result: CaseResult) -> bool:
    """Whether a case failed because values of its outputs differ (not an error, not only inconclusive)."""
    return result.error is None and any(not o.passed and (o.mismatched or o.problem) for o in result.outputs)


def _localize(s: _Setting, target: _Target, case: Case, arrays: Mapping[str, Any],
              progress: Callable[[int, int, str], None] | None, done: int, total: int) -> Any:
    """Localize the difference of one case (``jaxport.verify.localize``) against its first side with a program."""
    import jax

    r, p = s.request, target.prepared
    side = next(side for side in p.sides if side.source is not None)
    iree = r.across_compilers
    actual_source = side.source if iree else target.loaded
    actual = SideSource(p.plan.actual, f"{s.where} ({'iree' if iree else f'xla on {target.platform}'})",
                        actual_source, "iree" if iree else "xla", target.platform, [s.sources.root])
    # another platform runs the very program the case's platform runs: one program, two runtimes
    expected = SideSource(side.label, side.shown, actual_source if side.platform is not None else side.source, "xla",
                          side.platform or target.platform, [s.sources.root, Path.cwd()])
    other = side.source.function_record if side.label == OTHER_SIDE else None

    def stage(text: str) -> None:
        if progress:
            progress(done, total, text)

    options = Options(r.atol, r.rtol, r.two_compilers, r.localize_budget, p.computed_in, r.localize_out, stage)
    with jax.default_device(target.device):
        return localize_case(actual, expected, p.plan.name, p.function, arrays, case=case.label, dims=case.dims,
                             options=options, expected_function=other)


def _shown_case(function: str, platform: str, case: Case) -> str:
    """``f on cpu at b=512 (b: upper bound)``: a case as the progress shows it, and the report (``where``)."""
    dims = ", ".join(f"{k}={v}" for k, v in case.dims.items()) or "fixed shapes"
    return f"{function} on {platform} at {dims} ({case.label})"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300]}" if text else type(e).__name__


#: How a case's error names each side: the artifact's (as run by a runtime other than JAX's, by its title), and
#: those it is compared with when their output names differ.
_ACTUAL_NAMES = {"artifact": "the artifact", **{r.name: r.title for r in RUNTIMES.values() if r is not JAX_RUNTIME}}
_EXPECTED_NAMES = {"live": "the live function", JAX_SIDE: JAX_RUNTIME.title, "reference": "the reference",
                   OTHER_SIDE: "the other artifact"}


def _run_case(target: _Target, case: Case, arrays: Mapping[str, Any], seed: int) -> CaseResult:
    """One case on one platform: the artifact's outputs (and stored derivatives) compared with each side's."""
    import jax

    plan, sides = target.prepared.plan, target.prepared.sides
    result = CaseResult(plan.name, platform=target.platform, label=case.label, dims=dict(case.dims), note=case.note)
    with jax.default_device(target.device):
        try:
            actual = target.loaded.run(arrays).leaves
        except JaxportError as e:
            result.error = f"{_ACTUAL_NAMES[plan.actual]} failed: {e}"
            return result
        except Exception as e:  # noqa: BLE001 - XLA's runtime errors; reported as this case's failure
            result.error = f"{_ACTUAL_NAMES[plan.actual]} failed: {_first_line(e)}"
            return result
        expected_by_side = []
        for side in sides:
            try:
                expected_by_side.append(side.outputs(arrays))
            except Exception as e:  # noqa: BLE001 - the user's function (or the other runtime) raised
                result.error = side.failed(_first_line(e))
                return result
    names = [n for n, _ in actual]
    for side, expected in zip(sides, expected_by_side):
        if names != [n for n, _ in expected]:
            result.error = (f"{_ACTUAL_NAMES[plan.actual]} returns outputs {', '.join(names) or '(none)'}, "
                            f"{_EXPECTED_NAMES.get(side.label, side.label)} "
                            f"{', '.join(n for n, _ in expected) or '(none)'}")
            return result
        by_name = dict(expected)
        for name, value in actual:
            result.outputs.append(_compared(name, by_name[name], value, target.request, (plan.actual, side.label),
                                            target.nonfinite_fix, target.prepared.computed_in))
        if target.prepared.function.vjp_order >= 1 and isinstance(side.outputs, LiveFunction):
            with jax.default_device(target.device):  # the stored derivative, compared as outputs
                try:
                    result.outputs += compare_with_live(target.loaded, side.outputs, arrays, seed,
                                                        target.request.atol, target.request.rtol)
                except Exception as e:  # noqa: BLE001 - either side's derivative failed: this case's failure
                    result.error = f"the derivatives failed: {_first_line(e)}"
    return result


def _compared(name: str, expected: Any, actual: Any, r: VerifyRequest, sides: tuple[str, str],
              fix: str = NONFINITE_FIX, computed_in: str | None = None) -> OutputResult:
    result = compare(name, expected, actual, r.atol, r.rtol, allow_nonfinite=r.allow_nonfinite,
                     across_compilers=r.two_compilers, computed_in=computed_in, sides=sides)
    if result.inconclusive and not r.allow_nonfinite:
        result.inconclusive = f"{result.inconclusive}; {fix}"
    return result
