"""Verify what runs (issue 46): under a required signature the bytes that run are the bytes the signature covers.

An attacker who can write the artifact's directory renames an unsigned artifact over the signed one (and the signed
one back), or renames a hard link to one there, at each event of a command: each opening of the artifact's path
and each step of the signature check (``signing.check.step``), deterministically (``swap.Attacker``); one who can
write the file rewrites it in place. Every command that takes ``--require-signature`` (call, serve, verify,
warmup, rebind, inspect ``--signature-key``), ``jaxport.load`` of a path and of an open ``Artifact``, and the batch
engines' shared loading path then computes the signed program's numbers (x * 2, where the unsigned ones answer
x * 3) or refuses with one ``error[signature]`` line, exit 14 (a rewrite in place caught when a member is read:
``error[integrity]``, exit 8). Before the fix, the signature was checked by path and the artifact opened again.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("model_signing", reason="the signature tests need the extra jaxport[sign] (pip install "
                                            "'jaxport[sign]'; make test installs it)")

import numpy as np  # noqa: E402

import jaxport  # noqa: E402
from jaxport.artifact.container import open_artifact  # noqa: E402

from .swap import PLANS, SIGNED, Attacker, build, lay_out  # noqa: E402

X = np.array([1, 2, 3], np.float32)
SIGNED_Y = X * 2
REFUSED = re.compile(r"error\[signature\]: \S[^\n]*\n")
#: What a rewrite in place may also end in: a member read after the check differs from its sha256 in the signed
#: manifest, or the file is cut short under a read.
DAMAGED = re.compile(r"error\[integrity\]: \S[^\n]*\n")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return build(tmp_path_factory.mktemp("swap-build"))


@pytest.fixture
def scene(files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return lay_out(files, tmp_path)


def _evil(plan: str) -> Path:
    """The unsigned artifact a plan puts in place: for a rewrite in place, the one of the signed file's size."""
    return Path("weights.jaxport" if plan == "rewritten" else "program.jaxport").absolute()


def _sweep(scene: Path, monkeypatch, run, plans=tuple(PLANS)) -> list[tuple[str, int, list[str], object]]:
    """Run ``run()`` once to count its events, then again for each plan at each event, the scene's artifact put back
    each time; returns (plan, event, the events, what ``run`` returned)."""
    with monkeypatch.context() as m:
        attacker = Attacker(scene, m)
        run()
    events = attacker.events
    assert events, "the command never opened the artifact"
    outcomes = []
    for plan in plans:
        for at in range(len(events)):
            shutil.copyfile("signed.jaxport", ".fresh")
            Path(".fresh").replace(scene)
            with monkeypatch.context() as m:
                Attacker(scene, m, plan, at, _evil(plan), Path("signed.jaxport").absolute())
                outcomes.append((plan, at, events, run()))
    return outcomes


def _command(run_cli, *argv, ran_signed) -> object:
    """A function that runs ``jaxport ARGV`` and says how it ended: ``refused``, ``damaged`` (a member read after
    the check differed from its digest), ``signed`` (exit 0, ``ran_signed(result)`` true), else what it printed."""

    def run():
        res = run_cli(*argv)
        if res.exit_code == 14 and REFUSED.fullmatch(res.stderr):
            return "refused"
        if res.exit_code == 8 and DAMAGED.fullmatch(res.stderr):
            return "damaged"
        if res.exit_code == 0 and ran_signed(res):
            return "signed"
        return f"exit {res.exit_code}: {res.stdout[-200:]} {res.stderr[-300:]}"

    return run


def _wrong(outcomes) -> list[str]:
    """The runs that neither ran the signed program nor refused it in one line (``damaged``: a rewrite in place
    only)."""
    return [f"{plan} at {events[at]} (event {at}): {got}" for plan, at, events, got in outcomes
            if got not in ("refused", "signed") and not (got == "damaged" and plan == "rewritten")]


def _out_is_signed(res) -> bool:
    ran = np.load("out.npy")
    Path("out.npy").unlink()
    return bool(np.array_equal(ran, SIGNED_Y))


