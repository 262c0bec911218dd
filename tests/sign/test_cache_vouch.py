"""A required signature covers the cache directory (issue 54): nothing from it runs unless a trusted signer vouched.

``good.jaxport`` (x * 2) is signed by ``ci``; ``evil.jaxport`` (x * 3) has the same signature. An attacker who can
write the cache directory (or who ships it) replaces a shipped executable's bytes by evil's (the header's size and
sha256 recomputed, its key fields claiming good's program), plants padding or check verdicts, or a vouch of their
own: under ``--require-signature`` each is ignored with one line and good's numbers come out; without one, the
user's own cache is trusted as documented (the forged record runs: the forgery is real).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("model_signing", reason="the signature tests need the extra jaxport[sign] (make test installs it)")

import numpy as np  # noqa: E402

import jaxport  # noqa: E402
from jaxport.artifact.signing.check import key_id  # noqa: E402
from jaxport.run import executables  # noqa: E402

from .keys import key_pair  # noqa: E402

MODEL = "def good(x):\n    return x * 2\n\n\ndef evil(x):\n    return x * 3\n"
SPEC = 'jaxport: 1\ndims: {n: {min: 1, max: 64}}\nargs:\n  - "f32[n]"\n'
X = np.arange(1, 5, dtype=np.float32)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """good.jaxport (signed by ci), evil.jaxport, keys, and each one's shipped executable for n=4 on this CPU."""
    d = tmp_path_factory.mktemp("vouch")
    (d / "model.py").write_text(MODEL)
    (d / "spec.yaml").write_text(SPEC)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        for name in ("good", "evil"):
            jaxport.export(f"model.py:{name}", "spec.yaml", output=d / f"{name}.jaxport", name="f")
    finally:
        os.chdir(cwd)
    keys = {n: key_pair(d, n) for n in ("ci", "other")}
    jaxport.sign(d / "good.jaxport", keys["ci"][0])
    np.save(d / "x.npy", X)
    return d, keys


