"""Re-grading a class from Gradescope's "Export Submissions" archive
(platforms/gradescope_export.py): every submission graded, every group member
given a row of gradescope_scores.csv, each result stamped with the grader that
made it (and, inside the otter zip, the zip's digest), bad archives refused
with one line."""
import csv
import hashlib
import json
import zipfile
from importlib import metadata

import pytest

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.platforms import gradescope_export as gx
from shardlab.autograder.platforms import otter as otter_runtime
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
from helpers import assert_one_line_error, run_cli

# The shipped course's points, as README's "Gradescope" section states them (77; the solutions
# 78 / 77): question 1 14, question 2 18 plus the 1-point bonus 2.11, question 3 12 (3 (d) is
# graded by hand), question 4 13, question 5 20 (5.1-5.8: 11, 5.9-5.11: 4 + 3 + 2). The stubs
# earn nothing.
MAX_POINTS = 14 + 18 + 12 + 13 + 20
SOLUTIONS_SCORE = MAX_POINTS + 1

# Gradescope's layout: Ruby-symbol keys, a quoted :sid:, :history: entries without submitters
METADATA = """\
---
submission_1001:
  :submitters:
  - :name: Ada Lovelace
    :sid: '0012'
    :email: ada@example.edu
  - :name: Grace Hopper
    :sid: '0034'
    :email: grace@example.edu
  :created_at: 2026-11-20 18:04:11.120339000 Z
  :score: 41.0
  :status: processed
  :results:
    score: 41.0
    tests: []
    output: graded
  :history: []
submission_1002:
  :submitters:
  - :name: Alan Turing
    :sid: '0056'
    :email: alan@example.edu
  :created_at: 2026-11-21 09:30:00.000000000 Z
  :score: 0.0
  :status: processed
  :results:
    score: 0.0
    tests: []
  :history:
  - :submitters: []
    :created_at: 2026-11-20 08:00:00.000000000 Z
    :score: 0.0
    :id: 999
"""
ROOT = "assignment_77_export/"


