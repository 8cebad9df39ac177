"""Question 5's analytic functions: values worked out by hand from docs/spec.md
(question 5), the reference against the solutions on random inputs, and the
ideal schedules the handout's figure draws against both."""
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardlab.autograder.questions.pipeline.figures import schedule
from shardlab.autograder.kit.timelines.pipeline import peak_inflight
from shardlab.reference import pipeline as ref
from shardlab.reference.config import load_config
from shardlab.solutions import pipeline as sol

pytestmark = pytest.mark.pure
IMPLS = pytest.mark.parametrize("impl", [ref, sol], ids=["reference", "solutions"])


# ---- by hand: p = 4 stages, m = 8 micro-batches make 8 + 4 - 1 = 11 slots, 3 of them idle

@IMPLS
def test_bubble_by_hand(impl):
    assert impl.bubble_fraction(4, 8) == pytest.approx(3 / 11, rel=1e-12)
    assert impl.bubble_ratio(4, 8) == pytest.approx(3 / 8, rel=1e-12)
    assert impl.bubble_fraction(4, 1) == pytest.approx(3 / 4, rel=1e-12)     # one micro-batch: idle 3 of 4
    assert impl.bubble_ratio(8, 2) == pytest.approx(7 / 2, rel=1e-12)        # the ratio exceeds 1
    assert impl.bubble_fraction(1, 8) == 0 and impl.bubble_ratio(1, 8) == 0   # one stage: no bubble
    assert impl.step_seconds(4, 8, 1.0, 2.0) == pytest.approx(11 * 3.0, rel=1e-12)
    assert impl.step_seconds(1, 8, 0.5, 1.0) == pytest.approx(8 * 1.5, rel=1e-12)
    # two chunks per stage: the 3 idle slots are half as long against 8 whole ones: 1.5 / 9.5
    assert impl.interleaved_bubble_fraction(4, 8, 2) == pytest.approx(1.5 / 9.5, rel=1e-12)
    assert impl.interleaved_bubble_fraction(4, 8, 1) == pytest.approx(3 / 11, rel=1e-12)


@IMPLS
def test_microbatches_in_flight_by_hand(impl):
    # 1F1B on 4 stages: stage s warms up with 3 - s forwards and runs one more before its first backward
    assert [impl.inflight_microbatches("1f1b", 4, 8, s) for s in range(4)] == [4, 3, 2, 1]
    assert [impl.inflight_microbatches("1f1b", 4, 2, s) for s in range(4)] == [2, 2, 2, 1]   # only 2 exist
    assert impl.inflight_microbatches("1f1b", 1, 5, 0) == 1
    assert [impl.inflight_microbatches(k, 4, 8, 2) for k in ("afab", "gpipe")] == [8, 8]
    with pytest.raises(ValueError):
        impl.inflight_microbatches("zero-bubble", 4, 8, 0)


@IMPLS
def test_bytes_by_hand(impl):
    # d_model 8, d_ff 24, 4 blocks on 2 stages, 5 tokens per micro-batch: one micro-batch leaves
    # 2 blocks · 5 tokens · (8 + 24) values · 2 bytes = 640 bytes on a stage
    assert impl.stage_activation_bytes("1f1b", 8, 24, 4, 2, 4, 5, 0) == 2 * 640   # min(4, 2 - 0) in flight
    assert impl.stage_activation_bytes("1f1b", 8, 24, 4, 2, 4, 5, 1) == 640
    assert impl.stage_activation_bytes("afab", 8, 24, 4, 2, 4, 5, 1) == 4 * 640
    assert impl.stage_activation_bytes("1f1b", 8, 24, 3, 1, 6, 5, 0) == 3 * 5 * 32 * 2   # one stage, one in flight
    # 4 micro-batches of [5, 8] each way: 2 · 4 · 40 values of 2 bytes
    assert impl.p2p_bytes_per_step(8, 5, 4) == 640
    assert impl.p2p_bytes_per_step(8, 5, 4, 4) == 1280


@IMPLS
@pytest.mark.parametrize("p, target, m", [
    (4, 0.08, 35),      # 3 / (m + 3) <= 0.08  <=>  m + 3 >= 37.5
    (5, 0.25, 12),      # 4 / 16 = 0.25 exactly, in binary too: a tie reaches the target
    (5, 0.2, 16),       # 4 / 20 = 0.2: a decimal tie, equal as floats
    (7, 0.03, 194),     # 6 / 200 = 0.03
    (6, 0.03, 162),     # 5 / (m + 5) <= 0.03  <=>  m + 5 >= 166.7
    (4, 0.9, 1),        # one micro-batch is enough: 3 / 4 <= 0.9
    (4, 0.0, None),     # the bubble never vanishes
    (4, -0.1, None),
    (1, 0.0, 1),        # one stage has no bubble
])
def test_fewest_microbatches_by_hand(impl, p, target, m):
    assert impl.min_microbatches(p, target) == m


def test_the_reference_refuses_impossible_inputs():
    for call in (lambda: ref.bubble_fraction(0, 4), lambda: ref.bubble_ratio(4, 0),
                 lambda: ref.step_seconds(4, 0, 1.0, 2.0), lambda: ref.interleaved_bubble_fraction(4, 8, 0),
                 lambda: ref.inflight_microbatches("1f1b", 4, 8, 4),      # stages are 0..3
                 lambda: ref.inflight_microbatches("1f1b", 4, 8, -1),
                 lambda: ref.stage_activation_bytes("1f1b", 8, 24, 5, 2, 4, 5, 0),   # 5 blocks on 2 stages
                 lambda: ref.min_microbatches(0, 0.1)):
        with pytest.raises(ValueError):
            call()


