"""Options shared by several commands, defined once: the command line's one vocabulary.

Every option that more than one command takes is declared here, with its spelling, metavar, parsing and the keyword
its command receives (``tests/test_layers.py`` fails on one declared in two command modules); a command passes its
own help text where the option's role in it differs in detail. ``--dim NAME=V[,V...]`` is one spelling for every
command (``{name: [values]}``; ``one_value`` for a command that runs one shape); old spellings stay as deprecated
aliases that say so on stderr (``compile --dims``)."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import click

from .bounds import MAX_SEED, MAX_TIME_LIMIT, MAX_TOLERANCE, FiniteRange, memory_size
from .files import NamesFiles, OutputPath

F = Callable[..., Any]


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON on stdout.")(f)


def debug_option(f: F) -> F:
    return click.option("--debug", is_flag=True, help="Show the Python traceback of an error.")(f)


def for_jax_option(f: F) -> F:
    return click.option("--for-jax", "for_jax", metavar="VERSION",
                        help="Write the artifact for that older JAX (0.9.1 up to this one), whose jaxport then calls "
                             "it: its StableHLO as that JAX reads it, its window dated by that JAX.")(f)


def complete_platforms(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a platform's name (``--platform``, ``--against-platform``): JAX's platforms a spec
    takes."""
    from click.shell_completion import CompletionItem

    from jaxport.spec.values import PLATFORMS

    return [CompletionItem(p) for p in PLATFORMS if p.startswith(incomplete)]


def platform_option(f: F) -> F:
    return click.option("--platform", "platforms", multiple=True, metavar="NAME", shell_complete=complete_platforms,
                        help="Target platform (cpu, cuda, rocm, tpu); repeat for several.")(f)


def function_choice_option(help: str = "Function of the artifact to use when it holds several.") -> Callable[[F], F]:
    """``--function NAME`` (as ``function``): which of the artifact's functions a command works on."""
    return click.option("--function", "function", metavar="NAME", help=help)


function_option = function_choice_option()


def _options(f: F, *decorators: Callable[[F], F]) -> F:
    """``f`` under ``decorators``, listed as they would be stacked above it (the first is the first in --help)."""
    for decorate in reversed(decorators):
        f = decorate(f)
    return f


def _sentence(prefix: str, text: str) -> str:
    """``text`` after a condition such as ``"With --expect: "``, or capitalized as a sentence of its own."""
    return prefix + text if prefix else text[:1].upper() + text[1:]


# --- the spec, the runtime, the compilation cache, reference outputs ------------------------------------------------

def shapes_option(help: str, *, required: bool = False) -> Callable[[F], F]:
    """``--shapes``/``-s FILE`` (as ``spec_path``): a YAML shape spec."""
    return click.option("--shapes", "-s", "spec_path", required=required, type=click.Path(), help=help)


def runtime_option(help: str) -> Callable[[F], F]:
    """``--runtime jax|iree`` (as ``runtime_name``, default ``jax``)."""
    from jaxport.run.options import RUNTIMES

    return click.option("--runtime", "runtime_name", type=click.Choice(list(RUNTIMES)), default="jax",
                        show_default=True, help=help)


#: Where the compilation cache is when ``--cache-dir`` is not given, as every command that uses it says it.
DEFAULT_CACHE = "$JAXPORT_CACHE_DIR, else $XDG_CACHE_HOME/jaxport/xla or ~/.cache/jaxport/xla"


def cache_dir_option(help: str = f"XLA compilation cache (default: {DEFAULT_CACHE}).") -> Callable[[F], F]:
    """``--cache-dir DIR`` (as ``cache_dir``): JAX's persistent compilation cache and jaxport's records beside it
    (check verdicts, padding verdicts, shipped executables), in every command."""
    return click.option("--cache-dir", type=click.Path(file_okay=False), help=help)


