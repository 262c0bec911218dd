"""A call's outputs compared with stored reference outputs (``call --expect REF``, ``expect=`` of
:class:`jaxport.run.calls.calling.CallRequest`): :func:`read` reads the references before anything runs, and
:meth:`References.compare` compares the outputs with them by the rule of :mod:`jaxport.tolerance`, which ``verify``
compares by too.

The reference file is untrusted: it is read by ``run.values.npyio.read_named_arrays`` (regular files only, capped reads,
never unpickled), before anything runs, and must hold exactly one array per output, named as ``call -o`` names
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._text import plural
from ...errors import InputError
from ...tolerance import OutputResult, compare, tolerance
from ..values.npyio import read_named_arrays

__all__ = ["SIDES", "Expectation", "References", "read"]

#: How the two sides of a comparison are named: the artifact's outputs against the reference file's.
SIDES = ("artifact", "reference")
#: The advice for outputs that are NaN/Inf everywhere on both sides, given once however many there are.
NONFINITE_ADVICE = "add --allow-nonfinite to accept outputs that are NaN/Inf everywhere on both sides"


def _listed(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names) or "(none)"


@dataclass
class References:
    """The reference arrays of a file, one per output, read before the call."""

    path: str
    arrays: dict[str, Any]

    def compare(self, leaves: list[tuple[str, Any]], native: list[str], *, atol: float | None, rtol: float | None,
                allow_nonfinite: bool) -> Expectation:
        """Compare each output (``leaves``, as written) with its reference; the default tolerances are those of the
        function's own output dtype (``native``), so that ``output_dtype="f32"`` does not tighten them."""
        import numpy as np

        result = Expectation(self.path, allow_nonfinite)
        for (name, value), dtype in zip(leaves, native):
            at, rt = tolerance(dtype, atol, rtol)
            ref, out = np.asarray(self.arrays[name]), np.asarray(value)
            if str(ref.dtype) == dtype != str(out.dtype):  # the output was converted (f32): convert its reference
                ref = ref.astype(out.dtype)
            o = compare(name, ref, out, at, rt, allow_nonfinite=allow_nonfinite, sides=SIDES)
            if o.problem and ref.dtype != out.dtype and ref.dtype == np.float32 and str(out.dtype) != "float32":
                o.problem += " (add --output-dtype f32 to compare float32 references)"
            result.outputs.append(o)
        return result


def read(path: str | Path, names: list[str], dtypes: list[str]) -> References:
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
    return References(str(path), arrays)


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

    def verdict(self) -> str:
        """``1 output matches the reference``, ``2 of 3 outputs differ from the reference``, ``1 of 1 output is
        inconclusive``: the count, in agreement (as ``verify`` counts cases), with what the failed outputs did."""
        return verdict(self.outputs)

    def failure(self) -> str:
        """What failed, as the message of the call's ``ReferenceMismatch`` (``jaxport.run.calls.report``): each output
        that differs, its worst value and the tolerance; the advice for outputs that are NaN/Inf everywhere, once."""
        failed = [o for o in self.outputs if not o.passed]
        unsure = [o for o in failed if _inconclusive(o)]
        described = [f"output {o.name!r}: {o.inconclusive}" if o in unsure else o.describe() for o in failed]
        what = "; ".join(described[:5]) + (f"; and {len(failed) - 5} more" if len(failed) > 5 else "")
        hint = f" ({NONFINITE_ADVICE})" if unsure else ""
        return f"--expect {self.reference}: {self.verdict()}: {what}{hint}."


def verdict(outputs: Sequence[OutputResult]) -> str:
    """The verdict of outputs compared with their references (:attr:`Expectation.outputs`), as
    :meth:`Expectation.verdict` says it."""
    total = len(outputs)
    failed = [o for o in outputs if not o.passed]
    if not failed:
        return f"{plural(total, 'output')} match{'es' if total == 1 else ''} the reference"
    unsure = [o for o in failed if _inconclusive(o)]
    differ = len(failed) - len(unsure)
    if not differ:
        return f"{len(unsure)} of {plural(total, 'output')} {'is' if total == 1 else 'are'} inconclusive"
    text = f"{differ} of {plural(total, 'output')} differ{'s' if total == 1 else ''} from the reference"
    return text + (f" and {len(unsure)} {'is' if len(unsure) == 1 else 'are'} inconclusive" if unsure else "")


def _inconclusive(output: OutputResult) -> bool:
    """Whether a failed output failed only by being NaN/Inf everywhere."""
    return bool(output.inconclusive) and not output.problem and not output.mismatched
