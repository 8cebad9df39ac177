"""`shardlab check` on any valid course, not only the shipped one: the
solutions full marks (their answers.toml too, when the course has a secret),
the stubs zero, and every wrong submission (tests/submissions/) as its
expect.toml declares, or "not applicable on this course" where the course's
numbers make its mistake give the right value (`selfcheck.unseen_groups`).

One `shardlab check` run per course, in a module-scoped fixture: the second
course (reference/courses/a100.toml) and the shipped one, each graded in
full by the CLI (a minute or two each); the course built here, where two
fixtures' mistakes cannot be seen, grades only those two, in-process."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.results import GroupResult, PartResult
from shardlab.autograder.engine.plan import case_groups, part_cases
from shardlab.autograder.sandbox.process import Limits
from shardlab.autograder.selfcheck import (NOT_APPLICABLE, Fixture, check_fixture, fixtures, part_problems,
                                           unseen_groups)
from shardlab.reference.config import load_config

A100 = content.folder("reference") / "courses" / "a100.toml"
FAST = Limits(call_seconds=2.0, import_seconds=30.0)
# the shipped course's devices and model: no fixture may name them
SHIPPED_NAMES = re.compile(r"H100|TPU v5p|\bXXL\b")

# A course whose whole model fits on one of its devices. By hand: P = 2 · 4096 · 16384 · 32 = 2^32
# parameters; the training state is 16 bytes each, 2^36 bytes = 64 GiB = 68.7 GB; the activations are
# 32 blocks · 4096 tokens · (4096 + 16384) · 2 bytes = 5 · 2^30 bytes = 5 GiB = 5.37 GB. Total 69 GiB
# = 74.1 GB, on a 100 GB device:
# - 1.4 devices_needed: ceil(74.1e9 / 100e9) = 1 device; mixing GiB with GB gives ceil(69 / 100) = 1
#   too, and the training state alone ceil(68.7 / 100) = ceil(64 / 100) = 1: gib_for_gb's groups
#   "the course model on <its device>" and "training state only" cannot be lost (its random
#   "other inputs" still can).
# - 1.6 min_fsdp_degree: the right N = 1, since (S + A/2)/1 + A/2 = 74.1 GB < 100 GB; sharding all
#   activations gives floor((S + A) / C) + 1 = floor(0.741) + 1 = 1 as well: all_activations_sharded's
#   group "the course model on <its device>" cannot be lost (its edge cases still can: "barely fits",
#   A = 2C - 2, needs N = S + C when half the activations stay, but 2 when all are sharded).
ROOMY = """
[course]
name = "A model that fits on one device"
questions = ["memory"]

[model]
name = "F4"
d_model = 4096
d_ff = 16384
num_blocks = 32

[hardware."Roomy 100GB"]
capacity_bytes = 100e9
flops_per_second = 1e15
hbm_bytes_per_second = 3e12

