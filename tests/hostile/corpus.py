"""The hostile-input corpus, generated from one small real artifact (seeded, so the same cases every run).

``build(workdir)`` exports the base artifact (a function with a symbolic batch and bound weights) and returns the
cases. Each case is one hostile file and what a clean outcome is:

- ``kind`` says how the runner feeds it to the command line: an artifact to ``inspect``, ``inspect --mlir`` and
  ``call``; a ``.npy``/``.npz`` input to ``call``; a spec or a bound-weights file to ``export``;
- ``codes`` are the documented exit codes of a clean rejection;
- ``accept`` names the commands for which success is also a clean outcome, and ``why`` says why (a byte that
  carries no meaning, a program ``inspect`` does not parse, a well-formed edit of an advisory field);
- ``canary``: the file would create ``CANARY`` in the working directory if anything in it were executed or
  unpickled.

Classes and sizes are listed by ``python -m tests.hostile.run --list``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import json
import os
import pickle
import random
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import zipmodel

SEED = 20261129
CANARY = "CANARY"

MODEL = '''\
import jax.numpy as jnp


def f(params, x):
    return jnp.tanh(x @ params["w"] + params["b"])


def g(x):
    return x * 2.0
'''
SPEC_BOUND = 'jaxport: 1\ndims:\n  batch: {min: 1, max: 64}\nargs:\n  - bind: params.npz\n  - "f32[batch, 4]"\n'
SPEC_PLAIN = 'jaxport: 1\ndims:\n  batch: {max: 64}\nargs:\n  - "f32[batch, 4]"\n'
SPEC_BIND_HOSTILE = 'jaxport: 1\ndims:\n  batch: {{max: 64}}\nargs:\n  - bind: {file}\n  - "f32[batch, 4]"\n'

ARTIFACT = frozenset({7, 8})
#: A damaged program can also fail JAX's later stages: its custom calls (policy, 6), lowering for the inputs
#: (input, 9) or compilation (platform, 10).
PROGRAM = frozenset({6, 7, 8, 9, 10})
INPUT = frozenset({9})
SPEC = frozenset({3})

#: Values every length, offset and size field is set to (``len`` is the field's true value).
SPECIAL = ("0", "1", "len-1", "len+1", "2**31-1", "2**32", "2**63-1")


@dataclass(frozen=True)
class Case:
    cls: str
    name: str
    kind: str  # artifact, npy, npz, spec, bind; or any other name when ``commands`` says how to run the case
    data: bytes | None  # the hostile file's bytes; None when ``setup`` makes the case's files
    codes: frozenset[int]
    accept: frozenset[str] = frozenset()
    why: str = ""
    canary: bool = False
    file: str = ""  # the file name the case is written under (default by kind)
    known: str = ""  # a failure known and reported, to be fixed outside the reader (what and where)
    #: The command lines of this case, (label, argv), replacing the kind's (run.COMMANDS). ``{file}`` is the case's
    #: file, ``{outside}`` the absolute path of a directory beside the work directory, which no command may touch.
    commands: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Steps that make files in the work directory before each command (run.SETUP): special files, symlinks, copies
    #: of the base artifact, files outside the work directory. Paths are relative to the work directory.
    setup: tuple[tuple[Any, ...], ...] = ()
    #: More than 0: the case may hang, grow without bound or kill the process, so it runs only as a real process,
    #: stopped after this many seconds (a hang or a memory blow-up is a failure, never a stuck corpus).
    timeout: float = 0.0
    #: Files of the work directory that a successful command may create or replace (besides run.OUTPUTS).
    outputs: frozenset[str] = frozenset()
    #: A fault injected into the subprocess before the command runs (run.HOOKS), e.g. the artifact cut while read.
    hook: str = ""
    #: Text a rejection's message must contain (the option or limit it names), besides the one-line form.
    mention: str = ""

    @property
    def id(self) -> str:
        return f"{self.cls}/{self.name}"

    @property
    def filename(self) -> str:
        return self.file or {"artifact": "case.jaxport", "npy": "x.npy", "npz": "inputs.npz", "spec": "spec.yaml",
                             "bind": "hostile.npz"}.get(self.kind, "case.jaxport")


@dataclass
class Base:
    """The base artifact and what it was made from."""

    dir: Path
    data: bytes
    manifest: dict[str, Any]
    members: dict[str, bytes]  # without manifest.json
    exported: Any  # the payload, deserialized (for crafting payloads)
    other_module: bytes  # the StableHLO of another function (g), for a swapped-program case
    fields: list[zipmodel.Field] = field(default_factory=list)


# --- building artifacts ------------------------------------------------------------------------------------------


def manifest_text(m: Any) -> bytes:
    from jaxport.artifact.container import manifest_bytes

    return manifest_bytes(m)


def zip_bytes(entries: list[tuple[str, bytes]]) -> bytes:
    """An artifact laid out by jaxport's own writer, with exactly these members and bytes."""
    import warnings

    from jaxport.artifact.container import _write_members

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate names some cases want
        _write_members(buf, entries)
    return buf.getvalue()


def artifact(manifest: Any, members: dict[str, bytes], *, relist: bool = True, raw: bytes | None = None) -> bytes:
    """An artifact with ``manifest`` (its ``members`` listing recomputed when ``relist``) and ``members``."""
    if relist and isinstance(manifest, dict):
        manifest = dict(manifest)
        manifest["members"] = {n: {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                               for n, b in members.items()}
    text = raw if raw is not None else manifest_text(manifest)
    return zip_bytes([("manifest.json", text), *members.items()])


def build_base(workdir: Path) -> Base:
    """Write the model, spec and weights into ``workdir``, export the base artifact there."""
    import numpy as np

    import jaxport

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "model.py").write_text(MODEL)
    (workdir / "spec-bound.yaml").write_text(SPEC_BOUND)
    (workdir / "spec-plain.yaml").write_text(SPEC_PLAIN)
    rng = np.random.default_rng(0)
    np.savez(workdir / "params.npz", w=rng.standard_normal((4, 3)).astype(np.float32),
             b=rng.standard_normal(3).astype(np.float32))
    np.save(workdir / "x.npy", rng.standard_normal((2, 4)).astype(np.float32))
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        jaxport.export("model.py:f", "spec-bound.yaml", output="base.jaxport", write_manifest=False)
        jaxport.export("model.py:g", "spec-plain.yaml", output="plain.jaxport", write_manifest=False)
    finally:
        os.chdir(cwd)
    from jax import export

    data = (workdir / "base.jaxport").read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        manifest = json.loads(z.read("manifest.json"))
        members = {n: z.read(n) for n in z.namelist() if n != "manifest.json"}
    with zipfile.ZipFile(workdir / "plain.jaxport") as z:
        other = export.deserialize(bytearray(z.read("functions/g.jaxexport"))).mlir_module_serialized
    exported = export.deserialize(bytearray(members["functions/f.jaxexport"]))
    return Base(workdir, data, manifest, members, exported, other, zipmodel.layout(data))


# --- container classes -------------------------------------------------------------------------------------------


def prefixes(b: Base) -> Iterator[Case]:
    for n in range(65):
        yield Case("prefix", f"{n}", "artifact", b.data[:n], ARTIFACT)


def _boundaries(b: Base) -> list[int]:
    points = set()
    for f in b.fields:
        if f.name.endswith(".signature") or f.kind == "data":
            points.update((f.start, f.end))
    points.add(len(b.data) - 1)
    return sorted(p for p in points if 0 < p < len(b.data))


def truncations(b: Base) -> Iterator[Case]:
    for p in _boundaries(b):
        for q in (p - 1, p, p + 1):
            if 0 < q < len(b.data):
                yield Case("truncate-at-boundary", f"{q}", "artifact", b.data[:q], ARTIFACT)
    rng = random.Random(SEED)
    for q in sorted(set(rng.randrange(65, len(b.data)) for _ in range(100))):
        yield Case("truncate-random", f"{q}", "artifact", b.data[:q], ARTIFACT)


def _special(value: int, true: int) -> int:
    return {"0": 0, "1": 1, "len-1": true - 1, "len+1": true + 1, "2**31-1": 2**31 - 1, "2**32": 2**32,
            "2**63-1": 2**63 - 1}[str(value)]


