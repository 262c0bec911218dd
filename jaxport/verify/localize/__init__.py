"""Localizing a difference: where two sides' numbers part, as an operation of the program and a line of the
user's code (``verify --localize``, ``jaxport.localize``).

The sides are those ``verify`` compares (an artifact and its live function, two artifacts, two runtimes, two
platforms), each made a program the localizer can look inside (:mod:`.program`), their operations put in
correspondence (:mod:`.align`), the first operation whose results depart while its operands agree found with a
bounded memory (:mod:`.search`), run alone on both sides and written out for a bug report (:mod:`.isolate`), and
reported (:mod:`.report`). :mod:`.case` puts it together for one case. Nothing here imports JAX at import.
"""

#: Bytes of intermediate values one run taps on each side, by default (``verify --localize-budget``).
DEFAULT_TAP_BYTES = 64 << 20