# --- every command, every event ------------------------------------------------------------------------------------


def test_call_runs_the_signed_program_or_refuses(scene, run_cli, monkeypatch):
    outcomes = _sweep(scene, monkeypatch, _command(
        run_cli, "call", SIGNED, "--inputs", "x.npy", "-o", "out.npy", "--no-cache", "--require-signature", "ci.pub",
        ran_signed=_out_is_signed))
    assert _wrong(outcomes) == []
    assert outcomes[0][2] == ["open", "after opened", "after verified", "after hashed", "after read"]


def test_verify_compares_the_signed_program_or_refuses(scene, run_cli, monkeypatch):
    outcomes = _sweep(scene, monkeypatch, _command(
        run_cli, "verify", SIGNED, "--inputs", "x.npy", "--expect", "want.npy", "--require-signature", "ci.pub",
        ran_signed=lambda res: "OK: 1 case matches." in res.stdout))
    assert _wrong(outcomes) == []


def test_warmup_compiles_the_signed_program_or_refuses(scene, run_cli, monkeypatch):
    outcomes = _sweep(scene, monkeypatch, _command(
        run_cli, "warmup", SIGNED, "--dim", "n=3", "--cache-dir", "cache", "--json", "--require-signature", "ci.pub",
        ran_signed=lambda res: json.loads(res.stdout)["function"] == "double"))
    assert _wrong(outcomes) == []


def test_rebind_writes_the_signed_program_or_refuses(scene, run_cli, monkeypatch, files):
    with open_artifact("signed.jaxport") as signed:
        payload = signed.model.functions["double"].payload
        signed_payload = signed.model.members[payload].sha256

    def rebound(res) -> bool:
        with open_artifact("out.jaxport") as art:
            ok = list(art.model.functions) == ["double"] and art.model.members[payload].sha256 == signed_payload
        Path("out.jaxport").unlink()
        return ok

    outcomes = _sweep(scene, monkeypatch, _command(
        run_cli, "rebind", SIGNED, "--bind", "params=model.py:K5", "-o", "out.jaxport", "--no-manifest",
        "--require-signature", "ci.pub", ran_signed=rebound))
    assert _wrong(outcomes) == []
    assert not Path("out.jaxport").exists()


def test_inspect_shows_the_signed_artifact_or_refuses(scene, run_cli, monkeypatch):
    outcomes = _sweep(scene, monkeypatch, _command(
        run_cli, "inspect", SIGNED, "--signature-key", "ci.pub",
        ran_signed=lambda res: "double" in res.stdout and "triple" not in res.stdout))
    assert _wrong(outcomes) == []


def test_serving_serves_the_signed_program_or_refuses(scene, monkeypatch):
    """serve's models (``transport.models.open_models``) without kserve: a stand-in transport holds each model's
    buckets."""
    from jaxport.serve.transport import models

    transport = SimpleNamespace(JaxportModel=lambda name, version, batched, window_ms, max_rows: SimpleNamespace(
        batched=batched, batching=False, max_rows=None, batcher=SimpleNamespace(window=0)))
    monkeypatch.setattr(models, "_kserve_server", lambda: transport)
    load = jaxport.LoadOptions(require_signature="ci.pub", cache_dir="cache")

    def serve():
        try:
            with models.open_models([SIGNED], dims={"n": [3]}, load=load) as served:
                batched = served[0].batched
                return batched.loaded.function, np.asarray(batched({"x": X})["output"])
        except jaxport.SignatureError as e:
            return e

    outcomes = _sweep(scene, monkeypatch, serve, plans=("renamed", "renamed-and-back", "linked"))
    wrong = [f"{plan} at {events[at]}: {got}" for plan, at, events, got in outcomes
             if not isinstance(got, jaxport.SignatureError)
             and not (got[0] == "double" and np.array_equal(got[1], SIGNED_Y))]
    assert wrong == []


