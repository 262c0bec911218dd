"""What runs a rewritten program (:class:`~.program.Built`): XLA through JAX on one platform, or IREE on the CPU.

Each compiles a module once (by its digest) and runs it on a list of arrays, returning numpy arrays. XLA gets the
module as JAX's own calls get an exported program: a ``jax.export.Exported`` around it (``make_exported``, as
``jaxport import`` builds one), called under ``jax.jit`` with its inputs on the platform's first device. IREE gets
the module's text without locations and runs it with its CPU backend, through the same helpers as ``--runtime
iree`` (``run.iree``). Imports JAX (and IREE) only when it compiles.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ... import dtypes
from ...errors import PlatformError
from ...jaxprivate.exported import make_exported
from ...jaxprivate.mlir import serialize_portable_artifact
from ...run.iree import compile_error, compile_module, from_iree, iree_packages, run_error, to_iree
from ...run.values import keys
from .program import Built, Session

#: A compiled program: arrays in, numpy arrays out.
Compiled = Callable[[Sequence[Any]], list[Any]]
#: Compiled programs a runtime keeps (a loop's body and condition, run at every iteration); older ones are dropped,
#: with their executables' memory.
KEEP_COMPILED = 3


def _keep(cache: dict[str, Compiled], digest: str, run: Compiled) -> Compiled:
    cache[digest] = run
    while len(cache) > KEEP_COMPILED:
        del cache[next(iter(cache))]
    return run


class Runtime(Protocol):
    """Compiles and runs rewritten programs (see the module docstring)."""

    #: How reports name it: ``xla on cpu``, ``iree``.
    title: str
    #: The platforms an artifact written of one operation must list to run there.
    platform: str

    def compile(self, built: Built) -> Compiled: ...


def _x64(built: Built) -> Any:
    import jax

    wide = any(dtypes.is_64bit(t.dtype) for t in built.inputs + built.outputs)
    return jax.enable_x64(True) if wide else contextlib.nullcontext()


class XlaRuntime:
    """XLA, through JAX, on the first device of ``platform``."""

    def __init__(self, session: Session, platform: str):
        import jax

        self.session = session
        self.platform = platform
        self.title = f"xla on {platform}"
        try:
            self.device = jax.devices(platform)[0]
        except RuntimeError:
            raise PlatformError(f"JAX here has no {platform} device to localize on.") from None
        self._compiled: dict[str, Compiled] = {}

    def compile(self, built: Built) -> Compiled:
        if built.digest in self._compiled:
            return self._compiled[built.digest]
        import jax
        from jax import export
        from jax.extend.mlir.dialects import stablehlo

        with self.session.ctx:
            data = serialize_portable_artifact(built.module, stablehlo.get_current_version())
        exported = make_exported(
            fun_name="main", in_avals=[t.struct() for t in built.inputs], out_avals=[t.struct() for t in built.outputs],
            platforms=[self.platform], mlir_module_serialized=data,
            calling_convention_version=export.maximum_supported_calling_convention_version,
            uses_global_constants=False, disabled_safety_checks=[])
        # jax 0.12.1 deprecates the class for the function (which 0.10 has too)
        single = getattr(jax.sharding, "make_single_device_sharding", None)
        sharding = single(self.device) if single is not None else jax.sharding.SingleDeviceSharding(self.device)
        structs = [jax.ShapeDtypeStruct(t.shape, dtypes.to_numpy(t.dtype), sharding=sharding) for t in built.inputs]
        with _x64(built):
            try:
                compiled = jax.jit(exported.call).lower(*structs).compile()
            except Exception as e:  # noqa: BLE001 - XLA raises its runtime error type for any compile failure
                raise PlatformError(f"XLA on {self.platform} could not compile a localization program: "
                                    f"{str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__}"
                                    ) from None
        single = len(built.outputs) == 1
        device = self.device
        x64 = _x64(built)

        def run(args: Sequence[Any]) -> list[Any]:
            import numpy as np

            with x64:
                placed = [jax.device_put(keys.key_data(a) if _is_key(a) else a, device) for a in args]
                out = compiled(*placed)
            outs = [out] if single else list(out)
            return [np.asarray(o) for o in outs]

        return _keep(self._compiled, built.digest, run)


def _is_key(value: Any) -> bool:
    return dtypes.is_key(str(getattr(value, "dtype", "")))


class IreeRuntime:
    """IREE's ``llvm-cpu`` backend on this machine's CPU."""

    title = "iree"
    platform = "cpu"

    def __init__(self, session: Session):
        self.session = session
        self._compiled: dict[str, Compiled] = {}

    def compile(self, built: Built) -> Compiled:
        if built.digest in self._compiled:
            return self._compiled[built.digest]
        _, runtime = iree_packages()
        with self.session.ctx:
            text = str(built.module.operation.get_asm(enable_debug_info=False))
        try:
            vmfb = compile_module(text, "host")
        except Exception as e:  # noqa: BLE001 - IREE reports every compile failure as CompilerToolError
            raise compile_error("localizing", e, "of one window of the program") from None
        config = runtime.Config("local-task")
        vm_module = runtime.VmModule.copy_buffer(config.vm_instance, vmfb)
        context = runtime.SystemContext(config=config, vm_modules=[vm_module])
        main = context.modules[vm_module.name].main
        device = config.device
        out_types = [t.dtype for t in built.outputs]

        def run(args: Sequence[Any]) -> list[Any]:
            try:
                result = main(*[to_iree(runtime, device, keys.key_data(a)) for a in args])
            except Exception as e:  # noqa: BLE001 - IREE's runtime reports its failures as IndexError, RuntimeError
                raise PlatformError(f"IREE failed while running a localization program: {run_error(e)}.") from None
            outs = list(result) if isinstance(result, (list, tuple)) else [result]
            return [from_iree(o, dtype) for o, dtype in zip(outs, out_types)]

        return _keep(self._compiled, built.digest, run)
