"""Importing StableHLO written by another producer: a module's ``main`` becomes a function of an artifact.

:func:`import_stablehlo` reads MLIR text, MLIR bytecode or a StableHLO portable artifact; checks ``main``'s
signature against a shape spec (argument names, dtypes, symbolic dimensions, bounds and constraints); makes ``main``
follow JAX's calling convention where it does not already, with a wrapper ``main`` that specializes dynamic
dimensions the spec fixes, flattens a tuple result, or takes the platform index of a multi-platform artifact;
derives each dynamic output dimension as a linear expression of the input dimension variables; checks custom calls
against the allowlist; and stores the module, re-serialized as a portable artifact, in a ``jax.export.Exported``:
the same payload ``jaxport export`` writes, so ``call``, ``inspect``, ``extract``, ``compile`` and the IREE runtime
treat both alike. The rules are documented in ``specs/IMPORT.md``.

Trust model: the module file is parsed by MLIR's own readers and never executed while importing (shape refinement
only folds shapes); calling the artifact runs its program, as for any artifact.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import dimexpr, dtypes
from ..artifact.contract import concrete_shape, resolve_dims
from ..artifact.model import CallNode, Function, OutputNode, Signature, replace
from ..errors import EntrypointError, ExportError, InputError, SpecError, UsageError
from ..export.lowering.lower import InputLeaf, Lowered, function_constraints
from ..export.lowering.tracing import jax_config, x64_enabled
from ..export.writing.manifest import build_function_entry, versions
from ..export.writing.target import for_target
from ..export.writing.write import Contents, ExportResult, artifact_metadata, relative_path, write_artifact
from ..jaxprivate.exported import make_exported
from ..program.checks import check_custom_calls
from ..program.module_scan import ModuleScan, ProgramLimitError, check_program, scan_module
from ..program.module_scan import strip_locations as strip_module_locations
from ..spec import FunctionSpec, ShapeSpec, Where, load_spec
from .mlir import (
    MainSignature,
    bytecode,
    first_error,
    limit_error,
    main_signature,
    mark_platform_index,
    partitions,
    read_module,
    refine,
    serialize,
    wrap_main,
)
from .request import ImportRequest
from .serialized import import_serialization, is_serialization, module_callable
from .signature import (
    check_against_main,
    derived_inputs,
    output_dims,
    pseudo_function,
    spec_from_manifest,
    spec_inputs,
)


@dataclass
class Imported:
    """An imported module as a lowered function (the ``Lowered`` that ``build_function_entry`` describes), with
    the notes gathered on the way."""

    lowered: Lowered
    warnings: list[str]
    source_version: str | None


def _check_calling_convention(version: int | None) -> int:
    """The calling-convention version to record: ``version`` if this JAX supports it, else its own default."""
    import jax
    from jax import export

    lo, hi = export.minimum_supported_calling_convention_version, export.maximum_supported_calling_convention_version
    if version is None:
        return int(jax.config.jax_export_calling_convention_version)  # type: ignore[attr-defined]
    if not lo <= version <= hi:
        raise UsageError(f"--calling-convention {version}: this JAX ({jax.__version__}) supports calling conventions "
                         f"{lo} to {hi}. State one of those; the module is wrapped to follow it.")
    return version


def build(module_path: str | Path, inputs: list[InputLeaf] | None, spec: ShapeSpec, *, name: str,
          platforms: list[str], calling_convention: int, allow_custom_calls: list[str],
          strip_locations: bool = False) -> Imported:
    """Import one module as function ``name`` (see the module docstring); ``inputs`` None takes main's types."""
    import jax
    from jax import export
    from jax.extend.mlir import ir

    display = str(module_path)
    warnings: list[str] = []
    ctx, module, source_version = read_module(module_path)
    sig = main_signature(module, display)
    devices = partitions(module)
    if devices > 1:
        raise EntrypointError(f"{display}: the module is partitioned for {devices} devices (mhlo.num_partitions, "
                              f"mhlo.num_replicas); jaxport imports single-device modules.")
    if inputs is None or (not inputs and sig.args):  # no spec, or a spec without arguments: main's own types
        inputs = derived_inputs(sig, display)

    sig, has_index = _platform_index(module, ctx, sig, len(inputs), platforms, spec.file, display)
    arg_shapes = check_against_main(inputs, sig, spec.file, display, has_index)

    symbolic = any(d is None for s in arg_shapes for d in s)
    uses_global_constants = symbolic or len(platforms) > 1
    if arg_shapes != [t.shape for t in sig.args] or sig.tuple_result or (len(platforms) > 1 and not has_index):
        wrap_main(module, arg_shapes, add_platform_index=len(platforms) > 1 and not has_index)
    dynamic_main = any(d is None for t in sig.args + sig.results for d in t.shape)
    if dynamic_main and not symbolic and len(platforms) == 1:
        # Every argument is static: refine now, so that the stored program has static shapes throughout.
        try:
            module = refine(bytecode(module), [tuple(d for d in s if d is not None) for s in arg_shapes], ctx)
        except Exception as e:  # noqa: BLE001
            raise ExportError(f"{display}: shape refinement of main with the spec's static shapes failed: "
                              f"{first_error(e, display)}.") from None
    with ctx:
        module.operation.attributes["jax.uses_shape_polymorphism"] = ir.BoolAttr.get(uses_global_constants)
    final = main_signature(module, display)
    serialized = serialize(module, display, warnings)
    if strip_locations:
        serialized = strip_module_locations(serialized)
    scan = scan_module(serialized)
    _check_stored_program(serialized, scan, display)
    allowed = sorted(set(allow_custom_calls))
    check_custom_calls(display, scan, set(allowed), devices=devices)

    x64 = any(dtypes.is_64bit(t.dtype or "") for t in final.args + final.results)
    bounds, constraints = function_constraints(inputs, spec)
    out_dims = _output_dims(bytecode(module), ctx, final, inputs, spec, constraints, display)

    with jax_config(jax_enable_x64=x64 or x64_enabled()):
        try:
            scope = export.SymbolicScope(bounds + constraints)
        except Exception as e:  # noqa: BLE001 - JAX raises ValueError and its own shape-poly errors
            raise SpecError(f"{spec.file}: JAX rejects the constraints: {e}") from None

        def struct(dims: list[int | str], dtype: str, what: str) -> Any:
            text = ", ".join(str(d) for d in dims)
            try:
                shape = export.symbolic_shape(text, scope=scope) if dims else ()
            except Exception as e:  # noqa: BLE001
                raise SpecError(f"{what}: JAX rejects the shape [{text}]: {e}") from None
            return jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dtype))

        in_structs = [struct(list(i.leaf.shape), i.leaf.dtype, f"{i.leaf.where}: {i.spec_path}") for i in inputs]
        out_structs = [struct(d, str(t.dtype), f"{display}: result {k}")
                       for k, (d, t) in enumerate(zip(out_dims, final.results))]
        exported = make_exported(
            fun_name=name, in_avals=in_structs, out_avals=out_structs, platforms=platforms,
            mlir_module_serialized=serialized, calling_convention_version=calling_convention,
            uses_global_constants=uses_global_constants,
            disabled_safety_checks=[export.DisabledSafetyCheck.custom_call(t) for t in allowed])
        _smoke_test(exported, inputs, spec, constraints, display, platforms)

    n_out = len(out_structs)
    names = ["output"] if n_out == 1 else [str(k) for k in range(n_out)]
    output_tree = OutputNode("output", 0) if n_out == 1 else \
        OutputNode("tuple", tuple(OutputNode("output", k) for k in range(n_out)))
    lowered = Lowered(exported, name, list(inputs), _call_tree(inputs), names, output_tree, x64, scan,
                      input_positions=list(range(len(inputs))))
    return Imported(lowered, warnings, source_version)