def module_dir_option(help: str = "With --runtime iree: where IREE keeps the modules it compiles (default: iree beside "
                                  "the compilation cache, ~/.cache/jaxport/iree).") -> Callable[[F], F]:
    """``--module-dir DIR`` (as ``module_dir``): IREE's compiled modules."""
    return click.option("--module-dir", type=click.Path(file_okay=False), help=help)


#: The targets ``--target`` names (``jaxport.run.compile.targets``), for the help texts.
TARGETS_HELP = ("cpu (this host), tpu-v5e (one v5e chip), tpu-v5e-4, tpu-v5e-8, tpu-v6e, tpu-v6e-4, tpu-v6e-8, "
                "tpu-v5p-8, tpu-v4-8, cuda-h200 (one H200: XLA's spec until captured), cuda-h200-8, cuda-h100, "
                "cuda-h100-8, cuda-a100, cuda-a100-8, cuda-FILE.json (a GPU captured by 'jaxport target')")


def _complete_targets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    from click.shell_completion import CompletionItem

    from jaxport.run.compile.targets import target_names

    return [CompletionItem(n) for n in target_names() if n.startswith(incomplete)]


def target_option(help: str) -> Callable[[F], F]:
    """``--target NAME`` (repeatable, as ``targets``): machines to compile for, which need not be this one."""
    return click.option("--target", "targets", multiple=True, metavar="NAME", shell_complete=_complete_targets,
                        help=f"{help} Targets: {TARGETS_HELP}.")


def allow_platform_mismatch_option(
        help: str = "Try to run a function exported for other platforms than the local one.") -> Callable[[F], F]:
    """``--allow-platform-mismatch`` (as ``allow_platform_mismatch``)."""
    return click.option("--allow-platform-mismatch", is_flag=True, help=help)


def expect_option(help: str) -> Callable[[F], F]:
    """``--expect REF`` (as ``expect``): reference outputs to compare with."""
    return click.option("--expect", type=click.Path(), metavar="REF", help=help)


# --- custom calls ---------------------------------------------------------------------------------------------------

def custom_call_option(help: str) -> Callable[[F], F]:
    """``--allow-custom-call TARGET`` (repeatable), as ``allow_custom_calls``, with a command's own help."""
    return click.option("--allow-custom-call", "allow_custom_calls", multiple=True, metavar="TARGET", help=help)


#: ``--allow-custom-call`` of the commands that run or compile a program: what the caller lets it call.
allow_custom_call_option = custom_call_option(
    "Let the program call this custom-call target, which JAX does not guarantee stable (a kernel this process "
    "provides); repeatable. The artifact's own list of allowed targets grants nothing, and host callbacks are never "
    "allowed.")

#: ``--allow-custom-call`` of the commands that write a program (export, import): what the artifact may record.
lowering_custom_call_option = custom_call_option(
    "Allow a custom-call target JAX does not guarantee stable; repeatable.")


# --- signatures (model signing) --------------------------------------------------------------------------------------

def signature_path_option(help: str = "Where the artifact's signature bundle is (default: ARTIFACT.sig beside it).",
                          *, written: bool = False) -> Callable[[F], F]:
    """``--signature PATH`` (as ``signature_path``): the model-signing bundle of the artifact; ``written``: the
    command writes it (``sign``), every other reads it."""
    return click.option("--signature", "signature_path", type=OutputPath() if written else click.Path(),
                        metavar="PATH", help=help)


def password_env_option(help: str = "Read the private key's password from environment variable VAR (never from the "
                                    "command line).") -> Callable[[F], F]:
    """``--password-env VAR`` (as ``password_env``): where a signing key's password is; :func:`password_from` reads
    it."""
    return click.option("--password-env", "password_env", metavar="VAR", help=help)


def password_from(variable: str | None) -> str | None:
    """The password in the environment variable ``variable`` (None: no password); a variable that is not set is a
    usage error."""
    import os

    if variable is None:
        return None
    password = os.environ.get(variable)
    if password is None:
        raise click.UsageError(f"--password-env {variable}: the environment variable is not set.")
    return password


