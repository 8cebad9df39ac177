"""Student ids the way Gradescope gives them: submission_metadata.json names
each member of a submission by `email`, `id` and `name` only
(https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/),
the course config's [gradescope].student_id_field picks one, and a roster's
email column maps it to the student id that keyed the student's handout.
Every member of a group counts; a submitter missing from the roster loses
the answers parts with a sentence saying so, never the code parts."""
import dataclasses
import json

import pytest

from shardlab.autograder.engine import grading
from shardlab.autograder.engine.answer_sheet import (ROSTER_FILE, Submitters, answer_sheet, grade_answers,
                                                     gradescope_submitters, sheet_toml)
from shardlab.autograder.core.results import PartResult
from shardlab.autograder.engine.variants import check_student_id, variant_config
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.platforms import otter as otter_runtime
from shardlab.autograder.publish.roster import read_roster, roster_for_zip
from shardlab.reference.config import Draw, default_draws, replaced

pytestmark = pytest.mark.pure

SECRET = "correct horse"
ROSTER = "student_id,name,email\ns001,Ada Lovelace,ada@example.edu\ns002,Grace Hopper,Grace@Example.edu\n"
# what the zip must carry for ROSTER: the pairs only, no names, in the roster's order
ROSTER_MAP = "email,student_id\nada@example.edu,s001\nGrace@Example.edu,s002\n"


def _sections(course) -> int:
    """answers.toml has one section per question with numbers to hand in, 1 point each by default."""
    return len(answer_sheet(course)) * course.course.answer_points


# `_course`'s draws, written as a course file's [variants]
VARIANTS_TOML = """[variants]
model.d_model = { min = 12288, max = 20480, step = 128 }
model.d_ff = { min = 39936, max = 66560, step = 128 }
model.num_blocks = { min = 95, max = 157 }
buckets.model_bytes = { min = 40_000_000, max = 1_000_000_000, step = 4_000_000 }
"""


def _course(cfg, field="email"):
    """The shipped course with a secret, its variants drawing every question's numbers: the model
    (default_draws) and the bucket model, so two students share no section of answers.toml."""
    draws = (*default_draws(cfg), Draw("buckets.model_bytes", (), 40_000_000, 1_000_000_000, 4_000_000))
    return dataclasses.replace(replaced(cfg, {"course.secret": SECRET, "gradescope.student_id_field": field}),
                               draws=draws)


def _metadata(path, *users):
    """Gradescope's submission_metadata.json as its page documents it, with these users."""
    path.write_text(json.dumps({
        "id": 123456, "created_at": "2026-11-22T14:22:32.365935-08:00",
        "assignment": {"due_date": "2026-12-01T23:00:00.000000-08:00", "group_size": 2, "group_submission": True,
                       "id": 25828, "course_id": 1234, "late_due_date": None,
                       "release_date": "2026-11-01T00:00:00.000000-08:00", "title": "A2", "total_points": "61.0"},
        "submission_method": "upload", "users": list(users), "previous_submissions": []}))
    return path


def _user(email, uid, name="Someone"):
    return {"email": email, "id": uid, "name": name}


def _file(path, text):
    path.write_text(text)
    return path


def _answers(tmp_path, course, student_id, named):
    """A submission root whose answers.toml holds `student_id`'s own numbers under the id `named`."""
    root = tmp_path / f"sub-{student_id}-{named}-{len(list(tmp_path.iterdir()))}"
    root.mkdir()
    text = sheet_toml(variant_config(course, student_id), student_id, values=True)
    (root / "answers.toml").write_text(text.replace(f'student_id = "{student_id}"', f'student_id = "{named}"'))
    return root


def test_the_documented_fields_name_the_student(cfg, tmp_path):
    # `sid` is not among Gradescope's documented fields: it is never read
    meta = _metadata(tmp_path / "m.json", {**_user("ada@example.edu", 1234), "sid": "s999"})
    assert gradescope_submitters(meta, _course(cfg)) == Submitters(("ada@example.edu",))
    assert gradescope_submitters(meta, _course(cfg, "id")) == Submitters(("1234",))
    # no metadata (grading elsewhere), or `otter run`'s empty one: answers.toml decides
    assert gradescope_submitters(tmp_path / "missing.json", _course(cfg)) is None
    assert gradescope_submitters(_file(tmp_path / "empty.json", "{}"), _course(cfg)) is None
    assert gradescope_submitters(_file(tmp_path / "odd.json", '{"users": "ada"}'), _course(cfg)) is None


def test_without_a_roster_the_email_is_the_student_id(cfg, tmp_path):
    long = "firstname.middlename.lastname+a2@students.engineering.example-university.edu"
    assert len(long) > 64 and check_student_id(long, "x") == long
    meta = _metadata(tmp_path / "m.json", _user(long, 7))
    assert gradescope_submitters(meta, _course(cfg)) == Submitters((long,))
    for bad in ("s001\n", "../x", "a b@example.edu"):
        with pytest.raises(ShardlabError, match="student id"):
            check_student_id(bad, "x")