@pytest.fixture
def scene(built, tmp_path, monkeypatch, run_cli):
    """A copy of the artifacts in a fresh directory, with a cache ``C`` of good's shipped executable, vouched for
    by ci (warmup --target cpu --sign)."""
    d, keys = built
    for name in ("good.jaxport", "good.jaxport.sig", "evil.jaxport", "x.npy"):
        shutil.copy(d / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    res = run_cli("warmup", "good.jaxport", "--target", "cpu", "--dim", "n=4", "--cache-dir", "C", "--sign",
                  keys["ci"][0])
    assert res.exit_code == 0, res.stderr
    return tmp_path, keys


def _record(directory: Path) -> Path:
    (found,) = sorted(directory.glob("jaxport-executable-*.bin"))
    return found


def _forge(good: Path, evil: Path) -> None:
    """Put evil's executable into good's record, its header's size and sha256 recomputed (its key fields still
    good's: the program it claims is the signed one)."""
    good_record, _ = executables.read_record(good)
    evil_record, _ = executables.read_record(evil)
    header = dict(good_record.header, size=len(evil_record.blob),
                  sha256=hashlib.sha256(evil_record.blob).hexdigest())
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    good.write_bytes(executables.MAGIC + len(raw).to_bytes(8, "little") + raw + evil_record.blob)


def _evil_record(run_cli, tmp_path: Path) -> Path:
    res = run_cli("warmup", "evil.jaxport", "--target", "cpu", "--dim", "n=4", "--cache-dir", "E")
    assert res.exit_code == 0, res.stderr
    return _record(tmp_path / "E")


def _call(run_cli, *args):
    res = run_cli("call", "good.jaxport", "--inputs", "x.npy", "--cache-dir", "C", "--json", *args)
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    return doc, np.asarray(doc["outputs"][0]["values"] if "values" in doc["outputs"][0] else [])


def _fresh(*args: object) -> subprocess.CompletedProcess:
    """``jaxport ARGS`` in a process of its own: one that has loaded no program under a required signature (once
    one has, the records about that program need a vouch for the rest of the process) and checked none."""
    return subprocess.run([str(Path(sys.executable).parent / "jaxport"), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_a_vouched_executable_runs_and_says_who_vouched(scene, run_cli):
    tmp, keys = scene
    doc, _ = _call(run_cli, "--require-signature", keys["ci"][1])
    assert doc["timings"]["executable"] == "shipped"
    assert doc["timings"]["executable_vouched_by"] == f"key {key_id(keys['ci'][1])[:16]} ({keys['ci'][1]})"
    assert doc["warnings"] == []


def test_a_forged_executable_is_ignored_under_a_required_signature(scene, run_cli):
    tmp, keys = scene
    record = _record(tmp / "C")
    _forge(record, _evil_record(run_cli, tmp))
    out = tmp / "y.npy"
    res = run_cli("call", "good.jaxport", "--inputs", "x.npy", "--cache-dir", "C", "--json", "-o", out,
                  "--require-signature", keys["ci"][1])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    np.testing.assert_array_equal(np.load(out), X * 2)
    assert doc["timings"]["executable"] == "compiled" and doc["timings"]["executable_vouched_by"] is None
    assert f"ignored {record.name} in the cache C: a signature is required and no trusted signer vouched for it " \
           f"(vouch for the cache: jaxport sign ARTIFACT --key PRIVATE.pem --cache-dir DIR); doing its work here " \
           f"instead." in doc["warnings"]
    # the forgery is real: the user's own cache is trusted without a required signature (in a process of its own:
    # once a program was loaded under a required signature, its records need a vouch for the rest of the process)
    done = _fresh("call", "good.jaxport", "--inputs", "x.npy", "--cache-dir", "C", "-o", out)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(out), X * 3)


def test_an_older_vouch_for_earlier_bytes_hides_no_other_keys_vouch(scene, run_cli):
    """Keys rotate: one trusted key vouched for the bytes an entry held before, another for the bytes it holds now;
    whichever vouch is read first (they are read in file-name order, by key id), the entry is vouched for."""
    tmp, keys = scene
    record = _record(tmp / "C")
    good = record.read_bytes()
    ids = {name: key_id(keys[name][1]) for name in ("ci", "other")}
    old, new = sorted(ids, key=ids.__getitem__)  # the old key's vouch file comes first
    _forge(record, _evil_record(run_cli, tmp))
    assert run_cli("sign", "good.jaxport", "--key", keys[old][0], "--cache-dir", "C").exit_code == 0
    record.write_bytes(good)
    assert run_cli("sign", "good.jaxport", "--key", keys[new][0], "--cache-dir", "C").exit_code == 0
    done = _fresh("call", "good.jaxport", "--inputs", "x.npy", "--cache-dir", "C", "--json", "--require-signature",
                  keys["ci"][1], "--require-signature", keys["other"][1])  # its own process: this trust stays there
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["timings"]["executable"], doc["warnings"]) == ("shipped", [])
    assert doc["timings"]["executable_vouched_by"] == f"key {ids[new][:16]} ({keys[new][1]})"


def test_python_load_and_the_environment_cache_are_covered_too(scene, run_cli, monkeypatch):
    tmp, keys = scene
    _forge(_record(tmp / "C"), _evil_record(run_cli, tmp))
    loaded = jaxport.load("good.jaxport", require_signature=keys["ci"][1], cache_dir=tmp / "C")
    np.testing.assert_array_equal(np.asarray(loaded(X)), X * 2)
    monkeypatch.setenv("JAXPORT_CACHE_DIR", str(tmp / "C"))
    out = tmp / "y.npy"
    res = run_cli("call", "good.jaxport", "--inputs", "x.npy", "-o", out, "--require-signature", keys["ci"][1])
    assert res.exit_code == 0, res.stderr
    np.testing.assert_array_equal(np.load(out), X * 2)


@pytest.mark.parametrize("case", ["untrusted key", "another artifact", "altered vouch", "edited statement"])
def test_a_vouch_that_does_not_hold_vouches_for_nothing(case, scene, run_cli):
    tmp, keys = scene
    (vouch,) = sorted((tmp / "C").glob("jaxport-vouch-*.sig"))
    if case == "untrusted key":
        vouch.unlink()
        assert run_cli("sign", "good.jaxport", "--key", keys["other"][0], "--cache-dir", "C").exit_code == 0
        (vouch,) = sorted((tmp / "C").glob("jaxport-vouch-*.sig"))
        why = f"signed by key {key_id(keys['other'][1])[:16]}, which is not trusted"
    elif case == "another artifact":  # evil's vouch, named as good's: it names evil's sha256
        vouch.unlink()
        _evil_record(run_cli, tmp)
        shutil.copy(_record(tmp / "E"), tmp / "C" / _record(tmp / "E").name)
        assert run_cli("sign", "evil.jaxport", "--key", keys["ci"][0], "--cache-dir", "C").exit_code == 0
        (made,) = sorted((tmp / "C").glob("jaxport-vouch-*.sig"))
        made.rename(vouch)
        why = "it vouches for another artifact"
    else:
        doc = json.loads(vouch.read_text())
        import base64

        payload = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
        if case == "altered vouch":
            doc["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(b"\x30\x06\x02\x01\x01\x02\x01\x01").decode()
        else:  # a subject's digest changed to vouch for a forged record
            payload["subject"][0]["digest"]["sha256"] = "0" * 64
            doc["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
        vouch.write_text(json.dumps(doc))
        why = "its signature does not verify (altered after signing)"
    doc, _ = _call(run_cli, "--require-signature", keys["ci"][1])
    assert doc["timings"]["executable"] == "compiled"
    assert f"ignored the vouch {vouch.name}: {why} in the cache C." in doc["warnings"]


def test_a_planted_check_verdict_is_not_trusted_without_a_vouch(scene, run_cli):
    tmp, keys = scene
    (verdict,) = sorted((tmp / "C").glob("jaxport-verdict-*.json"))  # warmup --target left it; --sign vouched it
    signed = ("call", "good.jaxport", "--inputs", "x.npy", "--cache-dir", "C", "--json", "--require-signature",
              keys["ci"][1])
    doc = json.loads(_fresh(*signed).stdout)
    assert doc["warnings"] == [] and doc["timings"]["executable"] == "shipped"
    verdict.write_text(json.dumps(json.loads(verdict.read_text())))  # the same verdict, other bytes: not vouched
    warnings = json.loads(_fresh(*signed).stdout)["warnings"]
    assert warnings == [f"ignored {verdict.name} in the cache C: a signature is required and no trusted signer "
                        f"vouched for it (vouch for the cache: jaxport sign ARTIFACT --key PRIVATE.pem --cache-dir "
                        f"DIR); doing its work here instead."]
    assert run_cli("sign", "good.jaxport", "--key", keys["ci"][0], "--cache-dir", "C").exit_code == 0
    doc = json.loads(_fresh(*signed).stdout)
    assert doc["warnings"] == [] and doc["timings"]["executable"] == "shipped"


def test_jax_own_cache_is_not_read_under_a_required_signature(scene, run_cli):
    tmp, keys = scene
    for hit in (False, True):  # the first unsigned call fills JAX's cache, the second fetches from it
        done = _fresh("call", "good.jaxport", "--inputs", "x.npy", "--cache-dir", "J", "--json")
        assert json.loads(done.stdout)["timings"]["compile_cache_hit"] is hit, done.stderr
    done = _fresh("call", "good.jaxport", "--inputs", "x.npy", "--cache-dir", "J", "--json", "--require-signature",
                  keys["ci"][1])
    timings = json.loads(done.stdout)["timings"]
    assert (timings["executable"], timings["compile_cache_hit"]) == ("compiled", None)


RECOMPILE = """
import sys
import jaxport
from jaxport.run.cache import CacheWatch, compilation_cache

with compilation_cache("J"):
    loaded = jaxport.load("good.jaxport", require_signature=sys.argv[1:])
    watch = CacheWatch.start()
    loaded.backend.recompile((((4,), "float32"),))  # what serve --retune and warmup --retune run, for n=4
    print(watch.hit())
"""


def test_a_recompile_under_a_required_signature_does_not_read_jaxs_cache(scene):
    """The compile that retunes a program (``run.compile.retune``) is XLA's own under a required signature, as every
    other compile of a signed program: JAX's cache, which no signer vouched for, is neither read nor written."""
    tmp, keys = scene
    assert _fresh("call", "good.jaxport", "--inputs", "x.npy", "--cache-dir", "J").returncode == 0  # fills J
    for trust, hit in (([], "True"), ([keys["ci"][1]], "None")):
        done = subprocess.run([sys.executable, "-c", RECOMPILE, *map(str, trust)], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [hit], trust


def test_sign_cache_dir_needs_entries_and_says_what_it_vouched(scene, run_cli, tmp_path):
    tmp, keys = scene
    empty = tmp / "empty"
    empty.mkdir(mode=0o700)
    res = run_cli("sign", "good.jaxport", "--key", keys["ci"][0], "--cache-dir", empty)
    assert (res.exit_code, res.stderr) == (2, f"error[usage]: {empty} holds nothing of good.jaxport to vouch for: "
                                              f"warm it up first (jaxport warmup good.jaxport --cache-dir "
                                              f"{empty}).\n")
    res = run_cli("sign", "good.jaxport", "--key", keys["ci"][0], "--cache-dir", "C", "--json")
    doc = json.loads(res.stdout)
    record = _record(tmp / "C")
    (verdict,) = sorted((tmp / "C").glob("jaxport-verdict-*.json"))
    assert doc["entries"] == [{"name": record.name, "kind": "executable",
                               "sha256": hashlib.sha256(record.read_bytes()).hexdigest()},
                              {"name": verdict.name, "kind": "check-verdict",
                               "sha256": hashlib.sha256(verdict.read_bytes()).hexdigest()}]
    assert doc["key_id"] == key_id(keys["ci"][1])


def test_the_readme_signed_cache_block_runs_as_written(tmp_path, run_cli):
    """README, "Signed artifacts": the block after "A required signature covers the cache directory", run with the
    key pair the block before it makes (signing.pem, ci-signing.pub) and an exported, signed mlp.jaxport."""
    import re
    import shlex

    from tests.support import REPO

    readme = (REPO / "README.md").read_text()
    section = readme.split("A required signature covers the cache directory", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    lines = [shlex.split(line) for line in block.splitlines() if line.strip()]
    assert [argv[:2] for argv in lines] == [["jaxport", "warmup"], ["jaxport", "call"]]
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    os.chdir(tmp_path)
    private, public = key_pair(tmp_path, "signing")
    public.rename(tmp_path / "ci-signing.pub")
    assert run_cli("export", "examples/mlp/model.py:predict", "--shapes", "examples/mlp/spec.yaml", "-o",
                   "mlp.jaxport").exit_code == 0
    assert run_cli("sign", "mlp.jaxport", "--key", private).exit_code == 0
    for argv in lines:
        done = _fresh(*argv[1:], *(["--json"] if argv[1] == "call" else []))
        assert done.returncode == 0, done.stderr
    timings = json.loads(done.stdout)["timings"]
    assert timings["executable"] == "shipped"
    assert timings["executable_vouched_by"] == f"key {key_id(tmp_path / 'ci-signing.pub')[:16]} (ci-signing.pub)"
