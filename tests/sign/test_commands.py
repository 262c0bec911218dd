"""--require-signature on every command that loads (serve, warmup, verify, rebind) and require_signature= in the
library's holders of LoadOptions (jaxport.serve.open_models, the batch engines' Engine): the same check, first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("model_signing", reason="the signature tests need the extra jaxport[sign] (pip install "
                                            "'jaxport[sign]'; make test installs it)")

import jaxport  # noqa: E402
from jaxport.artifact.signing.check import key_id  # noqa: E402

from .keys import key_pair  # noqa: E402

GOLDEN = Path(__file__).parents[1] / "golden" / "1.0"


@pytest.fixture
def setup(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ci, other = key_pair(tmp_path, "ci"), key_pair(tmp_path, "other")
    art = tmp_path / "mlp.jaxport"
    shutil.copy(GOLDEN / "mlp.jaxport", art)
    assert run_cli("sign", art, "--key", ci[0]).exit_code == 0
    untrusted = (f"error[signature]: {art}.sig: signed by key {key_id(ci[1])[:16]}, which is not trusted "
                 f"(--require-signature: {key_id(other[1])[:16]} ({other[1]})). Do not run the artifact; trust the "
                 f"signer's public key if it is one you expect.\n")
    return art, ci[1], other[1], untrusted


@pytest.mark.parametrize("argv", [
    ["serve", "{art}", "--dim", "batch=1"],
    ["warmup", "{art}", "--dim", "batch=2", "--cache-dir", "cache"],
    ["verify", "{art}"],
    ["rebind", "{art}", "--bind", "params=w.npz", "-o", "new.jaxport"],
])
def test_every_loading_command_refuses_an_untrusted_signature_first(argv, setup, run_cli):
    art, _, other, untrusted = setup
    res = run_cli(*[a.format(art=art) for a in argv], "--require-signature", other)
    assert (res.exit_code, res.stderr.splitlines()[-1] + "\n") == (14, untrusted)
    assert not Path("new.jaxport").exists()


def test_warmup_with_the_trusted_key(setup, run_cli):
    art, pub, _, _ = setup
    res = run_cli("warmup", art, "--dim", "batch=2", "--cache-dir", "cache", "--require-signature", pub)
    assert res.exit_code == 0, res.stderr


def test_the_library_holders_of_load_options_check_it(setup):
    from jaxport.serve.engine import Engine

    art, pub, other, untrusted = setup
    message = untrusted.removeprefix("error[signature]: ").rstrip("\n")
    with pytest.raises(jaxport.SignatureError) as raised:
        Engine(str(art), require_signature=other)
    assert str(raised.value) == message
    with pytest.raises(jaxport.SignatureError) as raised:
        with jaxport.serve.open_models([str(art)], dims={"batch": [1]},
                                       load=jaxport.LoadOptions(require_signature=other)):
            pass
    assert str(raised.value) == message
    with pytest.raises(jaxport.SignatureError) as raised:
        jaxport.verify_artifact(art, require_signature=other)
    assert str(raised.value) == message
    assert Engine(str(art), require_signature=pub).load.require_signature == (pub,)


def test_rebind_says_the_new_artifact_is_not_signed(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ci = key_pair(tmp_path, "ci")
    src = tmp_path / "mlp-bound.jaxport"
    shutil.copy(GOLDEN / "mlp-bound.jaxport", src)
    assert run_cli("sign", src, "--key", ci[0]).exit_code == 0
    assert run_cli("extract", src, "--weights", "w.npz").exit_code == 0
    res = run_cli("rebind", src, "--bind", "params=w.npz", "-o", "tuned.jaxport", "--require-signature", ci[1])
    assert res.exit_code == 0, res.stderr
    assert (f"note: {src}.sig signs {src}, not the new artifact: its signature does not carry over. Sign "
            f"tuned.jaxport again") in " ".join(res.stderr.split())
    assert not Path("tuned.jaxport.sig").exists()


@pytest.mark.slow
def test_upgrade_says_the_new_artifact_is_not_signed(tmp_path, run_cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ci = key_pair(tmp_path, "ci")
    shutil.copy(GOLDEN / "mlp.jaxport", "old.jaxport")  # written by an older JAX: upgrade writes a new one
    assert run_cli("sign", "old.jaxport", "--key", ci[0]).exit_code == 0
    res = run_cli("upgrade", "old.jaxport", "-o", "up.jaxport")
    assert res.exit_code == 0, res.stderr
    note = ("old.jaxport.sig signs old.jaxport, not the new artifact: its signature does not carry over. Sign "
            "up.jaxport again (jaxport sign up.jaxport --key PRIVATE.pem).")
    assert f"note: {note}" in " ".join(res.stderr.split())
    res = run_cli("upgrade", "old.jaxport", "-o", "up2.jaxport", "--json")
    import json

    assert json.loads(res.stdout)["notes"][-1] == note.replace("up.jaxport", "up2.jaxport")
    assert not Path("up.jaxport.sig").exists()
