"""The distribution follows the packaging conventions a Python user expects:
every third-party module the package imports is a declared dependency (a
test-only one, nbclient, only in an extra), the licence is an SPDX string
with its LICENSE file shipped in the wheel, and the build prints no
setuptools warning (the table form of `license` stops building after
2027-02-18)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from shardlab.autograder.core import content
from helpers import package_modules

PYPROJECT = tomllib.loads((content.ROOT / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {re.sub(r"[-_.]+", "-", Requirement(r).name).lower() for r in requirements}


def _imported_top_level() -> set[str]:
    names = set()
    for tree, _ in package_modules().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    # the standard library, shardlab itself, and the student's own assignments/ (the kit imports it)
    return names - set(sys.stdlib_module_names) - {"__future__", "shardlab", *content.FOLDERS}


@pytest.mark.pure
def test_every_imported_distribution_is_declared():
    declared = _names(PYPROJECT["project"]["dependencies"])
    owners = metadata.packages_distributions()
    imported = _imported_top_level()
    assert "yaml" in imported                       # gradescope_export reads Gradescope's YAML
    missing = {module: owners.get(module) for module in imported
               if not _names(owners.get(module, [module])) & declared}
    assert not missing, f"imported but not in [project] dependencies: {missing}"


@pytest.mark.pure
def test_nbclient_is_only_in_the_extras_that_use_it():
    """Only the tests execute a notebook: nbclient is a `dev` extra, never a runtime dependency,
    and nothing in the package imports it."""
    assert "nbclient" not in _names(PYPROJECT["project"]["dependencies"])
    assert "nbclient" in _names(PYPROJECT["project"]["optional-dependencies"]["dev"])
    assert "nbclient" not in _imported_top_level()


@pytest.mark.pure
def test_the_licence_is_an_spdx_string_with_its_file():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (content.ROOT / "LICENSE").read_text().startswith("MIT License\n")
    # PEP 639's fields need setuptools >= 77: the build requirement says so, and this venv has it
    floor = next(Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    assert Version("77") in floor.specifier and Version("76.9") not in floor.specifier
    assert Version(metadata.version("setuptools")) in floor.specifier


@pytest.mark.platform
def test_the_wheel_builds_without_a_setuptools_warning(tmp_path):
    """What `shardlab build` does for the otter zip (`otter_export.build_wheel`), with pip's output
    kept: no BuildBackendWarning or deprecation from setuptools, and LICENSE in the wheel."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path / "wheel"), str(content.ROOT)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert not re.search(r"Warning|deprecat", said, re.IGNORECASE), said[-3000:]
    wheel = next((tmp_path / "wheel").glob("shardlab-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in zf.namelist())
        assert "License-Expression: MIT" in zf.read(next(n for n in zf.namelist()
                                                          if n.endswith(".dist-info/METADATA"))).decode()
