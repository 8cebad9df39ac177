"""Batch grading: one supervised subprocess per submission, results written
as they come, --resume, retries and error rows."""
import csv
import json
import shutil

import pytest

from shardlab.autograder.platforms import batch
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
from helpers import run_cli

pytestmark = pytest.mark.platform


def test_batch_writes_gradebook_results_and_feedback_and_resumes(tmp_path):
    (tmp_path / "good").mkdir()
    shutil.copytree(SOLUTIONS, tmp_path / "good" / "assignments")
    good_zip = shutil.make_archive(str(tmp_path / "alice"), "zip", tmp_path / "good")
    shutil.copytree(ASSIGNMENTS, tmp_path / "bob" / "assignments")
    (tmp_path / "carol").mkdir()                                   # not a submission
    out = tmp_path / "out"
    args = ["grade", good_zip, str(tmp_path / "bob"),
            str(tmp_path / "carol"), "--jobs", "2", "--out", str(out)]
    r = run_cli(*args, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = {row["submission"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    assert set(rows) == {"alice", "bob", "carol"}
    assert rows["alice"]["status"] == "ok" and float(rows["alice"]["total"]) >= float(rows["alice"]["max_score"])
    assert rows["alice"]["1.3"] == "2" and rows["bob"]["1.3"] == "0"
    assert rows["bob"]["status"] == "ok" and rows["bob"]["total"] == "0"
    assert rows["carol"]["status"] == "error" and "holds no assignments/ folder" in rows["carol"]["error"]
    report = json.loads((out / "results" / "alice.json").read_text())
    assert report["score"] >= report["max_score"] > 0
    assert "**Score:" in (out / "feedback" / "alice.md").read_text()
    assert "Could not grade" in (out / "feedback" / "carol.md").read_text()

    before = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    r = run_cli(*args, "--resume", timeout=120)
    assert r.returncode == 0, r.stderr
    assert {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()} == before
    assert len(list(csv.DictReader((out / "gradebook.csv").open()))) == 3


def test_a_grader_that_dies_is_retried_once_then_an_error_row(tmp_path, monkeypatch):
    attempts = {}

    def flaky(path, config_path, env=None):
        attempts[path] = attempts.get(path, 0) + 1
        if path.endswith("dies-once") and attempts[path] == 1 or path.endswith("always-dies"):
            return {"status": "error", "error": "the grader exited with status -9: killed", "retry": True}
        return {"status": "ok", "score": 1.0, "max_score": 1.0, "questions": []}

    monkeypatch.setattr(batch, "grade_in_subprocess", flaky)
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
    monkeypatch.setattr(batch, "grade_in_subprocess",
                        lambda path, config_path, env=None: {"status": "ok", "score": 1.0, "max_score": 2.0,
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
