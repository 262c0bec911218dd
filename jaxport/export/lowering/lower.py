"""Lowering: from a loaded function and its spec to a ``jax.export.Exported``.

The exported program takes the free array arguments of the spec as the pytree ``(args, kwargs)``, where static
arguments are left out at the top level and replaced by ``None`` inside a pytree, and the static values are baked in.
All symbolic dimensions share one ``jax.export.SymbolicScope`` holding the spec's bounds and constraints.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ... import dimexpr, dtypes
from ..._text import plural
from ...artifact import calltree
from ...artifact.calltree import WEIGHTS_KWARG
from ...artifact.model import CallNode, OutputNode, Signature
from ...errors import ExportError, PolicyError, SpecError
from ...jaxprivate.exported import export_allowing_every_custom_call
from ...program.checks import disallowed_custom_calls_error
from ...program.module_scan import ModuleScan, scan_module
from ...program.module_scan import strip_locations as strip_module_locations
from ...sharding import jit_sharded, spec_leaf
from ...spec import ArrayLeaf, BindLeaf, FunctionSpec, ShapeSpec, StaticLeaf, outputs
from ...spec.tree import map_leaves
from ..entry.entrypoint import Entrypoint
from ..weights.bind import (
    BoundArgument,
    bound_note,
    entry_modules,
    load_binds,
    missing_bound_key,
    missing_key_error,
    weight_partition_specs,
)
from .hints import EQX_NAN_STATIC, library_hint
from .like import LikeTree, expand_likes
from .returns import Returned, plain, recorded
from .tracing import exclude_own_frames, jax_config, location_regex, on_fresh_stack, user_frames, x64_enabled

_JAX_CUSTOM_CALL_ERROR = "Cannot serialize code with custom calls whose targets have no compatibility guarantees"


@dataclass(frozen=True)
class InputLeaf:
    """A free array input of the program, in the program's (JAX's flattening) order."""

    name: str  # "x", "params/w"
    spec_path: str  # "args[1]['w']", for messages
    leaf: ArrayLeaf


@dataclass
class Lowered:
    exported: Any  # jax.export.Exported
    name: str
    inputs: list[InputLeaf]
    signature: Signature  # the call tree
    outputs: list[str]
    output_tree: OutputNode
    x64: bool
    scan: ModuleScan
    #: Bound tensors this function's program takes, in the program's order (sorted by name).
    tensors: list[Any] = dataclasses.field(default_factory=list)
    #: Names of bound tensors the program never reads (JAX dropped them from the module).
    unused_weights: list[str] = dataclasses.field(default_factory=list)
    #: Position in the program's flat arguments of each free input, then of each bound tensor.
    input_positions: list[int] = dataclasses.field(default_factory=list)
    weight_positions: list[int] = dataclasses.field(default_factory=list)
    #: How the returned value is recorded (``returns.recorded``), as tracing saw it.
    returned: Returned | None = None

    @property
    def output_keys(self) -> dict[int, str]:
        """Output index -> the key dtype (``key<fry>``) of an output that is a PRNG key array's key data."""
        return self.returned.keys if self.returned is not None else {}


def param_names(fn: Callable[..., Any], nargs: int) -> list[str]:
    """Names for positional arguments 0..nargs-1 from the function's signature (``arg0``... when unknown)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [f"arg{i}" for i in range(nargs)]
    names: list[str] = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            names.extend(f"{p.name}/{k}" for k in range(nargs - len(names)))
            break
    return (names + [f"arg{i}" for i in range(len(names), nargs)])[:nargs]


def check_function_accepts_spec(fn: Callable[..., Any], fspec: FunctionSpec, label: str) -> None:
    """Raise SpecError when the spec's ``args`` and ``kwargs`` cannot be passed to ``fn`` (``label`` names it)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = sig.parameters
    takes_any_keyword = any(p.kind == p.VAR_KEYWORD for p in params.values())
    keyword_names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    reason = None
    if not takes_any_keyword:
        for k in fspec.kwargs:
            if k not in params or params[k].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                     inspect.Parameter.VAR_POSITIONAL):
                close = difflib.get_close_matches(k, keyword_names, n=1)
                reason = f"keyword {k!r} is not a parameter" + (f" (did you mean {close[0]!r}?)" if close else "")
                break
    if reason is None:
        try:
            sig.bind(*fspec.args, **fspec.kwargs)
            return
        except TypeError as e:
            reason = str(e)
    n = len(fspec.args)
    given = plural(n, "positional argument")
    if fspec.kwargs:
        given += f" and keyword{'s' if len(fspec.kwargs) != 1 else ''} {', '.join(fspec.kwargs)}"
    verb = "does" if n + len(fspec.kwargs) == 1 else "do"
    raise SpecError(f"{fspec.where}: the spec gives {given}, which {verb} not fit {label}{sig}: {reason}. "
                    f"Make 'args' and 'kwargs' match the function's parameters{_bind_hint(params, fspec)}.")


