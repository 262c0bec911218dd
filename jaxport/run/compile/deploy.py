"""Compiling an artifact's function ahead of time into a deployable IREE module (``jaxport compile``), to run it
where no Python JAX exists. Needs the optional extra ``jaxport[iree]``.

``compile_artifact(ARTIFACT, "out.vmfb", ...)`` writes three files side by side:

- ``out.vmfb``: one IREE module with one public function per shape bucket (``buckets``: ``main`` when there is one,
  ``main_batch8``, ``main_batch8_seq16``, ... otherwise), each taking only the free inputs, at the bucket's static
  shapes;
- ``out.irpa``: the bound tensors, an IREE parameter archive the module reads by name in scope ``model``
  (``iree_module``), written only when the function has bound tensors;
- ``out.run.json`` (:data:`RUN_FORMAT`): how to call it: the signature (inputs, outputs, dimension bounds), each
  function's dimension values and concrete input and output shapes in argument order, the bucket choice rule, the
  padding rule with each variable's verdict (``rowwise``), and for each function the ``iree-run-module`` command
  line that runs it on ``NAME.npy`` files (``NAME.bin`` for a 4-bit array: see :func:`run_command`). It names the
  other two files relative to its own directory and records no time or absolute path, so compiling the same artifact
  with the same options and tools gives the same bytes.

``iree_loader`` (numpy and ``iree.runtime`` only) and ``jaxport call out.run.json`` (``calling.call``) read it, pick the
smallest bucket that fits a call and pad and slice where the program allows it.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import dtypes
from ..._api_types import record_of
from ..._fsio import atomic_write, check_output
from ..._text import plural
from ...artifact import contract
from ...artifact.bounds import Bounds
from ...artifact.container import manifest_bytes
from ...artifact.model import CallNode, DimVar, Function, Input, Output, Signature, replace
from ...errors import PlatformError
from .. import buckets as buckets_mod
from ..buckets import rowwise
from ..buckets.padding import padding_verdicts, specializer, structs
from ..iree import check_supported, compile_error, compile_module, iree_version
from ..jax_backend import JaxBackend
from ..load import load_by
from ..options import LoadOptions
from ..values import keys
from .iree_loader import Array, Description
from .iree_module import SCOPE, Specialized, assemble, write_archive

#: The ``format`` of a run description; a reader refuses others.
RUN_FORMAT = "jaxport-iree-run/1"
#: What ``call`` takes for a compiled module rather than an artifact: its run description, or the module beside one.
SUFFIXES = (".run.json", ".vmfb")
#: The program that runs a function of the module from the command line, and the device it is told to use.
TOOL = "iree-run-module"
DEVICE = "local-task"

BUCKET_RULE = ("a call runs on the function of the smallest bucket that fits it: each dimension variable equal to "
               "the bucket's value, or not above it where padding is allowed for that variable; the smallest is "
               "the one with the fewest input elements, the first listed among equals")
PADDING_RULE = ("a variable may be padded only where the program was proven to work row by row along it "
                "(jaxport.run.buckets.rowwise; a reduction, contraction, slice or gather across it, or a use of its "
                "value, refuses it): the inputs are padded along the listed axes with copies of their last row (fill "
                "'edge') up to the bucket's size, and the outputs sliced back along the listed axes; a variable "
                "that may not be padded must equal a bucket's value")


@dataclass(frozen=True)
class BucketFunction:
    """One public function of the module: its bucket (each variable's value), its inputs and outputs at the
    bucket's static shapes, in argument order, and the ``iree-run-module`` argument list that runs it."""

    name: str
    dims: dict[str, int]
    inputs: tuple[Array, ...]
    outputs: tuple[Array, ...]
    argv: list[str]

    @property
    def command(self) -> str:
        """:attr:`argv` as one shell command line."""
        return shlex.join(self.argv)

    def to_json(self) -> dict[str, Any]:
        """The function as the run description's ``functions`` lists it."""
        return {"name": self.name, "dims": dict(self.dims), "inputs": [i.to_json() for i in self.inputs],
                "outputs": [o.to_json() for o in self.outputs], "argv": self.argv, "command": self.command}


@dataclass
class Compiled:
    """What ``compile_artifact`` wrote and how long it took."""

    description: dict[str, Any]  # the content of the run description
    module: Path
    run: Path
    parameters: Path | None
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)  # bytes: artifact, module, parameters
    seconds: dict[str, float] = field(default_factory=dict)  # load, specialize, analyze, compile, write
    #: What the run description says, as records: the artifact's function, where the buckets came from, the
    #: module's functions, each variable's padding verdict, and the bound tensors in the parameter archive.
    function: str = ""
    bucket_source: str = ""
    functions: list[BucketFunction] = field(default_factory=list)
    verdicts: dict[str, rowwise.Verdict] = field(default_factory=dict)
    tensors: list[str] = field(default_factory=list)

    def commands(self) -> list[str]:
        """The ``iree-run-module`` command line of each function, in order."""
        return [f.command for f in self.functions]