def require_signature_option(
        help: str = "Run the artifact only if it carries a signature (model signing, ARTIFACT.sig) by this trusted "
                    "public key (PEM; or a CA certificate, for certificate-signed bundles), checked before anything "
                    "reads it (exit 14 otherwise); repeatable: any one of them.") -> Callable[[F], F]:
    """``--require-signature PUBLIC.pem`` (repeatable, as ``require_signature``): the trusted signers' keys."""
    return click.option("--require-signature", "require_signature", multiple=True, type=click.Path(),
                        metavar="PUBLIC.pem", help=help)


def signature_key_option(help: str) -> Callable[[F], F]:
    """``--signature-key PUBLIC.pem`` (repeatable, as ``signature_keys``): keys a signature is verified with."""
    return click.option("--signature-key", "signature_keys", multiple=True, type=click.Path(), metavar="PUBLIC.pem",
                        help=help)


# --- how to load: one option group, one record --------------------------------------------------------------------

#: An option of a library record's field: (the field, its option, the parameter the option gives, how its value
#: becomes the field's; None: as it is).
RecordField = tuple[str, Callable[[F], F], str, Callable[[Any], Any] | None]


def record_options(fields: tuple[RecordField, ...] | list[RecordField], build: Callable[..., Any],
                   parameter: str) -> Callable[[F], F]:
    """The options of ``fields``, in that order, which the command receives as one parameter, ``parameter``: the
    library record ``build(**values)`` (as Polygraphy's argument groups build library objects), so that the command
    names none of its options. A value the record refuses is a usage error (exit 2)."""

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def command(*args: Any, **kwargs: Any) -> Any:
            from .errors import usage_errors

            values = {name: kwargs.pop(param) for name, _, param, _ in fields}
            values.update({name: convert(values[name]) for name, _, _, convert in fields if convert is not None})
            with usage_errors():
                kwargs[parameter] = build(**values)
            return f(*args, **kwargs)

        decorated: F = command
        for _, option, _, _ in reversed(fields):  # the first field's option is the first in --help
            decorated = option(decorated)
        return decorated

    return decorate


#: The command-line option of each ``LoadOptions`` field (``jaxport.run.options``): (field, option factory taking a
#: command's help text or None for the default, the parameter the option gives, how its value becomes the field's).
_LOAD_OPTIONS: tuple[tuple[str, Callable[[str | None], Callable[[F], F]], str, Callable[[Any], Any] | None], ...] = (
    ("function", lambda h: function_choice_option(h) if h else function_option, "function", None),
    ("runtime", lambda h: runtime_option(h or "Run with JAX (XLA) or with IREE's CPU backend (needs jaxport[iree])."),
     "runtime_name", None),
    ("allow_platform_mismatch", lambda h: allow_platform_mismatch_option(h) if h else allow_platform_mismatch_option(),
     "allow_platform_mismatch", bool),
    ("allow_custom_calls", lambda h: custom_call_option(h) if h else allow_custom_call_option,
     "allow_custom_calls", tuple),
    ("verify_weights", lambda h: click.option(
        "--no-verify", is_flag=True,
        help=h or "Skip the sha256 check of bound weights (one pass over their bytes) for a trusted artifact; "
                  "ignored with --require-signature, which always checks them."),
     "no_verify", lambda v: not v),
    ("cache_dir", lambda h: cache_dir_option(h) if h else cache_dir_option(), "cache_dir", None),
    ("cache", lambda h: click.option("--no-cache", is_flag=True,
                                     help=h or "Do not use the persistent compilation cache."),
     "no_cache", lambda v: not v),
    ("module_dir", lambda h: module_dir_option(h) if h else module_dir_option(), "module_dir", None),
    ("require_signature", lambda h: require_signature_option(h) if h else require_signature_option(),
     "require_signature", tuple),
    ("signature", lambda h: signature_path_option(h) if h else signature_path_option(
        "With --require-signature: where the signature bundle is (default: ARTIFACT.sig beside it)."),
     "signature_path", None),
    ("check_ranges", lambda h: click.option(
        "--check-ranges", is_flag=True,
        help=h or "Refuse an input value outside the range its spec declares (range:), naming the input, index and "
                  "value (exit 9); without it a range only shapes random inputs."),
     "check_ranges", bool),
)


