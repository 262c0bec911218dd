"""Where an artifact is written: the one rule of every command that writes one (export, import, rebind, upgrade).

An output path that names a directory means a file in it: ``<name>.jaxport`` for export and import, the input
artifact's file name for rebind and upgrade. The manifest, when it is written too, sits beside the artifact as
``<artifact>.manifest.json``. Neither is ever a file the command read (``check_output``), and a command that writes
a new artifact from an old one refuses the old one as its output, through links too, with a message of its own:
the old artifact stays, to diff the new one against or to go back to.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .._fsio import atomic_write, check_output
from ..errors import OutputError

#: The manifest written beside an artifact: ``<artifact>`` followed by this.
SIDECAR_SUFFIX = ".manifest.json"

#: The commands that write a new artifact from an old one, and what the old one is then being.
_FROM_ARTIFACT = {"rebind": "rebound", "upgrade": "upgraded"}


@dataclass(frozen=True)
class ArtifactOutput:
    """The files an artifact is written to: ``path``, and its manifest ``sidecar`` (None when not written)."""

    path: Path
    sidecar: Path | None

    def check(self, inputs: Iterable[str | Path]) -> None:
        """Refuse (``check_output``, an ``OutputError``) either path where jaxport must not write, or that is one of
        ``inputs``."""
        inputs = list(inputs)
        for target in (self.path, self.sidecar):
            if target is not None:
                check_output(target, inputs)

    def write_sidecar(self, raw: bytes, inputs: Iterable[str | Path]) -> None:
        """Write the manifest's bytes ``raw`` to the sidecar, if there is one: atomically, not synced to the disk (it
        restates the artifact's manifest for review)."""
        if self.sidecar is not None:
            atomic_write(self.sidecar, lambda f: f.write(raw), inputs=inputs, durable=False)


def artifact_output(output: str | Path, name: str, *, manifest: bool, source: Path | None = None,
                    command: str = "") -> ArtifactOutput:
    """The artifact's paths for ``output`` (a file, or a directory to write ``name`` in), with the sidecar when
    ``manifest``. ``source``: the artifact ``command`` (``rebind``, ``upgrade``) writes a new one from, refused as
    the output (an ``OutputError``). Only that is checked here; ``ArtifactOutput.check`` checks the rest."""
    out = Path(output)
    if out.is_dir():
        out = out / name
    if source is not None:
        try:
            same = out.exists() and os.path.samefile(out, source)
        except OSError:
            same = False
        if same:
            raise OutputError(f"{out}: is the artifact being {_FROM_ARTIFACT[command]}; {command} writes a new "
                              f"artifact and never replaces its input. Choose another output path (and rename it over "
                              f"the old artifact afterwards if you mean to replace it).")
    return ArtifactOutput(out, out.with_name(out.name + SIDECAR_SUFFIX) if manifest else None)
