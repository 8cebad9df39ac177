"""The kit's words name the cause where a run's record shows it (issue 29): a
deadlock of blocking sends, a BucketedDDP that never broadcast rank 0's weights,
and all-reduces that follow the student's own bucket layout (a layout mistake is
task 4.1's alone). The records here are written by hand in the shapes the
scenarios report them."""
import pytest

from shardlab.autograder.kit import verdict
from shardlab.autograder.kit.checks import buckets as checks
from shardlab.autograder.kit.scenarios.buckets import layout_bytes
from shardlab.autograder.sandbox import untrusted

pytestmark = pytest.mark.pure

ADVICE = verdict.PAIRING_ADVICE


def _timed_out_send(me: int, peer: int) -> tuple:
    """A rank's error as the grader's trusted process reports a send nobody received."""
    return ("error", {"error": f"send to rank {peer} (96 bytes, step 1) timed out: rank {peer} posted no "
                               f"matching recv from rank {me} of that size. {ADVICE} "
                               f"[in waiting for isend to rank {peer} #2 (96 bytes, step 1)]", "collectives": 2})


def test_two_ranks_blocked_in_sends_to_each_other_are_a_deadlock_named_with_its_way_out():
    state, text = verdict.failure(2, {0: _timed_out_send(0, 1), 1: _timed_out_send(1, 0)}, [None, None],
                                  [None, None])
    assert state == "hung"
    assert text.startswith("rank 0 hung: deadlock: ranks 0 and 1 each wait in a blocking send for the other's recv")
    assert "isend/irecv (or dist.batch_isend_irecv)" in text and "one stage receives before it sends" in text
    assert "Rank 0: send to rank 1 (96 bytes, step 1) timed out" in text and ADVICE not in text
    assert len(text) <= 500                     # one line of feedback (sandbox.untrusted.LINE_CAP)


def test_a_rank_still_blocked_counts_by_where_it_is():
    # rank 1 has not reported yet: the tracer's label says it waits in its send to rank 0 (the kit's
    # blocking send reads "send to rank 0 #5 (...)")
    for label in ("waiting for isend to rank 0 #3 (96 bytes, step 1)", "send to rank 0 #5 (96 bytes, step 1)"):
        _, text = verdict.failure(2, {0: _timed_out_send(0, 1)}, [None, label], [None, label])
        assert "deadlock: ranks 0 and 1" in text
    # three ranks around a ring
    where = [None, "send to rank 2 #4 (9 bytes, step 1)", "waiting for isend to rank 0 #4 (9 bytes, step 1)"]
    _, text = verdict.failure(3, {0: _timed_out_send(0, 1)}, where, where)
    assert "ranks 0, 1 and 2 each wait in a blocking send for the next one's recv" in text
    # no rank failed yet, the deadline passed: the same cause
    text = verdict.unfinished(2, {}, ["send to rank 1 #2 (96 bytes, step 1)",
                                      "send to rank 0 #2 (96 bytes, step 1)"], 5)
    assert text.startswith("did not finish within 5 s: rank 0 was stuck in send to rank 1") and "deadlock" in text


def test_a_send_waiting_for_a_rank_that_receives_elsewhere_is_no_deadlock_of_sends():
    # rank 1 waits in a recv from rank 0: the ranks disagree on the order, no cycle of sends
    recv = "waiting for irecv from rank 0 #2 (96 bytes, step 1)"
    _, text = verdict.failure(2, {0: _timed_out_send(0, 1)}, [None, recv], [None, recv])
    assert text.startswith("rank 0 hung: send to rank 1") and "deadlock" not in text and ADVICE in text
    assert verdict.send_cycle(2, {}, [None, None]) is None


def _timed_out_recv(me: int, peer: int, kit: bool) -> tuple:
    """A rank's error when a recv timed out: the kit's (gloo's own error, at the student's line) or the
    grader's trusted process's."""
    if kit:
        error = (f"RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
                 f"Timed out waiting 5000ms for recv operation to complete (assignments/pipeline.py, line 214) "
                 f"[in recv from rank {peer} #1 (96 bytes, step 1)]")
    else:
        error = (f"recv from rank {peer} (96 bytes, step 1) timed out: rank {peer} sent no matching message to "
                 f"rank {me} of that size. {ADVICE} [in waiting for irecv from rank {peer} #13 (96 bytes, step 1)]")
    return ("error", {"error": error, "collectives": 3})