def test_roster_for_zip_ships_only_what_maps(cfg, tmp_path):
    roster = _file(tmp_path / "roster.csv", ROSTER)
    assert [(s.student_id, s.name, s.email) for s in read_roster(roster)] == [
        ("s001", "Ada Lovelace", "ada@example.edu"), ("s002", "Grace Hopper", "Grace@Example.edu")]
    assert roster_for_zip(_course(cfg), roster) == ROSTER_MAP
    assert roster_for_zip(_course(cfg), None) is None
    # Gradescope's value already is every student id: nothing to ship
    emails_as_ids = "student_id,name\nada@example.edu,Ada\ngrace@example.edu,Grace\n"
    assert roster_for_zip(_course(cfg), _file(tmp_path / "e.csv", emails_as_ids)) is None
    same = "student_id,name,email\nada@example.edu,Ada,ada@example.edu\n"
    assert roster_for_zip(_course(cfg), _file(tmp_path / "same.csv", same)) is None
    assert roster_for_zip(_course(cfg, "id"), _file(tmp_path / "ids.csv", "student_id,name\n1234,Ada\n")) is None
    # ids Gradescope cannot give: nobody maps, so on Gradescope each gets a sentence, not a stranger's numbers
    plain = _file(tmp_path / "plain.csv", "student_id,name\ns001,Ada\n")
    assert roster_for_zip(_course(cfg), plain) == "email,student_id\n"
    assert roster_for_zip(_course(cfg, "id"), roster) == "id,student_id\n"


def test_a_bad_email_column_is_one_error(tmp_path):
    for text, message in (("student_id,name,email\ns001,Ada,\n", "line 2: '' is not an email"),
                          ("student_id,name,email\ns001,Ada,ada\n", "line 2: 'ada' is not an email"),
                          ("student_id,name,email\ns001,A,a@x.edu\ns002,B,A@X.edu\n", "line 3: email 'A@X.edu' "
                                                                                       "appears twice")):
        with pytest.raises(ShardlabError, match=message):
            read_roster(_file(tmp_path / "r.csv", text))


def test_every_member_of_a_group_is_matched(cfg, tmp_path):
    roster_map = _file(tmp_path / ROSTER_FILE, ROSTER_MAP)
    # Gradescope's emails in other letter cases still match
    meta = _metadata(tmp_path / "m.json", _user("ADA@example.edu", 1), _user("grace@example.edu", 2))
    group = gradescope_submitters(meta, _course(cfg), roster_map)
    assert group == Submitters(("s001", "s002"))
    course = _course(cfg)
    for member in ("s001", "s002"):       # each member's own answers.toml grades in full
        result = grade_answers(_answers(tmp_path, course, member, member), course, group)
        assert result.score == result.max_score == _sections(course), [p.feedback for p in result.parts]
    # an id that is no member's: graded as the first member, and said
    result = grade_answers(_answers(tmp_path, course, "s002", "s003"), course, group)
    assert result.score < 1
    assert "answers.toml names 's003'; graded as 's001', one of this group's 2 members" in result.parts[0].feedback
    # one member alone cannot pick a friend's variant
    alone = gradescope_submitters(_metadata(tmp_path / "a.json", _user("ada@example.edu", 1)), course, roster_map)
    result = grade_answers(_answers(tmp_path, course, "s002", "s002"), course, alone)
    assert result.score < 1 and "answers.toml names 's002'; graded as 's001')" in result.parts[0].feedback


def test_not_in_the_roster_is_said_and_the_code_still_grades(cfg, tmp_path, monkeypatch):
    """Through the otter runtime's `graded`, as on Gradescope: the roster file
    beside the shipped course config, the metadata beside the submission.
    The engine's code parts are stubbed full marks (no sandbox in this tier)."""
    source = tmp_path / "autograder" / "source"
    source.mkdir(parents=True)
    config = _file(source / otter_runtime.CONFIG_FILE, f'[course]\nsecret = "{SECRET}"\n' + VARIANTS_TOML)
    _file(source / ROSTER_FILE, ROSTER_MAP)

    class Walls:
        def describe(self):
            return "test walls"
    monkeypatch.setattr(grading, "required_walls", lambda cfg: Walls())
    monkeypatch.setattr(grading, "grade_parts", lambda root, cfg, parts, limits: (
        {p.id: PartResult(p.id, p.title, 1.0, 1.0, "All cases correct.") for p in parts}, "", 0))

    def report_for(email, named):
        monkeypatch.setattr(otter_runtime, "_reports", {})
        root = _answers(tmp_path, _course(cfg), "s001", named)
        (root / "assignments").mkdir()
        meta = _metadata(tmp_path / "autograder" / "submission_metadata.json", _user(email, 9))
        report = otter_runtime.graded({"root": str(root), "config": str(config), "metadata": str(meta),
                                       "report": str(tmp_path / "autograder" / "shardlab" / "report.json")})
        answers = next(q for q in report["questions"] if q["id"] == "answers")
        code = [p for q in report["questions"] if q["id"] != "answers" for p in q["parts"] if p["kind"] == "auto"]
        return answers, code

    answers, code = report_for("mallory@example.edu", "s001")
    assert code and all(p["score"] == p["max_score"] == 1 for p in code)
    assert answers["score"] == 0 and all(
        p["feedback"] == "Not graded: your Gradescope account (email 'mallory@example.edu') is not in the course "
                         "roster, so there is no variant to check these numbers against; ask your instructor to "
                         "add it and regrade." for p in answers["parts"])
    assert otter_runtime.case_failure({"questions": [answers]}, "1.answers").startswith(
        "Not graded: your Gradescope account (email 'mallory@example.edu')")
    answers, code = report_for("Ada@Example.edu", "s001")       # the roster's student: full marks
    assert answers["score"] == answers["max_score"] == _sections(_course(cfg)) and all(p["score"] == 1 for p in code)

