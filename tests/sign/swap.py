"""The artifacts and the attacker of the swap tests (tests/sign/test_swap.py) and of the corpus class
``signature-swap`` (tests/hostile/signature_classes.py): a signed artifact ``m.jaxport`` whose function doubles its
input, unsigned ones that would answer otherwise, and an attacker who renames, links or rewrites files at a chosen
event of a command: an opening of the artifact's path, or a step of the signature check
(``jaxport.artifact.signing.check.step``).

An attacker here can write the artifact's directory (rename a file over the artifact, hard-link one there) and, for
``rewrite``, the artifact file itself; not the trusted key, nor the signer's private key.
"""

from __future__ import annotations

import builtins
import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The signed artifact's name: its bundle signs this name.
SIGNED = "m.jaxport"

MODEL = """\
import numpy as np

K = {"k": np.float32(2.0)}
K5 = {"k": np.float32(5.0)}
KK = {"kk": np.float32(2.0)}


def double(params, x):
    return x * params["k"]


def triple(params, x):
    return x * params["k"] * 1.5


def renamed(params, x):
    return x * params["kk"] * 1.5
"""
#: The same module with other weights: ``double`` bound from it computes x * 3, in a file of the signed one's size.
MODEL_K3 = MODEL.replace('K = {"k": np.float32(2.0)}', 'K = {"k": np.float32(3.0)}')
SPEC = 'jaxport: 1\ndims: {{{dim}: {{min: 1, max: 64}}}}\nargs:\n  - bind: model.py:{weights}\n  - "f32[{dim}]"\n'


def build(directory: Path) -> dict[str, bytes]:
    """Export and sign the artifacts in ``directory`` (JAX in this process); their bytes by role:

    - ``signed``: ``double`` (x * 2, weights ``model.py:K``), signed by ``ci.pem``: ``signature`` is its bundle;
    - ``program``: ``triple`` (x * 3), the same signature and weights, another program; unsigned;
    - ``weights``: ``double`` with k = 3 (x * 3), the same program and size as ``signed``, other weights; unsigned;
    - ``stranger``: ``renamed`` over ``f32[m]`` with weights ``kk``: every command given ``signed``'s arguments fails
      on it otherwise than a refusal of its signature (``--dim n``, ``--function double``, ``--bind
      params=model.py:K5``, an ``--expect`` of x * 2), so that a run of it shows in an exit code;
    - ``ci.pub``, ``other.pub``: the trusted key and another; ``model.py``: the module (``K5`` rebinds).
    """
    import jaxport

    from .keys import key_pair

    cwd = os.getcwd()
    out: dict[str, bytes] = {}
    try:
        for role, model, entry, weights, dim in (("signed", MODEL, "double", "K", "n"),
                                                 ("program", MODEL, "triple", "K", "n"),
                                                 ("weights", MODEL_K3, "double", "K", "n"),
                                                 ("stranger", MODEL, "renamed", "KK", "m")):
            d = directory / role
            d.mkdir(parents=True)
            os.chdir(d)
            (d / "model.py").write_text(model)
            (d / "spec.yaml").write_text(SPEC.format(dim=dim, weights=weights))
            art = jaxport.export(f"model.py:{entry}", "spec.yaml", output=d / SIGNED, write_manifest=False).path
            out[role] = art.read_bytes()
        ci, other = key_pair(directory, "ci"), key_pair(directory, "other")
        out["signature"] = jaxport.sign(directory / "signed" / SIGNED, ci[0]).signature.read_bytes()
        out["ci.pub"], out["other.pub"] = ci[1].read_bytes(), other[1].read_bytes()
        out["model.py"] = MODEL.encode()
    finally:
        os.chdir(cwd)
    assert len(out["weights"]) == len(out["signed"]), "the weights variant must have the signed file's size"
    return out


def lay_out(files: dict[str, bytes], directory: Path) -> Path:
    """The scene in ``directory``: ``m.jaxport`` (signed) and its bundle, the unsigned ones as ``program.jaxport``,
    ``weights.jaxport``, ``stranger.jaxport``, a copy of the signed one as ``signed.jaxport``, the keys, model.py, and
    ``x.npy`` (1, 2, 3) with ``want.npy``, the signed program's outputs for it. Returns the artifact's path."""
    import numpy as np

    (directory / SIGNED).write_bytes(files["signed"])
    (directory / f"{SIGNED}.sig").write_bytes(files["signature"])
    for role in ("signed", "program", "weights", "stranger"):
        (directory / f"{role}.jaxport").write_bytes(files[role])
    for name in ("ci.pub", "other.pub", "model.py"):
        (directory / name).write_bytes(files[name])
    np.save(directory / "x.npy", np.array([1, 2, 3], np.float32))
    np.save(directory / "want.npy", np.array([2, 4, 6], np.float32))
    return directory / SIGNED


