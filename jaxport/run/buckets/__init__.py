"""Shape buckets, in one place: which concrete shapes to compile (``plan``: ``--dim``, ``--bucket``, or proposed from
the spec's bounds by one rule, ``ladder``), the program specialized to a bucket's shapes (``specialize``), and the
proof that a call may be padded up to a bucket, and that a batch may be split into calls or merged with others
(``rowwise``, ``padding``). ``jaxport compile`` (``run.deploy``), ``jaxport serve`` and the batch engines
(``serve.batching``) import them from here."""

from .plan import (
    MAX_BUCKETS,
    MAX_PROPOSED,
    SINGLE_NAME,
    Plan,
    combined,
    function_names,
    ladder,
    parse_assignments,
    plan,
    propose,
)

__all__ = ["MAX_BUCKETS", "MAX_PROPOSED", "SINGLE_NAME", "Plan", "combined", "function_names", "ladder",
           "parse_assignments", "plan", "propose"]