def test_worked_answers_of_the_default_course():
    cfg = load_config()
    d, f, blocks = cfg.model.d_model, cfg.model.d_ff, cfg.model.num_blocks
    pipe = cfg.pipeline
    p, m, t, v = pipe.stages, pipe.microbatches, pipe.tokens_per_microbatch, pipe.chunks
    w = ref.worked(cfg)
    t_f = 2 * (2 * t * d * f) * (blocks // p) / pipe.device.flops_per_second    # two matmuls per block
    assert w["t_f"].value == pytest.approx(t_f, rel=1e-12)
    assert w["fraction"].value == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)
    assert w["ratio"].value == pytest.approx((p - 1) / m, rel=1e-12)
    assert w["step"].value == pytest.approx((m + p - 1) * 3 * t_f, rel=1e-12)
    assert w["ideal"].value == pytest.approx(m * 3 * t_f, rel=1e-12)
    assert w["interleaved"].value == pytest.approx((p - 1) / (v * m + p - 1), rel=1e-12)
    one = (blocks // p) * t * (d + f) * 2
    assert w["act_microbatch"].value == one
    assert w["act_gpipe_first"].value == w["act_gpipe_last"].value == m * one
    assert (w["act_1f1b_first"].value, w["act_1f1b_last"].value) == (min(m, p) * one, one)
    assert w["p2p"].value == 2 * m * t * d * 2
    target = Fraction(pipe.target_bubble_percent, 100)
    bound = math.ceil((p - 1) * (1 - target) / target)
    assert w["min_m"].value == bound and Fraction(p - 1, bound + p - 1) <= target   # no tie in the course


# ---- the figure's ideal schedules: built from the stages' orders alone, they agree with the formulas

@pytest.mark.parametrize("p, m", [(4, 8), (4, 2), (1, 5), (6, 24), (5, 3), (3, 3)])
@pytest.mark.parametrize("kind", ["afab", "1f1b"])
def test_the_figures_schedule_takes_the_step_and_holds_the_in_flight_count(kind, p, m):
    ops = schedule(kind, p, m, 1.0, 2.0)
    assert max(op.end for op in ops) == pytest.approx((m + p - 1) * 3.0)          # (m + p - 1) slots of 3
    assert [peak_inflight(ops, s) for s in range(p)] == [m if kind == "afab" else min(m, p - s) for s in range(p)]
    for s in range(p):                                                           # a stage runs one op at a time
        mine = [op for op in ops if op.stage == s]
        assert len(mine) == 2 * m and all(a.end <= b.start + 1e-12 for a, b in zip(mine, mine[1:]))


# ---- reference against solutions, and the conventions' invariants, on random inputs

stages = st.integers(1, 128)
micro = st.integers(1, 4096)


@settings(max_examples=300, deadline=None)
@given(stages, micro, st.integers(1, 16), st.floats(1e-6, 10.0), st.floats(1e-6, 10.0))
def test_times_and_bubbles_agree(p, m, v, t_f, t_b):
    frac, ratio = ref.bubble_fraction(p, m), ref.bubble_ratio(p, m)
    assert sol.bubble_fraction(p, m) == pytest.approx(frac, rel=1e-12, abs=1e-15)
    assert sol.bubble_ratio(p, m) == pytest.approx(ratio, rel=1e-12, abs=1e-15)
    assert sol.step_seconds(p, m, t_f, t_b) == pytest.approx(ref.step_seconds(p, m, t_f, t_b), rel=1e-12)
    assert sol.interleaved_bubble_fraction(p, m, v) == pytest.approx(
        ref.interleaved_bubble_fraction(p, m, v), rel=1e-12, abs=1e-15)
    assert frac == pytest.approx(ratio / (1 + ratio), rel=1e-12, abs=1e-15)      # the two conventions
    assert 0 <= ref.interleaved_bubble_fraction(p, m, v) <= frac < 1
    # idle time over the step: the step's time less the ideal one
    assert frac == pytest.approx(1 - m * (t_f + t_b) / ref.step_seconds(p, m, t_f, t_b), rel=1e-9, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["1f1b", "afab", "gpipe"]), stages, micro, st.data())
def test_in_flight_and_bytes_agree(schedule_name, p, m, data):
    stage = data.draw(st.integers(0, p - 1))
    d, f = data.draw(st.integers(1, 2**15)), data.draw(st.integers(1, 2**17))
    blocks, tokens = p * data.draw(st.integers(1, 8)), data.draw(st.integers(0, 2**14))
    k = ref.inflight_microbatches(schedule_name, p, m, stage)
    assert sol.inflight_microbatches(schedule_name, p, m, stage) == k
    assert 1 <= k <= m
    args = (schedule_name, d, f, blocks, p, m, tokens, stage)
    assert sol.stage_activation_bytes(*args) == ref.stage_activation_bytes(*args)
    assert sol.p2p_bytes_per_step(d, tokens, m) == ref.p2p_bytes_per_step(d, tokens, m)
    assert sol.p2p_bytes_per_step(d, tokens, m, 4) == ref.p2p_bytes_per_step(d, tokens, m, 4)


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 64), st.one_of(st.floats(1e-4, 1.5), st.integers(1, 99).map(lambda k: k / 100),
                                     st.sampled_from([0.0, -0.5, 1 / 3, 0.1, 0.25])))
def test_fewest_microbatches_agree_and_are_fewest(p, target):
    m = ref.min_microbatches(p, target)
    assert sol.min_microbatches(p, target) == m
    if m is None:
        assert target < 0 or (target == 0 and p > 1)       # no m makes the fraction reach it
    else:
        assert ref.bubble_fraction(p, m) <= target
        assert m == 1 or ref.bubble_fraction(p, m - 1) > target
