"""``jaxport serve``'s server, on the engine-free core (``jaxport.serve``), which imports nothing of it: the models it
serves, opened, checked and warmed up from its arguments (``models``), the addresses it listens on, checked before
anything compiles (``ports``; ``unix``: ``--uds``), the Open Inference Protocol (v2) decoded and encoded without kserve
(``oip``), and the kserve transport (extra ``jaxport[serve]``): ``kserve_server`` over ``registry`` (the served models),
``rest``, ``grpc_service``, ``metrics`` and ``lifecycle``, which import kserve and its web stack from
``kserve_imports``, imported only once a server's arguments are checked."""
