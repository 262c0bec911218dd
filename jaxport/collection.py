"""Python's garbage collector while a command starts: paused during the imports, resumed before the work.

``import jax`` and a model's module allocate several hundred thousand objects and free almost none; the collector,
run every 2000 allocations, walks them again and again for nothing (40-60 ms of a 0.7 s ``jaxport export`` of the
example MLP on the 2-core machine, ``benchmarks/bench_export.py``). The command line pauses it for the commands that
import JAX and then do bounded work (``jaxport_cli.main.LEAN_COMMANDS``), and the command resumes it
with :func:`resume` where its work starts (the export pipeline: after the entry points are loaded, before tracing
and binding), freezing what the imports made (``gc.freeze``: the collector never walks it again), so the work runs
with the collector on, and cyclic garbage made while tracing or loading weights is collected as usual.

The Python API never pauses it (the caller's process is the caller's): :func:`resume` does nothing unless
:func:`pause` ran in this process.
"""

from __future__ import annotations

import gc

_paused = False


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
