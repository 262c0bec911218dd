"""The table of JAX's private surface that jaxport relies on, as of the JAX it was reviewed against (pyproject.toml's
newest): every private function this package calls or replaces, with its parameters, and every private value it reads.

``tests/foundation/test_jax_private.py`` checks each entry against the installed JAX, and fails naming the function
whose signature changed (``jax._src.compiler.compile_or_get_cached: parameters changed from (...) to (...)``), so that a
JAX release that moves one is noticed where jaxport calls it, not by a user. The same test reads this package's code
and refuses a private name it uses that the table does not list. Read by that test only: nothing imports it.
"""

from __future__ import annotations

#: Every private function jaxport calls, with the parameters it relies on: the names it passes by position, in order
#: (any further parameter must have a default), then, after ``"*"``, the names it passes by keyword; a name ending in
#: ``?`` is passed only where the function has it (an older JAX's). A method is named through its class, ``self``
#: first; a class by itself, for its constructor. None: a private value jaxport reads (a constant, a registry, a
#: module), whose presence alone is checked.
CALLED: dict[str, tuple[str, ...] | None] = {
    # compiler: the hook (replaced, see REPLACED), and the compile past JAX's persistent cache under a signature
    "jax._src.compiler.compile_or_get_cached": ("backend", "computation", "devices", "compile_options",
                                                "host_callbacks", "executable_devices"),
    "jax._src.compiler.backend_compile_and_load": ("backend", "module", "executable_devices", "options",
                                                   "host_callbacks"),
    "jax._src.lib.xla_client.Client.deserialize_executable": ("self", "serialized", "executable_devices",
                                                              "compile_options"),
    "jax._src.lib.xla_client.Client.serialize_executable": ("self", "arg"),
    "jax._src.lib.xla_client.LoadedExecutable.serialize": ("self",),
    # facts: the compile options digested as JAX's cache key digests them, and read back
    "jax._src.cache_key._hash_serialized_compile_options": ("hash_obj", "compile_options_obj",
                                                            "strip_device_assignment"),
    "jax._src.lib.xla_client.CompileOptions.ParseFromString": ("arg",),
    "jax._src.lib.mlir.passmanager.PassManager.parse": ("pipeline",),
    # xla: the start-up probe, the devices' topology
    "jaxlib.xla_client.CompileOptions.__init__": ("self",),
    "jaxlib.xla_client.load_pjrt_plugin_dynamically": ("plugin_name", "library_path"),
    "jaxlib.xla_client.initialize_pjrt_plugin": ("plugin_name",),
    "jax._src.lib.xla_client.get_topology_for_devices": ("arg",),
    "jax._src.lib.cuda_path": None,
    # stable: the guaranteed targets, the registered host callbacks
    "jax._src.export._export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE": None,
    "jax._src.lib.xla_client.custom_call_targets": ("platform",),
    # mlir
    "jax._src.interpreters.mlir.make_ir_context": (),
    "jax._src.interpreters.mlir.upstream_dialects": None,
    "jax._src.lib.mlir.dialects.sdy.register_dialect": ("context",),
    "jax._src.lib.mlir.dialects.chlo.register_dialect": ("context",),
    "jax._src.lib.mlir.dialects.hlo.register_dialect": ("context",),
    "jax._src.lib._jax.mlir.deserialize_portable_artifact": ("mlir_module",),
    "jax._src.lib._jax.mlir.serialize_portable_artifact": ("mlir_module", "target", "use_mixed_serialization"),
    "jax._src.xla_bridge.get_backend": (),
    "jaxlib.mlir.ir": None,
    "jaxlib.mlir.dialects.stablehlo": None,
    # exported: an Exported built from its fields, its avals, its effects and pytree nodes, a sharding's HLO form
    "jax.export.Exported": ("*", "fun_name", "in_tree", "in_avals", "out_tree", "out_avals", "_in_named_shardings",
                            "_out_named_shardings", "in_shardings_hlo", "out_shardings_hlo", "nr_devices",
                            "platforms", "ordered_effects", "unordered_effects", "disabled_safety_checks",
                            "mlir_module_serialized", "calling_convention_version", "module_kept_var_idx",
                            "uses_global_constants", "_get_vjp", "_has_named_shardings?"),
    "jax._src.core.ShapedArray": ("shape", "dtype", "weak_type", "*", "memory_space"),
    "jax._src.core.update_aval_with_sharding": ("aval", "sharding"),
    "jax._src.core.MemorySpace.Host": None,
    "jax._src.core.MemorySpace.Any": None,
    "jax._src.core.MemorySpace.Device": None,
    "jax._src.effects.lowerable_effects._effect_types": None,
    "jax._src.export._export.deserialization_registry": None,
    "jax.sharding.NamedSharding._to_xla_hlo_sharding": ("self", "num_dimensions"),
    # runtime
    "jax._src.source_info_util.register_exclusion": ("path",),
    "jax._src.xla_bridge.backends_are_initialized": (),
    "jax._src.lib.lapack.registrations": (),
    "jax._src.lib.lapack._lapack.initialize": (),
    "jax._src.lax.linalg.initialize_lapack": (),
    "jax._src.lib.mosaic_gpu._mosaic_gpu_ext": None,
}

#: The functions jaxport replaces for a block (JAX calls the replacement): only the parameters it reads, in order,
#: must stay; any further one is passed on as JAX gave it.
REPLACED = frozenset({"jax._src.compiler.compile_or_get_cached", "jax._src.lax.linalg.initialize_lapack"})

#: The entries a supported JAX may lack, and what jaxport does without them.
OPTIONAL: dict[str, str] = {
    "jax._src.lib.mosaic_gpu._mosaic_gpu_ext": "only with JAX's CUDA plugin: no Mosaic GPU kernel compiles here",
    "jax._src.lib.cuda_path": "JAX found no CUDA: XLA searches the system's CUDA installations",
    "jax._src.lax.linalg.initialize_lapack": "jax 0.9.x lowers exported calls without initializing LAPACK: nothing to "
                                             "hold back (runtime.lapack_left_alone)",
}

#: Private attributes jaxport reads on objects of JAX's public classes, by class: read on one such object the test
#: builds (a function compiled by ``jax.jit`` and called once).
HELD: dict[str, tuple[str, ...]] = {
    "jax.stages.Compiled": ("_executable.xla_executable", "_call"),
}