def _add_tree(zf: zipfile.ZipFile, folder, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            zf.write(path, prefix + path.relative_to(folder).as_posix())


def _export_zip(path, metadata_text=METADATA, submissions=True):
    """An export as Gradescope lays it out: the group's kit at its folder's top,
    the other kit one folder down (the starter kit's folder, as zipped), macOS noise."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(ROOT + "submission_metadata.yml", metadata_text)
        zf.writestr("__MACOSX/" + ROOT + "._submission_metadata.yml", b"\0")
        if submissions:
            _add_tree(zf, SOLUTIONS, ROOT + "submission_1001/assignments/")
            _add_tree(zf, ASSIGNMENTS, ROOT + "submission_1002/starter-kit/assignments/")
            zf.writestr(ROOT + "submission_1002/starter-kit/README.md", "the kit\n")
    return path


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.mark.platform
def test_a_class_is_regraded_from_its_export_and_every_member_gets_a_row(tmp_path):
    export = _export_zip(tmp_path / "export.zip")
    out = tmp_path / "out"
    args = ["grade", "--gradescope-export", str(export), "--out", str(out), "--jobs", "2"]
    r = run_cli(*args, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "(3 students, 2 submissions)" in r.stdout

    rows = _rows(out / "gradescope_scores.csv")
    assert rows[0] == ["Name", "SID", "Email", "Total Score", "Max Points", "Status", "Submission ID",
                       "Gradescope Score", "Differs", "Reason"]
    differs = f"regraded {SOLUTIONS_SCORE} vs Gradescope 41: score differs"    # its :results: has no tests
    assert sorted(rows[1:]) == sorted([
        ["Ada Lovelace", "0012", "ada@example.edu", str(SOLUTIONS_SCORE), str(MAX_POINTS), "Graded", "1001",
         "41", "yes", differs],
        ["Grace Hopper", "0034", "grace@example.edu", str(SOLUTIONS_SCORE), str(MAX_POINTS), "Graded", "1001",
         "41", "yes", differs],
        ["Alan Turing", "0056", "alan@example.edu", "0", str(MAX_POINTS), "Graded", "1002", "0", "no", ""],
    ])
    assert "2 students' scores differ from Gradescope's" in r.stdout

    version = metadata.version("shardlab")
    group = json.loads((out / "results" / "submission_1001.json").read_text())
    assert group["score"] == SOLUTIONS_SCORE and group["grader_version"].startswith(version)
    assert group["submission"] == f"{export}:{ROOT}submission_1001/"
    assert [s["email"] for s in group["gradescope"]["submitters"]] == ["ada@example.edu", "grace@example.edu"]
    assert group["gradescope"]["submission_id"] == "1001" and group["gradescope"]["gradescope_score"] == 41.0
    assert group["gradescope"]["export_sha256"] == hashlib.sha256(export.read_bytes()).hexdigest()
    book = {row["submission"]: row for row in csv.DictReader((out / "gradebook.csv").open())}
    assert set(book) == {"submission_1001", "submission_1002"}
    assert all(row["grader_version"].startswith(version) and row["autograder_zip_sha256"] == ""
               for row in book.values())
    assert not list(out.glob(".gradescope-export-*"))          # the split export is gone

    before = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    r = run_cli(*args, "--resume", timeout=120)
    assert r.returncode == 0, r.stderr
    assert {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()} == before
    assert _rows(out / "gradescope_scores.csv") == rows


@pytest.mark.pure
def test_the_metadata_maps_each_folder_to_all_its_submitters():
    subs = gx.parse_metadata(METADATA, "export.zip")
    assert [(s.key, s.id) for s in subs] == [("submission_1001", "1001"), ("submission_1002", "1002")]
    assert [(m.name, m.sid, m.email) for m in subs[0].submitters] == [
        ("Ada Lovelace", "0012", "ada@example.edu"), ("Grace Hopper", "0034", "grace@example.edu")]
    assert subs[0].score == 41.0 and subs[0].created_at.startswith("2026-11-20T18:04:11")
    assert len(subs[1].submitters) == 1                     # :history:'s empty submitters are not rows


@pytest.mark.pure
def test_an_unpacked_export_is_graded_in_place(tmp_path):
    with zipfile.ZipFile(_export_zip(tmp_path / "export.zip")) as zf:
        zf.extractall(tmp_path / "unpacked")
    with gx.open_export(tmp_path / "unpacked", tmp_path / "out") as export:
        assert export.paths == {k: str(tmp_path / "unpacked" / ROOT / k)
                                for k in ("submission_1001", "submission_1002")}
        assert export.sha256 is None and export.refused == {}
    assert gx.is_export(tmp_path / "unpacked") and gx.is_export(tmp_path / "export.zip")
    assert not gx.is_export(SOLUTIONS)


@pytest.mark.pure
def test_the_scores_never_turn_a_grader_failure_into_a_students_number():
    subs = gx.parse_metadata(METADATA + METADATA.replace("1001", "1003").replace("1002", "1004")
                             .replace("example.edu", "example.org").replace("---\n", ""), "x")
    ok = {"status": "ok", "score": 20.0, "max_score": 57.0, "internal_errors": []}
    results = {
        "submission_1001": ok,
        "submission_1002": {**ok, "internal_errors": [{"part": "2.7", "error": "harness"}]},
        "submission_1003": {"status": "error", "error": "unpacks to more than 50 MiB", "refused": True},
        "submission_1004": {"status": "error", "error": "grading took longer than 900 s"},
    }
    text, unscored = gx.scores_csv(subs, results)
    rows = {(row["Email"], row["Submission ID"]): row for row in csv.DictReader(text.splitlines())}
    assert len(rows) == 6                                      # every member of every submission
    cells = {key: (row["Total Score"], row["Max Points"], row["Status"]) for key, row in rows.items()}
    assert cells[("grace@example.edu", "1001")] == ("20", "57", "Graded")
    assert cells[("alan@example.edu", "1002")] == ("", "57", "Ungraded")      # internal error: regrade
    assert cells[("ada@example.org", "1003")] == ("0", "57", "Graded")         # not gradable: 0, as on Gradescope
    assert cells[("alan@example.org", "1004")] == ("", "57", "Ungraded")       # the grader failed
    assert unscored == ["submission_1002", "submission_1004"]


class _Answering:
    """A grading service that answers every grading with one child's exit status and output."""

    def __init__(self, returncode, stdout="", stderr=""):
        self.reply = {"returncode": returncode, "stdout": stdout, "stderr": stderr}

    def run(self, argv, timeout):
        return dict(self.reply)


@pytest.mark.pure
@pytest.mark.parametrize("returncode, stderr", [
    (2, "error: the course config /c.toml is missing"),             # the instructor's set-up, not the upload
    (2, "error: grading refused: the course requires the full jail"),
    (3, "internal error: KeyError: 'x' (set SHARDLAB_DEBUG=1 for a traceback)"),
    (-9, ""),                                                        # the child killed
])
def test_a_child_graders_failure_is_an_error_row_never_a_zero(returncode, stderr):
    """Only a report printed by the child scores; a usage or config error (exit 2), an internal
    error (3) or a killed child is an error row with its reason, unscored in the re-grade's CSV."""
    from shardlab.autograder.platforms import batch
    row = batch.grade_supervised("sub", None, _Answering(returncode, "", stderr))
    assert row["status"] == "error" and not row.get("refused") and f"status {returncode}" in row["error"]
    assert row["retry"] == (returncode != 2)                       # a config error is the same again
    subs = gx.parse_metadata(METADATA, "x")
    text, unscored = gx.scores_csv(subs, {s.key: row for s in subs})
    assert {r["Total Score"] for r in csv.DictReader(text.splitlines())} == {""}
    assert unscored == [s.key for s in subs]


@pytest.mark.pure
def test_a_refused_upload_is_a_graded_zero_with_its_sentence():
    """Exit 4 with the report of 0 and its sentence (`errors.SubmissionRefused`): an ok row, refused, scored 0."""
    from shardlab.autograder.platforms import batch
    sentence = "submission refused: assignments/x.py is a symbolic link (only plain files and folders are accepted)"
    report = {"score": 0.0, "max_score": 57.0, "questions": [], "no_submission": sentence, "internal_errors": []}
    row = batch.grade_supervised("sub", None, _Answering(4, json.dumps(report) + "\n"))
    assert row["status"] == "ok" and row["refused"] and row["no_submission"] == sentence and not row.get("retry")
    subs = gx.parse_metadata(METADATA, "x")
    text, unscored = gx.scores_csv(subs, {s.key: row for s in subs})
    assert {(r["Total Score"], r["Status"]) for r in csv.DictReader(text.splitlines())} == {("0", "Graded")}
    assert unscored == []


@pytest.mark.pure
@pytest.mark.parametrize("text, message", [
    ("submission_1: [unclosed\n", "is not valid YAML at line"),
    ("- a list\n", "holds no submissions"),
    ("submission_1:\n  :score: 1.0\n", "submission_1 in submission_metadata.yml has no :submitters: list"),
    ("submission_1:\n  :submitters:\n  - :sid: '1'\n    :email: a@x\n"
     "submission_2:\n  :submitters:\n  - :sid: '2'\n    :email: a@x\n", "a@x is a submitter of both"),
    ("../../etc:\n  :submitters: []\n", "unexpected entry '../../etc'"),
])
def test_metadata_not_shaped_like_gradescopes_is_one_line(text, message):
    with pytest.raises(ShardlabError) as err:
        gx.parse_metadata(text, "export.zip")
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.pure
def test_a_folder_the_metadata_lists_must_be_in_the_export(tmp_path):
    export = _export_zip(tmp_path / "export.zip", METADATA.replace("submission_1002", "submission_1005"))
    with pytest.raises(ShardlabError, match="lists submission_1005 in submission_metadata.yml but holds "
                                            "no folder submission_1005/"):
        with gx.open_export(export, tmp_path / "out"):
            pass


def _bad_archives(tmp_path):
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("submission_1/assignments/memory.py", "x = 1\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "notzip.zip").write_text("hello")
    export = _export_zip(tmp_path / "export.zip", submissions=False)
    broken = _export_zip(tmp_path / "broken.zip", "submission_1: [unclosed\n")
    out = ["--out", str(tmp_path / "out")]
    return {
        "not an export": (["grade", "--gradescope-export", str(other), *out], "holds no submission_metadata.yml"),
        "no metadata": (["grade", "--gradescope-export", str(tmp_path / "empty"), *out],
                        "holds no submission_metadata.yml"),
        "malformed YAML": (["grade", "--gradescope-export", str(broken), *out], "is not valid YAML"),
        "not a zip": (["grade", "--gradescope-export", str(tmp_path / "notzip.zip"), *out],
                      "neither a folder nor a zip"),
        "export as a PATH": (["grade", str(export), *out], "--gradescope-export " + str(export)),
        "without --out": (["grade", "--gradescope-export", str(export)], "needs --out DIR"),
    }


@pytest.mark.platform
@pytest.mark.parametrize("case", ["not an export", "no metadata", "malformed YAML", "not a zip",
                                  "export as a PATH", "without --out"])
def test_a_bad_archive_is_one_line_and_nonzero(tmp_path, case):
    args, message = _bad_archives(tmp_path)[case]
    assert_one_line_error(run_cli(*args), message)
    assert not (tmp_path / "out" / "gradescope_scores.csv").exists()


@pytest.mark.platform
def test_a_gradescope_report_names_its_grader_and_its_autograder_zip(tmp_path, autograder_zip, monkeypatch):
    digest = gx.autograder_digest(autograder_zip)
    with zipfile.ZipFile(autograder_zip) as zf:
        assert all(gx.in_autograder_digest(info.filename) for info in zf.infolist() if not info.is_dir())
        zf.extractall(tmp_path / "ag" / "source")
    source = tmp_path / "ag" / "source"
    (source / "mamba_install.sh").write_text("setup.sh's download\n")           # what setup adds
    (source / "shardlab-cache").mkdir()
    (source / "shardlab-cache" / "expected.pkl").write_bytes(b"\0")
    (source / "tests" / "__pycache__").mkdir()
    (source / "tests" / "__pycache__" / "q1.cpython-311.pyc").write_bytes(b"\0")
    assert digest is not None and gx.autograder_digest(source) == digest

    (tmp_path / "upload").mkdir()                              # no assignments/: graded at once, a 0
    monkeypatch.setattr(otter_runtime, "_reports", {})
    handle = {"root": str(tmp_path / "upload"), "config": str(source / otter_runtime.CONFIG_FILE),
              "report": str(tmp_path / "ag" / otter_runtime.REPORT_FILE)}
    report = otter_runtime.graded(handle)
    on_disk = json.loads((tmp_path / "ag" / otter_runtime.REPORT_FILE).read_text())
    assert report == on_disk and report["no_submission"] and report["score"] == 0
    assert on_disk["autograder_zip_sha256"] == digest
    assert on_disk["grader_version"].startswith(metadata.version("shardlab"))
    assert on_disk["course"]["sha256"] == hashlib.sha256((source / "shardlab-course.toml").read_bytes()).hexdigest()

    (source / "shardlab-course.toml").write_text((source / "shardlab-course.toml").read_text() + "\n# edited\n")
    assert gx.autograder_digest(source) != digest              # another zip, another digest