#: Parameter names that hold a model's weights, by convention (``apply(params, x)``, ``model(variables, x)``).
_WEIGHT_NAMES = ("params", "parameters", "variables", "weights", "model", "net", "module", "trainable",
                 "non_trainable", "ckpt", "checkpoint")


def _bind_hint(params: Mapping[str, inspect.Parameter], fspec: FunctionSpec) -> str:
    """When the spec gives fewer positional arguments than the function requires and a parameter it leaves out at
    the front is named as weights are (``apply(params, x)`` with ``args: [f32[b, 4]]``): how to bind it, so that the
    spec lists only the inputs."""
    positional = [name for name, q in params.items() if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)
                  and q.default is q.empty and name not in fspec.kwargs]
    short = len(positional) - len(fspec.args)
    if short <= 0 or any(isinstance(a, BindLeaf) for a in fspec.args):
        return ""
    weights = [n for n in positional[:short] if n.lower() in _WEIGHT_NAMES or "param" in n.lower()
               or "weight" in n.lower()]
    if not weights:
        return ""
    named, first, one = " and ".join(repr(n) for n in weights), weights[0], len(weights) == 1
    return (f"; if {named} {'holds' if one else 'hold'} weights the artifact should store, bind "
            f"{'it' if one else 'them'}: a '- bind: SOURCE' entry (model.py:PARAMS, a .npz, .safetensors or "
            f"checkpoint directory) in {'its' if one else 'their'} place in 'args', or export --bind {first}=SOURCE "
            f"(bind={{{first!r}: ...}} from Python), and the spec lists the other arguments")


def _spec_tree_dynamic(tree: Any) -> Any:
    """The spec pytree with static and bound leaves replaced by None (JAX treats None as an empty subtree)."""

    def dynamic(leaf: Any) -> Any:
        if isinstance(leaf, (StaticLeaf, BindLeaf)):
            return None
        return _spec_tree_dynamic(leaf.mirror) if isinstance(leaf, LikeTree) else leaf

    return map_leaves(dynamic, tree)


def _fill(spec_tree: Any, value: Any, bound: dict[int, Any], weights: dict[str, Any]) -> Any:
    """The argument the function receives: static values and bound trees put back where the spec has them."""
    if isinstance(spec_tree, StaticLeaf):
        return spec_tree.value
    if isinstance(spec_tree, BindLeaf):
        return bound[id(spec_tree)].rebuild(weights)
    if isinstance(spec_tree, LikeTree):
        return spec_tree.rebuild(value)
    if isinstance(spec_tree, dict):
        return {k: _fill(v, value[k], bound, weights) for k, v in spec_tree.items()}
    if isinstance(spec_tree, list):
        return [_fill(v, value[i], bound, weights) for i, v in enumerate(spec_tree)]
    return value


def used_variables(inputs: list[InputLeaf]) -> set[str]:
    """The dimension variables that the inputs' shapes name."""
    return {v for i in inputs for d in i.leaf.shape if isinstance(d, str) for v in dimexpr.variables(dimexpr.parse(d))}


