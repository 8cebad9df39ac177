"""The zygote (autograder/sandbox/zygote.py): one torch import, forked for
every process that runs student code, shared by a whole batch.

Attacks: a submission that plants something in the process it was forked
into, for the next submission to find; a submission that goes looking for
the batch's zygote socket to fork itself a process outside its sandbox.
And the plumbing: a forked worker reports exactly what a fresh one did
(exit status, output), and grading survives a dead zygote."""
from __future__ import annotations

import contextlib
import os
import signal

import pytest

from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox import jail, zygote
from shardlab.autograder.sandbox.gloo.group import GlooLimits
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.sandbox.process import Limits, run_calls

WALLS = jail.walls()
needs_namespaces = pytest.mark.skipif(not WALLS.namespaces, reason=f"this machine has {WALLS.describe()}")
pytestmark = pytest.mark.sandbox

PLANTER = r'''
import os, sys, torch, gc

def plant():
    """Leave traces everywhere a later fork of the same parent could look."""
    torch.planted = "from A"
    torch.nn.Module.planted = "from A"
    sys.modules["planted_by_a"] = type(sys)("planted_by_a")
    os.environ["PLANTED"] = "from A"
    import builtins
    builtins.planted = "from A"
    return "planted"

def boom(code):
    print("about to exit with", code, flush=True)
    os._exit(code)

def draw():
    import random
    import numpy
    return [torch.rand(2).tolist(), random.random(), numpy.random.rand()]

def look():
    import builtins
    seen = [getattr(torch, "planted", None), getattr(torch.nn.Module, "planted", None),
            "planted_by_a" in sys.modules, os.environ.get("PLANTED"), getattr(builtins, "planted", None),
            sorted(m for m in sys.modules if m.startswith("assignments.") and m != __name__)]
    return repr(seen)
'''

SEEKER = r'''
import glob, os, socket

def seek(path):
    """The grader's source is public: the batch's socket is
    /tmp/shardlab-zygote-*/zygote.sock. Try it, and every socket in sight."""
    tried = []
    for p in [path, *glob.glob("/tmp/shardlab-zygote-*/zygote.sock")]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(p)
            tried.append("connected " + p)
        except OSError as exc:
            tried.append(type(exc).__name__)
        finally:
            s.close()
    return tried + [os.environ.get("SHARDLAB_ZYGOTE")]
'''


def _submission(tmp_path, name, module, source):
    root = tmp_path / name
    (root / "assignments").mkdir(parents=True)
    (root / "assignments" / f"{module}.py").write_text(source)
    return str(root)


@pytest.fixture
def forks(monkeypatch):
    """Which kind of process each start was: a zygote's fork or a fresh one."""
    seen = []
    real = zygote.start

    def recording(*args, **kwargs):
        proc = real(*args, **kwargs)
        seen.append(type(proc).__name__)
        return proc
    monkeypatch.setattr(zygote, "start", recording)
    return seen


def test_grading_a_then_b_shows_b_nothing_of_a(tmp_path, forks):
    a = _submission(tmp_path, "a", "planter", PLANTER)
    b = _submission(tmp_path, "b", "planter", PLANTER)
    first = zygote.shared()
    assert run_calls(a, [Call("planter", "plant", {})]).outcomes[0].value == "planted"
    seen = run_calls(b, [Call("planter", "look", {})]).outcomes[0]
    assert seen.value == repr([None, None, False, None, None, []]), seen
    assert zygote.shared() is first and forks == ["ZygoteProc", "ZygoteProc"]   # one zygote served both


def test_a_forked_worker_reports_like_a_fresh_process(tmp_path, forks):
    """Exit status and output, as `python -m worker` gave them."""
    root = _submission(tmp_path, "c", "planter", PLANTER)
    run = run_calls(root, [Call("planter", "boom", {"code": 3}), Call("planter", "plant", {})])
    assert run.outcomes[0].error == "boom(code=3) ended the grading process (exit status 3)"
    assert run.outcomes[1].value == "planted"          # a second fork carried on
    assert "about to exit with 3" in run.output
    assert forks == ["ZygoteProc", "ZygoteProc"]


def test_grading_goes_on_when_the_zygote_dies(tmp_path, forks):
    root = _submission(tmp_path, "d", "planter", PLANTER)
    proc = zygote.shared().proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert run_calls(root, [Call("planter", "plant", {})]).outcomes[0].value == "planted"
    # that start fell back to a fresh process; the next one has a new zygote
    assert run_calls(root, [Call("planter", "plant", {})]).outcomes[0].value == "planted"
    assert forks == ["Popen", "ZygoteProc"]


