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


def _rank(all_reduces, layout=None, broadcasts=1, construction=1, state=None, grads=None):
    return {"state": state or {"w": [1.0]}, "steps": [{"all_reduces": all_reduces, "other": [], "grads": 4}],
            "broadcasts": broadcasts, "construction_collectives": construction, "layout_bytes": layout,
            "grads": grads if grads is not None else [{"w": [0.5]}]}


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
    expected = {"state": {"w": [1.0]}, "grads": [{"w": [0.5]}], "buffers": []}
    right, apart = _rank([], state={"w": [1.0]}), _rank([], state={"w": [2.0]}, broadcasts=0, construction=0)
    assert checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [right, right]) is None
    why = checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [apart, apart])
    assert why.startswith("no broadcast while BucketedDDP was constructed: every rank starts from its own "
                          "initial weights") and "broadcast rank 0's parameters and buffers in __init__" in why
    # a broadcast was made: the weights are wrong for another reason, said as before
    wrong = _rank([], state={"w": [2.0]})
    assert checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [wrong, wrong]).startswith("rank 0: 'w' differs")


# ---- Task 4.5 step by step (issue 43): .grad after finish_gradient_synchronization() --------------

ONE_PROCESS = {"state": {"w": [1.0, -2.0], "shift": [0.3]}, "grads": [{"w": [0.5, -0.25]}, {"w": [0.1, 0.2]}],
               "buffers": ["shift"]}


def _trained(grads, state=None):
    return _rank([], state=state or {"w": [1.0, -2.0], "shift": [0.3]}, grads=grads)


def test_gradients_off_by_a_factor_are_said_as_that_factor_whatever_the_final_weights():
    twice = [{"w": [1.0, -0.5]}, {"w": [0.2, 0.4]}]
    # the final weights are right (as AdamW nearly makes them): the gradients alone fail it
    why = checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, [_trained(twice)] * 3)
    assert why == ("step 1: your synchronized gradients are 2x the expected ones (every trainable "
                   "parameter's .grad after finish_gradient_synchronization())")
    # on two ranks the world size is 2 too: both causes are said, neither alone
    why = checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, [_trained(twice)] * 2)
    assert "2x the expected ones" in why and "summed over the ranks instead of averaged, or each gradient " \
        "accumulated twice" in why
    thrice = [{"w": [1.5, -0.75]}, {"w": [0.3, 0.6]}]
    assert "3x the expected ones" in checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, [_trained(thrice)] * 3)
    assert checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, [_trained(ONE_PROCESS["grads"])] * 2) is None


def test_a_wrong_gradient_at_a_later_step_or_a_missing_one_is_named_by_step_rank_and_parameter():
    later = [{"w": [0.5, -0.25]}, {"w": [0.1, 0.9]}]
    why = checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, [_trained(ONE_PROCESS["grads"]), _trained(later)])
    assert why.startswith("step 2: rank 1's 'w'.grad after finish_gradient_synchronization() differs from the "
                          "one-process gradient of the mean loss over the whole batch by up to 0.7")
    missing = [{"w": None}, {"w": [0.1, 0.2]}]
    assert checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, [_trained(missing)] * 2) == (
        "step 1: rank 0's 'w' has no .grad after finish_gradient_synchronization()")


def test_a_buffer_never_broadcast_is_named_at_its_worst_rank():
    own = {"w": [1.0, -2.0], "shift": [0.9]}
    right = _trained(ONE_PROCESS["grads"])
    ranks = [right, _trained(ONE_PROCESS["grads"], {**own, "shift": [0.5]}), _trained(ONE_PROCESS["grads"], own)]
    why = checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, ranks)
    assert why.startswith("rank 2: buffer 'shift' differs from rank 0's by up to 0.6")
    assert "broadcast rank 0's buffers in __init__ as well as its parameters" in why
    # rank 0's own buffer wrong: not a missing broadcast, so not named as one
    ranks = [_trained(ONE_PROCESS["grads"], own)] * 2
    assert "buffer" not in checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, ranks)


def _overlap(all_reduces, order=(4, 3, 2, 1, 0)):
    step = {"all_reduces": all_reduces, "other": [], "grads": len(order), "grad_order": list(order)}
    return {"steps": [step], "layout": None}


