"""Key-signed DSSE envelopes, verified and written with ``cryptography`` alone: what a key's signature bundle is.

A bundle signed with an elliptic-curve key (model signing's ``key`` method, and jaxport's vouches for a cache
directory, ``signing.vouch``) is a sigstore bundle whose ``dsseEnvelope`` holds an in-toto statement (the payload)
and one ECDSA signature over its DSSE pre-authentication encoding, ``DSSEv1 <len(type)> <type> <len(payload)>
<payload>``, hashed with SHA-256, SHA-384 or SHA-512 for a key on P-256, P-384 or P-521 (model-signing 1.x's
choice). Checking one needs no more than that: :func:`verify_envelope` does it without importing the
``model-signing`` library (a few seconds of a command's start on a loaded machine), and accepts exactly what that
library's key verifier accepts, the encoding of model-signing 0.2 included (``pae_compat``); :func:`signed_bundle`
writes the bundle that library writes, so ``model_signing verify key`` reads jaxport's and the reverse.

Trust model: the bundle is hostile until its signature verifies with a key the caller trusts; nothing in it chooses
the key (its hint only selects among the trusted ones).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

__all__ = ["PAYLOAD_TYPE", "curve_hash", "pae", "signed_bundle", "verify_envelope"]

PAYLOAD_TYPE = "application/vnd.in-toto+json"
MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def pae(payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding of an in-toto payload (DSSE protocol 1.0)."""
    return b" ".join([f"DSSEv1 {len(PAYLOAD_TYPE)} {PAYLOAD_TYPE} {len(payload)}".encode(), payload])


def pae_compat(payload: bytes) -> bytes:
    """The encoding model-signing 0.2 signed (its payload's ``repr`` inside the text): still accepted by the
    library's verifier, so accepted here."""
    return f"DSSEV1 {len(PAYLOAD_TYPE)} {PAYLOAD_TYPE} {len(payload)} {payload!r}".encode()


def curve_hash(key: Any) -> Any:
    """The hash model signing signs with on ``key``'s curve (a ``cryptography`` elliptic-curve key)."""
    from cryptography.hazmat.primitives import hashes

    size = key.curve.key_size
    return hashes.SHA256() if size <= 256 else hashes.SHA384() if size <= 384 else hashes.SHA512()


def verify_envelope(payload: bytes, signature: bytes, public_key: Any) -> bool:
    """Whether ``signature`` is ``public_key``'s ECDSA signature over the DSSE encoding of ``payload``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec

    algorithm = ec.ECDSA(curve_hash(public_key))
    for encoded in (pae(payload), pae_compat(payload)):
        try:
            public_key.verify(signature, encoded, algorithm)
            return True
        except (InvalidSignature, ValueError):
            continue
    return False


def signed_bundle(statement: dict[str, Any], private_key: Any) -> bytes:
    """The sigstore bundle of ``statement`` signed with ``private_key`` (an elliptic-curve key): the bytes model
    signing's key signer writes, its key hint the sha256 of the public key's PEM."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    payload = json.dumps(statement, indent=2).encode()
    signature = private_key.sign(pae(payload), ec.ECDSA(curve_hash(private_key)))
    pem = private_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    doc = {"mediaType": MEDIA_TYPE,
           "verificationMaterial": {"publicKey": {"hint": hashlib.sha256(pem).hexdigest()}, "tlogEntries": []},
           "dsseEnvelope": {"payload": base64.b64encode(payload).decode(), "payloadType": PAYLOAD_TYPE,
                            "signatures": [{"sig": base64.b64encode(signature).decode(), "keyid": ""}]}}
    return json.dumps(doc).encode()
