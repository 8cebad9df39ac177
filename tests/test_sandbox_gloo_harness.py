"""The gloo worker-group harness: real ranks, hostile rank code, bounded time,
nothing left behind. Student code here is a throwaway module `probe.py`."""
import textwrap
import time

import pytest

import shardlab.autograder.sandbox.gloo.group as group
from shardlab.autograder.sandbox.gloo.group import GlooLimits
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.core.parts import Call
from helpers import assert_nothing_left, module_submission

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(90)]

PROBE = textwrap.dedent('''
    import os, time
    import torch
    import torch.distributed as dist

    def ok():
        x = torch.ones(4) * (dist.get_rank() + 1)
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        return x.tolist()

    def spin(*_):
        while True:
            pass

    def skip_on_rank0():
        if dist.get_rank() != 0:
            dist.all_reduce(torch.ones(3))
        return "done"

    def exit_on_rank1():
        if dist.get_rank() == 1:
            os._exit(0)
        dist.all_reduce(torch.ones(3))

    def abort_on_rank1():
        if dist.get_rank() == 1:
            os.abort()
        dist.all_reduce(torch.ones(3))

    def size_mismatch():
        dist.all_reduce(torch.ones(2 + dist.get_rank()))

    def raises():
        raise ValueError("nope")

    def peek():
        import shardlab.reference
        return "read the answer key"

    def chatty():
        print("score: 100/100", flush=True)
        return dist.get_world_size()
''')

FAST = GlooLimits(collective_seconds=1.0, scenario_seconds=4.0, grace_seconds=0.3)


@pytest.fixture()
def probe_submission(tmp_path):
    """A submission holding only assignments/probe.py (PROBE)."""
    return module_submission(tmp_path, "probe", PROBE)


def _run(root, *functions, world_size=2):
    """Each function once (identical calls would run once), in order."""
    calls = [Call("probe", "run_function", {"world_size": world_size, "function": f, "args": []})
             for f in functions]
    start = time.monotonic()
    run = run_gloo(str(root), calls, gloo=FAST)
    return run, time.monotonic() - start


def test_ranks_run_collectives_and_are_traced(probe_submission, sessions):
    run, seconds = _run(probe_submission, "ok", "chatty", world_size=3)
    ok, chatty = run.outcomes
    assert ok.error is None and [r["value"] for r in ok.value] == [[6.0] * 4] * 3   # 1 + 2 + 3
    event = ok.value[0]["collectives"][0]
    assert {k: event[k] for k in ("op", "group", "bytes", "async", "dtype")} == \
        {"op": "all_reduce", "group": "world", "bytes": 16, "async": True, "dtype": "torch.float32"}
    assert [r["value"] for r in chatty.value] == [3, 3, 3]
    assert "score: 100/100" in run.output            # printed output is captured, never parsed
    assert run.restarts == 0                          # one group served both calls
    assert_nothing_left(sessions)


def test_a_rank_stuck_in_python_is_killed_at_the_deadline(probe_submission, sessions):
    calls = [Call("probe", "run_function", {"world_size": 2, "function": "spin", "args": args})
             for args in ([], [1])] + [Call("probe", "run_function", {"world_size": 2, "function": "ok"})]
    start = time.monotonic()
    run = run_gloo(str(probe_submission), calls, gloo=FAST)
    seconds = time.monotonic() - start
    hung, skipped, ok = run.outcomes
    assert hung.error.startswith("did not finish within 4 s")
    assert "rank 0 was running Python code" in hung.error
    assert skipped.error == "not run: an earlier spin run hung"
    assert ok.error is None                           # a fresh group carries on
    assert seconds < 5 * (4 + 4)                      # 5x: the 4 s deadline and two group starts (about 2 s each)
    assert_nothing_left(sessions)