def function_constraints(inputs: list[InputLeaf], spec: ShapeSpec) -> tuple[list[str], list[str]]:
    """The spec's bounds (as JAX constraints) and constraints that concern this function's variables.

    A spec with several functions shares one ``dims``/``constraints`` section; each function's symbolic scope gets
    only what names its own variables (JAX refuses constraints on variables no argument uses).
    """
    used = used_variables(inputs)
    bounds = []
    for d in spec.dims.values():
        if d.name in used:
            if d.min is not None and d.min > 1:
                bounds.append(f"{d.name} >= {d.min}")
            if d.max is not None:
                bounds.append(f"{d.name} <= {d.max}")
    constraints = [c.text for c in spec.constraints if dimexpr.parse_constraint(c.text).variables() <= used]
    return bounds, constraints


def _shape_dtype_structs(inputs: list[InputLeaf], spec: ShapeSpec):
    import jax
    from jax import export

    bounds, constraints = function_constraints(inputs, spec)
    try:
        scope = export.SymbolicScope(bounds + constraints)
    except Exception as e:  # noqa: BLE001 - JAX raises ValueError and its own shape-poly errors
        raise SpecError(f"{spec.file}: JAX rejects the constraints: {e}") from None
    structs = []
    for inp in inputs:
        try:
            shape: Any = tuple(inp.leaf.shape)
            if not all(isinstance(d, int) for d in shape):  # without a variable, JAX's parser gives these ints
                shape = export.symbolic_shape(inp.leaf.shape_text(), scope=scope)
        except Exception as e:  # noqa: BLE001
            raise SpecError(f"{inp.leaf.where}: {inp.spec_path}: JAX rejects the shape "
                            f"[{inp.leaf.shape_text()}]: {e}") from None
        structs.append(jax.ShapeDtypeStruct(shape, dtypes.to_numpy(inp.leaf.dtype), weak_type=inp.leaf.weak))
    return structs


def lower(
    entry: Entrypoint,
    fspec: FunctionSpec,
    spec: ShapeSpec,
    *,
    name: str,
    platforms: list[str] | None,
    allow_custom_calls: list[str],
    strip_locations: bool = False,
    record_source: Callable[[BindLeaf], str] | None = None,
) -> Lowered:
    """Export one function of a spec with ``jax.export``, as the function ``name`` (the program's name too, so that
    the payload does not depend on the Python name). ``record_source`` gives a bound source as the manifest's call
    tree records it (default: ``calltree.recorded_source``)."""
    import jax
    from jax import export, tree_util

    exclude_own_frames()
    fn = entry.function
    fspec = expand_likes(fspec, spec, entry_modules(fn))
    check_function_accepts_spec(fn, fspec, entry.attribute)
    arg_names = param_names(fn, len(fspec.args))

    fixed = (StaticLeaf, BindLeaf)  # top-level arguments the caller does not pass
    dyn_args = tuple(_spec_tree_dynamic(a) for a in fspec.args if not isinstance(a, fixed))
    dyn_arg_pos = [i for i, a in enumerate(fspec.args) if not isinstance(a, fixed)]
    dyn_kwargs = {k: _spec_tree_dynamic(v) for k, v in fspec.kwargs.items() if not isinstance(v, fixed)}

    inputs, leaf_index = _input_leaves(tree_util.tree_flatten_with_path((dyn_args, dyn_kwargs))[0], dyn_arg_pos,
                                       arg_names)
    bound, tensors, binds = load_binds(fspec, arg_names, spec, entry_modules(fn))
    x64 = any(dtypes.is_64bit(i.leaf.dtype) for i in inputs) or \
        any(dtypes.is_64bit(str(t.array.dtype)) for t in tensors)
    returned: list[Returned] = []
    program = _program(fn, fspec, bound, name, returned)
    platforms = list(platforms) if platforms else [export.default_export_platform()]
    disabled = [export.DisabledSafetyCheck.custom_call(t) for t in allow_custom_calls]
    weight_specs = weight_partition_specs(binds, tensors, spec.mesh) if spec.mesh else {}

    def export_config() -> Any:
        # One user frame per op, not the whole Python stack: the stack above the function (jaxport, click, a test
        # runner) is not the model's and would make the bytes depend on who called export.
        return jax_config(jax_enable_x64=x64 or x64_enabled(),
                          jax_include_full_tracebacks_in_locations=False,
                          jax_hlo_source_file_canonicalization_regex=location_regex(entry.root))

    traced_as: list[Any] = []  # the jitted program and the arguments it was exported with

    def run_export(checks):
        with export_config():
            tree, kwargs = _abstract_arguments(dyn_args, dyn_kwargs, inputs, spec, tensors)
            if spec.mesh:
                jitted, call_args = _jit_sharded(program, tree, kwargs, dyn_args, dyn_kwargs, inputs, weight_specs,
                                                 spec, fspec)
                traced_as[:] = [jitted, tuple(call_args), {}]
                return export.export(jitted, platforms=platforms, disabled_checks=checks)(*call_args)
            jitted = jax.jit(program)
            traced_as[:] = [jitted, tuple(tree[0]), kwargs]
            return export.export(jitted, platforms=platforms, disabled_checks=checks)(*tree[0], **kwargs)

    def traced_jaxpr() -> Any:
        """The jaxpr ``export`` traced: the same jitted program, arguments and configuration, so JAX's tracing
        cache answers without tracing the program again."""
        jitted, args, kwargs = traced_as
        with export_config():
            return jitted.trace(*args, **kwargs).jaxpr

    try:
        exported = on_fresh_stack(run_export, disabled)
    except (SpecError, PolicyError):
        raise
    except Exception as e:  # noqa: BLE001 - tracing runs the user's code; anything it raises is reported as theirs
        raise _export_failed(e, entry.spec, spec, allow_custom_calls, run_export, binds, lambda: _host_callbacks(
            program, dyn_args, dyn_kwargs, inputs, spec, x64, tensors), used_variables(inputs)) from None

    if strip_locations:
        exported = dataclasses.replace(
            exported, mlir_module_serialized=strip_module_locations(exported.mlir_module_serialized))
    scan = scan_module(exported.mlir_module_serialized)

    out_names, out_tree = _outputs(exported, fspec, returned[0] if returned else None)
    check_output_dimensions(exported, out_names, spec)
    input_positions, weight_positions = calltree.argument_positions(exported)
    kept = set(exported.module_kept_var_idx)
    unused = [t.name for t, pos in zip(tensors, weight_positions) if pos not in kept]
    if tensors and not unused:
        # JAX keeps every argument of a program with symbolic shapes: look at what the traced program reads.
        unused = on_fresh_stack(_unread_weights, traced_jaxpr, tensors, weight_positions)
    return Lowered(exported, name, inputs, call_tree(fspec, arg_names, leaf_index, record_source), out_names,
                   out_tree, x64, scan, tensors, unused, input_positions, weight_positions,
                   returned[0] if returned else None)