def _zip64_extra(values: list[int]) -> bytes:
    return struct.pack("<HH", 1, 8 * len(values)) + b"".join(struct.pack("<Q", v) for v in values)


def _central_with_zip64(b: Base, entry: str, fieldname: str, value: int) -> bytes:
    """The artifact with central entry ``entry``'s ``fieldname`` escaped (0xFFFFFFFF) to a zip64 extra ``value``."""
    data = bytearray(b.data)
    sig = next(f for f in b.fields if f.name == f"central[{entry}].signature")
    pos = sig.start
    name_len, extra_len = struct.unpack_from("<HH", data, pos + 28)
    offsets = {"size": 24, "compressed_size": 20, "local_header_offset": 42}
    struct.pack_into("<I", data, pos + offsets[fieldname], 0xFFFFFFFF)
    extra = _zip64_extra([value])
    insert_at = pos + 46 + name_len + extra_len
    struct.pack_into("<H", data, pos + 30, extra_len + len(extra))
    data[insert_at:insert_at] = extra
    eocd = len(data) - 22
    dir_size = struct.unpack_from("<I", data, eocd + 12)[0]
    struct.pack_into("<I", data, eocd + 12, dir_size + len(extra))
    return bytes(data)


def _zip64_end(b: Base, fieldname: str, value: int) -> bytes:
    """The artifact with a zip64 end record whose ``fieldname`` (entries, directory_size, directory_offset) is
    ``value``, and the classic end record escaped to it."""
    data = bytearray(b.data)
    eocd = len(data) - 22
    _, _, _, _, entries, dir_size, dir_offset, _ = struct.unpack_from("<4sHHHHIIH", data, eocd)
    vals = {"entries": entries, "directory_size": dir_size, "directory_offset": dir_offset}
    vals[fieldname] = value
    rec64 = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, vals["entries"], vals["entries"],
                        vals["directory_size"], vals["directory_offset"])
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, eocd, 1)
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return bytes(data[:eocd]) + rec64 + locator + end


def field_values(b: Base) -> Iterator[Case]:
    """Every length, offset, size and count field of the zip structure set to each value of SPECIAL."""
    for f in b.fields:
        if f.kind not in ("size", "length", "offset", "count"):
            continue
        true = f.value(b.data)
        limit = (1 << (8 * f.size)) - 1
        seen = {true}
        for label in SPECIAL:
            v = _special(label, true)
            if v in seen or v < 0:
                continue
            seen.add(v)
            if v <= limit:
                yield Case("zip-field-value", f"{f.name}={label}", "artifact", zipmodel.patch(b.data, f, v), ARTIFACT)
            elif f.size == 4 and f.name.startswith("central["):
                entry, fieldname = f.name[len("central["):].rsplit("].", 1)
                if fieldname in ("size", "compressed_size", "local_header_offset"):
                    yield Case("zip-field-value", f"{f.name}={label} (zip64)", "artifact",
                               _central_with_zip64(b, entry, fieldname, v), ARTIFACT)
            elif f.name in ("end.directory_size", "end.directory_offset", "end.entries"):
                yield Case("zip-field-value", f"{f.name}={label} (zip64)", "artifact",
                           _zip64_end(b, f.name[len("end."):], v), ARTIFACT)
            else:  # a 2-byte field cannot hold the value: its largest value instead
                big = limit
                if big not in seen:
                    seen.add(big)
                    yield Case("zip-field-value", f"{f.name}={big}", "artifact", zipmodel.patch(b.data, f, big),
                               ARTIFACT)


#: Byte kinds whose change leaves an artifact that means the same: see zipmodel.NEUTRAL_KINDS. "version" (made
#: by / needed to extract) is informational for a reader that supports only stored members.
NEUTRAL = zipmodel.NEUTRAL_KINDS | {"version"}
NEUTRAL_WHY = ("the mutation lies in a field that carries no meaning for jaxport (timestamp, file attributes, zip "
               "version, content of the alignment padding)")


def _flip_case(b: Base, cls: str, name: str, data: bytes, offsets: list[int]) -> Case:
    hit = [zipmodel.field_at(b.fields, o) or zipmodel.Field(o, 1, "?", "?") for o in offsets]
    neutral = {f.kind for f in hit} <= NEUTRAL
    name = f"{name} {hit[0].name}" if hit else name
    return Case(cls, name, "artifact", data, ARTIFACT,
                accept=frozenset({"inspect", "call", "mlir"}) if neutral else frozenset(),
                why=NEUTRAL_WHY if neutral else "")


def bit_flips(b: Base, n: int = 2000) -> Iterator[Case]:
    rng = random.Random(SEED + 1)
    flips = set()
    while len(flips) < n:
        flips.add((rng.randrange(len(b.data)), rng.randrange(8)))
    for pos, bit in sorted(flips):
        data = bytearray(b.data)
        data[pos] ^= 1 << bit
        yield _flip_case(b, "bit-flip", f"{pos}.{bit}", bytes(data), [pos])


def overwrites(b: Base, n: int = 1000) -> Iterator[Case]:
    rng = random.Random(SEED + 2)
    seen = set()
    for _ in range(n):
        pos = rng.randrange(len(b.data))
        length = min(rng.choice([1, 1, 2, 4, 8, 16]), len(b.data) - pos)
        fill = rng.choice(["random", "zero", "ff"])
        new = bytes(rng.randrange(256) for _ in range(length)) if fill == "random" else \
            (b"\0" if fill == "zero" else b"\xff") * length
        data = b.data[:pos] + new + b.data[pos + length:]
        if data == b.data or (pos, length, fill) in seen:
            continue
        seen.add((pos, length, fill))
        changed = [pos + i for i in range(length) if data[pos + i] != b.data[pos + i]]
        yield _flip_case(b, "byte-overwrite", f"{pos}+{length}:{fill}", data, changed)


def trailing_and_polyglots(b: Base) -> Iterator[Case]:
    other = zip_bytes([("hello.txt", b"hello")])
    tails = {"1-zero-byte": b"\0", "newline": b"\n", "22-bytes": b"\0" * 22, "eocd-copy": b.data[-22:],
             "another-zip": other, "1MiB": b"\0" * (1 << 20), "text": b"#!/bin/sh\necho pwned\n"}
    for name, tail in tails.items():
        yield Case("trailing-bytes", name, "artifact", b.data + tail, ARTIFACT)
    comment = bytearray(b.data)
    comment[-2:] = struct.pack("<H", 5)
    yield Case("trailing-bytes", "zip-comment", "artifact", bytes(comment) + b"hello", ARTIFACT)
    heads = {"gif": b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", "pdf": b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n",
             "shell": b"#!/bin/sh\nexit 0\n", "elf": b"\x7fELF\x02\x01\x01" + b"\0" * 57, "zip": other,
             "one-byte": b"\0", "html": b"<html><script>alert(1)</script></html>"}
    for name, head in heads.items():
        yield Case("polyglot-prefix", name, "artifact", head + b.data, ARTIFACT)
    # a zip whose first member is the artifact, and the artifact with another archive's directory appended
    yield Case("polyglot-prefix", "artifact-inside-zip", "artifact", zip_bytes([("inner.jaxport", b.data)]),
               ARTIFACT)


# --- manifest classes -----------------------------------------------------------------------------------------------


def _with(b: Base, edit: Callable[[dict[str, Any]], None]) -> bytes:
    """The base artifact with its manifest edited (the ``members`` listing recomputed first, then edited too)."""
    m = copy.deepcopy(b.manifest)
    m["members"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in b.members.items()}
    edit(m)
    return artifact(m, b.members, relist=False)


def _raw_manifest(b: Base, text: bytes) -> bytes:
    return artifact(None, b.members, relist=False, raw=text)


def _marker(b: Base, edit: Callable[[dict[str, Any]], None], raw: str) -> bytes:
    """The manifest with the value ``edit`` sets to the string "@@RAW@@" replaced by the raw JSON text ``raw``."""
    m = copy.deepcopy(b.manifest)
    m["members"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in b.members.items()}
    edit(m)
    text = manifest_text(m).replace(b'"@@RAW@@"', raw.encode("latin-1"))
    return _raw_manifest(b, text)


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(m: dict[str, Any]) -> None:
        node = m
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return edit


