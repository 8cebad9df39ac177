"""Grade a chosen subset of parts of one submission by id (the harness tests
and the grading benchmark use it to run just the distributed parts): the
same engine as `grade_folder`, autograder.engine.grading.grade_parts."""
from __future__ import annotations

from pathlib import Path

from shardlab.autograder.engine import grading
from shardlab.autograder.engine.grading import PartResult
from shardlab.autograder.questions import all_parts
from shardlab.autograder.sandbox.process import Limits


def grade_parts(root: Path, cfg, part_ids, limits: Limits = Limits()) -> dict[str, PartResult]:
    wanted = set(part_ids)
    parts = [p for p in all_parts() if p.id in wanted and p.kind == "auto"]
    return grading.grade_parts(root, cfg, parts, limits)[0]
