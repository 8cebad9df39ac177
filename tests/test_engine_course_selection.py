"""Courses pick their questions: `[course] questions = [...]` and a question's
total in `[points]`. A course that sets memory and pipeline gets those two in
the handout, the solutions, the starter kit, the otter zip, the grade and
`shardlab check`, and nothing of the other three."""
import json
import re
import zipfile

import pytest

from shardlab.autograder.engine.grading import grade_folder
from shardlab.autograder.selfcheck import fixtures, folder_of
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.autograder.questions import check_points_config, part_points, questions
from shardlab.reference.config import load_config
from helpers import assert_one_line_error, run_cli

TWO = '[course]\nquestions = ["pipeline", "memory"]\n'


def _config(tmp_path, text, name="course.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _total(cfg, module):
    q = next(q for q in questions() if q.module == module)
    return sum(part_points(p, cfg) for p in q.parts if p.kind == "auto" and not p.bonus)


@pytest.mark.pure
def test_the_selection_is_in_number_order_and_empty_means_all(tmp_path):
    cfg = load_config(_config(tmp_path, TWO))
    assert [q.module for q in questions(cfg)] == ["memory", "pipeline"]
    assert [q.number for q in questions(cfg)] == [1, 5]
    assert len(questions(load_config(None))) == len(questions()) >= 5


@pytest.mark.pure
def test_a_questions_total_scales_its_parts_and_leaves_the_others(tmp_path):
    plain = load_config(None)
    cfg = load_config(_config(tmp_path, TWO + '[points]\npipeline = 30\n"5.1" = 4\n'))
    check_points_config(cfg)
    assert _total(cfg, "pipeline") == pytest.approx(30)
    assert _total(cfg, "memory") == _total(plain, "memory")
    five = {p.id: p for p in next(q for q in questions() if q.number == 5).parts}
    # 5.1 is set to 4 before the question is scaled: it keeps its share of the 30 points
    base = 4 + sum(p.points for p in five.values() if p.kind == "auto" and not p.bonus and p.id != "5.1")
    assert part_points(five["5.1"], cfg) == pytest.approx(4 * 30 / base)
    assert part_points(five["5.2"], cfg) == pytest.approx(five["5.2"].points * 30 / base)


@pytest.mark.pure
@pytest.mark.parametrize("text, message", [
    ('[course]\nquestions = ["memory", "pipelines"]\n', "unknown questions: pipelines (known: memory, fsdp"),
    ('[course]\nquestions = ["memory"]\n[points]\n"2.7" = 3\n', "gives points to 2.7, of questions this course"),
    ('[course]\nquestions = ["memory"]\n[points]\nfsdp = 3\n', "gives points to fsdp"),
    ('[points]\nfsdpp = 3\n', "unknown parts: fsdpp"),
])
def test_what_a_course_does_not_set_is_refused_by_name(tmp_path, text, message):
    with pytest.raises(ShardlabError, match=re.escape(message)):
        check_points_config(load_config(_config(tmp_path, text)))


@pytest.mark.pure
def test_the_list_must_be_a_list(tmp_path):
    with pytest.raises(ShardlabError, match=re.escape("[course].questions must be a list of strings")):
        load_config(_config(tmp_path, '[course]\nquestions = "memory"\n'))


@pytest.mark.platform
def test_the_cli_refuses_an_unknown_question_in_one_line(tmp_path):
    path = _config(tmp_path, '[course]\nquestions = ["memory", "pipelines"]\n')
    assert_one_line_error(run_cli("build", "--config", str(path), "--out", str(tmp_path / "o")),
                          "unknown questions: pipelines")


@pytest.mark.platform
def test_a_two_question_course_builds_only_those(tmp_path):
    out = tmp_path / "out"
    r = run_cli("build", "--config", str(_config(tmp_path, TWO + "[points]\npipeline = 30\n")), "--out", str(out))
    assert r.returncode == 0, r.stderr
    handout = (out / "handout.md").read_text()
    solutions = (out / "solutions.md").read_text()
    for text in (handout, solutions):
        assert re.findall(r"^## Question (\d+)", text, re.M) == ["1", "5"]
        tasks = set(re.findall(r"^\| (\d)\.\w+ \|", text, re.M))
        assert tasks == {"1", "5"}, tasks
    # [points] pipeline = 30 scales the autograded parts; the written ones keep their own (5 x 2, by hand)
    assert "## Question 5 — Pipeline parallelism (30 points + 10 written)" in handout
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["pipeline_schedules.png"]
    with zipfile.ZipFile(out / "autograder.zip") as zf:
        assert sorted(n for n in zf.namelist() if n.startswith("tests/")) == ["tests/q1.py", "tests/q5.py"]
    with zipfile.ZipFile(out / "starter-kit.zip") as zf:
        names = zf.namelist()
        kit_modules = sorted(n.split("/")[-1] for n in names if "/assignments/" in n)
        assert kit_modules == ["__init__.py", "memory.py", "pipeline.py"]
        assert sorted(n.split("/")[-1] for n in names if re.search(r"tests/test_q\d", n)) == \
            ["test_q1_memory.py", "test_q5_pipeline.py"]
        cases = json.loads(zf.read("starter-kit/tests/public_cases.json"))
        runs = json.loads(zf.read("starter-kit/tests/public_runs.json"))
        writeup = zf.read("starter-kit/writeup.md").decode()
    assert sorted(cases) == ["1", "5"] and sorted(runs) == ["1", "5"] and runs["5"] and not runs["1"]
    assert set(re.findall(r"^## (\d)\.", writeup, re.M)) <= {"1", "5"}


@pytest.mark.sandbox
def test_a_two_question_course_grades_and_checks_only_those(tmp_path):
    cfg = load_config(_config(tmp_path, TWO + "[points]\npipeline = 30\n"))
    with folder_of(SOLUTIONS) as root:
        report = grade_folder(root, cfg)
    assert [q.id for q in report.questions] == ["1", "5"]
    assert report.max_score == pytest.approx(_total(cfg, "memory") + 30)
    assert report.score >= report.max_score
    chosen = fixtures(cfg)
    assert chosen and all(f.modules <= {"memory", "pipeline"} for f in chosen)
    assert {f.name for f in fixtures()} - {f.name for f in chosen} >= {"fsdp_sums", "ddp_sums_gradients"}
