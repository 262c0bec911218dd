"""What the cache directory holds is read defensively (issue 54, items 1 and 4): padding verdicts that do not fit the
function, or that no trusted signer vouched for under a required signature, are proven again; an executable record
whose header claims more bytes than this process holds is ignored in bounded memory, never a MemoryError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxport
from jaxport import usercache
from jaxport.run import executables
from jaxport.run.buckets.verdicts import PADDING_RECORD, padding_digest, verdicts_of

# not row-wise: every row depends on the whole batch (its mean), so padding would change the answer
MODEL = "def f(x):\n    return x - x.mean(axis=0)\n"
SPEC = 'jaxport: 1\ndims: {n: {min: 1, max: 64}}\nargs:\n  - "f32[n, 3]"\n'


@pytest.fixture
def centered(make_artifact):
    return make_artifact(MODEL, SPEC)


def _plant(directory: Path, loaded, inputs_axes, outputs_axes) -> Path:
    f = loaded.function_record
    program = loaded.model.members[f.payload].sha256
    verdict = {"allowed": True, "reason": "", "inputs": inputs_axes, "outputs": outputs_axes, "split": True,
               "split_reason": ""}
    assert usercache.write_record(directory, PADDING_RECORD, padding_digest(program, f), {"n": verdict})
    return usercache.record_path(directory, PADDING_RECORD, padding_digest(program, f))


@pytest.mark.parametrize("axes", [({"x": [5]}, {"output": [0]}), ({"x": [0], "y": [0]}, {"output": [0]}),
                                  ({"x": [0]}, {"output": [1]}), ({"x": [-1]}, {"output": [0]})])
def test_padding_verdicts_with_axes_no_call_has_are_proven_again(centered, tmp_path, axes):
    cache = tmp_path / "cache"
    loaded = jaxport.load(centered, cache_dir=cache)
    output = loaded.function_record.outputs[0].name
    inputs_axes, outputs_axes = axes
    _plant(cache, loaded, inputs_axes, {output: outputs_axes["output"]})
    verdicts = verdicts_of(loaded)
    assert verdicts["n"].allowed is False  # the proof's own answer: the mean couples the rows
    assert f"ignored the padding verdicts in the cache {cache}: they do not fit function 'f' (damaged, or written " \
           f"for another program); proving them again." in loaded.notes


def test_a_planted_padding_verdict_is_used_only_when_vouched_for(centered, tmp_path):
    pytest.importorskip("model_signing", reason="signing needs the extra jaxport[sign] (make test installs it)")
    from tests.sign.keys import key_pair

    cache = tmp_path / "cache"
    private, public = key_pair(tmp_path, "ci")
    jaxport.sign(centered, private)
    loaded = jaxport.load(centered, require_signature=public, cache_dir=cache)
    output = loaded.function_record.outputs[0].name
    planted = _plant(cache, loaded, {"x": [0]}, {output: [0]})  # fits the function, and lies
    verdicts = verdicts_of(loaded)
    assert verdicts["n"].allowed is False
    assert f"ignored {planted.name} in the cache {cache}: a signature is required and no trusted signer vouched for " \
           f"it (vouch for the cache: jaxport sign ARTIFACT --key PRIVATE.pem --cache-dir DIR); doing its work here " \
           f"instead." in loaded.notes


@pytest.mark.slow  # hashes 4 GiB of a hole: 16 s
def test_a_record_that_claims_more_than_memory_holds_is_ignored(mlp_path, tmp_path):
    """A sparse record whose header claims a 4 GiB executable, read by a call limited to 2 GiB of data memory (in a
    child): hashed in chunks and ignored with one line, where it was read whole before (MemoryError, exit 10)."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    x = tmp_path / "x.npy"
    np.save(x, np.ones((2, 784), np.float32))
    built = subprocess.run([str(Path(sys.executable).parent / "jaxport"), "warmup", str(mlp_path), "--target", "cpu",
                            "--dim", "batch=2", "--cache-dir", str(cache)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (record,) = cache.glob("jaxport-executable-*.bin")
    good, _ = executables.read_record(record)
    size = 4 << 30
    header = dict(good.header, size=size)
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    with open(record, "wb") as f:
        f.write(executables.MAGIC + len(raw).to_bytes(8, "little") + raw)
        f.truncate(len(executables.MAGIC) + 8 + len(raw) + size)  # a hole: no disk taken
    limit = "import resource; resource.setrlimit(resource.RLIMIT_DATA, (2 << 30, 2 << 30)); "
    code = (limit + "import sys; from jaxport_cli.main import main; sys.argv = ['jaxport', 'call', "
            f"{str(mlp_path)!r}, '--inputs', {str(x)!r}, '--cache-dir', {str(cache)!r}, '--json']; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["timings"]["executable"] == "compiled"
    assert doc["warnings"] == [f"ignored the executable {record.name} in the cache: its executable's sha256 does not "
                               f"match its header (damaged); compiling instead."]