def _check_stored_program(serialized: bytes, scan: ModuleScan, display: str) -> None:
    """The program limits of the program the artifact stores (wrapped, refined), read as every reader reads it at
    load (``module_scan.check_program``: the text MLIR prints, names by their value), so that no artifact import
    writes is one that load refuses."""
    try:
        check_program(serialized, scan)
    except ProgramLimitError as e:
        raise limit_error(display, e, stored=True) from None


def _platform_index(module: Any, ctx: Any, sig: MainSignature, n_inputs: int, platforms: list[str], spec_file: str,
                    display: str) -> tuple[MainSignature, bool]:
    """Main's signature, and whether main takes the platform index that JAX passes to a program exported for
    several platforms (marked as one where an older JAX wrote it without the ``jax.global_constant`` attribute)."""
    has_index = sig.platform_index
    if not has_index and len(platforms) > 1 and len(sig.args) == n_inputs + 1 and sig.args[0].shape == () \
            and sig.args[0].dtype in ("int32", "int64"):
        has_index = True  # older JAX wrote the platform index without the jax.global_constant attribute
        with ctx:
            mark_platform_index(module)
        sig = main_signature(module, display)
    if has_index and len(platforms) < 2:
        raise SpecError(f"{spec_file}: main in {display} takes a platform index first (the module was lowered for "
                        f"several platforms); list those platforms, in the module's order, under 'platforms' (or "
                        f"repeat --platform).")
    return sig, has_index


