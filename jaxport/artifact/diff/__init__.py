"""What changed between two artifacts, and whether it breaks their callers (``jaxport diff``).

``compare`` walks two manifests (and, unless told not to, their programs) and classifies every difference as a
``changes.Change``, saying whom it breaks (``CALLERS``, ``REBINDERS`` or no one); ``shapes`` compares the shapes a
function accepts, which ``implication`` decides exactly over integers with ``linear_integer``. Callers import the
comparison from here.
"""

from .changes import CALLERS, REBINDERS
from .compare import (
    BREAKING,
    COMPATIBLE,
    FAIL_ON,
    MAX_EVALUATION_STEPS,
    UNDECIDED,
    Change,
    DiffReport,
    ProgramComparison,
    compare_manifests,
    diff,
    function_pairs,
    program_digest,
)

__all__ = ["BREAKING", "CALLERS", "COMPATIBLE", "FAIL_ON", "MAX_EVALUATION_STEPS", "REBINDERS", "UNDECIDED", "Change",
           "DiffReport", "ProgramComparison", "compare_manifests", "diff", "function_pairs", "program_digest"]
