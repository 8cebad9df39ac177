"""A re-grade identifies each submission's students as Gradescope did
(platforms/gradescope_export.py, `shardlab grade --gradescope-export --roster`):
by the export's submitters, through the roster map the autograder zip ships,
so answers.toml's student_id only chooses among a group's members; and
gradescope_scores.csv flags every row whose score differs from the score
Gradescope recorded in the export."""
import csv
import json
import zipfile

import pytest

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.engine.answer_sheet import (ROSTER_FILE, SHEET_TITLE, Submitters, answer_sheet,
                                                     gradescope_submitters, sheet_toml)
from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.platforms import gradescope_export as gx
from shardlab.autograder.platforms.otter import question_file_title
from shardlab.autograder.publish.roster import roster_for_zip
from shardlab.autograder.publish.stubs import ASSIGNMENTS
from shardlab.reference.config import load_config, replaced
from helpers import run_cli

SECRET = "correct horse"
# one question (fast to grade), and a variant that draws its numbers: no two students share them
COURSE = f"""[course]
secret = "{SECRET}"
questions = ["buckets"]

[variants]
buckets.model_bytes = {{ min = 40_000_000, max = 1_000_000_000, step = 4_000_000 }}
"""
ROSTER = ("student_id,name,email\ns001,Ada Lovelace,ada@example.edu\ns002,Grace Hopper,grace@example.edu\n"
          "s003,Alan Turing,alan@example.edu\n")
BUCKETS = question_file_title("4", "DDP gradient bucket sizes")
ANSWERS = question_file_title("answers", SHEET_TITLE)
# Ada hands in alone; Grace and Alan as a group. Gradescope's scores are set by hand: 1 for Ada (as if
# answers.toml had picked Grace's variant), 1 for the group (Alan's answers, Alan's variant: right)
METADATA = f"""\
submission_2001:
  :submitters:
  - :name: Ada Lovelace
    :sid: '0012'
    :email: ada@example.edu
  :created_at: 2026-11-20 18:04:11.120339000 Z
  :score: 1.0
  :results:
    score: 1.0
    tests:
    - name: "{BUCKETS}"
      score: 0.0
    - name: "{ANSWERS}"
      score: 1.0
submission_2002:
  :submitters:
  - :name: Grace Hopper
    :sid: '0034'
    :email: Grace@Example.edu
  - :name: Alan Turing
    :sid: '0056'
    :email: alan@example.edu
  :created_at: 2026-11-21 09:30:00.000000000 Z
  :score: 1.0
"""


def _course(tmp_path):
    path = tmp_path / "course.toml"
    path.write_text(COURSE)
    return path, load_config(path)


def _numbers(cfg, student_id, named):
    """answers.toml holding `student_id`'s own numbers under the id `named`."""
    return sheet_toml(variant_config(cfg, student_id), named, values=True)


@pytest.mark.platform
def test_a_regrade_grades_each_submitters_own_variant_and_flags_what_differs(tmp_path):
    course, cfg = _course(tmp_path)
    sheets = {sid: answer_sheet(variant_config(cfg, sid))["q4"] for sid in ("s001", "s002", "s003")}
    assert all(sheets["s001"][k].value != sheets["s002"][k].value for k in sheets["s001"])   # no number shared
    (tmp_path / "roster.csv").write_text(ROSTER)
    export = tmp_path / "export.zip"
    with zipfile.ZipFile(export, "w") as zf:
        zf.writestr("assignment_9_export/submission_metadata.yml", METADATA)
        for key, answers in (("submission_2001", _numbers(cfg, "s002", "s002")),    # a classmate's, named
                             ("submission_2002", _numbers(cfg, "s003", "s003"))):   # a member's, named
            zf.writestr(f"assignment_9_export/{key}/answers.toml", answers)
            for path in sorted(ASSIGNMENTS.rglob("*.py")):      # the stubs: every code part 0, fast
                zf.write(path, f"assignment_9_export/{key}/assignments/{path.relative_to(ASSIGNMENTS)}")
    out = tmp_path / "out"
    r = run_cli("grade", "--gradescope-export", str(export), "--out", str(out), "--jobs", "2",
                "--roster", str(tmp_path / "roster.csv"), "--config", str(course), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "1 student's score differs from Gradescope's" in r.stdout

    # Ada's answers.toml names Grace: graded against Ada's own variant, where none of Grace's 4 numbers is
    # right: 0 of the answers part's 1 point, 0 of the stubs' 13; the group's names Alan, a member: 1
    ada = json.loads((out / "results" / "submission_2001.json").read_text())
    answers = next(q for q in ada["questions"] if q["id"] == "answers")
    assert ada["score"] == 0 and ada["max_score"] == 13 + 1
    assert "answers.toml names 's002'; graded as 's001'" in answers["parts"][0]["feedback"]
    group = json.loads((out / "results" / "submission_2002.json").read_text())
    assert group["score"] == 1, [q["parts"][0]["feedback"] for q in group["questions"] if q["id"] == "answers"]

    with (out / "gradescope_scores.csv").open(newline="") as f:
        rows = {row["Email"]: row for row in csv.DictReader(f)}
    cells = {email: (row["Total Score"], row["Max Points"], row["Gradescope Score"], row["Differs"])
             for email, row in rows.items()}
    assert cells == {"ada@example.edu": ("0", "14", "1", "yes"),
                     "Grace@Example.edu": ("1", "14", "1", "no"), "alan@example.edu": ("1", "14", "1", "no")}
    assert rows["ada@example.edu"]["Reason"] == ("regraded 0 vs Gradescope 1: question answers 0 vs 1 "
                                                 "(answers graded as 's001')")
    assert rows["alan@example.edu"]["Reason"] == ""


@pytest.mark.pure
def test_the_childs_metadata_names_the_submitters_as_gradescope_did(tmp_path):
    """The submission_metadata.json each child grader reads, through the same
    `gradescope_submitters` as on Gradescope: the roster map `build --roster` ships,
    or, without one, the email itself."""
    course, cfg = _course(tmp_path)
    (tmp_path / "roster.csv").write_text(ROSTER)
    roster_map = roster_for_zip(cfg, tmp_path / "roster.csv")
    export = tmp_path / "export"
    for key in ("submission_2001", "submission_2002"):
        (export / key).mkdir(parents=True)
    (export / gx.METADATA).write_text(METADATA)
    with gx.open_export(export, tmp_path / "out") as opened:
        args = opened.grading_args(cfg, roster_map)
        meta = {key: args[opened.paths[key]][1] for key in ("submission_2001", "submission_2002")}
        assert args[opened.paths["submission_2002"]][2:] == ["--roster-map", str(opened.workdir / ROSTER_FILE)]
        assert json.loads(open(meta["submission_2002"]).read())["users"] == [
            {"email": "Grace@Example.edu", "name": "Grace Hopper"},
            {"email": "alan@example.edu", "name": "Alan Turing"}]
        mapped = opened.workdir / ROSTER_FILE
        assert gradescope_submitters(meta["submission_2002"], cfg, mapped) == Submitters(("s002", "s003"))
        assert gradescope_submitters(meta["submission_2001"], cfg, mapped) == Submitters(("s001",))
        assert gradescope_submitters(meta["submission_2001"], cfg) == Submitters(("ada@example.edu",))
        workdir = opened.workdir
    assert not workdir.exists()                                # removed with the export


@pytest.mark.pure
def test_ids_the_export_does_not_carry_come_from_the_roster_or_the_regrade_stops(tmp_path):
    course, cfg = _course(tmp_path)
    by_id = replaced(cfg, {"gradescope.student_id_field": "id"})
    sub = gx.parse_metadata(METADATA, "x")[1]
    with pytest.raises(ShardlabError, match="export names submitters by name, SID and email only"):
        gx.check_identifiable(by_id, None)
    gx.check_identifiable(cfg, None)                           # emails: the export has them
    meta = gx.gradescope_metadata(sub, {"grace@example.edu": "4411"})
    assert meta["users"] == [{"email": "Grace@Example.edu", "name": "Grace Hopper", "id": "4411"},
                             {"email": "alan@example.edu", "name": "Alan Turing"}]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(meta))
    assert gradescope_submitters(path, by_id) == Submitters(("4411",))


