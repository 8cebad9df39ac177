"""The trusted ranks' own collective-fingerprint check (`sandbox.gloo.ranks.fingerprint`, on the
group's shared board, `ranks.board`), which replaced torch's TORCH_DISTRIBUTED_DEBUG=DETAIL
wrapper in grading: the same words for a mismatch and for a rank that never arrives.
Expected texts are torch's formats, written out by hand."""
import textwrap

import pytest
import torch

from shardlab.autograder.core.parts import Call
from shardlab.autograder.kit.tracing import explain
from shardlab.autograder.sandbox.gloo.group import GlooLimits
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.sandbox.gloo.ranks.board import Board, create_board
from shardlab.autograder.sandbox.gloo.ranks.fingerprint import FingerprintCheck, fingerprint, mismatch
from helpers import assert_nothing_left, module_submission

PROBE = textwrap.dedent('''
    import torch
    import torch.distributed as dist

    def debug_level():
        return str(dist.get_debug_level())

    def rank2_skips():
        if dist.get_rank() != 2:
            dist.all_reduce(torch.ones(3))
        return "done"

    def send_then_barrier():
        if dist.get_rank() == 0:
            dist.send(torch.ones(2), 1)
        if dist.get_rank() == 1:
            dist.recv(torch.ones(2), 0)
        dist.barrier()

    def own_sizes():
        # every rank its own size: the check must stop them before gloo sees them
        dist.broadcast(torch.ones(2 + dist.get_rank()), 0)
''')

FAST = GlooLimits(collective_seconds=1.0, scenario_seconds=6.0, grace_seconds=0.3)


@pytest.fixture()
def fingerprint_probe(tmp_path):
    return module_submission(tmp_path, "probe", PROBE)


def _errors(root, world_size, *functions):
    calls = [Call("probe", "run_function", {"world_size": world_size, "function": f, "args": []})
             for f in functions]
    return run_gloo(str(root), calls, gloo=FAST).outcomes


@pytest.mark.sandbox
@pytest.mark.timeout(90)
def test_grading_ranks_run_without_torchs_wrapper_and_still_name_a_mismatch(fingerprint_probe, sessions):
    level, sizes = _errors(fingerprint_probe, 2, "debug_level", "own_sizes")
    assert [r["value"] for r in level.value] == ["DebugLevel.OFF"] * 2
    # rank 0's input of shape [2] against rank 1's [3], both their first op (torch counts from 0)
    # which rank's words come first is a race (`verdict.failure`: the lowest rank heard within the grace)
    assert sizes.error in ("rank 0: the ranks called different collectives: rank 0 called broadcast of shape [2] "
                           "as its collective #0, but rank 1 called broadcast of shape [3] as its collective #0 "
                           "[in broadcast #1 (8 bytes, own_sizes)]",
                           "rank 1: the ranks called different collectives: rank 1 called broadcast of shape [3] "
                           "as its collective #0, but rank 0 called broadcast of shape [2] as its collective #0 "
                           "[in broadcast #1 (12 bytes, own_sizes)]")
    assert_nothing_left(sessions)


@pytest.mark.sandbox
@pytest.mark.timeout(90)
def test_the_first_rank_names_the_rank_that_never_arrived(fingerprint_probe, sessions):
    (stuck,) = _errors(fingerprint_probe, 3, "rank2_skips")
    # ranks 0 and 1 time out together; rank 0's words are shown when it is heard within the grace
    assert stuck.error.startswith(("rank 0 hung: RuntimeError: [Rank 0]: Ranks 2 failed to pass monitoredBarrier "
                                   "in 1000 ms [in all_reduce #1",
                                   "rank 1 hung: RuntimeError: Rank 1 successfully reached monitoredBarrier, but "
                                   "received errors while waiting for send/recv from rank 0."))
    check = FingerprintCheck(board=None, timeout_seconds=1.0, world_size=3)   # type: ignore[arg-type]
    assert str(check.timed_out(0, [2])) == "[Rank 0]: Ranks 2 failed to pass monitoredBarrier in 1000 ms"
    assert_nothing_left(sessions)


