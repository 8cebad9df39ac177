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
