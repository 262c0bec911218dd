"""Executables that travel in the user's cache directory: compiled once (on any machine, for a target: ``jaxport
warmup --target``), used by every later process on the target without compiling.

A record is one file in the cache directory, ``jaxport-executable-<program>-<inputs>-<machine>.bin``: the bytes
:data:`MAGIC`, the length of a JSON header (8 bytes, little-endian), the header, then the executable's native bytes
as XLA serializes them. The header holds the record's key, everything that decides whether the executable can run
for a call: the program (its payload's sha256, from the manifest), the input shapes and dtypes, and the compilation's
:class:`~jaxport.jaxprivate.facts.Facts` (the StableHLO given to XLA, the compile options, the platform and its
version, libtpu's build on a TPU, the device kinds and topology, the XLA flags, the jaxlib); and the executable's
size and sha256, its memory needs and compile time. No pickle: the trees around the program come from the manifest,
and JAX builds its own call around the executable (``jaxprivate.compiler.steered``).

Trust model: an executable is native code, so it is read only as the rest of the cache is (``usercache``): from a
directory of this user's that no one else can write, a regular file of this user's that no one else can write, never
through a symbolic link; its sha256 is checked before XLA reads it. A record that fails any of these, or whose
header does not parse, is ignored with a note and the program is compiled. A record whose key differs from this
machine's (another jaxlib, libtpu or chip, another lowering) is not used: the program is compiled, with one note
naming what differed. Records never enter an artifact.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import usercache
from .._machine import GpuFacts
from .._version import __version__
from ..jaxprivate.facts import Facts, options_difference
from ..usercache import untrusted_reason, write_cache_file
from .backend import ShapeKey

#: The first bytes of a record.
MAGIC = b"JAXPORT-EXECUTABLE/1\n"
FORMAT = "jaxport-executable/1"
#: The largest header read.
MAX_HEADER_BYTES = 1 << 16
#: The largest executable read (a large model's is tens of MB).
MAX_EXECUTABLE_BYTES = 16 << 30
_LENGTH = struct.Struct("<Q")
PREFIX = "jaxport-executable-"


def inputs_digest(key: ShapeKey) -> str:
    """sha256 of an input shape signature, as record names use it."""
    text = json.dumps([[list(shape), dtype] for shape, dtype in key], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def machine_digest(facts: Facts) -> str:
    """sha256 of the facts that describe the machine and software (not the program): records of one program for
    several machines or jaxlibs sit side by side."""
    data = {k: v for k, v in facts.to_json().items() if k not in ("module", "options", "options_proto")}
    if facts.gpu is not None:  # a GPU's identity alone: a compile without the GPU and the GPU itself name one file
        data = {"platform": "gpu", "devices": len(facts.device_kinds), "flags": facts.flags, "jaxlib": facts.jaxlib,
                "gpu": facts.gpu.identity()}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def record_path(directory: Path, program: str, key: ShapeKey, facts: Facts) -> Path:
    return directory / f"{PREFIX}{_hex(program)[:24]}-{inputs_digest(key)[:16]}-{machine_digest(facts)[:16]}.bin"


def _hex(text: str) -> str:
    return "".join(c for c in text.lower() if c in "0123456789abcdef") or "0"


@dataclass(frozen=True)
class Record:
    """A record's header and executable bytes."""

    path: Path
    header: dict[str, Any]
    facts: Facts
    blob: bytes
    #: The sha256 of the record's file as read (what a vouch names, ``artifact.signing.vouch``).
    sha256: str = ""


def write_record(directory: Path, program: str, key: ShapeKey, facts: Facts, blob: bytes,
                 about: dict[str, Any]) -> Path:
    """Write the record of an executable into ``directory`` (created with mode 0700 if needed), atomically;
    ``about`` adds what the header says beyond the key (target, memory, compile time). Returns its path; raises
    ``OutputError`` when it cannot be written or the directory is one others can write."""
    header = {"format": FORMAT, "program": program, "inputs": [[list(s), d] for s, d in key],
              "facts": facts.to_json(), "size": len(blob), "sha256": hashlib.sha256(blob).hexdigest(),
              "jaxport": __version__, **about}
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    path = record_path(directory, program, key, facts)
    write_cache_file(directory, path, [MAGIC, _LENGTH.pack(len(raw)), raw, blob])
    return path


