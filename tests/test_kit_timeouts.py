"""No kit test hangs, and a call past the grader's limit fails in the grader's
words (kit/comparison.py `call_within`, `check`; kit/local_checks.py
`bound_seconds`, `timed_out`; the kit's conftest.py and pyproject.toml,
publish/starter.py).

`call_within` stops a call with an alarm where there is one (the main
thread, with SIGALRM), sharing the signal with pytest-timeout's own alarm on
the whole test; elsewhere it judges the call when it returns. The last test
builds a kit whose task 1.6 loops forever on a public case and runs its
pytest: it ends, and its one line for 1.6 names the call and says "did not
finish within 5 s", the grader's words for a call past `Limits.call_seconds`.
"""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from shardlab.autograder.kit.comparison import CALL_SECONDS, call_within, check
from shardlab.autograder.kit.local_checks import bound_seconds, failure_line, timed_out
from shardlab.autograder.publish.starter import kit_files
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.autograder.sandbox.process import Limits
from shardlab.reference.config import load_config

HAS_ALARM = hasattr(signal, "setitimer")


def _forever(n):
    while n < 0:
        pass
    return n


def _forever_swallowing(n):
    """A loop that catches what interrupts it (its own `except Exception`), and one that catches everything."""
    while True:
        try:
            while True:
                pass
        except Exception:
            pass


class Outer(Exception):
    """What the outer alarm (pytest-timeout's, here a stand-in) raises."""


@pytest.fixture
def outer_alarm():
    """An alarm set before the call, as pytest-timeout's is: (its handler, seconds from now) -> arm it."""
    saved = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)

    def arm(seconds: float):
        def handler(signum, frame):
            raise Outer
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        return handler
    yield arm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, saved[0])
    signal.setitimer(signal.ITIMER_REAL, *saved[1])


@pytest.mark.pure
def test_the_kit_and_the_grader_share_one_limit():
    assert Limits().call_seconds == CALL_SECONDS == 5


@pytest.mark.pure
def test_a_call_in_time_returns_its_value_and_its_error_propagates():
    assert call_within(_forever, {"n": 3}, 5) == (True, 3)
    with pytest.raises(TypeError):
        call_within(_forever, {"m": 3}, 5)


@pytest.mark.pure
@pytest.mark.skipif(not HAS_ALARM, reason="no SIGALRM on this system")
def test_an_endless_call_is_stopped_at_the_limit(outer_alarm):
    handler = outer_alarm(100)
    start = time.monotonic()
    assert call_within(_forever, {"n": -1}, 0.1) == (False, None)
    assert call_within(_forever_swallowing, {"n": -1}, 0.1) == (False, None)   # its `except Exception` too
    elapsed = time.monotonic() - start
    assert elapsed < 5
    # the outer alarm is back, due when it was (100 s after it was set)
    assert signal.getsignal(signal.SIGALRM) is handler
    assert abs(signal.getitimer(signal.ITIMER_REAL)[0] - (100 - elapsed)) < 1


@pytest.mark.pure
@pytest.mark.skipif(not HAS_ALARM, reason="no SIGALRM on this system")
def test_an_outer_alarm_due_first_is_left_to_fire(outer_alarm):
    outer_alarm(0.1)
    start = time.monotonic()
    with pytest.raises(Outer):
        call_within(_forever, {"n": -1}, 60)
    assert time.monotonic() - start < 5


@pytest.mark.pure
@pytest.mark.skipif(not HAS_ALARM, reason="no SIGALRM on this system")
def test_a_call_that_swallows_the_interruption_is_still_stopped_by_the_outer_alarm(outer_alarm):
    def swallows_once(n):
        try:
            while True:
                pass
        except BaseException:       # noqa: BLE001 - the student's bare except catches the interruption
            pass
        while True:                 # and runs on
            pass
    outer_alarm(0.3)
    start = time.monotonic()
    with pytest.raises(Outer):
        call_within(swallows_once, {"n": 0}, 0.1)
    assert time.monotonic() - start < 5 * 0.3       # 5x the outer alarm's 0.3 s


@pytest.mark.pure
def test_without_an_alarm_a_slow_call_is_judged_when_it_returns():
    """Off the main thread (and on Windows) no alarm stops the call: it fails once it returns late."""
    got = []
    def slow(pause):
        time.sleep(pause)
        return "slept"
    worker = threading.Thread(target=lambda: got.append(call_within(slow, {"pause": 0.1}, 0.05)))
    worker.start()
    worker.join(10)
    assert got == [(False, "slept")]


