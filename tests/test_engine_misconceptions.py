"""A misconception is named only when it is the one explanation of a wrong
value (`core.parts.alternatives`): never when the mistake gives the right
answer, never when another known mistake gives the same value. Its message
names the course's own devices. Numbers derived here by hand."""
import pytest

from shardlab.autograder.core import content
from shardlab.autograder.core.parts import Call, Case, alternatives
from shardlab.autograder.engine.grading import score_part
from shardlab.autograder.engine.plan import find_part
from shardlab.autograder.sandbox.process import Outcome
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

A100 = content.folder("reference") / "courses" / "a100.toml"
# the second course's training state: 16 · 2 · 8192 · 53248 · 80 = 1,116,691,496,960 bytes (exactly
# 1,040 GiB); on an 80 GB device that is 13.96 devices: ceil 14, floor 13, and 1,040 "GB" / 80 = 13 with
# GiB mixed in, ceil 13. Floor and the GiB mix-up give the same 13 there.
STATE = 1_116_691_496_960


def _case(total, device):
    return find_part("1.4"), Case((Call("memory", "devices_needed", {"total_bytes": total, "device_bytes": device}),),
                                  False, "a case")


def _feedback(part, case, value, cfg):
    part = part.for_course(cfg)
    return score_part(part, 1, [case], [part.expect(case)], [[Outcome(value=value)]]).feedback


def test_two_mistakes_that_give_the_same_value_name_neither():
    part, case = _case(STATE, 80 * 10**9)
    assert part.expect(case) == [14]
    assert alternatives(part, case, [14]) == []           # floor 13 and GiB 13: not told apart
    feedback = _feedback(part, case, 13, load_config(A100))
    assert "GiB" not in feedback and "rounding down" not in feedback and "13" not in feedback.split("|")[0]


def test_a_mistake_alone_in_its_value_is_named_with_the_courses_device():
    """On 40 GB: 27.92 devices, ceil 28, floor 27; GiB: 1,040 / 40 = 26 exactly, ceil 26."""
    cfg = load_config(A100)
    part, case = _case(STATE, 40 * 10**9)
    named = {mis.name: values for mis, values in alternatives(part, case, [28])}
    assert named == {"GiB for GB": [26], "floor for ceil": [27]}
    assert "rounding down" in _feedback(part, case, 27, cfg)
    gib = _feedback(part, case, 26, cfg)
    assert "GiB" in gib and "this course's A100 40GB, 40 GB, holds 40,000,000,000 bytes" in gib
    assert "H100" not in gib
    assert "this course's H100, 80 GB, holds 80,000,000,000 bytes" in _feedback(part, case, 26, load_config())


def test_a_mistake_that_gives_the_right_answer_is_not_an_alternative():
    """160 GB on 80 GB devices: exactly 2; floor gives 2, and 149.01 GiB / 80 rounds up to 2 as well."""
    part, case = _case(160 * 10**9, 80 * 10**9)
    assert part.expect(case) == [2] and alternatives(part, case, [2]) == []
    assert "this matches" not in _feedback(part, case, 3, load_config(A100))


# ---- the mistakes whose cause the feedback names (issue 29), values derived by hand ----------------------

def _call_case(part_id, module, function, **args):
    return find_part(part_id), Case((Call(module, function, args),), True, "")


def _named(part, case):
    return {mis.name: values for mis, values in alternatives(part, case, part.expect(case))}


def test_a_block_output_counted_twice_is_named():
    """d = 8, f = 24, 3 blocks, 5 tokens: 3 · 5 · (8 + 24) · 2 = 960 bytes. The output counted
    beside the inputs: 3 · 5 · (8 + 24 + 8) · 2 = 1200; in FP32: 1920."""
    part, case = _call_case("1.3", "memory", "activation_bytes", d_model=8, d_ff=24, num_blocks=3, tokens=5)
    assert part.expect(case) == [960]
    assert _named(part, case) == {"activations in FP32": [1920], "block output counted twice": [1200]}
    assert "counting each block's output" in _feedback(part, case, 1200, load_config())
    # no tokens, nothing saved, whatever is counted per token: no mistake to name
    part, case = _call_case("1.3", "memory", "activation_bytes", d_model=8, d_ff=24, num_blocks=3, tokens=0)
    assert _named(part, case) == {}


def test_zero_stages_in_reverse_order_are_named():
    """P = 1e9 on 8 devices. Stage 1: 4P + 12P/8 = 5.5e9; weights sharded first: 2P/8 + 2P + 12P
    = 14.25e9. Stage 2: 2P + 14P/8 = 3.75e9; reversed 4P/8 + 12P = 12.5e9. Stage 3 shards all
    16P either way (2e9): the order cannot show."""
    for stage, right, reversed_ in ((1, 5.5e9, 14.25e9), (2, 3.75e9, 12.5e9)):
        part, case = _call_case("1.7", "memory", "zero_bytes_per_device", num_params=10**9, stage=stage, n_dp=8)
        assert part.expect(case) == [right]
        assert _named(part, case)["stages in reverse order"] == [reversed_]
        assert "stages in the reverse order" in _feedback(part, case, reversed_, load_config())
    part, case = _call_case("1.7", "memory", "zero_bytes_per_device", num_params=10**9, stage=3, n_dp=8)
    assert part.expect(case) == [2e9] and "stages in reverse order" not in _named(part, case)


