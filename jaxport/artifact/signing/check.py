"""Verifying an artifact's model-signing signature (:mod:`jaxport.artifact.signing.bundle`) against the signers a
caller trusts: :class:`Trust` (public keys, CA certificates, Sigstore identities); :func:`open_signed`, which every
command that requires a signature opens the artifact with, :func:`verify_open` for an artifact already open, and
:func:`verify_signature`, a check that reads nothing else. The cryptography is the ``model-signing`` library's (the
optional extra ``jaxport[sign]``), imported only here, when a signature is checked.

Trust model: see :mod:`jaxport.artifact.signing.bundle`. A signer is trusted only by what the caller gives, never by
what the bundle says of itself; the statement must name the artifact's own file name; keyless bundles are verified
offline only. What is verified is the file that is read: the artifact is opened once, its signature verified, and
then the bytes of that descriptor are hashed (``os.pread``) and compared with the digest the verified statement
signs, for every method (the library is handed the descriptor's digest in place of hashing the path again); only
then is the artifact parsed, from the same descriptor, and its manifest checked to be bytes that were hashed. The
path is never opened again: a file renamed, linked or moved over it after the descriptor was opened is not what is
read. A rewrite of the file in place (by someone who may write the file itself) while or after it is hashed makes
the manifest differ from the bytes hashed (refused here), or a member differ from its sha256 in the manifest
(refused when it is read, ``IntegrityError``): what runs is the signed bytes, or nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._fsio import open_regular, shown_path
from ...errors import FormatError, IntegrityError, SignatureError
from ..container import Artifact, read_artifact
from ..layout import MANIFEST_NAME, MAX_MANIFEST_BYTES
from .bundle import Bundle, bad_bundle, read_bundle, require_extra
from .dsse import verify_envelope
from .trust import MAX_KEY_BYTES, Identity, Trust, Trusted, key_id, read_trusted, trust

__all__ = ["HASH_CHUNK", "MAX_KEY_BYTES", "TIED_BYTES", "Hashed", "Identity", "Trust", "Verified", "hash_descriptor",
           "key_id", "open_signed", "trust", "verify_open", "verify_signature"]

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
    #: The sha256 of the artifact's bytes that verified (what a vouch for its cache entries names).
    sha256: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"artifact": str(self.artifact), "signature": str(self.signature), "method": self.method,
                "key_id": self.key_id, "signer": self.signer}

    def sentence(self) -> str:
        kid = f" {self.key_id[:16]}" if self.key_id else ""
        return f"signature verified: {self.method}{kid} ({self.signer})"


def _no_step(step: str, artifact: Path) -> None:
    """What :data:`step` does outside tests: nothing."""


#: Called between the steps of a signature check, with the step just done and the artifact's path: ``"opened"`` (the
#: artifact's descriptor, before the bundle's signature is verified), ``"verified"`` (the signature, before the bytes
#: are hashed), ``"hashed"`` (the bytes compared with the signed digest, before the artifact is parsed from the same
#: descriptor) and ``"read"`` (parsed, before its manifest is tied to the bytes hashed). It does nothing; the tests
#: replace it to rename, link or rewrite files at each step, deterministically (tests/sign/test_swap.py).
step: Callable[[str, Path], None] = _no_step


#: Bytes hashed at a time. The digest of each such chunk of the first :data:`TIED_BYTES` is kept too, so that bytes
#: parsed after the hash (the manifest) can be tied to the bytes hashed (:meth:`Hashed.holds`).
HASH_CHUNK = 1 << 20
#: Where an artifact's manifest lies, in any file the reader accepts: it is the first member, after a 30-byte local
#: header, its name and an extra field of at most 64 KiB, and it is at most ``MAX_MANIFEST_BYTES``.
TIED_BYTES = MAX_MANIFEST_BYTES + (1 << 17)


@dataclass(frozen=True)
class Hashed:
    """The sha256 of the first ``size`` bytes of an open file as read through its descriptor, and of each
    :data:`HASH_CHUNK` of them that starts within :data:`TIED_BYTES`."""

    sha256: str
    size: int
    chunks: tuple[bytes, ...]

    def holds(self, fd: int, offset: int, data: bytes, where: Path) -> bool:
        """Whether ``data`` lies at ``offset`` of the bytes that were hashed: the chunks it spans are read again
        through ``fd``, and must have the digests they had when hashed and hold ``data`` there. (The file may have
        been rewritten in place since; bytes read again that hash as before are the bytes hashed.)"""
        end = offset + len(data)
        if offset < 0 or end > self.size:
            return False
        if not data:
            return True
        first, last = offset // HASH_CHUNK, (end - 1) // HASH_CHUNK
        if last >= len(self.chunks):
            return False
        start = first * HASH_CHUNK
        span = _read(fd, start, min(self.size, (last + 1) * HASH_CHUNK) - start, where)
        for i in range(first, last + 1):
            chunk = span[(i - first) * HASH_CHUNK:(i - first + 1) * HASH_CHUNK]
            if hashlib.sha256(chunk).digest() != self.chunks[i]:
                return False
        return span[offset - start:end - start] == data


def _read(fd: int, offset: int, n: int, where: Path) -> bytes:
    """Exactly ``n`` bytes of ``fd`` at ``offset``; a file cut short meanwhile is not the file that was signed."""
    parts, got = [], 0
    while got < n:
        try:
            chunk = os.pread(fd, n - got, offset + got)
        except OSError as e:
            raise SignatureError(f"{shown_path(where)}: cannot read the artifact to check its signature: "
                                 f"{e.strerror or e}.") from None
        if not chunk:
            raise _changed(where, f"it was cut short to {offset + got} bytes")
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _changed(where: Path, how: str) -> SignatureError:
    return SignatureError(f"{shown_path(where)}: the artifact changed while its signature was checked ({how}): what "
                          f"would be read is not what was hashed. Do not modify an artifact while jaxport reads it; "
                          f"do not run this one until it checks again.")


def hash_descriptor(fd: int, size: int, where: Path) -> Hashed:
    """The sha256 of the first ``size`` bytes of the open file ``fd``, read with ``os.pread`` (``Hashed``)."""
    whole, chunks = hashlib.sha256(), []
    for offset in range(0, size, HASH_CHUNK):
        data = _read(fd, offset, min(HASH_CHUNK, size - offset), where)
        whole.update(data)
        if offset < TIED_BYTES:
            chunks.append(hashlib.sha256(data).digest())
    return Hashed(whole.hexdigest(), size, tuple(chunks))


class _OpenFile:
    """The artifact as the signature check sees it: its path (for names and messages) and the descriptor it is read
    from, hashed once, when a signature has verified (:meth:`hashed`)."""

    def __init__(self, path: Path, fd: int, size: int):
        self.path, self.fd, self.size = path, fd, size
        self._hashed: Hashed | None = None

    def hashed(self) -> Hashed:
        if self._hashed is None:
            step("verified", self.path)
            self._hashed = hash_descriptor(self.fd, self.size, self.path)
        return self._hashed


def _mismatch(opened: _OpenFile, bundle: Bundle) -> SignatureError:
    signed = bundle.signed_sha256
    digests = ""
    if signed is not None:
        digests = f": its sha256 is {opened.hashed().sha256[:16]}..., the signed file's {signed[:16]}..."
    return SignatureError(f"{shown_path(opened.path)}: not the file that was signed{digests} (changed after signing, "
                          f"or another artifact put beside this signature). Do not run it; sign it again if it is "
                          f"yours.")


def _compare(opened: _OpenFile, bundle: Bundle) -> None:
    """The one comparison every method ends with, after its signature verified: the sha256 the verified statement
    signs against the sha256 of the bytes read through the artifact's descriptor."""
    if bundle.signed_sha256 is None or opened.hashed().sha256 != bundle.signed_sha256:
        raise _mismatch(opened, bundle)


