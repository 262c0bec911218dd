"""The ``jaxport`` command line. Commands load lazily so that ``jaxport --help`` does not import JAX, and this module
imports neither click nor jaxport: the click group is in ``group``, and ``inspect``, the everyday command, has a
fast path (``_inspect_fast``) that needs neither click nor rich."""

from __future__ import annotations

# The C module under ``signal``: the same functions and constants, without the enums ``signal`` builds on import
# (1.4 ms of every command's start, a fortieth of ``jaxport inspect``).
import _signal as signal
import atexit
import gc
import os
import sys

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact
if TYPE_CHECKING:
    from typing import Any

#: The commands that import JAX, do bounded work and end: jaxport's and JAX's imports run without Python's garbage
#: collector, which is back on, what those imports made frozen, before the user's module is imported
#: (``jaxport.collection``).
LEAN_COMMANDS = frozenset({"export"})


def __getattr__(name: str) -> Any:
    """``cli`` (the click group) and ``LazyGroup`` live in ``group``, imported with click on first use."""
    if name in ("cli", "LazyGroup"):
        from . import group

        return getattr(group, name)
    raise AttributeError(f"module 'jaxport_cli.main' has no attribute {name!r}")


def _inspect_fast(argv: list[str]) -> bool:
    """Run ``jaxport inspect [--json] [--function NAME] [--debug] ARTIFACT`` without importing click (and rich,
    when its tables fit: ``render.Document``), the everyday command at a fraction of the start-up; True if it did.
    Any other form, and any error, is left to the click command, which parses and reports as every command does
    (an error costs one more opening of the artifact, nothing else)."""
    if argv[:1] != ["inspect"] or "_JAXPORT_COMPLETE" in os.environ:  # shell completion is click's
        return False
    artifact, as_json, function = None, False, None
    args = argv[1:]
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--json", "--debug"):
            as_json = as_json or a == "--json"
        elif a == "--function" and function is None and i + 1 < len(args) and not args[i + 1].startswith("-"):
            function = args[i + 1]
            i += 1
        elif a.startswith("--function=") and function is None:
            function = a.partition("=")[2]
        elif not a.startswith("-") and artifact is None:
            artifact = a
        else:
            return False
        i += 1
    if not artifact or function == "":
        return False
    collecting = gc.isenabled()
    gc.disable()  # the imports below allocate much and free nothing: collecting during them is wasted
    try:
        from .inspect_view import output

        text = output(artifact, as_json, function)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception:  # noqa: BLE001 - the click command reports it
        return False
    finally:
        if collecting:
            gc.enable()
    if text is None:
        return False
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        sys.exit(0)
    return True


def _early_stop(signum: int, frame: object) -> None:
    """Ctrl-C or SIGTERM before ``jaxport.interrupts`` is loaded (importing the package takes a moment): nothing
    has been written or started yet, so the process just ends, with the line and code ``interrupts.stop`` gives."""
    name = "SIGINT (Ctrl-C)" if signum == signal.SIGINT else "SIGTERM"
    os.write(2, f"error[interrupted]: stopped by {name}; every output is as it was or complete, and no temporary "
                f"file is left\n".encode())
    os._exit(128 + signum)


def _ignore_signals() -> None:
    """The last ``atexit`` function (registered first): the command is over, the threads the user's code started
    have ended and every other exit function has run. A signal from here on is ignored: Python's teardown, which
    follows, restores the default handlers (a death by the signal) before it ends. Until here ``jaxport.interrupts``
    ends the process on a signal (130 or 143, one line), user code running or not."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _early_stop)
    atexit.register(_ignore_signals)  # exit functions run last registered first: this one after all the others
    lean = sys.argv[1:2] != [] and sys.argv[1] in LEAN_COMMANDS
    paused = lean and gc.isenabled()
    if paused:
        gc.disable()  # from the first import on; turned back on before the user's module is imported
    from . import environment

    environment.reopen_closed_streams()  # before anything opens a file: none may take descriptor 0, 1 or 2
    from jaxport import collection, interrupts

    if paused:
        collection.pause()

    interrupts.install()  # Ctrl-C and SIGTERM end every moment of a command the same way
    environment.prepare()
    try:
        if not _inspect_fast(sys.argv[1:]):
            from .group import cli

            cli(prog_name="jaxport")
    except OSError as e:  # the inspect fast path writes stdout itself
        environment.exit_if_stdout_failed(e)
        raise
    except SystemExit as e:
        environment.exit_after_command(e.code)  # a stdout that could not take what was printed: exit 11
        raise
    finally:
        collection.freeze_for_exit()
