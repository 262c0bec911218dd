"""How to import a module: :class:`ImportRequest`, the options of ``jaxport import`` and of
``jaxport.import_stablehlo``'s keywords in one frozen record (those of every command that writes a program,
``export.request.WriteOptions``, and import's own), which the command line's option group
(``jaxport_cli.requests.IMPORT_REQUEST``) builds and the importer reads. No JAX at import.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from ..export.request import WriteOptions
from .signature import is_identifier

__all__ = ["ImportRequest"]


@dataclass(frozen=True, kw_only=True)
class ImportRequest(WriteOptions):
    """The options of ``jaxport import``: those of ``WriteOptions``, and ``calling_convention``, the JAX calling
    convention version to record (default: the one this JAX's ``jax.export`` writes), and ``function``, the
    function's name in the artifact (default: the module file's name; for a JAX serialization, ``name`` when it is
    an identifier, else the spec's ``name``, else the file's)."""

    calling_convention: int | None = None
    function: str | None = None

    def function_name(self, default: str) -> str:
        """``function``, else ``default``: an identifier, as every function's name in an artifact."""
        fname = self.function or default
        if not is_identifier(fname):
            raise UsageError(f"--function {fname!r}: a function name must be an identifier (letters, digits, '_').")
        return fname
