"""`make test-setup`: the test tools leave the JAX that `make demo` installed (issue 57: the test extra once pulled
libtpu, which PyPI did not have for the newest JAX, and pip quietly downgraded the user's JAX to one it had).

    PYTHON scripts/same_jax.py record FILE     # the JAX packages PYTHON's environment holds, written to FILE
    PYTHON scripts/same_jax.py compare FILE    # exit 1 unless they are still those of FILE, and unless installing
                                               # the test extra again would change none of them (pip's dry run)

Run with the environment's own Python. The dry run makes the check meaningful where the test tools were installed
before (nothing is installed then); it asks the package index, as the install does.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The packages that make up an environment's JAX: what no test tool may add, remove or change.
JAX_PACKAGES = ("jax", "jaxlib", "libtpu", "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt",
                "jax-cuda13-pjrt")


def installed() -> dict[str, str]:
    """The JAX packages installed here, by name, with their versions."""
    found = {}
    for name in JAX_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def would_change(extra: str = "test") -> dict[str, str]:
    """The JAX packages that ``pip install -e '.[EXTRA]'`` would install here (name: version); empty when none."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--report", str(report),
                        "-e", f"{REPO}[{extra}]"], check=True, cwd=REPO)
        planned = json.loads(report.read_text()).get("install", [])
    names = {p["metadata"]["name"].lower().replace("_", "-"): p["metadata"]["version"] for p in planned}
    return {n: v for n, v in names.items() if n in JAX_PACKAGES}


def _text(packages: dict[str, str]) -> str:
    return ", ".join(f"{n} {v}" for n, v in sorted(packages.items())) or "none"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[1])
    if argv[0] == "record":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(installed(), sort_keys=True) + "\n")
        return 0
    before, now = json.loads(path.read_text()), installed()
    if now != before:
        print(f"error: the test tools changed the environment's JAX: {_text(before)} after make demo, {_text(now)} "
              f"now. Something in the extra 'test' pins JAX (the extra 'tpu' did: libtpu for the newest JAX was not "
              f"on PyPI); keep it out of 'test' and give it an environment of its own.", file=sys.stderr)
        return 1
    planned = would_change()
    if planned:
        print(f"error: installing the extra 'test' again would change the environment's JAX ({_text(now)}) to "
              f"{_text(planned)}; keep what pins JAX out of the extra 'test'.", file=sys.stderr)
        return 1
    print(f"jaxport: make demo then make test kept the environment's JAX: {_text(now)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
