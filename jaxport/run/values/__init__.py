"""The values a function takes and gives, outside any runtime: ``npyio`` reads input files that may be hostile,
``inputs`` matches ``--inputs`` to a function's inputs and draws random ones (within ``ranges``), ``numbers`` takes
Python numbers, ``keys`` typed PRNG keys and their key data, ``treefiles`` pytree arguments kept in one file, and
``outputs`` describes and writes results.

The lowest room of ``run``: it imports nothing else of the package, and the loader, ``Loaded`` and every command
build on it. No JAX at module level (typed PRNG keys import it when made).
"""