def output_paths(output: str | Path) -> tuple[Path, Path, Path]:
    """The module, its run description and its parameter archive: ``out.vmfb``, ``out.run.json``, ``out.irpa``."""
    module = Path(output)
    stem = module.name[:-5] if module.name.lower().endswith(".vmfb") and len(module.name) > 5 else module.name
    return module, module.with_name(f"{stem}.run.json"), module.with_name(f"{stem}.irpa")


def is_compiled_module(path: str | Path) -> bool:
    """Whether ``call``'s ARTIFACT is a compiled module (:data:`SUFFIXES`) rather than an artifact."""
    return str(path).lower().endswith(SUFFIXES)


def run_description_path(path: str | Path) -> Path:
    """The run description of a compiled module: ``path`` itself, or the ``.run.json`` beside a ``.vmfb``."""
    return output_paths(path)[1] if str(path).lower().endswith(".vmfb") else Path(path)


def compile_artifact(path: str | Path, output: str | Path, *, function: str | None = None,
                     dims: Mapping[str, int] | None = None, grid: Mapping[str, Sequence[int]] | None = None,
                     buckets: Sequence[Mapping[str, int]] | None = None, cpu: str = "generic",
                     allow_custom_calls: Iterable[str] | None = None,
                     progress: Callable[[str], None] | None = None) -> Compiled:
    """Compile a function of an artifact into a deployable IREE module (see the module docstring).

    ``dims`` fixes variables (``--dim``), ``grid`` lists sizes per variable (``--dims``), ``buckets`` lists
    assignments (``--bucket``); with none of them the buckets are proposed from the spec's bounds (``buckets``).
    ``cpu``: ``generic`` (any CPU of this architecture) or ``host``. ``allow_custom_calls``: as for ``load``.
    Raises UsageError for bad buckets and PlatformError for what IREE cannot run; nothing is written then.
    ``progress``, when given, is called with the text of each stage as it starts (``compiling with IREE``).
    """
    import jax
    import numpy as np

    module_path, run_path, irpa_path = output_paths(output)
    for written in (module_path, run_path, irpa_path):  # before anything is compiled
        check_output(written, [path])
    stage = progress or (lambda text: None)
    start = time.perf_counter()
    stage("loading the artifact")
    options = record_of(LoadOptions, None, {"function": function, "allow_custom_calls": allow_custom_calls}, "load")
    loaded = load_by(path, options)
    backend = loaded.backend
    assert isinstance(backend, JaxBackend)  # load's default runtime
    f = loaded.function_record
    where = f"{path}: function {loaded.function!r}"
    check_supported(f, where, dict(zip(f.weights, backend.weights)))
    chosen = buckets_mod.plan(f, fixed=dims, grid=grid, explicit=buckets)
    names = buckets_mod.function_names(chosen.buckets)
    weight_names = list(f.weights)
    load_s = time.perf_counter() - start

    start = time.perf_counter()
    stage(f"specializing {loaded.function} for {plural(len(chosen.buckets), 'bucket')}")
    specialized = specializer(backend, f)
    programs = [Specialized(n, specialized(b)) for n, b in zip(names, chosen.buckets)]
    specialize_s = time.perf_counter() - start
    start = time.perf_counter()
    stage("checking which dimensions may be padded")
    verdicts = padding_verdicts(f, len(weight_names), specialized, backend.exported.mlir_module())
    analyze_s = time.perf_counter() - start

    start = time.perf_counter()
    stage("compiling with IREE")
    text = assemble(programs, weight_names)
    try:
        vmfb = compile_module(text, cpu)
    except Exception as e:  # noqa: BLE001 - IREE reports every compile failure as CompilerToolError
        shown = "; ".join(",".join(f"{k}={v}" for k, v in b.items()) for b in chosen.buckets)
        refused = compile_error(where, e, f"for the buckets {shown}" if shown else "with its static shapes")
        four_bit = [i.dtype for i in f.inputs] + [o.dtype for o in f.outputs] + [str(w.dtype) for w in backend.weights]
        if cpu == "generic" and any(d in dtypes.PACKED for d in four_bit):  # IREE 3.13: masked i4 loads
            refused = PlatformError(f"{refused} IREE's generic CPU target fails on some int4 programs that --cpu host "
                                    f"compiles.")
        raise refused from None
    compile_s = time.perf_counter() - start

    start = time.perf_counter()
    stage("writing the module")
    weight_structs = [jax.ShapeDtypeStruct(w.shape, w.dtype) for w in backend.weights]
    functions = []
    for name, bucket in zip(names, chosen.buckets):
        s = structs(f, bucket)
        with backend.x64():
            outs = jax.tree_util.tree_leaves(jax.eval_shape(backend.program, weight_structs, *s))
        ins = tuple(_module_input(i, tuple(x.shape)) for i, x in zip(f.inputs, s))
        results = tuple(Array(o.name, tuple(a.shape), o.dtype) for o, a in zip(f.outputs, outs))
        argv = run_command(module_path.name, irpa_path.name if weight_names else None, name, ins, results)
        functions.append(BucketFunction(name, dict(bucket), ins, results, argv))
    description = _description(path, loaded.function, f, module_path, irpa_path, cpu, chosen, verdicts, functions)
    archive_size = None
    if weight_names:
        tensors = [(n, np.asarray(w)) for n, w in zip(weight_names, backend.weights)]
        archive_size = write_archive(irpa_path, tensors, inputs=[path])
    sizes = {"artifact": Path(path).stat().st_size, "module": len(vmfb),
             **({"parameters": archive_size} if archive_size is not None else {})}
    atomic_write(module_path, lambda fh: fh.write(vmfb), inputs=[path])
    atomic_write(run_path, lambda fh: fh.write(manifest_bytes(description)), inputs=[path])
    seconds = {"load": load_s, "specialize": specialize_s, "analyze": analyze_s, "compile": compile_s,
               "write": time.perf_counter() - start}
    return Compiled(description, module_path, run_path, irpa_path if weight_names else None,
                    list(chosen.notes) + _padding_notes(verdicts), sizes, seconds, loaded.function, chosen.source,
                    functions, dict(verdicts), weight_names)


