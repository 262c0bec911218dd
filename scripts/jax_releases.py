"""Check jaxport's table of JAX releases (``jaxport/artifact/window/releases.py``) against PyPI, and print the rows
it lacks or gets wrong, ready to paste (exit 1 when there is one; exit 0 when it lists every release).

    .venv/bin/python scripts/jax_releases.py                 # reads https://pypi.org/pypi/jax/json
    .venv/bin/python scripts/jax_releases.py --json FILE     # the same document, saved (offline, and for tests)
    .venv/bin/python scripts/jax_releases.py --measure       # the rows measured under the installed JAX

The procedure, each time JAX releases (and with each jaxport release):

1. Run it; add each row it prints to ``RELEASES`` and set ``REVIEWED`` to today.
2. For a new release inside ``SUPPORTED_JAX``: install it in an environment of its own (``python -m venv
   /tmp/jax-new && /tmp/jax-new/bin/pip install -e . jax==VERSION jaxlib==VERSION``) and run ``--measure`` there. It
   prints the ``STABLEHLO`` row (the StableHLO that JAX reads) and the custom calls it guarantees stable beyond or
   short of ``jaxprivate.stable.REVIEWED_STABLE_TARGETS``: review them in JAX's ``jax/_src/export/_export.py``, add them
   to that set and to ``STABLE_TARGETS_ADDED_IN``, and set ``REVIEWED_JAX_VERSION``.
3. Update the README's table ("Supported JAX") and the texts and tests that name the newest release
   (``grep -rn OLD_NEWEST tests specs examples README.md``): the producer-age rules count from it.

A row's date is the upload time (UTC) of the release's earliest file, its Python the oldest its files'
``requires_python`` allows, ``yanked`` whether PyPI marks its files yanked: as ``releases.py`` documents.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jaxport.artifact.window.compat import version_key  # noqa: E402
from jaxport.artifact.window.releases import RELEASES, Release  # noqa: E402

PYPI = "https://pypi.org/pypi/jax/json"
#: A final release's version (0.12.1, 0.9.0.1): pre-releases and development builds are not rows.
FINAL = re.compile(r"\d+(\.\d+){2,3}")


def rows_from_pypi(document: dict) -> dict[str, Release]:
    """Every final JAX release PyPI lists, from the table's first row on, as the table's rows."""
    first = version_key(next(iter(RELEASES)))
    rows = {}
    for version, files in document.get("releases", {}).items():
        if not FINAL.fullmatch(version) or not files or version_key(version) < first:
            continue
        date = min(f["upload_time_iso_8601"] for f in files)[:10]
        pythons = [m.group(1) for f in files if (m := re.search(r">=\s*(3\.\d+)", f.get("requires_python") or ""))]
        python = min(pythons, key=lambda p: int(p.split(".")[1])) if pythons else "3.9"
        rows[version] = Release(date, python, all(f.get("yanked") for f in files))
    return dict(sorted(rows.items(), key=lambda item: version_key(item[0])))


def row_text(version: str, row: Release) -> str:
    yanked = ", yanked=True" if row.yanked else ""
    return f'    "{version}": Release("{row.date}", "{row.python}"{yanked}),'


def differences(pypi: dict[str, Release]) -> list[str]:
    """Lines naming each row the table lacks or gets wrong (empty when it matches PyPI)."""
    out = []
    for version, row in pypi.items():
        have = RELEASES.get(version)
        if have is None:
            out.append(f"missing: {row_text(version, row).strip()}")
        elif tuple(have) != tuple(row):
            out.append(f"differs: {row_text(version, have).strip()}  PyPI: {row_text(version, row).strip()}")
    return out


def measure() -> list[str]:
    """The rows of the installed JAX: its ``STABLEHLO`` row and its guaranteed custom calls against the reviewed
    set."""
    import jax

    from jaxport.artifact.window.payload import stablehlo_dialect
    from jaxport.jaxprivate.stable import guaranteed_stable_custom_calls, reviewed_stable_targets

    version = jax.__version__
    installed, reviewed = guaranteed_stable_custom_calls(), reviewed_stable_targets(version)
    return [f'STABLEHLO row:  "{version}": "{stablehlo_dialect().get_current_version()}",',
            f"custom calls guaranteed stable beyond the reviewed set: {sorted(installed - reviewed) or 'none'}",
            f"reviewed custom calls this JAX does not guarantee: {sorted(reviewed - installed) or 'none'}"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="FILE", help="PyPI's JSON document of jax, saved (default: read PyPI)")
    parser.add_argument("--measure", action="store_true", help="print the rows measured under the installed JAX")
    args = parser.parse_args(argv)
    if args.measure:
        print("\n".join(measure()))
        return 0
    if args.json:
        document = json.loads(Path(args.json).read_text())
    else:
        with urllib.request.urlopen(PYPI, timeout=60) as response:  # noqa: S310 - PyPI's fixed https address
            document = json.load(response)
    pypi = rows_from_pypi(document)
    found = differences(pypi)
    if found:
        print("\n".join(found))
        print("Add or correct these rows in jaxport/artifact/window/releases.py, then set REVIEWED to today (this "
              "script's docstring gives the rest of the procedure).")
        return 1
    newest = max(pypi, key=lambda v: (pypi[v].date, version_key(v)))
    print(f"The table lists every JAX release on PyPI from {next(iter(RELEASES))} on ({len(pypi)}; the newest: "
          f"{newest}, {pypi[newest].date}).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
