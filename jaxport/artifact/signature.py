"""Signatures of artifacts in the OpenSSF model-signing format: who made an artifact, checked before it runs.

A signature is a sigstore bundle beside the artifact (``ARTIFACT.sig`` by default, :func:`signature_path`): a DSSE
envelope over an in-toto statement that names the signed file and gives its sha256, signed with an elliptic-curve
key, a certificate of a PKI, or keyless through Sigstore; what ``model_signing sign`` writes and ``model_signing
verify`` reads (the ``model-signing`` library does the cryptography: the optional extra ``jaxport[sign]``).
:func:`jaxport.artifact.signing.sign` writes one; :func:`verify_signature` checks one against the signers a caller
trusts (:class:`Trust`), and :func:`describe` says what bundle sits beside an artifact without verifying it (what
``inspect`` shows).

Trust model: the bundle is hostile until verified, and so is the artifact. A bundle is read whole, at most
:data:`MAX_BUNDLE_BYTES`, as strict JSON, and its shape is checked before any library sees it. The artifact itself is
only hashed (as model signing hashes a file: its bytes), never opened as an artifact, until its signature has
verified: a command that requires a signature reads nothing else of it first. The statement must name the
artifact's own file name (a bundle moved beside another file, even one with the same bytes, is refused), and a
signer is trusted only by what the caller gives: a public key, a CA certificate, or a Sigstore identity, never by
what the bundle says of itself. Keyless bundles are verified offline only, against the Sigstore trust root the local
``sigstore`` installation holds; jaxport never fetches one while loading.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import io
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._fsio import read_file, shown_path
from .._json import strict_json
from ..errors import PlatformError, SignatureError, UsageError

__all__ = ["INSTALL", "MAX_BUNDLE_BYTES", "SIGNATURE_SUFFIX", "Bundle", "Identity", "Trust", "Verified",
           "describe", "file_sha256", "key_id", "read_bundle", "require_extra", "signature_path", "trust",
           "verify_signature"]

#: The largest bundle read: a key-signed bundle is about 2 kB, a certificate chain's or Sigstore's some 10 kB.
MAX_BUNDLE_BYTES = 1 << 20
#: The largest file of trusted keys or certificates read (a CA bundle such as certifi's is about 300 kB).
MAX_KEY_BYTES = 4 << 20
#: The name of an artifact's signature: ``ARTIFACT`` + this.
SIGNATURE_SUFFIX = ".sig"
#: What to install for signatures.
INSTALL = "pip install 'jaxport[sign]'"
_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle"
_PAYLOAD_TYPE = "application/vnd.in-toto+json"
_STATEMENT = "https://in-toto.io/Statement/v1"
_PREDICATE = "https://model_signing/signature/v1.0"


def require_extra(what: str) -> None:
    """Refuse (``PlatformError``, exit 10) when the optional extra ``jaxport[sign]`` is not installed; ``what``
    says what needed it (``signing``, ``verifying a signature``)."""
    import importlib.util

    missing = [m for m in ("model_signing", "OpenSSL") if importlib.util.find_spec(m) is None]
    if missing:
        names = {"model_signing": "model-signing", "OpenSSL": "pyopenssl"}
        raise PlatformError(f"{what} needs the optional extra jaxport[sign] ({', '.join(names[m] for m in missing)} "
                            f"is not installed): {INSTALL}.")


def signature_path(artifact: str | Path, signature: str | Path | None = None) -> Path:
    """Where the signature of ``artifact`` is: ``signature`` when given, else ``ARTIFACT.sig`` beside it."""
    return Path(signature) if signature is not None else Path(os.fspath(artifact) + SIGNATURE_SUFFIX)


# --- the bundle, read without the library --------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """A signature bundle, its shape checked (not its signature: :func:`verify_signature`)."""

    path: Path
    #: How it was signed: ``key`` (an elliptic-curve key pair), ``certificate`` (a PKI's certificate chain) or
    #: ``keyless`` (Sigstore, a short-lived certificate for an identity, logged in Rekor).
    method: str
    #: The signer as the bundle names it: for a key, model signing's key hint (the sha256 of the public key's PEM,
    #: :func:`key_id`; None in bundles of model-signing before 1.0); for a certificate, its sha256 fingerprint.
    key_id: str | None
    #: The file name the statement signs (model signing's model name: the signed path's last component).
    subject: str
    #: (name, algorithm, digest) of each signed resource: ``(".", "sha256", HEX)`` for one file.
    resources: tuple[tuple[str, str, str], ...]
    #: How the signed file was hashed (``method``, ``hash_type``, ...), as the statement says.
    serialization: Mapping[str, Any]
    #: The signing certificate and its chain, DER (empty for a key).
    certificates: tuple[bytes, ...] = field(repr=False)
    raw: bytes = field(repr=False)

    @property
    def signed_sha256(self) -> str | None:
        """The sha256 of the whole signed file, when the statement gives it (one file, hashed whole with sha256)."""
        if self.serialization.get("method") == "files" and self.serialization.get("hash_type") == "sha256":
            digests = [d for n, a, d in self.resources if n == "." and a == "sha256"]
            return digests[0] if len(self.resources) == 1 and digests else None
        return None

    def signer_text(self) -> str:
        """``key 1f2e3d4c5b6a7988``, ``certificate 0a1b...`` or ``keyless (Sigstore)``: the signer, short."""
        if self.method == "key":
            return f"key {self.key_id[:16]}" if self.key_id else "a key (no key id: a bundle of model-signing < 1.0)"
        kind = "certificate" if self.method == "certificate" else "keyless (Sigstore) certificate"
        return f"{kind} {self.key_id[:16]}" if self.key_id else kind


def _bad(path: Path, what: str) -> SignatureError:
    return SignatureError(f"{shown_path(path)}: not a model-signing signature bundle: {what}. Sign the artifact "
                          f"again (jaxport sign ARTIFACT --key PRIVATE.pem, or model_signing sign).")


def _field(node: Any, key: str, kind: type, path: Path, where: str) -> Any:
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        shown = {"str": "a string", "dict": "an object", "list": "a list"}[kind.__name__]
        raise _bad(path, f"{where}{key} is not {shown}")
    return value


def _b64(text: str, path: Path, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(path, f"{what} is not base64") from None


def _certificates(material: dict[str, Any], path: Path) -> tuple[str, tuple[bytes, ...]]:
    """The method of a bundle's verification material and its certificates (DER)."""
    tlog = material.get("tlogEntries")
    logged = isinstance(tlog, list) and bool(tlog)
    if "publicKey" in material:
        _field(material, "publicKey", dict, path, "verificationMaterial.")
        return "key", ()
    if "x509CertificateChain" in material:
        chain = _field(_field(material, "x509CertificateChain", dict, path, "verificationMaterial."),
                       "certificates", list, path, "verificationMaterial.x509CertificateChain.")
        ders = tuple(_b64(_field(c, "rawBytes", str, path, "a certificate's "), path, "a certificate")
                     for c in chain)
        if not ders:
            raise _bad(path, "its certificate chain is empty")
        return ("keyless" if logged else "certificate"), ders
    if "certificate" in material:
        cert = _field(material, "certificate", dict, path, "verificationMaterial.")
        return "keyless", (_b64(_field(cert, "rawBytes", str, path, "the certificate's "), path, "the certificate"),)
    raise _bad(path, "its verificationMaterial holds no public key and no certificate")


