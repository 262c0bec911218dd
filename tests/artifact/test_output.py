"""Where an artifact is written (``artifact.output``), the rule of export, import, rebind and upgrade: a directory
means a file in it, the sidecar sits beside the artifact, and neither is ever an input."""

from __future__ import annotations

import os
import re

import pytest

from jaxport.artifact.output import artifact_output
from jaxport.errors import OutputError

REFUSED = ("{out}: is the artifact being {being}; {command} writes a new artifact and never replaces its input. "
           "Choose another output path (and rename it over the old artifact afterwards if you mean to replace it).")


def test_a_directory_means_the_name_in_it_and_the_sidecar_sits_beside_the_artifact(tmp_path):
    (tmp_path / "out").mkdir()
    outputs = artifact_output(tmp_path / "out", "mlp.jaxport", manifest=True)
    assert outputs.path == tmp_path / "out" / "mlp.jaxport"
    assert outputs.sidecar == tmp_path / "out" / "mlp.jaxport.manifest.json"
    file = artifact_output(tmp_path / "a.bin", "mlp.jaxport", manifest=False)
    assert (file.path, file.sidecar) == (tmp_path / "a.bin", None)


@pytest.mark.parametrize(("command", "being"), [("rebind", "rebound"), ("upgrade", "upgraded")])
def test_the_source_artifact_is_refused_as_the_output_through_a_link_and_a_directory_too(tmp_path, command, being):
    source = tmp_path / "a.jaxport"
    source.write_bytes(b"old")
    os.symlink(source, tmp_path / "link.jaxport")
    for output, out in ((source, source), (tmp_path / "link.jaxport", tmp_path / "link.jaxport"),
                        (tmp_path, source)):
        with pytest.raises(OutputError, match=re.escape(REFUSED.format(out=out, being=being, command=command))):
            artifact_output(output, source.name, manifest=True, source=source, command=command)
    assert source.read_bytes() == b"old"
    assert artifact_output(tmp_path / "b.jaxport", source.name, manifest=True, source=source,
                           command=command).path == tmp_path / "b.jaxport"


def test_check_refuses_an_input_as_the_artifact_or_its_sidecar_and_write_sidecar_writes_the_manifest(tmp_path):
    read = tmp_path / "params.npz"
    read.write_bytes(b"weights")
    same = re.escape(f"is the same file as the input {read}")
    with pytest.raises(OutputError, match=same):  # the artifact
        artifact_output(read, "x.jaxport", manifest=True).check([read])
    os.symlink(read, tmp_path / "params.manifest.json")
    with pytest.raises(OutputError, match=same):  # its sidecar, a link to the input
        artifact_output(tmp_path / "params", "x.jaxport", manifest=True).check([read])
    outputs = artifact_output(tmp_path / "m.jaxport", "x.jaxport", manifest=True)
    outputs.check([read])
    outputs.write_sidecar(b"{}", [read])
    assert (tmp_path / "m.jaxport.manifest.json").read_bytes() == b"{}"
    artifact_output(tmp_path / "n.jaxport", "x.jaxport", manifest=False).write_sidecar(b"{}", [read])
    assert not (tmp_path / "n.jaxport.manifest.json").exists()
    assert read.read_bytes() == b"weights"
