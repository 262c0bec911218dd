"""Whom a caller trusts to sign artifacts: :class:`Trust` (public keys, CA certificates, Sigstore identities), and
the trusted files read as keys or certificates (:func:`read_trusted`), with the key ids model signing names keys by
(:func:`key_id`). The cryptography is ``cryptography``'s, imported inside the functions that need it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._fsio import read_file, shown_path
from ...errors import UsageError

__all__ = ["CURVES", "MAX_KEY_BYTES", "Identity", "Trust", "Trusted", "key_id", "key_kind", "private_key",
           "read_trusted", "trust"]

#: The largest file of trusted keys or certificates read (a CA bundle such as certifi's is about 300 kB).
MAX_KEY_BYTES = 4 << 20


@dataclass(frozen=True)
class Identity:
    """A signer trusted by its certificate: ``identity`` (an e-mail address or URI of the certificate's subject
    alternative names, or its common name) issued by ``issuer`` (the OpenID Connect issuer of a keyless Sigstore
    certificate; for a PKI's certificate, the common name of its issuer; None: any, for a PKI's)."""

    identity: str
    issuer: str | None = None

    def text(self) -> str:
        return self.identity + (f" (issuer {self.issuer})" if self.issuer else "")


@dataclass(frozen=True)
class Trust:
    """The signers a caller trusts: PEM files of public keys or of CA certificates (``keys``), and certificate
    identities (:class:`Identity`), a policy's ``signature: {keys: [...], certificate_identities: [...]}``."""

    keys: tuple[Path, ...] = ()
    identities: tuple[Identity, ...] = ()
    #: Where the trust comes from, for messages: ``--require-signature``, ``the policy P``.
    source: str = "the trusted keys"

    def __post_init__(self) -> None:
        if not self.keys and not self.identities:
            raise UsageError("a signature check needs a trusted public key (or CA certificate) or a certificate "
                             "identity; none was given.")


def trust(keys: str | Path | Iterable[str | Path] | Trust, source: str = "--require-signature") -> Trust:
    """A :class:`Trust` of a key's path or several (what ``require_signature=`` takes), or ``keys`` itself."""
    if isinstance(keys, Trust):
        return keys
    paths = (keys,) if isinstance(keys, (str, os.PathLike)) else tuple(keys)
    if not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise UsageError("require_signature takes the paths of trusted public keys (PEM), not "
                         f"{type(next(p for p in paths if not isinstance(p, (str, os.PathLike)))).__name__}.")
    return Trust(tuple(Path(p) for p in paths), source=source)


@dataclass(frozen=True)
class Trusted:
    """A trusted PEM file: its public keys (with their key ids) or its certificates."""

    path: Path
    keys: tuple[tuple[str, Any], ...]  # (key id, public key)
    certificates: int


#: The curves model signing's keys are on (P-256, P-384, P-521).
CURVES = ("secp256r1", "secp384r1", "secp521r1")


def key_kind(key: Any) -> str:
    """What kind of key ``key`` (a ``cryptography`` key object) is, for a message: "an RSA key", "a secp256k1 key"."""
    from cryptography.hazmat.primitives.asymmetric import ec

    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey):
        return f"an elliptic-curve key on {key.curve.name}"
    kind = type(key).__name__.lstrip("_").removesuffix("PublicKey").removesuffix("PrivateKey") or "unknown"
    return f"{'an' if kind[0] in 'AEIOURX' else 'a'} {kind} key"


def key_id(public_key: Any) -> str:
    """The key id of a public key (a ``cryptography`` key, or a PEM file's path): the sha256 of its PEM
    (SubjectPublicKeyInfo), model signing's key hint."""
    from cryptography.hazmat.primitives import serialization

    if isinstance(public_key, (str, os.PathLike)):
        public_key = read_trusted(Path(public_key)).keys[0][1]
    pem = public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def read_trusted(path: Path) -> Trusted:
    """A trusted key file: one public key (or a private key's public half), or CA certificates; ``UsageError``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    shown = shown_path(path)
    data = read_file(path, UsageError, MAX_KEY_BYTES,
                     lambda size: f"{shown}: {size} bytes, more than a key file holds ({MAX_KEY_BYTES} at most).",
                     missing="trusted key file")
    if b"-----BEGIN CERTIFICATE-----" in data:
        try:
            certs = x509.load_pem_x509_certificates(data)
        except ValueError:
            raise UsageError(f"{shown}: not a PEM certificate (chain) that can be read.") from None
        return Trusted(path, (), len(certs))
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise UsageError(f"{shown}: not a PEM public key (-----BEGIN PUBLIC KEY-----) nor a CA certificate; give the "
                         f"public key the artifact was signed for (openssl ec -in PRIVATE.pem -pubout).") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in CURVES:
        raise UsageError(f"{shown}: {key_kind(key)}; model signing uses elliptic-curve keys on P-256, P-384 or P-521.")
    return Trusted(path, ((key_id(key), key),), 0)


def private_key(path: Path, password: str | None) -> Any:
    """The elliptic-curve private key (PEM) at ``path`` that artifacts and vouches are signed with; ``UsageError``
    naming the file for one that cannot sign (unreadable, a wrong password, another kind of key or curve)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    shown = shown_path(path)
    data = read_file(path, UsageError, MAX_KEY_BYTES,
                     lambda size: f"{shown}: {size} bytes, more than a key file holds.", missing="private key")
    try:
        key = serialization.load_pem_private_key(data, password.encode() if password is not None else None)
    except TypeError as e:  # encrypted without a password, or a password for a key that has none
        raise UsageError(f"{shown}: {str(e).rstrip('.')}; give the key's password with --password-env VAR.") \
            from None
    except ValueError:
        raise UsageError(f"{shown}: not a PEM private key (-----BEGIN PRIVATE KEY----- or -----BEGIN EC PRIVATE "
                         f"KEY-----) that can be read, or the password is wrong.") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name not in CURVES:
        raise UsageError(f"{shown}: {key_kind(key)}; model signing signs with elliptic-curve keys on P-256, P-384 or "
                         f"P-521 (openssl ecparam -name prime256v1 -genkey -noout -out PRIVATE.pem).")
    return key
