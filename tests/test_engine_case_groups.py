"""A part's points split over its case groups (engine/plan.case_groups): a
missed edge case costs its group's share, not the whole part, and a hidden
case's feedback names its group but never its inputs.

The expected scores are worked out by hand from the case lists of
autograder/questions/memory/__init__.py (docs/spec.md's points): 1.3
`activation_bytes` is worth 2 points over 4 groups (the course model, a
tiny model, the edge case tokens = 0, other inputs), 0.5 each.
"""
from __future__ import annotations

import pytest

from shardlab.autograder.engine import plan
from shardlab.autograder.engine.grading import score_part
from shardlab.autograder.sandbox.process import Outcome

pytestmark = pytest.mark.pure


def test_shares_are_even_and_add_up_to_the_part():
    assert plan.group_points(3, 3) == [1, 1, 1]
    assert plan.group_points(2, 3) == [2 / 3] * 3
    assert round(sum(plan.group_points(1, 6)[:3]), 5) == 0.5      # otter's rounding of three passed sixths
    assert plan.group_points(2, 0) == []


def _score(cfg, part_id, wrong):
    """Grade part `part_id` with every value right except where `wrong(case)` holds."""
    part = plan.find_part(part_id)
    cases, expected = plan.part_plan(cfg, part_id)
    outcomes = [[Outcome(value=-1 if wrong(case) else exp[0])] for case, exp in zip(cases, expected)]
    return score_part(part, 2, cases, expected, outcomes), cases


def test_a_missed_edge_case_costs_its_share_only(cfg):
    result, cases = _score(cfg, "1.3", lambda case: case.calls[0].args["tokens"] == 0)
    assert [g.name for g in result.groups] == ["the course model", "a tiny model", "edge case: tokens = 0",
                                               "other inputs"]
    assert result.score == 1.5 and result.max_score == 2
    assert "1 of 4 case groups (edge case: tokens = 0): 1.5 of 2 points" in result.feedback
    assert [g.score for g in result.groups] == [0.5, 0.5, 0.0, 0.5]


def test_a_hidden_case_names_its_group_not_its_inputs(cfg):
    hidden = [c for c in plan.part_cases(cfg, "1.3") if not c.public and c.note == ""]
    target = hidden[0].calls[0].args
    result, _ = _score(cfg, "1.3", lambda case: case.calls[0].args == target)
    assert result.score == 1.5
    assert "a hidden case of activation_bytes (other inputs): wrong value" in result.feedback
    for value in target.values():
        assert f"{value:,}" not in result.feedback and f"={value}" not in result.feedback


def test_all_right_is_full_marks_and_all_wrong_is_zero(cfg):
    assert _score(cfg, "1.3", lambda case: False)[0].score == 2
    assert _score(cfg, "1.3", lambda case: True)[0].score == 0
