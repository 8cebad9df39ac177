"""Question 5's distributed part (5.9-5.11): the reference 1F1B schedule and
the checks by hand, then the student's OneFOneBPipeline on real gloo ranks:
a traced step read by hand, the solution and a second design graded full,
and the wrong pipelines losing what they declare."""
import pytest

from shardlab.autograder.kit.checks import pipeline as checks
from shardlab.autograder.engine.grading import grade_part_ids
from shardlab.autograder.core.parts import Call
from shardlab.autograder.selfcheck import fixtures, folder_of
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.reference import pipeline_schedule as sched
from helpers import assert_graded_as_declared, assert_nothing_left

RUN_PARTS = ("5.9", "5.10", "5.11")
RUN_FIXTURES = ("pipeline_gpipe_order", "pipeline_deadlock", "pipeline_summed_grads", "pipeline_middle_stage_as_last")
PIPELINE_FIXTURES = [f for f in fixtures() if f.name in RUN_FIXTURES]
MESSAGE = 3 * 8 * 4         # one micro-batch: 3 rows of d_model = 8, FP32


# ---- the schedule and the checks, by hand (no ranks) ------------------------------

@pytest.mark.pure
def test_one_f_one_b_by_hand():
    # p = 2, m = 4: stage 0 has p - 0 - 1 = 1 warm-up forward, the last stage none
    assert sched.letters(sched.one_f_one_b(0, 2, 4)) == "FFBFBFBB"
    assert sched.letters(sched.one_f_one_b(1, 2, 4)) == "FBFBFBFB"
    assert sched.one_f_one_b(0, 2, 4)[:3] == [("F", 0), ("F", 1), ("B", 0)]
    # p = 4, m = 8: stage 1 warms up with 2 forwards and holds 3 micro-batches at most
    assert sched.letters(sched.one_f_one_b(1, 4, 8)) == "FFF" + "BF" * 5 + "BBB"
    assert sched.peak_in_flight(sched.one_f_one_b(1, 4, 8)) == 3
    # fewer micro-batches than stages: stage 0 can only warm up with the 2 there are
    assert sched.letters(sched.one_f_one_b(0, 4, 2)) == "FFBB"
    assert sched.peak_in_flight(sched.gpipe(3, 4, 8)) == 8
    # a middle stage receives before it computes and sends after
    assert sched.messages(1, 3, [("F", 0), ("B", 0)]) == [("recv", 0, 0), ("send", 2, 0), ("recv", 2, 0),
                                                          ("send", 0, 0)]


def _step(p2p, saved=2, other=()):
    return {"p2p": p2p, "other": list(other), "saved": saved}


# stage 0 of 2, m = 4, as a correct pipeline leaves it: [kind, peer, bytes, issued, waited]
STAGE0 = [["send", 1, MESSAGE, 1, 8], ["send", 1, MESSAGE, 2, 8], ["recv", 1, MESSAGE, 3, 3],
          ["send", 1, MESSAGE, 4, 8], ["recv", 1, MESSAGE, 5, 5], ["send", 1, MESSAGE, 6, 8],
          ["recv", 1, MESSAGE, 7, 7], ["recv", 1, MESSAGE, 8, 8]]
EXPECT0 = {"order": "FFBFBFBB", "warmup": 1, "message_bytes": MESSAGE, "boundary_bytes": 2 * 4 * MESSAGE}
LIMIT0 = {"limit": 2, "microbatches": 4}


@pytest.mark.pure
def test_the_schedule_is_read_off_the_trace():
    assert checks.schedule(0, 2, STAGE0) == "FFBFBFBB"
    # stage 0's backwards are the waits for their gradients: pre-posted recvs, waited for late
    early = [["recv", 1, MESSAGE, k, w] for k, w in ((1, 5), (2, 7))] + [["send", 1, MESSAGE, 3, 9],
                                                                       ["send", 1, MESSAGE, 4, 9]]
    assert checks.schedule(0, 2, early) == "FFBB"
    # the last stage's forwards are the waits for their activations
    last = [["recv", 0, MESSAGE, 1, 1], ["send", 0, MESSAGE, 2, None], ["recv", 0, MESSAGE, 3, 3]]
    assert checks.schedule(1, 2, last) == "FBF"
    assert checks.in_flight("FFBFBFBB") == 2 and checks.in_flight("FFFFBBBB") == 4


