"""Executables compiled without the GPU, compiled again on it with autotuning and swapped in (``warmup --retune``,
``serve --retune``, :func:`retune`).

A GPU executable compiled deviceless (``warmup --target cuda-*`` on a machine without the GPU) starts a process on the
GPU with nothing to compile, but XLA tuned nothing in it: its matrix products run with default tilings. Where the
user opts in, each signature a loaded function runs from such an executable is compiled again here, where XLA
autotunes it, on the calling thread or in the background, and the new executable replaces the old one in the live
function (``Loaded.use``: a call already running finishes with the one it started with) and, in the cache directory,
its record (the same file name: the GPU's identity), so that the next process starts with the autotuned one. A
record that is not a deviceless GPU build (a CPU's, a TPU's, one autotuned already) is left as it is. Seen only on a
machine without a GPU, where nothing is deviceless in a running process: the swap on a GPU is designed, not seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...jaxprivate.compiler import serialized_executable
from ..backend import ShapeKey
from ..executables import matching, read_record, shipped, write_record


@dataclass(frozen=True)
class Retuned:
    """One signature compiled again here and swapped in."""

    key: ShapeKey
    seconds: float
    build: str  # the new executable's: "autotuned" on a GPU (``_machine.GpuFacts.build``)
    record: str | None  # the record written in the cache directory (its file name), or None


@dataclass
class Retuning:
    """A retune under way or done: what was swapped in, and lines about what was not."""

    keys: list[ShapeKey]
    retuned: list[Retuned] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)


def _program(loaded: Any) -> str | None:
    member = loaded.model.members.get(loaded.function_record.payload)
    return member.sha256 if member is not None else None


def deviceless_signatures(loaded: Any, directory: Path | None) -> list[ShapeKey]:
    """The signatures ``loaded`` has compiled from a shipped executable that was built for a GPU without one (its
    record in ``directory`` says ``deviceless``)."""
    program = _program(loaded)
    found = []
    for key, compilation in zip(loaded.compiled_signatures, loaded.compilations):
        if not compilation.shipped:
            continue
        offer = shipped(directory, program, key)
        for path in offer.candidates if offer is not None else []:
            record, _ = read_record(path, blob=False)
            if record is None or record.facts.gpu is None:
                continue
            if record.facts.gpu.build == "deviceless" and matching(record.header, program or "", key):
                found.append(key)
                break
    return found


def retune(loaded: Any, directory: Path | None, *, background: bool = False,
           on_swap: Callable[[ShapeKey], None] | None = None) -> Retuning:
    """Compile again here each signature ``loaded`` runs from a deviceless GPU executable shipped in ``directory``
    (:func:`deviceless_signatures`), swap each into ``loaded`` as it is done (``on_swap(key)`` then: a server
    rebuilds its calls), and write its record over the deviceless one in ``directory``. In a daemon thread with
    ``background``, else before returning; a signature that fails to compile is a note, and the old executable
    stays."""
    retuning = Retuning(deviceless_signatures(loaded, directory))
    program = _program(loaded)

    def work() -> None:
        try:
            for key in retuning.keys:
                start = time.perf_counter()
                try:
                    compiled, facts = loaded.backend.recompile(key)
                except Exception as e:  # noqa: BLE001 - XLA's refusal: the deviceless executable keeps running
                    retuning.notes.append(f"compiling {key} again here failed ({type(e).__name__}: "
                                          f"{' '.join(str(e).split())[:300]}); the executable shipped stays.")
                    continue
                seconds = time.perf_counter() - start
                loaded.use(key, compiled)
                if on_swap is not None:
                    on_swap(key)
                build = facts.gpu.build if facts is not None and facts.gpu is not None else "unknown"
                name = None
                if directory is not None and program is not None and facts is not None and build == "autotuned":
                    try:
                        path = write_record(directory, program, key, facts, serialized_executable(compiled),
                                            {"target": "retuned here", "function": loaded.function,
                                             "compile_s": seconds})
                        name = path.name
                    except Exception as e:  # noqa: BLE001 - a cache that cannot be written: the swap stands
                        retuning.notes.append(f"the autotuned executable of {key} could not be stored ({e}).")
                retuning.retuned.append(Retuned(key, seconds, build, name))
        finally:
            retuning.done.set()

    if background:
        threading.Thread(target=work, name="jaxport-retune", daemon=True).start()
    else:
        work()
    return retuning
