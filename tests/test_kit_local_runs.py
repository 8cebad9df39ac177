"""The portable launcher of the starter kit (kit/local.py) and the
kit's public runs (publish/kit_harness.public_runs, kit/local_checks.py):
a hang fails in seconds naming the rank and the collective, nothing outlives
the launcher (killed, or interrupted with Ctrl-C), and the public runs carry
the public seed."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from shardlab.autograder.publish import kit_harness
from shardlab.autograder.publish.kit_harness import public_runs
from shardlab.autograder.kit.local import FRESH_RANKS_ENV, LocalGroup, ScenarioFailed

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]

PROBE = textwrap.dedent('''
    import time
    import torch
    import torch.distributed as dist

    def only_rank0_reduces():
        if dist.get_rank() == 0:
            dist.all_reduce(torch.ones(4))
        return dist.get_rank()

    def spins():
        while True:
            pass

    def sums():
        t = torch.ones(3) * (dist.get_rank() + 1)
        dist.all_reduce(t)
        return t.tolist()
''')


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def probe_root(submission):
    return submission(probe=PROBE)


def test_a_collective_one_rank_never_joins_fails_in_seconds_naming_rank_and_call(probe_root):
    with LocalGroup(2, str(probe_root), collective_seconds=2) as group:
        values = group.run("run_function", "probe", {"function": "sums"})
        assert [v["value"] for v in values] == [[3.0, 3.0, 3.0]] * 2           # 1 + 2 on each rank
        for v in values:                                                        # traced: 3 FP32 values
            assert [(e["op"], e["bytes"]) for e in v["collectives"]] == [("all_reduce", 12)]
            assert v["collectives"][0]["end"] >= v["collectives"][0]["start"]
        start = time.monotonic()
        with pytest.raises(ScenarioFailed) as failed:
            group.run("run_function", "probe", {"function": "only_rank0_reduces"}, seconds=30)
        pids = [p.pid for p in group._procs] if group._procs else []
    assert time.monotonic() - start < 5 * 3        # 5x: the 2 s collective timeout and the report, not 30 s
    assert failed.value.state == "hung"
    assert str(failed.value).startswith("rank 0 hung") and "all_reduce" in str(failed.value), str(failed.value)
    assert not any(_alive(pid) for pid in pids)


def test_python_that_never_returns_meets_the_deadline_and_the_group_is_killed(probe_root):
    group = LocalGroup(2, str(probe_root), collective_seconds=2)
    pids = [p.pid for p in group._procs]
    with pytest.raises(ScenarioFailed, match="did not finish within 3 s: rank 0 was running Python code"):
        group.run("run_function", "probe", {"function": "spins"}, seconds=3)
    time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids)


LAUNCHER = '''
import sys, time
from shardlab.autograder.kit.local import LocalGroup, _ForkServer
group = LocalGroup(2, sys.argv[1])
server = [_ForkServer._shared.process.pid] if _ForkServer._shared else []   # Linux: the ranks' fork server
print(" ".join(str(p.pid) for p in group._procs + [type("P", (), {"pid": s}) for s in server]), flush=True)
group.run("run_function", "probe", {"function": "spins"}, seconds=600)
'''


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["killed", "ctrl-c"])
def test_no_rank_outlives_its_launcher(probe_root, how):
    """Killed outright, the ranks (and on Linux the fork server they were forked from) notice within
    half a second; interrupted (Ctrl-C), the launcher kills them at exit."""
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(probe_root)], stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        forked = sys.platform == "linux" and not os.environ.get(FRESH_RANKS_ENV)
        assert len(pids) == 2 + forked and all(_alive(p) for p in pids)
        time.sleep(0.5)                                      # both ranks spinning in the student's loop
        os.kill(proc.pid, how)
        proc.wait(timeout=20)
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_public_runs_use_the_public_seed_not_the_keyed_one(cfg):
    """2.7's expected weights are single-process training with the case's own
    seed (computed here with the model code directly), not with data_seed(seed)."""
    from shardlab.autograder.sandbox.gloo.seeds import data_seed
    from shardlab.autograder.kit.toy_models import single_process
    runs = public_runs(cfg)
    by_part = {r["part"]: r for q in runs.values() for r in q}
    distributed = {p.id for p in kit_harness.distributed_parts()}
    assert set(by_part) == distributed            # every distributed part has a public run
    run = by_part["2.7"]
    a = run["args"]
    assert run["expected"]["state"] == single_process(a["model"], a["optimizer"], a["steps"], a["seed"],
                                                      a["world_size"])
    assert run["expected"]["state"] != single_process(a["model"], a["optimizer"], a["steps"], data_seed(a["seed"]),
                                                      a["world_size"])
    assert all(r["args"]["world_size"] in (2, 4) for r in by_part.values())   # hidden: 3 ranks
    assert [m for _, m in run["mistakes"]] and "averaging" in run["mistakes"][0][1]


def test_forked_and_fresh_ranks_give_the_same_run(probe_root, monkeypatch):
    """On Linux the ranks are forked from the kit's fork server; on macOS (and with FRESH_RANKS_ENV)
    each is a fresh interpreter. The suite runs on Linux, so the fresh path is run here too: the same
    scenario gives the same values, and only the forked group's ranks share a parent that is not
    the launcher."""
    got = {}
    for fresh in (False, True):
        if fresh:
            monkeypatch.setenv(FRESH_RANKS_ENV, "1")
        with LocalGroup(3, str(probe_root)) as group:
            parents = {_parent(p.pid) for p in group._procs}
            got[fresh] = [r["value"] for r in group.run("run_function", "probe", {"function": "sums"})]
        assert (parents == {os.getpid()}) == (fresh or sys.platform != "linux"), parents
    assert got[False] == got[True] == [[6.0, 6.0, 6.0]] * 3


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(sys.platform != "linux", reason="the fork server is Linux's")
def test_a_fork_server_that_died_is_started_again(probe_root, monkeypatch):
    """Killed between groups (an OOM kill, a student's pkill python), the fork server is started
    again by the next group; killed while it holds a request, that group's ranks start fresh."""
    from shardlab.autograder.kit.local import _ForkServer
    monkeypatch.delenv(FRESH_RANKS_ENV, raising=False)
    with LocalGroup(2, str(probe_root)) as group:
        first = _ForkServer._shared
        assert first is not None and group.run("run_function", "probe", {"function": "sums"})
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()
    with LocalGroup(2, str(probe_root)) as group:
        assert _ForkServer._shared is not first and _ForkServer._shared.process.poll() is None
        assert [r["value"] for r in group.run("run_function", "probe", {"function": "sums"})] == [[3.0] * 3] * 2
    # the server gone between `shared` and its answer: the ranks start as fresh interpreters
    monkeypatch.setattr(_ForkServer, "fork", lambda self, *a: (_ for _ in ()).throw(OSError("gone")))
    with LocalGroup(2, str(probe_root)) as group:
        assert {_parent(p.pid) for p in group._procs} == {os.getpid()}
        assert [r["value"] for r in group.run("run_function", "probe", {"function": "sums"})] == [[3.0] * 3] * 2