@contextlib.contextmanager
def _bundle_file(bundle: Bundle) -> Iterator[Path]:
    """The bundle's bytes, as read and checked, in a private file for the library (which reads a path): what it
    verifies is what was checked here, whatever happens to the file beside the artifact meanwhile."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="jaxport-sig-") as d:
        path = Path(d) / "bundle.sig"
        path.write_bytes(bundle.raw)
        yield path


def _open_file_hashing(opened: _OpenFile) -> Any:
    """A model-signing hashing configuration that gives the manifest of the artifact's open descriptor
    (:meth:`_OpenFile.hashed`), where the library's own would open and hash the path again: the library then compares
    the statement it has just verified with the bytes that will be read."""
    import pathlib

    from model_signing import hashing, manifest
    from model_signing._hashing.hashing import Digest  # the digest type of manifest items (model-signing 1.x)

    class OpenFileHashing(hashing.Config):
        def hash(self, model_path: Any, *, files_to_hash: Any = None) -> Any:
            digest = Digest("sha256", bytes.fromhex(opened.hashed().sha256))
            return manifest.Manifest(opened.path.name, [manifest.FileManifestItem(path=pathlib.PurePosixPath("."),
                                                                                 digest=digest)],
                                     manifest.SerializationType.from_args(
                                         {"method": "files", "hash_type": "sha256", "allow_symlinks": False}))

    return OpenFileHashing()


def _run_library(opened: _OpenFile, bundle: Bundle, configure: Any, signer: str) -> None:
    """Verify with the model-signing library's configuration ``configure(Config())``: the bundle's signature, then
    the digest of the artifact's descriptor (:func:`_open_file_hashing`; the library never opens the artifact), then
    :func:`_compare`. Its print-outs are kept off stdout (``--json``)."""
    from cryptography.exceptions import InvalidSignature
    from model_signing import verifying

    with _bundle_file(bundle) as copy, _quiet():
        try:
            configure(verifying.Config()).set_hashing_config(_open_file_hashing(opened)).verify(opened.path, copy)
        except SignatureError:  # the artifact changed while it was hashed (``_read``)
            raise
        except InvalidSignature:
            raise SignatureError(f"{shown_path(bundle.path)}: the signature does not verify with {signer}: the "
                                 f"bundle was altered after signing, or made by another key with the same id. Do "
                                 f"not run the artifact.") from None
        except ValueError as e:
            if str(e).startswith("Signature mismatch"):
                raise _mismatch(opened, bundle) from None
            raise SignatureError(f"{shown_path(bundle.path)}: the signature does not verify with {signer}: "
                                 f"{str(e)[:200]}") from None
        except Exception as e:  # noqa: BLE001 - the library's own errors on a bundle it cannot take (OpenSSL's)
            raise SignatureError(f"{shown_path(bundle.path)}: the signature does not verify with {signer}: "
                                 f"{type(e).__name__}: {str(e)[:200] or 'refused'}") from None
    _compare(opened, bundle)


def _verify_key(opened: _OpenFile, bundle: Bundle, trusted: Sequence[Trusted], source: str) -> Verified:
    """A key's bundle, verified here with ``cryptography`` (``dsse``), as model signing's key verifier does it: the
    signature over the statement, the statement's resources against its subject's digest, then :func:`_compare`."""
    keys = [(k, t.path, key) for t in trusted for k, key in t.keys]
    if not keys:
        raise SignatureError(f"{shown_path(bundle.path)}: signed by {bundle.signer_text()}, and {source} gives no "
                             f"public key, only certificates; trust the signer's public key.")
    matching = [(p, key) for k, p, key in keys if k == bundle.key_id] if bundle.key_id else \
        [(p, key) for _, p, key in keys]
    if not matching:
        ids = ", ".join(f"{k[:16]} ({shown_path(p)})" for k, p, _ in keys)
        raise SignatureError(f"{shown_path(bundle.path)}: signed by key {bundle.key_id[:16] if bundle.key_id else ''}"
                             f", which is not trusted ({source}: {ids}). Do not run the artifact; trust the "
                             f"signer's public key if it is one you expect.")
    for path, key in matching:
        if not verify_envelope(bundle.payload, bundle.signature, key):
            continue
        signer = f"the key {shown_path(path)}"
        root = _resources_digest(bundle)
        if root != bundle.subject_sha256:
            raise SignatureError(f"{shown_path(bundle.path)}: the signature does not verify with {signer}: Manifest "
                                 f"is inconsistent. Root digest is {bundle.subject_sha256}, but the included "
                                 f"resources hash to {root}")
        _compare(opened, bundle)
        return Verified(opened.path, bundle.path, "key", bundle.key_id or key_id(key), shown_path(path),
                        opened.hashed().sha256)
    raise SignatureError(f"{shown_path(bundle.path)}: the signature does not verify with the key "
                         f"{shown_path(matching[0][0])}: the bundle was altered after signing, or made by another key "
                         f"with the same id. Do not run the artifact.")


def _resources_digest(bundle: Bundle) -> str | None:
    """Model signing's digest of a statement's resources (the sha256 of their digests' bytes, in order), which its
    subject must give; None for a digest that is not hexadecimal."""
    try:
        return hashlib.sha256(b"".join(bytes.fromhex(d) for _, _, d in bundle.resources)).hexdigest()
    except ValueError:
        return None


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


def _verify_certificate(opened: _OpenFile, bundle: Bundle, trusted: Sequence[Trusted], t: Trust) -> Verified:
    cas = [x.path for x in trusted if x.certificates]
    if not cas:
        raise SignatureError(f"{shown_path(bundle.path)}: signed with a certificate ({bundle.signer_text()}), and "
                             f"{t.source} gives no CA certificate to check its chain against; trust the PKI's root "
                             f"certificate (a PEM file of it in place of a public key).")
    shown = ", ".join(shown_path(p) for p in cas)
    _run_library(opened, bundle, lambda c: c.use_certificate_verifier(certificate_chain=cas),
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
    return Verified(opened.path, bundle.path, "certificate", bundle.key_id, signer, opened.hashed().sha256)


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


def _verify_keyless(opened: _OpenFile, bundle: Bundle, t: Trust) -> Verified:
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
        _compare(opened, bundle)
        return Verified(opened.path, bundle.path, "keyless", bundle.key_id, f"identity {i.text()}",
                        opened.hashed().sha256)
    raise SignatureError(f"{shown_path(bundle.path)}: the keyless signature (certificate for {who}, issuer "
                         f"{issuer}) does not verify for a trusted identity: {'; '.join(failures)}.")


def verify_signature(artifact: str | Path, trusted: Trust | str | Path | Iterable[str | Path],
                     signature: str | Path | None = None) -> Verified:
    """Verify the signature of ``artifact`` (the bundle at ``signature``, default ``ARTIFACT.sig``) by a signer of
    ``trusted`` (a :class:`Trust`, or the paths of trusted public keys or CA certificates), reading nothing of the
    artifact but its bytes' hash. Returns what verified; raises ``SignatureError`` (exit 14) for a missing,
    unreadable or oversized bundle, one for another file name, an untrusted signer, a bundle altered after signing,
    and an artifact that is not the signed file; ``UsageError`` for a trusted key file that cannot be read;
    ``PlatformError`` without the extra ``jaxport[sign]``.

    What verified is the file this check opened; the path may name another one the moment after. To read a signed
    artifact, open it with :func:`open_signed` (or check an open one with :func:`verify_open`), never by its path
    after this check."""
    opened, _, _, verified = _open_checked(artifact, trusted, signature)
    os.close(opened.fd)
    return verified


def _open_checked(artifact: str | Path, trusted: Trust | str | Path | Iterable[str | Path],
                  signature: str | Path | None) -> tuple[_OpenFile, Bundle, Trust, Verified]:
    """The artifact opened, its signature verified on that descriptor (the caller's; closed here on a failure)."""
    t = trust(trusted)
    path = Path(artifact)
    bundle = _bundle_for(path, signature)
    fd = _open(path)
    try:
        step("opened", path)
        opened = _OpenFile(path, fd, os.fstat(fd).st_size)
        return opened, bundle, t, _checked(opened, bundle, t)
    except BaseException:
        os.close(fd)
        raise


def open_signed(artifact: str | Path, trusted: Trust | str | Path | Iterable[str | Path],
                signature: str | Path | None = None) -> tuple[Artifact, Verified]:
    """Open ``artifact`` to read it only once its signature verified (as :func:`verify_signature`) on the bytes of
    the very descriptor it is then read from: the descriptor is opened first, hashed once the signature verified,
    and the artifact parsed from it only when its sha256 is the one signed, its manifest then checked to be bytes
    that were hashed (every member read later is checked against the manifest's sha256). Returns the open artifact
    (the caller closes it) and what verified; the same errors as :func:`verify_signature`, then ``open_artifact``'s
    for a signed file that is no artifact."""
    opened, bundle, t, verified = _open_checked(artifact, trusted, signature)
    path, fd, probe = opened.path, opened.fd, os.dup(opened.fd)  # probe: read_artifact closes fd on a refusal
    try:
        art = read_artifact(path, fd)  # owns the descriptor from here: closes it when it refuses the file
    except (FormatError, IntegrityError):
        if hash_descriptor(probe, opened.size, path).sha256 != opened.hashed().sha256:
            raise _changed(path, "it was rewritten in place") from None
        raise  # the signed file itself is no artifact
    finally:
        os.close(probe)
    try:
        step("read", path)
        _tie(art, opened.hashed())
    except BaseException:
        art.close()
        raise
    _VERIFIED.setdefault(art, {})[_memo_key(bundle, t)] = verified
    return art, verified


def verify_open(art: Artifact, trusted: Trust | str | Path | Iterable[str | Path],
                signature: str | Path | None = None) -> Verified:
    """Verify the signature of the open artifact ``art`` on its own bytes, read through its descriptor (whatever
    its path names now), as :func:`verify_signature` does, and that the manifest it holds is bytes that were hashed.
    An artifact :func:`open_signed` opened, or that this function checked, with the same bundle and trust, is not
    hashed again."""
    t = trust(trusted)
    bundle = _bundle_for(art.path, signature)
    key = _memo_key(bundle, t)
    known = _VERIFIED.get(art, {}).get(key)
    if known is not None:
        return known
    opened = _OpenFile(art.path, art.fileno(), art.size)
    verified = _checked(opened, bundle, t)
    _tie(art, opened.hashed())
    _VERIFIED.setdefault(art, {})[key] = verified
    return verified


#: Signatures verified on the bytes of open artifacts, by the artifact object (its descriptor: the file hashed,
#: whatever its path names since), the bundle's path and bytes, and the trust: a command that checks an artifact it
#: opened (``open_signed``), then loads it (``verify_open``), hashes it once. Nothing in the file system is a key,
#: so nothing there can stand in for an artifact checked.
_VERIFIED: weakref.WeakKeyDictionary[Artifact, dict[tuple[Any, ...], Verified]] = weakref.WeakKeyDictionary()


def _memo_key(bundle: Bundle, t: Trust) -> tuple[Any, ...]:
    return bundle.path, bundle.raw, t.keys, t.identities


def _bundle_for(art: Path, signature: str | Path | None) -> Bundle:
    """The bundle that signs ``art``, read and checked to name its file (before anything of the artifact is read)."""
    bundle = read_bundle(art, signature)
    if bundle.subject != art.name:
        raise SignatureError(f"{shown_path(bundle.path)}: the signature is for a file named {bundle.subject[:120]!r},"
                             f" not {art.name!r}: a bundle made for another file. Sign this artifact, or give it "
                             f"its signed name back if it is that file.")
    # a key's bundle is verified with cryptography alone (``dsse``); a certificate's and a keyless one by the library
    require_extra("verifying a signature", library=bundle.method != "key")
    return bundle


def _open(art: Path) -> int:
    """The artifact's descriptor, which the signature check hashes (and ``open_signed`` then reads it from)."""
    return open_regular(art, SignatureError, missing="artifact", directory="an artifact")


def _checked(opened: _OpenFile, bundle: Bundle, t: Trust) -> Verified:
    """The bundle's signature verified by a signer of ``t``, then the digest it signs compared with the bytes of
    ``opened`` (:func:`_compare`, for every method)."""
    trusted_files = [read_trusted(p) for p in t.keys]
    if bundle.method == "key":
        verified = _verify_key(opened, bundle, trusted_files, t.source)
    elif bundle.method == "certificate":
        verified = _verify_certificate(opened, bundle, trusted_files, t)
    else:
        verified = _verify_keyless(opened, bundle, t)
    step("hashed", opened.path)
    return verified


def _tie(art: Artifact, hashed: Hashed) -> None:
    """The artifact parsed is the file hashed: of the size hashed, its manifest the bytes hashed at its place. (The
    members are read later, each checked against the manifest's sha256: the manifest ties them to the signature.)"""
    if art.size != hashed.size:
        raise _changed(art.path, f"it is {art.size} bytes, it was {hashed.size} when hashed")
    manifest = art.members[MANIFEST_NAME]
    if not hashed.holds(art.fileno(), manifest.offset, art.manifest_bytes, art.path):
        raise _changed(art.path, "its manifest was rewritten in place")