def _load_outcomes(run, scene, monkeypatch, plans=tuple(PLANS)) -> list[str]:
    def outcome():
        try:
            return np.asarray(run())
        except (jaxport.SignatureError, jaxport.IntegrityError) as e:
            return e

    wrong = []
    for plan, at, events, got in _sweep(scene, monkeypatch, outcome, plans):
        if isinstance(got, jaxport.IntegrityError) and plan != "rewritten":
            wrong.append(f"{plan} at {events[at]}: {got}")
        elif not isinstance(got, jaxport.JaxportError) and not np.array_equal(got, SIGNED_Y):
            wrong.append(f"{plan} at {events[at]}: ran and answered {got}")
    return wrong


def test_load_of_a_path_runs_the_signed_program_or_refuses(scene, monkeypatch):
    assert _load_outcomes(lambda: jaxport.load(SIGNED, require_signature="ci.pub")(X), scene, monkeypatch) == []


def test_the_batch_engines_loading_path_runs_the_signed_program_or_refuses(scene, monkeypatch):
    """``jaxport.ray``, ``.beam`` and ``.spark`` load through ``serve.engine.Engine`` (``serve.loading``)."""
    from jaxport.serve.engine import Engine

    assert _load_outcomes(lambda: Engine(SIGNED, require_signature="ci.pub").predict({"x": X})["output"], scene,
                          monkeypatch) == []


# --- an open Artifact, hard links, the bundle, every read ----------------------------------------------------------


def test_an_open_artifact_is_checked_on_its_own_bytes(scene):
    import hashlib

    signed_sha = hashlib.sha256(Path("signed.jaxport").read_bytes()).hexdigest()
    unsigned_sha = hashlib.sha256(Path("program.jaxport").read_bytes()).hexdigest()
    with open_artifact(SIGNED) as art:  # the signed file, opened; then the path names the unsigned one
        shutil.copyfile("program.jaxport", ".swap")
        Path(".swap").replace(SIGNED)
        assert np.array_equal(np.asarray(jaxport.load(art, require_signature="ci.pub")(X)), SIGNED_Y)
    with open_artifact(SIGNED) as art:  # the case: the unsigned file opened, then the signed one put back
        shutil.copyfile("signed.jaxport", ".swap")
        Path(".swap").replace(SIGNED)
        with pytest.raises(jaxport.SignatureError) as raised:
            jaxport.load(art, require_signature="ci.pub")
    assert str(raised.value) == (f"m.jaxport: not the file that was signed: its sha256 is {unsigned_sha[:16]}..., "
                                 f"the signed file's {signed_sha[:16]}... (changed after signing, or another "
                                 f"artifact put beside this signature). Do not run it; sign it again if it is "
                                 f"yours.")


def test_a_hard_link_rewritten_through_its_other_name_runs_signed_or_is_refused(scene, monkeypatch):
    """The artifact is a hard link of a file the attacker may write under another name: a rewrite through that
    name, at any event, is the file rewritten in place."""
    Path(SIGNED).unlink()
    shutil.copyfile("signed.jaxport", "theirs.jaxport")
    Path(SIGNED).hardlink_to("theirs.jaxport")

    def run():
        try:
            return np.asarray(jaxport.load(SIGNED, require_signature="ci.pub")(X))
        except (jaxport.SignatureError, jaxport.IntegrityError) as e:
            return e

    with monkeypatch.context() as m:
        attacker = Attacker(Path(SIGNED), m)
        assert np.array_equal(run(), SIGNED_Y)
    outcomes = []
    for at in range(len(attacker.events)):
        Path("theirs.jaxport").write_bytes(Path("signed.jaxport").read_bytes())  # in place: the same inode
        with monkeypatch.context() as m:
            Attacker(Path(SIGNED), m).acts[at] = lambda: Path("theirs.jaxport").write_bytes(
                Path("weights.jaxport").read_bytes())
            outcomes.append(run())
    assert [type(got).__name__ for got in outcomes] == ["SignatureError"] * len(attacker.events)
    Path("theirs.jaxport").write_bytes(Path("signed.jaxport").read_bytes())
    loaded = jaxport.load(SIGNED, require_signature="ci.pub", verify=False)  # verify=False: checked all the same
    Path("theirs.jaxport").write_bytes(Path("weights.jaxport").read_bytes())  # after the load
    assert np.array_equal(np.asarray(loaded(X)), SIGNED_Y)  # the weights run from the copy that was checked


