"""The jail policy: whether this course may be graded with the walls this
machine has.

A missing jail prerequisite (namespaces, user namespaces, cgroups) is the
instructor's set-up, never the student's fault. The `jail` module finds
what is missing once per process (`jail.walls()`); this module applies the
course's choice, `[grading] require_jail` in the course config:

- on, and a wall missing: nothing is graded. `shardlab grade` (and every
  grading entry point) refuses with one line naming what is missing, and
  `shardlab walls`, run by the Gradescope image's setup.sh, fails the image
  build, so the instructor learns at upload time, not from a class of zeros;
- off: grading goes on with the lighter walls, and every report says which
  walls it had (`Report.walls`, shown by the CLI, the JSON, batch feedback and
  otter's results).
"""
from __future__ import annotations

from shardlab.autograder.core.errors import ShardlabError


def current():
    """This machine's walls (autograder.sandbox.jail.Walls), probed once per process."""
    from shardlab.autograder.sandbox import jail
    return jail.walls()


def required_walls(cfg, require: bool = False):
    """The walls grading will use; ShardlabError when the course (or
    `require`) asks for the full jail and a wall is missing."""
    walls = current()
    if (require or getattr(cfg, "require_jail", False)) and not walls.full:
        missing = "; ".join(walls.missing) or walls.describe()
        raise ShardlabError(f"grading refused: the course requires the full jail ([grading] require_jail), "
                            f"and this machine lacks it: {missing} (a set-up problem, not a submission's)")
    return walls
