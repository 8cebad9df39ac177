"""Attacks on the distributed checks from inside a rank's student process.

A submission with no sharding, no collectives and no real training, which
tries everything it can reach from its own process (frames and gc objects
of the harness, the grader's modules, a gloo connection of its own, the
harness's single-process training with guessed seeds, the measured mesh
volumes), must earn nothing on the distributed parts."""
from __future__ import annotations

import subprocess
import sys

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
    for name in ("reference", "shardlab", "shardlab.autograder.kit.toy_models", "shardlab.solutions.fsdp",
                 "shardlab.autograder.kit.tracing"):
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
    from shardlab.autograder.core.parts import Call
    root = submission(probe=(
        "import gc, types\n"
        "def modules():\n"
        "    return sorted({o.__module__ for o in gc.get_objects() if isinstance(o, types.FunctionType)\n"
        "                   and (o.__module__ or '').split('.')[0] in ('shardlab', 'reference', 'solutions')})\n"))
    out = run_gloo(str(root), [Call("probe", "run_function", {"world_size": 2, "function": "modules"})]).outcomes[0]
    assert out.error is None, out.error
    for rank in out.value:
        assert rank["value"], "the probe saw no grader module at all"
        assert all(_allowed_in_a_rank(m) for m in rank["value"]), rank["value"]


def _allowed_in_a_rank(module: str) -> bool:
    """What docs/trust.md lets a rank hold: the kit package (scenarios, toy models, the mesh, tracing:
    it imports nothing of shardlab, tests/test_publish_kit_harness.py), the rank-side harness, the jail
    (with its Landlock and system-call filter modules), and how a trusted rank reaches its grader's socket."""
    return (module == "shardlab.autograder.kit" or module.startswith(("shardlab.autograder.kit.",
                                                                       "shardlab.autograder.sandbox.gloo.ranks.")) or
            module in ("shardlab.autograder.sandbox.jail", "shardlab.autograder.sandbox.landlock",
                       "shardlab.autograder.sandbox.syscall_filter", "shardlab.autograder.sandbox.worker",
                       "shardlab.autograder.sandbox.unix_socket"))


