"""The lowered program, read without running it: ``module_scan`` walks a StableHLO module (custom calls, constants,
shape assertions, locations, the program limits), ``jaxser`` reads JAX's ``Exported`` serialization without JAX
(its flatbuffer through ``flatbuf``), ``rules`` names the operations a portable program may not hold, and ``checks``
holds jaxport's own checks of a program (custom-call targets, effects), run at export, at import and before anything
is compiled.

Part of the foundation layer (``scripts/check_layers.py``): every layer reads programs, and JAX's private reader
(``jaxprivate.exported``) builds an ``Exported`` from ``jaxser``'s reading. The package's ``__init__`` imports nothing,
so that a checking child (``isolate``) imports only the modules it uses.
"""