def _load_record(**values: Any) -> Any:
    from jaxport.run.options import LoadOptions

    return LoadOptions(**values)


def load_options(*, omit: tuple[str, ...] = (), help: dict[str, str] | None = None) -> Callable[[F], F]:
    """The options of how to load an artifact's function, which the command receives as one parameter ``load``, a
    ``jaxport.run.options.LoadOptions`` (:func:`record_options`): ``--function``, ``--runtime``,
    ``--allow-platform-mismatch``, ``--allow-custom-call``, ``--no-verify``, ``--cache-dir``, ``--no-cache``,
    ``--module-dir``, ``--require-signature``, ``--signature`` and ``--check-ranges``, less
    the fields in ``omit`` (which keep their defaults), with a command's own ``help`` by field. A field added to
    ``LoadOptions`` is added to ``_LOAD_OPTIONS`` and every command that loads takes it."""
    texts = help or {}
    unknown = [name for name in (*omit, *texts) if name not in {entry[0] for entry in _LOAD_OPTIONS}]
    if unknown:
        raise ValueError(f"load_options: no load option {unknown[0]!r}")
    fields = [(name, option(texts.get(name)), param, convert)
              for name, option, param, convert in _LOAD_OPTIONS if name not in omit]
    return record_options(fields, _load_record, "load")


# --- tolerances -----------------------------------------------------------------------------------------------------


def tolerance_options(condition: str = "") -> Callable[[F], F]:
    """``--atol``, ``--rtol`` and ``--allow-nonfinite`` (as ``atol``, ``rtol``, ``allow_nonfinite``): how outputs are
    compared with a reference. ``condition`` starts each help line where they apply only with another option
    (``"With --expect: "``)."""

    def decorate(f: F) -> F:
        return _options(
            f,
            click.option("--atol", type=FiniteRange(0, MAX_TOLERANCE),
                         help=_sentence(condition, "absolute tolerance for every output (default: by output "
                                                   "dtype).")),
            click.option("--rtol", type=FiniteRange(0, MAX_TOLERANCE),
                         help=_sentence(condition, "relative tolerance for every output (default: by output "
                                                   "dtype).")),
            click.option("--allow-nonfinite", is_flag=True,
                         help=_sentence(condition, "let an output that is NaN/Inf everywhere on both sides pass "
                                                   "(default: it is inconclusive and fails).")))

    return decorate


# --- writing an artifact --------------------------------------------------------------------------------------------

def name_option(note: str = "") -> Callable[[F], F]:
    """``--name`` (as ``name``): the artifact's name; ``note`` adds what else it names in a command."""
    return click.option("--name", help=f"Artifact name (overrides metadata.name){note}.")


version_option = click.option("--version", "version", help="Artifact version (overrides metadata.version).")
strip_locations_option = click.option("--strip-locations", is_flag=True,
                                      help="Drop source locations from the program.")
no_manifest_option = click.option("--no-manifest", is_flag=True,
                                  help="Do not write the <artifact>.manifest.json sidecar.")


def artifact_write_options(*, name_note: str = "", rebinding: bool = False) -> Callable[[F], F]:
    """``--name``, ``--version``, ``--strip-locations`` and ``--no-manifest`` (as ``name``, ``version``,
    ``strip_locations``, ``no_manifest``): the metadata and files of an artifact a command writes. ``rebinding``
    (rebind keeps the program and the name byte for byte): ``--version`` and ``--no-manifest`` only."""
    if rebinding:
        return lambda f: _options(f, version_option, no_manifest_option)
    return lambda f: _options(f, name_option(name_note), version_option, strip_locations_option, no_manifest_option)


# --- bound weights and the root their sources are relative to -------------------------------------------------------

