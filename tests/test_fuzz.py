"""Structure-aware fuzzing of every reader of untrusted bytes: the artifact container, the manifest validator (and
the inspect view of what it accepts), the spec parser, and the .npy/.npz input loaders.

Each property is the contract of RELIABILITY.md: a reader either returns, or raises its one documented error
class; damage it does not refuse leaves the content it returns unchanged. Nothing here needs JAX, so the whole file
stays well under a minute on two cores.

The examples are derandomized (the same every run) with a short budget. The longer run draws fresh random examples
and more of them::

    JAXPORT_FUZZ_EXAMPLES=20000 JAXPORT_FUZZ_RANDOM=1 python -m pytest tests/test_fuzz.py   # or scripts/fuzz_long.py

A failure found that way becomes a fixed ``@example`` here, or a case in tests/test_hostile.py.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jaxport.artifact import container, manifest
from jaxport.errors import FormatError, InputError, SpecError
from jaxport.run.values import npyio
from jaxport.spec import parse_spec
from tests.hostile import zipmodel

EXAMPLES = int(os.environ.get("JAXPORT_FUZZ_EXAMPLES", "0")) or None
RANDOM = bool(os.environ.get("JAXPORT_FUZZ_RANDOM"))


def fuzz(default: int) -> settings:
    return settings(max_examples=EXAMPLES or default, deadline=None, derandomize=not RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])


# --- a small, complete artifact, built without JAX -----------------------------------------------------------------

PAYLOAD = "functions/f.jaxexport"
_B = np.arange(3, dtype=np.float32).tobytes()
_W = np.arange(12, dtype=np.float32).tobytes()
WEIGHTS = _B + b"\0" * (64 - len(_B)) + _W


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


MEMBERS = {PAYLOAD: bytes(range(256)) * 4, "weights.bin": WEIGHTS}
MANIFEST: dict[str, Any] = {
    "format": "jaxport", "format_version": "1.0",
    "producer": {"jaxport": "0.1.0", "jax": "0.10.2", "jaxlib": "0.10.2", "calling_convention_range": [9, 10]},
    "metadata": {"name": "f", "version": None, "description": "fuzzing", "labels": {"team": "x"}},
    "source": {"spec": "spec.yaml"},
    "members": {n: {"size": len(b), "sha256": _sha(b)} for n, b in MEMBERS.items()},
    "functions": {"f": {
        "entrypoint": "model.py:f", "payload": PAYLOAD, "calling_convention_version": 10,
        "stablehlo_version": "1.15.0", "platforms": ["cpu"], "x64": False,
        "signature": {"args": [{"bound": "params.npz", "name": "params"}, {"input": 0, "name": "x"}], "kwargs": {}},
        "inputs": [{"name": "x", "spec_path": "args[1]", "shape": ["batch", 4], "dtype": "float32",
                    "sharding": None}],
        "weights": ["params/b", "params/w"],
        "outputs": [{"name": "output", "shape": ["batch", 3], "dtype": "float32", "sharding": None}],
        "output_tree": {"output": 0},
        "dims": {"batch": {"min": 1, "max": 64, "derived_from": {"input": "x", "axis": 0, "expression": "batch"}}},
        "constraints": ["batch <= 64"], "shape_assertions": ["Input shapes do not match"],
        "custom_calls": [{"target": "shape_assertion", "count": 2, "stability": "guaranteed"}],
        "allowed_custom_calls": [], "disabled_safety_checks": [], "kept_inputs": [0, 1, 2],
        "effects": {"ordered": [], "unordered": []}, "nr_devices": 1, "vjp_order": 0,
        "embedded_constants": {"count": 1, "bytes": 4,
                               "largest": [{"type": "tensor<i32>", "bytes": 4, "location": "model.py:4:11"}]}}},
    "weights": {"member": "weights.bin", "tensors": {
        "params/b": {"dtype": "float32", "shape": [3], "offset": 0, "nbytes": 12, "sha256": _sha(_B)},
        "params/w": {"dtype": "float32", "shape": [4, 3], "offset": 64, "nbytes": 48, "sha256": _sha(_W)}}},
}


def zip_artifact(manifest_raw: bytes, members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    container._write_members(buf, [(container.MANIFEST_NAME, manifest_raw), *members.items()])
    return buf.getvalue()


BASE = zip_artifact(container.manifest_bytes(MANIFEST), MEMBERS)
FIELDS = zipmodel.layout(BASE)


def open_bytes(tmp: Path, data: bytes) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """Open and fully verify ``data`` as an artifact: its manifest and members, or None when refused. Any error
    other than FormatError fails the test."""
    path = tmp / "fuzz.jaxport"
    path.write_bytes(data)
    try:
        with container.open_artifact(path) as art:
            art.verify_all()
            return art.manifest, {n: art.read(n) for n in art.members if n != container.MANIFEST_NAME}
    except FormatError:
        return None


def test_the_fuzzing_base_is_a_valid_artifact(tmp_path):
    assert open_bytes(tmp_path, BASE) == (MANIFEST, MEMBERS)


# --- the container -----------------------------------------------------------------------------------------------

_INTERESTING = [0, 1, 2, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, len(BASE) - 1), st.integers(0, 7)),
    st.tuples(st.just("bytes"), st.integers(0, len(BASE) - 1), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("field"), st.sampled_from([f for f in FIELDS if f.kind != "data"]),
              st.one_of(st.sampled_from(_INTERESTING), st.integers(0, 0xFFFFFFFF))),
    st.tuples(st.just("cut"), st.integers(0, len(BASE) - 1), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, len(BASE)), st.binary(min_size=1, max_size=64)),
)


def mutate(data: bytes, m: tuple[str, Any, Any]) -> bytes:
    """One mutation; positions drawn for the base artifact wrap around a shorter (already mutated) one."""
    kind, a, b = m
    if not data:
        return data
    if kind == "flip":
        out = bytearray(data)
        out[a % len(out)] ^= 1 << b
        return bytes(out)
    if kind == "bytes":
        a %= len(data)
        return data[:a] + b[:len(data) - a] + data[a + len(b):]
    if kind == "field":
        return zipmodel.patch(data, a, b & ((1 << (8 * a.size)) - 1)) if a.end <= len(data) else data
    if kind == "cut":
        return data[:a]
    return data[:a] + b + data[a:]


@fuzz(400)
@given(st.lists(mutation, min_size=1, max_size=3))
def test_damage_is_refused_or_changes_nothing(tmp_path, mutations):
    """Any mutation of an artifact's bytes: the reader raises FormatError, or what it returns is unchanged."""
    data = BASE
    for m in mutations:
        data = mutate(data, m)
    opened = open_bytes(tmp_path, data)
    if opened is not None:
        assert opened == (MANIFEST, MEMBERS), "damage that the reader did not refuse changed the content"