def parse_bundle(raw: bytes, path: Path) -> Bundle:
    """A bundle of these bytes (read from ``path``), its shape checked; ``SignatureError`` otherwise."""
    try:
        doc = strict_json(raw)
    except ValueError as e:
        raise _bad(path, f"not valid JSON ({str(e)[:120]}); it may be truncated") from None
    if not isinstance(doc, dict):
        raise _bad(path, "not a JSON object")
    media = _field(doc, "mediaType", str, path, "")
    if not media.startswith(_MEDIA_TYPE):
        raise _bad(path, f"its mediaType is {media[:80]!r}, not a sigstore bundle's")
    method, certs = _certificates(_field(doc, "verificationMaterial", dict, path, ""), path)
    envelope = _field(doc, "dsseEnvelope", dict, path, "")
    if _field(envelope, "payloadType", str, path, "dsseEnvelope.") != _PAYLOAD_TYPE:
        raise _bad(path, f"its payload is not an in-toto statement ({_PAYLOAD_TYPE})")
    signatures = _field(envelope, "signatures", list, path, "dsseEnvelope.")
    if len(signatures) != 1:
        raise _bad(path, f"it holds {len(signatures)} signatures, not one")
    _b64(_field(signatures[0], "sig", str, path, "dsseEnvelope.signatures[0]."), path, "the signature")
    payload = _b64(_field(envelope, "payload", str, path, "dsseEnvelope."), path, "the payload")
    try:
        statement = strict_json(payload)
    except ValueError as e:
        raise _bad(path, f"its payload is not JSON ({str(e)[:120]})") from None
    if not isinstance(statement, dict) or statement.get("_type") != _STATEMENT \
            or statement.get("predicateType") != _PREDICATE:
        raise _bad(path, "its payload is not a model-signing statement (in-toto Statement v1, predicate "
                         f"{_PREDICATE})")
    subjects = _field(statement, "subject", list, path, "the statement's ")
    if len(subjects) != 1:
        raise _bad(path, f"its statement names {len(subjects)} subjects, not one")
    subject = _field(subjects[0], "name", str, path, "the statement's subject ")
    predicate = _field(statement, "predicate", dict, path, "the statement's ")
    resources = tuple((_field(r, "name", str, path, "a resource's "), _field(r, "algorithm", str, path,
                                                                             "a resource's "),
                       _field(r, "digest", str, path, "a resource's "))
                      for r in _field(predicate, "resources", list, path, "the statement's predicate "))
    serialization = _field(predicate, "serialization", dict, path, "the statement's predicate ")
    if method == "key":
        hint = doc["verificationMaterial"]["publicKey"].get("hint")
        key = hint if isinstance(hint, str) and hint else None
    else:
        key = hashlib.sha256(certs[0]).hexdigest()
    return Bundle(path, method, key, subject, resources, serialization, certs, raw)