def test_a_skipped_collective_names_the_waiting_rank_and_collective(probe_submission, sessions):
    run, seconds = _run(probe_submission, "skip_on_rank0", "ok")
    stuck, ok = run.outcomes
    assert stuck.error.startswith("rank 1 hung:")
    assert "[in all_reduce #1 (12 bytes, skip_on_rank0)]" in stuck.error
    assert ok.error is None
    assert seconds < 5 * 4          # 5x what it takes: two group starts and the run, not the 4 s deadline
    assert_nothing_left(sessions)


@pytest.mark.parametrize("function", ["exit_on_rank1", "abort_on_rank1"])
def test_a_dying_rank_fails_the_scenario_not_the_grader(probe_submission, sessions, function):
    run, seconds = _run(probe_submission, function, "ok")
    died, ok = run.outcomes
    assert died.error == "rank 1 ended its process before its first collective"
    assert ok.error is None
    assert seconds < 5 * 4          # 5x what it takes: two group starts and the run, not the 4 s deadline
    assert_nothing_left(sessions)


def test_mismatched_collectives_fail_fast_with_both_ranks_named(probe_submission, sessions):
    run, seconds = _run(probe_submission, "size_mismatch", "ok")
    bad, ok = run.outcomes
    assert "the ranks called different collectives" in bad.error
    assert "shape [2]" in bad.error and "shape [3]" in bad.error
    assert ok.error is None
    assert seconds < 5 * 4          # 5x: failing at the first mismatch, before collective timeouts pile up
    assert_nothing_left(sessions)


def test_exceptions_and_blocked_imports_are_results(probe_submission, sessions):
    run, _ = _run(probe_submission, "raises", "peek", "ok")
    raised, peek, ok = run.outcomes
    assert raised.error.startswith("rank 0: ValueError: nope")
    assert "importing 'shardlab' is not allowed" in peek.error
    assert ok.error is None
    assert run.restarts == 0        # every rank failed before its first collective: group reused
    assert_nothing_left(sessions)


def test_a_stalled_group_start_is_retried_once(probe_submission, sessions, monkeypatch):
    """A rank start that fails (before any student code) costs one retry, not the scenario."""
    real_init, attempts = group.WorkerGroup.__init__, []

    def flaky_init(self, server, world_size):
        attempts.append(world_size)
        if len(attempts) == 1:
            raise group.GroupError("rank 0 did not join the process group (stuck in the gloo rendezvous)")
        real_init(self, server, world_size)
    monkeypatch.setattr(group.WorkerGroup, "__init__", flaky_init)
    run, _ = _run(probe_submission, "ok")
    assert run.outcomes[0].error is None and attempts == [2, 2]
    assert_nothing_left(sessions)


def test_ranks_ready_before_the_grader_reads_their_hello_are_not_lost(probe_submission, sessions, monkeypatch):
    """A rank says hello and then ready on its connection; when the grader is slow to read (a
    loaded machine), both lines come in one read. The ready line must count then: it was once left
    in the buffer while the grader waited for more, and the group start stalled until its timeout
    (the "rare rendezvous stall" of a full grading)."""
    real_connect = group.WorkerGroup._connect

    def slow_connect(self, listener):
        time.sleep(3.0)                 # every rank has joined and said both lines by now
        return real_connect(self, listener)
    monkeypatch.setattr(group.WorkerGroup, "_connect", slow_connect)
    starts = []
    real_init = group.WorkerGroup.__init__

    def counted_init(self, server, world_size):
        starts.append(world_size)
        real_init(self, server, world_size)
    monkeypatch.setattr(group.WorkerGroup, "__init__", counted_init)
    calls = [Call("probe", "run_function", {"world_size": 3, "function": "ok", "args": []})]
    run = run_gloo(str(probe_submission), calls, gloo=GlooLimits(join_seconds=2.0))
    assert run.outcomes[0].error is None, run.outcomes[0].error
    assert starts == [3]                # one start: none stalled and was retried
    assert_nothing_left(sessions)
