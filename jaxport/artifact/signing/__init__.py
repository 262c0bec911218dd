"""Who made an artifact: signatures in the OpenSSF model-signing format, a file beside the artifact.

``bundle`` reads and describes a signature bundle; ``check`` verifies one against the signers a caller trusts (what
``--require-signature`` opens an artifact with); ``sign`` writes one. The cryptography is the ``model-signing``
library's (the extra ``jaxport[sign]``), imported only when a signature is made or checked. Import from the module
that does the job: ``jaxport inspect`` reads a bundle without the verifier.
"""
