"""``call --expect REF``: a call's outputs compared with stored reference outputs (named as ``call -o`` writes them),
with ``verify``'s comparison (``jaxport.verify.compare``) and its table and JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxport.errors import InputError, VerificationError
from jaxport.run.npyio import read_named_arrays
from jaxport.verify.compare import OutputResult, compare, tolerance

from . import render
from .render import escape

#: How the two sides of a comparison are named: the artifact's outputs against the reference file's.
SIDES = ("artifact", "reference")


def _listed(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names) or "(none)"


def read_reference(path: str | Path, names: list[str], dtypes: list[str]) -> dict[str, Any]:
    """The reference arrays of ``path`` for the outputs ``names`` (of ``dtypes``, the function's; a raw void array
    is read as the output's bfloat16 or float8): exactly one per output, or an ``InputError`` naming the missing and
    the extra ones."""
    where = f"--expect {path}"
    arrays = read_named_arrays(path, where, single_name=names[0] if len(names) == 1 else None,
                               declared=dict(zip(names, dtypes)))
    missing = [n for n in names if n not in arrays]
    extra = [n for n in arrays if n not in names]
    if missing:
        raise InputError(f"{where}: no reference for output{'s' if len(missing) > 1 else ''} {_listed(missing)}; the "
                         f"file holds {_listed(list(arrays))}. Write references with 'jaxport call -o FILE' (names "
                         f"are the output names: {_listed(names)}).")
    if extra:
        raise InputError(f"{where}: {_listed(extra)} {'is not an output' if len(extra) == 1 else 'are not outputs'} "
                         f"of the function (its outputs: {_listed(names)}); the file must hold exactly the outputs.")
    return arrays


@dataclass
class Expectation:
    """Each output compared with its reference; :meth:`as_dict` is the ``expect`` section of ``call --json``."""

    reference: str
    allow_nonfinite: bool
    outputs: list[OutputResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    def as_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "passed": self.passed, "allow_nonfinite": self.allow_nonfinite,
                "outputs": [o.as_dict() for o in self.outputs]}

    def error(self) -> VerificationError:
        """The failure: each output that differs, its worst value and the tolerance."""
        failed = [o for o in self.outputs if not o.passed]
        what = "; ".join(o.describe() for o in failed[:5]) + (f"; and {len(failed) - 5} more" if len(failed) > 5
                                                                else "")
        hint = " (add --allow-nonfinite to accept outputs that are NaN/Inf everywhere on both sides)" if any(
            o.inconclusive and not o.problem and not o.mismatched for o in failed) else ""
        return VerificationError(f"--expect {self.reference}: {len(failed)} of {len(self.outputs)} outputs differ "
                                 f"from the reference: {what}{hint}.")


def check(reference: str | Path, leaves: list[tuple[str, Any]], native: list[str], refs: dict[str, Any], *,
          atol: float | None, rtol: float | None, allow_nonfinite: bool) -> Expectation:
    """Compare each output (``leaves``, as written) with its reference in ``refs``; the default tolerances are
    those of the function's own output dtype (``native``), so that ``--output-dtype f32`` does not tighten them."""
    import numpy as np

    result = Expectation(str(reference), allow_nonfinite)
    for (name, value), dtype in zip(leaves, native):
        at, rt = tolerance(dtype, atol, rtol)
        ref, out = np.asarray(refs[name]), np.asarray(value)
        if str(ref.dtype) == dtype != str(out.dtype):  # --output-dtype converted the output: convert its reference
            ref = ref.astype(out.dtype)
        o = compare(name, ref, out, at, rt, allow_nonfinite=allow_nonfinite, sides=SIDES)
        if o.problem and ref.dtype != out.dtype and ref.dtype == np.float32 and str(out.dtype) != "float32":
            o.problem += " (add --output-dtype f32 to compare float32 references)"
        result.outputs.append(o)
    return result


def _number(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}"


def render_table(expectation: Expectation) -> None:
    """The comparison as a table, like ``verify``'s: one row per output."""
    from rich.table import Table

    out = render.stdout()
    t = Table(title=f"expected: {escape(expectation.reference)}", title_justify="left", show_edge=False)
    for col in ("output", "max abs err", "max rel err", "tolerance", "result"):
        t.add_column(col, justify="right" if col.startswith("max") else "left")
    for o in expectation.outputs:
        if o.problem:
            result = f"[red]FAIL[/] {escape(o.problem)}"
        elif o.mismatched:
            result = f"[red]FAIL[/] {o.mismatched}/{o.size} values"
        elif o.inconclusive:
            result = ("[yellow]inconclusive[/] (allowed)" if o.passed else "[red]FAIL[/] inconclusive") + \
                f": {escape(o.inconclusive)}"
        else:
            result = "[green]ok[/]"
        t.add_row(escape(o.name), _number(o.max_abs_error), _number(o.max_rel_error),
                  escape(o.tolerance_text("|x|")), result)
    out.print(t)
    if expectation.passed:
        out.print(f"[green]OK[/]: {len(expectation.outputs)} output{'s' if len(expectation.outputs) != 1 else ''} "
                  f"match the reference.")
    else:
        failed = sum(not o.passed for o in expectation.outputs)
        out.print(f"[red]FAILED[/]: {failed} of {len(expectation.outputs)} outputs differ from the reference.")
