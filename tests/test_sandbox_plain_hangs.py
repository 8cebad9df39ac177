"""After a hang, the plain-call sandbox runs the rest side by side (issue 34).

A submission whose function sleeps in the kernel in several case groups used
to wait out one call deadline per hung group, one after another (the
`sleeps_forever` fixture: 6 groups, about 30 s of a batch's time, no CPU).
Now, after the first hang, the calls still to run are split by case group
over up to `process.WORKERS_AFTER_A_HANG` workers at once
(`sandbox/process.py`), so later hangs overlap. What must not change: every
call's outcome (each hung call's error, each hung group's "not run" lines,
the other calls' values, a dead worker's call blamed alone), the one output
cap, and nothing outliving the run. Before any hang, one worker as before.

Expected outcomes are the sandbox's rules applied by hand (docs/trust.md,
Deadlines): a hung call "did not finish within 1 s", the rest of its group
"not run", a call that ends its process "ended the grading process (exit
status 3)" with the rest of its group still run.
"""
from __future__ import annotations

import os
import re
import time

import pytest

from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox import jail, process, zygote
from shardlab.autograder.sandbox.process import OUTPUT_CAP_BYTES, Limits, run_calls
from helpers import module_submission

pytestmark = pytest.mark.sandbox

WALLS = jail.walls()
needs_namespaces = pytest.mark.skipif(not WALLS.namespaces, reason=f"this machine has {WALLS.describe()}")

LIMITS = Limits(call_seconds=1.0, import_seconds=30.0)
# the overlap test's deadline: hangs side by side begin within a worker's start of each other (0.1-0.3 s on a
# loaded machine), hangs in a row a whole deadline apart
TIMED = Limits(call_seconds=2.0, import_seconds=30.0)
NOT_RUN = "not run: an earlier call in the same case group did not finish"

NAPS = '''
import os, subprocess, sys, time

def nap(n, marker=None):
    """n < 0: sleeps in the kernel (no CPU, never returns); n == 0: ends its own process (exit status 3);
    n == 999: prints 40,000 bytes; with a marker, first starts a detached process named by it."""
    if marker:
        subprocess.Popen(["sleep", "300", marker], start_new_session=True)
    if n < 0:
        print(f"hang {n} from {time.monotonic()}", flush=True)      # one clock for every process here
        time.sleep(10**6)
    if n == 0:
        os._exit(3)
    if n == 999:
        sys.stdout.write("x" * 40_000)
        sys.stdout.flush()
    return n
'''


@pytest.fixture
def naps(tmp_path):
    root = str(module_submission(tmp_path, "naps", NAPS))
    run_calls(root, [Call("naps", "nap", {"n": 1})], LIMITS)    # the zygote started: timings are the calls'
    return root


@pytest.fixture
def starts(monkeypatch):
    """Every worker started, counted."""
    seen = []
    real = zygote.start

    def counting(*args, **kwargs):
        seen.append(args[0])
        return real(*args, **kwargs)
    monkeypatch.setattr(zygote, "start", counting)
    return seen


def nap(n, group, **more):
    return Call("naps", "nap", {"n": n, **more}, None if group is None else ("9.1", group))


def hang_starts(run) -> dict[int, float]:
    """When each hung call began (its printed line), by its n."""
    return {int(n): float(t) for n, t in re.findall(r"hang (-\d+) from ([\d.]+)", run.output)}


def outcomes(run):
    return [(o.value, o.error) for o in run.outcomes]