def test_a_bundle_replaced_after_the_check_is_read_by_the_next_check(scene):
    """A later check of the same open artifact (``load`` after ``open_signed``) reads the bundle again: the first
    verification is remembered only for the same bundle bytes and the same trust."""
    with open_artifact(SIGNED) as art:
        assert np.array_equal(np.asarray(jaxport.load(art, require_signature="ci.pub")(X)), SIGNED_Y)
        with pytest.raises(jaxport.SignatureError, match=re.escape(" which is not trusted (--require-signature: ")):
            jaxport.load(art, require_signature="other.pub")
        Path(f"{SIGNED}.sig").write_bytes(b"{}")
        with pytest.raises(jaxport.SignatureError, match=re.escape(
                f"{SIGNED}.sig: not a model-signing signature bundle: mediaType is not a string. Sign the artifact")):
            jaxport.load(art, require_signature="ci.pub")


def test_a_rewrite_in_place_between_any_two_reads_of_load_is_refused_or_runs_signed(scene, monkeypatch):
    """Someone who may write the file rewrites it in place (the unsigned one of the same size: other weights, other
    digests in the manifest) before each read of its descriptor by ``jaxport.load``, one at a time."""
    import os

    real_pread, real_preadv = os.pread, os.preadv
    inode = os.stat(SIGNED).st_ino
    count: list[int] = []
    at: list[int] = [-1]

    def reading(fd):
        if os.fstat(fd).st_ino == inode:
            if len(count) == at[0]:
                with open(SIGNED, "r+b") as f:
                    f.write(Path("weights.jaxport").read_bytes())
            count.append(1)

    monkeypatch.setattr(os, "pread", lambda fd, n, offset: (reading(fd), real_pread(fd, n, offset))[1])
    monkeypatch.setattr(os, "preadv", lambda fd, buffers, offset: (reading(fd), real_preadv(fd, buffers, offset))[1])

    def run():
        try:
            return np.asarray(jaxport.load(SIGNED, require_signature="ci.pub")(X))
        except (jaxport.SignatureError, jaxport.IntegrityError) as e:
            return e

    assert np.array_equal(run(), SIGNED_Y)
    reads = len(count)
    assert reads > 5
    outcomes = []
    for k in range(reads):
        Path(SIGNED).write_bytes(Path("signed.jaxport").read_bytes())  # in place: the same inode
        count.clear()
        at[0] = k
        outcomes.append(run())
    wrong = [f"read {k}: {got}" for k, got in enumerate(outcomes)
             if not isinstance(got, jaxport.JaxportError) and not np.array_equal(got, SIGNED_Y)]
    assert wrong == []
    said = {str(got) for got in outcomes if isinstance(got, jaxport.JaxportError)}
    assert ("m.jaxport: the artifact changed while its signature was checked (its manifest was rewritten in place): "
            "what would be read is not what was hashed. Do not modify an artifact while jaxport reads it; do not run "
            "this one until it checks again.") in said, said


def test_check_judges_the_signed_artifact_or_refuses(scene, run_cli, monkeypatch, files):
    """``check --signature-key`` gates what the policy's other rules read: they must judge the signed file. The
    unsigned program is larger than the signed one, whose size the policy allows exactly."""
    Path("policy.yaml").write_text(f"jaxport_policy: 1\nsignature: {{keys: [ci.pub]}}\n"
                                   f"max_artifact_size: {len(files['signed'])} B\n")
    assert len(files["program"]) > len(files["signed"])

    def run():
        res = run_cli("check", SIGNED, "--policy", "policy.yaml")
        if res.exit_code == 0 or (res.exit_code == 14 and "[signature]" in res.stderr):
            return "signed" if res.exit_code == 0 else "refused"
        return f"exit {res.exit_code}: {res.stderr[-300:]}"

    assert _wrong(_sweep(scene, monkeypatch, run, plans=("renamed", "renamed-and-back"))) == []


