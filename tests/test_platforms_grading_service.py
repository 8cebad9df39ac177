"""The batch's grading services (`platforms.grading_service`): what a service
holds before it forks a grader, and that every grading is a fresh fork.

The isolation argument is in docs/trust.md ("The batch's grading
services"): a service imports and forks, and nothing else, so no grader
child starts with anything another submission's grading made. The attack
tests on a killed or stopped service are in test_attacks_leftovers.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shardlab.autograder.platforms import batch
from shardlab.autograder.platforms.grading_service import GradingService

pytestmark = pytest.mark.platform

STATE_AFTER_PRELOAD = """
import json, sys, threading
from shardlab.autograder import cli  # noqa: F401 - the service's entry (`shardlab grading-service`)
from shardlab.autograder.platforms import grading_service
grading_service.preload()
from shardlab.autograder.engine import plan
from shardlab.autograder.sandbox import zygote
from shardlab.autograder.sandbox.gloo import seeds
print(json.dumps({
    "torch": "torch" in sys.modules,
    "threads": threading.active_count(),
    "caches": {"data seed drawn": seeds._drawn.cache_info().currsize,
               "seed pool": seeds.data_seed_pool.cache_info().currsize,
               "cases": plan.part_cases.cache_info().currsize,
               "expected values": plan._expected_values.cache_info().currsize},
    "zygote client": zygote._SHARED is not None,
}))
"""


def test_a_service_holds_imports_and_nothing_a_grading_made():
    """Before its first fork: no torch (its pages are the zygote's), one thread (a fork of a
    threaded process may inherit a held lock), no cache filled: the data-seed key is drawn in
    each grader child, never once for all of them."""
    done = subprocess.run([sys.executable, "-c", STATE_AFTER_PRELOAD], capture_output=True, text=True,
                          timeout=120, check=True)
    state = json.loads(done.stdout)
    assert state == {"torch": False, "threads": 1, "zygote client": False,
                     "caches": {"data seed drawn": 0, "seed pool": 0, "cases": 0, "expected values": 0}}


def test_every_request_is_a_fresh_fork_that_is_gone_after(tmp_path):
    service = GradingService()
    try:
        replies = [service.run(batch.grader_argv(str(tmp_path / "missing"), None), timeout=120) for _ in range(2)]
        assert service.proc is not None
        pids = [r["pid"] for r in replies]
        assert len(set(pids)) == 2 and service.proc.pid not in pids
        assert all(not os.path.exists(f"/proc/{pid}") for pid in pids)        # reaped by the service
        for r in replies:          # what a fresh `shardlab grade` says of a path with nothing at it
            assert r["returncode"] == 2 and r["stderr"].strip().startswith("error:"), r
            assert len(r["stderr"].strip().splitlines()) == 1
    finally:
        service.close()
    assert service.proc.returncode is not None


def test_a_submission_graded_in_a_service_gets_the_report_a_fresh_grader_gives(tmp_path):
    """The stubs (every part 0, quickly): the service's report and `shardlab grade --json`'s agree."""
    import shutil

    from shardlab.autograder.publish.stubs import ASSIGNMENTS
    shutil.copytree(ASSIGNMENTS, tmp_path / "sub" / "assignments")
    argv = batch.grader_argv(str(tmp_path / "sub"), None)
    service = GradingService()
    try:
        via_service = batch.grade_supervised(str(tmp_path / "sub"), None, service)
    finally:
        service.close()
    fresh = subprocess.run([sys.executable, "-m", "shardlab.autograder.cli", *argv], capture_output=True,
                           text=True, timeout=600)
    report = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert via_service["status"] == "ok"

    def scores(r):         # not the feedback: a part failed on every rank names the rank that failed first
        return {p["id"]: p["score"] for q in r["questions"] for p in q["parts"]}
    assert scores(via_service) == scores(report) and via_service["max_score"] == report["max_score"] > 0


def test_a_service_that_cannot_start_is_an_error_row_that_says_why(tmp_path, monkeypatch):
    """A broken install: the row says the service's last words, the attempt is retried on a new service."""
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named shardlab' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(broken))
    pool = batch.ServicePool(1, {})
    try:
        rows = [pool.grade(str(tmp_path / "sub"), None) for _ in range(2)]
    finally:
        pool.close()
    for row in rows:
        assert row["status"] == "error" and row["retry"], row
        assert row["error"].startswith("the grader failed: the grading service")
        assert row["error"].endswith(": ModuleNotFoundError: No module named shardlab"), row
    assert len(pool.started) == 3          # each failed service replaced


def test_a_service_closed_while_a_grading_waits_is_a_service_error(monkeypatch):
    """The batch closes a service (its stop, its timeout) from another thread while a grading waits for
    the reply. Whatever that close has already closed, the waiting grading gets a ServiceError, never a
    ValueError of a closed file (seen under a load average of 16: the close landed between the wait and
    the read). The interleaving is forced: the wait returns only after the close is done."""
    from shardlab.autograder.platforms import grading_service
    service = GradingService()
    # a service that reads its request and never answers
    service.proc = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.stdin.readline(); time.sleep(60)"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)

    def close_first(readers, writers, errors, timeout):
        service.close()                             # ends the service and closes its streams
        return readers, [], []

    monkeypatch.setattr(grading_service.select, "select", close_first)
    with pytest.raises(grading_service.ServiceError):
        service.run(["grade", "nothing"], timeout=5)
    assert service.proc.poll() is not None          # the service was ended, not left behind
