"""Verification: run an artifact and compare its outputs with a reference on the same inputs.

The reference is the live function it was exported from, stored reference outputs (``expect``, golden data written
by ``call -o``), or both; with ``runtime="iree"``, the same artifact run by JAX (the sides are then named ``iree``
and ``xla``, and compared with the tolerances for two compilers, :data:`.compare.COMPILER_TOLERANCES`).

For each function, :func:`.plan.plan_cases` picks assignments of the dimension variables from the manifest's bounds
and constraints, each kept under a memory budget; ``dims`` replaces the plan with the product of the values given.
Inputs are seeded random arrays (``run.inputs.random_inputs``: the ``ranges`` given, else the ranges the manifest
declares, else small non-negative integers, which index safely, and standard normal floats), or the one set of
inputs ``inputs`` names (one case, its dimensions solved from their shapes). The artifact runs through
``run.load.load``, and the live function (:class:`.live.LiveFunction`) is called as the export called it. Every
output is compared with :func:`.compare.compare` against per-dtype tolerances; an output that is NaN/Inf everywhere
on both sides is inconclusive and fails unless ``allow_nonfinite``. When the artifact carries derivatives
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

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifact import calltree, contract
from ..artifact.container import open_artifact
from ..artifact.manifest import function_names
from ..artifact.model import Function, Manifest
from ..checks import caller_allowances
from ..errors import EntrypointError, JaxportError, PlatformError, UsageError
from ..export.entrypoint import in_memory_values, load_entrypoint
from ..export.like import called_like
from ..importer import module_function
from ..run import inputs as inputs_mod
from ..run import load as runtime_mod
from ..spec import load_spec
from ..spec.build import as_shape_spec, like_values
from . import recorded
from .compare import OutputResult, compare
from .gradients import compare_with_live
from .live import LiveFunction
from .plan import DEFAULT_BUDGET_BYTES, Case, chosen_for, plan_cases
from .report import CaseResult, FunctionPlan, VerifyReport
from .sides import NONFINITE_FIX, Side, given_inputs, reference_side
from .spec_check import spec_differences

#: What the artifact's outputs are compared with: a function of the named inputs returning ``(name, array)`` pairs
#: (a :class:`LiveFunction`, or with ``runtime="iree"`` the artifact run by JAX).
Reference = Callable[[Mapping[str, Any]], list[tuple[str, Any]]]

def _devices(platform: str) -> list[Any]:
    import jax

    try:
        return list(jax.devices(platform))
    except RuntimeError:
        return []


def _platforms(fname: str, f: Function, requested: list[str] | None, where: str) -> list[str]:
    from jax import export

    exported_for = list(f.platforms)
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
    if not found:
        raise PlatformError(f"{where}: function {fname!r} was exported for {', '.join(exported_for)}, and JAX here "
                            f"runs on {local}. Verify it on a machine with one of its platforms.")
    return found


def _load_live(text: str, defaulted: bool, f: Function, bind_dir: Path, where: str, *, root: Path,
               roots: list[Path], binds: Mapping[str, str], allowed: frozenset[str],
               spec: Any = None, fspec: Any = None) -> LiveFunction:
    """The live function of ``text`` (``--against``, or the entry point the artifact records when ``defaulted``,
    followed only under ``root``). Its recorded bound sources are relative to ``root``, as export records them
    (``export.paths``), whatever the spec's directory ``bind_dir``."""
    del bind_dir  # the recorded sources are relative to the export root, which ``root`` is
    if defaulted:
        recorded.entry_point(text, root, where)
    base = root if defaulted else Path(".")
    module_file = text.rpartition(":")[0]
    if module_file.lower().endswith(recorded.MODULE_SUFFIXES):
        # An imported artifact: its live function is the foreign module's main, imported afresh.
        module_path = base / module_file
        if not module_path.is_file():
            raise EntrypointError(f"{where}: the module {module_file} the artifact was imported from is not in "
                                  f"{recorded.shown_root(base)}; give it with --against MODULE.mlir:main.")
        # the importer still reads a function's JSON
        return LiveFunction(module_function(module_path, f, allow_custom_calls=sorted(allowed)),
                            f, root, where, roots=roots, binds=binds)
    try:
        entry = load_entrypoint(text, base)
    except EntrypointError as e:
        if defaulted:
            raise EntrypointError(f"{e} (the entry point recorded in the artifact, relative to "
                                  f"{recorded.shown_root(root)}; give the live function with --against "
                                  f"FILE.py:NAME, or the directory it is relative to with --root DIR)") from None
        raise
    # ``like:`` arguments reach the live function as the artifact records them: rebuilt as the spec describes
    function = called_like(entry.function, fspec, spec) if fspec is not None else entry.function
    return LiveFunction(function, f, root, where, roots=roots, binds=binds)