def test_a_missing_clamp_to_one_device_is_named():
    """10 tokens, 1000 parameters, alpha 0.002, beta = C = 1e6, 30 bytes/param: (2·10/1e6 − 30/1e6)
    · 1000 = −0.01, so the answer is 1.0; unclamped 2^(−0.01/0.002) = 2^−5 = 0.03125. The natural
    log clamps too (1.0): only the missing clamp explains 0.03125."""
    args = dict(tokens=10, unit_params=1000, alpha=0.002, beta=1e6, flops_per_second=1e6, bytes_per_param=30)
    part, case = _call_case("2.4", "fsdp", "max_devices_before_comm_bound", **args)
    assert part.expect(case) == [1.0]
    named = _named(part, case)
    assert list(named) == ["no clamp to 1"] and named["no clamp to 1"][0] == pytest.approx(0.03125, rel=1e-9)
    assert "without its floor at one device" in _feedback(part, case, 0.03125, load_config())
    # 2 bytes/param: (2e-5 − 2e-6) · 1000 = 0.018, 2^9 = 512 either way
    part, case = _call_case("2.4", "fsdp", "max_devices_before_comm_bound", **dict(args, bytes_per_param=2))
    assert part.expect(case) == [512.0] and "no clamp to 1" not in _named(part, case)


def test_an_all_reduce_of_gradients_is_named():
    """1e9 BF16 parameters on 8 ranks: 3 · 7/8 · 2e9 = 5.25e9 bytes; with the gradients all-reduced,
    (1 + 1 + 2) · 7/8 · 2e9 = 7e9; two collectives: 3.5e9. One rank: 0 bytes every way."""
    part, case = _call_case("2.6", "fsdp", "step_comm_bytes", num_params=10**9, p=8, bytes_per_param=2)
    assert part.expect(case) == [5.25e9]
    assert _named(part, case) == {"two collectives": [3.5e9], "all-reduce of gradients": [7e9]}
    assert "all-reduce of the gradients" in _feedback(part, case, 7e9, load_config())
    part, case = _call_case("2.6", "fsdp", "step_comm_bytes", num_params=10**9, p=1, bytes_per_param=2)
    assert _named(part, case) == {}


def test_a_bucket_closed_at_the_cap_is_named():
    """[4, 4, 4] bytes, cap 8, from the last: 4 + 4 = 8 fills the first bucket exactly, [[2, 1], [0]];
    closed at the cap, [[2], [1], [0]]; forward fill [[0, 1], [2]]. [500] · 4 at 1000: [[3, 2], [1, 0]],
    closed at the cap one each. [100, 5000, 100] at 1000 never reaches the cap exactly: not named."""
    part, case = _call_case("4.1", "buckets", "assign_buckets", param_bytes=[4, 4, 4], bucket_bytes=8)
    assert part.expect(case) == [[[2, 1], [0]]]
    assert _named(part, case) == {"forward fill": [[[0, 1], [2]]], "closed at the cap": [[[2], [1], [0]]]}
    assert "fill it exactly to the cap" in _feedback(part, case, [[2], [1], [0]], load_config())
    part, case = _call_case("4.1", "buckets", "assign_buckets", param_bytes=[500] * 4, bucket_bytes=1000)
    assert _named(part, case)["closed at the cap"] == [[[3], [2], [1], [0]]]
    part, case = _call_case("4.1", "buckets", "assign_buckets", param_bytes=[100, 5000, 100], bucket_bytes=1000)
    assert "closed at the cap" not in _named(part, case)


def test_the_result_records_the_named_mistake_and_the_kinds_of_failure_for_the_class_report():
    """On 40 GB devices the GiB mix-up alone gives 26 (above): the result names it with the words the
    feedback used; a right answer records nothing; a call that hung and one the budget stopped count apart."""
    cfg = load_config(A100)
    part, case = _case(STATE, 40 * 10**9)
    part = part.for_course(cfg)
    wrong = score_part(part, 1, [case], [part.expect(case)], [[Outcome(value=26)]])
    gib = next(m for m in part.misconceptions if m.name == "GiB for GB")
    assert wrong.misconceptions == [{"name": "GiB for GB", "message": gib.message}]
    assert gib.message in wrong.feedback and wrong.failures == {"wrong value": 1}
    right = score_part(part, 1, [case], [part.expect(case)], [[Outcome(value=28)]])
    assert right.misconceptions == [] and right.failures == {}
    hung = [Outcome(error="devices_needed(...) did not finish within 10 s"),
            Outcome(error="did not finish: the grading's time budget ran out before it could run")]
    stopped = score_part(part, 1, [case, case], [part.expect(case)] * 2, [[hung[0]], [hung[1]]])
    assert stopped.failures == {"did not finish in time": 1, "stopped by the grading's time budget": 1}
    assert stopped.misconceptions == []