def _delete(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def edit(m: dict[str, Any]) -> None:
        node = m
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
    return edit


def _get(m: dict[str, Any], path: list[Any]) -> Any:
    node = m
    for k in path:
        node = node[k]
    return node


F = ["functions", "f"]
W = ["weights", "tensors"]
PAYLOAD = "functions/f.jaxexport"
ADVISORY = ("a well-formed edit of a field the program cannot confirm (a bound, a count, a version): jaxport detects "
            "damage (CRC-32, sha256), not a deliberate, consistent edit of the manifest, which needs a signature")
NOT_PARSED = "inspect shows the manifest and checks digests; it does not parse the program (only --mlir does)"
#: Commands that show a manifest without running the program: a manifest that disagrees with its program is
#: shown as it is; call compares the two and refuses it.
LOOKS = frozenset({"inspect", "mlir"})
LOOKS_WHY = ("inspect shows the manifest as written (--mlir adds the program's text); only call compares the "
             "manifest with the program, and refuses it")


def manifest_field_values(b: Base) -> Iterator[Case]:
    """Every integer size, offset, index and count of the manifest set to each value of SPECIAL (and -1, 2**64)."""
    both = frozenset({"inspect", "call", "mlir"})
    looks = LOOKS
    fields: list[tuple[list[Any], frozenset[str], frozenset[int]]] = [
        (["members", PAYLOAD, "size"], frozenset(), ARTIFACT),
        (["members", "weights.bin", "size"], frozenset(), ARTIFACT),
        (W + ["params/w", "offset"], frozenset(), ARTIFACT),
        (W + ["params/w", "nbytes"], frozenset(), ARTIFACT),
        (W + ["params/w", "shape", 0], frozenset(), ARTIFACT),
        (W + ["params/b", "offset"], frozenset(), ARTIFACT),
        (W + ["params/b", "shape", 0], frozenset(), ARTIFACT),
        (F + ["inputs", 0, "shape", 1], looks, ARTIFACT),
        (F + ["outputs", 0, "shape", 1], looks, ARTIFACT),
        (F + ["dims", "batch", "min"], both, ARTIFACT | INPUT),
        (F + ["dims", "batch", "max"], both, ARTIFACT | INPUT),
        (F + ["dims", "batch", "derived_from", "axis"], both, ARTIFACT),
        (F + ["calling_convention_version"], both, ARTIFACT),
        (F + ["nr_devices"], both, ARTIFACT),
        (F + ["kept_inputs", 0], both, ARTIFACT),
        (F + ["signature", "args", 1, "input"], frozenset(), ARTIFACT),
        (F + ["vjp_order"], both, ARTIFACT),
        (F + ["embedded_constants", "count"], both, ARTIFACT),
        (F + ["embedded_constants", "bytes"], both, ARTIFACT),
        (["producer", "calling_convention_range", 1], both, ARTIFACT),
    ]
    for path, accept, codes in fields:
        true = _get(b.manifest, path) if path[0] != "members" else len(b.members[path[1]])
        seen = {true}
        for label in (*SPECIAL, "-1", "2**64"):
            v = {"-1": -1, "2**64": 2**64}.get(label)
            v = _special(label, true) if v is None else v
            if v in seen:
                continue
            seen.add(v)
            name = ".".join(str(p) for p in path) + f"={label}"
            if path[0] == "members":
                m = copy.deepcopy(b.manifest)
                m["members"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                                for n, d in b.members.items()}
                m["members"][path[1]]["size"] = v
                data = artifact(m, b.members, relist=False)
            else:
                data = _with(b, _set(path, v))
            yield Case("manifest-field-value", name, "artifact", data, codes, accept=accept,
                       why=ADVISORY if accept == both else LOOKS_WHY if accept else "")


def manifest_json(b: Base) -> Iterator[Case]:
    good = manifest_text({**b.manifest, "members": {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                                                    for n, d in b.members.items()}})
    raw = {
        "bad-utf8-lone-continuation": good.replace(b'"name": "f"', b'"name": "\x80"'),
        "bad-utf8-overlong": good.replace(b'"name": "f"', b'"name": "\xc0\xaf"'),
        "bad-utf8-surrogate": good.replace(b'"name": "f"', b'"name": "\xed\xa0\x80"'),
        "bad-utf8-truncated": good.replace(b'"name": "f"', b'"name": "\xe2\x82"'),
        "utf8-bom": b"\xef\xbb\xbf" + good,
        "utf16": good.decode("ascii").encode("utf-16"),
        "empty": b"",
        "whitespace": b" \n\t ",
        "null": b"null",
        "array": b"[]",
        "string": b'"jaxport"',
        "trailing-garbage": good + b"}",
        "second-document": good + good,
        "comment": b"// jaxport\n" + good,
        "single-quotes": good.replace(b'"format"', b"'format'"),
        "nul-byte": good.replace(b'"name": "f"', b'"name": "f\x00"'),
        "raw-control-char": good.replace(b'"name": "f"', b'"name": "f\x01"'),
        "duplicate-top-key": good.replace(b'{\n  "format": "jaxport",', b'{\n  "format": "jaxport",\n  "format": '
                                                                        b'"jaxport",', 1),
        "duplicate-nested-key": good.replace(b'"x64": false,', b'"x64": false,\n      "x64": true,', 1),
        "duplicate-member-key": good.replace(b'"members": {', b'"members": {\n    "weights.bin": {"size": 1, '
                                                             b'"sha256": "' + b"0" * 64 + b'"},', 1),
        "nesting-65": good.replace(b'"labels": {}', b'"labels": {}, "deep": ' + b"[" * 65 + b"]" * 65, 1),
        "nesting-100000": good.replace(b'"labels": {}', b'"labels": {}, "deep": ' + b"[" * 100000 + b"]" * 100000,
                                       1),
        "nesting-unclosed": good.replace(b'"labels": {}', b'"labels": {}, "deep": ' + b"{\"a\":" * 70000, 1),
        "brackets-in-strings": good.replace(b'"description": null', b'"description": "' + b"[{" * 5000 + b'"', 1),
    }
    for name, text in raw.items():
        accept = frozenset({"inspect", "call", "mlir"}) if name == "brackets-in-strings" else frozenset()
        yield Case("manifest-json", name, "artifact", _raw_manifest(b, text), ARTIFACT, accept=accept,
                   why="brackets inside a string are text, not nesting" if accept else "")
    numbers = {
        "nan": "NaN", "infinity": "Infinity", "minus-infinity": "-Infinity", "overflowing-float": "1e999",
        "huge-integer-5000-digits": "9" * 5000, "huge-integer-2**64": str(2**64), "huge-integer-2**1000": str(2**1000),
        "float-for-integer": "4.0", "exponent-integer": "4e0", "negative-zero": "-0", "big-exponent": "1e400000",
    }
    for name, text in numbers.items():
        accept = LOOKS if name == "negative-zero" else frozenset()
        yield Case("manifest-json", f"shape-{name}", "artifact", _marker(b, _set(F + ["inputs", 0, "shape", 1],
                                                                               "@@RAW@@"), text), ARTIFACT,
                   accept=accept, why=LOOKS_WHY + " (-0 is the integer 0)" if accept else "")
        yield Case("manifest-json", f"description-{name}", "artifact",
                   _marker(b, _set(["metadata", "description"], "@@RAW@@"), text), ARTIFACT)
    for name, text in {"size-nan": "NaN", "size-float": "3276.0", "size-huge": "9" * 400}.items():
        m = copy.deepcopy(b.manifest)
        m["members"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in b.members.items()}
        m["members"][PAYLOAD]["size"] = "@@RAW@@"
        yield Case("manifest-json", name, "artifact",
                   _raw_manifest(b, manifest_text(m).replace(b'"@@RAW@@"', text.encode())), ARTIFACT)
    # versions and required fields
    versions: dict[str, Any] = {"2.0": "2.0", "999999.0": "999999.0", "0.9": "0.9", "1": "1", "1.0.0": "1.0.0",
                                "01.0-padded": " 1.0", "v1.0": "v1.0", "int": 1, "float": 1.0, "null": None,
                                "huge-major": "9" * 40 + ".0", "negative": "-1.0", "unicode-digits": "\u0661.0",
                                "newline": "1.0\n"}
    for name, v in versions.items():
        yield Case("manifest-version", f"format_version={name}", "artifact",
                   _with(b, _set(["format_version"], v)), ARTIFACT)
    yield Case("manifest-version", "format_version=1.7 (newer minor)", "artifact",
               _with(b, _set(["format_version"], "1.7")), ARTIFACT, accept=frozenset({"inspect", "call", "mlir"}),
               why="a newer minor version of the same major is readable by design (FORMAT.md, Versions)")
    yield Case("manifest-version", "unknown-fields (future minor)", "artifact",
               _with(b, lambda m: m.update({"future": {"x": [1, 2]}, "signature_v2": "ed25519:..."})), ARTIFACT,
               accept=frozenset({"inspect", "call", "mlir"}),
               why="a reader ignores fields it does not know (FORMAT.md, Versions)")
    yield Case("manifest-version", "2.0 written by a newline producer", "artifact",
               _with(b, lambda m: m.update({"format_version": "2.0",
                                            "producer": {**m["producer"], "jaxport": "9.9\nerror: fake"}})),
               ARTIFACT)
    for path in (["format"], ["format_version"], ["producer"], ["producer", "jaxport"], ["producer", "jax"],
                 ["members"], ["functions"], F + ["payload"], F + ["inputs"], F + ["outputs"], F + ["platforms"],
                 F + ["calling_convention_version"], F + ["inputs", 0, "shape"], F + ["inputs", 0, "dtype"],
                 F + ["inputs", 0, "name"], ["weights"], ["weights", "member"], W + ["params/w", "sha256"],
                 F + ["weights"]):
        accept = LOOKS if path == F + ["weights"] else frozenset()
        yield Case("manifest-missing-field", ".".join(map(str, path)), "artifact", _with(b, _delete(path)), ARTIFACT,
                   accept=accept, why=LOOKS_WHY if accept else "")
    wrong: dict[str, tuple[list[Any], Any]] = {
        "format=zip": (["format"], "zip"), "producer-list": (["producer"], []),
        "producer.jaxport-int": (["producer", "jaxport"], 1), "members-list": (["members"], []),
        "functions-empty": (["functions"], {}), "functions-list": (["functions"], [1]),
        "inputs-dict": (F + ["inputs"], {}), "platforms-string": (F + ["platforms"], "cpu"),
        "platforms-17": (F + ["platforms"], ["cpu"] * 17), "labels-list": (["metadata", "labels"], ["a"]),
        "label-int": (["metadata", "labels"], {"a": 1}), "metadata-string": (["metadata"], "x"),
        "description-dict": (["metadata", "description"], {"a": 1}), "signature-list": (F + ["signature"], []),
        "signature-args-int": (F + ["signature", "args"], 5),
        "signature-node-string": (F + ["signature", "args", 1], "x"),
        "signature-unknown-node": (F + ["signature", "args", 1], {"name": "x", "pickle": "..."}),
        "signature-input-twice": (F + ["signature", "kwargs"], {"y": {"input": 0}}),
        "output-tree-deep": (F + ["output_tree"], json.loads("[" * 60 + "]" * 60)),
        "effects-list": (F + ["effects"], []), "effects-ordered-int": (F + ["effects", "ordered"], 5),
        "embedded-constants-list": (F + ["embedded_constants"], []),
        "embedded-constants-bytes-string": (F + ["embedded_constants", "bytes"], "many"),
        "custom-calls-string": (F + ["custom_calls"], "x"),
        "custom-call-target-int": (F + ["custom_calls"], [{"target": 5, "count": 1, "stability": "allowed"}]),
        "custom-call-count-string": (F + ["custom_calls"], [{"target": "x", "count": "1", "stability": "allowed"}]),
        "disabled-checks-int": (F + ["disabled_safety_checks"], [1]),
        "shape-assertions-int": (F + ["shape_assertions"], [1]),
        "sharding-int": (F + ["inputs", 0, "sharding"], 5), "sharding-dict": (F + ["inputs", 0, "sharding"], {}),
        "dims-list": (F + ["dims"], []), "dim-string": (F + ["dims", "batch"], "x"),
        "dim-min-string": (F + ["dims", "batch", "min"], "1"),
        "dim-min-above-max": (F + ["dims", "batch", "min"], 65),
        "derived-from-string": (F + ["dims", "batch", "derived_from"], "x"),
        "derived-from-input-int": (F + ["dims", "batch", "derived_from", "input"], 0),
        "constraint-python": (F + ["constraints"], ["__import__('os').mkdir('CANARY') >= 1"]),
        "constraint-int": (F + ["constraints"], [1]), "constraint-long": (F + ["constraints"], ["b + " * 2000 + "b"]),
        "kept-inputs-string": (F + ["kept_inputs"], ["0"]), "x64-string": (F + ["x64"], "yes"),
        "entrypoint-int": (F + ["entrypoint"], 5), "payload-int": (F + ["payload"], 5),
        "payload-unlisted": (F + ["payload"], "functions/g.jaxexport"),
        "payload-is-weights": (F + ["payload"], "weights.bin"),
        "weights-list": (["weights"], []), "tensors-list": (["weights", "tensors"], []),
        "tensor-string": (W + ["params/w"], "x"), "function-weights-string": (F + ["weights"], "params/w"),
        "function-weight-unknown": (F + ["weights"], ["params/b", "params/zzz"]),
        "function-weight-twice": (F + ["weights"], ["params/b", "params/b"]),
        "nr-devices-zero": (F + ["nr_devices"], 0), "nr-devices-float": (F + ["nr_devices"], 1.5),
        "function-name-unicode": (["functions"], None),  # filled below
        "stablehlo-version-int": (F + ["stablehlo_version"], 15),
        "source-spec-int": (["source", "spec"], 5),
        "description-escape-sequence": (["metadata", "description"], "\x1b[2J\x1b[31mpwned"),
        "label-escape-sequence": (["metadata", "labels"], {"\x1b[31mk": "\x1b]0;title\x07v"}),
        "entrypoint-newlines": (F + ["entrypoint"], "model.py:f\nerror[ok]: fake"),
    }
    text_only = {"description-escape-sequence", "label-escape-sequence", "entrypoint-newlines"}
    for name, (path, value) in wrong.items():
        if name == "function-name-unicode":
            data = _with(b, lambda m: m.update({"functions": {"f\u202ex": m["functions"]["f"]}}))
        else:
            data = _with(b, _set(path, value))
        accept = frozenset({"inspect", "call", "mlir"}) if name in text_only else frozenset()
        yield Case("manifest-wrong-type", name, "artifact", data, ARTIFACT, accept=accept,
                   why="free text is shown with control characters escaped" if accept else "")


def shapes_and_dtypes(b: Base) -> Iterator[Case]:
    looks = LOOKS
    shapes: dict[str, tuple[Any, frozenset[str]]] = {
        "negative": (["batch", -1], frozenset()), "float": (["batch", 4.0], frozenset()),
        "float-fraction": (["batch", 1.5], frozenset()), "string-number": (["batch", "4"], looks),
        "bool": (["batch", True], frozenset()), "null": (["batch", None], frozenset()),
        "nested-list": (["batch", [4]], frozenset()), "above-2**62": (["batch", 2**62 + 1], frozenset()),
        "2**62": (["batch", 2**62], looks), "product-overflows": (["batch", 2**62, 2**62, 2**62], looks),
        "rank-64": ([1] * 64, looks), "rank-65": ([1] * 65, frozenset()), "rank-1000": ([1] * 1000, frozenset()),
        "not-a-list": ("batch, 4", frozenset()), "dict": ({"0": "batch"}, frozenset()),
        "expr-syntax": (["batch +", 4], frozenset()), "expr-python": (["__import__('os').getcwd()", 4], frozenset()),
        "expr-attribute": (["batch.real", 4], frozenset()), "expr-deep": (["(" * 100 + "batch" + ")" * 100, 4],
                                                                         frozenset()),
        "expr-long": (["+".join(["batch"] * 1000), 4], frozenset()), "expr-power-huge": (["batch^99999999", 4],
                                                                                         looks),
        "expr-unicode-digits": (["\u0664", 4], frozenset()), "expr-empty": (["", 4], frozenset()),
        "expr-nul": (["batch\0", 4], frozenset()),
    }
    for name, (shape, accept) in shapes.items():
        why = LOOKS_WHY if accept else ""
        yield Case("shape", f"input-{name}", "artifact", _with(b, _set(F + ["inputs", 0, "shape"], shape)), ARTIFACT,
                   accept=accept, why=why)
    for name, shape in {"negative": [-4, 3], "float": [4.0, 3], "product-overflows": [2**62, 2**62, 2],
                        "rank-65": [1] * 65, "symbolic": ["batch", 3], "above-2**62": [2**62 + 1, 3],
                        "nbytes-overflow": [2**61, 4]}.items():
        yield Case("shape", f"weight-{name}", "artifact", _with(b, _set(W + ["params/w", "shape"], shape)), ARTIFACT)
    dtypes_ = {"object": "O", "void": "V8", "unicode": "<U10", "object-name": "object", "float128": "float128",
               "empty": "", "padded": " float32", "upper": "FLOAT32", "numpy-code": "<f4", "int": 5, "null": None,
               "list": ["float32"], "newline": "float32\n", "pickle": "|O", "datetime": "<M8[ns]",
               "structured": "[('a', '<f4')]", "long": "f" * 100000}
    for name, dt in dtypes_.items():
        for where, path in (("input", F + ["inputs", 0, "dtype"]), ("output", F + ["outputs", 0, "dtype"]),
                            ("weight", W + ["params/w", "dtype"])):
            yield Case("dtype", f"{where}-{name}", "artifact", _with(b, _set(path, dt)), ARTIFACT)


def weights_layout(b: Base) -> Iterator[Case]:
    t = b.manifest["weights"]["tensors"]
    w_off, b_off = t["params/w"]["offset"], t["params/b"]["offset"]
    wbin = b.members["weights.bin"]
    cases: dict[str, tuple[Callable[[dict[str, Any]], None], bytes]] = {
        "overlap": (_set(W + ["params/w", "offset"], b_off), wbin),
        "overlap-partial": (_set(W + ["params/w", "offset"], b_off + 8), wbin),
        "past-end": (_set(W + ["params/w", "offset"], len(wbin)), wbin),
        "far-past-end": (_set(W + ["params/w", "offset"], 2**62), wbin),
        "unaligned": (_set(W + ["params/w", "offset"], w_off + 4), wbin + b"\0" * 4),
        "gap": (_set(W + ["params/w", "offset"], w_off + 64), wbin[:w_off] + b"\0" * 64 + wbin[w_off:]),
        "trailing-bytes-in-member": (lambda m: None, wbin + b"\0" * 64),
        "nbytes-too-small": (_set(W + ["params/w", "nbytes"], 44), wbin),
        "nbytes-too-large": (_set(W + ["params/w", "nbytes"], 52), wbin + b"\0" * 4),
        "shape-times-dtype-mismatch": (_set(W + ["params/w", "dtype"], "float64"), wbin),
        "member-name": (_set(["weights", "member"], "functions/f.jaxexport"), wbin),
        "tensor-missing": (lambda m: m["weights"]["tensors"].pop("params/w"), wbin),
        "tensor-digest-wrong": (_set(W + ["params/w", "sha256"], "0" * 64), wbin),
        "negative-offset": (_set(W + ["params/w", "offset"], -64), wbin),
        "empty-member": (lambda m: None, b""),
    }
    for name, (edit, data) in cases.items():
        m = copy.deepcopy(b.manifest)
        edit(m)
        members = dict(b.members)
        members["weights.bin"] = data
        accept = frozenset({"inspect", "mlir", "call"}) if name == "tensor-digest-wrong" else frozenset()
        yield Case("weights", name, "artifact", artifact(m, members), ARTIFACT, accept=accept,
                   why="the weights member's digest is what protects the bytes; a tensor's own digest is for "
                       "comparing artifacts" if accept else "")
    # the weights member missing from the archive, or listed without a weights section
    members = {PAYLOAD: b.members[PAYLOAD]}
    yield Case("weights", "member-absent", "artifact", artifact(b.manifest, members), ARTIFACT)
    m = copy.deepcopy(b.manifest)
    del m["weights"]
    yield Case("weights", "index-absent", "artifact", artifact(m, b.members), ARTIFACT)


def member_names(b: Base) -> Iterator[Case]:
    names = {"parent": "../f.jaxexport", "nested-parent": "functions/../../f.jaxexport", "absolute": "/tmp/f",
             "nul": "functions/f\0.jaxexport", "drive": "C:/f.jaxexport", "drive-relative": "C:f.jaxexport",
             "backslash": "functions\\f.jaxexport", "dot": "./f.jaxexport", "empty-component": "functions//f",
             "trailing-slash": "functions/", "empty": "", "long": "a/" * 600 + "f", "dot-only": ".",
             "unicode-lookalike": "functions/f\u2215..\u2215x", "newline": "functions/f\n.jaxexport",
             "manifest-twin": "manifest.json", "manifest-case": "MANIFEST.json"}
    for label, name in names.items():
        m = copy.deepcopy(b.manifest)
        m["functions"]["f"]["payload"] = name
        members = {name: b.members[PAYLOAD], "weights.bin": b.members["weights.bin"]}
        try:
            data = artifact(m, members)
        except (ValueError, UnicodeError):
            continue
        yield Case("member-name", label, "artifact", data, ARTIFACT)
    # duplicate members: the payload twice, the manifest twice
    m = copy.deepcopy(b.manifest)
    m["members"] = {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in b.members.items()}
    text = manifest_text(m)
    yield Case("member-name", "duplicate-payload", "artifact",
               zip_bytes([("manifest.json", text), *b.members.items(), (PAYLOAD, b.members[PAYLOAD])]), ARTIFACT)
    yield Case("member-name", "duplicate-manifest", "artifact",
               zip_bytes([("manifest.json", text), ("manifest.json", text), *b.members.items()]), ARTIFACT)
    yield Case("member-name", "manifest-not-first", "artifact",
               zip_bytes([*b.members.items(), ("manifest.json", text)]), ARTIFACT)
    yield Case("member-name", "unlisted-extra-member", "artifact",
               zip_bytes([("manifest.json", text), *b.members.items(), ("evil.py", b"import os")]), ARTIFACT)
    # a non-UTF-8 name (no language-encoding flag): cp437 to Python's zipfile, something else to other tools
    data = bytearray(b.data)
    for f in b.fields:
        if f.name in (f"local[{PAYLOAD}].name", f"central[{PAYLOAD}].name"):
            data[f.start + len("functions/")] = 0xE6  # 'f' -> cp437 'µ'
    yield Case("member-name", "cp437-name", "artifact", bytes(data), ARTIFACT)


def payloads(b: Base) -> Iterator[Case]:
    """Payload and StableHLO garbage, each with the manifest's digests recomputed so that only parsing can tell."""
    both_reject = frozenset({"inspect"})
    rng = random.Random(SEED + 3)
    payload = b.members[PAYLOAD]

    def case(name: str, data: bytes, accept: frozenset[str] = both_reject, why: str = NOT_PARSED) -> Case:
        members = dict(b.members)
        members[PAYLOAD] = data
        return Case("payload", name, "artifact", artifact(b.manifest, members), PROGRAM, accept=accept, why=why)

    for n in (0, 1, 4, 8, 64, 1024, len(payload)):
        yield case(f"random-{n}", bytes(rng.randrange(256) for _ in range(n)))
    yield case("zeros", b"\0" * len(payload))
    yield case("ones", b"\xff" * len(payload))
    yield case("root-offset-huge", struct.pack("<I", 0x7FFFFFFF) + payload[4:])
    yield case("root-offset-self", struct.pack("<I", 0) + payload[4:])
    for cut in (4, 16, len(payload) // 4, len(payload) // 2, len(payload) - 8):
        yield case(f"truncated-{cut}", payload[:cut])
    yield case(f"truncated-{len(payload) - 1}", payload[:-1], accept=frozenset({"inspect", "call", "mlir"}),
               why="the last byte of JAX's flatbuffer is alignment padding, never read")
    yield case("appended", payload + b"\0" * 64, accept=frozenset({"inspect", "call", "mlir"}),
               why="bytes after a flatbuffer's tables are not read (JAX's format); the digest was recomputed")
    maybe = frozenset({"inspect", "call", "mlir"})
    flip_why = ("inspect does not parse programs; a flip that leaves a valid program (in a name, a location, an "
                "unused field) runs: accidental damage is caught by the digest, which this case recomputed on purpose")
    for pos, bit in sorted({(rng.randrange(len(payload)), rng.randrange(8)) for _ in range(40)}):
        d = bytearray(payload)
        d[pos] ^= 1 << bit
        yield case(f"flatbuffer-flip-{pos}.{bit}", bytes(d), accept=maybe, why=flip_why)
    module = b.exported.mlir_module_serialized

    def with_module(mod: bytes) -> bytes:
        return bytes(dataclasses.replace(b.exported, mlir_module_serialized=mod).serialize())

    for pos, bit in sorted({(rng.randrange(len(module)), rng.randrange(8)) for _ in range(60)}):
        d = bytearray(module)
        d[pos] ^= 1 << bit
        yield case(f"stablehlo-flip-{pos}.{bit}", with_module(bytes(d)), accept=maybe, why=flip_why)
    for pos in sorted({rng.randrange(len(module) - 4) for _ in range(20)}):
        d = bytearray(module)
        d[pos:pos + 4] = bytes(rng.randrange(256) for _ in range(4))
        yield case(f"stablehlo-overwrite-{pos}", with_module(bytes(d)), accept=maybe, why=flip_why)
    for cut in (0, 4, 8, 24, len(module) // 2, len(module) - 1):
        yield case(f"stablehlo-truncated-{cut}", with_module(module[:cut]))
    yield case("stablehlo-random", with_module(bytes(rng.randrange(256) for _ in range(len(module)))))
    yield case("stablehlo-magic-then-random", with_module(module[:24] + bytes(rng.randrange(256) for _ in range(500))))
    yield case("stablehlo-text", with_module(b'module @m {\n  func.func public @main() {\n    return\n  }\n}\n'))
    yield case("stablehlo-other-function", with_module(b.other_module), accept=LOOKS,
               why="inspect --mlir prints the program the payload holds; call finds it disagrees with the signature")


# --- inputs ---------------------------------------------------------------------------------------------------------


class _Canary:
    """Unpickling this creates the canary directory."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (CANARY,))


def _npy(header: str | bytes, data: bytes = b"", version: tuple[int, int] = (1, 0)) -> bytes:
    h = header.encode("latin1") if isinstance(header, str) else header
    pad = (-(10 + len(h) + 1)) % 64
    h = h + b" " * pad + b"\n"
    if version == (1, 0):
        return b"\x93NUMPY" + bytes(version) + struct.pack("<H", len(h)) + h + data
    return b"\x93NUMPY" + bytes(version) + struct.pack("<I", len(h)) + h + data


def _good_npy(shape: tuple[int, ...] = (2, 4), dtype: str = "<f4") -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.ones(shape, dtype=np.dtype(dtype)))
    return buf.getvalue()


def _pickled_npy() -> bytes:
    import numpy as np

    arr = np.empty((1,), dtype=object)
    arr[0] = _Canary()
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def npy_inputs() -> Iterator[Case]:
    data8 = b"\0" * 32
    cases: dict[str, tuple[bytes, bool]] = {
        "pickled-object-array": (_pickled_npy(), True),
        "header-code": (_npy("{'descr': __import__('os').mkdir('CANARY'), 'fortran_order': False, 'shape': (2, 4)}",
                             data8), True),
        "header-lambda": (_npy("{'descr': (lambda: __import__('os').mkdir('CANARY'))(), 'fortran_order': False, "
                               "'shape': (2, 4)}", data8), True),
        "huge-shape-no-data": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 4)}"), False),
        "huge-bounded-dim": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000, 4)}"), False),
        "shape-product-overflows-int64": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2**40, 2**40)}",
                                               data8), False),
        "negative-shape": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 4)}", data8), False),
        "float-shape": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 4)}", data8), False),
        "bool-shape": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (True, 4)}", data8), False),
        "rank-65": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 65 + ")}", b"\0" * 4),
                    False),
        "object-descr": (_npy("{'descr': '|O', 'fortran_order': False, 'shape': (2, 4)}", b"\0" * 64), False),
        "void-descr": (_npy("{'descr': '|V8', 'fortran_order': False, 'shape': (2, 4)}", b"\0" * 64), False),
        "unicode-descr": (_npy("{'descr': '<U10', 'fortran_order': False, 'shape': (2, 4)}", b"\0" * 320), False),
        "structured-descr": (_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 4)}", data8),
                             False),
        "datetime-descr": (_npy("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2, 4)}", b"\0" * 64),
                           False),
        "bad-descr": (_npy("{'descr': 'not-a-dtype', 'fortran_order': False, 'shape': (2, 4)}", data8), False),
        "fortran-order-string": (_npy("{'descr': '<f4', 'fortran_order': 'yes', 'shape': (2, 4)}", data8), False),
        "extra-key": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), 'x': 1}", data8), False),
        "header-not-dict": (_npy("[1, 2, 3]", data8), False),
        "header-huge-literal": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), 'x': " + "9" * 5000
                                     + "}", data8), False),
        "header-deep": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 3000 + ")" * 3000 + "}",
                             data8), False),
        "header-length-65535": (b"\x93NUMPY\x01\x00\xff\xff" + b" " * 100, False),
        "header-length-2**32-1": (b"\x93NUMPY\x02\x00\xff\xff\xff\xff" + b" " * 100, False),
        "version-9": (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4)}", data8, (9, 9)), False),
        "truncated-data": (_good_npy()[:-1], False),
        "trailing-data": (_good_npy() + b"\0", False),
        "empty": (b"", False),
        "magic-only": (b"\x93NUMPY", False),
        "pickle-file": (pickle.dumps(_Canary()), True),
        "wrong-dtype": (_good_npy(dtype="<f8"), False),
        "wrong-rank": (_good_npy(shape=(8,)), False),
        "above-bound": (_good_npy(shape=(65, 4)), False),
        "zip-instead": (zip_bytes([("x.npy", _good_npy())]), False),
        "utf8-header-v3-bad": (_npy(b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), '\xff': 1}", data8,
                                    (3, 0)), False),
    }
    for name, (data, canary) in cases.items():
        yield Case("input-npy", name, "npy", data, INPUT, canary=canary)
    yield Case("input-npy", "big-endian (valid)", "npy", _good_npy(dtype=">f4"), INPUT,
               accept=frozenset({"call"}), why="a big-endian float32 array is a valid input")


_BOMBS: dict[int, tuple[bytes, int, int]] = {}


def _deflate_bomb(size: int) -> tuple[bytes, int, int]:
    """A raw deflate stream of a .npy header and ``size`` zero bytes it declares: (stream, crc, inflated size).

    Built from one flushed 1 MiB block repeated (a full flush makes each block independent of what precedes it),
    so a gigabyte costs a few kilobytes and no compression time.
    """
    if size in _BOMBS:
        return _BOMBS[size]
    mib = 1 << 20
    rows = size // 16
    header = _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (" + str(rows) + ", 4)}")
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = comp.compress(header) + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(b"\0" * mib) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.flush(zlib.Z_FINISH)
    n = rows * 16 // mib
    crc = zlib.crc32(header)
    zeros = b"\0" * mib
    for _ in range(n):
        crc = zlib.crc32(zeros, crc)
    _BOMBS[size] = (head + block * n + tail, crc, len(header) + n * mib)
    return _BOMBS[size]


def _raw_zip(entries: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A zip with hand-set fields: (name, stored bytes, method, crc, declared uncompressed size)."""
    out, central = bytearray(), bytearray()
    for name, data, method, crc, usize in entries:
        nb = name.encode("utf-8", "surrogateescape")
        off = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0x800, method, 0, 0x21, crc, len(data),
                           min(usize, 0xFFFFFFFF), len(nb), 0) + nb + data
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0x800, method, 0, 0x21, crc, len(data),
                               min(usize, 0xFFFFFFFF), len(nb), 0, 0, 0, 0, 0, off) + nb
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(out), 0)
    return bytes(out + central + end)