def _too_big(path: Path) -> Any:
    return lambda size: (f"{shown_path(path)}: the signature bundle is {size} bytes; bundles are capped at "
                         f"{MAX_BUNDLE_BYTES} bytes (1 MiB; one of model signing is a few kB), so this is not one. "
                         f"Sign the artifact again.")


def read_bundle(artifact: str | Path, signature: str | Path | None = None) -> Bundle:
    """The bundle that signs ``artifact`` (at ``signature``, default ``ARTIFACT.sig``), read and its shape checked;
    ``SignatureError`` when there is none, or it is no bundle."""
    path = signature_path(artifact, signature)
    if not os.path.lexists(path):
        art = shown_path(artifact)
        raise SignatureError(f"{art}: no signature: {shown_path(path)} not found. Sign the artifact with 'jaxport "
                             f"sign {art} --key PRIVATE.pem', or give the bundle's path with --signature PATH "
                             f"(signature= in Python).")
    raw = read_file(path, SignatureError, MAX_BUNDLE_BYTES, _too_big(path), missing="signature bundle",
                    directory="a signature bundle", reading="the signature bundle")
    return parse_bundle(raw, path)


def describe(artifact: str | Path, signature: str | Path | None = None) -> Bundle | str | None:
    """What sits at the signature path of ``artifact``, unverified (``inspect``): its :class:`Bundle`, the reason it
    is none (a string), or None when there is no file. Reads the bundle only; needs no extra."""
    path = signature_path(artifact, signature)
    if signature is None and not path.exists():
        return None
    try:
        return read_bundle(artifact, signature)
    except SignatureError as e:
        return str(e)