@pytest.mark.pure
def test_the_checks_name_what_is_wrong():
    value = {"stage": 0, "num_stages": 2, "steps": [_step(STAGE0)]}
    assert checks.check_pipeline_schedule(EXPECT0, value) is None
    assert checks.check_pipeline_inflight(LIMIT0, value) is None
    gpipe = [["send", 1, MESSAGE, k, 8] for k in range(1, 5)] + [["recv", 1, MESSAGE, k, k] for k in range(5, 9)]
    value = {"stage": 0, "num_stages": 2, "steps": [_step(gpipe, saved=4)]}
    assert "in the order FFFFBBBB; 1F1B is FFBFBFBB" in checks.check_pipeline_schedule(EXPECT0, value)
    assert "up to 4 micro-batches were in flight" in checks.check_pipeline_inflight(LIMIT0, value)
    # the wire order is right but the claimed activations are not: the claim counts too
    value = {"stage": 0, "num_stages": 2, "steps": [_step(STAGE0, saved=3)]}
    assert "saved activations of up to 3" in checks.check_pipeline_inflight(LIMIT0, value)
    half = [[kind, peer, n // 2, k, w] for kind, peer, n, k, w in STAGE0]
    value = {"stage": 0, "num_stages": 2, "steps": [_step(half)]}
    assert "of 48 bytes" in checks.check_pipeline_schedule(EXPECT0, value)
    value = {"stage": 0, "num_stages": 2, "steps": [_step(STAGE0[:-1])]}        # a gradient never received
    assert "384 bytes sent to and 288 received from rank 1" in checks.check_pipeline_schedule(EXPECT0, value)
    assert "4 forward(s) and 3 backward(s) of 4" in checks.check_pipeline_inflight(LIMIT0, value)
    value = {"stage": 0, "num_stages": 2, "steps": [_step(STAGE0, other=["all_reduce"])]}
    assert "all_reduce" in checks.check_pipeline_schedule(EXPECT0, value)


# ---- the real runs ---------------------------------------------------------------

@pytest.mark.sandbox
def test_one_step_traced_by_hand(sessions):
    """2 stages, m = 4, one step. Stage 0 warms up with one forward, then
    alternates; it sends 4 activations and receives 4 gradients of 96 bytes,
    and waits for its isends at the end (after 8 ops). Stage 1 receives each
    activation right before its forward and sends the gradient after its
    backward. 2 · 4 · 96 = 768 bytes cross the boundary: p2p_bytes_per_step(8, 3, 4, 4)."""
    from shardlab.autograder.sandbox.gloo.launch import run_gloo
    call = Call("pipeline", "pipeline_train", dict(world_size=2, microbatches=4, optimizer="sgd", steps=1, seed=3))
    with folder_of(SOLUTIONS) as root:
        out = run_gloo(str(root), [call]).outcomes[0]
    assert out.error is None, out.error
    stage0, stage1 = out.value
    assert stage0["steps"][0]["p2p"] == STAGE0
    assert stage1["steps"][0]["p2p"] == [["recv", 0, MESSAGE, 1, 1], ["send", 0, MESSAGE, 2, 8],
                                         ["recv", 0, MESSAGE, 3, 3], ["send", 0, MESSAGE, 4, 8],
                                         ["recv", 0, MESSAGE, 5, 5], ["send", 0, MESSAGE, 6, 8],
                                         ["recv", 0, MESSAGE, 7, 7], ["send", 0, MESSAGE, 8, 8]]
    assert [stage0["steps"][0]["saved"], stage1["steps"][0]["saved"]] == [2, 1]
    assert sorted(stage0["state"]) == ["blocks.0.w_in.weight", "blocks.0.w_out.weight",
                                       "blocks.1.w_in.weight", "blocks.1.w_out.weight"]
    assert sorted(stage1["state"])[0] == "blocks.2.w_in.weight"
    assert_nothing_left(sessions)


# A second design, as Megatron-LM writes 1F1B: blocking sends during warm-up and
# cool-down, and in the steady state one batch_isend_irecv that sends the output and
# receives the next gradient (or sends the gradient and receives the next input).
BATCHED = '''

class OneFOneBPipeline:
    def __init__(self, stage_module, stage, num_stages, num_microbatches):
        self.module, self.stage, self.p, self.m = stage_module, stage, num_stages, num_microbatches

    def _exchange(self, send=None, send_to=None, recv_from=None, like=None):
        ops, received = [], None
        if send is not None:
            ops.append(dist.P2POp(dist.isend, send.contiguous(), send_to))
        if recv_from is not None:
            received = torch.empty_like(like)
            ops.append(dist.P2POp(dist.irecv, received, recv_from))
        for work in dist.batch_isend_irecv(ops) if ops else []:
            work.wait()
        return received

    def step(self, inputs, targets, loss_fn):
        s, m = self.stage, self.m
        first, last = s == 0, s == self.p - 1
        xs, ts = inputs.chunk(m), targets.chunk(m)
        prev, nxt = (None if first else s - 1), (None if last else s + 1)
        held, queue = [], iter(range(m))

        def forward(x, i):
            if not first:
                x.requires_grad_()
            y = self.module(x)
            if last:
                y = loss_fn(y, ts[i]) / m
            held.append((x, y))
            return None if last else y.detach()

        def backward(grad):
            x, y = held.pop(0)
            y.backward() if last else y.backward(grad)
            return None if first else x.grad

        def next_input():
            i = next(queue)
            return (xs[i] if first else self._exchange(recv_from=prev, like=xs[i])), i

        warmup = min(self.p - s - 1, m)
        for _ in range(warmup):
            x, i = next_input()
            self._exchange(send=forward(x, i), send_to=nxt)
        x, i = next_input() if m > warmup else (None, None)
        for k in range(m - warmup):
            grad = self._exchange(send=forward(x, i), send_to=nxt, recv_from=nxt, like=xs[0])
            dx = backward(grad)
            if k == m - warmup - 1:
                self._exchange(send=dx, send_to=prev)
            else:
                i = next(queue)
                received = self._exchange(send=dx, send_to=prev, recv_from=prev, like=xs[i])
                x = xs[i] if first else received
        for _ in range(warmup):
            grad = self._exchange(recv_from=nxt, like=xs[0])
            self._exchange(send=backward(grad), send_to=prev)
'''


@pytest.mark.sandbox
def test_the_solution_and_a_batched_design_pass_every_run_part(cfg, sessions):
    with folder_of(SOLUTIONS) as root:
        solved = grade_part_ids(root, cfg, RUN_PARTS)
        target = root / "assignments" / "pipeline.py"
        target.write_text(target.read_text() + BATCHED)
        batched = grade_part_ids(root, cfg, RUN_PARTS)
    for results in (solved, batched):
        assert {p: r.score for p, r in results.items()} == {"5.9": 4, "5.10": 3, "5.11": 2}, \
            {p: r.feedback for p, r in results.items()}
    assert_nothing_left(sessions)


@pytest.mark.sandbox
@pytest.mark.parametrize("fixture", PIPELINE_FIXTURES, ids=lambda f: f.name)
def test_wrong_pipelines_score_as_declared(cfg, sessions, fixture, kit_runs):
    # a deadlock costs one collective timeout (3 s) per world size, both sizes side by side
    assert_graded_as_declared(cfg, fixture, RUN_PARTS, within_seconds=120, kit_runs=kit_runs)
    assert_nothing_left(sessions)


@pytest.mark.pure
def test_every_wrong_pipeline_is_tested():
    assert {f.name for f in PIPELINE_FIXTURES} == set(RUN_FIXTURES)
    assert all(f.modules == {"pipeline"} for f in PIPELINE_FIXTURES)
