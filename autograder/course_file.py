"""Which course a command reads: named, never guessed.

`grade`, `build`, `check`, `answers`, `warm` and `walls` read the course
config from, in this order: `--config PATH`; else `./course.toml` in the
working directory; else the file the environment variable SHARDLAB_COURSE
names; else the shipped course (reference/course.toml), and then they say so
in one line on stderr. `demo` reads the shipped course, silently.

A course is never read from inside a submission: `grade` refuses to use
`./course.toml` when the working directory is at or under a submission folder
it grades (or the Gradescope export folder), since that file would be the
student's. Batch grading gives every child grader an explicit, absolute
`--config` (`platforms.batch`), so no child resolves its working directory.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import click

from shardlab.autograder.core.errors import ShardlabError

COURSE_FILE = "course.toml"
ENV = "SHARDLAB_COURSE"
SHIPPED_NOTE = (f"shardlab: no course named (--config, ./{COURSE_FILE} or {ENV}): "
                "using the shipped course (reference/course.toml)")


def _holding(here: Path, graded: Iterable[str | Path]) -> str | None:
    """The first of the `graded` folders that `here` is at or under, else None."""
    for path in graded:
        folder = Path(path).resolve()
        if folder.is_dir() and (here == folder or folder in here.parents):
            return str(path)
    return None


def course_file(config_path: str | Path | None, graded: Iterable[str | Path] = ()) -> str | None:
    """The course config a command reads, as an absolute path, or None for the
    shipped course (`load_config(None)`; said once on stderr). `graded`: the
    submission folders (and export folder) being graded, none of which may
    hold the working directory when `./course.toml` would be read. A
    SHARDLAB_COURSE naming no file, and a course.toml inside a submission,
    are one-line errors (ShardlabError)."""
    if config_path:
        return os.path.abspath(config_path)
    here = Path.cwd().resolve()
    local = here / COURSE_FILE
    if local.is_file():
        inside = _holding(here, graded)
        if inside is not None:
            raise ShardlabError(f"refusing to read ./{COURSE_FILE}: the working directory is inside a "
                                f"submission being graded ({inside}), so that file is the student's, not the "
                                f"course; name the course with --config PATH")
        return str(local)
    named = os.environ.get(ENV, "")
    if named:
        path = Path(named).expanduser().absolute()
        if not path.is_file():
            raise ShardlabError(f"{ENV}={named} names no course config file")
        return str(path)
    click.echo(SHIPPED_NOTE, err=True)
    return None