[memory]
tokens_per_device = 4096
gpu = "Roomy 100GB"
fsdp_device = "Roomy 100GB"
"""
# Courses whose own numbers leave a sub-question without an answer (docs/spec.md; `questions.degeneracies`),
# where some fixtures' course groups cannot be lost: the pipeline's single stage has no bubble, so
# taking the ratio for the fraction gives 0 too; no batch makes the (2 x 32) mesh compute bound
# (F·W·M_Y = 53,248 · 1.8e11 < Y·C = 32 · 4.6e14), so B/N and the missing M factor give None too;
# F = 53,248 does not split over Y = 3, so 3.6 has no course case at all.
DEGENERATE = {
    "one stage": '[course]\nquestions = ["pipeline"]\n[pipeline]\nstages = 1\n',
    "a target every m meets": '[course]\nquestions = ["pipeline"]\n[pipeline]\ntarget_bubble_percent = 100\n',
    "never compute bound": '[course]\nquestions = ["comm4d"]\n[comm4d]\nx = 2\ny = 32\n',
    "F does not split over Y": '[course]\nquestions = ["comm4d"]\n[comm4d]\ny = 3\n',
}
ROOMY_UNSEEN = {
    "gib_for_gb": {"1.4": {"the course model on Roomy 100GB", "training state only"}},
    "all_activations_sharded": {"1.6": {"the course model on Roomy 100GB"}},
}


def _check(*args: str) -> tuple[subprocess.CompletedProcess, dict[str, tuple[float, float, str]]]:
    """`shardlab check <args>` in a subprocess, and its table: {submission: (score, max, status)}."""
    done = subprocess.run([sys.executable, "-m", "shardlab.autograder.cli", "check", *args], capture_output=True,
                          text=True, timeout=1200, env={**os.environ, "COLUMNS": "400"})
    rows: dict[str, tuple[float, float, str]] = {}
    last = ""
    for line in done.stdout.splitlines():
        if not line.startswith("│"):
            continue
        name, score, status = (cell.strip() for cell in line.strip().strip("│").split("│"))
        if name:
            got, _, most = score.partition("/")
            rows[name], last = (float(got), float(most), status), name
        else:                                   # a long status wrapped onto the next line
            rows[last] = (*rows[last][:2], f"{rows[last][2]} {status}")
    return done, rows


@pytest.fixture(scope="module")
def a100():
    return load_config(A100)


@pytest.fixture(scope="module")
def a100_check():
    return _check("--config", str(A100))


@pytest.fixture(scope="module")
def roomy(tmp_path_factory):
    path = tmp_path_factory.mktemp("roomy") / "course.toml"
    path.write_text(ROOMY)
    return load_config(path)


@pytest.fixture(scope="module")
def roomy_rows(roomy):
    """The two fixtures whose mistakes this course cannot fully show, graded as `shardlab check` does."""
    return {f.name: check_fixture(roomy, f, FAST) for f in fixtures(roomy) if f.name in ROOMY_UNSEEN}


@pytest.mark.platform
@pytest.mark.timeout(900)          # its fixture runs the whole check: about a minute, two on a busy machine
def test_the_second_course_checks(a100, a100_check):
    done, rows = a100_check
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert set(rows) == {"solutions", "stubs"} | {f.name for f in fixtures(a100)}
    # by hand, as in test_platforms_second_course.py: questions 1, 4 and 5 are worth 30, 17 and 25,
    # answers.toml 2 points for each of the 3 questions: the solutions' generated sheet earns them
    assert rows["solutions"][:2] == (78, 78)
    assert rows["stubs"][:2] == (0, 78)
    wrong = {name: status for name, (_, _, status) in rows.items()
             if status != "yes" and not status.startswith(NOT_APPLICABLE)}
    assert wrong == {}


@pytest.mark.pure
def test_on_the_shipped_course_every_declared_loss_can_be_seen():
    """The course the fixtures were written for makes none of them "not applicable". Their grading
    on it is in tests/test_question_*.py (one file per question), so the CLI check is not run again."""
    assert {f.name: f.not_applicable for f in fixtures() if f.on(load_config()).not_applicable} == {}


@pytest.mark.pure
def test_a_course_where_a_mistake_gives_the_right_value(roomy):
    unseen = {f.name: {pid: set(groups) for pid, groups in f.not_applicable.items()}
              for f in fixtures(roomy) if f.not_applicable}
    assert unseen == ROOMY_UNSEEN
    gib = next(f for f in fixtures(roomy) if f.name == "gib_for_gb")
    assert gib.failing["1.4"] == ("other inputs", "edge case: one byte past a whole number of devices, beyond 2^53")
    assert gib.feedback["1.4"] == "GiB"
    assert "'GiB for GB' gives the right value in every case" in gib.not_applicable_text()
    assert all(not f.not_applicable for f in fixtures())          # the shipped course shows them all


@pytest.mark.sandbox
def test_not_applicable_is_reported_not_failed(roomy_rows):
    for name, row in roomy_rows.items():
        assert row.ok, row.problems
        assert row.status.startswith(f"{NOT_APPLICABLE}: "), row.status
        for pid, groups in ROOMY_UNSEEN[name].items():
            part = row.report.part(pid)
            passed = {g.name for g in part.groups if g.score == g.max_score}
            assert groups <= passed and part.score < part.max_score     # the rest of the mistake still costs


@pytest.mark.pure
def test_a_group_not_applicable_that_fails_anyway_is_a_problem(roomy):
    gib = next(f for f in fixtures(roomy) if f.name == "gib_for_gb")
    names = [name for name, _ in case_groups(part_cases(roomy, "1.4"))]
    lost = {"other inputs", "the course model on Roomy 100GB"}
    part = PartResult("1.4", "devices_needed", 1 - 2 / len(names), 1.0, "…", groups=[
        GroupResult(n, 0.0 if n in lost else 1 / len(names), 1 / len(names), False) for n in names])
    assert any("failed the groups" in msg for msg in part_problems(part, gib, full=False))


@pytest.mark.pure
@pytest.mark.parametrize("course", ["shipped", "a100", "roomy", *DEGENERATE])
def test_a_named_mistake_predicts_exactly_the_declared_losses(course, a100, roomy, tmp_path):
    """The criterion that makes a group not applicable is the one that, on every course here,
    says which groups the fixture loses: the misconception it names, case by case."""
    if course in DEGENERATE:
        (tmp_path / "course.toml").write_text(DEGENERATE[course])
    cfg = {"shipped": load_config(), "a100": a100, "roomy": roomy}.get(course) or load_config(tmp_path / "course.toml")
    named = 0
    for f in fixtures(cfg):
        for pid in f.mistakes:
            groups = [g for g, _ in case_groups(part_cases(cfg, pid))]
            seen = set(groups) - set(unseen_groups(cfg, pid, groups, f.mistake(pid)))
            declared = set(f.failing[pid]) if pid in f.failing else set(groups)      # a `zero` part: all
            assert seen == declared, (f.name, pid)
            named += 1
    assert named >= 3


@pytest.mark.pure
def test_fixtures_name_no_course():
    for path in sorted((content.ROOT / "tests" / "submissions").rglob("*")):
        if path.suffix in (".toml", ".py"):
            assert not SHIPPED_NAMES.search(path.read_text()), path


@pytest.mark.pure
def test_a_declaration_the_course_cannot_fill_is_one_line(roomy):
    gib = next(f for f in fixtures() if f.name == "gib_for_gb")
    with pytest.raises(ShardlabError, match=r"gib_for_gb/expect.toml: part 1.4 has no misconception 'GiB'"):
        Fixture(**{**vars(gib), "mistakes": {"1.4": "GiB"}}).on(roomy)
    with pytest.raises(ShardlabError, match=r"cannot be filled from the course: AttributeError"):
        Fixture(**{**vars(gib), "failing": {"1.4": ("on {cfg.memory.gpu.nickname}",)}}).on(roomy)


# A course where 'GiB for GB' loses groups of 1.4 but cannot be named in its feedback: on every failure
# the feedback shows, another known mistake of 1.4 gives the same number (found by
# tests/test_engine_check_applicability.py's random courses; `parts.alternatives` then names neither).
UNNAMED = """
[course]
questions = ["memory"]
[hardware."Trillium"]
capacity_bytes = 32e9
flops_per_second = 9.18e14
[model]
d_model = 13568
d_ff = 27136
num_blocks = 96
[memory]
tokens_per_device = 1024
gpu = "H200"
fsdp_device = "Trillium"
"""


@pytest.mark.sandbox
def test_a_mistake_that_cannot_be_named_is_not_applicable_not_a_failure(tmp_path):
    from shardlab.autograder.selfcheck import named_in_feedback
    (tmp_path / "course.toml").write_text(UNNAMED)
    cfg = load_config(tmp_path / "course.toml")
    gib = next(f for f in fixtures(cfg) if f.name == "gib_for_gb")
    assert not named_in_feedback(cfg, "1.4", gib.mistake("1.4")) and gib.failing["1.4"]
    row = check_fixture(cfg, gib, FAST)
    assert row.ok, row.problems
    assert "'GiB for GB' cannot be named" in row.not_applicable
    assert row.report.part("1.4").score < row.report.part("1.4").max_score      # the mistake still costs