def _output_dims(plain: bytes, ctx: Any, final: MainSignature, inputs: list[InputLeaf], spec: ShapeSpec,
                 constraints: list[str], display: str) -> list[list[int | str]]:
    """Each result's dimensions, a dynamic one as an expression of the input dimension variables, found by refining
    the module (``plain``, its bytecode) at sizes the spec allows (``signature.output_dims``)."""

    def probe(env: dict[str, int]) -> list[tuple[int, ...]] | None:
        shapes = [tuple(d if isinstance(d, int) else dimexpr.evaluate(dimexpr.parse(d), env) for d in i.leaf.shape)
                  for i in inputs]
        try:
            refined = refine(plain, shapes, ctx)
            return [tuple(d for d in t.shape if d is not None) for t in main_signature(refined, display).results]
        except Exception:  # noqa: BLE001 - a size the module refuses (a shape assertion, say): try another
            return None

    return output_dims(final.results, inputs, spec, constraints, probe, display)


def _call_tree(inputs: list[InputLeaf]) -> Signature:
    """The call tree of an imported function: each input a positional or keyword argument of its own."""
    return Signature(tuple(CallNode("input", k, i.name) for k, i in enumerate(inputs)
                           if i.spec_path.startswith("args")),
                     {i.name: CallNode("input", k) for k, i in enumerate(inputs) if i.spec_path.startswith("kwargs")})


def _smoke_test(exported: Any, inputs: list[InputLeaf], spec: ShapeSpec, constraints: list[str], display: str,
                platforms: list[str]) -> None:
    """Lower a call of the (serialized and read back) program at valid sizes, as ``jaxport call`` will: a module
    JAX cannot call fails here rather than at its first call. Nothing is compiled."""
    import jax
    from jax import export

    local = export.default_export_platform()
    if local not in platforms:
        return
    fn = pseudo_function(inputs, spec, constraints)
    try:  # JAX calls a dimension variable only from 1 up, whatever lower bound the manifest states
        env = resolve_dims(fn, {v: 1 for v, d in fn.dims.items() if d.bounds.lo < 1})
    except InputError:
        return
    structs = [jax.ShapeDtypeStruct(concrete_shape(a, env), dtypes.to_numpy(a.dtype)) for a in fn.inputs]
    try:
        back = export.deserialize(exported.serialize())
        jax.jit(back.call).lower(*structs)
    except Exception as e:  # noqa: BLE001 - JAX and MLIR report a bad module in many ways
        raise ExportError(f"{display}: JAX cannot call the imported module: {first_error(e, display)}.") from None


def function_name(module_path: str | Path) -> str:
    """The default function name: the module file's name without its suffix, as an identifier."""
    stem = Path(module_path).name.split(".")[0]
    stem = re.sub(r"\W", "_", stem) or "main"
    return stem if re.match(r"^[A-Za-z_]", stem) else f"_{stem}"


def import_stablehlo(module: str | Path, spec: ShapeSpec | str | Path | None = None, *,
                     output: str | Path | None = None, request: ImportRequest | None = None,
                     calling_convention: int | None = None, function: str | None = None, name: str | None = None,
                     version: str | None = None, platforms: list[str] | None = None,
                     allow_custom_calls: list[str] | tuple[str, ...] = (),
                     strip_locations: bool = False, write_manifest: bool = True,
                     for_jax: str | None = None) -> ExportResult:
    """Import a StableHLO module written by another producer into an artifact; returns an ``ExportResult``.

    ``module`` is MLIR text, MLIR bytecode or a StableHLO portable artifact whose ``main`` is the function.
    ``spec`` (a spec file or a parsed ``ShapeSpec``) names and shapes main's arguments: ``args`` (named ``arg0``,
    ...) then ``kwargs`` (named by their keys), one array leaf per argument of main, with ``dims``,
    ``constraints``, ``platforms`` (default cpu), ``allow_custom_calls`` and ``metadata``; without a spec, or with
    no arguments in it, main's own (static) argument types are taken. The options are the fields of
    ``ImportRequest``, given as ``request=`` or as keywords (which replace the request's where not at their
    defaults), from which
    the request is built once (:func:`import_by` imports by it): ``calling_convention``
    is the version recorded (default: the one this JAX's ``jax.export`` writes); ``function`` names the function in
    the artifact (default: the module file's name); ``name``, ``version``, ``platforms``, ``allow_custom_calls``,
    ``strip_locations`` and ``write_manifest`` are those of ``export``; ``for_jax`` writes the artifact for that
    older JAX, as ``export --for-jax`` does.

    A file holding a JAX serialization (``Exported.serialize()``'s bytes, from any JAX since 0.4.30) is recognized
    by its content and imported with the signature it records (``serialized.import_serialization``); a spec then
    adds only bounds, constraints, output names, the name and metadata.
    """
    return import_by(module, spec, output, ImportRequest.given(request, {
        "calling_convention": calling_convention, "function": function, "name": name, "version": version,
        "platforms": platforms, "allow_custom_calls": allow_custom_calls, "strip_locations": strip_locations,
        "write_manifest": write_manifest, "for_jax": for_jax}))