@pytest.mark.slow
def test_upgrade_writes_and_records_the_file_it_opened(tmp_path, run_cli, monkeypatch):
    """A file renamed over the source while ``upgrade`` runs: the new artifact holds the programs of the file that
    was opened, and records that file's sha256 (``producer.upgraded_from``), compared with that file's programs."""
    import hashlib

    from tests.support import REPO

    golden = REPO / "tests" / "golden" / "1.0"
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(golden / "mlp.jaxport", "old.jaxport")  # written by an older JAX: upgrade rewrites it
    shutil.copyfile(golden / "mlp.jaxport", "signed.jaxport")  # what the attacker puts back
    shutil.copyfile(golden / "encoder.jaxport", "other.jaxport")
    digests = {hashlib.sha256(Path(f).read_bytes()).hexdigest(): f for f in ("old.jaxport", "other.jaxport")}
    names = {f: sorted(open_artifact(f).model.functions) for f in ("old.jaxport", "other.jaxport")}

    def run():
        res = run_cli("upgrade", "old.jaxport", "-o", "up.jaxport", "--json")
        if res.exit_code != 0:
            return f"exit {res.exit_code}: {res.stderr[-300:]}"
        with open_artifact("up.jaxport") as up:
            source = digests.get(up.model.producer.upgraded_from.sha256, "a file never given")
            consistent = sorted(up.model.functions) == names.get(source)
        Path("up.jaxport").unlink()
        return "signed" if consistent else f"records {source} but holds {sorted(up.model.functions)}"

    with monkeypatch.context() as m:
        attacker = Attacker(Path("old.jaxport"), m)
        assert run() == "signed"
    assert attacker.events == ["open"]  # opened once: members, digest and the comparison all read from it
    for plan in ("renamed", "renamed-and-back"):
        shutil.copyfile("signed.jaxport", "old.jaxport")
        with monkeypatch.context() as m:
            Attacker(Path("old.jaxport"), m, plan, 0, Path("other.jaxport").absolute(),
                     Path("signed.jaxport").absolute())
            assert run() == "signed", plan


def test_bytes_parsed_after_the_hash_are_tied_to_the_chunks_hashed(tmp_path):
    """``Hashed.holds``: data read again must lie in chunks whose digests are those hashed; a byte of such a chunk
    changed since (even outside the data) unties it, and beyond ``TIED_BYTES`` nothing is tied."""
    import hashlib
    import os

    from jaxport.artifact.signing.check import HASH_CHUNK, TIED_BYTES, hash_descriptor

    path = tmp_path / "f"
    data = bytearray(np.random.default_rng(0).integers(0, 256, TIED_BYTES + 2 * HASH_CHUNK, np.uint8).tobytes())
    path.write_bytes(data)
    fd = os.open(path, os.O_RDWR)
    try:
        hashed = hash_descriptor(fd, len(data), path)
        assert hashed.sha256 == hashlib.sha256(data).hexdigest()
        span = slice(HASH_CHUNK - 10, HASH_CHUNK + 10)  # across the first two chunks
        assert hashed.holds(fd, span.start, bytes(data[span]), path)
        assert not hashed.holds(fd, span.start, bytes(data[span.start:span.stop - 1]) + b"?", path)
        os.pwrite(fd, b"\0" if data[2 * HASH_CHUNK - 1] else b"\1", 2 * HASH_CHUNK - 1)  # chunk 1, outside the span
        assert not hashed.holds(fd, span.start, bytes(data[span]), path)
        assert not hashed.holds(fd, TIED_BYTES + HASH_CHUNK, bytes(data[TIED_BYTES + HASH_CHUNK:][:8]), path)
    finally:
        os.close(fd)