def npz_inputs(bomb_bytes: int = 1 << 30) -> Iterator[Case]:
    good = _good_npy()
    stream, crc, total = _deflate_bomb(bomb_bytes)
    cases: dict[str, tuple[bytes, bool]] = {
        "zip-bomb-1GiB": (_raw_zip([("x.npy", stream, 8, crc, total)]), False),
        "zip-bomb-declared-small": (_raw_zip([("x.npy", stream, 8, crc, 128)]), False),
        "declared-17GiB": (_raw_zip([("x.npy", good, 0, zlib.crc32(good), 17 << 30)]), False),
        "pickled-member": (_raw_zip([("x.npy", _pickled_npy(), 0, zlib.crc32(_pickled_npy()),
                                      len(_pickled_npy()))]), True),
    }
    for label, name in {"parent": "../x.npy", "absolute": "/x.npy", "nested-parent": "a/../../x.npy",
                        "backslash": "..\\x.npy", "drive": "C:x.npy", "nul": "x.npy\0.txt", "empty": "",
                        "not-npy": "x.py", "dot": "./x.npy"}.items():
        cases[f"name-{label}"] = (_raw_zip([(name, good, 0, zlib.crc32(good), len(good))]), False)
    cases["duplicate-member"] = (_raw_zip([("x.npy", good, 0, zlib.crc32(good), len(good))] * 2), False)
    cases["bad-crc"] = (_raw_zip([("x.npy", good, 0, zlib.crc32(good) ^ 1, len(good))]), False)
    cases["unknown-method"] = (_raw_zip([("x.npy", good, 99, zlib.crc32(good), len(good))]), False)
    cases["encrypted"] = (_raw_zip([("x.npy", good, 0, zlib.crc32(good), len(good))]).replace(
        b"PK\x03\x04\x14\x00\x00\x08", b"PK\x03\x04\x14\x00\x01\x08").replace(
        b"PK\x01\x02\x14\x00\x14\x00\x00\x08", b"PK\x01\x02\x14\x00\x14\x00\x01\x08"), False)
    cases["10001-members"] = (_raw_zip([(f"m{i}.npy", b"", 0, 0, 0) for i in range(10001)]), False)
    cases["truncated"] = (_raw_zip([("x.npy", good, 0, zlib.crc32(good), len(good))])[:-30], False)
    cases["member-lies-size"] = (_raw_zip([("x.npy", good, 0, zlib.crc32(good), len(good) - 8)]), False)
    cases["deflate-garbage"] = (_raw_zip([("x.npy", b"\xff" * 64, 8, 0, 4096)]), False)
    for name, (data, canary) in cases.items():
        yield Case("input-npz", name, "npz", data, INPUT, canary=canary)


