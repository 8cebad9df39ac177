"""Attacks on the trusted half of a rank through the messages of its student process.

A student's process can find its `Proxy` (gc) and write any frame to its
rank's trusted process, past the proxy's own checks: a phase mark of its
choosing, a gradient mark that is not a number, a header nested deeper than
the trusted parser recurses, a tensor shape torch cannot lay out, a result of
the wrong shape. Each must fail the run as the student's process's doing, in
one line naming it; the trusted process must survive it (no "ended its
process"), and the feedback must never blame the grader ("the grader's own
part ... failed"). One real run per scenario (FSDP, DDP, 4D, pipeline) here;
tests/test_fuzz_rank_messages.py sends many more to `serve_run` in-process.
"""
from __future__ import annotations

import pytest

from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox import jail
from shardlab.autograder.sandbox.gloo.launch import run_gloo

WALLS = jail.walls()
pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(not WALLS.namespaces, reason=f"this machine has {WALLS.describe()}")]

FORGE = r'''
import gc, json, struct
import torch
import torch.distributed as dist
from torch import nn

def _proxy():
    return next(o for o in gc.get_objects() if type(o).__name__ == "Proxy")

def _frame(header, payload=b""):
    """A frame written straight to the trusted process, past the proxy's own checks."""
    _proxy().channel.send(header, payload)

def _bytes(head: bytes):
    """A frame whose header is whatever bytes the student likes."""
    channel = _proxy().channel
    with channel.lock:
        channel.sock.sendall(struct.pack("!II", len(head), 0) + head)
'''

FSDP = FORGE + r'''
class FSDP(nn.Module):
    """Announces the phase "0" (no step, no part of a step), then issues a collective in it."""

    def __init__(self, module):
        super().__init__()
        self.module = module
        _frame({"mark": "phase", "name": "0"})
        dist.barrier()

    def forward(self, x):
        return self.module(x)

    def finish_gradient_synchronization(self):
        pass

    def full_state_dict(self):
        return self.module.state_dict()
'''

BUCKETS = FORGE + r'''
class BucketedDDP(nn.Module):
    """Reports a gradient that is not a parameter's index."""

    def __init__(self, module, bucket_size_mb):
        super().__init__()
        self.module = module
        _frame({"mark": "grad", "param": "the first one"})

    def forward(self, x):
        return self.module(x)

    def finish_gradient_synchronization(self):
        pass
'''

COMM4D = FORGE + r'''
def block_collective_bytes(tokens, d_model, d_ff, x, y):
    """A header nested deeper than a JSON parser recurses."""
    _bytes(b"[" * 200_000)
    return {}
'''

PIPELINE = FORGE + r'''
class OneFOneBPipeline:
    """Sends a tensor of no elements whose shape torch cannot lay out (its strides overflow)."""

    def __init__(self, stage_module, stage, num_stages, num_microbatches):
        self.stage, self.p = stage, num_stages

    def step(self, inputs, targets, loss_fn):
        _frame({"op": "isend", "id": 1, "peer": 1 - self.stage, "tag": 0, "async": True,
                "dtype": "torch.float32", "shape": [0, 2**62, 2**62]})
        _proxy()._result(1)
'''

RUNS = {
    "fsdp": (FSDP, Call("fsdp", "fsdp_train", dict(world_size=2, model="frozen_mlp", optimizer="sgd", steps=1,
                                                   seed=5)), "malformed phase mark"),
    "buckets": (BUCKETS, Call("buckets", "ddp_train", dict(world_size=2, model="frozen_mlp", bucket_size_mb=1.0,
                                                           optimizer="sgd", steps=1, seed=3)), "malformed 'grad' mark"),
    "comm4d": (COMM4D, Call("comm4d", "comm4d_mesh_forward", dict(world_size=4, tokens=4, d_model=4, d_ff=8, x=2,
                                                                  y=2, seed=1)), "nested deeper than"),
    "pipeline": (PIPELINE, Call("pipeline", "pipeline_train", dict(world_size=2, microbatches=2, optimizer="sgd",
                                                                   steps=1, seed=3)), "malformed point-to-point"),
}


@pytest.mark.parametrize("module", sorted(RUNS))
def test_a_forged_message_is_the_student_process_doing(submission, module):
    source, call, says = RUNS[module]
    root = submission(**{module: source})
    out = run_gloo(str(root), [call]).outcomes[0]
    assert out.error is not None, out.value
    assert "grader's own part" not in out.error, out.error
    assert "ended its process" not in out.error, out.error          # the trusted process survived it
    assert "the student's process" in out.error and says in out.error, out.error
    assert "\n" not in out.error


def test_a_grading_under_attack_reports_and_blames_the_student_process(submission, cfg):
    """The whole grading of question 2 with the phase-mark attack: a report comes back, no
    distributed part's feedback blames the grader, and the public cases name the student's process."""
    from shardlab.autograder.engine.grading import grade_folder
    root = submission(fsdp=FSDP)
    report = grade_folder(root, cfg, modules={"fsdp"})
    feedback = {p: report.part(p).feedback for p in ("2.7", "2.8", "2.9", "2.10", "2.11")}
    assert all(report.part(p).score == 0.0 for p in feedback), feedback
    assert not any("grader's own part" in f or "internal error" in f for f in feedback.values()), feedback
    assert "the student's process sent a malformed phase mark: name is '0'" in feedback["2.7"], feedback