# --- the manifest ------------------------------------------------------------------------------------------------

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False,
                      allow_infinity=False), st.text(max_size=12),
                      st.sampled_from(["batch", "2*batch", "float32", "O", "<U10", "cpu", "", "../x", "b >= 1",
                                       "functions/f.jaxexport", "weights.bin", "1.0", "2.0", "x\n"]))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=12)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


_MANIFEST_PATHS = [p for p in _paths(MANIFEST) if p]


@st.composite
def edited_manifest(draw: Any) -> dict[str, Any]:
    m = copy.deepcopy(MANIFEST)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_MANIFEST_PATHS))
        node = m
        try:
            for k in path[:-1]:
                node = node[k]
            action = draw(st.sampled_from(["set", "set", "delete", "add"]))
            if action == "set":
                node[path[-1]] = draw(json_value)
            elif action == "delete" and isinstance(node, dict):
                del node[path[-1]]
            elif isinstance(node, dict):
                node[draw(st.text(max_size=8))] = draw(json_value)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier edit removed or replaced this path
    return m


@fuzz(400)
@given(edited_manifest())
@example(json.loads(json.dumps(MANIFEST).replace('"axis": 0', '"axis": "0"')))
def test_the_validator_refuses_or_what_it_accepts_can_be_shown(m):
    """validate raises FormatError or accepts; what it accepts, every view of inspect renders without error."""
    try:
        typed = manifest.validate(m)
    except FormatError:
        return
    from jaxport.artifact import summary

    for fname, f in typed.functions.items():
        summary.signature(fname, f)
        for dn, d in f.dims.items():
            summary.derivation_text(dn, d)
    json.dumps(m)
    json.dumps(typed.to_json())