def _root(root: str | Path | None, manifest: Manifest | None = None, spec: str | Path | None = None,
          notes: list[str] | None = None) -> Path:
    """The directory recorded paths are followed under (``recorded.find_root``): ``root``, else where the recorded
    paths resolve (the current directory, the directory of ``spec``, or one below the current directory holding
    the recorded spec). Without ``manifest``, only checks ``root``."""
    return recorded.find_root(root, manifest, spec, notes if notes is not None else [])


def _check_binds(binds: Mapping[str, str], manifest: Manifest, names: list[str], where: str) -> None:
    """Every ``--bind NAME`` must name a bound argument of a verified function."""
    bound = sorted({s.name for fname in names for s in calltree.walk(manifest.functions[fname].signature)
                    if s.kind == "bound"})
    for name in binds:
        if name not in bound:
            raise UsageError(f"--bind {name}: {where} has no bound argument {name!r}; its bound arguments are "
                             f"{', '.join(bound) or 'none'}.")


def verify(
    artifact: str | Path,
    against: str | None = None,
    spec: Any = None,
    *,
    function: str | None = None,
    dims: Mapping[str, list[int]] | None = None,
    platforms: list[str] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 0,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    progress: Callable[[int, int, str], None] | None = None,
    runtime: str = "jax",
    cache_dir: str | Path | None = None,
    root: str | Path | None = None,
    binds: Mapping[str, str] | None = None,
    allow_custom_calls: Iterable[str] | None = None,
    inputs: Sequence[str] | Mapping[str, Any] | None = None,
    expect: str | Path | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    allow_nonfinite: bool = False,
) -> VerifyReport:
    """Verify an artifact against the live function(s) it was exported from (see the module docstring).

    ``against`` (``model.py:NAME``) and ``spec`` default to the entry point and spec the manifest records, relative
    to ``root`` (default: the current directory) and refused when they are not files under it (see ``recorded``);
    a recorded spec that is not found is skipped with a note; from Python, ``spec`` may also be a ``jaxport.Spec`` or
    a spec dict (its ``jaxport.like`` values are read from it). ``binds`` maps bound arguments to sources the user
    names (``--bind NAME=SOURCE``), replacing the recorded ones. ``allow_custom_calls``: the custom-call targets
    beyond JAX's guaranteed-stable ones the artifact (and an imported artifact's module) may use, as for ``load``.
    ``dims`` maps dimension variables to the values to try; ``ranges`` (input name -> ``(LO, HI)``) the values of
    random inputs, as ``run.inputs.random_inputs`` takes them. ``inputs`` replaces the planned random cases by one
    case on the given inputs: ``--inputs`` values as ``call`` takes them, or arrays by name. ``expect`` (with
    ``inputs``): a file of reference outputs keyed by output name (as ``call -o`` writes them) to compare with; the
    live function is then compared too only when ``against`` is given. ``allow_nonfinite``: an output that is
    NaN/Inf everywhere on both sides passes instead of failing as inconclusive. ``progress(done, total,
    description)`` is called before and after each case.
    With ``runtime="iree"``, the artifact run by IREE is compared with the same artifact run by JAX (``xla``)
    instead of the live function (no entry point needed); ``cache_dir`` keeps IREE's compiled modules.
    Returns the report; raises only for problems that stop verification (artifact, entry point, spec, platform,
    inputs, reference file).
    """
    where = str(artifact)
    root_dir = _root(root)
    allowed = caller_allowances(allow_custom_calls)
    if runtime not in ("jax", "iree"):
        raise UsageError(f"unknown runtime {runtime!r}: use 'jax' or 'iree'.")
    _check_input_options(inputs, expect, dims, ranges)
    with open_artifact(artifact) as art:  # opened once: every function and platform below loads from it
        manifest = art.model
        names = function_names(manifest, function)
        if against is not None and len(names) > 1:
            raise UsageError(f"{where}: --against names one function, but the artifact holds {len(names)} "
                             f"({', '.join(names)}); choose one with --function NAME.")
        if inputs is not None and len(names) > 1:
            raise UsageError(f"{where}: --inputs gives the inputs of one function, but the artifact holds "
                             f"{len(names)} ({', '.join(names)}); choose one with --function NAME.")

        notes: list[str] = []
        # a spec given from Python as a jaxport.Spec or a dict (it holds its jaxport.like values), else a path
        likes, built, given_spec = like_values(spec), None, spec
        if spec is not None and not isinstance(spec, (str, os.PathLike)):
            built, spec = as_shape_spec(spec), None
        root_dir = _root(root, manifest, spec, notes)
        recorded_spec = manifest.source.spec
        spec_obj = None
        spec_shown: str | None = None
        if built is not None:
            spec_obj, spec_shown = built, built.file
        elif spec is not None:
            spec_obj = load_spec(spec)
            spec_shown = str(spec)
        elif recorded_spec is not None:
            spec_file = recorded.spec_path(recorded_spec, root_dir)
            if spec_file.is_file():
                spec_obj = load_spec(spec_file)
                spec_shown = recorded_spec
            else:
                notes.append(f"the spec the artifact records ({recorded_spec}) is not in "
                             f"{recorded.shown_root(root_dir)}; the signature was not compared with a spec (give one "
                             f"with --shapes)")
        if spec is not None:
            bind_dir = Path(spec).parent
        elif spec_shown and given_spec is None:
            bind_dir = (root_dir / spec_shown).parent
        else:
            bind_dir = root_dir
        # Recorded bound sources stay under the root, or under the directory of a spec the user named.
        roots = [root_dir] + ([Path(spec).parent] if spec is not None else [])
        _check_binds(binds or {}, manifest, names, where)

        differences: list[str] = []
        if spec_obj is not None:
            spec_obj = recorded.as_exported(spec_obj, manifest, root_dir)  # with the export's command-line binds
            for fname in names:
                differences += spec_differences(spec_obj, fname, manifest.functions[fname], len(manifest.functions))

        if dims:
            known = {v for fname in names for v in contract.dimension_variables(manifest.functions[fname])}
            unknown = [k for k in dims if k not in known]
            if unknown and len(names) > 1:
                raise UsageError(f"--dim {unknown[0]}: no function of {where} has a dimension variable "
                                 f"{unknown[0]!r}; they have {', '.join(sorted(known)) or 'none'}.")
        chosen_ranges = _ranges_by_function(ranges, manifest, names)

        plans: list[FunctionPlan] = []
        sides: dict[str, list[Side]] = {}
        given: dict[str, Any] = {}
        for fname in names:
            f = manifest.functions[fname]
            if inputs is not None:
                given[fname], case = given_inputs(f, inputs)
                cases = [case]
            else:
                cases = plan_cases(f, chosen_for(f, dims, len(names) > 1), budget_bytes)
            sides[fname] = []
            stored = reference_side(expect, f) if expect is not None else None  # refused before any import
            if runtime == "iree":
                reference = runtime_mod.load(art, fname, allow_custom_calls=allowed)
                sides[fname].append(Side("xla", "the JAX runtime", _outputs_of(reference)))
                plats = [_local_platform()]
            else:
                plats = _platforms(fname, f, platforms, where)
                runtime_mod.runnable_program(art, fname, allowed, where, notes)  # refused before anything runs
            if against is not None or (expect is None and runtime != "iree"):
                text = against if against is not None else f.entrypoint
                if not isinstance(text, str):
                    raise UsageError(f"{where}: function {fname!r} records no entry point; give it with --against.")
                if against is None and text.rpartition(":")[0].lower().endswith(recorded.MODULE_SUFFIXES):
                    raise UsageError(_imported_message(where, fname, text))
                fspec = None if spec_obj is None else spec_obj.functions.get(
                    fname, spec_obj.functions.get(None) if len(manifest.functions) == 1 else None)
                with in_memory_values(likes):
                    live = _load_live(text, against is None, f, bind_dir, f"{where}: function {fname!r}",
                                      root=root_dir, roots=roots, binds=binds or {}, allowed=allowed, spec=spec_obj,
                                      fspec=fspec)
                sides[fname].append(Side("live", text, live))
            if stored is not None:
                sides[fname].append(stored)
            plans.append(FunctionPlan(fname, " and ".join(s.shown for s in sides[fname]), plats, cases,
                                      actual="iree" if runtime == "iree" else "artifact",
                                      sides=[s.label for s in sides[fname]]))

        report = VerifyReport(where, seed, budget_bytes, spec_shown, differences, plans, notes=notes)
        total = sum(len(p.cases) * len(p.platforms) for p in plans)
        done = 0
        local = _local_platform()
        options = _Options(atol, rtol, allow_nonfinite, runtime == "iree")
        for plan in plans:
            f = manifest.functions[plan.name]
            for platform in plan.platforms:
                loaded = runtime_mod.load(art, plan.name, allow_platform_mismatch=platform != local,
                                          runtime=runtime, cache_dir=cache_dir, allow_custom_calls=allowed)
                device = _devices(platform)[0]
                for i, case in enumerate(plan.cases):
                    if progress:
                        progress(done, total, _shown_case(plan.name, platform, case))
                    if plan.name in given:
                        arrays = given[plan.name]
                    else:
                        arrays = inputs_mod.random_inputs(f, case.dims, seed + i,
                                                          ranges=chosen_ranges[plan.name])
                    report.cases.append(_run_case(loaded, sides[plan.name], f, plan, platform, device, case,
                                                  arrays, seed + i, options))
                    done += 1
                    if progress:
                        progress(done, total, _shown_case(plan.name, platform, case))
        return report