@needs_namespaces
def test_a_jailed_student_cannot_reach_the_batchs_zygote(tmp_path, monkeypatch, forks):
    root = _submission(tmp_path, "e", "seeker", SEEKER)
    with zygote.serving() as env:
        monkeypatch.setenv(zygote.ENV, env[zygote.ENV])
        zygote.forget_shared()
        try:
            path = env[zygote.ENV]
            assert os.path.exists(path)
            plain = run_calls(root, [Call("seeker", "seek", {"path": path})],
                              Limits(call_seconds=20)).outcomes[0]
            ranks = run_gloo(root, [Call("seeker", "run_function",
                                         {"world_size": 2, "function": "seek", "args": [path]})],
                             gloo=GlooLimits(scenario_seconds=20)).outcomes[0]
            assert zygote.shared().proc is None          # these came from the batch's zygote
        finally:
            zygote.forget_shared()
    assert forks == ["ZygoteProc", "ZygoteProc"]
    assert plain.value == ["FileNotFoundError", None], plain
    assert [r["value"] for r in ranks.value] == [["FileNotFoundError", None]] * 2, ranks


def test_forked_workers_do_not_share_a_random_stream(tmp_path, forks):
    """Fresh processes seed torch, random and numpy afresh; forks of one zygote would all
    inherit its state, so each child reseeds as a fresh process does."""
    root = _submission(tmp_path, "d", "planter", PLANTER)
    draws = [run_calls(root, [Call("planter", "draw", {})]).outcomes[0].value for _ in range(2)]
    assert forks == ["ZygoteProc", "ZygoteProc"]
    assert [a != b for a, b in zip(*draws)] == [True, True, True]      # torch, random, numpy


def test_a_reference_rank_forked_from_the_zygote_trains_like_a_fresh_one(tmp_path, monkeypatch):
    """The fully_shard reference's ranks: forked from the zygote (as grading does) or
    started afresh, the same final weights."""
    from shardlab.reference import fsdp2_agreement
    kinds = []

    def recording(args, log):
        proc = zygote.reference_rank(args, log)
        kinds.append(type(proc).__name__)
        return proc
    states = []
    for name, launch in (("forked", recording), ("fresh", None)):
        monkeypatch.setattr(fsdp2_agreement, "CACHE", tmp_path / name)
        fsdp2_agreement.fully_shard_state.cache_clear()
        try:
            states.append(fsdp2_agreement.fully_shard_state("frozen_mlp", "adamw", 2, 4242, 2, launch_rank=launch))
        finally:
            fsdp2_agreement.fully_shard_state.cache_clear()
    assert kinds == ["ZygoteProc", "ZygoteProc"]
    assert states[0] == states[1] and states[0]


LOOKER = r'''
import gc, sys, types

def modules_seen():
    """What a student finds of the reference in the process it was forked into."""
    named = sorted(m for m in sys.modules if m.startswith(("shardlab.reference", "shardlab.autograder.questions")))
    alive = sorted({o.__name__ for o in gc.get_objects() if isinstance(o, types.ModuleType)
                    and o.__name__.startswith(("shardlab.reference", "shardlab.autograder.questions"))})
    return [named, alive, "torch._dynamo" in sys.modules]
'''


@pytest.mark.parametrize("batch", [False, True], ids=["one grading's zygote", "a batch's zygote"])
def test_after_a_reference_rank_the_zygote_holds_torchs_fsdp_and_nothing_of_the_reference(tmp_path, monkeypatch,
                                                                                          batch):
    """A machine's first grading forks the fully_shard reference's ranks from the zygote, which
    (one grading's, not a batch's, whose every later fork would copy its larger page tables)
    imports torch's FSDP2 and torch._dynamo first (`zygote.PRELOADS`) so that every rank shares
    them. A student forked from the same zygote afterwards finds those torch modules (one
    grading's) and never one module of the reference or the questions, by name or alive."""
    from shardlab.reference import fsdp2_agreement
    monkeypatch.setattr(fsdp2_agreement, "CACHE", tmp_path / "cache")
    root = _submission(tmp_path, "looker", "looker", LOOKER)
    with contextlib.ExitStack() as stack:
        if batch:
            monkeypatch.setenv(zygote.ENV, stack.enter_context(zygote.serving())[zygote.ENV])
        zygote.forget_shared()                  # a fresh one of the kind asked for
        stack.callback(zygote.forget_shared)
        fsdp2_agreement.fully_shard_state.cache_clear()
        stack.callback(fsdp2_agreement.fully_shard_state.cache_clear)
        assert fsdp2_agreement.fully_shard_state("frozen_mlp", "sgd", 1, 77, 2, launch_rank=zygote.reference_rank)
        outcome = run_calls(root, [Call("looker", "modules_seen", {})]).outcomes[0]
    assert outcome.error is None, outcome.error
    assert outcome.value == [[], [], not batch]