@pytest.mark.sandbox
@pytest.mark.timeout(90)
def test_ranks_a_send_put_out_of_step_meet_at_their_next_collective(fingerprint_probe, sessions):
    """Ranks 0 and 1 ran one point-to-point op each, rank 2 none: at the barrier they meet (their
    first collective each) and differ in sequence number, 1 against 0: a mismatch, not a hang."""
    (skewed,) = _errors(fingerprint_probe, 3, "send_then_barrier")
    assert "the ranks called different collectives" in skewed.error
    assert "barrier of shape [] as its collective #1" in skewed.error
    assert "barrier of shape [] as its collective #0" in skewed.error
    assert_nothing_left(sessions)


@pytest.mark.pure
def test_fingerprints_differ_in_op_shape_dtype_and_sequence_only():
    x = torch.ones(2, 3)
    base = fingerprint("all_reduce", 4, {"tensor": x})
    assert fingerprint("all_reduce", 4, {"tensor": torch.zeros(2, 3)}) == base       # values are not part of it
    assert base[1:2] + base[3:] == [4, 2, 2, 3, 0, 0, 0, 0]          # sequence number; ndim 2, shape 2 x 3
    for other in (fingerprint("broadcast", 4, {"tensor": x}), fingerprint("all_reduce", 5, {"tensor": x}),
                  fingerprint("all_reduce", 4, {"tensor": torch.ones(3, 2)}),
                  fingerprint("all_reduce", 4, {"tensor": x.double()})):
        assert other[0] != base[0]
    # the output of a flat all-gather counts too, though the message shows the input
    small = fingerprint("all_gather_into_tensor", 0, {"output_tensor": torch.ones(4), "input_tensor": torch.ones(2)})
    big = fingerprint("all_gather_into_tensor", 0, {"output_tensor": torch.ones(6), "input_tensor": torch.ones(2)})
    assert small[0] != big[0] and small[3:5] == big[3:5] == [1, 2]


@pytest.mark.pure
def test_a_mismatch_reads_as_torchs_and_explains_in_one_sentence():
    rows = [fingerprint("all_reduce", 1, {"tensor": torch.ones(2)}),
            fingerprint("all_reduce", 1, {"tensor": torch.ones(2)}),
            fingerprint("all_reduce", 1, {"tensor": torch.ones(3)})]
    assert mismatch(rows[:2], 0) is None
    text = mismatch(rows, 1)
    assert text.startswith("Detected mismatch between collectives on ranks. Rank 1 is running collective: "
                           "CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[2]), but "
                           "Rank 2 is running collective: CollectiveFingerPrint(SequenceNumber=1, "
                           "OpType=ALLREDUCE, TensorShape=[3])")
    assert explain(RuntimeError(text)) == ("the ranks called different collectives: rank 1 called allreduce of "
                                           "shape [2] as its collective #1, but rank 2 called allreduce of "
                                           "shape [3] as its collective #1")


@pytest.mark.pure
def test_the_board_shows_a_rank_only_what_was_posted_for_that_group_and_collective(tmp_path):
    path = str(tmp_path / "board")
    create_board(path, 2)
    zero, one = Board(path, 2, 0), Board(path, 2, 1)
    world, pair = 0b11, 0b11 << 4                      # two groups' tags
    zero.post(world, 0, [7] * 10)
    posted, _ = one.read((0, 1), world, 0)
    assert posted.tolist() == [True, False]
    one.post(world, 0, [8] * 10)
    posted, rows = zero.read((0, 1), world, 0)
    assert posted.tolist() == [True, True] and rows[:, 0].tolist() == [7, 8]
    assert zero.read((0, 1), pair, 0)[0].tolist() == [False, False]      # another group's collective 0
    assert zero.read((0, 1), world, 1)[0].tolist() == [False, False]     # the next collective
    zero.post(world, 2, [9] * 10)                      # collective 2 reuses collective 0's entry
    assert zero.read((0, 1), world, 2)[0].tolist() == [True, False]
    assert zero.read((0, 1), world, 0)[0].tolist() == [False, True]
