"""Keys and certificates for the signature tests, made at test time (never committed): EC P-256 key pairs, and a
small PKI (a root CA and a leaf certificate for code signing)."""

from __future__ import annotations

import base64
import datetime
import json
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def key_pair(directory: Path, name: str) -> tuple[Path, Path]:
    """``NAME.pem`` (private, PKCS#8) and ``NAME.pub`` (SubjectPublicKeyInfo) in ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = directory / f"{name}.pem", directory / f"{name}.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def _certificate(subject: str, key, issuer: str, issuer_key, ca: bool, email: str | None = None):
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                                        critical=True)
    else:
        builder = builder.add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                                        critical=True)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        if email:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.RFC822Name(email)]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def pki(directory: Path) -> dict[str, Path]:
    """A root CA (``ca.crt``) and a leaf for ``ci@example.com`` (``leaf.pem``, ``leaf.crt``) in ``directory``."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("jaxport test root", ca_key, "jaxport test root", ca_key, ca=True)
    leaf = _certificate("ci signer", leaf_key, "jaxport test root", ca_key, ca=False, email="ci@example.com")
    out = {"ca": directory / "ca.crt", "leaf_key": directory / "leaf.pem", "leaf": directory / "leaf.crt"}
    out["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out["leaf"].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    out["leaf_key"].write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM,
                                                       serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    return out


def keyless_bundle(bundle: Path, directory: Path) -> bytes:
    """The key-signed ``bundle`` rewritten as a keyless Sigstore one: a (self-signed) certificate for an identity and
    a transparency-log entry in place of the key hint; what a Sigstore-signed bundle's shape is."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate("sigstore", key, "sigstore-intermediate", key, ca=False, email="dev@example.com")
    doc = json.loads(bundle.read_text())
    der = cert.public_bytes(serialization.Encoding.DER)
    doc["verificationMaterial"] = {"certificate": {"rawBytes": base64.b64encode(der).decode()},
                                   "tlogEntries": [{"logIndex": "1", "kindVersion": {"kind": "dsse",
                                                                                     "version": "0.0.1"}}]}
    return json.dumps(doc).encode()
