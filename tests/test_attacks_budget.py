"""One wall-clock budget per grading (issue 30, item 2).

The attack: every function sleeps just under the per-call limit (5 s).
Each call then finishes in time, and a grading whose budget grew with its
number of calls (`import_seconds + call_seconds * calls`) stayed busy for
as long as the course has calls: about 28 minutes for the shipped course,
past Gradescope's 10 and batch's timeout. With `[grading] budget_seconds`,
the grading ends at the budget whatever the calls do; what is left fails as
"did not finish", and batch waits longer than the budget by construction.
"""
from __future__ import annotations

import json
import time

import pytest

from helpers import run_cli

from shardlab.autograder.platforms import batch
from shardlab.reference.config import load_config

BUDGET = 15
COURSE = f'[course]\nname = "Budget"\nquestions = ["memory"]\n[grading]\nbudget_seconds = {BUDGET}\n'

SLOW = '''

import time as _time


def _slow(fn):
    def slowed(*args, **kwargs):
        _time.sleep(4.5)                # just under the grader's 5 s per call
        return fn(*args, **kwargs)
    return slowed


for _name, _fn in list(globals().items()):    # every function the module defines
    if callable(_fn) and not _name.startswith("_") and getattr(_fn, "__module__", None) == __name__:
        globals()[_name] = _slow(_fn)
'''


@pytest.mark.sandbox
@pytest.mark.timeout(300)
def test_calls_just_under_the_limit_cannot_stretch_a_grading(tmp_path, submission):
    course = tmp_path / "course.toml"
    course.write_text(COURSE)
    from shardlab.autograder.core import content
    root = submission(memory=(content.folder("solutions") / "memory.py").read_text() + SLOW)
    start = time.monotonic()
    done = run_cli("grade", str(root), "--json", "--config", str(course), timeout=280)
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    parts = {p["id"]: p for q in report["questions"] for p in q["parts"]}
    # about BUDGET s of student code plus the grader's own start and end; without the budget, over 4 minutes
    assert elapsed < 5 * (BUDGET + 5), elapsed        # 5x the budget and the grader's start; 281 s without it
    assert report["score"] < report["max_score"]
    assert any("did not finish" in p["feedback"] for p in parts.values()), [p["feedback"][:200] for p in parts.values()]
    assert all(p.get("status") != "internal-error" for p in parts.values())   # the student's time, not our failure


@pytest.mark.pure
def test_batch_waits_longer_than_the_budget(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text(COURSE)
    assert load_config(course).grading.budget_seconds == BUDGET
    assert batch.grade_timeout(str(course)) == BUDGET + batch.GRADE_MARGIN_SECONDS > BUDGET
    shipped = load_config()
    # the worst case of a shipped-course grading ends well inside Gradescope's default 10 minutes
    assert shipped.grading.budget_seconds + batch.GRADE_MARGIN_SECONDS <= 600 and shipped.grading.budget_seconds <= 300