def _input_leaves(flat: list[tuple[Any, Any]], dyn_arg_pos: list[int], arg_names: list[str]
                  ) -> tuple[list[InputLeaf], dict[int, int]]:
    """The program's free inputs, named from the flattened spec pytree ``(args, kwargs)`` of its free arguments
    (``dyn_arg_pos``: each free positional argument's position among the function's), and each leaf's index by
    ``id``."""
    inputs: list[InputLeaf] = []
    leaf_index: dict[int, int] = {}
    for path, leaf in flat:
        assert isinstance(leaf, ArrayLeaf)
        top, *rest = path
        if calltree.key_name(top) == "0":
            first = calltree.key_name(rest[0])
            pos = dyn_arg_pos[int(first)]
            parts = [arg_names[pos]]
            spec_path = f"args[{pos}]"
        else:
            parts = [calltree.key_name(rest[0])]
            spec_path = f"kwargs[{calltree.key_name(rest[0])!r}]"
        for k in rest[1:]:
            parts.append(calltree.key_name(k))
            spec_path += f"[{calltree.key_name(k)!r}]" if hasattr(k, "key") else f"[{calltree.key_name(k)}]"
        leaf_name = "/".join(parts)
        clash = next((i for i in inputs if i.name == leaf_name), None)
        if clash is not None:
            raise SpecError(f"{leaf.where}: {spec_path} and {clash.spec_path} both get the input name {leaf_name!r} "
                            f"(names join pytree keys with '/'). Rename a key so that no key contains '/'.")
        leaf_index[id(leaf)] = len(inputs)
        inputs.append(InputLeaf(leaf_name, spec_path, leaf))
    return inputs, leaf_index


