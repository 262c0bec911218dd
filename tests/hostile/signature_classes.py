"""The signature class (issue 37): hostile signature bundles beside a valid artifact, and valid bundles that sign
something else, driven through the commands that require a signature (``call --require-signature``, ``check
--signature-key``) and ``inspect``, which shows a bundle unverified.

Every case must be refused by the signature check (exit 14, one ``error[signature]``/``error[violation]`` line),
before the artifact is read; ``inspect`` may succeed (it verifies nothing), but must not print the bundle's control
characters. Needs the extra ``jaxport[sign]``; without it the class has no cases.

The class ``signature-swap`` (issue 46): a validly signed artifact, and an attacker in the jaxport process (a hook,
``tests/sign/swap.py``) who, at one event of the command (an opening of the artifact's path, or a step of the
signature check), renames an unsigned artifact over it (and the signed one back at the next event), renames a hard
link to one there, or rewrites the file in place. Each command that requires a signature (``call``, ``verify``,
``rebind``, ``inspect --signature-key``) must run the signed artifact (exit 0) or refuse it (exit 14, one line; a
rewrite in place also exit 8, a member that no longer has its signed digest). The unsigned artifact makes each
command fail otherwise (another function, dimension and bound tensor, other outputs than ``--expect`` wants), so
that a run of it is a failure by its exit code alone.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..sign import swap
from .corpus import Base, Case

SIGNED = swap.SIGNED  # the artifact's name in the work directory: the bundles below sign this name
CALL = ("call", ["call", SIGNED, "--random", "--no-cache", "--require-signature", "ci.pub"])
CHECK = ("check", ["check", SIGNED, "--signature-key", "ci.pub"])
INSPECT = ("inspect", ["inspect", SIGNED])


def _keys(d: Path) -> dict[str, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    out = {}
    for name in ("ci", "other"):
        key = ec.generate_private_key(ec.SECP256R1())
        out[name] = d / f"{name}.pem"
        out[name].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
        out[name + ".pub"] = d / f"{name}.pub"
        out[name + ".pub"].write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return out


def _with_statement(bundle: bytes, edit) -> bytes:
    doc = json.loads(bundle)
    statement = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
    edit(statement)
    doc["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    return json.dumps(doc).encode()


def _with(bundle: bytes, edit) -> bytes:
    doc = json.loads(bundle)
    edit(doc)
    return json.dumps(doc).encode()


def bundles(b: Base) -> dict[str, tuple[bytes, tuple]]:
    """Every hostile bundle by name: (its bytes, the extra setup steps), all beside a copy of the base artifact."""
    from jaxport.artifact.signing.sign import sign

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        keys = _keys(d)
        art = d / SIGNED
        shutil.copyfile(b.dir / "base.jaxport", art)
        good = (sign(art, keys["ci"]).signature).read_bytes()
        by_other = sign(art, keys["other"], signature=d / "o.sig").signature.read_bytes()
        other_name = d / "other-name.jaxport"
        shutil.copyfile(art, other_name)
        for_other = sign(other_name, keys["ci"]).signature.read_bytes()
        pub = keys["ci.pub"].read_bytes()
    deep = b"[" * 100 + b"]" * 100
    cases = {
        "truncated": good[: len(good) // 2],
        "empty": b"",
        "garbage": bytes(range(256)) * 4,
        "oversized": b"{" + b" " * (1 << 20) + b"}",
        "deep-json": deep,
        "not-an-object": b"[1, 2, 3]",
        "duplicate-keys": good[:-1] + b', "mediaType": "x"}',
        "nan": _with(good, lambda d: d.update(extra=float("nan"))),
        "wrong-media-type": _with(good, lambda d: d.update(mediaType="application/json")),
        "no-material": _with(good, lambda d: d.update(verificationMaterial={})),
        "no-signatures": _with(good, lambda d: d["dsseEnvelope"].update(signatures=[])),
        "two-signatures": _with(good, lambda d: d["dsseEnvelope"]["signatures"].append(
            d["dsseEnvelope"]["signatures"][0])),
        "payload-not-base64": _with(good, lambda d: d["dsseEnvelope"].update(payload="%%%")),
        "payload-not-json": _with(good, lambda d: d["dsseEnvelope"].update(payload=base64.b64encode(b"\xff").decode())),
        "sig-not-base64": _with(good, lambda d: d["dsseEnvelope"]["signatures"][0].update(sig="***")),
        "altered-signature": _with(good, lambda d: d["dsseEnvelope"]["signatures"][0].update(
            sig=base64.b64encode(b"\x30\x06\x02\x01\x01\x02\x01\x01").decode())),
        "two-subjects": _with_statement(good, lambda s: s["subject"].append(s["subject"][0])),
        "subject-renamed": _with_statement(good, lambda s: s["subject"][0].update(name=SIGNED)),
        "escape-in-name": _with_statement(good, lambda s: s["subject"][0].update(name="\x1b[31mevil\x1b]0;x\x07")),
        "digest-edited": _with_statement(good, lambda s: s["predicate"]["resources"][0].update(digest="0" * 64)),
        "untrusted-key": by_other,
        "for-another-name": for_other,
        "no-hint-untrusted": _with(by_other, lambda d: d["verificationMaterial"]["publicKey"].update(hint=None)),
        "keyless": _with(good, lambda d: d.update(verificationMaterial={
            "certificate": {"rawBytes": base64.b64encode(b"0\x03\x02\x01\x00").decode()},
            "tlogEntries": [{"logIndex": "1"}]})),
        "certificate-chain-junk": _with(good, lambda d: d.update(verificationMaterial={
            "x509CertificateChain": {"certificates": [{"rawBytes": base64.b64encode(b"junk").decode()}]},
            "tlogEntries": []})),
    }
    setup = (("copy", SIGNED, "base.jaxport"), ("write", "ci.pub", pub))
    return {name: (data, setup) for name, data in cases.items()}


def signed_elsewhere(b: Base) -> dict[str, bytes]:
    """Valid bundles that sign something other than the artifact beside them: another valid artifact under the same
    name (the artifact swapped), a directory holding it (``model_signing sign`` of the folder), and the artifact
    signed by the PKI method with a certificate from a CA nobody trusts here."""
    from model_signing import hashing
    from model_signing import signing as ms_signing

    from jaxport.artifact.signing.sign import sign

    from ..sign.keys import pki

    golden = Path(__file__).parents[1] / "golden" / "1.0" / "mlp.jaxport"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        keys = _keys(d)
        (d / "swap").mkdir()
        shutil.copyfile(golden, d / "swap" / SIGNED)
        swapped = sign(d / "swap" / SIGNED, keys["ci"]).signature.read_bytes()
        (d / "folder").mkdir()
        shutil.copyfile(b.dir / "base.jaxport", d / "folder" / SIGNED)
        config = ms_signing.Config()
        config.use_elliptic_key_signer(private_key=keys["ci"])
        config.set_hashing_config(hashing.Config())
        config.sign(d / "folder", d / "folder.sig")
        folder = (d / "folder.sig").read_bytes()
        (d / "pki").mkdir()
        p = pki(d / "pki")
        shutil.copyfile(b.dir / "base.jaxport", d / SIGNED)
        by_certificate = sign(d / SIGNED, p["leaf_key"], signature=d / "c.sig", certificate=p["leaf"],
                              certificate_chain=[p["ca"]]).signature.read_bytes()
    return {"swapped-artifact": swapped, "signed-folder": folder, "untrusted-certificate": by_certificate}


#: Special files and links where the bundle should be: each refused without blocking on it or reading it.
SPECIAL_FILES = {
    "fifo": ("fifo", f"{SIGNED}.sig"),
    "char-device": ("chardev", f"{SIGNED}.sig", "zero"),
    "directory": ("dir", f"{SIGNED}.sig"),
    "dangling-link": ("symlink", f"{SIGNED}.sig", "missing.sig"),
    "link-outside": ("symlink", f"{SIGNED}.sig", "{outside}/sentinel.txt"),
    "link-loop": ("symlink", f"{SIGNED}.sig", f"{SIGNED}.sig"),
}


def cases(b: Base) -> Iterator[Case]:
    import importlib.util

    if importlib.util.find_spec("model_signing") is None or importlib.util.find_spec("OpenSSL") is None:
        return  # the class needs jaxport[sign]
    commands = tuple((label, tuple(argv)) for label, argv in (CALL, CHECK, INSPECT))
    inspect_ok = {"accept": frozenset({"inspect"}), "why": "inspect shows the bundle beside the artifact, unverified"}
    found = bundles(b)
    for name, (data, setup) in found.items():
        yield Case("signature", name, "signature", data, frozenset({14}), file=f"{SIGNED}.sig", commands=commands,
                   setup=setup, **inspect_ok)
    setup = next(iter(found.values()))[1]  # the artifact and the trusted key, as for every bundle
    for name, data in signed_elsewhere(b).items():
        yield Case("signature", name, "signature", data, frozenset({14}), file=f"{SIGNED}.sig", commands=commands,
                   setup=setup, **inspect_ok)
    for name, step in SPECIAL_FILES.items():
        yield Case("signature", name, "signature", None, frozenset({14}), commands=commands, setup=(*setup, step),
                   timeout=60.0 if name == "fifo" else 0.0, **inspect_ok)


# --- signature-swap (issue 46) ---------------------------------------------------------------------------------------

#: The commands of the swap class, each given the signed artifact ``m.jaxport``.
SWAP_COMMANDS = (
    ("call", ("call", SIGNED, "--inputs", "x.npy", "--expect", "want.npy", "--no-cache", "--require-signature",
              "ci.pub")),
    ("verify", ("verify", SIGNED, "--inputs", "x.npy", "--expect", "want.npy", "--require-signature", "ci.pub")),
    ("rebind", ("rebind", SIGNED, "--bind", "params=model.py:K5", "-o", "out.jaxport", "--no-manifest",
                "--require-signature", "ci.pub")),
    ("inspect", ("inspect", SIGNED, "--signature-key", "ci.pub", "--function", "double")),
)
#: The events of each of them, in order: the opening of the artifact and the steps of its signature check; the
#: artifact is never opened again (tests/sign/test_swap.py asserts the list for call).
SWAP_EVENTS = ("open", "after opened", "after verified", "after hashed", "after read")
#: The hooks of the class (run.HOOKS), by name: ``swap-PLAN-EVENT``.
HOOKS: dict[str, str] = {f"swap-{plan}-{at}": swap.hook(plan, at) for plan in swap.PLANS
                         for at in range(len(SWAP_EVENTS))}


def swap_cases(b: Base) -> Iterator[Case]:
    """The class ``signature-swap`` (see the module docstring): each command at each event, for each plan."""
    import importlib.util

    if importlib.util.find_spec("model_signing") is None or importlib.util.find_spec("OpenSSL") is None:
        return  # the class needs jaxport[sign]
    with tempfile.TemporaryDirectory() as tmp:
        files = swap.build(Path(tmp))
    setup = ((("write", SIGNED, files["signed"]), ("write", f"{SIGNED}.sig", files["signature"]),
              ("write", "signed.jaxport", files["signed"]), ("write", "stranger.jaxport", files["stranger"]),
              ("write", "ci.pub", files["ci.pub"]), ("write", "model.py", files["model.py"]),
              ("write", "x.npy", _npy([1, 2, 3])), ("write", "want.npy", _npy([2, 4, 6]))))
    why = "the signed artifact ran, read from the descriptor whose bytes were checked"
    for plan in swap.PLANS:
        for at, event in enumerate(SWAP_EVENTS):
            name = f"swap-{plan}-{at}"
            for label, argv in SWAP_COMMANDS:
                yield Case("signature-swap", f"{label}-{plan}-at-{event.replace(' ', '-')}", "signature-swap", None,
                           frozenset({14, 8} if plan == "rewritten" else {14}), file=SIGNED,
                           commands=((label, argv),), setup=setup, timeout=120.0, hook=name,
                           accept=frozenset({label}), why=why,
                           outputs=frozenset({"out.jaxport"} if label == "rebind" else ()))


def _npy(values: list[float]) -> bytes:
    import io

    import numpy as np

    out = io.BytesIO()
    np.save(out, np.array(values, np.float32))
    return out.getvalue()
