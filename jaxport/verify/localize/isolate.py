"""The blamed operation alone: run by itself on both sides with the same recorded inputs, and written out as a small
artifact with those inputs and both sides' outputs, to attach to a bug report.

:func:`alone` runs the operation's module (:meth:`~.program.Program.isolated`) with the expected side's recorded
operands: on both runtimes when two runtimes or platforms run one program (does this operation by itself differ?),
or each program's version of it on its own side when the programs differ (does the operation itself compute
something else, or does it amplify a difference of its operands?).

:func:`write` stores in a directory: ``op.mlir`` (the operation as StableHLO text), ``op.jaxport`` (imported with
jaxport's importer, callable with ``jaxport call``), ``inputs.npz`` (the recorded inputs, named as the artifact's
inputs: ``arg0``, ``arg1``, ...), ``side_a.npz`` (the expected side's outputs, named as the artifact's outputs) and
``side_b.npz`` (the actual side's), ``localize.json`` (the report) and ``README.md`` (how to reproduce). When the
programs differ, ``counterpart.mlir`` and ``counterpart.jaxport`` hold the expected program's version, and when their
versions take operands of other types (bf16 against f32), ``inputs_b.npz`` those the actual side's took.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..._fsio import atomic_write
from ...errors import OutputError, VerificationError
from ...importer.build import import_by
from ...importer.request import ImportRequest
from .program import Built
from .report import Alone, LocalizeReport, Measured
from .search import Localizer, Suspect


def alone(loc: Localizer, suspect: Suspect) -> tuple[Alone, list[Any], list[Any], list[Any]]:
    """Run the suspect alone (see the module docstring); returns the comparison, the inputs used and each side's
    outputs."""
    inputs = suspect.inputs_y
    same_types = suspect.x.inputs == suspect.y.inputs  # shapes and element types (bf16 against f32: not the same)
    out_y = loc.expected.runtime.compile(suspect.y)(inputs)
    out_x = loc.actual.runtime.compile(suspect.x)(inputs if same_types else suspect.inputs_x)
    results = [loc.measure(f"result {k}", t.text(), e, a)
               for k, (t, e, a) in enumerate(zip(suspect.x.outputs, out_y, out_x))]
    compared = "the same operation" if suspect.same_program else "each program's version of the operation"
    found = Alone(loc.expected.label, results, compared)
    if not same_types:
        results.append(Measured("inputs", "", note="the two versions take different operands: each ran on its "
                                                   "own side's values"))
    return found, inputs, out_y, out_x


def write(directory: str | Path, report: LocalizeReport, suspect: Suspect, loc: Localizer, inputs: list[Any],
          out_y: list[Any], out_x: list[Any], platforms: list[str]) -> dict[str, Any]:
    """Write the suspect's files into ``directory`` (see the module docstring); returns what was written."""
    import numpy as np

    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"--localize-out {directory}: cannot create the directory: {e.strerror or e}.") from None
    files: list[str] = []

    def text(name: str, content: str) -> None:
        try:
            atomic_write(out / name, lambda f: f.write(content.encode("utf-8")))
        except OSError as e:
            raise OutputError(f"--localize-out {directory}: cannot write {name}: {e.strerror or e}.") from None
        files.append(name)

    def arrays(name: str, values: dict[str, Any]) -> None:
        try:
            atomic_write(out / name, lambda f: np.savez(f, **values))
        except OSError as e:
            raise OutputError(f"--localize-out {directory}: cannot write {name}: {e.strerror or e}.") from None
        files.append(name)

    def module_text(built: Built) -> str:
        with loc.actual.program.session.ctx:
            return str(built.module.operation.get_asm(enable_debug_info=False))

    wanted = list(dict.fromkeys(platforms))

    def imported(stem: str, built: Built) -> None:
        text(f"{stem}.mlir", module_text(built))
        try:
            import_by(out / f"{stem}.mlir", None, out / f"{stem}.jaxport",
                      ImportRequest(platforms=wanted, function="op", write_manifest=False))
        except Exception as e:  # noqa: BLE001 - the files above stay; the report says why no artifact
            report.notes.append(f"{stem}.jaxport was not written: {str(e).splitlines()[0][:300] if str(e) else e}")
            return
        files.append(f"{stem}.jaxport")

    imported("op", suspect.x)
    if not suspect.same_program:
        imported("counterpart", suspect.y)
    arrays("inputs.npz", {f"arg{k}": np.asarray(v) for k, v in enumerate(inputs)})
    if suspect.x.inputs != suspect.y.inputs:  # side B's version takes other operands: those it ran on
        arrays("inputs_b.npz", {f"arg{k}": np.asarray(v) for k, v in enumerate(suspect.inputs_x)})
    names = ["output"] if len(out_y) == 1 else [str(k) for k in range(len(out_y))]
    arrays("side_a.npz", dict(zip(names, (np.asarray(v) for v in out_y))))
    arrays("side_b.npz", dict(zip(names, (np.asarray(v) for v in out_x))))
    written = {"directory": str(out), "files": sorted(files + ["localize.json", "README.md"]),
               "side_a": report.expected, "side_b": report.actual}
    report.written = written
    text("README.md", _readme(report, suspect, wanted))
    text("localize.json", json.dumps(report.to_json(), indent=2, default=str) + "\n")
    return written