def _program(fn: Callable[..., Any], fspec: FunctionSpec, bound: dict[int, Any], name: str,
             returned: list[Returned]) -> Callable[..., Any]:
    """The function as the program JAX exports, named ``name``: it takes the free arrays (and the bound tensors as
    the keyword ``WEIGHTS_KWARG``), puts the static values and bound trees back where the spec has them, and
    returns the function's value in its plain form (``returns.plain``); tracing it sets ``returned`` to how the
    value is recorded."""
    spec_args = fspec.args
    spec_kwargs = fspec.kwargs

    def program(*args, **kwargs):
        weights = kwargs.pop(WEIGHTS_KWARG, {})
        it = iter(args)
        full_args = [_fill(a, None if isinstance(a, (StaticLeaf, BindLeaf)) else next(it), bound, weights)
                     for a in spec_args]
        full_kwargs = {k: _fill(v, kwargs.get(k), bound, weights) for k, v in spec_kwargs.items()}
        value = fn(*full_args, **full_kwargs)
        returned[:] = [recorded(value)]
        return plain(value)

    program.__name__ = name
    program.__qualname__ = name
    return program


def _export_failed(e: Exception, where: str, spec: ShapeSpec, allowed: list[str], run_export: Callable[[Any], Any],
                   binds: list[BoundArgument], host_callbacks: Callable[[], list[str]], variables: set[str]
                   ) -> Exception:
    """The error to report for an export of the spec's function (at ``where``) that raised ``e``: custom calls not
    in ``allowed`` (all of them named, from ``run_export`` run again with every custom call allowed), a ``dims`` max
    beyond int32, a bound tree without a key the function reads, host callbacks (``host_callbacks`` traces the
    program for them; JAX reports them as a NotImplementedError, or with symbolic shapes as an opaque RuntimeError),
    else ``e`` as the user's, with what to do where jaxport knows (``hints``; ``variables``: the dimension variables
    of the inputs' shapes)."""
    if _JAX_CUSTOM_CALL_ERROR in str(e):
        unsafe = on_fresh_stack(export_allowing_every_custom_call, run_export)
        return disallowed_custom_calls_error(where, scan_module(unsafe.mlir_module_serialized), set(allowed))
    too_big = _int32_bound(e, spec)
    if too_big is not None:
        return too_big
    missing = missing_bound_key(e) if binds else None
    if missing is not None:
        return missing_key_error(missing, binds)
    callbacks = host_callbacks()
    if callbacks and all(c.endswith(_FROM_EQUINOX) for c in callbacks):
        return ExportError(f"{where}: the function uses host callbacks ({', '.join(callbacks)}), which call "
                           f"back into Python and cannot be serialized. They are equinox's runtime checks "
                           f"(eqx.error_if, used by diffrax, optimistix and lineax), which call back to raise "
                           f"their error: for diffrax, pass diffeqsolve(..., throw=False) and read sol.result "
                           f"instead; else set the environment variable EQX_ON_ERROR=nan before equinox is "
                           f"imported (EQX_ON_ERROR=nan jaxport export ...), so that a failed check gives NaN "
                           f"instead{EQX_NAN_STATIC}.")
    if callbacks:
        return ExportError(f"{where}: the function uses host callbacks ({', '.join(callbacks)}), which "
                           f"call back into Python and cannot be serialized. Remove jax.debug.print, "
                           f"jax.debug.callback, jax.pure_callback and io_callback from the exported function: "
                           f"print outside it, or return the value as an extra output.")
    return ExportError(f"{where}: exporting with the spec's shapes failed: "
                       f"{type(e).__name__}: {e}{library_hint(e, variables)}{bound_note(binds)}{user_frames(e)}")


def _int32_bound(e: Exception, spec: ShapeSpec) -> SpecError | None:
    """The spec error for a ``dims`` max above 2**31 - 1 in a program without 64-bit values, which JAX's shape
    checks compare as 32-bit integers (JAX raises ``OverflowError: Python integer ... out of bounds for int32``)."""
    if not (isinstance(e, OverflowError) and "int32" in str(e)):
        return None
    for d in spec.dims.values():
        if d.max is not None and d.max > (1 << 31) - 1:
            return SpecError(f"{d.where}: dims[{d.name!r}].max: {d.max} is above 2**31 - 1, and a program without "
                             f"64-bit inputs checks its dimension sizes as 32-bit integers. Lower the max, or leave "
                             f"it out (no upper bound).")
    return None


