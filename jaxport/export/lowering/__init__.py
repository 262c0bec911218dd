"""What runs JAX's tracer: a loaded function and its spec lowered to a ``jax.export.Exported`` (``lower``), with
arguments shaped like a value (``like``), the returned tree recorded (``returns``) and a hint for a failure jaxport
recognises (``hints``); the VJP programs serialized with it (``gradients``); a program exported again by the running
JAX (``relower``, for ``upgrade``); all in one environment, so that the bytes do not depend on the caller
(``tracing``). On ``weights`` and ``entry``."""
