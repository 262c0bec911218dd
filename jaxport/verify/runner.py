"""Verification: run an artifact and the live function it was exported from on the same inputs, and compare.

For each function, :func:`.plan.plan_cases` picks assignments of the dimension variables from the manifest's bounds
and constraints, each kept under a memory budget; ``dims`` replaces the plan with the product of the values given.
Inputs are seeded random arrays (``run.inputs.random_inputs``, integers non-negative so that they index safely); the
artifact runs through ``run.load.load``, and the live function (:class:`.live.LiveFunction`) is called as the
export called it. Every output is compared with :func:`.compare.compare` against per-dtype tolerances. When the
artifact carries derivatives (``vjp_order >= 1``), each case also compares the input cotangents of the artifact's
stored VJP with ``jax.vjp`` of the live function, for the same seeded output cotangents, as outputs named
``vjp(INPUT)`` (:mod:`.gradients`).

When a spec is given (or the one the manifest records is found), :func:`.spec_check.spec_differences` checks that
it describes the artifact's signature: arguments, dtypes, shapes, static values, bounds and constraints.

What the manifest records (entry points, the spec, bound sources, an imported module) is followed only under a root
the user controls, the current directory by default (:mod:`.recorded`); what the user names is taken as given. The
artifact runs under the same custom-call rule as ``call`` (``checks.check_runnable``): JAX's guaranteed-stable
targets plus ``allow_custom_calls``, whatever the artifact says it allows.

Everything here imports JAX only when it runs something.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..artifact import calltree, contract
from ..artifact.container import open_artifact
from ..artifact.manifest import function_names
from ..checks import caller_allowances
from ..errors import EntrypointError, JaxportError, PlatformError, UsageError
from ..export.entrypoint import load_entrypoint
from ..importer import module_function
from ..run import inputs
from ..run import load as runtime_mod
from ..run.gradients import stored_order
from ..spec import load_spec
from . import recorded
from .compare import compare
from .gradients import compare_with_live
from .live import LiveFunction
from .plan import DEFAULT_BUDGET_BYTES, Case, chosen_for, plan_cases
from .report import CaseResult, FunctionPlan, VerifyReport
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


def _platforms(fname: str, f: Mapping[str, Any], requested: list[str] | None, where: str) -> list[str]:
    from jax import export

    exported_for = list(f["platforms"])
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


def _load_live(text: str, defaulted: bool, f: Mapping[str, Any], bind_dir: Path, where: str, *, root: Path,
               roots: list[Path], binds: Mapping[str, str], allowed: frozenset[str]) -> LiveFunction:
    """The live function of ``text`` (``--against``, or the entry point the artifact records when ``defaulted``,
    followed only under ``root``)."""
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
        return LiveFunction(module_function(module_path, f, allow_custom_calls=sorted(allowed)),
                            f, bind_dir, where, roots=roots, binds=binds)
    try:
        entry = load_entrypoint(text, base)
    except EntrypointError as e:
        if defaulted:
            raise EntrypointError(f"{e} (the entry point recorded in the artifact, relative to "
                                  f"{recorded.shown_root(root)}; give the live function with --against "
                                  f"FILE.py:NAME)") from None
        raise
    return LiveFunction(entry.function, f, bind_dir, where, roots=roots, binds=binds)


def _root(root: str | Path | None) -> Path:
    """The directory recorded paths are followed under: ``root``, else the current directory."""
    if root is None:
        return Path(".")  # relative, so that messages name recorded files as the manifest does
    path = Path(root)
    if not path.is_dir():
        raise UsageError(f"--root {root}: not a directory; give the directory the artifact's recorded entry point, "
                         f"spec and bound sources are relative to.")
    return path


def _check_binds(binds: Mapping[str, str], manifest: Mapping[str, Any], names: list[str], where: str) -> None:
    """Every ``--bind NAME`` must name a bound argument of a verified function."""
    bound = sorted({s.name for fname in names for s in calltree.walk(manifest["functions"][fname].get("signature"))
                    if s.kind == "bound"})
    for name in binds:
        if name not in bound:
            raise UsageError(f"--bind {name}: {where} has no bound argument {name!r}; its bound arguments are "
                             f"{', '.join(bound) or 'none'}.")


def verify(
    artifact: str | Path,
    against: str | None = None,
    spec: str | Path | None = None,
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
) -> VerifyReport:
    """Verify an artifact against the live function(s) it was exported from (see the module docstring).

    ``against`` (``model.py:NAME``) and ``spec`` default to the entry point and spec the manifest records, relative
    to ``root`` (default: the current directory) and refused when they are not files under it (see ``recorded``);
    a recorded spec that is not found is skipped with a note. ``binds`` maps bound arguments to sources the user
    names (``--bind NAME=SOURCE``), replacing the recorded ones. ``allow_custom_calls``: the custom-call targets
    beyond JAX's guaranteed-stable ones the artifact (and an imported artifact's module) may use, as for ``load``.
    ``dims`` maps dimension variables to the values to try. ``progress(done, total, description)`` is called
    before and after each case.
    With ``runtime="iree"``, the artifact run by IREE is compared with the same artifact run by JAX instead of the
    live function (no entry point needed); ``cache_dir`` keeps IREE's compiled modules.
    Returns the report; raises only for problems that stop verification (artifact, entry point, spec, platform).
    """
    where = str(artifact)
    root_dir = _root(root)
    allowed = caller_allowances(allow_custom_calls)
    with open_artifact(artifact) as art:  # opened once: every function and platform below loads from it
        manifest = art.manifest
        names = function_names(manifest, function)
        if against is not None and len(names) > 1:
            raise UsageError(f"{where}: --against names one function, but the artifact holds {len(names)} "
                             f"({', '.join(names)}); choose one with --function NAME.")

        notes: list[str] = []
        recorded_spec = (manifest.get("source") or {}).get("spec")
        spec_obj = None
        spec_shown: str | None = None
        if spec is not None:
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
        elif spec_shown:
            bind_dir = (root_dir / spec_shown).parent
        else:
            bind_dir = root_dir
        # Recorded bound sources stay under the root, or under the directory of a spec the user named.
        roots = [root_dir] + ([Path(spec).parent] if spec is not None else [])
        _check_binds(binds or {}, manifest, names, where)

        differences: list[str] = []
        if spec_obj is not None:
            for fname in names:
                differences += spec_differences(spec_obj, fname, manifest["functions"][fname],
                                                len(manifest["functions"]))

        if dims:
            known = {v for fname in names for v in contract.dimension_variables(manifest["functions"][fname])}
            unknown = [k for k in dims if k not in known]
            if unknown and len(names) > 1:
                raise UsageError(f"--dim {unknown[0]}: no function of {where} has a dimension variable "
                                 f"{unknown[0]!r}; they have {', '.join(sorted(known)) or 'none'}.")

        if runtime not in ("jax", "iree"):
            raise UsageError(f"unknown runtime {runtime!r}: use 'jax' or 'iree'.")
        plans: list[FunctionPlan] = []
        lives: dict[str, Reference] = {}
        for fname in names:
            f = manifest["functions"][fname]
            cases = plan_cases(f, chosen_for(f, dims, len(names) > 1), budget_bytes)
            if runtime == "iree":
                reference = runtime_mod.load(art, fname, allow_custom_calls=allowed)
                lives[fname] = _outputs_of(reference)
                plans.append(FunctionPlan(fname, "the JAX runtime", [_local_platform()], cases))
                continue
            text = against if against is not None else f.get("entrypoint")
            if not isinstance(text, str):
                raise UsageError(f"{where}: function {fname!r} records no entry point; give it with --against.")
            plats = _platforms(fname, f, platforms, where)
            runtime_mod.runnable_program(art, fname, allowed, where)  # refused before anything is imported
            lives[fname] = _load_live(text, against is None, f, bind_dir, f"{where}: function {fname!r}",
                                      root=root_dir, roots=roots, binds=binds or {}, allowed=allowed)
            plans.append(FunctionPlan(fname, text, plats, cases))

        report = VerifyReport(where, seed, budget_bytes, spec_shown, differences, plans, notes=notes)
        total = sum(len(p.cases) * len(p.platforms) for p in plans)
        done = 0
        local = _local_platform()
        for plan in plans:
            f = manifest["functions"][plan.name]
            for platform in plan.platforms:
                loaded = runtime_mod.load(art, plan.name, allow_platform_mismatch=platform != local,
                                          runtime=runtime, cache_dir=cache_dir, allow_custom_calls=allowed)
                device = _devices(platform)[0]
                for i, case in enumerate(plan.cases):
                    if progress:
                        progress(done, total, f"{plan.name} on {platform}: {case.label}")
                    report.cases.append(_run_case(loaded, lives[plan.name], f, plan.name, platform, device, case,
                                                  seed + i, atol, rtol))
                    done += 1
                    if progress:
                        progress(done, total, f"{plan.name} on {platform}: {case.label}")
        return report


def _outputs_of(loaded: Any) -> Reference:
    """An artifact's function as a reference: its outputs ``(name, array)`` for named inputs."""

    def outputs(arrays: Mapping[str, Any]) -> list[tuple[str, Any]]:
        return loaded.run(arrays).leaves

    return outputs


