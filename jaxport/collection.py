"""Python's garbage collector while a command starts and ends: paused during jaxport's and JAX's imports, on for the
user's code, and the final collection skipped only where no user code ran.

``import jax`` allocates several hundred thousand objects and frees almost none; the collector, run every 2000
allocations, walks them again and again for nothing (40-60 ms of a 0.7 s ``jaxport export`` of the example MLP on
the 2-core machine, ``benchmarks/bench_export.py``). The command line pauses it for the commands that import JAX and
then do bounded work (``jaxport_cli.main.LEAN_COMMANDS``). Where the user's module is about to be imported
(:func:`user_code`: the entry point's loader), JAX is imported first, still paused, and then the collector is
resumed (:func:`resume`) with what exists frozen (``gc.freeze``: jaxport's and JAX's objects, which the collector
never walks again). So the user's module imports, and its function is traced, with the collector on, as in plain
Python: the garbage a module makes while importing is collected as it is made, and none of it is frozen.

At exit (:func:`freeze_for_exit`), a process that ran no user code freezes every object, so that the interpreter's
final collection does not walk what JAX made (about half a second after ``import jax``). A process that imported
user code does not: the cyclic garbage of that code is finalized at exit as in plain Python (a file left open in
a reference cycle is flushed and closed).

The Python API never pauses it (the caller's process is the caller's): :func:`resume` does nothing unless
:func:`pause` ran in this process, and :func:`user_code` only remembers that user code was imported.
"""

from __future__ import annotations

import gc
import sys

_paused = False
_user_code = False


def pause() -> None:
    """Stop collecting until :func:`resume` turns the collector back on. The command line calls it for a collector
    it found on and turned off itself before its first import (importing this module imports jaxport)."""
    global _paused
    gc.disable()
    _paused = True


def resume() -> None:
    """Freeze what exists and collect again, if :func:`pause` stopped the collector; otherwise do nothing."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def user_code() -> None:
    """The user's module is about to be imported (an entry point, a bound ``model.py:NAME``): if the collector is
    paused, import JAX (which that module imports, and tracing needs) while it still is, then :func:`resume` it, so
    that only jaxport's and JAX's objects are frozen; and remember that this process runs user code
    (:func:`freeze_for_exit`)."""
    global _user_code
    _user_code = True
    if _paused:
        import jax  # noqa: F401 - a setting JAX refuses as it starts is refused here, as it would be in the module

        resume()


def freeze_for_exit() -> None:
    """At the end of a command: freeze every object, so that the interpreter's final collection does not walk them
    all, unless the process imported user code (:func:`user_code`: its cyclic garbage is finalized at exit, as
    plain Python does) or used IREE (whose bindings report objects left uncollected as leaks)."""
    if not _user_code and not any(name.startswith("iree.") for name in sys.modules):
        gc.freeze()
