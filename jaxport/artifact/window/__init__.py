"""Which JAX can read an artifact: its compatibility window, computed from the JAX that wrote it.

``releases`` is the one table of JAX releases and their dates; ``compat`` dates the producer's JAX and derives the
window of JAX releases that load its artifacts; ``age`` holds the two policy rules on the producer's age; ``payload``
reads a function's program with the JAX installed, refusing one outside its reach with the window in the message.
Nothing here imports JAX at module level, and this ``__init__`` imports nothing: ``jaxport inspect`` shows the window
with ``compat`` alone.
"""
