"""Arrays in files: ``npy`` reads ``.npy`` and ``.npz`` files that may be hostile, without ``numpy.load``;
``safetensors`` is the one ``.safetensors`` reader and writer; ``subbyte`` packs the elements of the sub-byte types
(``int4``, ``uint4``, ``float4_e2m1fn``) several to a byte, as those files, an artifact's weights and IREE's buffers
store them.

Part of the foundation layer (``scripts/check_layers.py``): bound weights at export, ``call``'s inputs and outputs,
``extract --weights`` and the runtimes all read or write these. The package's ``__init__`` imports nothing (numpy
is imported inside the functions that need it).
"""