@fuzz(150)
@given(edited_manifest())
@example(dict(MANIFEST, weights={"member": "weights.bin", "tensors": None}))  # found by the long run
def test_inspect_shows_or_refuses_any_edited_manifest(tmp_path, m):
    """The real ``inspect`` (text and --json) on an artifact with an edited manifest: exit 0, or 7/8 with one line."""
    from click.testing import CliRunner
    from jaxport_cli.main import cli

    try:
        raw = container.manifest_bytes(m)
    except (ValueError, TypeError):
        return
    path = tmp_path / "edited.jaxport"
    path.write_bytes(zip_artifact(raw, MEMBERS))
    for args in (["inspect", str(path)], ["inspect", "--json", str(path)]):
        res = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert res.exit_code in (0, 7, 8), res.stderr
        if res.exit_code:
            assert res.stderr.count("\n") == 1 and res.stderr.startswith("error["), res.stderr


@fuzz(300)
@given(st.binary(max_size=2000) | st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass")))
@example(b"[" * 70 + b"]" * 70)
@example(b'{"a": 1e999}')
@example(b'{"a": ' + b"9" * 5000 + b"}")
def test_strict_json_raises_value_errors_only(raw):
    try:
        container._strict_json(raw)
    except (ValueError, UnicodeDecodeError):
        pass


# --- the spec parser ---------------------------------------------------------------------------------------------

_SPEC_SCALARS = st.one_of(
    st.integers(-5, 2**64), st.floats(allow_nan=True), st.booleans(), st.none(), st.text(max_size=10),
    st.sampled_from(["f32[batch, 784]", "f32[]", "bf16[2*h, h]", "i32[-1]", "O[4]", "<U10[2]", "f32[" + "1," * 70 + "]",
                     "f32[floordiv(b, 2)]", "f32[b^9999]", "!!python/object/apply:os.mkdir [CANARY]", "*a", "&a x",
                     "model.py:f", "params.npz", "batch <= 8*h", "cpu", "tpu", ".inf", "0x" + "f" * 40]))
_SPEC_KEYS = st.sampled_from(["jaxport", "dims", "constraints", "args", "kwargs", "platforms", "allow_custom_calls",
                              "metadata", "functions", "min", "max", "shape", "dtype", "static", "bind", "name",
                              "labels", "entrypoint", "batch", "h"])
spec_value = st.recursive(_SPEC_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(_SPEC_KEYS, inner, max_size=5)),
                          max_leaves=16)


@st.composite
def spec_text(draw: Any) -> str:
    import yaml

    doc = draw(st.dictionaries(_SPEC_KEYS, spec_value, max_size=6))
    if draw(st.booleans()):
        doc["jaxport"] = 1
    text = yaml.safe_dump(doc, default_flow_style=draw(st.booleans()), allow_unicode=True)
    # text-level damage: tags, aliases, odd characters, cuts
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["!!python/object/apply:os.mkdir [CANARY] ", "*x", "&x ", "\t",
                                                 "\0", "{", "[", "- ", ": ", "\n  ", "!!binary ", "%TAG ! !\n",
                                                 "<<: *x\n", "'", "\ufeff", "\x1b[31m"])) + text[at:]
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    return text


@fuzz(300)
@given(spec_text())
@example("jaxport: 1\nargs: ['f32[" + "9" * 5000 + "]']\n")
@example("jaxport: 1\ndims:\n  b: {max: " + "9" * 5000 + "}\nargs: ['f32[b]']\n")
@example("jaxport: 1\nargs: ['f32[" + ", ".join(["1"] * 65) + "]']\n")
@example("jaxport: 1\nargs: ['f32[4611686018427387904, 4611686018427387904]']\n")
@example("jaxport: 1\ndims:\n  b: {max: 0x" + "f" * 40 + "}\nargs: ['f32[b]']\n")
def test_the_spec_parser_raises_spec_errors_only(tmp_path, text):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        parse_spec(text, "spec.yaml", tmp_path)
    except SpecError:
        pass
    finally:
        os.chdir(cwd)
    assert not (tmp_path / "CANARY").exists()


# --- the input loaders ---------------------------------------------------------------------------------------------

