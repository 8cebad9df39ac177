"""Batch grading: one supervised grader per submission (a fork of a job slot's
grading service), results written
as they come, --resume, retries and error rows."""
import csv
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.results import grader_version
from shardlab.autograder.engine.submission import NO_ASSIGNMENTS
from shardlab.autograder.sandbox import untrusted
from shardlab.autograder.platforms import batch
from shardlab.autograder.platforms.grading_service import GradingService
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
from helpers import assert_one_line_error, run_cli

pytestmark = pytest.mark.platform


def test_batch_writes_gradebook_results_and_feedback_and_resumes(tmp_path):
    (tmp_path / "good").mkdir()
    shutil.copytree(SOLUTIONS, tmp_path / "good" / "assignments")
    good_zip = shutil.make_archive(str(tmp_path / "alice"), "zip", tmp_path / "good")
    shutil.copytree(ASSIGNMENTS, tmp_path / "bob" / "assignments")
    (tmp_path / "carol").write_text("hello")                       # not a submission: neither folder nor zip
    (tmp_path / "dave").mkdir()                                    # the notebook alone: a 0, not an error
    (tmp_path / "dave" / "handout.ipynb").write_text("{}")
    out = tmp_path / "out"
    args = ["grade", good_zip, str(tmp_path / "bob"),
            str(tmp_path / "carol"), str(tmp_path / "dave"), "--jobs", "2", "--out", str(out)]
    r = run_cli(*args, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = {row["submission"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    assert set(rows) == {"alice", "bob", "carol", "dave"}
    assert rows["dave"]["status"] == "ok" and rows["dave"]["total"] == "0" and rows["dave"]["1.3"] == "0"
    assert rows["dave"]["error"] == NO_ASSIGNMENTS                  # why 0, in the row
    assert (out / "feedback" / "dave.md").read_text().count(untrusted.markdown(NO_ASSIGNMENTS)) == 1
    service = GradingService()
    try:
        once = batch.grade_supervised(str(tmp_path / "dave"), None, service)
    finally:
        service.close()
    assert once["status"] == "ok" and not once.get("retry") and once["no_submission"] == NO_ASSIGNMENTS
    assert once["refused"]                              # exit 4: a 0 for what it holds, scored as on Gradescope
    assert rows["alice"]["status"] == "ok" and float(rows["alice"]["total"]) >= float(rows["alice"]["max_score"])
    assert rows["alice"]["1.3"] == "2" and rows["bob"]["1.3"] == "0"
    assert rows["bob"]["status"] == "ok" and rows["bob"]["total"] == "0"
    assert rows["carol"]["status"] == "error" and "neither a folder nor a zip" in rows["carol"]["error"]
    assert rows["carol"]["total"] == ""                 # the instructor's wrong path (exit 2): never a 0
    report = json.loads((out / "results" / "alice.json").read_text())
    assert report["score"] >= report["max_score"] > 0
    assert "**Score:" in (out / "feedback" / "alice.md").read_text()
    assert "Could not grade" in (out / "feedback" / "carol.md").read_text()
    # the class report beside the gradebook (tests/test_publish_class_report.py checks what it counts)
    from shardlab.autograder.publish import class_report
    summary = json.loads((out / class_report.REPORT_JSON).read_text())
    assert summary["submissions"] == 4 and [e["name"] for e in summary["operations"]["error_rows"]] == ["carol"]
    assert [e["name"] for e in summary["operations"]["empty_uploads"]] == ["dave"]
    assert summary["operations"]["grading_seconds"]["measured"] == 3
    assert "Class report" in (out / class_report.REPORT_HTML).read_text()

    before = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    r = run_cli(*args, "--resume", timeout=120)
    assert r.returncode == 0, r.stderr
    after = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    assert {k: v for k, v in after.items() if k != "carol.json"} == {k: v for k, v in before.items()
                                                                      if k != "carol.json"}
    assert after["carol.json"] != before["carol.json"]          # an error row is retried, not kept
    assert len(list(csv.DictReader((out / "gradebook.csv").open()))) == 4      # dave's 0 kept, like any result


def test_a_grader_that_dies_is_retried_once_then_an_error_row(tmp_path, monkeypatch):
    attempts = {}

    def flaky(path, config_path, service, args=None):
        attempts[path] = attempts.get(path, 0) + 1
        if path.endswith("dies-once") and attempts[path] == 1 or path.endswith("always-dies"):
            return {"status": "error", "error": "the grader exited with status -9: killed", "retry": True}
        return {"status": "ok", "score": 1.0, "max_score": 1.0, "questions": []}

    monkeypatch.setattr(batch, "grade_supervised", flaky)
    paths = [str(tmp_path / n) for n in ("dies-once", "always-dies", "fine")]
    results = batch.grade_many(paths, tmp_path / "out", None, jobs=2)
    assert attempts == {paths[0]: 2, paths[1]: 2, paths[2]: 1}
    assert results["dies-once"]["status"] == "ok" and results["fine"]["status"] == "ok"
    assert results["always-dies"]["status"] == "error"
    rows = list(csv.DictReader((tmp_path / "out" / "gradebook.csv").open()))
    assert [r["status"] for r in sorted(rows, key=lambda r: r["submission"])] == ["error", "ok", "ok"]


def test_clashing_names_stay_apart():
    assert batch.submission_names(["a/sub.zip", "b/sub.zip", "c/x y.zip"]) == \
        {"a/sub.zip": "sub", "b/sub.zip": "sub-2", "c/x y.zip": "x_y"}


def test_the_progress_bar_shows_rate_and_time_left_and_lines_only_when_verbose(tmp_path, monkeypatch, capsys):
    """A class of 600 prints one bar, not 600 lines; --verbose adds a line per submission."""
    import sys

    from shardlab.autograder import cli
    monkeypatch.setattr(batch, "grade_supervised",
                        lambda path, config_path, service, args=None: {"status": "ok", "score": 1.0, "max_score": 2.0,
                                                             "questions": []})
    monkeypatch.setattr(cli.console, "width", 200)
    paths = []
    for name in ("ann", "ben", "cat"):
        (tmp_path / name).mkdir()
        paths.append(str(tmp_path / name))

    def grade(*extra) -> str:
        monkeypatch.setattr(sys, "argv", ["shardlab", "grade", *paths, "--out", str(tmp_path / "out"), *extra])
        with pytest.raises(SystemExit) as exit_info:
            cli.main()
            raise SystemExit(0)
        assert exit_info.value.code == 0
        return capsys.readouterr().out

    quiet = grade()
    assert "3/3" in quiet and "/min" in quiet and "left" in quiet
    assert not any(line.startswith(("ann:", "ben:", "cat:")) for line in quiet.splitlines())
    verbose = grade("--verbose")
    assert {line for line in verbose.splitlines() if line.startswith(("ann:", "ben:", "cat:"))} == {
        "ann: 1/2", "ben: 1/2", "cat: 1/2"}
    resumed = grade("--resume")                     # nothing left to grade: the bar says so
    assert "3 resumed" in resumed and "0/0" in resumed


# ---- a batch folder remembers its course (batch.json), and --resume keeps only what still holds ----

TINY = '[course]\nname = "Tiny course"\nquestions = ["buckets"]\n'


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _zip(path, text: str) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("assignments/buckets.py", text)
    return str(path)


@pytest.fixture
def fake_grader(monkeypatch):
    """grade_supervised without a grader: records (submission name, config path) per call;
    the names in `failing` get an error record."""
    calls, failing = [], set()

    def grade(path, config_path, service, args=None):
        calls.append((Path(path).name, config_path))
        if Path(path).name in failing:
            return {"status": "error", "error": "the grader exited with status 3: boom", "retry": False}
        return {"status": "ok", "score": 1.0, "max_score": 2.0, "questions": []}

    monkeypatch.setattr(batch, "grade_supervised", grade)
    return calls, failing


def _class(tmp_path):
    """A folder submission, a zip submission, and the course they are graded against."""
    (tmp_path / "ann" / "assignments").mkdir(parents=True)
    (tmp_path / "ann" / "assignments" / "buckets.py").write_text("x = 1\n")
    course = tmp_path / "tiny.toml"
    course.write_text(TINY)
    return [str(tmp_path / "ann"), _zip(tmp_path / "ben.zip", "x = 2\n")], course


def test_a_batch_folder_records_its_course_and_every_result_its_course_and_bytes(tmp_path, fake_grader,
                                                                               monkeypatch):
    calls, failing = fake_grader
    paths, course = _class(tmp_path)
    failing.add("ben.zip")
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    results = batch.grade_many(paths, out, "tiny.toml")           # a relative --config: made absolute
    stamp = {"name": "Tiny course", "sha256": _sha(course)}
    assert json.loads((out / "batch.json").read_text()) == {"course": stamp, "config": str(course),
                                                            "grader_version": grader_version()}
    assert sorted(calls) == [("ann", str(course)), ("ben.zip", str(course))]
    assert results["ben"]["status"] == "error"                     # an error record says who and against what
    assert results["ben"]["course"] == stamp and results["ben"]["grader_version"] == grader_version()
    assert results["ben"]["submission_sha256"] == _sha(tmp_path / "ben.zip")
    assert results["ann"]["course"] == stamp and len(results["ann"]["submission_sha256"]) == 64
    rows = {r["submission"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert rows["ann"]["course"] == rows["ben"]["course"] == f"Tiny course (sha256 {stamp['sha256'][:12]})"
    assert f"Course: Tiny course (sha256 {stamp['sha256'][:12]})" in (out / "feedback" / "ann.md").read_text()


def test_resume_regrades_what_changed_and_the_error_rows(tmp_path, fake_grader):
    calls, failing = fake_grader
    paths, course = _class(tmp_path)
    (tmp_path / "cat" / "assignments").mkdir(parents=True)
    paths.append(str(tmp_path / "cat"))
    failing.add("cat")
    out = tmp_path / "out"
    batch.grade_many(paths, out, str(course))
    failing.clear()

    def resumed() -> list[str]:
        calls.clear()
        results = batch.grade_many(paths, out, str(course), resume=True)
        assert all(r["status"] == "ok" for r in results.values())
        return sorted(name for name, _ in calls)

    (tmp_path / "ann" / "assignments" / "__pycache__").mkdir()         # not the student's bytes
    (tmp_path / "ann" / "assignments" / "__pycache__" / "buckets.pyc").write_bytes(b"\0")
    _zip(tmp_path / "ben.zip", "x = 3\n")                              # a new upload of ben's
    assert resumed() == ["ben.zip", "cat"]                             # cat's error row is retried
    assert resumed() == []
    (tmp_path / "ann" / "assignments" / "buckets.py").write_text("x = 4\n")
    assert resumed() == ["ann"]

    other = tmp_path / "other.toml"                                    # every student again, another course
    other.write_text(TINY + "seed = 7\n")
    batch.grade_many(paths, out, str(other))
    (tmp_path / "ann" / "assignments" / "buckets.py").write_text("x = 5\n")
    calls.clear()
    batch.grade_many(paths, out, str(other), resume=True)
    assert sorted(name for name, _ in calls) == ["ann"]                # the others were graded against it


def test_a_submissions_digest_is_its_bytes_and_its_files_names(tmp_path):
    def folder(name, files):
        for rel, text in files.items():
            (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / rel).write_text(text)
        return batch.submission_sha256(tmp_path / name)

    same = {"assignments/a.py": "a\n", "assignments/b.py": "b\n"}
    first = folder("one", same)
    assert folder("two", same) == first                                # where it lies is not its bytes
    assert folder("three", {**same, "assignments/__pycache__/a.pyc": "x"}) == first
    assert folder("four", {"assignments/a.py": "a\n", "assignments/c.py": "b\n"}) != first     # a rename
    assert folder("five", {"assignments/a.py": "a\n", "assignments/b.py": "B\n"}) != first     # an edit
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f.py").write_text("1\n")
    (tmp_path / "one" / "linked").symlink_to(tmp_path / "outside")
    linked = batch.submission_sha256(tmp_path / "one")
    assert linked != first
    (tmp_path / "outside" / "f.py").write_text("2\n")                   # links are not followed
    assert batch.submission_sha256(tmp_path / "one") == linked
    zipped = _zip(tmp_path / "z.zip", "x\n")
    assert batch.submission_sha256(zipped) == _sha(zipped)
    assert batch.submission_sha256(tmp_path / "nothing") is None


def test_resume_refuses_another_course_another_grader_or_an_older_folder(tmp_path, fake_grader):
    paths, course = _class(tmp_path)
    out = tmp_path / "out"
    batch.grade_many(paths, out, None, resume=True)                  # nothing to resume: a fresh folder
    assert json.loads((out / "batch.json").read_text())["config"] is None
    other = tmp_path / "other.toml"
    other.write_text(TINY.replace("Tiny", "Other"))
    with pytest.raises(ShardlabError, match=r"graded against another course.*new --out") as err:
        batch.grade_many(paths, out, str(other), resume=True)
    assert "Other course" in str(err.value) and "\n" not in str(err.value)

    batch.grade_many(paths, out, str(course))
    copy = tmp_path / "copy.toml"
    copy.write_bytes(course.read_bytes())
    batch.grade_many(paths, out, str(copy), resume=True)              # the same bytes: the same course
    recorded = json.loads((out / "batch.json").read_text())
    (out / "batch.json").write_text(json.dumps({**recorded, "grader_version": "0.0.1"}))
    with pytest.raises(ShardlabError, match=r"graded by grader 0\.0\.1 and this is grader .*new --out"):
        batch.grade_many(paths, out, str(course), resume=True)

    (out / "batch.json").unlink()                                    # results, no batch.json: an older grader
    with pytest.raises(ShardlabError, match="holds results but no batch.json"):
        batch.grade_many(paths, out, str(course), resume=True)


def test_resuming_against_another_course_is_one_line_from_the_command(tmp_path, fake_grader):
    paths, course = _class(tmp_path)
    batch.grade_many(paths, tmp_path / "out", str(course))
    other = tmp_path / "other.toml"
    other.write_text(TINY + "seed = 7\n")
    done = run_cli("grade", *paths, "--out", str(tmp_path / "out"), "--resume", "--config", str(other), timeout=120)
    assert_one_line_error(done, "graded against another course")
    assert json.loads((tmp_path / "out" / "batch.json").read_text())["course"]["sha256"] == _sha(course)


# ---- a re-grade into a folder holding a batch merges into it or refuses, and says which ----

def _rows(out) -> list[str]:
    return sorted(r["submission"] for r in csv.DictReader((out / "gradebook.csv").open()))


def _written_names(out) -> set[str]:
    return {line[3:] for f in (out / "written").glob("*.md") for line in f.read_text().splitlines()
            if line.startswith("## ")}


def test_a_regrade_of_some_students_merges_into_the_batch_and_says_so(tmp_path, fake_grader):
    calls, _ = fake_grader
    paths, course = _class(tmp_path)
    out = tmp_path / "out"
    batch.grade_many(paths, out, str(course))
    assert _rows(out) == ["ann", "ben"]
    first_ben = (out / "results" / "ben.json").read_text()
    calls.clear()
    notes = []
    results = batch.grade_many(paths[:1], out, str(course), say=notes.append)   # ann re-graded alone
    assert calls == [("ann", str(course))]
    assert _rows(out) == ["ann", "ben"] and sorted(results) == ["ann", "ben"]
    assert (out / "results" / "ben.json").read_text() == first_ben              # ben's row kept as graded
    assert _written_names(out) == {"ann", "ben"}
    assert len(notes) == 1 and notes[0].startswith(f"merging into {out}") and "all 2" in notes[0]


def test_a_regrade_against_another_course_refuses_to_drop_rows_or_regrades_them_all(tmp_path, fake_grader):
    calls, _ = fake_grader
    paths, course = _class(tmp_path)
    out = tmp_path / "out"
    batch.grade_many(paths, out, str(course))
    other = tmp_path / "other.toml"
    other.write_text(TINY.replace("Tiny", "Other"))
    before = (out / "gradebook.csv").read_text()
    calls.clear()
    with pytest.raises(ShardlabError, match=r"does not grade 1 of its 2 submissions \(ben\).*new --out") as err:
        batch.grade_many(paths[:1], out, str(other))
    assert "\n" not in str(err.value) and "Tiny course" in str(err.value)
    assert calls == [] and (out / "gradebook.csv").read_text() == before      # refused before grading
    notes = []
    batch.grade_many(paths, out, str(other), say=notes.append)                 # every student: graded again
    assert _rows(out) == ["ann", "ben"] and "grades all 2 of its submissions again" in notes[0]
    assert json.loads((out / "batch.json").read_text())["course"]["name"] == "Other course"


def test_a_folder_of_an_older_grader_is_merged_into_only_by_grading_it_all(tmp_path, fake_grader):
    paths, course = _class(tmp_path)
    out = tmp_path / "out"
    batch.grade_many(paths, out, str(course))
    (out / "batch.json").unlink()
    with pytest.raises(ShardlabError, match=r"no readable batch.json.*\(ben\)"):
        batch.grade_many(paths[:1], out, str(course))
    assert _rows(out) == ["ann", "ben"]


def test_the_command_says_it_merges(tmp_path, fake_grader):
    paths, course = _class(tmp_path)
    batch.grade_many(paths, tmp_path / "out", str(course))
    (tmp_path / "cat" / "assignments").mkdir(parents=True)
    done = run_cli("grade", str(tmp_path / "cat"), "--out", str(tmp_path / "out"), "--config", str(course),
                   timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"merging into {tmp_path / 'out'}" in done.stderr and "all 3" in done.stderr
    assert _rows(tmp_path / "out") == ["ann", "ben", "cat"]