def test_hangs_in_three_groups_overlap_with_the_same_outcomes(naps, monkeypatch):
    calls = [nap(1, "a"),
             nap(-1, "b"), nap(2, "b"),         # the first hang: one worker until here
             nap(3, "c"),
             nap(-2, "d"), nap(4, "d"),         # two more hung groups ...
             nap(5, None),
             nap(-3, "e"),
             nap(6, "f"),
             nap(7, "c")]                       # ... and a group whose calls are not adjacent
    want = [(1, None),
            (None, "nap(n=-1) did not finish within 2 s"), (None, NOT_RUN),
            (3, None),
            (None, "nap(n=-2) did not finish within 2 s"), (None, NOT_RUN),
            (5, None),
            (None, "nap(n=-3) did not finish within 2 s"),
            (6, None),
            (7, None)]
    run = run_calls(naps, calls, TIMED)
    assert outcomes(run) == want
    # after the first hang, the other two hung at once: each began before the other's deadline (a
    # worker's start is a fraction of a second even loaded); one after another, a deadline apart
    began = hang_starts(run)
    assert abs(began[-2] - began[-3]) < TIMED.call_seconds, began
    # the first worker, then the five groups left (c, d, the call without a group, e, f) one per worker
    assert run.restarts == 5

    monkeypatch.setattr(process, "WORKERS_AFTER_A_HANG", 1)
    one = run_calls(naps, calls, TIMED)
    assert outcomes(one) == want
    began = hang_starts(one)                # three hangs in a row: the attack this answers
    assert began[-3] - began[-2] >= TIMED.call_seconds and began[-2] - began[-1] >= TIMED.call_seconds, began
    assert one.restarts == 3                                   # a fresh worker after each hang but the last's


def test_a_worker_that_dies_among_side_by_side_workers_is_blamed_alone(naps, monkeypatch):
    calls = [nap(-1, "a"),                      # the first hang: the rest side by side
             nap(-2, "b"),                      # hangs while ...
             nap(0, "c"), nap(1, "c"),          # ... another worker dies mid-call: the rest of its group still runs
             nap(2, "d")]
    want = [(None, "nap(n=-1) did not finish within 1 s"),
            (None, "nap(n=-2) did not finish within 1 s"),
            (None, "nap(n=0) ended the grading process (exit status 3)"), (1, None),
            (2, None)]
    run = run_calls(naps, calls, LIMITS)
    assert outcomes(run) == want
    assert run.restarts == 4            # the first worker, then b's, c's twice (after the death), d's
    monkeypatch.setattr(process, "WORKERS_AFTER_A_HANG", 1)
    assert outcomes(run_calls(naps, calls, LIMITS)) == want


def test_before_any_hang_one_worker_runs_everything(naps, starts):
    calls = [nap(1, "a"), nap(0, "b"), nap(2, "b"), nap(3, None), nap(4, "c")]
    run = run_calls(naps, calls, LIMITS)
    assert outcomes(run) == [(1, None), (None, "nap(n=0) ended the grading process (exit status 3)"),
                             (2, None), (3, None), (4, None)]
    assert starts == ["worker", "worker"] and run.restarts == 1      # a death is no hang: one fresh worker


def test_the_output_cap_is_shared_by_side_by_side_workers(naps):
    calls = [nap(-1, "a")] + [nap(999, group) for group in "bcdefghi"]    # eight groups over six workers
    run = run_calls(naps, calls, LIMITS)
    assert [o.value for o in run.outcomes[1:]] == [999] * 8
    hang_line, _, rest = run.output.partition("\n")      # the first worker's hang, printed before the others ran
    assert hang_line.startswith("hang -1 from ")
    assert run.output_bytes == len(hang_line) + 1 + 8 * 40_000     # every byte counted, whichever worker printed it
    assert len(run.output.encode()) == OUTPUT_CAP_BYTES and set(rest) == {"x"}


def _alive(marker: str, parent: int | None) -> list[int]:
    """Processes (not zombies) whose command line holds `marker`, or whose parent is `parent`."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and (marker.encode() in cmdline or int(fields[1]) == parent):
            alive.append(int(pid))
    return alive


@needs_namespaces
def test_nothing_outlives_side_by_side_workers(naps):
    marker = f"shardlab-outlive-parallel-{os.getpid()}-{time.monotonic_ns()}"
    calls = [nap(-1, "a", marker=marker)] + [nap(n, group, marker=marker) for n, group in
                                             [(-2, "b"), (-3, "c"), (1, "d"), (-4, "e"), (2, "f")]]
    run = run_calls(naps, calls, LIMITS)
    assert [o.value for o in run.outcomes] == [None, None, None, 1, None, 2]
    time.sleep(0.1)                                          # SIGKILL delivery is asynchronous
    # no detached child of any worker, and no worker: nothing the zygote forked is left
    assert _alive(marker, zygote.shared_pid()) == []