_DESCRS = ["<f4", ">f4", "|b1", "<i8", "<f2", "|u1", "<c8", "|O", "|V8", "|V2", "<U10", "<M8[ns]", "f", "float32",
           "x", "", "<f4 ", "[('a', '<f4')]"]


@st.composite
def npy_file(draw: Any) -> bytes:
    descr = draw(st.sampled_from(_DESCRS))
    shape = draw(st.lists(st.one_of(st.integers(0, 5), st.integers(-3, 2**70), st.sampled_from([True, 1.5])),
                          max_size=draw(st.sampled_from([3, 70]))))
    fortran = draw(st.sampled_from(["False", "True", "0", "'no'"]))
    dims = "".join(f"{d!r}, " for d in shape)
    header = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': ({dims})}}"
    if draw(st.booleans()):
        at = draw(st.integers(0, len(header)))
        header = header[:at] + draw(st.sampled_from(["__import__('os')", "(", "}", "'", "\\x00", ", 'x': 1"])) + \
            header[at:]
    text = header.encode("latin1", "replace")
    version = draw(st.sampled_from([(1, 0), (2, 0), (3, 0), (0, 9)]))
    pad = (-(10 + len(text) + 1)) % 64
    text = text + b" " * pad + b"\n"
    length = struct.pack("<H", len(text) & 0xFFFF) if version in ((1, 0), (0, 9)) else struct.pack("<I", len(text))
    body = draw(st.one_of(st.binary(max_size=64), st.just(b"\0" * 96)))
    return b"\x93NUMPY" + bytes(version) + length + text + body


@fuzz(400)
@given(npy_file(), st.sampled_from(["float32", "bfloat16", "int64", None]))
@example(b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (0, 24592, 93763947999907, )}"
         + b" " * 38 + b"\n", "float32")  # found by the long run: no bytes, but too many elements for numpy
def test_npy_headers_give_arrays_or_input_errors(tmp_path, data, declared):
    path = tmp_path / "x.npy"
    path.write_bytes(data)
    try:
        arr = npyio.read_npy(path, declared, "x", {"name": "x", "shape": ["batch", 4], "dtype": "float32",
                                                      "_dims": {"batch": {"min": 1, "max": 64}}})
    except InputError:
        return
    assert arr.nbytes <= len(data)


@st.composite
def npz_file(draw: Any) -> bytes:
    """A zip with hand-set names, methods, CRCs and sizes, whose members are .npy files or bytes."""
    good = io.BytesIO()
    np.save(good, np.ones((2, 4), np.float32))
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(["x.npy", "mask.npy", "../x.npy", "/x.npy", "x.npy\0.txt", "x", "a/b.npy",
                                     "C:x.npy", "x.NPY", ""]))
        data = draw(st.one_of(st.just(good.getvalue()), npy_file(), st.binary(max_size=64)))
        method = draw(st.sampled_from([0, 0, 8, 99]))
        stored = zlib.compress(data)[2:-4] if method == 8 else data
        crc = zlib.crc32(data) ^ draw(st.sampled_from([0, 0, 1]))
        usize = draw(st.sampled_from([len(data), len(data), 0, len(data) + 1, 2**32 - 1]))
        entries.append((name, stored, method, crc, usize))
    out, central = bytearray(), bytearray()
    for name, data, method, crc, usize in entries:
        nb = name.encode()
        off = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0x800, method, 0, 0x21, crc, len(data), usize, len(nb),
                           0) + nb + data
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0x800, method, 0, 0x21, crc, len(data),
                               usize, len(nb), 0, 0, 0, 0, 0, off) + nb
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(out), 0)
    return bytes(out + central + end)


@fuzz(300)
@given(npz_file())
def test_npz_files_give_arrays_or_input_errors(tmp_path, data):
    path = tmp_path / "in.npz"
    path.write_bytes(data)
    expect = {"x": {"name": "x", "shape": ["batch", 4], "dtype": "float32", "_dims": {"batch": {"max": 64}}},
              "mask": {"name": "mask", "shape": [2], "dtype": "bool", "_dims": {}}}
    try:
        arrays = npyio.read_npz(path, {"x": "float32", "mask": "bool"}, expect)
    except InputError:
        return
    assert set(arrays) <= {"x", "mask"}