def _check_input_options(inputs: Any, expect: Any, dims: Any, ranges: Any) -> None:
    """Refuse combinations of ``inputs``, ``expect``, ``dims`` and ``ranges`` that mean nothing."""
    if expect is not None and inputs is None:
        raise UsageError("--expect compares the outputs for given inputs with reference outputs; give those inputs "
                         "with --inputs (e.g. the file 'jaxport call --save-inputs FILE.npz' wrote).")
    if inputs is not None and dims:
        raise UsageError("--dim chooses the cases of random inputs; with --inputs the dimensions come from the "
                         "inputs' shapes. Leave out --dim.")
    if inputs is not None and ranges:
        raise UsageError("--range chooses the values of random inputs; with --inputs they are given. Leave out "
                         "--range.")


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


def _imported_message(where: str, fname: str, text: str) -> str:
    return (f"{where}: function {fname!r} was imported from the StableHLO module {text.rpartition(':')[0]}, and "
            f"comparing the module with itself proves nothing. Compare its outputs with reference outputs (--inputs "
            f"IN.npz --expect OUT.npz, e.g. from the producer that wrote the module) or with a Python reference "
            f"function (--against model.py:NAME).")


def _outputs_of(loaded: Any) -> Reference:
    """An artifact's function as a reference: its outputs ``(name, array)`` for named inputs."""

    def outputs(arrays: Mapping[str, Any]) -> list[tuple[str, Any]]:
        return loaded.run(arrays).leaves

    return outputs