# --- whom the caller trusts ----------------------------------------------------------------------------------------


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
class _Trusted:
    """A trusted PEM file: its public keys (with their key ids) or its certificates."""

    path: Path
    keys: tuple[tuple[str, Any], ...]  # (key id, public key)
    certificates: int


def key_id(public_key: Any) -> str:
    """The key id of a public key (a ``cryptography`` key, or a PEM file's path): the sha256 of its PEM
    (SubjectPublicKeyInfo), model signing's key hint."""
    from cryptography.hazmat.primitives import serialization

    if isinstance(public_key, (str, os.PathLike)):
        public_key = _read_trusted(Path(public_key)).keys[0][1]
    pem = public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def _read_trusted(path: Path) -> _Trusted:
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
        return _Trusted(path, (), len(certs))
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise UsageError(f"{shown}: not a PEM public key (-----BEGIN PUBLIC KEY-----) nor a CA certificate; give the "
                         f"public key the artifact was signed for (openssl ec -in PRIVATE.pem -pubout).") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in ("secp256r1", "secp384r1",
                                                                                "secp521r1"):
        kind = key.curve.name if isinstance(key, ec.EllipticCurvePublicKey) else type(key).__name__.lstrip("_")
        raise UsageError(f"{shown}: a {kind} key; model signing uses elliptic-curve keys on P-256, P-384 or P-521.")
    return _Trusted(path, ((key_id(key), key),), 0)


# --- verifying ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verified:
    """A signature that verified: the artifact, its bundle, how it was signed and by whom."""

    artifact: Path
    signature: Path
    method: str
    key_id: str | None
    #: The trusted signer that matched: a key's file, a CA certificate's file, or an identity.
    signer: str

    def as_dict(self) -> dict[str, Any]:
        return {"artifact": str(self.artifact), "signature": str(self.signature), "method": self.method,
                "key_id": self.key_id, "signer": self.signer}

    def sentence(self) -> str:
        kid = f" {self.key_id[:16]}" if self.key_id else ""
        return f"signature verified: {self.method}{kid} ({self.signer})"


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def _bundle_file(bundle: Bundle) -> Iterator[Path]:
    """The bundle's bytes, as read and checked, in a private file for the library (which reads a path): what it
    verifies is what was checked here, whatever happens to the file beside the artifact meanwhile."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="jaxport-sig-") as d:
        path = Path(d) / "bundle.sig"
        path.write_bytes(bundle.raw)
        yield path


def _mismatch(artifact: Path, bundle: Bundle) -> SignatureError:
    signed = bundle.signed_sha256
    digests = ""
    if signed is not None:
        digests = f": its sha256 is {file_sha256(artifact)[:16]}..., the signed file's {signed[:16]}..."
    return SignatureError(f"{shown_path(artifact)}: not the file that was signed{digests} (changed after signing, or "
                          f"another artifact put beside this signature). Do not run it; sign it again if it is "
                          f"yours.")


def _run_library(artifact: Path, bundle: Bundle, configure: Any, signer: str) -> None:
    """Verify with the model-signing library's configuration ``configure(Config())``: the bundle's signature, then the
    file's digest. Its print-outs are kept off stdout (``--json``)."""
    from cryptography.exceptions import InvalidSignature
    from model_signing import verifying

    with _bundle_file(bundle) as copy, contextlib.redirect_stdout(io.StringIO()):
        try:
            configure(verifying.Config()).verify(artifact, copy)
        except InvalidSignature:
            raise SignatureError(f"{shown_path(bundle.path)}: the signature does not verify with {signer}: the "
                                 f"bundle was altered after signing, or made by another key with the same id. Do "
                                 f"not run the artifact.") from None
        except ValueError as e:
            if str(e).startswith("Signature mismatch"):
                raise _mismatch(artifact, bundle) from None
            raise SignatureError(f"{shown_path(bundle.path)}: the signature does not verify with {signer}: "
                                 f"{str(e)[:200]}") from None
        except Exception as e:  # noqa: BLE001 - the library's own errors on a bundle it cannot take (OpenSSL's)
            raise SignatureError(f"{shown_path(bundle.path)}: the signature does not verify with {signer}: "
                                 f"{type(e).__name__}: {str(e)[:200] or 'refused'}") from None


