"""The settings JAX and XLA read from the environment as they start, checked before they start in this process.

XLA reads ``XLA_FLAGS`` when it first builds its options (JAX's first compilation or backend), libtpu reads
``LIBTPU_INIT_ARGS`` and the ``TPU_*`` topology variables when its plugin initializes, and both end the process when
they refuse a value (an unknown flag, a value of the wrong type, a file name that names no file): a fatal log line,
or XLA's whole flag table, and exit 1, from native code no Python handler sees. JAX itself reads its ``JAX_*``
settings as ``jax`` is imported and raises ``ValueError`` from deep in its config module for a value it refuses
(``JAX_ENABLE_X64=maybe``), which any caller could take for its own error.

So the command line (``jaxport_cli.environment``) puts an importer ahead of Python's own, which takes ``jax``'s spec
from :func:`jax_spec`: the first ``import jax`` of a command, wherever it happens, first runs
:func:`settings_refusal`, and JAX's module then runs under :func:`setting_refused_by_jax`'s reading of what it
raises. Either refusal is a :class:`StartupRefused`, a
``PlatformError`` (exit 10) naming the variable, before JAX starts in this process.

Knowing what XLA refuses without starting it here takes a child (:func:`_probe`, run as ``sandbox.run`` runs a
check): it imports jaxlib, builds XLA's options (``CompileOptions()``: the parse of ``XLA_FLAGS``) and, where JAX
would start libtpu, loads and initializes the TPU plugin without opening the device (the parse of libtpu's
settings), printing a line after each step, so that a death after the first says which parse refused. A verdict
that the settings passed is remembered in the user's cache (``usercache.write_record``, keyed by the variables'
values, the interpreter, jaxlib and jaxport), so a shell that keeps ``XLA_FLAGS`` set pays the child (about 0.3 s)
once. Without any of these variables set nothing runs and nothing is read: the common path costs nothing.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import json
import os
import re
import sys
from types import ModuleType, TracebackType

from .. import usercache
from .._machine import QUIET_LIBTPU, quiet_cuda, quiet_libtpu
from .._text import visible
from ..errors import PlatformError
from ..jaxprivate import xla
from .sandbox import Limits, run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from typing import Any

#: The variable XLA reads its flags from (a list of ``--flag=value``, or the name of a file holding them).
XLA_FLAGS = "XLA_FLAGS"
#: The variables libtpu reads when its plugin initializes: its flags, and the ``TPU_*`` topology settings it takes
#: as flags (``TPU_PROCESS_BOUNDS`` is its flag ``deepsea_host_bounds``).
LIBTPU_VARIABLES = ("LIBTPU_INIT_ARGS",)
LIBTPU_PREFIX = "TPU_"
#: What the probe prints after each step: jaxlib imported, XLA's flags parsed, libtpu's settings parsed.
_STEPS = ("jaxport-probe: imported", "jaxport-probe: xla", "jaxport-probe: tpu")
#: What the probe prints before JAX's refusal of one of its ``JAX_*`` settings (:func:`setting_refused_by_jax`).
_JAX_REFUSED = "jaxport-probe: refused: "
#: The probe's wall-clock limit: importing jaxlib on a loaded machine takes seconds, never a minute.
_PROBE_SECONDS = 120.0
#: The kind of record (``usercache.read_record``) that settings passed.
_RECORD = "startup"
#: A fatal or error line of XLA's log (``F1206 03:24:09.091562 7826 parse_flags_from_env.cc:234] Unknown flag ...``)
#: or of absl's flag parser (``ERROR: Unknown command line flag 'x'``): the words after the prefix.
_REFUSAL_LINE = re.compile(r"^(?:[EF]\d{4} [\d:.]+\s+\d+ [^\]]*\] |ERROR: )(.+)$")
#: How much of a value and of a reason a message quotes.
_SHOWN = 200


class StartupRefused(PlatformError):
    """JAX, XLA or libtpu refuse a setting of the environment they read as they start (``XLA_FLAGS``,
    ``LIBTPU_INIT_ARGS``, ``JAX_ENABLE_X64``...): the message names the variable and its value."""


def _shown(value: str) -> str:
    text = value if len(value) <= _SHOWN else value[:_SHOWN] + f"... ({len(value)} characters)"
    return visible(repr(text))


def _tpu_settings(environ: dict[str, str], started: bool = False) -> dict[str, str]:
    """libtpu's settings in ``environ``, when JAX would start libtpu here (it is installed, and ``JAX_PLATFORMS``,
    if set, names ``tpu``), or ``started`` (libtpu is started whatever ``JAX_PLATFORMS`` says: to compile for a TPU
    without one); empty otherwise."""
    found = {k: v for k, v in environ.items() if (k in LIBTPU_VARIABLES or k.startswith(LIBTPU_PREFIX))
             and QUIET_LIBTPU.get(k) != v}  # the values jaxport itself sets without a TPU, which libtpu takes
    if not found:
        return {}
    platforms = environ.get("JAX_PLATFORMS", "")
    if not started and platforms and "tpu" not in [p.strip() for p in platforms.split(",")]:
        return {}
    import importlib.util

    try:
        if importlib.util.find_spec("libtpu") is None and not os.path.isfile(environ.get("TPU_LIBRARY_PATH", "")):
            return {}
    except (ImportError, ValueError):
        return {}
    return found


def settings_refusal(environ: dict[str, str] | None = None, *, jax_settings: bool = False,
                     libtpu: bool = False) -> str | None:
    """Why XLA or libtpu would end this process on the settings in ``environ`` (default ``os.environ``), in one
    line naming the variable; None when they take them, when none is set, or when the probe cannot tell (it could
    not import jaxlib: JAX's own start then reports what is wrong). ``jax_settings``: JAX's own ``JAX_*`` settings
    too, by importing JAX in the probe (for a process that will import JAX before it can check them itself: the
    child of ``--isolate``). ``libtpu``: libtpu's settings whatever ``JAX_PLATFORMS`` says (a process about to
    start libtpu itself: to compile for a TPU on a machine without one)."""
    environ = dict(os.environ if environ is None else environ)
    flags = environ.get(XLA_FLAGS, "")
    tpu = _tpu_settings(environ, started=libtpu)
    jax = {k: v for k, v in environ.items() if k.startswith("JAX_")} if jax_settings else {}
    if not flags and not tpu and not jax:
        return None
    settings = {**({XLA_FLAGS: flags} if flags else {}), **tpu, **jax}
    # a value that does not start with '-' names a file of flags, which may change: never remembered
    remembered = not flags or flags.lstrip(" \t").startswith("-")
    digest = hashlib.sha256(json.dumps([sys.executable, settings], sort_keys=True).encode()).hexdigest()
    directory = usercache.default_cache_dir()
    if remembered and usercache.read_record(directory, _RECORD, digest) == "passed":
        return None
    steps = ["tpu"] * bool(tpu) + ["jax"] * bool(jax)
    outcome = run(f"{__name__}:_probe", steps, Limits(wall_seconds=_PROBE_SECONDS), env=environ, light=True)
    said = outcome.stdout.decode("utf-8", "replace").splitlines()
    if _STEPS[0] not in said:
        return None  # jaxlib did not import, or the probe did not run: not the settings' fault as far as we know
    reason = _reason(outcome.stderr.decode("utf-8", "replace"))
    refused_here = _STEPS[1] not in said or (tpu and _STEPS[2] not in said)
    if refused_here and reason is None:
        return None  # it died without a refusal (a limit, a signal): not the settings' fault as far as we know
    if _STEPS[1] not in said:
        return (f"XLA_FLAGS is {_shown(flags)}, which XLA refuses ({reason}) and would end the process on; correct "
                f"the flags or unset XLA_FLAGS.")
    if tpu and _STEPS[2] not in said:
        named = _culprits(tpu, reason or "")
        given = ", ".join(f"{k} is {_shown(tpu[k])}" for k in named)
        return (f"libtpu refuses its settings ({given}): {reason}, and would end the process; correct "
                f"{'it' if len(named) == 1 else 'them'} or unset {', '.join(named)}.")
    refused = [line.removeprefix(_JAX_REFUSED) for line in said if line.startswith(_JAX_REFUSED)]
    if refused:
        return refused[0]
    if outcome.returncode == 0 and remembered:
        usercache.write_record(directory, _RECORD, digest, "passed")
    return None


def _culprits(tpu: dict[str, str], reason: str) -> list[str]:
    """The variables of libtpu's settings that its refusal quotes: a ``TPU_*`` one whose whole value it quotes
    (``Illegal value 'x' specified for flag 'deepsea_host_bounds'``), ``LIBTPU_INIT_ARGS`` when it holds a quoted word
    (``Unknown command line flag 'bogus_flag'``); else ``LIBTPU_INIT_ARGS``, else every one set (a TPU machine sets
    many ``TPU_*`` variables of its own)."""
    quoted = re.findall(r"'([^']+)'", reason)
    # as libtpu's log shows a value: bytes that are no UTF-8 (an undecodable value) read as U+FFFD
    shown = {k: os.fsencode(v).decode("utf-8", "replace") for k, v in tpu.items()}
    named = [k for k, v in sorted(shown.items())
             if v and any(q == v or (k in LIBTPU_VARIABLES and q in v) for q in quoted)]
    return named or [k for k in sorted(tpu) if k in LIBTPU_VARIABLES] or sorted(tpu)


def _reason(stderr: str) -> str | None:
    """XLA's or absl's own words for the refusal: the first error or fatal line of the child's log; None if it has
    none."""
    for line in stderr.splitlines():
        m = _REFUSAL_LINE.match(line.strip())
        if m:
            text = m.group(1).strip().rstrip(".")
            return visible(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")
    return None


def _probe() -> None:
    """Child target of :func:`settings_refusal`: parse the settings as the first compilation and backend of a JAX
    process would, printing a line after each step (arguments: ``tpu`` to initialize libtpu too, ``jax`` to import
    JAX and print its refusal of a ``JAX_*`` setting)."""
    xla.import_client()
    print(_STEPS[0], flush=True)
    xla.parse_flags()  # XLA parses XLA_FLAGS here, once per process
    print(_STEPS[1], flush=True)
    if "tpu" in sys.argv[1:]:
        path = os.environ.get("TPU_LIBRARY_PATH", "")
        if not os.path.isfile(path):
            import libtpu

            path = libtpu.get_library_path()
        xla.start_tpu_plugin(path)  # libtpu parses its flags here, without opening a device
        print(_STEPS[2], flush=True)
    if "jax" in sys.argv[1:]:
        try:
            import jax  # noqa: F401
        except ValueError as e:
            refusal = setting_refused_by_jax(e)
            if refusal is None:
                raise
            print(_JAX_REFUSED + refusal, flush=True)


def setting_refused_by_jax(e: BaseException) -> str | None:
    """What to say when ``e``, raised while ``jax`` was imported, is JAX refusing one of its ``JAX_*`` settings
    (``JAX_ENABLE_X64=maybe``: a ``ValueError`` raised in ``jax/_src/config.py``, whose frame names the variable it
    read); None for any other exception."""
    if not isinstance(e, ValueError):
        return None
    variable = None
    tb: TracebackType | None = e.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.replace("\\", "/").endswith("jax/_src/config.py"):
            names = frame.f_locals
            if isinstance(names.get("varname"), str):  # bool_env, int_env
                variable = names["varname"]
            elif isinstance(names.get("name"), str):  # a setting that reads os.getenv(name.upper())
                variable = names["name"].upper()
        tb = tb.tb_next
    if variable is None or variable not in os.environ:
        return None
    said = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return (f"{variable} is {_shown(os.environ[variable])}, which JAX refuses as it starts ({visible(said[:_SHOWN])}); "
            f"give a value JAX takes or unset {variable}.")


class _SettingsChecked(importlib.abc.Loader):
    """The loader of ``jax`` itself, with JAX's refusal of a ``JAX_*`` setting made a :class:`StartupRefused`."""

    def __init__(self, loader: Any):
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._loader.exec_module(module)
        except ValueError as e:
            refusal = setting_refused_by_jax(e)
            if refusal is None:
                raise
            raise StartupRefused(refusal) from None

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, get_source, is_package, ...
        return getattr(self._loader, name)