def _local_platform() -> str:
    from jax import export

    return export.default_export_platform()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300]}" if text else type(e).__name__


def _run_case(loaded: Any, live: Reference, f: Mapping[str, Any], fname: str, platform: str, device: Any,
              case: Case, seed: int, atol: float | None, rtol: float | None) -> CaseResult:
    import jax

    result = CaseResult(fname, platform, case.label, dict(case.dims), case.note)
    arrays = inputs.random_inputs(f, case.dims, seed, nonnegative=True)
    with jax.default_device(device):
        try:
            actual = loaded.run(arrays).leaves
        except JaxportError as e:
            result.error = f"the artifact failed: {e}"
            return result
        except Exception as e:  # noqa: BLE001 - XLA's runtime errors; reported as this case's failure
            result.error = f"the artifact failed: {_first_line(e)}"
            return result
        try:
            expected = live(arrays)
        except Exception as e:  # noqa: BLE001 - the user's function raised
            result.error = f"the live function raised {_first_line(e)}"
            return result
    names = [n for n, _ in actual]
    live_names = [n for n, _ in expected]
    if names != live_names:
        result.error = (f"the artifact returns outputs {', '.join(names) or '(none)'}, the live function "
                        f"{', '.join(live_names) or '(none)'}")
        return result
    for (name, value), (_, reference) in zip(actual, expected):
        result.outputs.append(compare(name, reference, value, atol, rtol))
    if stored_order(f) >= 1 and isinstance(live, LiveFunction):  # the stored derivative, as an extra output each
        with jax.default_device(device):
            try:
                result.outputs += compare_with_live(loaded, live, arrays, seed, atol, rtol)
            except Exception as e:  # noqa: BLE001 - either side's derivative failed: this case's failure
                result.error = f"the derivatives failed: {_first_line(e)}"
    return result
