"""The Jinja environment every rendered file shares (handout, solutions,
the starter kit's README). Templates compute nothing: every number comes
from the reference's worked derivations for the course config."""
from __future__ import annotations

import traceback
from functools import cache
from pathlib import Path

import jinja2

from shardlab.autograder.core import content, course_folders
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.results import points_text
from shardlab.autograder.publish.mathtext import to_tex

TEMPLATES = content.folder("templates")


def _own_template_file(name: str) -> Path | None:
    folder, _, file = name.partition("/")
    module = file.removesuffix(".md.j2")
    path = course_folders.LOADED.get(dict(course_folders.MODULES)["question.py"].format(name=module))
    if folder != "questions" or not file.endswith(".md.j2") or path is None:
        return None
    return course_folders.QuestionFolder(path.parent).needed(course_folders.TEMPLATE)


def own_template(name: str) -> str | None:
    """A course's own question's template, `questions/<name>.md.j2`: the template.md.j2 of the course
    folder `<name>` loaded in this process (`core.course_folders`); None for any other name. A loaded
    folder without one is a one-line error naming it."""
    path = _own_template_file(name)
    return None if path is None else path.read_text(encoding="utf-8")


def _own_template_source(name: str):
    """`own_template` as Jinja's FunctionLoader takes it, (source, file, uptodate): the environment is
    shared (`environment`), so a compiled template is kept until another folder is loaded under its
    name or its file changes, as FileSystemLoader does for templates/."""
    def stamp() -> tuple[Path, int] | None:
        path = _own_template_file(name)
        return None if path is None else (path, path.stat().st_mtime_ns)
    seen, source = stamp(), own_template(name)
    # its file's path as the template's file name: an error in it names it (`own_template_error`)
    return None if source is None or seen is None else (source, str(seen[0]), lambda: stamp() == seen)


def own_template_error(exc: Exception) -> ShardlabError | None:
    """A Jinja error raised in a course's own template (an undefined name: the environment is strict; a
    syntax error; a filter that failed) as one line naming its folder, file and line; None when it
    was not raised in one."""
    own = {str(path.parent / course_folders.TEMPLATE): path.parent for path in course_folders.LOADED.values()}
    line: int | None
    if isinstance(exc, jinja2.TemplateSyntaxError) and exc.filename in own:
        file, line = exc.filename, exc.lineno
    else:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in own]
        if not frames:
            return None
        file, line = frames[-1].filename, frames[-1].lineno
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return ShardlabError(f"course question {own[file]}: {course_folders.TEMPLATE} line {line}: {text}")


@cache
def environment() -> jinja2.Environment:
    """Templates under templates/, then the course's own questions' (`own_template`); an undefined
    name is an error, never blank text. The filter `tex` turns a reference formula into LaTeX
    (`mathtext`); `points` shows points with at most two decimals (`results.points_text`). One per
    process: Jinja keeps each template compiled (compiling the solutions' took about 0.5 s a render)
    and compiles it again when its file changes."""
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(TEMPLATES), jinja2.FunctionLoader(_own_template_source)])
    env = jinja2.Environment(loader=loader,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["tex"] = to_tex
    env.filters["points"] = points_text
    return env
