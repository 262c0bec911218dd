"""The class ``cache-provenance`` (issue 54): a cache directory shipped beside a signed artifact, an attacker's.

The scene: ``m.jaxport`` (x * 2, bound weights) signed by ``ci``; ``program.jaxport`` (x * 3, the same signature and
weights) unsigned; a cache ``C`` that ``warmup --target cpu --sign`` filled for ``m.jaxport`` (its shipped executable,
the program check's verdict, a vouch by ``ci``). Each case changes what ``C`` holds, as someone who can write the cache
directory (or who ships it) would: executables with program.jaxport's code under m.jaxport's key (the header
recomputed, or its key fields edited), vouches made by another key, for another artifact, altered, malformed, or
special files in their place; planted check verdicts; JAX's own cache entries swapped; records claiming more bytes
than memory. The command is ``call m.jaxport --inputs x.npy --expect want.npy --cache-dir C --require-signature
ci.pub`` (also with ``--isolate`` and through ``$JAXPORT_CACHE_DIR``): it must answer x * 2 (exit 0: the entry was
ignored, or the vouched one ran) or refuse in one line; program.jaxport's code running is exit 12 against
``--expect``, a failure by its exit code alone.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..sign import swap
from .corpus import Base, Case

SIGNED = swap.SIGNED
CALL = ("call", SIGNED, "--inputs", "x.npy", "--expect", "want.npy", "--cache-dir", "C", "--require-signature",
        "ci.pub")
WHY = "the signed program's own numbers: the hostile cache entry was ignored (one note), or a vouched one ran"


def _jaxport(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(Path(sys.executable).parent / "jaxport"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"jaxport {' '.join(args)}: {done.stderr}")
    return done.stdout


def _record(blob_of: bytes, header_of: bytes) -> bytes:
    """A record with ``header_of``'s header and ``blob_of``'s executable, the size and sha256 recomputed."""
    from jaxport.run import executables

    def split(data: bytes) -> tuple[dict, bytes]:
        n = int.from_bytes(data[len(executables.MAGIC):len(executables.MAGIC) + 8], "little")
        start = len(executables.MAGIC) + 8
        return json.loads(data[start:start + n]), data[start + n:]

    header, _ = split(header_of)
    _, blob = split(blob_of)
    header = dict(header, size=len(blob), sha256=hashlib.sha256(blob).hexdigest())
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return executables.MAGIC + len(raw).to_bytes(8, "little") + raw + blob


def _claiming(record: bytes, size: int) -> bytes:
    """``record``'s magic and header, claiming an executable of ``size`` bytes (the file is then extended to that
    size with a hole: ``sparse``)."""
    from jaxport.run import executables

    start = len(executables.MAGIC) + 8
    n = int.from_bytes(record[len(executables.MAGIC):start], "little")
    header = dict(json.loads(record[start:start + n]), size=size)
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return executables.MAGIC + len(raw).to_bytes(8, "little") + raw


def _edited_vouch(vouch: bytes, edit) -> bytes:
    doc = json.loads(vouch)
    statement = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
    edit(statement)
    doc["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    return json.dumps(doc).encode()


def build(d: Path) -> dict[str, bytes | str]:
    """The scene's files (see the module docstring), by name; and the names of the cache's entries."""
    from ..sign.keys import key_pair

    files = swap.build(d / "swap")
    for name, data in (("m.jaxport", files["signed"]), ("m.jaxport.sig", files["signature"]),
                       ("program.jaxport", files["program"]), ("ci.pub", files["ci.pub"]),
                       ("model.py", files["model.py"])):
        (d / name).write_bytes(data)
    ci = d / "swap" / "ci.pem"
    other, _ = key_pair(d, "attacker")
    import numpy as np

    np.save(d / "x.npy", np.array([1, 2, 3], np.float32))
    np.save(d / "want.npy", np.array([2, 4, 6], np.float32))
    _jaxport(d, "warmup", SIGNED, "--target", "cpu", "--dim", "n=3", "--cache-dir", "C")
    _jaxport(d, "call", SIGNED, "--inputs", "x.npy", "--cache-dir", "C", "--require-signature", "ci.pub")
    _jaxport(d, "sign", SIGNED, "--key", str(ci), "--cache-dir", "C")  # the executable and the check's verdict
    _jaxport(d, "warmup", "program.jaxport", "--target", "cpu", "--dim", "n=3", "--cache-dir", "E")
    _jaxport(d, "sign", "program.jaxport", "--key", str(ci), "--cache-dir", "E")
    import shutil

    shutil.copytree(d / "C", d / "A")
    _jaxport(d, "sign", SIGNED, "--key", str(other), "--cache-dir", "A")  # the attacker's vouch, naming m's sha256
    for name, args in (("J", SIGNED), ("JE", "program.jaxport")):  # JAX's own cache entries of each program
        _jaxport(d, "call", args, "--inputs", "x.npy", "--cache-dir", name)
    out: dict[str, bytes | str] = {}
    for folder in ("C", "E", "A", "J", "JE"):
        for p in sorted((d / folder).iterdir()):
            if p.is_file():
                out[f"{folder}/{p.name}"] = p.read_bytes()
    for name in ("m.jaxport", "m.jaxport.sig", "program.jaxport", "ci.pub", "model.py", "x.npy", "want.npy"):
        out[name] = (d / name).read_bytes()
    return out


def _named(files: dict, folder: str, start: str) -> tuple[str, bytes]:
    (found,) = [(k, v) for k, v in files.items() if k.startswith(f"{folder}/{start}")]
    return found


def _cases(files: dict) -> dict[str, tuple[tuple, ...]]:
    """Each case's setup steps over the scene (the good cache ``C`` is laid out first)."""
    good_name, good = _named(files, "C", "jaxport-executable-")
    _, evil = _named(files, "E", "jaxport-executable-")
    vouch_name, vouch = _named(files, "C", "jaxport-vouch-")
    verdict_name, _ = _named(files, "C", "jaxport-verdict-")
    _, evil_vouch = _named(files, "E", "jaxport-vouch-")
    attacker_vouch = next(v for k, v in files.items() if k.startswith("A/jaxport-vouch-") and k[2:] != vouch_name[2:])
    forged = _record(evil, good)
    record, vouch_at = good_name, vouch_name
    from jaxport.run import executables

    def key_fields_claimed() -> bytes:  # the evil record, its key fields edited to claim the signed program
        n = int.from_bytes(evil[len(executables.MAGIC):len(executables.MAGIC) + 8], "little")
        start = len(executables.MAGIC) + 8
        header = json.loads(evil[start:start + n])
        good_n = int.from_bytes(good[len(executables.MAGIC):len(executables.MAGIC) + 8], "little")
        good_header = json.loads(good[start:start + good_n])
        header.update(program=good_header["program"], inputs=good_header["inputs"], facts=good_header["facts"])
        raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        return executables.MAGIC + len(raw).to_bytes(8, "little") + raw + evil[start + n:]

    forged_sha = hashlib.sha256(forged).hexdigest()
    cases: dict[str, tuple[tuple, ...]] = {
        "forged-executable": (("write", record, forged),),
        "key-fields-claimed": (("write", record, key_fields_claimed()),),
        "forged-untrusted-vouch": (("write", record, forged), ("write", vouch_at, attacker_vouch)),
        "forged-vouch-for-another-artifact": (("write", record, forged), ("write", vouch_at, evil_vouch)),
        "forged-vouch-digest-edited": (("write", record, forged), ("write", vouch_at, _edited_vouch(
            vouch, lambda s: s["subject"][0]["digest"].update(sha256=forged_sha)))),
        "forged-vouch-artifact-edited": (("write", record, forged), ("write", vouch_at, _edited_vouch(
            vouch, lambda s: s["predicate"]["artifact"].update(sha256="0" * 64)))),
        "forged-vouch-truncated": (("write", record, forged), ("write", vouch_at, vouch[: len(vouch) // 2])),
        "forged-vouch-garbage": (("write", record, forged), ("write", vouch_at, bytes(range(256)) * 8)),
        "forged-vouch-oversized": (("write", record, forged), ("write", vouch_at, b"{" + b" " * (2 << 20) + b"}")),
        "forged-vouch-deep-json": (("write", record, forged), ("write", vouch_at, b"[" * 5000 + b"]" * 5000)),
        "forged-vouch-is-artifact-signature": (("write", record, forged), ("write", vouch_at,
                                                                          files["m.jaxport.sig"])),
        "forged-vouch-fifo": (("write", record, forged), ("rm", vouch_at), ("fifo", vouch_at)),
        "forged-vouch-directory": (("write", record, forged), ("rm", vouch_at), ("dir", vouch_at)),
        "forged-vouch-link-outside": (("write", record, forged), ("rm", vouch_at),
                                      ("symlink", vouch_at, "{outside}/sentinel.txt")),
        "forged-second-vouch-by-attacker": (("write", record, forged),
                                            ("write", vouch_name.rsplit("-", 1)[0] + "-0000000000000000.sig",
                                             attacker_vouch)),
        "record-is-link-to-evil": (("write", "evil.bin", evil), ("rm", record), ("symlink", record, "../evil.bin")),
        "record-header-negative-size": (("write", record, good.replace(b'"size":', b'"size":-', 1)),),
        "record-header-deep": (("write", record, executables.MAGIC + (10002).to_bytes(8, "little") +
                                b"[" * 5001 + b"]" * 5001),),
        "record-claims-4-GiB": (("sparse", record, _claiming(good, 4 << 30)),),
        "check-verdict-kept-beside-a-forgery": (("write", record, forged), ("write", verdict_name,
                                                                            files[verdict_name])),
    }
    # JAX's own entry for m's program, holding program.jaxport's executable (JAX checks no origin: run without a
    # required signature, this answers x * 3)
    jax_good = [k for k in files if k.startswith("J/jit_") and k.endswith("-cache")]
    jax_evil = [v for k, v in files.items() if k.startswith("JE/jit_") and k.endswith("-cache")]
    if jax_good and jax_evil:
        cases["jax-cache-entry-swapped"] = tuple(("write", "C/" + Path(k).name, jax_evil[0]) for k in jax_good)
    return cases


def cases(b: Base) -> Iterator[Case]:
    import importlib.util

    if importlib.util.find_spec("model_signing") is None:
        return  # the class needs jaxport[sign]
    with tempfile.TemporaryDirectory() as tmp:
        files = build(Path(tmp))
    scene = tuple(("write", name, data) for name, data in files.items()
                  if not name.startswith(("E/", "A/", "J/", "JE/")))
    commands = (("call", CALL), ("call-isolate", (*CALL, "--isolate")))
    for name, steps in _cases(files).items():
        yield Case("cache-provenance", name, "cache-provenance", None, frozenset({14, 7}), file=SIGNED,
                   commands=commands, setup=(*scene, *steps), timeout=300.0, accept=frozenset(c for c, _ in commands),
                   why=WHY, outputs=frozenset({"C/"}))