_refusal: list[str | None] = []  # settings_refusal's answer, once asked


def jax_spec(path: Sequence[str] | None, target: ModuleType | None, skip: object) -> ModuleSpec | None:
    """The spec of ``jax`` for an importer ahead of Python's own (``skip``, which the command line installs): first
    refuse the settings that would end the process (:func:`settings_refusal`, asked once; the refusal is raised again
    on every later attempt, so that code that catches it cannot then start JAX), then the spec the other importers
    find, with JAX's module run under :class:`_SettingsChecked`. Where libtpu is installed and no TPU is attached,
    its start-up settings are made quiet first (``_machine.quiet_libtpu``), and where JAX's CUDA plugin is installed
    and no GPU (``_machine.quiet_cuda``)."""
    if not _refusal:
        quiet_libtpu()  # libtpu installed to compile for a TPU, and no TPU here: its start-up warnings stay off stderr
        quiet_cuda()  # the same for JAX's CUDA plugin and no GPU here: JAX starts its CPU alone, no plugin traceback
        _refusal.append(settings_refusal())
    if _refusal[0] is not None:
        raise StartupRefused(_refusal[0])
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find("jax", path, target) if finder is not skip and find is not None else None
        if spec is not None:
            if spec.loader is not None:
                spec.loader = _SettingsChecked(spec.loader)
            return spec
    return None


def refusal_in(e: BaseException) -> StartupRefused | None:
    """The :class:`StartupRefused` that ``e`` is, or was raised from or while handling (a caller that wrapped it:
    the user's module imported JAX at ``export``); None if there is none."""
    seen: set[int] = set()
    link: BaseException | None = e
    while link is not None and id(link) not in seen:
        if isinstance(link, StartupRefused):
            return link
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return None