# --- specs ----------------------------------------------------------------------------------------------------------


def _laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 9)}]")
    return "\n".join(lines) + f"\njaxport: 1\nargs: *a{levels}\n"


def specs() -> Iterator[Case]:
    base = 'jaxport: 1\ndims:\n  batch: {max: 64}\nargs:\n  - "f32[batch, 4]"\n'
    apply = "!!python/object/apply:os.mkdir [CANARY]"
    texts: dict[str, tuple[str | bytes, bool]] = {
        "apply-top-level": (f"{apply}\n", True),
        "apply-in-args": (f'jaxport: 1\nargs:\n  - {apply}\n', True),
        "apply-in-dims": (f"jaxport: 1\ndims:\n  batch: {{max: {apply}}}\nargs: ['f32[batch]']\n", True),
        "apply-as-key": (f"jaxport: 1\n? {apply}\n: 1\nargs: ['f32[4]']\n", True),
        "apply-in-static": (f"jaxport: 1\nargs:\n  - {{static: {apply}}}\n", True),
        "apply-in-metadata": (f"jaxport: 1\nmetadata:\n  labels: {{a: {apply}}}\nargs: ['f32[4]']\n", True),
        "object-new": ("jaxport: 1\nargs:\n  - !!python/object/new:os.mkdir [CANARY]\n", True),
        "python-name": ("jaxport: 1\nargs:\n  - !!python/name:os.system\n", False),
        "python-module": ("jaxport: 1\nargs:\n  - !!python/module:os\n", False),
        "python-object": ("jaxport: 1\nargs:\n  - !!python/object:os.PathLike {}\n", False),
        "local-tag": ("jaxport: 1\nargs:\n  - !evil 'f32[4]'\n", False),
        "verbatim-tag": ("jaxport: 1\nargs:\n  - !<tag:yaml.org,2002:python/object/apply:os.mkdir> [CANARY]\n",
                         True),
        "tag-directive": ("%TAG !p! tag:yaml.org,2002:python/object/apply:\n---\njaxport: 1\nargs:\n"
                          "  - !p!os.mkdir [CANARY]\n", True),
        "binary": ("jaxport: 1\nargs:\n  - !!binary aGVsbG8=\n", False),
        "timestamp": ("jaxport: 1\nargs:\n  - !!timestamp 2001-12-14\n", False),
        "set": ("jaxport: 1\nargs: !!set {a: null}\n", False),
        "omap": ("jaxport: 1\nargs: !!omap [a: 1]\n", False),
        "merge-key": ("x: &x {jaxport: 1}\n<<: *x\nargs: ['f32[4]']\n", False),
        "billion-laughs": (_laughs(9), False),
        "laughs-in-dims": (_laughs(6).replace("args: *a6", "dims: *a6\nargs: ['f32[4]']"), False),
        "undefined-alias": ("jaxport: 1\nargs: *nothing\n", False),
        "recursive-alias": ("jaxport: 1\nargs: &a [*a]\n", False),
        "nesting-65-flow": ("jaxport: 1\nargs: " + "[" * 65 + "]" * 65 + "\n", False),
        "nesting-100000-flow": ("jaxport: 1\nargs: " + "[" * 100000 + "]" * 100000 + "\n", False),
        "nesting-unclosed": ("jaxport: 1\nargs: " + "[" * 100000 + "\n", False),
        "nesting-block": ("jaxport: 1\nargs:\n" + "".join("  " * i + "- \n" for i in range(1, 200)), False),
        "nesting-mapping": ("jaxport: 1\nargs: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", False),
        "huge-integer": ("jaxport: 1\ndims:\n  batch: {max: " + "9" * 100000 + "}\nargs: ['f32[batch]']\n", False),
        "huge-integer-in-shape": ("jaxport: 1\nargs: ['f32[" + "9" * 5000 + "]']\n", False),
        "huge-float": ("jaxport: 1\ndims:\n  batch: {max: 1e999}\nargs: ['f32[batch]']\n", False),
        "nan-bound": ("jaxport: 1\ndims:\n  batch: {max: .nan}\nargs: ['f32[batch]']\n", False),
        "inf-static": ("jaxport: 1\nargs: ['f32[4]', {static: .inf}]\n", False),
        "hex-bound": ("jaxport: 1\ndims:\n  batch: {max: 0x" + "f" * 5000 + "}\nargs: ['f32[batch]']\n", False),
        "sexagesimal": ("jaxport: 1\ndims:\n  batch: {max: 190:20:30}\nargs: ['f32[batch]']\n", False),
        "negative-dim": ("jaxport: 1\nargs: ['f32[-1, 4]']\n", False),
        "float-dim": ("jaxport: 1\nargs: ['f32[1.5, 4]']\n", False),
        "rank-65": ("jaxport: 1\nargs: ['f32[" + ", ".join(["1"] * 65) + "]']\n", False),
        "product-overflows": ("jaxport: 1\nargs: ['f32[4611686018427387904, 4611686018427387904, 4]']\n", False),
        "dim-above-2**62": ("jaxport: 1\nargs: ['f32[4611686018427387905, 4]']\n", False),
        "dtype-object": ("jaxport: 1\nargs: ['O[4]']\n", False),
        "dtype-void": ("jaxport: 1\nargs: ['V8[4]']\n", False),
        "dtype-unicode": ("jaxport: 1\nargs: ['<U10[4]']\n", False),
        "dtype-long-form-object": ("jaxport: 1\nargs:\n  - {shape: [4], dtype: O}\n", False),
        "dtype-python-type": ("jaxport: 1\nargs:\n  - {shape: [4], dtype: !!python/name:builtins.object }\n", False),
        "dim-expression-python": ("jaxport: 1\nargs: ['f32[__import__(\"os\").getcwd()]']\n", False),
        "constraint-python": ("jaxport: 1\ndims: [b]\nconstraints: [\"__import__('os').mkdir('CANARY') >= 1\"]\n"
                              "args: ['f32[b, 4]']\n", False),
        "version-2": ("jaxport: 2\nargs: ['f32[4]']\n", False),
        "version-float": ("jaxport: 1.0\nargs: ['f32[4]']\n", False),
        "version-huge": ("jaxport: " + "9" * 5000 + "\nargs: ['f32[4]']\n", False),
        "duplicate-key": ("jaxport: 1\nargs: ['f32[4]']\nargs: ['f32[8]']\n", False),
        "empty": ("", False),
        "comments-only": ("# nothing\n", False),
        "null-document": ("~\n", False),
        "tabs": ("jaxport: 1\nargs:\n\t- 'f32[4]'\n", False),
        "nul-char": ("jaxport: 1\nargs: ['f32[4]\0']\n", False),
        "control-char": ("jaxport: 1\nargs: ['f32[4]\x07']\n", False),
        "escape-sequence": ('jaxport: 1\nargs: ["\\e[31mf32[4]"]\n', False),
        "bom": ("\ufeff" + base, False),
        "multi-document": (base + "---\n" + base, False),
        "long-line": ("jaxport: 1\nargs: ['f32[" + "1" * 200000 + "]']\n", False),
        "too-big": (base + "#" * (1 << 20) + "\n", False),
        "invalid-utf8": (b"jaxport: 1\nargs: ['f32[\xff]']\n", False),
        "utf16": (base.encode("utf-16"), False),
        "binary-garbage": (bytes(random.Random(SEED + 4).randrange(256) for _ in range(4096)), False),
        "many-keys": ("jaxport: 1\nargs: ['f32[4]']\nmetadata:\n  labels:\n" + "".join(f"    k{i}: v\n"
                                                                                       for i in range(100001)), False),
        "bind-absolute": ("jaxport: 1\nargs:\n  - bind: /etc/passwd\n  - 'f32[4]'\n", False),
        "bind-traversal": ("jaxport: 1\nargs:\n  - bind: ../../../../etc/passwd.npz\n  - 'f32[4]'\n", False),
    }
    legit = {"sexagesimal": "YAML 1.1 reads 190:20:30 as the integer 685230, a valid bound",
             "bom": "YAML allows a byte-order mark before the document"}
    for name, (text, canary) in texts.items():
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        yield Case("spec", name, "spec", data, SPEC, canary=canary,
                   accept=frozenset({"export"}) if name in legit else frozenset(), why=legit.get(name, ""))


