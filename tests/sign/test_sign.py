"""Signed artifacts (README, "Signed artifacts"; specs/CLI.md, "jaxport sign"): jaxport sign and the model_signing
CLI's bundles both ways, and every refusal with its exact message and exit code (14), the artifact never read past
its signature check."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("model_signing", reason="the signature tests need the extra jaxport[sign] (pip install "
                                            "'jaxport[sign]'; make test installs it)")
pytest.importorskip("OpenSSL", reason="model-signing needs pyopenssl beside it (pip install 'jaxport[sign]')")

import jaxport  # noqa: E402
from jaxport.artifact.signing.bundle import MAX_BUNDLE_BYTES  # noqa: E402
from jaxport.artifact.signing.check import key_id  # noqa: E402

from .keys import key_pair, keyless_bundle, pki  # noqa: E402

GOLDEN = Path(__file__).parents[1] / "golden" / "1.0"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_signing(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model_signing", *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def keys(tmp_path):
    return {"ci": key_pair(tmp_path, "ci"), "other": key_pair(tmp_path, "other")}


@pytest.fixture
def signed(tmp_path, keys, run_cli):
    """A copy of the golden mlp artifact, signed by jaxport sign with the key ``ci``."""
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    res = run_cli("sign", art, "--key", keys["ci"][0])
    assert res.exit_code == 0, res.stderr
    return art


def test_sign_writes_the_bundle_beside_it_and_keeps_the_artifact_bytes(tmp_path, keys, run_cli):
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    before = sha(art)
    res = run_cli("sign", art, "--key", keys["ci"][0])
    assert res.exit_code == 0, res.stderr
    kid = key_id(keys["ci"][1])
    assert res.stdout.replace("\n", " ").strip() == (
        f"Signed {art}: {art}.sig (key {kid[:16]}; sha256 {before[:16]}...); the artifact's bytes are unchanged. "
        f"Check it with 'jaxport check {art} --signature-key PUBLIC.pem'.")
    assert sha(art) == before
    assert Path(f"{art}.sig").is_file()
    res = run_cli("sign", art, "--key", keys["ci"][0], "--json", "--signature", tmp_path / "elsewhere.sig")
    assert res.exit_code == 0
    import json

    assert json.loads(res.stdout) == {"artifact": str(art), "signature": str(tmp_path / "elsewhere.sig"),
                                      "method": "key", "key_id": kid, "sha256": before}


def test_model_signing_verifies_what_jaxport_signs(signed, keys):
    res = model_signing("verify", "key", signed, "--signature", f"{signed}.sig", "--public_key", keys["ci"][1])
    assert res.returncode == 0 and "Verification succeeded" in res.stdout, res.stdout + res.stderr
    res = model_signing("verify", "key", signed, "--signature", f"{signed}.sig", "--public_key", keys["other"][1])
    assert res.returncode != 0


def test_jaxport_verifies_what_model_signing_signs(tmp_path, keys, run_cli):
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    res = model_signing("sign", "key", art, "--private_key", keys["ci"][0], "--signature", f"{art}.sig")
    assert res.returncode == 0, res.stderr
    res = run_cli("check", art, "--signature-key", keys["ci"][1])
    assert res.exit_code == 0, res.stderr
    assert f"signature verified: key {key_id(keys['ci'][1])[:16]} ({keys['ci'][1]})" in res.stdout
    verified = jaxport.verify_signature(art, keys["ci"][1])
    assert (verified.method, verified.key_id) == ("key", key_id(keys["ci"][1]))


def test_a_signed_artifact_loads_and_computes_as_before(signed, keys):
    import jax
    import numpy as np

    x = np.linspace(-1, 1, 2 * 784, dtype=np.float32).reshape(2, 784)
    plain = jaxport.load(GOLDEN / "mlp.jaxport")
    loaded = jaxport.load(signed, require_signature=keys["ci"][1])
    np.testing.assert_array_equal(np.asarray(loaded(x)), np.asarray(jax.jit(plain)(x)))
    with pytest.raises(jaxport.SignatureError, match="which is not trusted"):
        jaxport.load(signed, require_signature=[keys["other"][1]])
    options = jaxport.LoadOptions(require_signature=keys["ci"][1])
    assert options.require_signature == (keys["ci"][1],)
    with pytest.raises(jaxport.UsageError, match="signature names the bundle to check, but no key is trusted"):
        jaxport.LoadOptions(signature="x.sig")


def test_call_requires_the_signature_before_running(signed, keys, run_cli, tmp_path):
    res = run_cli("call", signed, "--random", "--dim", "batch=2", "--no-cache", "--require-signature",
                  keys["ci"][1])
    assert res.exit_code == 0, res.stderr
    res = run_cli("call", signed, "--random", "--dim", "batch=2", "--no-cache", "--require-signature",
                  keys["other"][1], "--require-signature", keys["ci"][1])
    assert res.exit_code == 0, res.stderr  # any one of the trusted keys
    res = run_cli("call", signed, "--random", "--dim", "batch=2", "--no-cache", "--signature", "x.sig")
    assert res.exit_code == 2
    assert res.stderr == ("error[usage]: signature names the bundle to check, but no key is trusted: give the "
                          "trusted public key with --require-signature PUBLIC.pem (require_signature= in Python). "
                          "See 'jaxport call --help'.\n")


# --- the refusals ---------------------------------------------------------------------------------------------------


def _refusal(case: str, art: Path, keys, tmp_path: Path) -> tuple[list[str], str]:
    """Prepare ``case`` on the signed artifact ``art``: the extra arguments and the expected message."""
    sig = Path(f"{art}.sig")
    pub, other = keys["ci"][1], keys["other"][1]
    kid = key_id(pub)
    bad = (f"{sig}: not a model-signing signature bundle: {{}}. Sign the artifact again (jaxport sign ARTIFACT "
           f"--key PRIVATE.pem, or model_signing sign).")
    if case == "no signature file":
        sig.unlink()
        return [pub], (f"{art}: no signature: {sig} not found. Sign the artifact with 'jaxport sign {art} --key "
                       f"PRIVATE.pem', or give the bundle's path with --signature PATH (signature= in Python).")
    if case == "truncated bundle":
        import json

        cut = sig.read_bytes()[:200]
        sig.write_bytes(cut)
        with pytest.raises(ValueError) as json_error:
            json.loads(cut)
        return [pub], bad.format(f"not valid JSON ({json_error.value}); it may be truncated")
    if case == "garbage bundle":
        sig.write_bytes(b"\x00\xffnot json at all")
        return [pub], bad.format("not valid JSON ('utf-8' codec can't decode byte 0xff in position 1: invalid start "
                                 "byte); it may be truncated")
    if case == "oversized bundle":
        sig.write_bytes(b" " * (MAX_BUNDLE_BYTES + 1))
        return [pub], (f"{sig}: the signature bundle is {MAX_BUNDLE_BYTES + 1} bytes; bundles are capped at "
                       f"{MAX_BUNDLE_BYTES} bytes (1 MiB; one of model signing is a few kB), so this is not one. "
                       f"Sign the artifact again.")
    if case == "untrusted key":
        return [other], (f"{sig}: signed by key {kid[:16]}, which is not trusted (--require-signature: "
                         f"{key_id(other)[:16]} ({other})). Do not run the artifact; trust the signer's public key "
                         f"if it is one you expect.")
    if case == "swapped artifact":
        signed_sha = sha(art)
        shutil.copy(GOLDEN / "mlp-multiplatform.jaxport", art)  # another valid artifact, under the signed name
        return [pub], (f"{art}: not the file that was signed: its sha256 is {sha(art)[:16]}..., the signed file's "
                       f"{signed_sha[:16]}... (changed after signing, or another artifact put beside this "
                       f"signature). Do not run it; sign it again if it is yours.")
    if case == "one bit changed":
        signed_sha = sha(art)
        data = bytearray(art.read_bytes())
        data[len(data) // 2] ^= 0x01
        art.write_bytes(bytes(data))
        return [pub], (f"{art}: not the file that was signed: its sha256 is {sha(art)[:16]}..., the signed file's "
                       f"{signed_sha[:16]}... (changed after signing, or another artifact put beside this "
                       f"signature). Do not run it; sign it again if it is yours.")
    if case == "bundle for another file name":
        renamed = art.with_name("fraud-model.jaxport")
        shutil.copy(art, renamed)  # the very bytes that were signed, under another name
        shutil.copy(sig, f"{renamed}.sig")
        return [pub], (f"{renamed}.sig: the signature is for a file named 'mlp.jaxport', not 'fraud-model.jaxport': "
                       f"a bundle made for another file. Sign this artifact, or give it its signed name back if it "
                       f"is that file.")
    if case == "altered bundle":
        import base64
        import json

        doc = json.loads(sig.read_text())
        doc["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(b"\x30\x06\x02\x01\x01\x02\x01\x01").decode()
        sig.write_text(json.dumps(doc))
        return [pub], (f"{sig}: the signature does not verify with the key {pub}: the bundle was altered after "
                       f"signing, or made by another key with the same id. Do not run the artifact.")
    if case == "keyless bundle offline":
        sig.write_bytes(keyless_bundle(sig, tmp_path))
        return [pub], (f"{sig}: a keyless Sigstore signature (certificate for dev@example.com, sigstore); verifying "
                       f"it needs Sigstore's trust root, and no Sigstore trust root is available offline for "
                       f"--require-signature, which trusts keys only (jaxport fetches no trust root while loading). "
                       f"Sign with a key (jaxport sign --key) or trust the signer in a policy's "
                       f"signature.certificate_identities.")
    raise AssertionError(case)


REFUSALS = ["no signature file", "truncated bundle", "garbage bundle", "oversized bundle", "untrusted key",
            "swapped artifact", "one bit changed", "bundle for another file name", "altered bundle",
            "keyless bundle offline"]


def _target(case: str, art: Path) -> Path:
    return art.with_name("fraud-model.jaxport") if case == "bundle for another file name" else art


@pytest.mark.parametrize("case", REFUSALS)
def test_call_refuses_before_reading_the_artifact(case, signed, keys, tmp_path, run_cli, monkeypatch):
    trusted, message = _refusal(case, signed, keys, tmp_path)
    target = _target(case, signed)
    read = []
    import jaxport.artifact.signing.check as signature_check
    import jaxport.run.load as run_load

    def reading(*a, **k):
        read.append(a)
        raise AssertionError("the artifact was read before its signature verified")

    monkeypatch.setattr(run_load, "open_artifact", reading)
    monkeypatch.setattr(signature_check, "read_artifact", reading)
    args = [a for t in trusted for a in ("--require-signature", t)]
    res = run_cli("call", target, "--random", "--dim", "batch=2", "--no-cache", *args)
    assert (res.exit_code, res.stderr) == (14, f"error[signature]: {message}\n")
    assert read == []


@pytest.mark.parametrize("case", REFUSALS)
def test_check_names_the_signature_rule(case, signed, keys, tmp_path, run_cli):
    trusted, message = _refusal(case, signed, keys, tmp_path)
    message = message.replace("--require-signature", "--signature-key")
    target = _target(case, signed)
    res = run_cli("check", target, *[a for t in trusted for a in ("--signature-key", t)])
    assert res.exit_code == 14
    assert res.stderr == (f"error[violation]: {target} breaks the command-line rules: 1 violation: [signature] "
                          f"{message.rstrip('.')}.\n")


@pytest.mark.parametrize("case", ["untrusted key", "one bit changed", "no signature file"])
def test_load_raises_the_same_refusal(case, signed, keys, tmp_path):
    trusted, message = _refusal(case, signed, keys, tmp_path)
    with pytest.raises(jaxport.SignatureError) as raised:
        jaxport.load(signed, require_signature=trusted)
    assert str(raised.value) == message


def test_an_artifact_that_is_no_artifact_is_refused_by_its_signature_first(tmp_path, keys, run_cli):
    junk = tmp_path / "junk.jaxport"
    junk.write_bytes(b"PK\x03\x04 not a zip")
    res = run_cli("call", junk, "--random", "--require-signature", keys["ci"][1])
    assert res.exit_code == 14 and res.stderr.startswith(f"error[signature]: {junk}: no signature: ")
    # Signed (by model_signing, which signs any file): the signature verifies, then the format check refuses it.
    assert model_signing("sign", "key", junk, "--private_key", keys["ci"][0], "--signature",
                         f"{junk}.sig").returncode == 0
    res = run_cli("call", junk, "--random", "--require-signature", keys["ci"][1])
    assert res.exit_code == 7, res.stderr


def test_sign_refuses_a_damaged_artifact_and_a_bad_key(tmp_path, keys, run_cli):
    junk = tmp_path / "junk.jaxport"
    junk.write_bytes(b"not an artifact")
    res = run_cli("sign", junk, "--key", keys["ci"][0])
    assert res.exit_code == 7 and not Path(f"{junk}.sig").exists()
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    res = run_cli("sign", art, "--key", keys["ci"][1])
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {keys['ci'][1]}: not a PEM private key (-----BEGIN "
                                              f"PRIVATE KEY----- or -----BEGIN EC PRIVATE KEY-----) that can be read, "
                                              f"or the password is wrong.\n")


@pytest.mark.parametrize("kind, shown", [("rsa", "an RSA key"), ("ed25519", "an Ed25519 key"),
                                         ("secp256k1", "an elliptic-curve key on secp256k1")])
def test_keys_of_another_kind_are_named_when_signing_and_trusting(kind, shown, signed, tmp_path, run_cli):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    private = {"rsa": lambda: rsa.generate_private_key(65537, 2048), "ed25519": ed25519.Ed25519PrivateKey.generate,
               "secp256k1": lambda: ec.generate_private_key(ec.SECP256K1())}[kind]()
    pem, pub = tmp_path / f"{kind}.pem", tmp_path / f"{kind}.pub"
    pem.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    pub.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
    res = run_cli("sign", signed, "--key", pem, "--signature", tmp_path / "x.sig")
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {pem}: {shown}; model signing signs with elliptic-curve "
                                              f"keys on P-256, P-384 or P-521 (openssl ecparam -name prime256v1 "
                                              f"-genkey -noout -out PRIVATE.pem).\n")
    assert not (tmp_path / "x.sig").exists()
    res = run_cli("call", signed, "--random", "--require-signature", pub)
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {pub}: {shown}; model signing uses elliptic-curve keys "
                                              f"on P-256, P-384 or P-521.\n")


def test_without_the_extra_the_commands_say_what_to_install(signed, keys, run_cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "model_signing"
                        else real(name, *a))
    res = run_cli("sign", signed, "--key", keys["ci"][0])
    assert (res.exit_code, res.stderr) == (10, "error[platform]: signing needs the optional extra jaxport[sign] "
                                               "(model-signing is not installed): pip install 'jaxport[sign]'.\n")
    # a key's bundle is verified with cryptography alone: model-signing is not needed to run a key-signed artifact
    res = run_cli("call", signed, "--random", "--dim", "batch=2", "--no-cache", "--require-signature",
                  keys["ci"][1])
    assert res.exit_code == 0, res.stderr
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("model_signing", "cryptography")
                        else real(name, *a))
    res = run_cli("call", signed, "--random", "--require-signature", keys["ci"][1])
    assert (res.exit_code, res.stderr) == (10, "error[platform]: verifying a signature needs the optional extra "
                                               "jaxport[sign] (cryptography is not installed): pip install "
                                               "'jaxport[sign]'.\n")


# --- the PKI method, policies, inspect, writers of new artifacts ----------------------------------------------------


def test_certificate_signing_round_trips_with_model_signing(tmp_path, run_cli):
    p = pki(tmp_path)
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    res = run_cli("sign", art, "--key", p["leaf_key"], "--certificate", p["leaf"], "--certificate-chain", p["ca"])
    assert res.exit_code == 0, res.stderr
    res = model_signing("verify", "certificate", art, "--signature", f"{art}.sig", "--certificate_chain", p["ca"])
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_cli("check", art, "--signature-key", p["ca"])
    assert res.exit_code == 0, res.stderr
    policy = tmp_path / "policy.yaml"
    policy.write_text("jaxport_policy: 1\nsignature:\n  keys: [ca.crt]\n  certificate_identities:\n"
                      "    - identity: someone@example.com\n")
    res = run_cli("check", art, "--policy", policy)
    assert res.exit_code == 14
    assert "signed with a certificate for ci@example.com, ci signer (issuer jaxport test root), none of the " \
           "trusted identities (someone@example.com)" in res.stderr
    policy.write_text("jaxport_policy: 1\nsignature:\n  keys: [ca.crt]\n  certificate_identities:\n"
                      "    - {identity: ci@example.com, issuer: jaxport test root}\nplatforms: {allowed: [cpu]}\n")
    res = run_cli("check", art, "--policy", policy)
    assert res.exit_code == 0, res.stderr


def test_certificate_signing_without_a_chain_says_to_give_one(tmp_path, run_cli):
    p = pki(tmp_path)
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    res = run_cli("sign", art, "--key", p["leaf_key"], "--certificate", p["leaf"])
    assert (res.exit_code, res.stderr) == (2, "error[usage]: a signing certificate is given without its chain: give "
                                              "the issuing CA's certificate (and any intermediates) with "
                                              "--certificate-chain CHAIN (certificate_chain= in Python); model "
                                              "signing carries the chain in the bundle, and a verifier checks it "
                                              "against a trusted root.\n")
    assert not Path(f"{art}.sig").exists()


def test_a_certificate_from_another_ca_of_the_same_name_is_refused(tmp_path, run_cli):
    (tmp_path / "spoof").mkdir()
    trusted, spoof = pki(tmp_path), pki(tmp_path / "spoof")  # both roots are named "jaxport test root"
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    res = run_cli("sign", art, "--key", spoof["leaf_key"], "--certificate", spoof["leaf"], "--certificate-chain",
                  spoof["ca"])
    assert res.exit_code == 0, res.stderr
    res = run_cli("check", art, "--signature-key", trusted["ca"])
    assert (res.exit_code, res.stderr) == (14, f"error[violation]: {art} breaks the command-line rules: 1 violation: "
                                               f"[signature] {art}.sig: the signature does not verify with a "
                                               f"certificate chain to {trusted['ca']}: X509StoreContextError: "
                                               f"certificate signature failure.\n")


def test_a_policy_signature_section_is_checked_first(signed, keys, tmp_path, run_cli):
    policy = tmp_path / "policy.yaml"
    policy.write_text("jaxport_policy: 1\nsignature:\n  keys: [other.pub]\nplatforms: {allowed: [tpu]}\n")
    res = run_cli("check", signed, "--policy", policy, "--json")
    assert res.exit_code == 14
    import json

    report = json.loads(res.stdout)
    assert [r["rule"] for r in report["rules"]] == ["signature"]
    assert report["notes"] == [{"rule": "signature", "message": "the other rules (platforms.allowed) were not "
                                "checked: an artifact whose signature does not verify is not read further."}]
    policy.write_text("jaxport_policy: 1\nsignature:\n  keys: [ci.pub]\nplatforms: {allowed: [tpu]}\n")
    res = run_cli("check", signed, "--policy", policy)
    assert res.exit_code == 14 and "[platforms.allowed]" in res.stderr
    policy.write_text("jaxport_policy: 1\nsignature: {}\n")
    res = run_cli("check", signed, "--policy", policy)
    assert (res.exit_code, res.stderr) == (2, f"error[policy-file]: {policy}:2: signature needs 'keys' (trusted "
                                              f"public keys' PEM files) or 'certificate_identities', or both.\n")


def test_inspect_says_what_signature_sits_beside_it_without_verifying(signed, keys, tmp_path, run_cli):
    from jaxport_cli.inspect_view import output

    kid = key_id(keys["ci"][1])
    line = [t for t in output(str(signed), False, None).splitlines() if t.startswith("  signature:")]
    assert line == [f"  signature: {signed}.sig, signed by key {kid[:16]}; not verified (jaxport check ARTIFACT "
                    f"--signature-key PUBLIC.pem verifies it)"]
    res = run_cli("inspect", signed, "--signature-key", keys["ci"][1])
    assert res.exit_code == 0
    assert f"  signature: {signed}.sig: verified, key {kid[:16]} ({keys['ci'][1]})" in res.stdout
    res = run_cli("inspect", signed, "--signature-key", keys["other"][1])
    assert res.exit_code == 14
    unsigned = tmp_path / "plain.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", unsigned)
    assert "  signature: none beside it (jaxport sign signs it)" in output(str(unsigned), False, None)


def test_rebind_writes_an_unsigned_artifact_and_says_so(tmp_path, keys, run_cli):
    from jaxport.artifact.signing.sign import carry_notes

    src = tmp_path / "mlp-bound.jaxport"
    shutil.copy(GOLDEN / "mlp-bound.jaxport", src)
    assert run_cli("sign", src, "--key", keys["ci"][0]).exit_code == 0
    out = tmp_path / "tuned.jaxport"
    assert carry_notes(src, out) == [
        f"{src}.sig signs {src}, not the new artifact: its signature does not carry over. Sign {out} again "
        f"(jaxport sign {out} --key PRIVATE.pem)."]
    res = run_cli("rebind", src, "--bind", "params=nowhere.npz", "-o", out, "--require-signature", keys["other"][1])
    assert res.exit_code == 14 and "which is not trusted" in res.stderr


def test_a_keyless_bundle_with_trusted_identities_is_checked_offline(signed, keys, tmp_path, run_cli):
    """With certificate_identities, a keyless bundle goes to sigstore with the trust root it holds offline (its
    log warning kept off stderr); one that sigstore cannot read is refused as no bundle, in one line."""
    sig = Path(f"{signed}.sig")
    sig.write_bytes(keyless_bundle(sig, tmp_path))
    policy = tmp_path / "policy.yaml"
    policy.write_text("jaxport_policy: 1\nsignature:\n  certificate_identities:\n"
                      "    - {identity: dev@example.com, issuer: 'https://accounts.example.com'}\n")
    res = run_cli("check", signed, "--policy", policy)
    assert res.exit_code == 14
    assert res.stderr.count("\n") == 1 and "TUF" not in res.stderr
    assert (f"[signature] {sig}: not a model-signing signature bundle: sigstore cannot read it as a keyless bundle "
            f"(failed to load bundle: ") in res.stderr


def test_export_over_a_signed_artifact_removes_the_signature_it_no_longer_matches(tmp_path, keys, run_cli,
                                                                                  monkeypatch):
    """A re-export that writes the same bytes (the same code and spec) keeps the signature, which still signs them;
    one that writes other bytes removes it and says which, so no stale bundle sits beside the new artifact."""
    from tests.support import EXAMPLES

    monkeypatch.chdir(tmp_path)
    shutil.copytree(EXAMPLES / "mlp", "mlp")
    export = ("export", "mlp/model.py:predict", "--shapes", "mlp/spec.yaml", "-o", "m.jaxport")
    assert run_cli(*export).exit_code == 0
    assert run_cli("sign", "m.jaxport", "--key", keys["ci"][0]).exit_code == 0
    res = run_cli(*export)
    assert res.exit_code == 0 and "removed" not in res.stderr
    assert run_cli("check", "m.jaxport", "--signature-key", keys["ci"][1]).exit_code == 0
    res = run_cli(*export, "--version", "2.0.0")  # other bytes under the same name
    assert res.exit_code == 0
    assert ("warning: removed m.jaxport.sig: it signed the previous m.jaxport, not the one just written. Sign it again "
            "(jaxport sign m.jaxport --key PRIVATE.pem).\n") in res.stderr
    assert not Path("m.jaxport.sig").exists()
    Path("m.jaxport.sig").write_text("{}")  # no bundle at all
    res = run_cli("rebind", "m.jaxport", "--bind", "x=nowhere.npz", "-o", "m.jaxport")
    assert res.exit_code != 0 and Path("m.jaxport.sig").exists()  # nothing written: nothing removed
    res = run_cli(*export)
    assert ("warning: removed m.jaxport.sig: it is no signature bundle jaxport reads, so it signs no m.jaxport. Sign "
            "it again (jaxport sign m.jaxport --key PRIVATE.pem).\n") in res.stderr
