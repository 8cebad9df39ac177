"""Question 2: the alpha-beta model by hand, the reference FSDP and the
solutions through the real gloo checks, and the wrong FSDPs as declared."""
import math

import pytest
from hypothesis import given, settings, strategies as st

from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.core.parts import Call
from shardlab.autograder.engine.grading import grade_part_ids
from shardlab.autograder.selfcheck import fixtures, folder_of
from shardlab.autograder.core.content import ROOT as REPO
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.reference import fsdp as ref
from shardlab.solutions import fsdp as sol
from helpers import assert_graded_as_declared, assert_nothing_left

pytestmark = pytest.mark.sandbox

RUN_PARTS = ("2.7", "2.8", "2.9", "2.10", "2.11")
ANALYTIC_PARTS = ("2.1", "2.2", "2.3", "2.4", "2.5", "2.6")


def _declared(fixture) -> set[str]:
    return set(fixture.zero) | set(fixture.failing) | set(fixture.feedback) | set(fixture.mistakes)


# the wrong FSDPs are graded on the runs; the wrong formulas (declaring only 2.1-2.6) on plain calls
FSDP_FIXTURES = [f for f in fixtures() if f.modules == {"fsdp"} and not _declared(f) <= set(ANALYTIC_PARTS)]
ANALYTIC_FIXTURES = [f for f in fixtures() if f.modules == {"fsdp"} and _declared(f) <= set(ANALYTIC_PARTS)]


# ---- the analytic model, numbers derived by hand from docs/spec.md ------------

def test_small_numbers_by_hand():
    assert ref.allgather_seconds(1000, 8, 1e-6, 1e3) == pytest.approx(3e-6 + 1.0)   # α·3 + 1000/1000
    assert ref.allgather_seconds(1000, 1, 1e-6, 1e3) == 0.0
    assert ref.forward_seconds(10, 1000, 1e6) == pytest.approx(0.02)                # 2·10·1000/1e6
    # all-gather 1e-3·3 + 2000/1e6 = 0.005 s vs forward 0.02 s (10 tokens) or 0.002 s (1 token)
    assert ref.is_communication_bound(10, 1000, 8, 1e-3, 1e6, 1e6) is False
    assert ref.is_communication_bound(1, 1000, 8, 1e-3, 1e6, 1e6) is True
    # rhs = (2·10/1e6 − 2/1e6)·1000 = 0.018; 0.018 / 0.002 = 9 -> p = 2^9
    assert ref.max_devices_before_comm_bound(10, 1000, 0.002, 1e6, 1e6) == pytest.approx(512)
    assert ref.max_devices_before_comm_bound(1, 1000, 0.002, 1e6, 1e6) == 1.0       # rhs = 0
    assert ref.max_devices_before_comm_bound(10, 1000, 1e-9, 1e6, 1e6) == math.inf  # 2^(1.8e7)
    # 1e6/2 · (0.002·3/1000 + 2/1e6) = 5e5 · 8e-6 = 4 tokens
    assert ref.min_tokens_to_hide_allgather(1000, 8, 0.002, 1e6, 1e6) == pytest.approx(4.0)
    assert ref.step_comm_bytes(1000, 4, 2) == pytest.approx(4500)                   # 3·3/4·1000·2


def test_course_answers(cfg):
    w = ref.worked(cfg)
    # one XXL layer: 16384·53248 = 872,415,232 params; 2·4096·P = 7,146,825,580,544 FLOPs / 9.89e14
    assert w["unit"].value == 872_415_232
    assert w["forward"].value == pytest.approx(7_146_825_580_544 / 9.89e14)
    # inter-node, p = 64: 2e-5·6 + 1,744,830,464 / 5e10 = 0.00012 + 0.0348966 s > 7.2 ms forward
    assert w["allgather_inter"].value == pytest.approx(0.00012 + 1_744_830_464 / 5e10)
    # 4.945e14 · (1.2e-4 / 872,415,232 + 4e-11) = 4.945e14 · 4.0137549e-11 ≈ 19,848 tokens
    assert w["tokens_inter"].value == pytest.approx(19848.0, rel=1e-4)
    assert w["pmax_inter"].value == 1.0          # 2T/C = 8.28e-12 < b/β = 4e-11: never hidden


pos = st.floats(1e-9, 1e-2)
bw = st.floats(1e8, 1e12)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**10), st.integers(1, 10**5), st.integers(1, 4096), pos, bw, st.floats(1e12, 1e16),
       st.sampled_from([2, 4]))
