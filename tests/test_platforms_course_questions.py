"""A course that brings its own question, end to end: examples/tp-course/
(question 6, tensor parallelism, one folder written only against the
contract of ARCHITECTURE.md, "Adding a question") built, self-checked,
run by its starter kit, exported to the otter zip and replayed as
Gradescope runs it.

Numbers by hand from the question's spec (examples/tp-course/README.md):
points 2 + 2 + 2 + 2 for 6.1-6.4 and 4 for 6.5, 12 in all; each wrong
submission loses 6.5 alone, 8 of 12. The course's worked numbers, XXL
(D = 16,384, F = 53,248), T = 4,096, t = 8 on the intra-node network
(alpha = 5 us, beta = 450e9 B/s), an H100 (C = 9.89e14 FLOP/s):
S = T · D · 2 = 134,217,728 bytes; an all-reduce sends 2 · 7/8 · S =
234,881,024 bytes; the row-parallel layer's per-token margin is
2 F D / (t C) - 2 (t-1) D b / (t beta) = 2.2053e-7 - 1.2743e-7 = 9.310e-8 s,
so it is compute bound from ceil(2 · 7 · 5e-6 / 9.310e-8) = ceil(751.9) =
752 tokens.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.publish import gradescope_replay as replay
from helpers import assert_gradescope_results, run_cli

pytestmark = pytest.mark.platform

COURSE_DIR = content.ROOT / "examples" / "tp-course"
COURSE = COURSE_DIR / "course.toml"
QUESTION = COURSE_DIR / "questions" / "tp"
NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="needs root and unshare(1) for a private /autograder")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """`shardlab build` of the example course: handout, solutions, starter kit, otter zip."""
    out = tmp_path_factory.mktemp("tp-course")
    done = run_cli("build", "--config", str(COURSE), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_handout_and_solutions_set_question_6_with_its_numbers(built):
    handout, solutions = ((built / name).read_text() for name in ("handout.md", "solutions.md"))
    for text in (handout, solutions):
        assert "## Question 6 — Tensor parallelism (12 points)" in text
        assert "| 6.5 | the 2D forward on a 2 x 2 mesh | 4 |" in text
        assert "## Question 1" not in text                   # the course sets its own question only
        assert "Question 6 is this course's own" in text
    for shown in ("134,217,728 bytes", "234,881,024 bytes", "752 tokens"):
        assert shown in solutions and shown not in handout


def test_the_starter_kit_ships_the_stub_and_the_kit_halves_and_its_runs_pass_with_the_solution(built, tmp_path):
    with zipfile.ZipFile(built / "starter-kit.zip") as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path)
    kit = tmp_path / "starter-kit"
    assert {"starter-kit/tests/shardlab_local/scenarios/tp.py", "starter-kit/tests/shardlab_local/checks/tp.py",
            "starter-kit/tests/test_q6_tp.py"} <= names
    stub = (kit / "assignments" / "tp.py").read_text()
    assert 'raise NotImplementedError("Task 6.5: ffn_forward_2d")' in stub and "reduce_scatter_tensor" not in stub
    shutil.copy(QUESTION / "solution.py", kit / "assignments" / "tp.py")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=kit,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]


def test_the_otter_zip_carries_the_question_but_never_its_solution(built):
    with zipfile.ZipFile(built / "autograder.zip") as zf:
        own = sorted(n for n in zf.namelist() if n.startswith("questions/"))
    assert own == ["questions/tp/checks.py", "questions/tp/question.py", "questions/tp/reference.py",
                   "questions/tp/scenario.py"]


def test_check_grades_solutions_full_stubs_zero_and_each_wrong_submission_as_declared():
    done = run_cli("check", "--config", str(COURSE))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in done.stdout.splitlines() if line.count("│") >= 4}
    assert rows == {"solutions": ["12/12", "yes"], "stubs": ["0/12", "yes"],
                    "tp_allreduce_out": ["8/12", "yes"], "tp_wrong_axis": ["8/12", "yes"]}


@NEEDS_ROOT
def test_the_zip_replayed_as_gradescope_runs_it_grades_the_solution_in_full(built, tmp_path):
    scratch = replay.scratch()
    try:
        env = replay.make_env(scratch)
        status, log = replay.build_image(built / "autograder.zip", env, scratch / "image", scratch / "build")
        assert status == 0, log[-3000:]
        upload = tmp_path / "upload" / "assignments"
        upload.mkdir(parents=True)
        shutil.copy(QUESTION / "solution.py", upload / "tp.py")
        student = {"email": "ada@example.edu", "id": 42, "name": "Ada Lovelace"}
        run = replay.replay(scratch / "image", env, upload.parent, replay.gradescope_metadata([student]),
                            tmp_path / "run")
        assert run.results is not None, run.log[-3000:]
        assert_gradescope_results(run.results)
        graded = [t for t in run.results["tests"] if "score" in t]
        assert [(float(t["score"]), float(t["max_score"])) for t in graded] == [(12, 12)], \
            [t.get("output", "")[:300] for t in graded]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

