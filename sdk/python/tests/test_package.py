"""What a user installs: the wheel depends on nothing and imports nothing
outside the standard library, and it is what these tests exercise."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import arbiter

# Imports every module of the package, then lists the top-level modules
# that this loaded and that are neither the standard library's nor arbiter
# itself (the interpreter's start-up, site's .pth files, loads its own).
SCAN = r"""
import importlib, json, pkgutil, sys
before = set(sys.modules)
import arbiter
for m in pkgutil.walk_packages(arbiter.__path__, "arbiter."):
    importlib.import_module(m.name)
from importlib import metadata
try:
    requires = metadata.requires("arbiter-ledger")
except metadata.PackageNotFoundError:  # run from the source tree
    requires = None
loaded = set(sys.modules) - before
outside = sorted({name.split(".")[0] for name in loaded} - set(sys.stdlib_module_names) - {"arbiter"})
print(json.dumps({"outside": outside, "loaded": len(loaded), "file": arbiter.__file__,
                  "requires": requires}))
"""


def _scan(python: str) -> dict:
    import json

    out = subprocess.run([python, "-c", SCAN], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_the_wheel_imports_only_the_standard_library(tmp_path: Path) -> None:
    wheel = os.environ.get("ARBITER_PY_WHEEL")
    python = sys.executable
    if wheel:
        # An environment with the wheel alone, installed without looking at
        # the index: a dependency would fail to install or to import.
        venv.create(tmp_path / "bare", with_pip=True)
        python = str(tmp_path / "bare" / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check", wheel],
                       check=True)
    got = _scan(python)
    assert got["loaded"] > 10  # the scan saw the package's imports
    assert got["outside"] == []
    assert not got["requires"]
    if wheel:
        assert "site-packages" in got["file"]


def test_tests_run_against_the_installed_wheel() -> None:
    if os.environ.get("ARBITER_PY_WHEEL"):
        assert "site-packages" in arbiter.__file__, arbiter.__file__
    assert (Path(arbiter.__file__).parent / "py.typed").exists()
