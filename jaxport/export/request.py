"""How to write an artifact, said once: :class:`ExportRequest`, the options of ``jaxport export`` and of
``jaxport.export``'s keywords, over :class:`WriteOptions`, those every command that writes a program takes (``jaxport
import``'s ``ImportRequest`` holds them too).

The command line's option group (``jaxport_cli.requests.EXPORT_REQUEST``), the facade (``jaxport.export``, which lists
this record's fields as its keywords and builds it once: :meth:`WriteOptions.given`) and the pipeline
(``export.pipeline.export``) pass one request, so that a new export option is a field here, a keyword of the facade
(``tests/test_facade.py`` holds the two alike), an option in that group, and the code that uses it. The rules of the
options sit here, as methods the pipeline calls where it needs their answer (a platform's name is checked after the
spec is read, the root when the spec's directory is known, the target JAX when the pipeline writes for it), so that
the errors come in the order they always did. No JAX at import.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from .._api_types import check_fields, record_of
from ..errors import UsageError
from ..spec import ShapeSpec, check_platform
from .entry.paths import IN_MEMORY

if TYPE_CHECKING:
    from .writing.target import Target

__all__ = ["IDENTIFIER", "ExportRequest", "WriteOptions"]

#: A Python identifier in ASCII: a bound parameter's name, and a function's name in an artifact (``--name`` names
#: the function only when it is one).
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

R = TypeVar("R", bound="WriteOptions")


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """What every command that writes a program into an artifact takes (``export``, ``import``).

    ``name``: the artifact's name (``metadata.name``; default: the spec's, else the function's). ``version``:
    ``metadata.version`` (default: the spec's). ``platforms``: the platforms to lower for (default: the spec's).
    ``allow_custom_calls``: custom-call targets JAX does not guarantee stable that the program may call, beyond the
    spec's. ``strip_locations``: drop the program's source locations. ``write_manifest``: ``save``'s default for
    writing the ``<artifact>.manifest.json`` sidecar. ``for_jax``: write the artifact for that older JAX
    (``export.writing.target``). A value of a type the field does not take is a ``TypeError`` (also a ``UsageError``)
    naming the field, as the public functions' are.
    """

    name: str | None = None
    version: str | None = None
    platforms: list[str] | None = None
    allow_custom_calls: list[str] | tuple[str, ...] = ()
    strip_locations: bool = False
    write_manifest: bool = True
    for_jax: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        set_ = object.__setattr__  # frozen: normalised once, here
        set_(self, "platforms", list(self.platforms) if self.platforms is not None else None)
        set_(self, "allow_custom_calls", tuple(self.allow_custom_calls))

    @classmethod
    def given(cls: type[R], request: R | None, fields: Mapping[str, Any]) -> R:
        """The request a public function builds once from ``request=`` (default: every option's default) and the
        request's fields it lists as keywords, ``fields``: each that is not None replaces the request's
        (``_api_types.record_of``)."""
        return record_of(cls, request, fields, "request")

    def chosen_platforms(self, default: list[str] | None) -> list[str] | None:
        """The platforms to lower for: ``platforms`` (each a known platform's name, lowercased), else ``default``."""
        return [check_platform(p, "--platform") for p in self.platforms] if self.platforms else default

    def allowed(self, spec: ShapeSpec) -> list[str]:
        """The custom-call targets the program may call: the spec's and ``allow_custom_calls``, sorted."""
        return sorted(set(spec.allow_custom_calls) | set(self.allow_custom_calls))

    def written_for(self) -> Target | None:
        """The older JAX to write the artifact for (``for_jax``, checked against the releases jaxport supports)."""
        if self.for_jax is None:
            return None
        from .writing.target import target  # the older JAX's rules (its window, its StableHLO) only when one is named

        return target(self.for_jax)


@dataclass(frozen=True, kw_only=True)
class ExportRequest(WriteOptions):
    """The options of ``jaxport export``: those of :class:`WriteOptions`, and:

    ``bind``: ``{parameter name: value}``, a value being a source string (a file relative to the current directory,
    or ``model.py:NAME``) or an in-memory pytree of arrays, whose source the manifest records as ``<in-memory>``; the
    spec need not list a bound parameter. In a single-function export, ``name`` also names the function when it is
    an identifier. ``vjp_order`` (default: the spec's) stores that many orders of derivatives with each function.
    ``root`` (default: the spec file's directory; the current directory for a spec given as text, a dict or a
    ``Spec``) is the directory the manifest records paths relative to.
    """

    bind: Mapping[str, Any] | None = None
    vjp_order: int | None = None
    root: str | Path | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bind is not None:
            object.__setattr__(self, "bind", MappingProxyType(dict(self.bind)))  # read-only, as the rest

    def root_dir(self, spec_dir: Path) -> Path:
        """``root`` (an existing directory), else the spec file's directory."""
        if self.root is None:
            return spec_dir
        if not Path(self.root).is_dir():
            raise UsageError(f"--root {self.root}: not a directory; give the directory the artifact's recorded paths "
                             f"(entry point, spec, bound sources) are to be relative to, or leave --root out to use "
                             f"the spec's directory.")
        return Path(self.root)

    def bind_sources(self) -> tuple[dict[str, str], dict[str, Any]]:
        """Each bind's source (a path or ``model.py:NAME`` as given; ``<in-memory>:NAME`` for a value), and the
        values given in memory by name."""
        sources: dict[str, str] = {}
        values: dict[str, Any] = {}
        for key, value in (self.bind or {}).items():
            if not isinstance(key, str) or not IDENTIFIER.match(key):
                raise UsageError(f"--bind {key}: not a parameter name; a bind names the function's parameter (a "
                                 f"Python identifier) it gives the value of, e.g. params=weights.npz (bind={{'params': "
                                 f"tree}}).")
            if isinstance(value, (str, os.PathLike)):
                sources[key] = os.fspath(value)
            else:
                sources[key], values[key] = f"{IN_MEMORY}:{key}", value
        return sources, values