def check_output_dimensions(exported: Any, out_names: list[str], spec: ShapeSpec) -> None:
    """Refuse an output dimension that can divide by zero, or exceed 2**62, within the spec's bounds: every reader
    of the artifact would refuse it (``dimexpr.check_ranges``, the rule the spec's own shapes pass)."""
    bounds = {d.name: (1 if d.min is None else d.min, d.max) for d in spec.dims.values()}
    for name, aval in zip(out_names, exported.out_avals):
        for axis, d in enumerate(aval.shape):
            if isinstance(d, int):
                continue
            try:
                dimexpr.check_ranges(dimexpr.parse(str(d)), bounds)
            except dimexpr.DimExprError as e:
                raise SpecError(f"{spec.file}: output {name!r}: shape[{axis}] is {d}, which the artifact cannot "
                                f"record: {e}. Bound the dimension variables under 'dims' so that it cannot.") from None


def _jit_sharded(program: Callable[..., Any], tree: Any, kwargs: dict[str, Any], dyn_args: Any, dyn_kwargs: Any,
                 inputs: list[InputLeaf], weight_specs: dict[str, Any], spec: ShapeSpec,
                 fspec: FunctionSpec) -> tuple[Any, Any]:
    """``jax.jit`` of the program with the spec's shardings over its mesh (unsharded arrays replicated)."""
    from jax import tree_util

    specs = tree_util.tree_unflatten(tree_util.tree_structure((dyn_args, dyn_kwargs)),
                                     [spec_leaf(i.leaf.sharding) for i in inputs])
    kwarg_specs = dict(specs[1])
    if WEIGHTS_KWARG in kwargs:
        kwarg_specs[WEIGHTS_KWARG] = {n: spec_leaf(weight_specs.get(n)) for n in kwargs[WEIGHTS_KWARG]}
    assert spec.mesh is not None
    return jit_sharded(program, tree[0], kwargs, spec.mesh, specs[0], kwarg_specs, fspec.outputs_sharding,
                       str(fspec.where))


def _trace(program: Callable[..., Any], dyn_args: Any, dyn_kwargs: Any, inputs: list[InputLeaf], spec: ShapeSpec,
           x64: bool, tensors: list[Any]) -> Any:
    """The closed jaxpr of the program at the spec's symbolic shapes (raises what tracing raises)."""
    import jax

    with jax_config(jax_enable_x64=x64 or x64_enabled()):
        tree, kwargs = _abstract_arguments(dyn_args, dyn_kwargs, inputs, spec, tensors)
        return jax.make_jaxpr(program)(*tree[0], **kwargs)


def _abstract_arguments(dyn_args: Any, dyn_kwargs: Any, inputs: list[InputLeaf], spec: ShapeSpec,
                        tensors: list[Any]) -> tuple[Any, dict[str, Any]]:
    """What the program is traced with: the pytree ``(args, kwargs)`` of the free arguments, each input a
    ``jax.ShapeDtypeStruct`` of the spec's symbolic shape, and the keyword arguments (the tree's, and the bound
    tensors' as ``WEIGHTS_KWARG``)."""
    import jax
    from jax import tree_util

    structs = _shape_dtype_structs(inputs, spec)
    tree = tree_util.tree_unflatten(tree_util.tree_structure((dyn_args, dyn_kwargs)), structs)
    kwargs = dict(tree[1])
    if tensors:
        kwargs[WEIGHTS_KWARG] = {t.name: jax.ShapeDtypeStruct(t.array.shape, t.array.dtype) for t in tensors}
    return tree, kwargs


