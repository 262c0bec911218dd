"""JAX's private surface: every name of ``jax._src`` and of jaxlib's internals that jaxport reads, calls or replaces,
kept in this one package, and nowhere else (``tests/foundation/test_jax_private.py`` refuses an import of one outside
it).

JAX has no public API for what these modules do; each function says which one is missing. By concept:

- ``stable``: the custom-call targets JAX guarantees stable (its export's module constant, with the reviewed copy
  and the releases that added targets), and the host callbacks jaxlib registers;
- ``mlir``: an MLIR context with JAX's dialects, jaxlib's MLIR helpers without importing ``jax.extend``, and the
  StableHLO portable-artifact reader and writer across the supported jaxlib releases;
- ``exported``: ``jax.export.Exported`` built around a module JAX did not lower (``jaxport import``) or from
  jaxport's own reading of a serialization older than JAX's window, and the private fields of one (its VJP getter,
  its named shardings);
- ``runtime``: what the running process's JAX does (the frames it skips, whether its backends started, LAPACK,
  Mosaic GPU's runtime library);
- ``xla``: XLA's side, read without starting JAX (its flags, the TPU plugin, where CUDA is, the devices' target config);
- ``compiler``: the point where JAX hands a program to XLA (``compile_or_get_cached``, replaced for the thread that
  asks) and what a compiled program keeps privately (its native executable, its C++ call);
- ``facts``: what an executable is compiled from (:class:`~.facts.Facts`), read at that point;
- ``surface``: the table of every private function jaxport calls, with the parameters it relies on, which the test
  above checks against the installed JAX, naming the function whose signature changed.

Part of the foundation layer (``scripts/check_layers.py``); ``exported`` builds on ``program.jaxser``. JAX and jaxlib
are imported inside the functions that use them, and this ``__init__`` imports nothing, so that a checking child or
``jaxport inspect`` imports only the modules it uses.

The shims for the older JAX releases jaxport supports (pyproject.toml: ``jax>=0.9.1,<0.13``) are here too, each
naming the JAX it is for: a public function whose signature changed (``deserialize_portable_artifact`` and
``serialize_portable_artifact`` of ``jax.extend.mlir``) or a feature an older release lacks (the custom-call
wildcard). Everything else jaxport calls works the same from jax 0.9.1 on; ``make test-compat`` runs the tests there.
"""
