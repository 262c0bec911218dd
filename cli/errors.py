"""The one place where library errors become exit codes and messages."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import click

from jaxport import errors
from jaxport.frontend import command_inputs, visible
from jaxport.isolation.isolate import exit_if_out_of_memory

from .environment import exit_if_stdout_failed
from .files import note_read_files

#: Exit codes, documented in README.md ("Exit codes"). Subclasses come before their bases.
EXIT_CODES: list[tuple[type[errors.JaxportError], int]] = [
    (errors.SpecError, 3),
    (errors.EntrypointError, 4),
    (errors.ExportError, 5),
    (errors.PolicyError, 6),
    (errors.IntegrityError, 8),
    (errors.FormatError, 7),
    (errors.InputError, 9),
    (errors.PlatformError, 10),
    (errors.OutputError, 11),
    (errors.CrashError, 15),
    (errors.VerificationError, 12),
    (errors.DiffError, 13),
    (errors.PolicyViolation, 14),
    (errors.SignatureError, 14),
    (errors.PolicyFileError, 2),
    (errors.UsageError, 2),
]
EXIT_OK = 0
EXIT_INTERNAL = 1


def exit_code(exc: errors.JaxportError) -> int:
    for cls, code in EXIT_CODES:
        if isinstance(exc, cls):
            return code
    return EXIT_INTERNAL


def run(fn: Callable[[], Any], *, debug: bool, as_json: bool) -> None:
    """Run a command body, turning errors into one message on stderr (or a JSON object) and an exit code.

    The body runs inside ``command_inputs``: every file it reads, and every file its options name for reading
    (``files.note_read_files``), is remembered, and no output may replace one."""
    try:
        with command_inputs():
            note_read_files(click.get_current_context(silent=True))
            fn()
    except errors.JaxportError as e:
        exit_if_out_of_memory(e)  # in an --isolate child, an allocation its memory limit refused
        e = startup_refusal(e) or e  # wrapped by a caller (the user's module imported JAX): the refusal itself
        code = exit_code(e)
        if debug:
            _print_traceback()
        _report(e.kind, str(e), code, as_json)
        sys.exit(code)
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
        raise
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except MemoryError as e:
        _out_of_memory(e, debug, as_json)
    except Exception as e:  # noqa: BLE001 - a bug: say so, keep the traceback for --debug
        exit_if_stdout_failed(e)  # not a bug: a standard output that cannot be written (exit 11)
        exit_if_out_of_memory(e)  # a library that could not load or allocate under --isolate's memory limit
        if memory_short(e):
            _out_of_memory(e, debug, as_json)
        if debug:
            _print_traceback()
        refused = startup_refusal(e)
        if refused is not None:
            _report(refused.kind, str(refused), exit_code(refused), as_json)
            sys.exit(exit_code(refused))
        unavailable = backend_unavailable(e)
        if unavailable:
            _report(errors.PlatformError.kind, unavailable, exit_code(errors.PlatformError(unavailable)), as_json)
            sys.exit(exit_code(errors.PlatformError(unavailable)))
        _report("internal", f"{type(e).__name__}: {e}. This is a bug in jaxport; rerun with --debug for the "
                            f"traceback and report it.", EXIT_INTERNAL, as_json)
        sys.exit(EXIT_INTERNAL)


def _out_of_memory(e: BaseException, debug: bool, as_json: bool) -> NoReturn:
    """The out-of-memory crash: one ``error[crash]`` line, exit 15."""
    exit_if_out_of_memory(e)  # in an --isolate child: its parent reports the limit
    if debug:
        _print_traceback()
    _report("crash", "out of memory. An artifact or input that declares huge sizes can cause this; run with "
                     "--isolate and --memory-limit to bound what it may take.", 15, as_json)
    sys.exit(15)


#: What CPython's ``SystemError`` says of native code that failed without setting an exception, as an extension that
#: does not check an allocation fails when the allocation is refused.
_NO_EXCEPTION_SET = ("error return without exception set", "returned null without setting an exception",
                     "returned a result with an exception set")


def memory_short(e: BaseException) -> bool:
    """Whether ``e`` is an allocation that failed: a ``MemoryError`` in its chain (raised while handling one, or
    from one), or a ``SystemError`` of native code that returned without an exception (:data:`_NO_EXCEPTION_SET`)
    while this process runs under a memory limit (``RLIMIT_DATA`` or ``RLIMIT_AS``), the way an extension that does
    not check its allocations fails under one."""
    seen: set[int] = set()
    link: BaseException | None = e
    while link is not None and id(link) not in seen:
        if isinstance(link, MemoryError):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    text = str(e).lower()
    return isinstance(e, SystemError) and any(words in text for words in _NO_EXCEPTION_SET) and _memory_limited()


def startup_refusal(e: BaseException) -> errors.JaxportError | None:
    """The refusal of a setting JAX or XLA read as they start (``jaxport.isolation.startup``) that ``e`` is, or was
    raised from or while handling; None if there is none (or JAX was never asked to start)."""
    if "jaxport.isolation.startup" not in sys.modules:
        return None
    from jaxport.isolation.startup import refusal_in

    return refusal_in(e)


def backend_unavailable(e: BaseException) -> str:
    """What to say when ``e`` was raised while JAX started its backend (``jax/_src/xla_bridge.py``): the platform
    that ``JAX_PLATFORMS`` names does not exist or cannot start here (no libtpu, no CUDA plugin); "" otherwise."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames or not frames[-1].filename.replace("\\", "/").endswith("jax/_src/xla_bridge.py"):
        return ""
    import os

    first = (str(e).strip().splitlines() or [""])[0][:300]
    platforms = os.environ.get("JAX_PLATFORMS", "")
    setting = (f"JAX_PLATFORMS is {platforms!r}: name platforms this machine has (cpu, or a GPU or TPU with its JAX "
               f"plugin installed), or unset it" if platforms else "check the JAX installation and its plugins")
    return f"JAX cannot start its backend ({type(e).__name__}{': ' + first if first else ''}); {setting}."