@pytest.mark.pure
@pytest.mark.skipif(not HAS_ALARM, reason="no SIGALRM on this system")
def test_a_check_past_the_limit_fails_in_the_graders_words(tmp_path, monkeypatch):
    (tmp_path / "assignments").mkdir()
    (tmp_path / "assignments" / "__init__.py").write_text("")
    (tmp_path / "assignments" / "endless.py").write_text("def wait(n):\n    while n < 0:\n        pass\n    return n\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("assignments", "assignments.endless"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        with pytest.raises(AssertionError) as failed:
            check("endless", "wait", {"n": -1}, 1, "int", seconds=0.1)
        check("endless", "wait", {"n": 2}, 2, "int", seconds=0.1)
    finally:
        for name in ("assignments", "assignments.endless"):
            sys.modules.pop(name, None)
    assert str(failed.value) == "wait(n=-1): did not finish within 0.1 s"
    entry = {"part": "9.1", "check": {"function": "wait", "args": {"n": -1}}}
    assert failure_line(entry, failed.value) == "wait(n=-1): did not finish within 0.1 s"


@pytest.mark.pure
def test_pytest_timeout_bounds_lie_above_the_kits_own_deadlines():
    from shardlab.autograder.kit.local import START_SECONDS
    from shardlab.autograder.kit.local_checks import SCENARIO_SECONDS
    run = {"part": "2.7", "call": "fsdp_train(world_size=2, seed=1)"}
    case = {"part": "1.1", "check": {"function": "param_count", "args": {"d_model": 8}}}
    assert bound_seconds(run) > START_SECONDS + SCENARIO_SECONDS
    assert bound_seconds(case) > Limits().import_seconds + CALL_SECONDS
    assert failure_line(run, timed_out(run, 210)) == "fsdp_train(world_size=2, seed=1): did not finish within 210 s"


# Task 1.6 as a linear search without the "no degree fits" test: when 2C - A <= 0 no n makes
# 2S + A < n (2C - A), and the loop never ends
ENDLESS_SEARCH = '''

def min_fsdp_degree(state_bytes, activation_bytes, device_bytes):
    n = 1
    while 2 * state_bytes + activation_bytes >= n * (2 * device_bytes - activation_bytes):
        n += 1
    return n
'''


@pytest.mark.platform
def test_the_kits_pytest_names_the_task_that_did_not_finish(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text('[course]\nquestions = ["memory"]\n')
    kit = tmp_path / "kit"
    for path, text in kit_files(load_config(course), "# Handout\n").items():
        (kit / path).parent.mkdir(parents=True, exist_ok=True)
        (kit / path).write_bytes(text if isinstance(text, bytes) else text.encode())
    shutil.copy(SOLUTIONS / "memory.py", kit / "assignments" / "memory.py")
    with open(kit / "assignments" / "memory.py", "a") as f:
        f.write(ENDLESS_SEARCH)
    cases = json.loads((kit / "tests" / "public_cases.json").read_text())["1"]
    endless = [c["check"]["args"] for c in cases if c["part"] == "1.6"
               and 2 * c["check"]["args"]["device_bytes"] <= c["check"]["args"]["activation_bytes"]]
    assert endless, "no public case of 1.6 where no degree fits"
    call = "min_fsdp_degree(" + ", ".join(f"{k}={v!r}" for k, v in endless[0].items()) + ")"

    def kit_pytest(*options: str) -> list[str]:
        """The kit's one line per failing task (its conftest.py), after checking that pytest ended and failed."""
        ran = subprocess.run([sys.executable, "-I", "-m", "pytest", "-p", "no:cacheprovider", "-q", *options],
                             cwd=kit, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 1, ran.stdout[-3000:]
        return [line for line in ran.stdout.splitlines() if re.match(r"\d+\.\d+( \(\d+ of \d+ cases fail\))?: ", line)]

    report = kit_pytest()           # the call stopped at the grader's limit; every other task passes
    assert len(report) == 1 and re.match(r"1\.6( \(\d+ of \d+ cases fail\))?: ", report[0]), report
    assert report[0].endswith(f"{call}: did not finish within {CALL_SECONDS:g} s"), report
    # pytest-timeout's bound, when it comes first (here given on the command line), in the same words
    report = kit_pytest("-m", "task_1_6", "--timeout=2")
    assert len(report) == 1 and report[0].endswith(f"{call}: did not finish within 2 s"), report