def import_by(module: str | Path, spec: ShapeSpec | str | Path | None, output: str | Path | None,
              request: ImportRequest) -> ExportResult:
    """:func:`import_stablehlo` by its request (what ``jaxport import`` and the library call): ``module`` imported
    with the options of ``request``, written to ``output`` when given."""
    if is_serialization(module) or str(module).lower().endswith(".jaxexport"):
        # a jax.export serialization, whatever its name (by its content), or one by its name that jaxport's reader
        # then says what is wrong with: its own signature
        convention = request.calling_convention
        with jax_config(**({"jax_export_calling_convention_version": _check_calling_convention(convention)}
                           if convention is not None else {})):
            return import_serialization(module, spec, output, request)
    if spec is None:
        spec_obj = ShapeSpec("<no spec>", 1, {}, [], {None: FunctionSpec(None, None, [], {}, Where("<no spec>", 0))})
    elif isinstance(spec, ShapeSpec):
        spec_obj = spec
    else:
        spec_obj = load_spec(spec)
    convention = _check_calling_convention(request.calling_convention)
    written_for = request.written_for()
    plats = list(dict.fromkeys(request.chosen_platforms(spec_obj.platforms or ["cpu"]) or []))
    allowed = request.allowed(spec_obj)
    fname = request.function_name(function_name(module))
    inputs = spec_inputs(spec_obj) if spec is not None else None

    meta = artifact_metadata(spec_obj.metadata, request.name, request.version, fname)

    imported = build(module, inputs, spec_obj, name=fname, platforms=plats, calling_convention=convention,
                     allow_custom_calls=allowed, strip_locations=request.strip_locations)
    low = imported.lowered
    if written_for is not None:
        low = dataclasses.replace(low, exported=for_target(low.exported, written_for, str(module), fname))
    payload = f"functions/{fname}.jaxexport"
    entry = f"{relative_path(Path(module))}:main"
    functions = {fname: build_function_entry(low, spec_obj, entry, payload, allowed)}
    producer = None if written_for is None else replace(versions(), for_jax=written_for.jax)
    contents = Contents(meta, functions, {payload: bytes(low.exported.serialize())}, [], spec_obj.file,
                        producer=producer, read=(str(module),))
    return write_artifact(output, contents, write_manifest=request.write_manifest, warnings=imported.warnings)


def module_function(module_path: str | Path, f: Function,
                    allow_custom_calls: list[str] | tuple[str, ...] = ()) -> Callable[..., Any]:
    """The module's ``main`` as a JAX-callable function with the signature a manifest records for it, imported
    afresh from the file (``verify`` uses it as the live function of an imported artifact). ``allow_custom_calls``
    are the caller's allowances: the manifest's own list grants nothing (``checks.check_runnable``). A JAX
    serialization's function takes the pytrees it records, as the artifact imported from it does."""
    if is_serialization(module_path):
        return module_callable(module_path)
    spec, inputs = spec_from_manifest(f, str(module_path))
    imported = build(module_path, inputs, spec, name=function_name(module_path),
                     platforms=list(f.platforms or ["cpu"]),
                     calling_convention=_check_calling_convention(None),
                     allow_custom_calls=list(allow_custom_calls))
    exported = imported.lowered.exported
    order = [a.value for a in f.signature.args] + [v.value for v in f.signature.kwargs.values()]
    keywords = list(f.signature.kwargs)

    def call(*args: Any, **kwargs: Any) -> Any:
        flat: list[Any] = [None] * len(inputs)
        for position, value in zip(order, list(args) + [kwargs[k] for k in keywords]):
            flat[position] = value
        return exported.call(*flat)

    call.__name__ = Path(module_path).name
    return call
