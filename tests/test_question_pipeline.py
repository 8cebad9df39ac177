"""Question 5's analytic parts (5.1-5.8) graded end to end in the sandbox: the
solutions earn every point, the stubs none, and each hand-made wrong
submission loses exactly the case groups its expect.toml declares, with the
feedback that names its mistake. (The distributed parts have their own
tests, beside the scenario's.)"""
import pytest

from shardlab.autograder.engine.grading import grade_part_ids
from shardlab.autograder.engine.plan import find_part
from shardlab.autograder.selfcheck import fixtures, folder_of
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
from shardlab.autograder.questions import questions
from helpers import assert_graded_as_declared

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]

QUESTION = next(q for q in questions() if q.module == "pipeline")
ANALYTIC = tuple(p.id for p in QUESTION.parts if p.probe == "calls" and p.kind == "auto")   # not 5.a-5.e
ANALYTIC_FIXTURES = ("pipeline_fraction_p_over_p_plus_m", "pipeline_ratio_for_fraction",
                     "pipeline_gpipe_inflight_for_1f1b", "pipeline_fp32_wire")


def test_the_analytic_parts_are_5_1_to_5_8():
    assert ANALYTIC == tuple(f"5.{k}" for k in range(1, 9))


def test_solutions_full_marks_stubs_zero(cfg):
    with folder_of(SOLUTIONS) as root:
        full = grade_part_ids(root, cfg, ANALYTIC)
    with folder_of(ASSIGNMENTS) as root:
        stub = grade_part_ids(root, cfg, ANALYTIC)
    assert {p: r.score for p, r in full.items()} == {p: find_part(p).points for p in ANALYTIC}
    assert {p: r.score for p, r in stub.items()} == {p: 0 for p in ANALYTIC}
    assert "NotImplementedError: Task 5.5: inflight_microbatches" in stub["5.5"].feedback


@pytest.mark.parametrize("fixture", [f for f in fixtures() if f.name in ANALYTIC_FIXTURES], ids=lambda f: f.name)
def test_wrong_submission_scores_as_declared(cfg, fixture):
    assert_graded_as_declared(cfg, fixture, ANALYTIC, within_seconds=120)


def test_every_analytic_fixture_is_found():
    assert {f.name for f in fixtures()} >= set(ANALYTIC_FIXTURES)


def test_a_public_case_shows_the_mistake_and_a_hidden_one_only_its_group(cfg, submission):
    # wrong only where the target sits exactly on a fraction: a strict comparison
    root = submission(pipeline=(SOLUTIONS / "pipeline.py").read_text() + (
        "\n\ndef min_microbatches(p, target_fraction):\n"
        "    if p == 1:\n"
        "        return 1 if target_fraction >= 0 else None\n"
        "    if target_fraction <= 0:\n"
        "        return None\n"
        "    m = 1\n"
        "    while (p - 1) / (m + p - 1) >= target_fraction:\n"
        "        m += 1\n"
        "    return m\n"))
    part = grade_part_ids(root, cfg, ("5.8",))["5.8"]
    groups = {g.name: g.score == g.max_score for g in part.groups}
    assert [name for name, ok in groups.items() if not ok] == ["edge case: exactly on the target",
                                                              "edge case: exactly on a decimal target"]
    # the public tie (p = 3, target 0.5: 2/(m + 2) <= 0.5 first at m = 2; the strict loop goes on to 3) is shown
    # with its values; the hidden decimal tie only by its group, and no hidden input (0.25) is shown
    assert "expected 2, got 3 [edge case: exactly on the target]" in part.feedback
    assert "a hidden case of min_microbatches (edge case: exactly on a decimal target): wrong value" in part.feedback
    assert "target_fraction=0.25" not in part.feedback and part.feedback.count("expected") == 1
