"""The package map pyproject.toml cannot express by itself: every top-level
course folder present in this tree is installed as `shardlab.<folder>`
(`shardlab.autograder.core.content` says why). The otter zip's wheel is built from a copy
without solutions/, so the map is computed from what is there."""
from pathlib import Path

from setuptools import find_namespace_packages, setup

FOLDERS = ("autograder", "reference", "solutions", "assignments", "templates")
here = Path(__file__).parent
packages, package_dir = [], {}
for folder in FOLDERS:
    if not (here / folder / "__init__.py").is_file():
        continue
    package_dir[f"shardlab.{folder}"] = folder
    packages.append(f"shardlab.{folder}")
    # every subfolder, a data-only one too (reference/courses/, templates/questions/): setuptools
    # ships a folder's files only as some package's, and warns about one no package names
    packages += [f"shardlab.{folder}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"])]

# `shardlab` itself is a namespace package: it has no folder of its own
setup(packages=packages, package_dir=package_dir,
      package_data={"shardlab.reference": ["*.toml", "courses/*.toml", "courses/*.csv"],
                    "shardlab.templates": ["*.j2", "**/*.j2"]})
