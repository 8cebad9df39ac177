"""Question 4's distributed parts graded end to end on gloo: the solutions,
the stubs, and the hand-made wrong and hostile BucketedDDPs, each with the
declared score, in bounded time, with no process left behind."""

import pytest

from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.engine.grading import grade_part_ids
from shardlab.autograder.selfcheck import fixtures, folder_of
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
from helpers import assert_graded_as_declared, assert_nothing_left

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]

DISTRIBUTED = ("4.5", "4.6", "4.7")
DDP_FIXTURES = [f for f in fixtures() if f.name.startswith("ddp_")]


def test_solutions_full_marks_stubs_zero(cfg, sessions):
    with folder_of(SOLUTIONS) as root:
        full = grade_part_ids(root, cfg, DISTRIBUTED)
    with folder_of(ASSIGNMENTS) as root:
        stub = grade_part_ids(root, cfg, DISTRIBUTED)
    assert {p: r.score for p, r in full.items()} == {"4.5": 4, "4.6": 2, "4.7": 2}
    assert {p: r.score for p, r in stub.items()} == {"4.5": 0, "4.6": 0, "4.7": 0}
    assert "NotImplementedError: Task 4.5: BucketedDDP.__init__" in stub["4.5"].feedback
    assert_nothing_left(sessions)


@pytest.mark.parametrize("fixture", DDP_FIXTURES, ids=lambda f: f.name)
def test_wrong_bucketed_ddp_scores_as_declared(cfg, sessions, fixture, kit_runs):
    assert_graded_as_declared(cfg, fixture, DISTRIBUTED, within_seconds=120, kit_runs=kit_runs)
    assert_nothing_left(sessions)


@pytest.mark.parametrize("fixture", [f for f in DDP_FIXTURES if "4.1" in f.failing], ids=lambda f: f.name)
def test_wrong_layouts_lose_4_1_as_declared(cfg, fixture):
    # the same fixtures' runs above follow their own layout and lose nothing for it (4.6)
    assert_graded_as_declared(cfg, fixture, ("4.1",), within_seconds=120)


def test_trace_of_one_step_by_hand(sessions):
    """frozen_mlp, 256-byte cap: reverse order 12 + 48 + 160 = 220 bytes (after
    3 gradients), then 40 (4th), then 240 (5th), none inside finish_gradient_synchronization();
    the frozen fc2 is never sent. Its trainable parameters are fc1.weight (0), fc1.bias (1),
    fc3.weight (2), head.weight (3), head.bias (4): backward reaches head first, fc1 last."""
    from shardlab.autograder.core.parts import Call
    call = Call("buckets", "ddp_train", dict(world_size=2, model="frozen_mlp", bucket_size_mb=256 / 2**20,
                                              optimizer="sgd", steps=2, seed=3))
    with folder_of(SOLUTIONS) as root:
        run = run_gloo(str(root), [call])
    per_rank = run.outcomes[0].value
    for rank in per_rank:
        for step in rank["steps"]:
            order = step.pop("grad_order")
            assert sorted(order[:2]) == [3, 4] and order[2:] == [2, 1, 0]
            assert step == {"all_reduces": [[220, 3, True, False], [40, 4, True, False], [240, 5, True, False]],
                            "other": [], "grads": 5}
        assert [sorted(g) for g in rank["grads"]] == [["fc1.bias", "fc1.weight", "fc3.weight", "head.bias",
                                                       "head.weight"]] * 2
    assert per_rank[0]["state"] == per_rank[1]["state"]
    assert_nothing_left(sessions)


RACY = [f for f in DDP_FIXTURES if f.name in ("ddp_reads_before_wait", "ddp_grads_accumulated_twice")]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("fixture", RACY, ids=lambda f: f.name)
def test_racy_submissions_grade_the_same_every_time(cfg, sessions, fixture):
    """Where the student's code could race (a bucket read before its all-reduce is waited for;
    an all-reduce started from a hook while autograd still accumulates into its bucket), the
    trusted half settles it one way: three gradings of the same files give one score and one
    feedback (docs/trust.md)."""
    from shardlab.autograder.selfcheck import assembled
    seen = set()
    with assembled(fixture) as root:
        for _ in range(3):
            result = grade_part_ids(root, cfg, ("4.5",))["4.5"]
            seen.add((result.score, result.feedback))
    assert len(seen) == 1, seen
    assert_nothing_left(sessions)