def binds() -> Iterator[Case]:
    """Hostile weights files bound by a spec at export."""
    good = _good_npy(shape=(4, 3))
    stream, crc, total = _deflate_bomb(1 << 30)
    cases: dict[str, tuple[str, bytes, bool]] = {
        "npz-pickled-member": ("hostile.npz", _raw_zip([("w.npy", _pickled_npy(), 0, zlib.crc32(_pickled_npy()),
                                                         len(_pickled_npy()))]), True),
        "npz-zip-bomb-1GiB": ("hostile.npz", _raw_zip([("w.npy", stream, 8, crc, total)]), False),
        "npz-traversal-name": ("hostile.npz", _raw_zip([("../w.npy", good, 0, zlib.crc32(good), len(good))]),
                               False),
        "npz-truncated": ("hostile.npz", _raw_zip([("w.npy", good, 0, zlib.crc32(good), len(good))])[:-40],
                          False),
        "npz-bad-crc": ("hostile.npz", _raw_zip([("w.npy", good, 0, zlib.crc32(good) ^ 1, len(good))]), False),
        "npy-pickled": ("hostile.npy", _pickled_npy(), True),
        "npy-huge-shape": ("hostile.npy", _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (10**12, 4)}"),
                           False),
        "npy-header-code": ("hostile.npy", _npy("{'descr': __import__('os').mkdir('CANARY'), 'fortran_order': "
                                                "False, 'shape': (2, 4)}", b"\0" * 32), True),
        "safetensors-huge-header": ("hostile.safetensors", struct.pack("<Q", 2**63 - 1) + b"{}", False),
        "safetensors-not-json": ("hostile.safetensors", struct.pack("<Q", 8) + b"not json", False),
        "safetensors-overlap": ("hostile.safetensors", _safetensors({"w": ("F32", [4, 3], [0, 48]),
                                                                     "b": ("F32", [3], [0, 12])}, 48), False),
        "safetensors-past-end": ("hostile.safetensors", _safetensors({"w": ("F32", [4, 3], [0, 4800])}, 48),
                                 False),
        "safetensors-size-mismatch": ("hostile.safetensors", _safetensors({"w": ("F32", [4, 3], [0, 40])}, 48),
                                      False),
        "safetensors-bad-dtype": ("hostile.safetensors", _safetensors({"w": ("O", [4, 3], [0, 48])}, 48), False),
        "safetensors-negative-shape": ("hostile.safetensors", _safetensors({"w": ("F32", [-4, 3], [0, 48])}, 48),
                                       False),
        "safetensors-huge-shape": ("hostile.safetensors",
                                   _safetensors({"w": ("F32", [2**62, 2**62], [0, 48])}, 48), False),
    }
    for name, (file, data, canary) in cases.items():
        yield Case("bind", name, "bind", data, SPEC, canary=canary, file=file)


