"""The engine on question 1: full marks, zero, and every hand-made wrong
submission scoring as declared, with the feedback that teaches."""
import json
import os
import time

import pytest

from shardlab.autograder.engine.grading import grade_folder, grade_path
from shardlab.autograder.sandbox.process import Limits
from shardlab.autograder.sandbox.zygote import shared_pid as zygote_pid
from shardlab.autograder.selfcheck import assembled, fixtures, folder_of, mismatches
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS

pytestmark = pytest.mark.sandbox

FAST = Limits(call_seconds=2.0, import_seconds=30.0)
MEMORY_POINTS = 14


def _children() -> set[int]:
    """Live descendants of this test process (zombies excluded), except the
    grader's own zygote, a trusted process that outlives each grading by
    design; the workers it forked for the submission are still counted."""
    parent_of = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[0] != "Z":
            parent_of[int(pid)] = int(stat[1])
    zygote = zygote_pid()
    kids, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent_of.items() if ppid in frontier} - kids
        kids |= frontier
    return kids - {zygote}


def _memory(report):
    return next(q for q in report.questions if q.id == "1")


def test_solutions_full_marks_stubs_zero(cfg):
    with folder_of(SOLUTIONS) as root:
        sol = _memory(grade_folder(root, cfg, FAST, modules={"memory"}))
    with folder_of(ASSIGNMENTS) as root:
        stub = _memory(grade_folder(root, cfg, FAST, modules={"memory"}))
    assert (sol.score, sol.max_score) == (MEMORY_POINTS, MEMORY_POINTS)
    assert stub.score == 0
    assert "NotImplementedError: Task 1.3" in next(p for p in stub.parts if p.id == "1.3").feedback


MEMORY_FIXTURES = [f for f in fixtures() if f.modules == {"memory"}]


@pytest.mark.parametrize("fixture", MEMORY_FIXTURES, ids=lambda f: f.name)
def test_wrong_submission_scores_as_declared(cfg, fixture):
    start = time.monotonic()
    with assembled(fixture) as root:
        report = grade_folder(root, cfg, FAST, modules=fixture.modules)
    assert mismatches(report, fixture, full=False) == []
    assert time.monotonic() - start < 120         # hangs fail in seconds (5x a grading's), not minutes
    assert _children() == set()                   # nothing the submission started survives


def test_declared_feedback_is_specific(cfg):
    by_name = {f.name: f for f in fixtures()}
    with assembled(by_name["gib_for_gb"]) as root:
        p = grade_folder(root, cfg, FAST, modules={"memory"}).part("1.4")
    # a public case names the input, expected and returned values and the misconception:
    # 250e9 bytes on 80e9-byte devices need ceil(3.125) = 4; as GiB, 250e9 / 2^30 = 232.8 "GB" / 80 -> 3
    assert "devices_needed(total_bytes=250000000000, device_bytes=80000000000)" in p.feedback
    assert "expected 4, got 3" in p.feedback and "GiB" in p.feedback


def test_hidden_cases_do_not_reveal_inputs(cfg, submission):
    # wrong only for zero tokens, which only a hidden case uses
    root = submission(memory=(SOLUTIONS / "memory.py").read_text() + (
        "\n\ndef activation_bytes(d_model, d_ff, num_blocks, tokens):\n"
        "    return num_blocks * max(tokens, 1) * (d_model + d_ff) * 2\n"))
    p = grade_folder(root, cfg, FAST, modules={"memory"}).part("1.3")
    assert p.score == 1.5                  # 2 points over 4 case groups: only the edge case's share is lost
    assert "a hidden case of activation_bytes (edge case: tokens = 0): wrong value" in p.feedback
    assert "tokens=0" not in p.feedback and "expected" not in p.feedback


def test_printed_results_are_ignored(cfg):
    by_name = {f.name: f for f in fixtures()}
    with assembled(by_name["fake_score_print"]) as root:
        report = grade_folder(root, cfg, FAST, modules={"memory"})
    assert '{"score": 100' in report.output
    assert _memory(report).score == MEMORY_POINTS - 1 - 3


def test_output_is_capped(cfg):
    by_name = {f.name: f for f in fixtures()}
    with assembled(by_name["floods_output"]) as root:
        report = grade_folder(root, cfg, FAST, modules={"memory"})
    assert report.output_bytes > 10**7 and len(report.output) <= 64 * 1024
    assert _memory(report).score == MEMORY_POINTS


def test_zip_submission_and_json_shape(cfg, tmp_path):
    import shutil
    shutil.copytree(SOLUTIONS, tmp_path / "work" / "assignments")
    archive = shutil.make_archive(str(tmp_path / "sub"), "zip", tmp_path / "work")
    report = grade_path(archive, cfg, FAST).to_dict()
    json.dumps(report)
    assert all(p["score"] == p["max_score"] for q in report["questions"] for p in q["parts"])
    q = report["questions"][0]
    assert {"id", "score", "max_score", "parts"} <= set(q)
    assert {"id", "score", "max_score", "feedback"} <= set(q["parts"][0])


def test_points_override(cfg):
    from dataclasses import replace
    custom = replace(cfg, points=(("1.8", 5.0),))
    with folder_of(SOLUTIONS) as root:
        report = grade_folder(root, custom, FAST, modules={"memory"})
    assert report.part("1.8").max_score == 5.0 and _memory(report).max_score == MEMORY_POINTS + 2


@pytest.mark.parametrize("name", ["shardlab.reference.memory", "reference.memory"])
def test_student_cannot_import_the_answer_key(cfg, submission, name):
    root = submission(memory=f"from {name} import *\n")
    p = grade_folder(root, cfg, FAST, modules={"memory"}).part("1.1")
    why = "not allowed in a submission" if name.startswith("shardlab") else "No module named 'reference'"
    assert p.score == 0 and why in p.feedback, p.feedback