def _padding_notes(verdicts: Mapping[str, rowwise.Verdict]) -> list[str]:
    notes = []
    for v, verdict in verdicts.items():
        if verdict.allowed:
            notes.append(f"calls may pad {v} up to a bucket (the program works row by row along it)")
        else:
            notes.append(f"padding not allowed for {v}: {verdict.reason}; a call's {v} must equal a bucket's")
    return notes


def _file(name: str, kind: str, i: int, suffix: str = ".npy") -> str:
    """The file an ``iree-run-module`` command line names for an input or output (``suffix``: ``.npy``, or
    ``.bin`` for a 4-bit array)."""
    plain = name.replace("/", "_").replace(".", "_")
    return f"{plain}{suffix}" if plain and all(c.isalnum() or c in "_-" for c in plain) and plain.isascii() \
        else f"{kind}{i}{suffix}"


def run_command(module: str, parameters: str | None, function: str, inputs: Sequence[Array],
                outputs: Sequence[Array]) -> list[str]:
    """The ``iree-run-module`` argument list that runs ``function`` of the module file ``module`` (with the
    parameter archive ``parameters``, if any) on ``NAME.npy`` files in the run description's directory and writes
    its outputs to ``NAME.npy`` files.

    A 4-bit array (``int4``, ``uint4``) is a raw ``NAME.bin`` instead, its elements packed two to a byte, the first
    in the low nibble (as IREE's ``i4`` buffers and jaxport's weights hold them), read with its shape and type given
    (``--input=4x3xi4=@w.bin``): ``iree-run-module`` (IREE 3.13) has no ``.npy`` form for them. It takes numpy's
    int4 ``.npy`` (one element per byte, ``|V1``) as the packed bytes, so the values it computes from one are wrong
    with no error, and it writes an ``i4`` output as a ``.npy`` whose header says a byte per element over half as
    many bytes, which ``numpy.load`` refuses."""
    argv = [TOOL, f"--device={DEVICE}", f"--module={module}"]
    if parameters is not None:
        argv.append(f"--parameters={SCOPE}={parameters}")
    argv.append(f"--function={function}")
    for k, a in enumerate(inputs):
        if dtypes.BY_NAME[a.dtype].packed:
            typed = "x".join([*(str(d) for d in a.shape), str(dtypes.BY_NAME[a.dtype].mlir)])
            argv.append(f"--input={typed}=@{_file(a.name, 'input', k, '.bin')}")
        else:
            argv.append(f"--input=@{_file(a.name, 'input', k)}")
    argv += [f"--output=@{_file(a.name, 'output', k, '.bin' if dtypes.BY_NAME[a.dtype].packed else '.npy')}"
             for k, a in enumerate(outputs)]
    return argv


