"""Verifying an artifact's model-signing signature (:mod:`jaxport.artifact.signature`) against the signers a
caller trusts: :class:`Trust` (public keys, CA certificates, Sigstore identities) and :func:`verify_signature`,
which every command that requires a signature runs before anything else reads the artifact. The cryptography is the
``model-signing`` library's (the optional extra ``jaxport[sign]``), imported only here, when a signature is checked.

Trust model: see :mod:`jaxport.artifact.signature`. A signer is trusted only by what the caller gives, never by what
the bundle says of itself; the statement must name the artifact's own file name; keyless bundles are verified
offline only.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._fsio import read_file, shown_path
from ..errors import SignatureError, UsageError
from .signature import Bundle, bad_bundle, read_bundle, require_extra

__all__ = ["MAX_KEY_BYTES", "Identity", "Trust", "Verified", "file_sha256", "key_id", "trust", "verify_signature"]

#: The largest file of trusted keys or certificates read (a CA bundle such as certifi's is about 300 kB).
MAX_KEY_BYTES = 4 << 20


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
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name not in CURVES:
        raise UsageError(f"{shown}: {key_kind(key)}; model signing uses elliptic-curve keys on P-256, P-384 or P-521.")
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

    with _bundle_file(bundle) as copy, _quiet():
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
        raise bad_bundle(path, "its signing certificate is not a DER X.509 certificate") from None
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


def _first_line(e: BaseException) -> str:
    """An exception's message, its first line cut to 160 characters (libraries' messages span lines)."""
    text = str(e).strip().split("\n", 1)[0]
    return (text[:160] + "...") if len(text) > 160 else text or type(e).__name__


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The signature libraries' print-outs and log warnings (sigstore's "TUF repository is loaded in offline mode",
    model signing's on key usage) kept off stdout and stderr: a command prints its own result and one error line."""
    import logging

    loggers = [logging.getLogger(name) for name in ("sigstore", "model_signing", "tuf")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _verify_keyless(artifact: Path, bundle: Bundle, t: Trust) -> Verified:
    names, issuer = _names(bundle.certificates[0], bundle.path)
    who = f"{', '.join(names) or 'no identity'}"
    offline = (f"{shown_path(bundle.path)}: a keyless Sigstore signature (certificate for {who}); verifying it needs "
               f"Sigstore's trust root, and no Sigstore trust root is available offline")
    if not t.identities:
        raise SignatureError(f"{offline} for {t.source}, which trusts keys only (jaxport fetches no trust root while "
                             f"loading). Sign with a key (jaxport sign --key) or trust the signer in a policy's "
                             f"signature.certificate_identities.")
    from sigstore.models import Bundle as SigstoreBundle
    from sigstore.models import ClientTrustConfig
    from sigstore.verify import Verifier, policy

    try:
        with _quiet():
            verifier = Verifier(trusted_root=ClientTrustConfig.production(offline=True).trusted_root)
    except Exception as e:  # noqa: BLE001 - sigstore's TUF errors: no trust root cached or embedded
        raise SignatureError(f"{offline} ({type(e).__name__}: {_first_line(e)}); jaxport fetches none while "
                             f"loading. Sign with a key (jaxport sign --key) instead.") from None
    try:
        with _quiet():
            parsed = SigstoreBundle.from_json(bundle.raw)
    except Exception as e:  # noqa: BLE001 - sigstore's parsing errors (pydantic's)
        raise bad_bundle(bundle.path, f"sigstore cannot read it as a keyless bundle ({_first_line(e)})") from None
    failures = []
    for i in t.identities:
        try:
            with _quiet():
                verifier.verify_dsse(parsed, policy.Identity(identity=i.identity, issuer=i.issuer))
        except Exception as e:  # noqa: BLE001 - sigstore's VerificationError and what it lets through
            failures.append(f"{i.text()}: {_first_line(e)}")
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