def _verify_key(artifact: Path, bundle: Bundle, trusted: Sequence[_Trusted], source: str) -> Verified:
    keys = [(k, t.path) for t in trusted for k, _ in t.keys]
    if not keys:
        raise SignatureError(f"{shown_path(bundle.path)}: signed by {bundle.signer_text()}, and {source} gives no "
                             f"public key, only certificates; trust the signer's public key.")
    matching = [p for k, p in keys if k == bundle.key_id] if bundle.key_id else [p for _, p in keys]
    if not matching:
        ids = ", ".join(f"{k[:16]} ({shown_path(p)})" for k, p in keys)
        raise SignatureError(f"{shown_path(bundle.path)}: signed by key {bundle.key_id[:16] if bundle.key_id else ''}"
                             f", which is not trusted ({source}: {ids}). Do not run the artifact; trust the "
                             f"signer's public key if it is one you expect.")
    failure: SignatureError | None = None
    for path in matching:
        try:
            _run_library(artifact, bundle, lambda c, p=path: c.use_elliptic_key_verifier(public_key=p),
                         f"the key {shown_path(path)}")
            return Verified(artifact, bundle.path, "key", bundle.key_id or key_id(path), shown_path(path))
        except SignatureError as e:
            failure = failure or e
    assert failure is not None
    raise failure