@pytest.mark.parametrize("kit", [True, False], ids=["kit", "grader"])
def test_a_recv_from_a_rank_that_finished_names_every_rank_and_the_cause(kit):
    # a middle stage that takes itself for the last (issue 45): ranks 0 and 1 finish, rank 2 waits for
    # rank 1's activation, rank 3 for rank 2's
    where = [None, None, None, "recv from rank 2 #1 (96 bytes, step 1)"]
    state, text = verdict.failure(4, {2: _timed_out_recv(2, 1, kit)}, where, where, {0, 1})
    assert state == "hung"
    assert text.startswith("rank 2 hung: likely cause: rank 1 finished its step without sending rank 2 the "
                           "message it waits for")
    assert ("Ranks 0 and 1 finished; rank 2 was in " + ("" if kit else "waiting for i") + "recv from rank 1; "
            "rank 3 was in recv from rank 2.") in text
    assert ADVICE not in text and "/__w/" not in text and ".cc:" not in text
    assert len(text) <= 500
    # a hidden case still says only its fixed kind
    assert untrusted.failure_kind(text) == untrusted.DID_NOT_FINISH
    # the deadline passed with no rank failed: the same cause
    text = verdict.unfinished(4, {0: ("ok", 1), 1: ("ok", 1)}, [None, None, "recv from rank 1 #1 (96 bytes, step 1)",
                                                                 "recv from rank 2 #1 (96 bytes, step 1)"], 5)
    assert "ranks 0 and 1 finished" in text and "likely cause: rank 1 finished its step" in text


def test_two_ranks_that_both_receive_first_are_named():
    where = [None, "recv from rank 0 #1 (96 bytes, step 1)"]
    _, text = verdict.failure(2, {0: _timed_out_recv(0, 1, True)}, where, where)
    assert "likely cause: ranks 0 and 1 each wait in a recv for the other's send" in text


def _rank(all_reduces, layout=None, broadcasts=1, construction=1, state=None):
    return {"state": state or {"w": [1.0]}, "steps": [{"all_reduces": all_reduces, "other": [], "grads": 4}],
            "broadcasts": broadcasts, "construction_collectives": construction, "layout_bytes": layout}


def test_the_all_reduces_are_counted_against_the_students_own_layout():
    """tied at a 320-byte cap: the reference's buckets are 32 + 32 + 256 = 320 and 256 bytes; closed
    at the cap, 32 + 32 = 64, 256 and 256. Either layout, followed, passes; the message counts
    the student's own buckets."""
    reference, own = [256, 320], [64, 256, 256]
    theirs = [[64, 1, True], [256, 2, True], [256, 4, True]]
    assert checks.DDP_BUCKET_BYTES.problem(reference, [_rank(theirs, own)] * 2) is None
    assert checks.DDP_BUCKET_BYTES.problem(reference, [_rank([[320, 3, True], [256, 4, True]], own)] * 2) is None
    one = [[576, 4, False]]
    why = checks.DDP_BUCKET_BYTES.problem(reference, [_rank(one, own)] * 2)
    assert why == ("rank 0, step 1: 1 all-reduce(s) of [576] bytes; expected one per bucket of the layout your "
                   "assign_buckets gives (3), of the bucket's byte size")
    # without a layout of its own (or the reference's), the reference's count
    assert checks.DDP_BUCKET_BYTES.problem(reference, [_rank(one)] * 2).endswith(
        "expected one per bucket (2), of the bucket's byte size")
    assert checks.DDP_BUCKET_BYTES.problem(reference, [_rank(theirs)] * 2) is not None


def test_the_layout_is_read_only_when_it_places_every_parameter_once():
    sizes = [256, 256, 32, 32]
    assert layout_bytes([[3, 2], [1], [0]], sizes) == [64, 256, 256]
    for bad in ([[3, 2], [1]], [[3, 2, 1, 0], [0]], [[3, 2], [], [1, 0]], [[3, 2], [1, 9]], [[True, 2], [1, 0]],
                "[[3, 2, 1, 0]]", None):
        assert layout_bytes(bad, sizes) is None, bad


def test_training_apart_without_a_broadcast_is_named():
    expected = {"w": [1.0]}
    right, apart = _rank([], state={"w": [1.0]}), _rank([], state={"w": [2.0]}, broadcasts=0, construction=0)
    assert checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [right, right]) is None
    why = checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [apart, apart])
    assert why.startswith("no broadcast while BucketedDDP was constructed: every rank starts from its own "
                          "initial weights") and "broadcast rank 0's parameters and buffers in __init__" in why
    # a broadcast was made: the weights are wrong for another reason, said as before
    wrong = _rank([], state={"w": [2.0]})
    assert checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [wrong, wrong]).startswith("rank 0: 'w' differs")