def read_record(path: Path, blob: bool = True) -> tuple[Record | None, str | None]:
    """The record in ``path``, or None and why it is ignored (see the module docstring's trust model); without
    ``blob``, its header alone (the executable's bytes are neither read nor checked: ``Record.blob`` is empty, and
    ``Record.sha256`` is the header's bytes' digest only).

    Memory stays bounded whatever the header claims: the header's size must be the file's, and the whole file is
    hashed in chunks (the record's sha256, and the executable's against its header) before the executable's bytes
    are held; they are then read again and must hash as before (a file rewritten meanwhile is ignored), and an
    executable this process has no memory for is ignored too."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        return None, f"it cannot be opened ({e.strerror or e})"
    try:
        return _read_open(fd, path, blob)
    except OSError as e:
        return None, f"it cannot be read ({e.strerror or e})"
    finally:
        os.close(fd)


def _read_open(fd: int, path: Path, blob: bool) -> tuple[Record | None, str | None]:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        return None, "it is not a regular file"
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return None, f"it belongs to another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None, f"others can write it (mode {stat.S_IMODE(info.st_mode):o})"
    head = os.pread(fd, len(MAGIC) + _LENGTH.size, 0)
    if len(head) < len(MAGIC) + _LENGTH.size or not head.startswith(MAGIC):
        return None, "it is not a jaxport executable record"
    (length,) = _LENGTH.unpack_from(head, len(MAGIC))
    start = len(head)
    if length > MAX_HEADER_BYTES or start + length > info.st_size:
        return None, "its header is damaged"
    raw = os.pread(fd, length, start)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, "its header is damaged"
    facts = Facts.from_json(header.get("facts")) if isinstance(header, dict) else None
    size = header.get("size") if isinstance(header, dict) else None
    if facts is None or header.get("format") != FORMAT or type(size) is not int or size < 0 or \
            not isinstance(header.get("sha256"), str):
        return None, "its header is damaged"
    if size > MAX_EXECUTABLE_BYTES or start + length + size != info.st_size:
        return None, "its size does not match its header (truncated or damaged)"
    if not blob:
        return Record(path, header, facts, b"", hashlib.sha256(head + raw).hexdigest()), None
    whole, executable = hashlib.sha256(head + raw), hashlib.sha256()
    for chunk in _chunks(fd, start + length, size):
        whole.update(chunk)
        executable.update(chunk)
    if executable.hexdigest() != header["sha256"]:
        return None, "its executable's sha256 does not match its header (damaged)"
    try:
        data = _read_exactly(fd, start + length, size)
    except MemoryError:
        return None, f"its executable of {size} bytes does not fit in this process's memory"
    if data is None or hashlib.sha256(data).hexdigest() != header["sha256"]:
        return None, "it changed while it was read"
    return Record(path, header, facts, data, whole.hexdigest()), None


def _chunks(fd: int, offset: int, size: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    """``size`` bytes of ``fd`` from ``offset``, a chunk at a time (a file cut short ends them early)."""
    done = 0
    while done < size:
        data = os.pread(fd, min(chunk, size - done), offset + done)
        if not data:
            return
        done += len(data)
        yield data


def _read_exactly(fd: int, offset: int, size: int) -> bytes | None:
    out = bytearray(size)
    view = memoryview(out)
    done = 0
    while done < size:
        n = os.preadv(fd, [view[done:done + (1 << 30)]], offset + done)
        if n <= 0:
            return None
        done += n
    return bytes(out)


def matching(header: dict[str, Any], program: str, key: ShapeKey) -> bool:
    """Whether a record's header is about ``program`` at the input signature ``key``."""
    return header.get("program") == program and header.get("inputs") == [[list(s), d] for s, d in key]


#: What each fact is called in a note about a record that does not match.
_FACT_NAMES = {"module": "the program as lowered here (another jaxport or JAX lowered it)",
               "options": "XLA's compile options", "platform": "platform", "platform_version": "platform build",
               "device_kinds": "device kind", "topology": "device topology", "flags": "XLA flags",
               "jaxlib": "jaxlib", "machine": "host processor", "gpu": "GPU",
               "gpu.compute_capability": "compute capability", "gpu.device": "GPU", "gpu.cores": "multiprocessors",
               "gpu.plugin": "CUDA plugin", "gpu.cuda_runtime": "CUDA runtime", "gpu.cudnn": "cuDNN",
               "gpu.driver": "CUDA driver", "gpu.ptxas": "cubins written by ptxas"}


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        value = ", ".join(sorted(set(map(str, value))))
    text = " ".join(str(value).split()) or "none"
    return text if len(text) <= 80 else text[:77] + "..."


def difference_text(built: Facts, here: Facts) -> str:
    """What differs between the facts a record was built with and this machine's, for a note."""
    parts = []
    for name in built.differences(here):
        if name == "options":
            which = options_difference(built.options_proto, here.options_proto)
            parts.append(f"{_FACT_NAMES[name]} differ" + (f" ({', '.join(which[:4])})" if which else ""))
        elif name in ("module", "topology"):
            parts.append(f"{_FACT_NAMES[name]} differs")
        elif name == "device_kinds" and built.gpu is not None:
            parts.append(f"devices {len(built.device_kinds)} (here: {len(here.device_kinds)})")
        elif name.startswith("gpu.") and built.gpu is not None and here.gpu is not None:
            parts.append(_gpu_difference(name[4:], built.gpu, here.gpu))
        else:
            parts.append(f"{_FACT_NAMES[name]} {_shown(getattr(built, name))} (here: {_shown(getattr(here, name))})")
    return "; ".join(parts)