def _unread_weights(traced_jaxpr: Callable[[], Any], tensors: list[Any], weight_positions: list[int]) -> list[str]:
    """Names of the bound tensors that no operation of the traced program takes (an operation whose result is
    unused still counts as reading them), from the closed jaxpr ``traced_jaxpr()`` gives (the one ``export``
    traced, from JAX's cache). Empty when tracing fails: the warning is a courtesy."""
    try:
        jaxpr = traced_jaxpr().jaxpr
    except Exception:  # noqa: BLE001 - the export itself succeeded; nothing to report
        return []
    read = {id(v) for eqn in jaxpr.eqns for v in eqn.invars} | {id(v) for v in jaxpr.outvars}
    return [t.name for t, pos in zip(tensors, weight_positions) if id(jaxpr.invars[pos]) not in read]


_CALLBACK_PRIMITIVES = ("debug_callback", "debug_print", "pure_callback", "io_callback")
#: How ``_host_callbacks`` marks a callback that equinox's runtime checks (``eqx.error_if``) made.
_FROM_EQUINOX = " from equinox.error_if"


def _host_callbacks(program: Callable[..., Any], dyn_args: Any, dyn_kwargs: Any, inputs: list[InputLeaf],
                    spec: ShapeSpec, x64: bool, tensors: list[Any]) -> list[str]:
    """Names of the host-callback primitives in the traced program (empty when tracing itself fails), each marked
    ``_FROM_EQUINOX`` when equinox's runtime checks made it."""
    try:
        closed = _trace(program, dyn_args, dyn_kwargs, inputs, spec, x64, tensors)
    except Exception:  # noqa: BLE001 - the caller reports the original error
        return []
    found: set[str] = set()

    def walk(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in _CALLBACK_PRIMITIVES:
                callback = eqn.params.get("callback")
                module = getattr(getattr(callback, "callback_func", callback), "__module__", None) or ""
                found.add(eqn.primitive.name + (_FROM_EQUINOX if module.split(".")[0] == "equinox" else ""))
            for param in eqn.params.values():
                for sub in param if isinstance(param, (list, tuple)) else [param]:
                    inner = getattr(sub, "jaxpr", None)
                    if inner is not None:
                        walk(inner if hasattr(inner, "eqns") else getattr(inner, "jaxpr", inner))

    walk(closed.jaxpr)
    return sorted(found)


def _outputs(exported: Any, fspec: FunctionSpec, returned: Returned | None) -> tuple[list[str], Any]:
    """The output names (the spec's ``outputs:`` laid over the defaults) and the ``output_tree``: as tracing
    recorded the returned value, else (a program not traced here) from the program's own output tree."""
    from jax import tree_util

    n = len(exported.out_avals)
    if returned is None or len(returned.names) != n:
        returned = recorded(tree_util.tree_unflatten(exported.out_tree, list(range(n))))
    names, paths, tree = returned.names, returned.paths, returned.tree
    if fspec.outputs is not None:
        names = outputs.assign(fspec.outputs, tree, paths, names, str(fspec.outputs_where or fspec.where))
    return names, tree


def call_tree(fspec: FunctionSpec, names: list[str], leaf_index: dict[int, int],
              record_source: Callable[[BindLeaf], str] | None = None) -> Signature:
    """The call tree recorded in the manifest for a spec's function: ``names`` are the positional arguments' names,
    ``leaf_index`` maps ``id(ArrayLeaf)`` to its input index, ``record_source`` gives a bound source as recorded
    (export's: relative to its root; default: ``calltree.recorded_source``)."""

    def enc(tree: Any, name: str | None = None) -> CallNode:
        if isinstance(tree, StaticLeaf):
            v = tree.value
            return CallNode("static", list(v) if isinstance(v, tuple) else v, name)
        if isinstance(tree, BindLeaf):
            recorded = record_source(tree) if record_source is not None else calltree.recorded_source(tree.source)
            return CallNode("bound", recorded, name)
        if isinstance(tree, ArrayLeaf):
            return CallNode("input", leaf_index[id(tree)], name)
        if isinstance(tree, LikeTree):
            return enc(tree.mirror, name)
        if isinstance(tree, dict):
            return CallNode("dict", {k: enc(v) for k, v in tree.items()}, name)
        return CallNode("list", tuple(enc(v) for v in tree), name)

    return Signature(tuple(enc(a, names[i]) for i, a in enumerate(fspec.args)),
                     {k: enc(v) for k, v in fspec.kwargs.items()})