def test_each_bucket_starts_as_soon_as_it_is_complete():
    """frozen_mlp at 256 bytes (docs/spec.md, question 4): the buckets [4, 3, 2] (220 bytes), [1] (40)
    and [0] (240) are complete with gradients 3, 4 and 5; an all-reduce counts as soon as it starts
    before the next gradient: grads_before at most 3, 4 and 5, outside finish_gradient_synchronization()."""
    expected = {"layout": [[4, 3, 2], [1], [0]], "param_bytes": [240, 40, 160, 48, 12]}
    on_time = [[220, 3, True, False], [40, 4, True, False], [240, 5, True, False]]
    assert checks.DDP_OVERLAP.problem(expected, [_overlap(on_time)]) is None
    # from a hook that runs before the gradient is accumulated: one gradient earlier still counts
    assert checks.DDP_OVERLAP.problem(expected, [_overlap([[220, 2, True, False], *on_time[1:]])]) is None
    late = [[220, 4, True, False], [40, 5, True, False], [240, 5, True, True]]
    assert checks.DDP_OVERLAP.problem(expected, [_overlap(late)]) == (
        "rank 0, step 1: the bucket of 220 bytes was complete with gradient 3 of 5, but its all-reduce started "
        "only after gradient 4: start each bucket's all-reduce from the hook of its last gradient, before "
        "backward produces the next one")
    last_in_finish = on_time[:2] + [[240, 5, True, True]]
    assert "the bucket of 240 bytes was complete with gradient 5 of 5, but its all-reduce started only inside " \
        "finish_gradient_synchronization()" in checks.DDP_OVERLAP.problem(expected, [_overlap(last_in_finish)])
    # all-reduces that follow no layout are Task 4.6's: here only one must start, async, during backward
    assert checks.DDP_OVERLAP.problem(expected, [_overlap([[260, 4, True, False], [240, 5, True, False]])]) is None


# ---- Task 2.7 step by step, 2.8 unit by unit (issue 43) ---------------------------------------------

def test_fsdp_shards_are_judged_by_their_gradients_and_a_trainable_frozen_shard_is_named():
    from shardlab.autograder.kit.checks import fsdp
    # two units of 3 and 1 elements per rank; a frozen layer whose shard would hold 2
    expected = {"state": {"w": [1.0]}, "shards": [[[[0.5, 0.25, 0.0], [1.0]]]], "frozen": {"fc2.weight": 2}}

    def rank(*shards):
        return {"state": {"w": [1.0]}, "grads": [[{"numel": len(g), "grad": g} for g in shards]]}
    right = rank([1.0], [0.5, 0.25, 0.0])              # in another order: paired by size
    assert fsdp.FSDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [right]) is None
    assert fsdp.FSDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [rank([1.0, 0.5, 0.0], [2.0])]) == (
        "step 1: your synchronized gradients are 2x the expected ones (each shard's .grad after "
        "finish_gradient_synchronization())")
    why = fsdp.FSDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [rank([0.5, 0.25, 0.0], [1.0], [0.1, 0.2])])
    assert why.startswith("step 1: rank 0: a trainable shard of 2 elements, the size of frozen 'fc2.weight''s shard")
    # another layout (weight and bias apart): 2.9's to judge, only the final weights here
    assert fsdp.FSDP_TRAINS_LIKE_ONE_PROCESS.problem(expected, [rank([0.5, 0.25], [1.0])]) is None


def test_a_shard_over_its_units_share_fails_storage_even_within_the_total():
    from shardlab.autograder.kit.checks import fsdp
    expected = {"budget": 169, "units": 1, "shares": [35, 20, 8]}
    steps = [[["all_gather_single", "forward", 0, True, 1]]]
    value = {"stored": 128, "steps": steps, "grads": [[{"numel": n, "grad": None} for n in (40, 24, 8)]]}
    assert fsdp.FSDP_STORAGE.problem(expected, [value]).startswith(
        "rank 0: a shard of 40 elements where a unit's share is at most 35")
    value["grads"] = [[{"numel": n, "grad": None} for n in (35, 20, 8)]]
    assert fsdp.FSDP_STORAGE.problem(expected, [value]) is None


def test_the_kits_async_results_reach_the_tensor_only_when_waited_for():
    """The kit's ranks (hold_results) settle the race a grading settles: a result read before its
    wait() is the tensor as it was, every time, and is_completed() waits."""
    import torch
    from shardlab.autograder.kit.tracing import Tracer

    class Done:                          # a collective already complete when it returns
        def wait(self, *args, **kwargs):
            return True

    def all_reduce(tensor, op=None, group=None, async_op=False):
        tensor.add_(1.0)
        return Done()
    for hold, before in ((True, [0.0, 0.0]), (False, [1.0, 1.0])):
        traced = Tracer(hold_results=hold)._wrap("all_reduce", all_reduce)
        t = torch.zeros(2)
        work = traced(t, async_op=True)
        assert t.tolist() == before
        assert work.is_completed() and t.tolist() == [1.0, 1.0]
        work.wait()
        assert t.tolist() == [1.0, 1.0]          # written once


def test_gradients_a_hair_off_are_not_said_as_a_factor_of_one():
    # found by the mutation sweep: grad_x scaled by 1.0001 fitted c = 1.0001, said "1x"
    hair = [{"w": [0.5 * 1.0009, -0.25 * 1.0009]}, {"w": [0.1, 0.2]}]
    why = checks.DDP_TRAINS_LIKE_ONE_PROCESS.problem(ONE_PROCESS, [_trained(hair)] * 3)
    assert why.startswith("step 1: rank 0's 'w'.grad after finish_gradient_synchronization() differs"), why
