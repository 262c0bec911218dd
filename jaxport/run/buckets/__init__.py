"""Shape buckets, the one home of sizes: the rules of the sizes a user gives (``sizes``: ``--dim`` and ``dims=``
for every command and the Python API), the buckets to compile, planned here by one planner per purpose,

- ``plan.plan``: the functions of an IREE module, ``jaxport compile`` (``--dim``, ``--bucket``, or proposed from the
  spec's bounds by one rule, ``ladder``);
- ``served.plan_served``: the sizes a function is served on (``jaxport serve``, the batch engines), and which of them
  a call fits (``served.fitting``);
- ``ahead.plan_warmup``: a warm-up's shape signatures (``jaxport warmup``, ``Loaded.warmup``);
- ``ahead.plan_target``: the executables compiled for another machine (``warmup --target``, ``check --target``),

the program specialized to a bucket's shapes (``specialize``), and the proof that a call may be padded up to a
bucket, and that a batch may be split into calls or merged with others (``rowwise``, each operation's rule in
``oprules``; ``padding``), decided once per program and remembered in the cache directory (``verdicts``). ``jaxport
compile`` (``run.compile.deploy``), ``jaxport serve`` and the batch engines (``serve.batching``) import them from
here. Below the run core: it imports only ``run.values`` (the JAX backend it specializes with, and the loaded
function whose verdicts it keeps, are types)."""

from .plan import (
    MAX_BUCKETS,
    MAX_PROPOSED,
    SINGLE_NAME,
    Plan,
    combined,
    function_names,
    ladder,
    plan,
    propose,
)
from .sizes import parse_assignments

__all__ = ["MAX_BUCKETS", "MAX_PROPOSED", "SINGLE_NAME", "Plan", "combined", "function_names", "ladder",
           "parse_assignments", "plan", "propose"]
