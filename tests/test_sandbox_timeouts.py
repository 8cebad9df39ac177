"""A call that does not finish costs its case group only (sandbox/process.py,
`Call.group`): the worker is replaced, the rest of that group is not run, and
every other group's calls, of the same function too, are run and graded. The
handout promises it (templates/conventions.md.j2: "one missed edge case costs
only its share"); before, a hang failed every later call of the function.

The scores are worked out by hand from autograder/questions/memory/__init__.py
and docs/spec.md: 1.6 `min_fsdp_degree` is worth 2 points over 7 groups (the
course model, the public "other inputs" with the random ones, and five edge
cases), 2/7 each; the linear search returns None at act = 2 x capacity, right.
"""
from __future__ import annotations

import time

import pytest

from shardlab.autograder.core.parts import Call
from shardlab.autograder.engine.grading import grade_folder
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.autograder.sandbox.process import Limits, run_calls

FAST = Limits(call_seconds=2.0, import_seconds=30.0)

# Task 1.6 as a linear search over n: fits when (S + A/2)/n + A/2 < C, i.e. 2S + A < n (2C - A). The degrees of
# the public, random and course cases are at most thousands of steps; the hidden "edge case: barely fits"
# (A = 2C - 2) needs n > S + C - 1, i.e. n = S + C, about 10^12 steps: it never finishes
LINEAR_SEARCH = '''

def min_fsdp_degree(state_bytes, activation_bytes, device_bytes):
    if activation_bytes >= 2 * device_bytes:
        return None
    n = 1
    while 2 * state_bytes + activation_bytes >= n * (2 * device_bytes - activation_bytes):
        n += 1
    return n
'''


@pytest.mark.sandbox
def test_a_slow_edge_case_costs_its_group_only(cfg, submission):
    root = submission(memory=(SOLUTIONS / "memory.py").read_text() + LINEAR_SEARCH)
    start = time.monotonic()
    memory = next(q for q in grade_folder(root, cfg, FAST, modules={"memory"}).questions if q.id == "1")
    assert time.monotonic() - start < 60            # one hang: one call's deadline, not a minute
    part = next(p for p in memory.parts if p.id == "1.6")
    share = 2 / 7
    assert [(g.name, g.score) for g in part.groups] == [
        (f"the course model on {cfg.memory.fsdp_device.name}", share), ("other inputs", share),
        ("edge case: no FSDP degree fits", share), ("edge case: barely fits", 0.0),
        ("edge case: equality is not enough", share), ("edge case: half the activations fill the device", share),
        ("edge case: fits on one device", share)]
    assert part.score == pytest.approx(2 * 6 / 7) and part.max_score == 2
    assert "a hidden case of min_fsdp_degree (edge case: barely fits): did not finish in time" in part.feedback
    # every other part of the module graded as the solutions are: full marks
    assert [(p.id, p.score) for p in memory.parts if p.id != "1.6" and p.kind == "auto"] == \
        [(p.id, p.max_score) for p in memory.parts if p.id != "1.6" and p.kind == "auto"]


SLOW = '''
def wait(n):
    while n < 0:        # never returns for a negative n
        pass
    return n
'''


@pytest.mark.sandbox
def test_after_a_hang_only_the_rest_of_its_group_is_skipped(tmp_path):
    (tmp_path / "assignments").mkdir()
    (tmp_path / "assignments" / "slow.py").write_text(SLOW)

    def wait(n, group):
        return Call("slow", "wait", {"n": n}, group)

    calls = [wait(-1, ("9.1", "a")), wait(1, ("9.1", "a")),      # hangs, then its group's next call
             wait(2, ("9.1", "b")),                              # another group of the same part and function
             wait(-2, None), wait(3, None),                      # no group: each call a group of its own
             wait(4, ("9.2", "a"))]                              # a group of the same name in another part
    run = run_calls(str(tmp_path), calls, Limits(call_seconds=1.0, import_seconds=30.0))
    assert [(o.value, o.error) for o in run.outcomes] == [
        (None, "wait(n=-1) did not finish within 1 s"),
        (None, "not run: an earlier call in the same case group did not finish"),
        (2, None),
        (None, "wait(n=-2) did not finish within 1 s"),
        (3, None),
        (4, None)]
    # after the first hang the four groups left run side by side, a worker each (issue 34; one after another,
    # a fresh worker after each hang: 2, tests/test_sandbox_plain_hangs.py)
    assert run.restarts == 4


@pytest.mark.pure
def test_the_group_is_not_part_of_the_call():
    """Two calls of the same function and inputs are the same call wherever they are graded
    (the gloo probe runs one of several parts' identical calls once), and show the same."""
    graded = Call("memory", "param_count", {"d_model": 8}, ("1.1", "a tiny model"))
    assert graded == Call("memory", "param_count", {"d_model": 8})
    assert graded.show() == "param_count(d_model=8)"
