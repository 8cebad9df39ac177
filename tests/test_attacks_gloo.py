"""Attacks on the distributed checks from inside a rank's student process.

A submission with no sharding, no collectives and no real training, which
tries everything it can reach from its own process (frames and gc objects
of the harness, the grader's modules, a gloo connection of its own, the
harness's single-process training with guessed seeds, the measured mesh
volumes), must earn nothing on the distributed parts."""
from __future__ import annotations

import pytest

from shardlab.autograder.sandbox import jail
from shardlab.autograder.engine.grading import grade_folder

WALLS = jail.walls()
pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(not WALLS.namespaces, reason=f"this machine has {WALLS.describe()}")]

FORGE = r'''
import gc, sys, torch
import torch.distributed as dist
from torch import nn

def _forge_everything():
    """What a forger reaches for in its own process."""
    found = {}
    for obj in gc.get_objects():
        try:
            if isinstance(obj, dict) and "allgather_in" in obj:
                found["measured"] = dict(obj)
            if hasattr(obj, "events") and isinstance(obj.events, list):
                obj.events.clear()                              # a tracer, if there were one here
                found["tracer"] = True
            if callable(obj) and getattr(obj, "__name__", "") == "single_process":
                found["single_process"] = obj
        except Exception:
            pass
    for name in ("reference", "shardlab", "shardlab.reference.toy_models", "shardlab.solutions.fsdp",
                 "shardlab.autograder.sandbox.gloo.ranks.tracing"):
        try:
            __import__(name)
            found[name] = True
        except Exception:
            pass
    try:                                                        # a gloo group of its own
        store = dist.TCPStore("127.0.0.1", 29511, 2, False, timeout=__import__("datetime").timedelta(seconds=1))
        found["gloo"] = True
    except Exception:
        pass
    try:
        frame = sys._getframe()
        while frame is not None:
            for v in list(frame.f_locals.values()):
                if hasattr(v, "tracer"):
                    found["context"] = True
            frame = frame.f_back
    except Exception:
        pass
    return found
'''

FSDP = FORGE + r'''
class FSDP(nn.Module):
    """Keeps full weights, never communicates, and tries the harness's own
    single-process training with the case seeds it can guess."""

    def __init__(self, module, process_group=None):
        super().__init__()
        self.module = module
        self.found = _forge_everything()

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def finish_gradient_synchronization(self):
        pass

    def full_state_dict(self):
        train = self.found.get("single_process")
        if train is not None:
            for seed in range(0, 50):
                try:
                    state = train("frozen_mlp", "sgd", 3, seed, 2)
                    return {k: torch.tensor(v) for k, v in state.items()}
                except Exception:
                    pass
        return self.module.state_dict()
'''

BUCKETS = FORGE + r'''
class BucketedDDP(nn.Module):
    def __init__(self, module, bucket_size_mb):
        super().__init__()
        self.module = module
        _forge_everything()

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def finish_gradient_synchronization(self):
        pass
'''

COMM4D = FORGE + r'''
def block_collective_bytes(tokens, d_model, d_ff, x, y):
    return _forge_everything().get("measured", {"allgather_in": 0, "allgather_w_in": 0,
                                                "allgather_w_out": 0, "reducescatter_out": 0})
'''

DISTRIBUTED = ("2.7", "2.8", "2.9", "2.10", "2.11", "3.8", "4.5", "4.6", "4.7")


def test_in_rank_forgery_earns_nothing(submission, cfg):
    root = submission(fsdp=FSDP, buckets=BUCKETS, comm4d=COMM4D)
    report = grade_folder(root, cfg, modules={"fsdp", "buckets", "comm4d"})
    earned = {p: report.part(p).score for p in DISTRIBUTED}
    assert earned == {p: 0.0 for p in DISTRIBUTED}, {p: report.part(p).feedback for p in DISTRIBUTED}


def test_the_student_process_holds_no_answer_key(submission, cfg):
    """Only harness modules of the grader are in a rank's student process."""
    from shardlab.autograder.sandbox.gloo.launch import run_gloo
    from shardlab.autograder.engine.parts import Call
    root = submission(probe=(
        "import gc, types\n"
        "def modules():\n"
        "    return sorted({o.__module__ for o in gc.get_objects() if isinstance(o, types.FunctionType)\n"
        "                   and (o.__module__ or '').split('.')[0] in ('shardlab', 'reference', 'solutions')})\n"))
    out = run_gloo(str(root), [Call("probe", "run_function", {"world_size": 2, "function": "modules"})]).outcomes[0]
    assert out.error is None, out.error
    for rank in out.value:
        grader = {m for m in rank["value"] if not m.startswith("shardlab.autograder.sandbox.gloo.")}
        assert grader <= {"shardlab.reference.toy_models", "shardlab.reference.comm4d_mesh",
                          "shardlab.autograder.sandbox.jail",
                          "shardlab.autograder.sandbox.worker", "shardlab.autograder.sandbox.student_values"}, grader
