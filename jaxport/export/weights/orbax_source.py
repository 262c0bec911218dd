"""A bind source that is a directory: an orbax checkpoint, what training jobs write (``jaxport[orbax]``).

Three layouts are told apart from the files orbax writes, before orbax is imported:

- an *item* directory, the pytree one ``StandardCheckpointer``/``PyTreeCheckpointer.save(path, tree)`` writes (its
  ``_METADATA``, or an OCDBT ``manifest.ocdbt``): restored;
- a *step* directory of a ``CheckpointManager`` (``ckpt/5``: a ``_CHECKPOINT_METADATA`` beside the items it saved,
  ``default/`` or named ones): its single item is restored; several are refused, naming them;
- a manager's *root* (``ckpt``: numbered step directories): its latest step (the highest number), as
  ``manager.restore(manager.latest_step())`` reads it; ``ckpt/100`` pins one step, which ``verify`` needs to
  reproduce the export once the job has written newer ones.

The item is restored with orbax's ``PyTreeCheckpointHandler`` from its own metadata, without the original target
structure: every array leaf as a numpy array (``RestoreArgs(restore_type=np.ndarray)``, so no device or sharding
is needed), every scalar leaf as the Python number it was saved from (baked into the program, as when the live
value is bound). Custom pytree nodes (a flax ``TrainState``) come back as nested dicts keyed by their attribute
names, which name the tensors as the live value's key paths do. orbax reads the checkpoint's JSON metadata and its
tensorstore data; nothing is unpickled and no code named by the checkpoint is imported (the manager's
``_CHECKPOINT_METADATA``, which names handler classes, is never handed to orbax).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..._machine import physical_memory
from ...errors import PlatformError, SpecError

#: The files that make a directory an orbax pytree item.
ITEM_FILES = ("_METADATA", "manifest.ocdbt")
#: The file orbax writes in a step directory (a ``CheckpointManager``'s ``ckpt/5``, or a composite checkpoint).
STEP_FILE = "_CHECKPOINT_METADATA"
#: What a bind source may be, for a directory that is none of it.
SOURCES = ("a bind source is an .npz, .safetensors or .npy file, an orbax checkpoint directory (what "
           "StandardCheckpointer, PyTreeCheckpointer or one step of a CheckpointManager writes), or a Python "
           "attribute 'model.py:NAME'")


def _is_item(path: Path) -> bool:
    return any((path / f).is_file() for f in ITEM_FILES)


#: A step directory's name: a step number as ``CheckpointManager`` writes it (``str(step)``), in ASCII digits with no
#: leading zero. ``00``, ``-1``, ``1e3``, ``+5``, ``٣`` (an Arabic-Indic three, a digit to ``str.isdigit``) and a
#: number of more digits than a step has are not steps: ``int()`` reads several of them as a step whose canonical
#: name (``0``) is another directory, or none.
_STEP_NAME = re.compile(r"0|[1-9][0-9]{0,18}")


def _steps(path: Path) -> list[int]:
    """The numbered step directories of a ``CheckpointManager`` root (only names that are canonical step numbers,
    :data:`_STEP_NAME`), in order."""
    found = []
    for child in path.iterdir():
        if _STEP_NAME.fullmatch(child.name) and child.is_dir() and ((child / STEP_FILE).is_file() or _is_item(child)):
            found.append(int(child.name))
    return sorted(found)


def item_directory(path: Path, shown: str, where: str) -> Path | None:
    """The orbax item directory the bind source directory ``path`` (given as ``shown``) holds (a manager root's:
    its latest step's), refusing a step of several items; None when ``path`` is no orbax checkpoint."""
    if _is_item(path):
        return path
    if (path / STEP_FILE).is_file():
        items = sorted(c.name for c in path.iterdir() if c.is_dir() and _is_item(c))
        if len(items) == 1:
            return path / items[0]
        if not items:
            raise SpecError(f"{where}: bound directory {shown} is an orbax checkpoint step, but holds no pytree item "
                            f"(no subdirectory with {ITEM_FILES[0]}); bind the directory of the item that holds "
                            f"the weights.")
        raise SpecError(f"{where}: bound directory {shown} is an orbax checkpoint step of "
                        f"{len(items)} items ({', '.join(items)}); bind the one that holds the weights, e.g. "
                        f"{shown.rstrip('/')}/{items[0]}.")
    steps = _steps(path)
    if steps:  # a CheckpointManager's root: its latest step, as manager.restore(manager.latest_step()) reads
        return item_directory(path / str(steps[-1]), f"{shown.rstrip('/')}/{steps[-1]}", where)
    return None


def load_directory(path: Path, shown: str, where: str) -> Any:
    """The value a bind source directory holds (see the module docstring); ``shown`` is the source as given."""
    item = item_directory(path, shown, where)
    if item is None:
        raise SpecError(f"{where}: bound directory {shown} is not an orbax checkpoint (it has no {ITEM_FILES[0]} or "
                        f"{STEP_FILE}); {SOURCES}.")
    try:
        import orbax.checkpoint as ocp
        from etils import epath
    except ImportError:  # a missing extra is exit 10, as every one is
        raise PlatformError(f"{where}: bound directory {shown} looks like an orbax checkpoint, which needs "
                            f"orbax-checkpoint to read: pip install 'jaxport[orbax]' (or convert it to .safetensors "
                            f"or .npz).") from None
    return _restore(ocp, epath.Path(item.resolve()), shown, where)


def _restore(ocp: Any, item: Any, shown: str, where: str) -> Any:
    """The pytree of the orbax item directory ``item``: arrays as numpy arrays, scalars as Python numbers."""
    import jax
    import numpy as np

    handler = ocp.PyTreeCheckpointHandler()
    try:
        metadata = handler.metadata(item)
        tree = getattr(metadata, "tree", metadata)
        leaves = jax.tree_util.tree_leaves(tree)
        total = sum(_nbytes(m) for m in leaves)
        memory = physical_memory()
        if memory and total > memory:
            raise SpecError(f"{where}: bound directory {shown}: the checkpoint's arrays take {total} bytes, more than "
                            f"this machine's memory ({memory} bytes).")
        args = jax.tree_util.tree_map(
            lambda m: ocp.RestoreArgs() if _is_scalar(m) else ocp.RestoreArgs(restore_type=np.ndarray), tree)
        value = handler.restore(item, args=ocp.args.PyTreeRestore(restore_args=args))
    except SpecError:
        raise
    except Exception as e:  # noqa: BLE001 - orbax and tensorstore raise many kinds on a damaged checkpoint
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise SpecError(f"{where}: cannot read the orbax checkpoint {shown}: {type(e).__name__}: {first}") from None
    finally:
        close = getattr(handler, "close", None)
        if close is not None:
            close()
    return jax.tree_util.tree_map(_plain, value, tree)


def _nbytes(meta: Any) -> int:
    """The bytes an array leaf's metadata declares (0 for a scalar or an unknown leaf)."""
    import numpy as np

    shape, dtype = getattr(meta, "shape", None), getattr(meta, "dtype", None)
    if shape is None or dtype is None:
        return 0
    try:  # Python integers: a hostile shape's product must not wrap around as an int64 would
        return math.prod(abs(int(d)) for d in shape) * np.dtype(dtype).itemsize
    except (TypeError, ValueError):
        return 0


def _plain(value: Any, meta: Any) -> Any:
    """A restored leaf: a saved Python scalar as that number again (baked, as the live value's would be); an array
    as a numpy array."""
    import numpy as np

    if _is_scalar(meta):
        return np.asarray(value).item() if hasattr(value, "dtype") else value
    return np.asarray(value)


def _is_scalar(meta: Any) -> bool:
    """Whether a leaf's metadata is orbax's for a saved Python number."""
    return type(meta).__name__ == "ScalarMetadata"
