"""Foreign StableHLO -> artifact (``jaxport import``): see ``specs/IMPORT.md``.

``import_stablehlo`` imports a module into an artifact (by keywords; ``import_by`` by an ``ImportRequest``);
``module_function`` turns an imported module back into a JAX-callable function with the signature a manifest records
for it.
"""

from __future__ import annotations

from .build import import_by, import_stablehlo, module_function

__all__ = ["import_by", "import_stablehlo", "module_function"]
