"""Where the course content lives.

The repository's fixed top-level folders are installed as subpackages of one
package, `shardlab` (setup.py maps `shardlab.<folder>` to `<folder>/`):
`shardlab.autograder`, `shardlab.reference`, `shardlab.solutions`,
`shardlab.assignments` and `shardlab.templates`. Nothing generic such as
`assignments` or `reference` lands in site-packages, so a student's own
`assignments/` can neither shadow the course's copy nor be shadowed by it.

Code that reads files of those folders asks here instead of counting
`parents[k]` from its own location: the answer is the same in the
repository, in an editable install and in an installed wheel.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

FOLDERS = ("autograder", "reference", "solutions", "assignments", "templates")


ROOT = Path(str(resources.files("shardlab.autograder"))).parent
"""The folder holding all course folders: the source tree in a checkout or an
editable install, `site-packages/shardlab` in an installed wheel."""


def folder(name: str) -> Path:
    """The directory of the course folder `name` (one of FOLDERS). It may be
    absent: the otter zip's wheel carries no solutions/."""
    if name not in FOLDERS:
        raise ValueError(f"unknown course folder {name!r}; expected one of {FOLDERS}")
    return ROOT / name


def shipped_course() -> Path:
    """The shipped course config's file (reference/course.toml): what
    `load_config(None)` reads, as a path a child process can be given
    explicitly (batch grading never lets a child pick its course)."""
    return folder("reference") / "course.toml"


def repository() -> Path | None:
    """The source tree (the folder holding pyproject.toml), or None when
    shardlab runs from an installed wheel."""
    return ROOT if (ROOT / "pyproject.toml").is_file() else None


def torch_version() -> str:
    """The torch release every environment installs ("2.13.0"): constraints.txt's
    pin in the source tree, else the installed torch's version (without a
    local build label such as "+cpu"). The autograder zip asks for its CPU
    build, the starter kit for the same release."""
    import re
    from importlib import metadata
    root = repository()
    if root is not None and (root / "constraints.txt").is_file():
        pin = re.search(r"^torch==([\w.]+)", (root / "constraints.txt").read_text(), re.M)
        if pin:
            return pin.group(1)
    return metadata.version("torch").split("+")[0]