def _readme(report: LocalizeReport, suspect: Suspect, platforms: list[str]) -> str:
    op = report.op()
    if op is None:
        raise VerificationError("nothing was blamed: there is no operation to write.")
    if suspect.same_program and report.actual == "iree":
        how = ["jaxport call op.jaxport --inputs inputs.npz --expect side_a.npz                 # XLA: side A",
               "jaxport call op.jaxport --runtime iree --inputs inputs.npz --expect side_b.npz  # IREE: side B"]
    elif suspect.same_program:
        how = [f"jaxport call op.jaxport --inputs inputs.npz --expect side_a.npz  # where side A ran "
               f"({report.expected_shown})",
               f"jaxport call op.jaxport --inputs inputs.npz --expect side_b.npz  # where side B ran "
               f"({report.actual_shown})"]
    else:
        b_inputs = "inputs.npz" if suspect.x.inputs == suspect.y.inputs else "inputs_b.npz"
        how = ["jaxport call counterpart.jaxport --inputs inputs.npz --expect side_a.npz  # side A's version",
               f"jaxport call op.jaxport --inputs {b_inputs} --expect side_b.npz          # side B's version"]
    lines = [
        f"# {op.named()} at {op.where.shown()}",
        "",
        f"Written by `jaxport verify --localize-out`: the operation where {report.actual} "
        f"({report.actual_shown}) and {report.expected} ({report.expected_shown}) part, alone.",
        "",
        f"- `op.jaxport` / `op.mlir`: the operation, `{op.types()}`, as a jaxport artifact (platforms: "
        f"{', '.join(platforms)}) and as StableHLO text.",
        "- `inputs.npz`: the inputs it took (recorded on side A), named `arg0`, `arg1`, ...",
        f"- `side_a.npz`: its outputs on side A, {report.expected} ({report.expected_shown}).",
        f"- `side_b.npz`: its outputs on side B, {report.actual} ({report.actual_shown}).",
    ]
    if suspect.x.inputs != suspect.y.inputs:
        types = ", ".join(t.text() for t in suspect.x.inputs)
        lines.append(f"- `inputs_b.npz`: the inputs side B's version took (`{types}`, recorded on side B), which side "
                     f"A's does not.")
    if not suspect.same_program:
        lines.append(f"- `counterpart.jaxport` / `counterpart.mlir`: the version of {report.expected}'s program "
                     f"(side A ran it; side B ran `op`).")
    lines += ["", "Each side's numbers, reproduced (a mismatch exits 12):", "", "```sh", *how, "```", "",
              f"Finding: {report.summary()}", ""]
    return "\n".join(lines)
