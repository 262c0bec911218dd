"""Compiling an artifact ahead of time for a target machine (``jaxport warmup --target``, ``jaxport check --target``),
which need not be this one: every function at every shape bucket, each reported compiled or failed, with XLA's whole
message and the device memory the executable needs against the target's.

A TPU or GPU target is compiled for deviceless (``targets``): the program is lowered exactly as a process on the
accelerator lowers it when it loads the artifact (``jax_backend.program_function``, the same ``jax.jit``, inputs and
bound tensors placed on the default device), so the executable is the one that process would compile, and ``warmup``
stores it in the cache directory as a record (``executables``) that the TPU or GPU process loads instead of
compiling (a GPU one keyed by the GPU's model, so that the real device, which names itself otherwise than XLA's
spec, finds it). ``cpu`` compiles for this host the same way, so the mechanism runs without libtpu or the CUDA
plugin.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import dtypes, usercache
from ..._text import plural
from ...artifact.calltree import argument_positions
from ...artifact.container import Artifact
from ...artifact.policy import CheckReport, Policy, Violation, load_policy
from ...artifact.policy import check as policy_check
from ...errors import JaxportError, PlatformError, UsageError
from ...isolation import isolate
from ...isolation.startup import settings_refusal
from ...jaxprivate.compiler import memory_analysis, serialized_executable, steered, steering_available
from ...jaxprivate.facts import Facts
from ...jaxprivate.runtime import MOSAIC_GPU_TARGET, initialize_lapack, mosaic_gpu_runtime
from ...program.checks import checked_targets
from ...sharding import mesh_devices, mesh_text, runtime_mesh
from ..backend import ShapeKey
from ..buckets import sizes
from ..buckets.ahead import MAX_SIGNATURES, plan_target
from ..executables import write_record
from ..jax_backend import program_function, xla_message
from ..load import open_checked, runnable_program, select_function
from ..options import LoadOptions
from ..warmup import signature
from .targets import Target, cuda_note, libtpu_note, quiet_cuda, quiet_libtpu, target


@dataclass(frozen=True)
class Bucket:
    """One function at one shape bucket, compiled for a target (or not)."""

    function: str
    dims: dict[str, int]
    key: ShapeKey
    input_names: tuple[str, ...]
    compiled: bool
    error: str | None  # XLA's whole message when it did not compile
    seconds: float
    #: Bytes of device memory per device, by kind (``arguments``, ``outputs``, ``aliased``, ``temporaries``, ``code``).
    memory: dict[str, int] | None = None
    #: The target's memory per device, when known.
    limit: int | None = None
    record: str | None = None  # the executable's record in the cache (its file name)

    @property
    def needs(self) -> int | None:
        """Device memory the executable needs on one device: arguments, outputs, temporaries and code, less what
        outputs share with arguments."""
        m = self.memory
        if m is None:
            return None
        return m["arguments"] + m["outputs"] + m["temporaries"] + m["code"] - m["aliased"]

    @property
    def fits(self) -> bool | None:
        needs = self.needs
        return None if needs is None or self.limit is None else needs <= self.limit

    @property
    def ok(self) -> bool:
        return self.compiled and self.fits is not False

    def reason(self) -> str | None:
        """Why the bucket fails the target: XLA's message, or the memory it needs over the target's."""
        if not self.compiled:
            return self.error
        if self.fits is False:
            return (f"needs {gib(self.needs or 0)} of device memory per device ({memory_text(self.memory)}), more "
                    f"than the {gib(self.limit or 0)} the target has")
        return None

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "dims": self.dims,
                "inputs": {n: {"shape": list(shape), "dtype": dt}
                           for n, (shape, dt) in zip(self.input_names, self.key)},
                "compiled": self.compiled, "fits": self.fits, "ok": self.ok, "error": self.reason(),
                "compile_s": self.seconds, "memory": self.memory, "memory_needed": self.needs,
                "memory_limit": self.limit, "executable": self.record}


@dataclass
class TargetReport:
    """Every function at every bucket, compiled for one target."""

    artifact: str
    target: Target
    platform_version: str | None = None
    jaxlib: str | None = None
    buckets: list[Bucket] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cache_dir: str | None = None

    @property
    def failed(self) -> list[Bucket]:
        return [b for b in self.buckets if not b.ok]

    def summary(self) -> str:
        """One sentence: how many buckets compiled, and the first that did not."""
        bad = self.failed
        head = (f"{self.artifact} for {self.target.name}: {len(self.buckets) - len(bad)} of "
                f"{plural(len(self.buckets), 'bucket')} compiled")
        if not bad:
            return head
        first = bad[0]
        shown = ", ".join(f"{k}={v}" for k, v in first.dims.items()) or "static shapes"
        return f"{head}; function {first.function!r} at {shown}: {first.reason()}"

    def to_json(self) -> dict[str, Any]:
        return {"artifact": self.artifact, "target": self.target.to_json(),
                "platform_version": self.platform_version, "jaxlib": self.jaxlib, "cache_dir": self.cache_dir,
                "passed": not self.failed, "buckets": [b.to_json() for b in self.buckets], "notes": self.notes}


def gib(n: int) -> str:
    """Bytes of memory as a reader compares them: GiB from a quarter of one, MiB from 1 MiB, else KiB."""
    if n >= 1 << 28:
        return f"{n / (1 << 30):.2f} GiB"
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


def memory_text(m: Mapping[str, int] | None) -> str:
    if not m:
        return "unknown"
    return ", ".join(f"{k} {gib(v)}" for k, v in m.items() if v and k != "aliased")


def compile_for_target(art: Artifact, target: Target, *, functions: Iterable[str] | None = None,
                       dims: Mapping[str, Sequence[int]] | None = None,
                       allow_custom_calls: Iterable[str] | None = None, cache_dir: Path | None = None,
                       progress: Callable[[str], None] | None = None) -> TargetReport:
    """Compile the functions of an open artifact (``functions``, default all) for ``target`` at their buckets
    (``buckets.ahead.plan_target``); with ``cache_dir``, store each executable there (``executables``) for the target's
    processes to load. A bucket that does not compile or fit is reported, not raised; an artifact that cannot be
    compiled for the target at all (not exported for its platform, a mesh larger than the target) raises."""
    import jax

    if not steering_available():
        raise PlatformError(f"--target {target.name}: this JAX ({jax.__version__}) compiles through a function "
                            f"jaxport does not know, so it cannot read what an executable is compiled from; use a "
                            f"JAX jaxport supports.")
    names = list(functions) if functions is not None else list(art.model.functions)
    report = TargetReport(str(art.path), target, cache_dir=str(cache_dir) if cache_dir is not None else None)
    sizes.check_names(dims or {}, [art.model.functions[fname] for fname in names])  # one of them has each
    plans = {}
    for fname in names:
        fn = art.model.functions[fname]
        where = f"{art.path}: function {fname!r}"
        if target.platform not in fn.platforms:
            raise PlatformError(f"{where} was exported for {', '.join(fn.platforms)}, not {target.platform}: it "
                                f"cannot be compiled for {target.name}. Re-export it with --platform "
                                f"{target.platform} (repeat --platform to keep the others).")
        plans[fname] = plan_target(fn, dims, where)
    total = sum(len(p) for p in plans.values())
    if total > MAX_SIGNATURES:
        raise UsageError(f"{art.path}: {total} buckets to compile for {target.name}; at most {MAX_SIGNATURES} are "
                         f"allowed. Give fewer values with --dim, or one function with --function.")
    devices = target.devices()
    note = libtpu_note() if target.platform == "tpu" else cuda_note() if target.platform == "cuda" else None
    if note:
        report.notes.append(note)
    for fname, buckets in plans.items():
        _compile_function(art, fname, buckets, target, devices, allow_custom_calls, cache_dir, report, progress)
    return report


def _compile_function(art: Artifact, fname: str, buckets: list[dict[str, int]], target: Target, devices: list[Any],
                      allow_custom_calls: Iterable[str] | None, cache_dir: Path | None, report: TargetReport,
                      progress: Callable[[str], None] | None) -> None:
    import jax

    fn = art.model.functions[fname]
    where = f"{art.path}: function {fname!r}"
    exported = runnable_program(art, fname, allow_custom_calls, str(art.path), report.notes)
    if MOSAIC_GPU_TARGET in (checked_targets(exported.mlir_module_serialized) or ()):
        mosaic_gpu_runtime()
    program = art.model.members[fn.payload].sha256
    jit = jax.jit(program_function(exported, fname))
    weights = art.model.weights
    weight_structs = [jax.ShapeDtypeStruct(tuple(weights.tensors[n].shape), dtypes.to_numpy(weights.tensors[n].dtype))
                      for n in fn.weights] if weights is not None else []
    in_shardings: list[Any] | None = None
    if fn.mesh is not None:
        needed = mesh_devices(fn.mesh)
        if needed > len(devices):
            raise PlatformError(f"{where} is sharded across {needed} devices (mesh {mesh_text(fn.mesh)}), and "
                                f"{target.name} has {len(devices)}; choose a target with at least {needed}.")
        mesh = runtime_mesh(fn.mesh, where, devices)
        recorded = exported.in_shardings_jax(mesh)
        shardings = [s if s is not None else jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
                     for s in recorded]
        free, weight_positions = argument_positions(exported)
        in_shardings = [shardings[p] for p in free]
        weight_structs = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=shardings[p])
                          for s, p in zip(weight_structs, weight_positions)]
    initialize_lapack()
    for dims in buckets:
        key = signature(fn, dims)
        shown = ", ".join(f"{k}={v}" for k, v in dims.items()) or "static shapes"
        if progress is not None:
            progress(f"compiling {fname} at {shown} for {target.name}")
        structs = [jax.ShapeDtypeStruct(shape, dtypes.to_numpy(dt),
                                        sharding=in_shardings[i] if in_shardings else None)
                   for i, (shape, dt) in enumerate(key)]
        seen: list[Facts] = []

        def capture(facts: Facts, load: Any, seen: list[Facts] = seen) -> None:
            seen.append(facts)

        start = time.perf_counter()
        # lowered as the target lowers it: unsharded inputs and weights on its default device
        placement = jax.default_device(devices[0]) if in_shardings is None else contextlib.nullcontext()
        with (jax.enable_x64(True) if fn.x64 else contextlib.nullcontext()), placement:
            try:
                lowered = jit.lower(weight_structs, *structs)
                with steered(capture, persistent=not usercache.vouching_required(program)):
                    compiled = lowered.compile()
            except JaxportError:
                raise
            except Exception as e:  # noqa: BLE001 - XLA's refusal (its runtime error type), JAX's lowering errors
                report.buckets.append(Bucket(fname, dict(dims), key, tuple(fn.input_names), False, xla_message(e),
                                             time.perf_counter() - start, limit=target.memory_per_device))
                continue
        seconds = time.perf_counter() - start
        memory = memory_analysis(compiled)
        bucket = Bucket(fname, dict(dims), key, tuple(fn.input_names), True, None, seconds, memory,
                        target.memory_per_device)
        if seen:
            report.platform_version = " ".join(seen[0].platform_version.split())
            report.jaxlib = seen[0].jaxlib
        if cache_dir is not None and seen and bucket.ok:
            path = write_record(cache_dir, program, key, seen[0], serialized_executable(compiled),
                                {"target": target.name, "function": fname, "dims": dict(dims), "memory": memory,
                                 "compile_s": seconds})
            bucket = dataclasses.replace(bucket, record=path.name)
        report.buckets.append(bucket)


def compile_targets(path: str | Path, targets: Sequence[str], *, options: LoadOptions | None = None,
                    dims: Mapping[str, Sequence[int]] | None = None, cache_dir: str | Path | None = None,
                    progress: Callable[[str], None] | None = None) -> list[TargetReport]:
    """Compile the artifact at ``path`` for each of ``targets`` (their names: ``targets.target``), as ``jaxport
    warmup --target`` does with ``cache_dir`` (the executables are stored there) and ``jaxport check --target``
    without (nothing is written). ``options`` gives the function (default: every function), the custom calls
    allowed and the signature required (checked before the artifact is read)."""
    options = options or LoadOptions()
    chosen = [target(name) for name in dict.fromkeys(targets)]
    if any(t.platform == "tpu" for t in chosen):
        quiet_libtpu()  # before JAX starts its backends
        # libtpu is started to describe the slice whatever JAX_PLATFORMS says: a setting it refuses would end this
        # process with its own line (exit 1), so it is refused first, naming the variable
        refused = settings_refusal(libtpu=True)
        if refused is not None:
            raise UsageError(f"--target {next(t.name for t in chosen if t.platform == 'tpu')}: {refused}")
    if any(t.platform == "cuda" for t in chosen):
        quiet_cuda()  # before JAX starts its backends: no GPU here, so JAX's CUDA plugin must not try to start
    directory = Path(cache_dir).expanduser() if cache_dir is not None else None
    with open_checked(path, options) as art:  # a required signature verified on the bytes then compiled
        functions = [select_function(art.model, options.function, str(path))] if options.function else None
        reports = [compile_for_target(art, t, functions=functions, dims=dims,
                                   allow_custom_calls=options.allow_custom_calls, cache_dir=directory,
                                   progress=progress) for t in chosen]
        if directory is not None:  # the program check's verdict beside the executables (a vouch covers both)
            for f in art.model.functions.values():
                member = art.model.members.get(f.payload)
                if member is not None:
                    isolate.remember(member.sha256, directory)
        return reports


def check(artifact: str | Path, policy: Policy | str | Path, *, targets: Sequence[str] = (),
          dims: Mapping[str, Sequence[int]] | None = None, options: LoadOptions | None = None,
          today: datetime.date | None = None, signature: str | Path | None = None,
          progress: Callable[[str], None] | None = None) -> CheckReport:
    """``jaxport check``: the policy's rules read from the manifest (``artifact.policy.check``: no JAX), then rule
    ``compiles_on``, the policy's targets and ``targets``: every function compiled at every bucket (``dims``, else
    the policy's ``compiles_on.dims``, else the buckets proposed from the spec's bounds) for each, nothing written;
    a bucket that does not compile or fit is a violation. An artifact whose signature does not verify is not
    compiled."""
    if not isinstance(policy, Policy):
        policy = load_policy(policy)
    report = policy_check(artifact, policy, today, signature)
    names = list(dict.fromkeys([*(policy.compiles_on or []), *targets]))
    if not names or any(v.rule == "signature" for v in report.violations):
        return report  # nothing to compile, or an artifact not to be read further
    if "compiles_on" not in report.rules:
        report.rules.append("compiles_on")
    compiled = compile_targets(artifact, names, options=options, dims=dims or policy.compiles_on_dims,
                               progress=progress)
    for result in compiled:
        report.targets.append(result.to_json())
        for b in result.failed:
            shown = ", ".join(f"{k}={v}" for k, v in b.dims.items()) or "its static shapes"
            what = "does not compile" if not b.compiled else "does not fit"
            report.violations.append(Violation("compiles_on", b.function, f"function {b.function!r} at {shown} "
                                               f"{what} for {result.target.name}: {b.reason()}"))
        report.notes.extend(("compiles_on", n) for n in result.notes)
    return report
