"""The bounds of a server's settings, said once: ``jaxport serve`` declares its options with them
(``jaxport_cli.serving``), and the library refuses a value outside them as a ``UsageError`` where it takes one
(``transport.models.Serving.check``, ``batcher.Batcher``), so that no value that is not a finite number in its range
reaches a thread: a batching window of ``inf`` once killed the batching thread, and one of NaN turned batching off.
Engine-free and light: the command line imports it to declare its options.
"""

from __future__ import annotations

import numbers

from ..errors import UsageError

#: The longest a request waits for others to share its call (``--batch-window-ms``), in milliseconds: a minute.
MAX_WINDOW_MS = 60_000
#: The most seconds of compiling before ready beyond what each model must compile (``--warmup-budget-s``): a day.
MAX_WARMUP_BUDGET_S = 86_400
#: The most buckets compiled after warm-up that a model keeps (``--max-executables``): as many as a bucket plan may
#: hold (``run.buckets.served.MAX_PLANNED``).
MOST_EXECUTABLES = 4096
#: The most rows one batched call takes (``--max-batch-rows``): a dimension's largest value, 2**62.
MAX_BATCH_ROWS = 1 << 62


def check_number(name: str, value: object, low: float, high: float, *, whole: bool = False) -> None:
    """Refuse ``value`` unless it is a number from ``low`` to ``high`` (a whole one with ``whole``; a bool is none):
    a ``UsageError`` naming ``name``, the value and the range. NaN and the infinities are never in a range."""
    kind = numbers.Integral if whole else numbers.Real
    within = not isinstance(value, bool) and isinstance(value, kind) and \
        low <= value <= high  # type: ignore[operator]  # a Real compares; NaN: every comparison is false
    if not within:
        number = "a whole number" if whole else "a number"
        raise UsageError(f"{name}={value!r}: give {number} from {_shown(low)} to {_shown(high)}.")


def _shown(bound: float) -> str:
    return "2**62" if bound == 1 << 62 else f"{bound:g}"
