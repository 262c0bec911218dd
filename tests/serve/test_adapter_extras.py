"""The batch engines' adapters without their extra: ``import jaxport.ray`` (``.beam``, ``.spark``) is a platform error
(exit 10, as every missing extra) naming the ``pip install`` to run, and still an ``ImportError`` for code that guards
an optional import. Each case runs where its engine is not installed (make test); where it is, the adapter imports."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

from jaxport.errors import MissingExtra, PlatformError

CASES = {
    "ray": ("ray", "jaxport.ray needs the optional extra jaxport[ray] (ray[data]), which is not installed (No module "
                   "named 'ray'): pip install 'jaxport[ray]'."),
    "beam": ("apache_beam", "jaxport.beam needs the optional extra jaxport[beam] (apache-beam), which is not installed "
                            "(No module named 'apache_beam'): pip install 'jaxport[beam]'."),
    "spark": ("pyspark", "jaxport.spark needs the optional extra jaxport[spark] (pyspark, pandas, pyarrow), which is "
                         "not installed (No module named 'pyspark'): pip install 'jaxport[spark]'."),
}


@pytest.mark.parametrize("adapter", sorted(CASES))
def test_an_adapter_without_its_extra_says_what_to_install(adapter):
    engine, message = CASES[adapter]
    if importlib.util.find_spec(engine) is not None:
        importlib.import_module(f"jaxport.{adapter}")  # installed: the adapter imports
        return
    with pytest.raises(MissingExtra) as e:
        importlib.import_module(f"jaxport.{adapter}")
    assert str(e.value) == message
    assert isinstance(e.value, PlatformError) and isinstance(e.value, ImportError)
    assert f"jaxport.{adapter}" not in sys.modules  # nothing half-imported is left for a second import to find


def test_a_script_importing_an_adapter_without_its_extra_fails_with_one_line():
    """In a fresh process, as a user's script meets it: the error's last line is the message, not Beam's absence."""
    if importlib.util.find_spec("apache_beam") is not None:
        pytest.skip("apache-beam is installed here")
    res = subprocess.run([sys.executable, "-c", "import jaxport.beam"], capture_output=True, text=True)
    assert res.returncode == 1
    assert res.stderr.splitlines()[-1] == f"jaxport.errors.MissingExtra: {CASES['beam'][1]}"