def _safetensors(tensors: dict[str, tuple[str, list[int], list[int]]], size: int) -> bytes:
    header = json.dumps({k: {"dtype": d, "shape": s, "data_offsets": o} for k, (d, s, o) in tensors.items()})
    raw = header.encode()
    raw += b" " * ((-len(raw)) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"\0" * size


# --- the corpus --------------------------------------------------------------------------------------------------


def build(workdir: Path, trust: bool = True) -> tuple[Base, list[Case]]:
    """Export the base artifact into ``workdir`` and generate every case (``trust``: with the trust-boundary
    classes of ``trust.py``, whose programs take a child process and a few seconds to build)."""
    b = build_base(workdir)
    generators = [prefixes(b), truncations(b), field_values(b), manifest_field_values(b), manifest_json(b),
                  shapes_and_dtypes(b), weights_layout(b), member_names(b), trailing_and_polyglots(b),
                  payloads(b), bit_flips(b), overwrites(b), npy_inputs(), npz_inputs(), specs(), binds()]
    if trust:
        from . import (
            boundary_classes,
            cache_classes,
            import_classes,
            runtime_classes,
            signature_classes,
            spec_classes,
        )
        from . import trust as trust_classes

        generators.append(trust_classes.cases(b))
        generators.append(runtime_classes.cases(b))
        generators.append(signature_classes.cases(b))
        generators.append(signature_classes.swap_cases(b))  # issue 46: the artifact swapped while it is checked
        generators.append(import_classes.cases(b))
        generators.append(spec_classes.cases(b))  # issue 36 item 4: like values, ranges, bind sources
        generators.append(boundary_classes.cases(b))  # issue 46: outputs that are inputs, values nested too deep
        generators.append(cache_classes.cases(b))  # issue 54: a cache directory an attacker wrote, signed artifact
    cases: list[Case] = []
    seen: set[str] = set()
    for gen in generators:
        for c in gen:
            if c.id in seen:
                raise AssertionError(f"duplicate case id {c.id}")
            seen.add(c.id)
            cases.append(c)
    return b, cases
