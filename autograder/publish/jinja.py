"""The Jinja environment every rendered file shares (handout, solutions,
the starter kit's README). Templates compute nothing: every number comes
from the reference's worked derivations for the course config."""
from __future__ import annotations

import jinja2

from shardlab.autograder.core import content
from shardlab.autograder.core.results import points_text
from shardlab.autograder.publish.mathtext import to_tex

TEMPLATES = content.folder("templates")


def environment() -> jinja2.Environment:
    """Templates under templates/; an undefined name is an error, never blank text.
    The filter `tex` turns a reference formula into LaTeX (`mathtext`); `points`
    shows points with at most two decimals (`results.points_text`)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["tex"] = to_tex
    env.filters["points"] = points_text
    return env