# --- what the attacker does ---------------------------------------------------------------------------------------


def _replace_with(path: Path, source: Path) -> None:
    """Rename a copy of ``source`` over ``path`` (what someone who can write the directory does)."""
    tmp = path.with_name(f".swap-{os.getpid()}")
    shutil.copyfile(source, tmp)
    os.replace(tmp, path)


def _link_over(path: Path, source: Path) -> None:
    """Hard-link ``source`` and rename the link over ``path``: the artifact's name, the attacker's file."""
    tmp = path.with_name(f".link-{os.getpid()}")
    os.link(source, tmp)
    os.replace(tmp, path)


def _rewrite(path: Path, source: Path) -> None:
    """Write ``source``'s bytes into ``path`` in place (the same file, for someone who may write it)."""
    data = source.read_bytes()
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate()


#: What an attacker does at the chosen event, by name: (what to do at the event, what to do at the next one).
PLANS: dict[str, tuple[Callable[[Path, Path], None], Callable[[Path, Path], None] | None]] = {
    "renamed": (_replace_with, None),  # an unsigned artifact renamed over the signed one
    "renamed-and-back": (_replace_with, _replace_with),  # ... and the signed one renamed back at the next event
    "linked": (_link_over, None),  # a hard link to the unsigned artifact renamed over the signed one
    "rewritten": (_rewrite, None),  # the file itself rewritten in place
}


class Attacker:
    """Counts the events of a command run in this process (an opening of ``path`` by ``os.open`` or ``open``, a step
    of the signature check) and carries out ``plan`` at event ``at``: the unsigned ``evil`` put in place, and, for
    ``renamed-and-back``, the signed ``good`` put back at the next event. ``events`` lists what happened."""

    def __init__(self, path: Path, monkeypatch: Any, plan: str | None = None, at: int = -1,
                 evil: Path | None = None, good: Path | None = None):
        import jaxport.artifact.signing.check as signature_check

        self.path = Path(os.path.abspath(path))
        self.events: list[str] = []
        self.acts: dict[int, Callable[[], None]] = {}
        if plan is not None:
            first, then = PLANS[plan]
            assert evil is not None
            self.acts[at] = lambda: first(self.path, evil)
            if then is not None:
                assert good is not None
                self.acts[at + 1] = lambda: then(self.path, good)
        self._busy = False
        real_os_open, real_open = os.open, builtins.open

        def os_opening(file: Any, *args: Any, **kwargs: Any) -> int:
            self._opening(file)
            return real_os_open(file, *args, **kwargs)

        def opening(file: Any, *args: Any, **kwargs: Any) -> Any:
            self._opening(file)
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(os, "open", os_opening)
        monkeypatch.setattr(builtins, "open", opening)
        monkeypatch.setattr(io, "open", opening)
        monkeypatch.setattr(signature_check, "step", lambda step, artifact: self.event(f"after {step}"), raising=False)

    def _opening(self, file: Any) -> None:
        if self._busy or not isinstance(file, (str, bytes, os.PathLike)):
            return
        try:
            same = os.path.abspath(os.fsdecode(file)) == str(self.path)
        except (TypeError, ValueError):
            same = False
        if same:
            self.event("open")

    def event(self, name: str) -> None:
        k = len(self.events)
        self.events.append(name)
        act = self.acts.get(k)
        if act is not None:
            self._busy = True
            try:
                act()
            finally:
                self._busy = False


def hook(plan: str, at: int, evil: str = "stranger.jaxport", good: str = "signed.jaxport") -> str:
    """The corpus's hook (``tests.hostile.run.HOOKS``) that makes a real ``jaxport`` process meet the
    :class:`Attacker` of ``plan`` at event ``at``, with ``evil`` and ``good`` in its working directory."""
    return (f"import sys\nsys.path.insert(0, {str(Path(__file__).parents[2])!r})\n"
            f"from tests.sign.swap import install\ninstall({plan!r}, {at}, {evil!r}, {good!r})\n")


class _ForGood:
    """What :func:`install` patches with: ``setattr`` for the rest of the process (a monkeypatch never undone)."""

    @staticmethod
    def setattr(target: Any, name: str, value: Any, raising: bool = True) -> None:
        setattr(target, name, value)


def install(plan: str, at: int, evil: str, good: str) -> None:
    """:func:`hook`'s body: an :class:`Attacker` on ``m.jaxport`` of the working directory, for the whole process."""
    Attacker(Path(SIGNED), _ForGood(), plan, at, Path(evil).absolute(), Path(good).absolute())