def _gpu_difference(name: str, built: GpuFacts, here: GpuFacts) -> str:
    """One GPU fact that keeps a record from running here, with both values: a CUDA or cuDNN version the build
    assumed newer than this machine's (the most common failure on a GPU), another device, another plugin."""
    label = _FACT_NAMES[f"gpu.{name}"]
    if name == "ptxas":
        return f"{label} {built.ptxas}, newer than the driver here (CUDA {_shown(here.driver)})"
    value, mine = _shown(getattr(built, name)), _shown(getattr(here, name))
    if name in ("cuda_runtime", "cudnn", "driver"):
        return f"{label} {value} assumed by the build (here: {mine})"
    return f"{label} {value} (here: {mine})"


@dataclass
class Shipped:
    """The executables a cache directory holds for one program's input signature, offered to one compilation
    (``jaxprivate.compiler.steered``): the first record whose key matches this machine's is deserialized instead of
    compiling. After the compilation, ``used`` says whether one was, ``vouched_by`` who vouched for it (under a
    required signature), and ``notes`` why none was. Under a required signature for the program
    (``usercache.vouching_required``) a record is used only if a trusted signer vouched for its bytes, and the
    compilation does not read JAX's persistent cache (``persistent`` is False)."""

    candidates: list[Path]
    program: str
    key: ShapeKey
    used: Path | None = None
    vouched_by: str | None = None
    notes: list[str] = field(default_factory=list)
    persistent: bool = True

    def __call__(self, facts: Facts, load: Callable[[bytes], Any]) -> Any:
        if not self.candidates:
            return None
        exact = record_path(self.candidates[0].parent, self.program, self.key, facts)
        if exact in self.candidates:
            record, why = read_record(exact)
            if record is None:
                self.notes.append(f"ignored the executable {exact.name} in the cache: {why}; compiling instead.")
            elif matching(record.header, self.program, self.key) and record.facts.matches(facts):
                allowed, signer = usercache.vouched(self.program, exact, record.sha256)
                self.notes.extend(usercache.vouching_notes(self.program))  # vouches that did not hold
                if not allowed:
                    self.notes.append(usercache.unvouched(self.program, exact))
                    return None
                try:
                    executable = load(record.blob)
                except Exception as e:  # noqa: BLE001 - XLA's own refusal of the bytes
                    text = " ".join(str(e).split())[:300] or type(e).__name__
                    self.notes.append(f"ignored the executable {exact.name} in the cache: XLA cannot load it "
                                      f"({text}); compiling instead.")
                else:
                    self.used, self.vouched_by = exact, signer
                    return executable
            elif matching(record.header, self.program, self.key):
                self._near(record.facts, facts)
                return None
        for path in self.candidates:
            if path == exact:
                continue
            record, _ = read_record(path, blob=False)
            if record is not None and matching(record.header, self.program, self.key):
                self._near(record.facts, facts)
                break
        return None

    def _near(self, built: Facts, here: Facts) -> None:
        self.notes.append(f"the cache holds an executable of this program and shape built for another machine or "
                          f"software ({difference_text(built, here)}); compiling here instead (jaxport warmup "
                          f"--target builds one for this machine).")


def program_prefix(program: str) -> str:
    """The start of the names of every record of the program of sha256 ``program``."""
    return f"{PREFIX}{_hex(program)[:24]}-"


def shipped(directory: Path | None, program: str | None, key: ShapeKey) -> Shipped | None:
    """The records ``directory`` holds for ``program`` (a payload's sha256) at the input signature ``key``, to offer
    a compilation; None when there are none (or the directory is one others can write: nothing native is read from
    it), so that a compilation without shipped executables costs a directory listing at most. Under a required
    signature for the program, always an offer (perhaps of nothing), which keeps the compilation off JAX's
    persistent cache."""
    signed = usercache.vouching_required(program)
    if program is None or (directory is None and not signed):
        return None
    names: list[str] = []
    try:
        if directory is not None and untrusted_reason(directory) is None:
            prefix = f"{program_prefix(program)}{inputs_digest(key)[:16]}-"
            names = sorted(n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(".bin"))
    except (OSError, ValueError):
        names = []
    if not names and not signed:
        return None
    assert directory is not None or not names
    return Shipped([Path(directory) / n for n in names] if directory is not None else [], program, key,
                   persistent=not signed)
