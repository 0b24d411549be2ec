"""What a user installs: the wheel depends on nothing and imports nothing
outside the standard library, and it is what these tests exercise."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Optional

import pytest

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


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Optional[str]:
    """The python of an environment with the wheel alone, installed without
    looking at the index (a dependency would fail to install or to import);
    None when the tests run from the source tree."""
    wheel = os.environ.get("ARBITER_PY_WHEEL")
    if not wheel:
        return None
    env = tmp_path_factory.mktemp("bare")
    venv.create(env, with_pip=True)
    python = str(env / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check", wheel],
                   check=True)
    return python


def test_the_wheel_imports_only_the_standard_library(bare: Optional[str]) -> None:
    got = _scan(bare or sys.executable)
    assert got["loaded"] > 10  # the scan saw the package's imports
    assert got["outside"] == []
    assert not got["requires"]
    if bare:
        assert "site-packages" in got["file"]
        # Where the frameworks are installed (the tests' environment), the
        # adapters still leave them unimported until used.
        assert _scan(sys.executable)["outside"] == []


ADAPTER_WITHOUT_FRAMEWORK = r"""
import arbiter
from arbiter.adapters.openai_agents import guarded_tool
try:
    guarded_tool(tool="t", key="k")
except ModuleNotFoundError as e:
    print(e)
"""


def test_an_adapter_without_its_framework_says_what_to_install(bare: Optional[str]) -> None:
    if not bare:
        pytest.skip("run by run-tests: only the wheel alone has no framework beside it")
    out = subprocess.run([bare, "-c", ADAPTER_WITHOUT_FRAMEWORK], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "arbiter: this adapter needs openai-agents (pip install openai-agents)"


def test_tests_run_against_the_installed_wheel() -> None:
    if os.environ.get("ARBITER_PY_WHEEL"):
        assert "site-packages" in arbiter.__file__, arbiter.__file__
    assert (Path(arbiter.__file__).parent / "py.typed").exists()