def _parse_binds(example: str) -> Callable[[click.Context, click.Parameter, tuple[str, ...]], dict[str, str]]:
    def parse(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
        binds: dict[str, str] = {}
        for item in values:
            name, sep, source = item.partition("=")
            if not sep or not name or not source:
                raise click.BadParameter(f"{item!r}: expected NAME=SOURCE, e.g. {example}.", ctx, param)
            if name in binds:
                raise click.BadParameter(f"{name!r} is given twice; bind each argument once.", ctx, param)
            binds[name] = source
        return binds

    return parse


def bind_option(help: str, *, required: bool = False, example: str = "params=weights.npz") -> Callable[[F], F]:
    """``--bind NAME=SOURCE`` (repeatable, as ``binds``: ``{name: source}``, each name once): where bound weights
    come from."""
    return click.option("--bind", "binds", multiple=True, required=required, type=NamesFiles(), metavar="NAME=SOURCE",
                        callback=_parse_binds(example), help=help)


def root_option(help: str) -> Callable[[F], F]:
    """``--root DIR`` (as ``root``): the directory recorded paths are relative to."""
    return click.option("--root", "root", type=click.Path(file_okay=False), metavar="DIR", help=help)


def bind_root_options(bind_help: str, root_help: str, *, required: bool = False,
                      example: str = "params=weights.npz") -> Callable[[F], F]:
    """``--bind NAME=SOURCE`` and ``--root DIR`` (``bind_option``, ``root_option``): where bound weights come from,
    and the directory recorded paths are relative to."""
    return lambda f: _options(f, bind_option(bind_help, required=required, example=example), root_option(root_help))


# --- input arrays ---------------------------------------------------------------------------------------------------

#: What ``--inputs`` takes, as every command that reads input arrays says it.
INPUT_FILES = ("FILE.npy repeated in the order 'inspect' lists the inputs, NAME=FILE.npy, or one .npz keyed by input "
               "names")


def inputs_option(help: str = f"Input arrays: {INPUT_FILES}. Repeatable.") -> Callable[[F], F]:
    """``--inputs``/``-i FILE`` (repeatable, as ``items``): input arrays from files."""
    return click.option("--inputs", "-i", "items", multiple=True, type=NamesFiles(), metavar="FILE", help=help)


def seed_option(default: int | None, help: str) -> Callable[[F], F]:
    """``--seed N``: a non-negative integer of at most 64 bits, as numpy's generators take."""
    return click.option("--seed", type=click.IntRange(0, MAX_SEED), default=default,
                        show_default=default is not None, help=help)


# --- dimension variables --------------------------------------------------------------------------------------------

def _parse_dims(one_value: bool) -> Callable[[click.Context, click.Parameter, tuple[str, ...]], dict[str, Any]]:
    """The callback of ``--dim NAME=V[,V...]``: ``{name: [values]}`` in the order given (a name repeated adds its
    values), or, where the command runs one shape (``one_value``), ``{name: value}``; read by the library's rules of
    sizes (``jaxport.run.buckets.sizes``), whose mistakes are click's usage errors of the option."""

    def parse(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
        if not values:
            return {}
        from jaxport.errors import UsageError
        from jaxport.run.buckets import sizes

        try:
            dims = sizes.parse(values, one_value=one_value)
        except UsageError as e:
            raise click.BadParameter(str(e), ctx, param) from None
        return {name: chosen[0] for name, chosen in dims.items()} if one_value else dims

    return parse


def _deprecated_dims(old: str) -> Callable[[click.Context, click.Parameter, tuple[str, ...]], dict[str, Any]]:
    parse = _parse_dims(one_value=False)

    def note(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
        if values:
            click.echo(f"note: {old} is deprecated; it is now --dim NAME=V[,V...], which takes the same values.",
                       err=True)
        return parse(ctx, param, values)

    return note


def dim_option(help: str, *, one_value: bool = False, deprecated_alias: str | None = None) -> Callable[[F], F]:
    """``--dim NAME=V[,V...]`` (repeatable), as ``dims``: the values of each dimension variable to use,
    ``{name: [values]}``; with ``one_value`` (a command that runs one shape), ``{name: value}``, and a second value
    is a usage error. ``deprecated_alias`` (``--dims``) is an old spelling that adds its values to ``dims`` and says
    on stderr that it is deprecated."""
    dim = click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE" if one_value else "NAME=V[,V...]",
                       callback=_parse_dims(one_value), help=help)
    if deprecated_alias is None:
        return dim

    def decorate(f: F) -> F:
        @functools.wraps(f)  # click's documented way to wrap a command callback (update_wrapper)
        def merged(*args: Any, dims: dict[str, list[int]], deprecated_dims: dict[str, list[int]],
                   **kwargs: Any) -> Any:
            for name, values in deprecated_dims.items():
                dims.setdefault(name, [])
                dims[name] += [v for v in values if v not in dims[name]]
            return f(*args, dims=dims, **kwargs)

        alias = click.option(deprecated_alias, "deprecated_dims", multiple=True, metavar="NAME=V[,V...]",
                             callback=_deprecated_dims(deprecated_alias),
                             help="Deprecated: the old name of --dim, which it now sets.")
        return _options(merged, dim, alias)

    return decorate


def input_selection_options(f: F) -> F:
    """``--inputs`` (files), or ``--random`` with ``--dim`` and ``--seed``: where a command's input arrays come from."""
    return _options(
        f,
        inputs_option(),
        click.option("--random", "use_random", is_flag=True,
                     help="Generate the inputs from the signature: each from the range: its spec declares, else "
                          "standard normal floats, integers 0..7, fair coin-flip bools."),
        dim_option("Value of a dimension variable (e.g. batch=8); repeatable.", one_value=True),
        seed_option(None, "Seed of --random (default 0)."))


def _range_bound(text: str) -> float | str:
    """One bound of ``--range``: an integer (kept exact, for 64-bit integer inputs), a finite float, or a dimension
    expression (``nodes``, ``seq - 1``: an integer input's bound at each call's dimension values)."""
    t = text.strip()
    try:
        float(t)
    except ValueError:
        if re.fullmatch(r"[-+*()0-9\s]*[A-Za-z_][A-Za-z0-9_+\-*/()\s,]*", t):
            return t  # a dimension expression: the range's check and each call's dimensions take it from here
    digits = t.lstrip("+-")
    if digits.isdigit() and t[:1] in "+-0123456789":
        if len(digits) > 40:  # beyond any dtype; int() refuses thousands of digits with a message about Python
            raise ValueError(t)
        return int(t)
    value = float(t)
    if not math.isfinite(value):
        raise ValueError(t)
    return value


def _parse_ranges(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
                  ) -> dict[str, tuple[float | str, float | str]]:
    ranges: dict[str, tuple[float | str, float | str]] = {}
    for text in values:
        name, eq, rest = text.rpartition("=")
        name = name.strip()
        lo_text, colon, hi_text = rest.partition(":")
        if not eq or not name or not colon:
            raise click.BadParameter(f"{text[:80]!r} is not NAME=LO:HI (e.g. --range tokens=0:32000).", ctx, param)
        try:
            lo, hi = _range_bound(lo_text), _range_bound(hi_text)
        except ValueError:
            raise click.BadParameter(f"{text[:80]!r}: LO and HI must be finite numbers (e.g. x=-1:1, "
                                     f"tokens=0:32000).", ctx, param) from None
        if not isinstance(lo, str) and not isinstance(hi, str) and lo >= hi:
            raise click.BadParameter(f"{text[:80]!r}: the range is empty; LO must be less than HI (the range is "
                                     f"half-open, [LO, HI)).", ctx, param)
        if name in ranges:
            raise click.BadParameter(f"input {name!r} has two ranges; give one --range per input.", ctx, param)
        ranges[name] = (lo, hi)
    return ranges


def range_option(f: F) -> F:
    """``--range NAME=LO:HI`` (repeatable): the half-open value range of a random input, as ``ranges``
    (input name -> (LO, HI)); check it against the function with ``jaxport.run.values.inputs.check_ranges``."""
    return click.option("--range", "ranges", multiple=True, metavar="NAME=LO:HI", callback=_parse_ranges,
                        help="Draw random input NAME from [LO, HI): floats uniform, integers LO..HI-1 (e.g. "
                             "tokens=0:32000 gives ids 0..31999; an integer input's bound may be a dimension, "
                             "senders=0:nodes); repeatable. Default: the spec's range: of the "
                             "input, else floats N(0,1), integers 0..7, bools coin flips.")(f)


# --- --isolate: rerun a command in a child process with limits ----------------------------------------------------

#: The child's wall-clock limit when --time-limit is not given.
DEFAULT_TIME_LIMIT = 600.0
_ISOLATE_FLAGS = ("--isolate",)
_ISOLATE_VALUED = ("--memory-limit", "--time-limit")


class IsolatableCommand(click.Command):
    """A command that can rerun itself in a child process (``--isolate``): it keeps its raw arguments for that."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["jaxport.args"] = list(args)
        return super().parse_args(ctx, args)


def isolate_options(f: F) -> F:
    """``--isolate`` with ``--memory-limit`` and ``--time-limit``: run the command in a child process."""
    f = click.option("--time-limit", type=FiniteRange(1, MAX_TIME_LIMIT), metavar="SECONDS",
                     help=f"With --isolate: stop the child after SECONDS (default {DEFAULT_TIME_LIMIT:g}).")(f)
    f = click.option("--memory-limit", callback=memory_size, metavar="SIZE",
                     help="With --isolate: the child's memory limit, e.g. 8G (default: the machine's physical "
                          "memory), on data memory (heap and private mappings); a limit below what Python and JAX "
                          "need to start is refused, naming that floor.")(f)
    return click.option("--isolate", is_flag=True,
                        help="Read and run the artifact in a child process with memory and time limits, so that a "
                             "crash in native code becomes an error (exit code 15). For untrusted artifacts.")(f)


def isolated_args(args: list[str]) -> list[str]:
    """A command's arguments without the --isolate options (what the child runs)."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in _ISOLATE_FLAGS:
            continue
        elif a in _ISOLATE_VALUED:
            skip = True
        elif a.split("=", 1)[0] in _ISOLATE_VALUED:
            continue
        else:
            out.append(a)
    return out


def run_isolated(ctx: click.Context, what: str, memory_limit: int | None, time_limit: float | None,
                 target: str = "jaxport_cli.main:main") -> None:
    """Rerun the current command in an isolated child (``target``, the command line's entry point); relay its
    output and exit with its status. Raises CrashError when the child dies by a signal or reaches its time limit.
    """
    import sys

    from jaxport.errors import CrashError
    from jaxport.frontend import visible
    from jaxport.isolation import isolate, startup

    # the child imports JAX before the command runs: the settings JAX and XLA would refuse as they start are checked
    # here first, so that they are one line (exit 10) as in any command, not the child's fatal log
    refusal = startup.settings_refusal(jax_settings=True)
    if refusal is not None:
        raise startup.StartupRefused(refusal)
    limits = isolate.command_limits(memory_limit, time_limit or DEFAULT_TIME_LIMIT)
    args = [ctx.info_name or "", *isolated_args(ctx.meta.get("jaxport.args", []))]
    outcome = isolate.run(target, args, limits)
    # The child renders as this process does; what native code printed in it is made visible all the same.
    click.echo(visible(outcome.stdout.decode("utf-8", "replace"), newlines=True), nl=False)
    click.echo(visible(outcome.stderr.decode("utf-8", "replace"), newlines=True), nl=False, err=True)
    out_of_memory = isolate.command_error(what, outcome, limits)
    if out_of_memory is not None:
        raise out_of_memory
    death = outcome.death(limits)
    if death is not None:
        raise CrashError(f"{what}: the isolated process {death}. The artifact may be damaged or hostile; do not run "
                         f"it without --isolate.")
    sys.exit(outcome.returncode)