def _shown_case(function: str, platform: str, case: Case) -> str:
    """``f on cpu at b=512 (b: upper bound)``: a case as the progress shows it, and the report (``where``)."""
    dims = ", ".join(f"{k}={v}" for k, v in case.dims.items()) or "fixed shapes"
    return f"{function} on {platform} at {dims} ({case.label})"

def _local_platform() -> str:
    from jax import export

    return export.default_export_platform()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300]}" if text else type(e).__name__


@dataclass(frozen=True)
class _Options:
    """How outputs are compared: the tolerance overrides, ``--allow-nonfinite``, and whether two compilers are."""

    atol: float | None
    rtol: float | None
    allow_nonfinite: bool
    across_compilers: bool


def _run_case(loaded: Any, sides: list[Side], f: Function, plan: FunctionPlan, platform: str,
              device: Any, case: Case, arrays: Mapping[str, Any], seed: int, options: _Options) -> CaseResult:
    import jax

    result = CaseResult(plan.name, platform, case.label, dict(case.dims), case.note)
    actual_side = plan.actual
    failed = "IREE failed" if actual_side == "iree" else "the artifact failed"
    with jax.default_device(device):
        try:
            actual = loaded.run(arrays).leaves
        except JaxportError as e:
            result.error = f"{failed}: {e}"
            return result
        except Exception as e:  # noqa: BLE001 - XLA's runtime errors; reported as this case's failure
            result.error = f"{failed}: {_first_line(e)}"
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
            result.error = (f"{_ACTUAL_NAMES[actual_side]} returns outputs {', '.join(names) or '(none)'}, "
                            f"{_EXPECTED_NAMES.get(side.label, side.label)} "
                            f"{', '.join(n for n, _ in expected) or '(none)'}")
            return result
        by_name = dict(expected)
        for name, value in actual:
            result.outputs.append(_compared(name, by_name[name], value, options, (actual_side, side.label)))
        if f.vjp_order >= 1 and isinstance(side.outputs, LiveFunction):  # the stored derivative, as outputs
            with jax.default_device(device):
                try:
                    result.outputs += compare_with_live(loaded, side.outputs, arrays, seed, options.atol,
                                                        options.rtol)
                except Exception as e:  # noqa: BLE001 - either side's derivative failed: this case's failure
                    result.error = f"the derivatives failed: {_first_line(e)}"
    return result


#: How a case's error names each side when their output names differ.
_ACTUAL_NAMES = {"artifact": "the artifact", "iree": "IREE"}
_EXPECTED_NAMES = {"live": "the live function", "xla": "XLA", "reference": "the reference"}


def _compared(name: str, expected: Any, actual: Any, options: _Options, sides: tuple[str, str]) -> OutputResult:
    result = compare(name, expected, actual, options.atol, options.rtol, allow_nonfinite=options.allow_nonfinite,
                     across_compilers=options.across_compilers, sides=sides)
    if result.inconclusive and not options.allow_nonfinite:
        result.inconclusive = f"{result.inconclusive}; {NONFINITE_FIX}"
    return result
