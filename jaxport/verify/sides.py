"""What ``verify`` compares an artifact's outputs with, and on which inputs.

A :class:`Side` is one reference: the live function (``live``), stored reference outputs (``reference``,
``--expect REF.npz``, named as ``call -o`` writes them), the same artifact run by JAX (``xla``, when the artifact
runs on IREE), another artifact (``other``, ``--against-artifact``), or the same artifact on another platform (named
by it, ``--against-platform``). :func:`given_inputs` reads the inputs ``--inputs`` names (the syntax of
``call``) and solves the dimension variables from their shapes, which makes the one case ``verify`` runs on them.
No JAX at import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import dtypes
from ..artifact import contract
from ..artifact.model import Function
from ..artifact.summary import range_text
from ..errors import InputError, UsageError
from ..run.values import inputs as inputs_mod
from ..run.values import ranges
from ..run.values.npyio import read_named_arrays
from .plan import Case

#: The outputs of a reference for named inputs: ``(name, array)`` pairs in the manifest's order.
Outputs = Callable[[Mapping[str, Any]], list[tuple[str, Any]]]

#: What the user is told to do when an output is NaN/Inf everywhere on both sides.
NONFINITE_FIX = ("choose inputs where the function is finite (--range NAME=LO:HI or --inputs FILE), or accept it "
                 "with --allow-nonfinite")
#: At most this many random inputs are named in :func:`nonfinite_fix`'s advice.
_NAMED_INPUTS = 6


def nonfinite_fix(f: Function, given: Mapping[str, Any] | None) -> str:
    """What the user is told to do when an output of ``f`` is NaN/Inf everywhere on both sides of a case run on
    random inputs: which inputs were drawn, and from what (``given``: the ``--range`` values; else the manifest's
    ``range``, shown as ``inspect`` shows it; else the defaults), so that the one the function cannot take is found,
    then :data:`NONFINITE_FIX` naming the spec's ``range:`` too. Inputs an example range keeps at one value are not
    listed: they are the example's own."""
    drawn = []
    for inp in f.inputs:
        kind = dtypes.BY_NAME[inp.dtype].kind
        if kind == "key":
            continue
        if inp.name in (given or {}):
            lo, hi = given[inp.name]  # type: ignore[index]
            drawn.append(f"{inp.name}: [{lo}, {hi}) (--range)")
        elif inp.range is not None:
            shown = range_text(inp)
            if inp.range_example and shown is not None and not shown.startswith("["):
                continue  # the example's value itself
            drawn.append(f"{inp.name}: {shown}")
        else:
            drawn.append(f"{inp.name}: {_DEFAULT_DRAW[kind]}")
    if not drawn:
        return NONFINITE_FIX
    more = f", and {len(drawn) - _NAMED_INPUTS} more (inspect shows their ranges)" if len(drawn) > _NAMED_INPUTS \
        else ""
    return (f"the inputs were drawn at random ({', '.join(drawn[:_NAMED_INPUTS])}{more}); give those the function "
            f"cannot take values it can (--range NAME=LO:HI, or range: [LO, HI] in the spec), or verify on real inputs "
            f"(--inputs FILE), or accept it with --allow-nonfinite")


#: How an input without a range is drawn, by its dtype's kind (``run.values.ranges.draw``).
_DEFAULT_DRAW = {"float": "standard normal", "complex": "standard normal (both parts)", "int": "0..7", "uint": "0..7",
                 "bool": "true or false"}


@dataclass(frozen=True)
class Side:
    """One reference the artifact's outputs are compared with."""

    label: str  # "live", "reference", "xla", "other" or a platform: how results name this side
    shown: str  # what it is: "model.py:f", "golden/out.npz", "the JAX runtime"
    outputs: Outputs
    #: What ``--localize`` looks inside: the ``LiveFunction``, or a ``Loaded`` run by JAX (another artifact, the
    #: artifact itself for ``xla`` or a platform); None for stored outputs, which have no program.
    source: Any = None
    #: The platform this side runs on when it is not the case's (``--against-platform``).
    platform: str | None = None

    def failed(self, e: str) -> str:
        """A case's error when this side raised ``e``."""
        if self.label == "live":
            return f"the live function raised {e}"
        return f"{self.shown} failed: {e}"


def reference_side(path: str | Path, f: Function) -> Side:
    """Stored reference outputs (``--expect``), read safely now: an ``.npz`` or ``.safetensors`` keyed by output
    name, or a ``.npy`` for a function with one output. A reference that lacks one of the function's outputs, or
    holds an array that is none of them, is refused (``InputError``) naming them."""
    outputs = f.output_names
    stored = read_named_arrays(path, f"--expect {path}", single_name=outputs[0] if len(outputs) == 1 else None,
                               declared={o.name: o.dtype for o in f.outputs})
    missing = [n for n in outputs if n not in stored]
    extra = [n for n in stored if n not in outputs]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"lacks output{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
        if extra:
            parts.append(f"has {', '.join(map(repr, extra))}, which the artifact does not return")
        raise InputError(f"--expect {path}: the reference {' and '.join(parts)} (the artifact's outputs: "
                         f"{', '.join(map(repr, outputs))}); write it with 'jaxport call ARTIFACT --inputs ... -o "
                         f"FILE.npz', which names each array after its output.")

    def reference(arrays: Mapping[str, Any]) -> list[tuple[str, Any]]:
        return [(n, stored[n]) for n in outputs]

    return Side("reference", str(path), reference)


def given_inputs(f: Function, given: Sequence[str] | Mapping[str, Any], check_ranges: bool = False
                 ) -> tuple[dict[str, Any], Case]:
    """The inputs ``--inputs`` names (a list in ``call``'s syntax) or given as arrays by name, checked against the
    function's signature (with ``check_ranges``, their values against the declared ranges too), and the one case
    they make (its dimension values solved from their shapes)."""
    import numpy as np

    if isinstance(given, Mapping):
        arrays = {name: np.asarray(v) for name, v in given.items()}
        for name in arrays:
            if name not in f.input_names:
                raise contract.unknown_input_error(name, f.input_names)
        missing = [n for n in f.input_names if n not in arrays]
        if missing:
            raise inputs_mod.missing_error(f, missing)
        sources: dict[str, str] = {}
    else:
        if isinstance(given, str):
            raise UsageError("inputs: give a list of --inputs values (or arrays by name), not one string.")
        arrays, sources = inputs_mod.gather(f, list(given))
    arrays = inputs_mod.weak_inputs(f, arrays, sources)  # a Python number at export: any integer or float, kept
    infos = [contract.ArrayInfo(n, tuple(int(d) for d in arrays[n].shape), str(arrays[n].dtype), sources.get(n))
             for n in f.input_names]
    dims = contract.check(f, infos)
    if check_ranges:
        ranges.check_values(f, [arrays[n] for n in f.input_names], dims)
    return arrays, Case("--inputs", dict(dims))
