"""Signing an artifact: :func:`sign` writes the model-signing bundle ``ARTIFACT.sig`` beside it, with the
``model-signing`` library (the optional extra ``jaxport[sign]``), as ``model_signing sign key`` (or ``certificate``)
does; ``model_signing verify`` and :func:`jaxport.artifact.signing.check.verify_signature` accept it.

The artifact's bytes are left as they are (its digests, reproducible builds' included, stay): the signature is a file
of its own. An artifact is signed only once it opens and every member's sha256 checks, so a job never signs a
damaged file. A new artifact written from a signed one (``rebind``, ``upgrade``) is not signed: :func:`carry_notes`
says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._fsio import atomic_write, shown_path
from ...errors import SignatureError, UsageError
from ..container import open_artifact
from .bundle import parse_bundle, require_extra, signature_path
from .trust import private_key

__all__ = ["Signed", "carry_notes", "sign"]


@dataclass(frozen=True)
class Signed:
    """A signature :func:`sign` wrote: the artifact, its bundle, the method and the signer's key id."""

    artifact: Path
    signature: Path
    method: str  # "key" or "certificate"
    key_id: str | None
    sha256: str  # of the artifact, as signed

    def as_dict(self) -> dict[str, Any]:
        return {"artifact": str(self.artifact), "signature": str(self.signature), "method": self.method,
                "key_id": self.key_id, "sha256": self.sha256}


def sign(artifact: str | Path, key: str | Path, *, signature: str | Path | None = None,
         certificate: str | Path | None = None, certificate_chain: Iterable[str | Path] = (),
         password: str | None = None) -> Signed:
    """Sign ``artifact`` with the elliptic-curve private key ``key`` (PEM): write the bundle to ``signature``
    (default ``ARTIFACT.sig``), replacing one there. With ``certificate`` (the key's certificate, PEM) and
    ``certificate_chain`` (the PKI's intermediate and root certificates), the bundle carries the chain (model
    signing's certificate method), verified against a trusted root certificate. ``password``: the key's, when it is
    encrypted. The artifact is opened and every member's sha256 checked first (``FormatError``/``IntegrityError``);
    its bytes are not changed. Needs ``jaxport[sign]`` (``PlatformError`` otherwise)."""
    require_extra("signing")
    import tempfile

    from model_signing import hashing
    from model_signing import signing as ms_signing

    art, key_path = Path(artifact), Path(key)
    out = signature_path(art, signature)
    chain = [Path(c) for c in ([certificate_chain] if isinstance(certificate_chain, (str, os.PathLike))
                                else certificate_chain)]
    if chain and certificate is None:
        raise UsageError("a certificate chain is given without the signing certificate: give --certificate CERT "
                         "(certificate= in Python) with --certificate-chain.")
    if certificate is not None and not chain:
        raise UsageError("a signing certificate is given without its chain: give the issuing CA's certificate (and "
                         "any intermediates) with --certificate-chain CHAIN (certificate_chain= in Python); model "
                         "signing carries the chain in the bundle, and a verifier checks it against a trusted root.")
    with open_artifact(art) as opened:
        opened.verify_all()
    private_key(key_path, password)  # refused here, naming the file, before model_signing reads it
    config = ms_signing.Config()
    try:
        if certificate is None:
            config.use_elliptic_key_signer(private_key=key_path, password=password)
        else:
            config.use_certificate_signer(private_key=key_path, signing_certificate=Path(certificate),
                                          certificate_chain=chain)
    except (OSError, ValueError) as e:
        what = "certificate files" if certificate is not None else "private key"
        raise UsageError(f"cannot sign with the {what} given: {str(e)[:200]}") from None
    config.set_hashing_config(hashing.Config())
    with tempfile.TemporaryDirectory(prefix="jaxport-sign-") as d:
        written = Path(d) / "bundle.sig"
        try:
            config.sign(art, written)
        except (OSError, ValueError) as e:
            raise SignatureError(f"{shown_path(art)}: signing failed: {str(e)[:200]}") from None
        raw = written.read_bytes()
    bundle = parse_bundle(raw, out)  # what was written is what verify reads
    # model signing read the certificates itself: they are named here, as every file read is, so that no bundle
    # replaces one
    read = [art, key_path, *([Path(certificate)] if certificate is not None else []), *chain]
    atomic_write(out, lambda f: f.write(raw), inputs=read)
    sha = bundle.signed_sha256
    assert sha is not None
    return Signed(art, out, bundle.method, bundle.key_id, sha)


def carry_notes(source: str | Path, output: str | Path) -> list[str]:
    """What a command that writes ``output`` from ``source`` (``rebind``, ``upgrade``) says of signatures: a
    signature of the source does not carry over. (One left beside the output, which signed the file it replaced,
    is removed when the output is written: ``signature.drop_stale``.)"""
    old = signature_path(source)
    if not old.exists():
        return []
    return [f"{shown_path(old)} signs {shown_path(source)}, not the new artifact: its signature does not carry over. "
            f"Sign {shown_path(output)} again (jaxport sign {shown_path(output)} --key PRIVATE.pem)."]