@pytest.mark.timeout(120)
def test_the_fork_server_imports_no_answer_key():
    """The fork server's whole imported-module set after `preload` (what every rank inherits):
    torch and the allowed harness, never the reference, a question, the engine or a solution."""
    code = ("import sys\nfrom shardlab.autograder.sandbox.gloo.ranks.main import preload\npreload()\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('shardlab.'))))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(done.stdout.split())
    assert {"shardlab.autograder.kit.scenarios.fsdp", "shardlab.autograder.kit.toy_models",
            "shardlab.autograder.sandbox.gloo.ranks.trusted"} <= loaded
    packages = {"shardlab.autograder", "shardlab.autograder.sandbox", "shardlab.autograder.sandbox.gloo",
                "shardlab.autograder.sandbox.gloo.ranks"}
    assert all(_allowed_in_a_rank(m) for m in loaded - packages), sorted(loaded)


def test_the_rank_allow_list_refuses_an_answer_key():
    assert not any(map(_allowed_in_a_rank, ("shardlab.reference.fsdp", "shardlab.solutions.fsdp",
                                             "shardlab.autograder.questions.fsdp", "shardlab.autograder.engine.plan")))


# ---- point-to-point ops (question 5): what a student's process may ask for -------------

P2P = r'''
import gc, json, struct
import torch
import torch.distributed as dist

def ring():
    """The honest baseline: each rank sends to the next and receives from the previous."""
    r, p = dist.get_rank(), dist.get_world_size()
    out, got = torch.full((3,), float(r)), torch.empty(3)
    work = dist.isend(out, dst=(r + 1) % p)
    dist.recv(got, src=(r - 1) % p)
    work.wait()
    return got.tolist()

def sizes_disagree():
    """Rank 0 sends 2 values, rank 1 expects 3: without care gloo would abort the receiving process."""
    if dist.get_rank() == 0:
        dist.send(torch.ones(2), dst=1)
    else:
        dist.recv(torch.empty(3), src=0)

def never_waited():
    """An isend nobody waits for: the trusted process waits for it before the report."""
    if dist.get_rank() != 1:
        if dist.get_rank() == 0:
            dist.isend(torch.arange(4.0), dst=1)
        return None
    got = torch.empty(4)
    dist.recv(got, src=0)
    return got.tolist()

def never_received():
    """An isend no rank receives: it fails the run when the report waits for it."""
    if dist.get_rank() == 0:
        dist.isend(torch.ones(2), dst=1, tag=3)

def _raw(header, payload=b""):
    """A frame written straight to the trusted process, past the proxy's own checks."""
    proxy = next(o for o in gc.get_objects() if type(o).__name__ == "Proxy")
    proxy.channel.send(header, payload)
    return proxy._result(header.get("id", header.get("wait")))

def _send(peer, tag=0, shape=(2,), payload=8):
    return _raw({"op": "isend", "id": 10**6, "peer": peer, "tag": tag, "async": True,
                 "dtype": "torch.float32", "shape": list(shape)}, bytes(payload))

def bad_peer():
    return _send(5)

def own_rank():
    return _send(dist.get_rank())

def bad_tag():
    return _send(1 - dist.get_rank(), tag=1 << 40)

def lying_size():
    return _send(1 - dist.get_rank(), shape=(4,), payload=8)

def huge_recv():
    return _raw({"op": "irecv", "id": 10**6, "peer": 1 - dist.get_rank(), "tag": 0, "async": True,
                 "recv": {"dtype": "torch.float32", "shape": [1 << 40]}})

def stray_wait():
    return _raw({"wait": [1]})
'''


def test_p2p_is_traced_with_its_peer_and_a_size_mismatch_hangs_instead_of_aborting(submission):
    from shardlab.autograder.sandbox.gloo.launch import run_gloo
    from shardlab.autograder.core.parts import Call
    root = submission(probe=P2P)
    calls = [Call("probe", "run_function", {"world_size": 3, "function": "ring"}),
             Call("probe", "run_function", {"world_size": 2, "function": "sizes_disagree"}),
             Call("probe", "run_function", {"world_size": 3, "function": "never_waited"}),
             Call("probe", "run_function", {"world_size": 3, "function": "never_received"})]
    ring, disagree, unwaited, unreceived = run_gloo(str(root), calls).outcomes
    assert ring.error is None, ring.error
    assert [rank["value"] for rank in ring.value] == [[2.0] * 3, [0.0] * 3, [1.0] * 3]
    sent, received = ring.value[1]["collectives"]
    assert (sent["op"], sent["peer"], sent["bytes"], received["op"], received["peer"]) == ("isend", 2, 12,
                                                                                         "irecv", 0)
    # the tag gloo sees carries the size, so the two never pair: both wait, and time out (whichever
    # times out first closes the connection, and the other says so)
    assert disagree.error.startswith("rank 0 hung: send to rank 1 (8 bytes, sizes_disagree)"), disagree.error
    assert "rank 1 posted no matching recv from rank 0 of that size" in disagree.error
    # what the student's process never waited for is waited for before the report, within the timeout
    assert unwaited.error is None and unwaited.value[1]["value"] == [0.0, 1.0, 2.0, 3.0], unwaited.error
    assert unreceived.error.startswith("rank 0 hung: send to rank 1 (8 bytes, tag 3, never_received, never "
                                       "waited for) timed out"), unreceived.error


@pytest.mark.parametrize("function, refusal", [
    ("bad_peer", "isend with rank 5: ranks are 0 to 1"),
    ("own_rank", "which is this rank itself"),
    ("bad_tag", "this process group takes tags 0 to 7"),
    ("lying_size", "8 bytes for a torch.float32 tensor of shape [4]"),
    ("huge_recv", "over the cap"),
    ("stray_wait", "a wait for no outstanding point-to-point op"),
])
def test_a_forged_p2p_request_is_refused_by_the_trusted_process(submission, function, refusal):
    """Frames written past the proxy: the trusted process refuses each with one line
    (its own words, not a crash: the rank does not die)."""
    from shardlab.autograder.sandbox.gloo.launch import run_gloo
    from shardlab.autograder.core.parts import Call
    root = submission(probe=P2P)
    out = run_gloo(str(root), [Call("probe", "run_function", {"world_size": 2, "function": function})]).outcomes[0]
    assert out.error is not None and refusal in out.error, out.error
    assert "ended its process" not in out.error


PIPELINE = FORGE + r'''
class OneFOneBPipeline:
    """Never communicates. Loads the weights the harness's own single-process
    training gives with the run's public seed, trains its stage alone on what it
    was given, and sends its trusted process marks dressed as traced sends."""

    def __init__(self, stage_module, stage, num_stages, num_microbatches):
        self.module, self.stage, self.p, self.m = stage_module, stage, num_stages, num_microbatches
        self.found = _forge_everything()

    def step(self, inputs, targets, loss_fn):
        train = next((o for o in gc.get_objects() if callable(o)
                      and getattr(o, "__name__", "") == "pipeline_single_process"), None)
        per = 4 // self.p
        for seed in SEEDS.get(f"{self.p} {self.m}", []):
            if train is not None:
                whole = train("sgd", 2, seed, self.m)
                with torch.no_grad():
                    for j in range(per):
                        for w in ("w_in", "w_out"):
                            name = f"blocks.{self.stage * per + j}.{w}.weight"
                            getattr(self.module[j], w).weight.copy_(torch.tensor(whole[name]))
        proxy = next((o for o in gc.get_objects() if type(o).__name__ == "Proxy"), None)
        for k in range(2 * self.m):
            if proxy is not None:
                proxy.mark("collective", op="isend", peer=self.stage + 1, bytes=96, seq=k)
        loss_fn(self.module(inputs), targets).backward()
'''


def test_a_pipeline_that_never_communicates_earns_nothing(submission, cfg):
    from shardlab.autograder.engine.plan import part_cases
    seeds = {}
    for case in part_cases(cfg, "5.9"):
        a = case.calls[0].args
        seeds.setdefault(f"{a['world_size']} {a['microbatches']}", []).append(a["seed"])
    root = submission(pipeline=PIPELINE.replace("SEEDS.get", f"{seeds!r}.get"))
    report = grade_folder(root, cfg, modules={"pipeline"})
    earned = {p: report.part(p).score for p in ("5.9", "5.10", "5.11")}
    assert earned == {"5.9": 0.0, "5.10": 0.0, "5.11": 0.0}, {p: report.part(p).feedback for p in earned}
