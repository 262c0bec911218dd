"""The environment jaxport traces and serializes programs in, so that their bytes do not depend on the caller.

JAX records a source location for every operation from the Python stack at trace time. Export (``lower``), the
VJP programs serialized with it (``gradients``) and import (``jaxport.importer``) all run JAX under the same
settings: a fresh thread stack, jaxport's own frames excluded, paths canonicalized relative to the model's root.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...jaxprivate.runtime import register_frame_exclusion

#: The ``export`` package's directory (this room's parent): frames in it are jaxport's, never the user's.
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_EXCLUDED = False


def user_frames(exc: BaseException) -> str:
    """The last frames of ``exc``'s traceback that are the user's code (not jaxport's, JAX's or Python's), as text
    starting with a newline; empty when there are none."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(_HERE) and f"{os.sep}jax{os.sep}" not in f.filename
              and f"{os.sep}jaxlib{os.sep}" not in f.filename and "<frozen" not in f.filename]
    text = "".join(traceback.format_list(frames[-8:]))
    return ("\n" + text.rstrip()) if text else ""


def location_regex(root: Path) -> str:
    """Regex for ``jax_hlo_source_file_canonicalization_regex``: paths under ``root`` become relative to it,
    paths inside site-packages relative to it, and any other absolute path its base name."""
    prefix = re.escape(str(root).rstrip(os.sep) + os.sep)
    return rf"^(?:{prefix}|.*[/\\](?:site|dist)-packages[/\\]|.*[/\\])"


def exclude_own_frames() -> None:
    """Make JAX skip jaxport's frames when it picks the user frame of an op's location (once per process)."""
    global _EXCLUDED
    if not _EXCLUDED:
        register_frame_exclusion(_HERE + os.sep)
        _EXCLUDED = True


def on_fresh_stack(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn`` in a new thread, so the Python stack above the user's function is the same whoever calls
    jaxport (a script, the CLI, a test runner): JAX records source locations from that stack."""
    result: Any = None
    error: BaseException | None = None

    def target() -> None:
        nonlocal result, error
        try:
            result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            error = e

    t = threading.Thread(target=target, name="jaxport-export")
    t.start()
    t.join()
    if error is not None:
        raise error
    return result


def x64_enabled() -> bool:
    """Whether ``jax_enable_x64`` is on in this process."""
    import jax

    return bool(getattr(jax.config, "jax_enable_x64"))  # noqa: B009 - the flag is not in JAX's type stubs


@contextlib.contextmanager
def jax_config(**updates: Any) -> Iterator[None]:
    """Set JAX config options for the duration of the block, restoring the previous values afterwards."""
    import jax

    saved = {k: getattr(jax.config, k) for k in updates}
    try:
        for k, v in updates.items():
            jax.config.update(k, v)
        yield
    finally:
        for k, v in saved.items():
            jax.config.update(k, v)
