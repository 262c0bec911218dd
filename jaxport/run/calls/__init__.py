"""``jaxport call`` as a library: ``calling`` (``CallRequest`` -> ``call`` -> ``CallReport``), ``report`` (the
``call --json`` document), ``streaming`` (``--batch-size``: inputs cut along their leading axis) and ``expect``
(outputs compared with references). It builds on the whole of ``run``; nothing below it imports it.
``jaxport.run.call`` reaches ``calling`` without importing it with the rest of ``run``.
"""
