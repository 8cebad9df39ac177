"""The smaller things an instructor trips on with a roster and an answer key: strict JSON (no
Infinity), students drawing the same numbers, ids that differ only in case, the roster's own line
numbers, an id not on the roster, and a blank answers.toml."""
import json
import math

import pytest

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.engine.answer_sheet import grade_answers, sheet_toml
from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.publish.roster import Student, read_roster, roster_warnings, strict_json
from shardlab.reference.config import load_config
from helpers import run_cli

pytestmark = pytest.mark.pure

COURSE = ('[course]\nsecret = "s3cret, long enough"\nquestions = ["pipeline"]\n'
          '[variants]\npipeline.microbatches = [{}]\n')


def _course(tmp_path, choices="16, 32, 48"):
    (tmp_path / "course.toml").write_text(COURSE.format(choices))
    return load_config(tmp_path / "course.toml")


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_strict_json_spells_no_limit_as_answers_toml_does():
    record = {"pmax": {"value": math.inf, "shown": "no limit"}, "low": [-math.inf, math.nan, 1.5]}
    assert _strict(strict_json(record)) == {"pmax": {"value": "inf", "shown": "no limit"},
                                            "low": ["-inf", "nan", 1.5]}


def test_the_answer_sheet_and_the_handout_say_how_to_write_no_limit(tmp_path):
    from shardlab.autograder.publish.render import render_markdown
    cfg = _course(tmp_path)
    assert "with no limit (unbounded) is written inf" in sheet_toml(cfg, "u1")
    student = dict(id="u1", name="Ann", answers=sheet_toml(variant_config(cfg, "u1"), "u1"))
    assert "and `inf` for an answer with no limit" in render_markdown(cfg, False, student=student)


def test_students_drawing_the_same_numbers_and_ids_differing_in_case_are_warned(tmp_path):
    cfg = _course(tmp_path, "16")                  # one choice: every student draws the same numbers
    students = [Student("ann", "Ann", None), Student("Ann", "Ann B", None), Student("bob", "Bob", None)]
    warnings = roster_warnings([(s, variant_config(cfg, s.student_id)) for s in students])
    assert warnings[0].startswith("3 students draw the same numbers on every answer (ann, Ann, bob)")
    assert warnings[1].startswith("student ids 'ann', 'Ann' differ only in case")
    cfg = _course(tmp_path / "..", "16, 32, 48")
    drawn = {s.student_id: variant_config(cfg, s.student_id).pipeline.microbatches for s in students}
    shared = [w for w in roster_warnings([(s, variant_config(cfg, s.student_id)) for s in students])
              if "same numbers" in w]
    assert bool(shared) == (len(set(drawn.values())) < 3)       # warned exactly when two draws coincide


def test_roster_errors_give_the_files_own_line_numbers(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name\n\nu1,Ann\n\n\nbad id,Bob\n")
    with pytest.raises(ShardlabError, match=r"roster .* line 6: student id 'bad id'"):
        read_roster(roster)


def test_a_blank_answers_toml_says_it_has_no_student_id(tmp_path):
    cfg = _course(tmp_path)
    (tmp_path / "answers.toml").write_text(sheet_toml(cfg, ""))
    result = grade_answers(tmp_path, cfg)
    feedback = {p.feedback for p in result.parts}
    assert len(feedback) == 1 and "answers.toml has no student_id" in feedback.pop()


@pytest.mark.parametrize("roster_line, words", [
    ("u1,Ann\n", None),
    ("U1,Ann\n", "'u1' is not on the roster"),
])
def test_answers_for_a_student_not_on_the_roster_warns(tmp_path, roster_line, words):
    _course(tmp_path)
    (tmp_path / "roster.csv").write_text("student_id,name\n" + roster_line)
    done = run_cli("answers", "--config", str(tmp_path / "course.toml"), "--student", "u1", "--json",
                   "--roster", str(tmp_path / "roster.csv"))
    assert done.returncode == 0, done.stderr
    assert _strict(done.stdout)["student_id"] == "u1"
    if words is None:
        assert "warning" not in done.stderr
    else:
        assert words in done.stderr and "did you mean 'U1'" in done.stderr