def test_solutions_agree_with_reference(unit, tokens, p, alpha, beta, c, b):
    close = lambda x, y: x == y or math.isclose(x, y, rel_tol=1e-9)  # noqa: E731
    assert close(sol.allgather_seconds(unit * b, p, alpha, beta), ref.allgather_seconds(unit * b, p, alpha, beta))
    assert close(sol.forward_seconds(tokens, unit, c), ref.forward_seconds(tokens, unit, c))
    assert sol.is_communication_bound(tokens, unit, p, alpha, beta, c, b) == \
        ref.is_communication_bound(tokens, unit, p, alpha, beta, c, b)
    got = sol.max_devices_before_comm_bound(tokens, unit, alpha, beta, c, b)
    want = ref.max_devices_before_comm_bound(tokens, unit, alpha, beta, c, b)
    assert got == want or math.isclose(got, want, rel_tol=1e-6)
    assert close(sol.min_tokens_to_hide_allgather(unit, p, alpha, beta, c, b),
                 ref.min_tokens_to_hide_allgather(unit, p, alpha, beta, c, b))
    assert close(sol.step_comm_bytes(unit, p, b), ref.step_comm_bytes(unit, p, b))


# ---- the real runs ---------------------------------------------------------------

def test_one_step_traced_by_hand(sessions):
    """frozen_mlp on 3 ranks: units fc1 (6·10 + 10 = 70), fc3 (10·4 = 40), head (4·3 + 3 = 15)
    elements, padded to 72, 42, 15: 288, 168 and 60 bytes per all-gather or reduce-scatter;
    each rank receives 3 · 2/3 · 129 · 4 = 1032 bytes per step and stores
    24 + 14 + 5 = 43 shard elements plus fc2's frozen 100 and the 6-element buffer."""
    call = Call("fsdp", "fsdp_train", dict(world_size=3, model="frozen_mlp", optimizer="sgd", steps=2, seed=5))
    with folder_of(SOLUTIONS) as root:
        per_rank = run_gloo(str(root), [call]).outcomes[0].value
    for rank in per_rank:
        assert rank["stored"] == 43 + 100 + 6
        for events in rank["steps"]:
            by_phase = {}
            for op, phase, nbytes, _, _ in events:
                by_phase.setdefault((op, phase), []).append(nbytes)
            assert sorted(by_phase.pop(("all_gather_single", "forward"))) == [60, 168, 288]
            assert sorted(by_phase.pop(("all_gather_single", "backward"))) == [60, 168, 288]
            assert sorted(by_phase.pop(("reduce_scatter_single", "backward"))) == [60, 168, 288]
            assert by_phase == {}
            assert sum(e[2] for e in events) * 2 / 3 == 1032
    assert_nothing_left(sessions)


def _reference_fsdp_submission(root):
    """solutions/ with FSDP replaced by the reference implementation."""
    source = (REPO / "reference" / "fsdp_module.py").read_text().replace("from __future__ import annotations\n", "")
    target = root / "assignments" / "fsdp.py"
    target.write_text(target.read_text() + "\n\n" + source)


def test_reference_and_solutions_pass_every_run_part(cfg, sessions):
    with folder_of(SOLUTIONS) as root:
        solved = grade_part_ids(root, cfg, RUN_PARTS)
        _reference_fsdp_submission(root)
        reference = grade_part_ids(root, cfg, RUN_PARTS)
    for results in (solved, reference):
        assert {p: r.score for p, r in results.items()} == {"2.7": 4, "2.8": 2, "2.9": 3, "2.10": 2, "2.11": 1}, \
            {p: r.feedback for p, r in results.items()}
    assert_nothing_left(sessions)


@pytest.mark.parametrize("fixture", FSDP_FIXTURES, ids=lambda f: f.name)
def test_wrong_fsdp_scores_as_declared(cfg, sessions, fixture, kit_runs):
    assert_graded_as_declared(cfg, fixture, RUN_PARTS, within_seconds=120, kit_runs=kit_runs)
    assert_nothing_left(sessions)


@pytest.mark.parametrize("fixture", ANALYTIC_FIXTURES, ids=lambda f: f.name)
def test_wrong_formula_scores_as_declared(cfg, fixture):
    assert_graded_as_declared(cfg, fixture, ANALYTIC_PARTS, within_seconds=120)


def test_every_wrong_formula_is_graded():
    assert {f.name for f in ANALYTIC_FIXTURES} >= {"fsdp_no_clamp", "fsdp_step_bytes_allreduce"}
    assert {f.name for f in FSDP_FIXTURES} >= {"fsdp_sums", "fsdp_unpadded", "fsdp_allreduce_slice"}