def _description(path: str | Path, fname: str, f: Function, module_path: Path, irpa_path: Path, cpu: str,
                 chosen: buckets_mod.Plan, verdicts: Mapping[str, rowwise.Verdict],
                 functions: list[BucketFunction]) -> dict[str, Any]:
    """The run description (:data:`RUN_FORMAT`) of the module ``module_path`` compiled from function ``fname``
    (``f``) of the artifact ``path``, with its bound tensors in ``irpa_path`` when it has any."""
    weight_names = list(f.weights)
    module_inputs = [keys.data_input(i) if keys.is_key_input(i) else i for i in f.inputs]
    inputs = [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype,
               **({"range": list(i.range)} if i.range is not None else {})} for i in module_inputs]
    description: dict[str, Any] = {
        "format": RUN_FORMAT,
        "artifact": Path(path).name,
        "function": fname,
        "module": module_path.name,
        "parameters": {"file": irpa_path.name, "scope": SCOPE, "tensors": weight_names} if weight_names else None,
        "target": "iree-llvm-cpu",
        "cpu": cpu,
        "iree": iree_version(),
        "device": DEVICE,
        "signature": {
            "inputs": inputs,
            "outputs": [{"name": o.name, "shape": list(o.shape), "dtype": o.dtype} for o in f.outputs],
            "dims": {v: f.bounds_of(v).to_manifest() for v in contract.dimension_variables(f)},
            "constraints": list(f.constraints),
        },
        "buckets": {"source": chosen.source, "notes": list(chosen.notes), "rule": BUCKET_RULE},
        "padding": {"rule": PADDING_RULE, "variables": {v: verdicts[v].as_dict() for v in verdicts}},
        "functions": [fn.to_json() for fn in functions],
    }
    return description


def _module_input(inp: Input, shape: tuple[int, ...]) -> Array:
    """Input ``inp`` of the module at a bucket's ``shape``: a typed PRNG key is passed as its key data."""
    if keys.is_key_input(inp):
        data = keys.data_input(replace(inp, shape=shape))
        return Array(inp.name, tuple(int(d) for d in data.shape), data.dtype)
    return Array(inp.name, shape, inp.dtype)


def signature_function(d: Description) -> Function:
    """The signature of a run description (``iree_loader.Description``) as the record of a function the checks of
    inputs take (``contract``, ``inputs``): its inputs and outputs, the variables' bounds and the constraints; the
    inputs are the positional arguments, in order."""
    return Function(payload="", calling_convention_version=0, platforms=("cpu",),
                    inputs=tuple(Input(t.name, t.shape, t.dtype, range=t.range) for t in d.inputs),
                    outputs=tuple(Output(t.name, t.shape, t.dtype) for t in d.outputs),
                    signature=Signature(tuple(CallNode("input", k, t.name) for k, t in enumerate(d.inputs))),
                    dims={v: DimVar(Bounds(lo, hi)) for v, (lo, hi) in d.bounds.items()},
                    constraints=tuple(d.constraints))
