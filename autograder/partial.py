"""Grade a chosen subset of parts of one submission (the harness tests and
the grading benchmark use it to run just the distributed parts). Same engine
as `grade_folder`: probes prepared first, expectations, probes, scoring."""
from __future__ import annotations

from pathlib import Path

from autograder.grading import PROBES, PartResult, probe_and_expect, score_part
from autograder.questions import all_parts, part_points
from autograder.sandbox import Limits


def grade_parts(root: Path, cfg, part_ids, limits: Limits = Limits()) -> dict[str, PartResult]:
    parts = [p for p in all_parts() if p.id in set(part_ids) and p.kind == "auto"]
    for probe in {p.probe for p in parts}:
        if hasattr(PROBES[probe], "prepare"):
            PROBES[probe].prepare(str(root), limits)
    plan, outcomes, _, _ = probe_and_expect(root, cfg, parts, limits)
    return {p.id: score_part(p, part_points(p, cfg), plan[p.id][0], plan[p.id][1],
                             [outcomes[(p.id, k)] for k in range(len(plan[p.id][0]))])
            for p in parts}