def _ok(score, answers):
    return {"status": "ok", "score": score, "max_score": 14.0, "internal_errors": [],
            "questions": [{"id": "4", "title": "DDP gradient bucket sizes", "score": score - answers},
                          {"id": "answers", "title": SHEET_TITLE, "score": answers, "student_id": "s001"}]}


@pytest.mark.pure
def test_each_row_says_whether_and_why_it_differs_from_gradescope():
    subs = gx.parse_metadata(METADATA + METADATA.replace("2001", "2003").replace("2002", "2004")
                             .replace("xample.edu", "xample.org").replace("  :score: 1.0\n", "", 1), "x")
    assert subs[2].score is None and subs[2].created_at.startswith("2026-11-20T18:04:11")
    results = {"submission_2001": _ok(5.5, 0.5),           # Gradescope: 0 + 1 per question
               "submission_2002": _ok(1.0, 1.0),            # Gradescope: 1
               "submission_2003": _ok(1.0, 1.0),            # the export has no score for it
               "submission_2004": {"status": "error", "error": "grading took longer than 900 s"}}
    text, _ = gx.scores_csv(subs, results, question_file_title)
    rows = list(csv.DictReader(text.splitlines()))
    assert list(rows[0])[-3:] == list(gx.FLAG_COLUMNS)
    flags = {(row["Email"], row["Submission ID"]): (row["Gradescope Score"], row["Differs"], row["Reason"])
             for row in rows}
    assert flags[("ada@example.edu", "2001")] == (
        "1", "yes", "regraded 5.5 vs Gradescope 1: question 4 5 vs 0; question answers 0.5 vs 1 "
                    "(answers graded as 's001')")
    assert flags[("alan@example.edu", "2002")] == ("1", "no", "")
    assert flags[("ada@example.org", "2003")] == ("", "", "the export holds no Gradescope score")
    assert flags[("alan@example.org", "2004")] == ("1", "", "not regraded (see Status and gradebook.csv)")
    assert gx.differing_students(text) == 1
    # a score within half a hundredth of Gradescope's is the same score; without its tests, just "differs"
    sub = subs[1]
    assert gx.scores_csv([sub], {sub.key: _ok(1.004, 1.0)}, question_file_title)[0].splitlines()[1].endswith(",1,no,")
    assert gx.scores_csv([sub], {sub.key: _ok(2.0, 1.0)}, question_file_title)[0].splitlines()[1].endswith(
        ",yes,regraded 2 vs Gradescope 1: score differs")


@pytest.mark.pure
def test_a_resume_with_another_roster_is_refused(tmp_path):
    (tmp_path / "results").mkdir()
    record = gx.parse_metadata(METADATA, "x")[0].record("label", None, None)
    (tmp_path / "results" / "submission_2001.json").write_text(json.dumps(record))
    gx.check_roster_resumable(tmp_path, None)
    with pytest.raises(ShardlabError, match="graded with another --roster"):
        gx.check_roster_resumable(tmp_path, "email,student_id\nada@example.edu,s001\n")