def _names(der: bytes, path: Path) -> tuple[list[str], str | None]:
    """A certificate's identities (subject alternative names, then its common name) and its issuer's common name;
    ``SignatureError`` for bytes that are no X.509 certificate (the bundle at ``path`` is hostile until verified)."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError:
        raise _bad(path, "its signing certificate is not a DER X.509 certificate") from None
    names: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        for kind in (x509.RFC822Name, x509.UniformResourceIdentifier, x509.DNSName):
            names += [str(v) for v in san.get_values_for_type(kind)]
    except x509.ExtensionNotFound:
        pass
    names += [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    issuer = [str(a.value) for a in cert.issuer.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return names, issuer[0] if issuer else None


def _verify_certificate(artifact: Path, bundle: Bundle, trusted: Sequence[_Trusted], t: Trust) -> Verified:
    cas = [x.path for x in trusted if x.certificates]
    if not cas:
        raise SignatureError(f"{shown_path(bundle.path)}: signed with a certificate ({bundle.signer_text()}), and "
                             f"{t.source} gives no CA certificate to check its chain against; trust the PKI's root "
                             f"certificate (a PEM file of it in place of a public key).")
    shown = ", ".join(shown_path(p) for p in cas)
    _run_library(artifact, bundle, lambda c: c.use_certificate_verifier(certificate_chain=cas),
                 f"a certificate chain to {shown}")
    names, issuer = _names(bundle.certificates[0], bundle.path)
    signer = f"certificate {names[0] if names else '(no name)'}, chained to {shown}"
    if t.identities:
        match = [i for i in t.identities if i.identity in names and i.issuer in (None, issuer)]
        if not match:
            raise SignatureError(f"{shown_path(bundle.path)}: signed with a certificate for "
                                 f"{', '.join(names) or 'no name'} (issuer {issuer}), none of the trusted identities "
                                 f"({', '.join(i.text() for i in t.identities)}). Do not run the artifact.")
        signer = f"certificate {match[0].text()}, chained to {shown}"
    return Verified(artifact, bundle.path, "certificate", bundle.key_id, signer)


def _verify_keyless(artifact: Path, bundle: Bundle, t: Trust) -> Verified:
    names, issuer = _names(bundle.certificates[0], bundle.path)
    who = f"{', '.join(names) or 'no identity'}"
    offline = (f"{shown_path(bundle.path)}: a keyless Sigstore signature (certificate for {who}); verifying it needs "
               f"Sigstore's trust root, and no Sigstore trust root is available offline")
    if not t.identities:
        raise SignatureError(f"{offline} for {t.source}, which trusts keys only (jaxport fetches no trust root while "
                             f"loading). Sign with a key (jaxport sign --key) or trust the signer in a policy's "
                             f"signature.certificate_identities.")
    try:
        from sigstore.models import Bundle as SigstoreBundle
        from sigstore.models import ClientTrustConfig
        from sigstore.verify import Verifier, policy

        root = ClientTrustConfig.production(offline=True).trusted_root
        verifier = Verifier(trusted_root=root)
        parsed = SigstoreBundle.from_json(bundle.raw)
    except Exception as e:  # noqa: BLE001 - sigstore's TUF and parsing errors
        raise SignatureError(f"{offline} ({type(e).__name__}: {str(e)[:160]}); jaxport fetches none while "
                             f"loading. Sign with a key (jaxport sign --key) instead.") from None
    failures = []
    for i in t.identities:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                verifier.verify_dsse(parsed, policy.Identity(identity=i.identity, issuer=i.issuer))
        except Exception as e:  # noqa: BLE001 - sigstore's VerificationError and what it lets through
            failures.append(f"{i.text()}: {str(e)[:160]}")
            continue
        signed = bundle.signed_sha256
        if signed is None or file_sha256(artifact) != signed:
            raise _mismatch(artifact, bundle)
        return Verified(artifact, bundle.path, "keyless", bundle.key_id, f"identity {i.text()}")
    raise SignatureError(f"{shown_path(bundle.path)}: the keyless signature (certificate for {who}, issuer "
                         f"{issuer}) does not verify for a trusted identity: {'; '.join(failures)}.")


def verify_signature(artifact: str | Path, trusted: Trust | str | Path | Iterable[str | Path],
                     signature: str | Path | None = None) -> Verified:
    """Verify the signature of ``artifact`` (the bundle at ``signature``, default ``ARTIFACT.sig``) by a signer of
    ``trusted`` (a :class:`Trust`, or the paths of trusted public keys or CA certificates), before anything else
    reads the artifact. Returns what verified; raises ``SignatureError`` (exit 14) for a missing, unreadable or
    oversized bundle, one for another file name, an untrusted signer, a bundle altered after signing, and an artifact
    that is not the signed file; ``UsageError`` for a trusted key file that cannot be read; ``PlatformError``
    without the extra ``jaxport[sign]``."""
    t = trust(trusted)
    art = Path(artifact)
    bundle = read_bundle(art, signature)
    memo = _memo_key(art, bundle, t)
    if memo is not None and memo in _VERIFIED:
        return _VERIFIED[memo]
    verified = _verify(art, bundle, t)
    if memo is not None:
        _VERIFIED[memo] = verified
    return verified


#: Signatures this process verified, by the file's identity (device, inode, size, times), the bundle's bytes and the
#: trust: a command that checks before it opens the artifact and again as it loads hashes the file once.
_VERIFIED: dict[tuple[Any, ...], Verified] = {}


def _memo_key(art: Path, bundle: Bundle, t: Trust) -> tuple[Any, ...] | None:
    try:
        st = os.stat(art)
    except OSError:
        return None
    return (os.path.realpath(art), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, bundle.raw,
            bundle.path, t.keys, t.identities)


def _verify(art: Path, bundle: Bundle, t: Trust) -> Verified:
    if bundle.subject != art.name:
        raise SignatureError(f"{shown_path(bundle.path)}: the signature is for a file named {bundle.subject[:120]!r},"
                             f" not {art.name!r}: a bundle made for another file. Sign this artifact, or give it "
                             f"its signed name back if it is that file.")
    require_extra("verifying a signature")
    if not art.is_file():
        raise SignatureError(f"{shown_path(art)}: no artifact file to check the signature against.")
    trusted_files = [_read_trusted(p) for p in t.keys]
    if bundle.method == "key":
        return _verify_key(art, bundle, trusted_files, t.source)
    if bundle.method == "certificate":
        return _verify_certificate(art, bundle, trusted_files, t)
    return _verify_keyless(art, bundle, t)