def _memory_limited() -> bool:
    """Whether a soft limit bounds this process's data or address space."""
    try:
        import resource
    except ImportError:  # not POSIX: no such limits
        return False
    for name in ("RLIMIT_DATA", "RLIMIT_AS"):
        which = getattr(resource, name, None)
        if which is not None and resource.getrlimit(which)[0] != resource.RLIM_INFINITY:
            return True
    return False


def _print_traceback() -> None:
    """The traceback of ``--debug``, made visible: exception messages may quote a hostile file."""
    sys.stderr.write(visible(traceback.format_exc(), newlines=True))


def fail_after_result(exc: errors.JaxportError) -> NoReturn:
    """Exit with ``exc``'s code after a command printed its own result (verify, diff, check): one line on stderr,
    and no JSON error object, so that stdout holds exactly one JSON document."""
    click.echo(f"error[{exc.kind}]: {one_line(str(exc))}", err=True)
    sys.exit(exit_code(exc))


def one_line(message: str, keep_newlines: bool = False) -> str:
    """``message`` on one line, control and invisible characters escaped (``jaxport._text.visible``): error text
    may quote a hostile file, and must neither break the one-line contract nor drive the terminal.
    ``keep_newlines`` keeps the line breaks of messages about the user's own code (their traceback frames, every
    offending custom call), each line escaped on its own."""
    if not keep_newlines:
        message = message.replace("\n", " ")
    return visible(message, newlines=keep_newlines)


#: Kinds whose messages describe the user's own code, shown with their line breaks. A policy error describes the
#: user's code only where the program was just lowered from it (export, import); elsewhere it describes an
#: artifact, which may be hostile, and stays on one line.
_MULTILINE_KINDS = ("entrypoint", "export", "policy")
_LOWERING_COMMANDS = ("export", "import")


def _keeps_newlines(kind: str) -> bool:
    if kind not in _MULTILINE_KINDS:
        return False
    ctx = click.get_current_context(silent=True)
    return kind != "policy" or (ctx is not None and ctx.info_name in _LOWERING_COMMANDS)


@contextmanager
def usage_errors() -> Iterator[None]:
    """A library ``UsageError`` raised while a command reads its command line (builds its request, before the body
    runs) reported as a command-line mistake: the ``error[usage]:`` line that names the command's help, exit 2
    (:func:`report_usage_error`)."""
    try:
        yield
    except errors.UsageError as e:
        raise click.UsageError(str(e)) from None


def report_usage_error(e: click.ClickException, as_json: bool, argv: list[str] | None = None) -> NoReturn:
    """A command-line mistake (unknown option, bad value, missing argument) as one ``error[usage]:`` line naming the
    help to read, exit 2 (click's own code for a usage error). ``argv``, the command line, lets an extra argument
    that follows a repeatable option's value be named for what it is (``--inputs a.npy b.npy``)."""
    message = _repeat_hint(e, argv or []) or e.format_message()
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        command = " ".join(["jaxport", *ctx.command_path.split()[1:]])
        message = f"{message.rstrip('.')}{'' if message.endswith('?') else '.'} See '{command} --help'."
    _report("usage", message, e.exit_code, as_json)
    sys.exit(e.exit_code)


def _repeat_hint(e: click.ClickException, argv: list[str]) -> str | None:
    """For click's "Got unexpected extra argument(s)" where the first extra value follows a value of a repeatable
    option (``--inputs a.npy b.npy``, ``--range x=0:1 y=0:2``): that the option takes one value each time, and how
    to repeat it; None for any other error."""
    import re

    found = re.match(r"Got unexpected extra arguments? \((.*)\)$", e.format_message())
    ctx = getattr(e, "ctx", None)
    if found is None or ctx is None:
        return None
    extra = found.group(1).split(" ")
    repeatable = {name: o for o in ctx.command.params if isinstance(o, click.Option) and o.multiple
                  for name in o.opts}
    for i in range(len(argv) - 1, 0, -1):
        if argv[i] != extra[0]:
            continue
        j = i - 1
        while j > 0 and not argv[j].startswith("-"):
            j -= 1
        option = argv[j].partition("=")[0]
        inline = "=" in argv[j]  # --inputs=a.npy b.npy
        if option not in repeatable or i != j + (1 if inline else 2):
            continue
        values = [argv[j].partition("=")[2]] if "=" in argv[j] else [argv[j + 1]]
        values += extra
        shown = " ".join(f"{option} {v}" for v in values[:3]) + (" ..." if len(values) > 3 else "")
        return (f"{option} takes one value each time, and {' '.join(extra)} {'was' if len(extra) == 1 else 'were'} "
                f"read as {'an extra argument' if len(extra) == 1 else 'extra arguments'}: repeat the option for "
                f"each value ({shown})")
    return None


def _report(kind: str, message: str, code: int, as_json: bool) -> None:
    message = one_line(message, keep_newlines=_keeps_newlines(kind))
    if as_json:
        try:
            click.echo(json.dumps({"error": {"kind": kind, "message": message, "exit_code": code}}, indent=2))
        except OSError:  # a stdout that cannot be written: the line on stderr still says what went wrong
            pass
    click.echo(f"error[{kind}]: {message}", err=True)
