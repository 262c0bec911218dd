"""A change to what a manifest can hold is a format version: the manifest's records (``jaxport.artifact.model``) and
its JSON schema are fingerprinted, and the fingerprint is recorded here beside the version that defined it. A
record or schema change without a new version fails :func:`test_the_records_are_those_of_the_newest_version`, whose
message says what to do (specs/FORMAT.md, "Changing the format"); as torch's serde checks its schema against its
version."""

from __future__ import annotations

import hashlib
import json
import re

from jaxport.artifact import manifest, model
from tests.support import REPO

SCHEMA = REPO / "specs" / "schemas" / "manifest.schema.json"
FORMAT_MD = REPO / "specs" / "FORMAT.md"

#: The fingerprint of the records and schema of each format version, oldest first. 1.0's was not recorded when it
#: was released (this test came with 1.1); a new version adds its line.
RECORDED = {"1.0": None, "1.1": "5c79f4aa03d6c6b8", "1.2": "0f07c25ad0247478", "1.3": "d9b688a33fcce1da"}


def fingerprint() -> str:
    """sha256 (16 hex digits) over every record of ``jaxport.artifact.model`` (its name, and each field's name and
    annotation, in order) and the canonical JSON of the manifest's schema."""
    records = [(name, [(f, str(a)) for f, a in vars(cls)["__annotations__"].items()])
               for name, cls in vars(model).items()
               if isinstance(cls, type) and cls.__module__ == model.__name__ and "__annotations__" in vars(cls)]
    schema = json.loads(SCHEMA.read_text())
    text = json.dumps({"records": records, "schema": schema}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_the_records_are_those_of_the_newest_version():
    newest = list(RECORDED)[-1]
    assert newest == manifest.FORMAT_VERSION, (
        f"FORMAT_VERSION is {manifest.FORMAT_VERSION}, the newest version recorded here {newest}: record the new "
        f"version's fingerprint in RECORDED")
    got = fingerprint()
    assert got == RECORDED[newest], (
        f"the manifest's records or schema changed (fingerprint {got}, format {newest} recorded "
        f"{RECORDED[newest]}): a change to what an artifact holds is a new format version. Follow specs/FORMAT.md, "
        f"'Changing the format': bump FORMAT_VERSION with a history line in jaxport/artifact/versions.py and "
        f"specs/FORMAT.md, then add '\"<version>\": \"{got}\"' to RECORDED in tests/artifact/test_format_history.py")


def test_every_recorded_version_has_its_history_line():
    code = (REPO / "jaxport" / "artifact" / "versions.py").read_text()
    doc = FORMAT_MD.read_text()
    for version in RECORDED:
        assert re.search(rf"^#:\s+{re.escape(version)} \(\d{{4}}-\d\d-\d\d\): ", code, re.M), version
        assert re.search(rf"^- \*\*{re.escape(version)}\*\* \(\d{{4}}-\d\d-\d\d\): ", doc, re.M), version
    assert doc.startswith(f"# The jaxport artifact format, version {manifest.FORMAT_VERSION}\n")


def test_an_artifact_is_labelled_with_the_oldest_version_its_fields_need():
    plain = model.Producer("0.1.0", "0.12.0", "0.12.0")
    m = model.Manifest("1.1", plain, {}, {}, model.Metadata(), None, None, "jaxport")
    assert manifest.written_version(m) == "1.0"
    for_older = model.replace(m, producer=model.replace(plain, for_jax="0.10.2"))
    assert manifest.written_version(for_older) == "1.1"
    upgraded = model.replace(m, producer=model.replace(
        plain, upgraded_from=model.UpgradedFrom("0.1.0", "0.10.2", "0.10.2", None, "ab" * 32)))
    assert manifest.written_version(upgraded) == "1.1"


def test_export_writes_1_0_and_an_export_for_an_older_jax_1_1(mlp_path, tmp_path):
    import jaxport

    with jaxport.open_artifact(mlp_path) as art:
        assert art.model.format_version == "1.0"
    older = jaxport.export("examples/mlp/model.py:predict", "examples/mlp/spec.yaml", output=tmp_path / "o.jaxport",
                           for_jax="0.9.1", root=REPO)
    with jaxport.open_artifact(older.path) as art:
        assert (art.model.format_version, art.model.producer.for_jax) == ("1.1", "0.9.1")


def test_an_artifact_with_a_sub_byte_dtype_is_1_3_and_only_then():
    plain = model.Producer("0.1.0", "0.12.0", "0.12.0")
    tensor = model.StoredTensor("int4", (8, 5), 0, 20, "ab" * 32)
    m = model.Manifest("1.3", plain, {}, {}, model.Metadata(), None, model.Weights("weights.bin", {"w": tensor}),
                       "jaxport")
    assert manifest.written_version(m) == "1.3"
    assert manifest.written_version(model.replace(m, weights=model.Weights(
        "weights.bin", {"w": model.replace(tensor, dtype="int8", nbytes=40)}))) == "1.0"
