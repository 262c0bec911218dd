"""Signatures of artifacts in the OpenSSF model-signing format: who made an artifact, checked before it runs.

A signature is a sigstore bundle beside the artifact (``ARTIFACT.sig`` by default, :func:`signature_path`): a DSSE
envelope over an in-toto statement that names the signed file and gives its sha256, signed with an elliptic-curve
key, a certificate of a PKI, or keyless through Sigstore; what ``model_signing sign`` writes and ``model_signing
verify`` reads (the ``model-signing`` library does the cryptography: the optional extra ``jaxport[sign]``).
:func:`jaxport.artifact.signing.sign.sign` writes one; :func:`jaxport.artifact.signing.check.verify_signature` checks
one against the signers a caller trusts, and :func:`describe` says what bundle sits beside an artifact without
verifying it (what ``inspect`` shows). This module reads bundles only, with the standard library: ``inspect`` imports
it on its fast path.

Trust model: the bundle is hostile until verified, and so is the artifact. A bundle is read whole, at most
:data:`MAX_BUNDLE_BYTES`, as strict JSON, and its shape is checked before any library sees it. The artifact itself is
only hashed (as model signing hashes a file: its bytes), never opened as an artifact, until its signature has
verified: a command that requires a signature reads nothing else of it first. It is opened once, and what is hashed
is what is then read: the bytes of that descriptor, compared with the signed digest before the artifact is parsed
from the same descriptor (``signing.check.open_signed``); its path is never opened again, so a file renamed or
linked over it meanwhile is not what runs (README, "Signed artifacts", says what an attacker who can write the
directory or the file can and cannot do). The statement must name the
artifact's own file name (a bundle moved beside another file, even one with the same bytes, is refused), and a
signer is trusted only by what the caller gives: a public key, a CA certificate, or a Sigstore identity, never by
what the bundle says of itself. Keyless bundles are verified offline only, against the Sigstore trust root the local
``sigstore`` installation holds; jaxport never fetches one while loading.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from ..._fsio import read_file, shown_path
from ..._json import strict_json
from ..._record import dataclass
from ...errors import PlatformError, SignatureError

TYPE_CHECKING = False  # typing's constant, without importing typing on the path that reads an artifact (inspect)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["INSTALL", "MAX_BUNDLE_BYTES", "SIGNATURE_SUFFIX", "Bundle", "Envelope", "bad_bundle", "describe",
           "drop_stale", "parse_bundle", "parse_envelope", "read_bundle", "require_extra", "signature_path"]

#: The largest bundle read: a key-signed bundle is about 2 kB, a certificate chain's or Sigstore's some 10 kB.
MAX_BUNDLE_BYTES = 1 << 20
#: The name of an artifact's signature: ``ARTIFACT`` + this.
SIGNATURE_SUFFIX = ".sig"
#: What to install for signatures.
INSTALL = "pip install 'jaxport[sign]'"
_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle"
_PAYLOAD_TYPE = "application/vnd.in-toto+json"
_STATEMENT = "https://in-toto.io/Statement/v1"
_PREDICATE = "https://model_signing/signature/v1.0"


def require_extra(what: str, library: bool = True) -> None:
    """Refuse (``PlatformError``, exit 10) when the optional extra ``jaxport[sign]`` is not installed; ``what``
    says what needed it (``signing``, ``verifying a signature``). Without ``library``, only ``cryptography`` is
    needed (a key's bundle, ``dsse``): a server that only verifies key-signed artifacts needs no more."""
    import importlib.util

    needed = ("model_signing", "OpenSSL", "cryptography") if library else ("cryptography",)
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        names = {"model_signing": "model-signing", "OpenSSL": "pyopenssl", "cryptography": "cryptography"}
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
    certificates: tuple[bytes, ...]
    raw: bytes
    #: The DSSE payload (the statement's bytes, which the signature covers) and the signature's bytes.
    payload: bytes = b""
    signature: bytes = b""
    #: The sha256 the statement's subject gives: model signing's digest of the resources' digests.
    subject_sha256: str | None = None

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


def bad_bundle(path: Path, what: str) -> SignatureError:
    return SignatureError(f"{shown_path(path)}: not a model-signing signature bundle: {what}. Sign the artifact "
                          f"again (jaxport sign ARTIFACT --key PRIVATE.pem, or model_signing sign).")


def _field(node: Any, key: str, kind: type, path: Path, where: str,
           bad: Callable[[Path, str], SignatureError] | None = None) -> Any:
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        shown = {"str": "a string", "dict": "an object", "list": "a list"}[kind.__name__]
        raise (bad or bad_bundle)(path, f"{where}{key} is not {shown}")
    return value


def _b64(text: str, path: Path, what: str, bad: Callable[[Path, str], SignatureError] | None = None) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise (bad or bad_bundle)(path, f"{what} is not base64") from None


def _certificates(material: dict[str, Any], path: Path,
                  bad: Callable[[Path, str], SignatureError]) -> tuple[str, tuple[bytes, ...]]:
    """The method of a bundle's verification material and its certificates (DER)."""
    tlog = material.get("tlogEntries")
    logged = isinstance(tlog, list) and bool(tlog)
    if "publicKey" in material:
        _field(material, "publicKey", dict, path, "verificationMaterial.", bad)
        return "key", ()
    if "x509CertificateChain" in material:
        chain = _field(_field(material, "x509CertificateChain", dict, path, "verificationMaterial.", bad),
                       "certificates", list, path, "verificationMaterial.x509CertificateChain.", bad)
        ders = tuple(_b64(_field(c, "rawBytes", str, path, "a certificate's ", bad), path, "a certificate", bad)
                     for c in chain)
        if not ders:
            raise bad(path, "its certificate chain is empty")
        return ("keyless" if logged else "certificate"), ders
    if "certificate" in material:
        cert = _field(material, "certificate", dict, path, "verificationMaterial.", bad)
        return "keyless", (_b64(_field(cert, "rawBytes", str, path, "the certificate's ", bad), path,
                                "the certificate", bad),)
    raise bad(path, "its verificationMaterial holds no public key and no certificate")


@dataclass(frozen=True)
class Envelope:
    """A sigstore bundle's DSSE envelope, its shape checked (not its signature): how it was signed, the in-toto
    statement it carries (parsed, and the payload's bytes, which the signature covers) and the signature."""

    method: str
    key_id: str | None
    certificates: tuple[bytes, ...]
    statement: dict[str, Any]
    payload: bytes
    signature: bytes


def parse_envelope(raw: bytes, path: Path, predicate: str,
                   bad: Callable[[Path, str], SignatureError] | None = None) -> Envelope:
    """The envelope of a bundle of these bytes (read from ``path``) whose statement has ``predicate`` as its
    predicate type; ``bad(path, what)`` (default :func:`bad_bundle`) makes the error for anything else."""
    bad = bad or bad_bundle
    try:
        doc = strict_json(raw)
    except ValueError as e:
        raise bad(path, f"not valid JSON ({str(e)[:120]}); it may be truncated") from None
    if not isinstance(doc, dict):
        raise bad(path, "not a JSON object")
    media = _field(doc, "mediaType", str, path, "", bad)
    if not media.startswith(_MEDIA_TYPE):
        raise bad(path, f"its mediaType is {media[:80]!r}, not a sigstore bundle's")
    method, certs = _certificates(_field(doc, "verificationMaterial", dict, path, "", bad), path, bad)
    envelope = _field(doc, "dsseEnvelope", dict, path, "", bad)
    if _field(envelope, "payloadType", str, path, "dsseEnvelope.", bad) != _PAYLOAD_TYPE:
        raise bad(path, f"its payload is not an in-toto statement ({_PAYLOAD_TYPE})")
    signatures = _field(envelope, "signatures", list, path, "dsseEnvelope.", bad)
    if len(signatures) != 1:
        raise bad(path, f"it holds {len(signatures)} signatures, not one")
    signature = _b64(_field(signatures[0], "sig", str, path, "dsseEnvelope.signatures[0].", bad), path,
                     "the signature", bad)
    payload = _b64(_field(envelope, "payload", str, path, "dsseEnvelope.", bad), path, "the payload", bad)
    try:
        statement = strict_json(payload)
    except ValueError as e:
        raise bad(path, f"its payload is not JSON ({str(e)[:120]})") from None
    if not isinstance(statement, dict) or statement.get("_type") != _STATEMENT \
            or statement.get("predicateType") != predicate:
        what = "a model-signing statement" if predicate == _PREDICATE else "a statement of its kind"
        raise bad(path, f"its payload is not {what} (in-toto Statement v1, predicate {predicate})")
    if method == "key":
        hint = doc["verificationMaterial"]["publicKey"].get("hint")
        key = hint if isinstance(hint, str) and hint else None
    else:
        import hashlib  # here: only a certificate's bundle needs it

        key = hashlib.sha256(certs[0]).hexdigest()
    return Envelope(method, key, certs, statement, payload, signature)


def parse_bundle(raw: bytes, path: Path) -> Bundle:
    """A bundle of these bytes (read from ``path``), its shape checked; ``SignatureError`` otherwise."""
    e = parse_envelope(raw, path, _PREDICATE)
    statement = e.statement
    subjects = _field(statement, "subject", list, path, "the statement's ")
    if len(subjects) != 1:
        raise bad_bundle(path, f"its statement names {len(subjects)} subjects, not one")
    subject = _field(subjects[0], "name", str, path, "the statement's subject ")
    predicate = _field(statement, "predicate", dict, path, "the statement's ")
    resources = tuple((_field(r, "name", str, path, "a resource's "), _field(r, "algorithm", str, path,
                                                                             "a resource's "),
                       _field(r, "digest", str, path, "a resource's "))
                      for r in _field(predicate, "resources", list, path, "the statement's predicate "))
    serialization = _field(predicate, "serialization", dict, path, "the statement's predicate ")
    return Bundle(path, e.method, e.key_id, subject, resources, serialization, e.certificates, raw, e.payload,
                  e.signature, _subject_digest(subjects[0]))


def _subject_digest(subject: Any) -> str | None:
    digest = subject.get("digest") if isinstance(subject, dict) else None
    value = digest.get("sha256") if isinstance(digest, dict) else None
    return value if isinstance(value, str) else None


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


def drop_stale(artifact: str | Path) -> str | None:
    """After a command wrote ``artifact`` (``export``, ``import``, ``rebind``, ``upgrade`` over an existing file):
    remove the ``ARTIFACT.sig`` beside it unless its statement signs these very bytes under this name (a
    reproducible export of unchanged code does), and say so; None when there was none or it still signs them. A
    bundle left over from the file it replaced would otherwise sit beside the new one, and a server requiring a
    signature would refuse it only at load, naming the digest."""
    import hashlib

    path = signature_path(artifact)
    if not os.path.lexists(path):
        return None
    try:
        bundle = read_bundle(artifact)
        why = f"it signed the previous {shown_path(artifact)}, not the one just written"
        if bundle.subject == Path(artifact).name and bundle.signed_sha256 is not None:
            digest = hashlib.sha256()
            with open(artifact, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            if digest.hexdigest() == bundle.signed_sha256:
                return None
    except SignatureError:
        why = f"it is no signature bundle jaxport reads, so it signs no {shown_path(artifact)}"
    os.unlink(path)
    return f"removed {shown_path(path)}: {why}. Sign it again (jaxport sign {shown_path(artifact)} --key PRIVATE.pem)."
